"""The machine: its fingerprint, what its device can do, its memory model, and the rules a
trial must pass.

- :mod:`._fingerprint`: :class:`MachineFingerprint`, what makes two measurements comparable,
  probed here and nowhere else (the study's record of it: :func:`autotune.study.check_study_hardware`).
- :mod:`._capabilities`: :class:`DeviceCapabilities`, the facts the feasibility rules read,
  plus the peak FLOP/s MFU is measured against. The mock device's simulated machines
  (:mod:`autotune.hardware.simulated`) are read the same way, through their simulated NVML.
- :mod:`._memory`: :func:`estimate_memory` predicts a trial's peak memory;
  :data:`MEMORY_ESTIMATE_TOLERANCE` is its accuracy.
- :mod:`._feasibility`: the feasibility rules, the one place that decides whether a
  configuration can run (:func:`restrict_space` before a study, :func:`trial_infeasibility_reason`
  before each trial).
- :mod:`._workers`: :func:`worker_share`, the GPUs each worker of a study owns.
- :mod:`._screen`: the precision screen (:func:`screen_precisions`): a precision whose peak is
  below ``advanced.hardware.min_peak_ratio`` of fp32's is left out of a new study, which stores the
  screen and keeps it when resumed (:func:`study_precision_screen`).
"""

from __future__ import annotations

from autotune.hardware._capabilities import (
    DeviceCapabilities,
    capabilities_from_fingerprint,
    detect_capabilities,
    resolve_device,
)
from autotune.hardware._feasibility import (
    CUDA_GRAPH_MODES,
    estimate_trial_memory_or_none,
    fits_memory_with_margin,
    infeasibility_reason,
    restrict_space,
    trial_infeasibility_reason,
)
from autotune.hardware._fingerprint import (
    MachineFingerprint,
    cpu_model_name,
    detect_fingerprint,
    fingerprint_mismatch,
    physical_cpu_cores,
)
from autotune.hardware._memory import (
    CPU_RUNTIME_BYTES,
    CUDA_RUNTIME_BYTES,
    MEMORY_ESTIMATE_TOLERANCE,
    MOCK_RUNTIME_BYTES,
    MemoryEstimate,
    estimate_memory,
    estimate_trial_memory,
)
from autotune.hardware._screen import (
    REFERENCE_PRECISION,
    PrecisionScreen,
    screen_precisions,
    study_precision_screen,
)
from autotune.hardware._workers import (
    STUDY_PID_VARIABLE,
    STUDY_WORKERS_VARIABLE,
    study_root_pid,
    study_workers,
    worker_share,
)

__all__ = [
    "CPU_RUNTIME_BYTES",
    "CUDA_GRAPH_MODES",
    "CUDA_RUNTIME_BYTES",
    "MEMORY_ESTIMATE_TOLERANCE",
    "MOCK_RUNTIME_BYTES",
    "REFERENCE_PRECISION",
    "STUDY_PID_VARIABLE",
    "STUDY_WORKERS_VARIABLE",
    "DeviceCapabilities",
    "MachineFingerprint",
    "MemoryEstimate",
    "PrecisionScreen",
    "capabilities_from_fingerprint",
    "cpu_model_name",
    "detect_capabilities",
    "detect_fingerprint",
    "estimate_memory",
    "estimate_trial_memory",
    "estimate_trial_memory_or_none",
    "fingerprint_mismatch",
    "fits_memory_with_margin",
    "infeasibility_reason",
    "physical_cpu_cores",
    "resolve_device",
    "restrict_space",
    "screen_precisions",
    "study_precision_screen",
    "study_root_pid",
    "study_workers",
    "trial_infeasibility_reason",
    "worker_share",
]
