"""The machine: its fingerprint, what its device can do, its memory model, its precision
screen and the GPUs each study worker owns.

- :mod:`._fingerprint`: :class:`MachineFingerprint`, what makes two measurements comparable,
  probed here and nowhere else (the study's record of it: :func:`autotune.study.search.check_study_hardware`).
- :mod:`._capabilities`: :class:`DeviceCapabilities`, the facts the feasibility rules read,
  plus the peak FLOP/s MFU is measured against. The mock device's simulated machines
  (:mod:`autotune.core.hardware.simulated`) are read the same way, through their simulated NVML.
- :mod:`._memory`: :func:`estimate_memory` predicts a trial's peak memory;
  :data:`MEMORY_ESTIMATE_TOLERANCE` is its accuracy.
  The rules a trial must pass, its memory among them, sit on the study side
  (:mod:`autotune.study.feasibility`): they trace the trial's model, which this floor never does.
- :mod:`._workers`: :func:`worker_share`, the GPUs each worker of a study owns.
- :mod:`._screen`: the precision screen (:func:`screen_precisions`): a precision whose peak is
  below ``advanced.hardware.min_peak_ratio`` of fp32's is left out of a new study, which stores the
  screen and keeps it when resumed (:func:`study_precision_screen`).
"""

from __future__ import annotations

from autotune.core.hardware._capabilities import (
    CUDA_GRAPH_MODES,
    DeviceCapabilities,
    detect_capabilities,
    precision_reason,
    resolve_device,
)
from autotune.core.hardware._fingerprint import (
    MachineFingerprint,
    cpu_model_name,
    detect_fingerprint,
    fingerprint_mismatch,
    physical_cpu_cores,
)
from autotune.core.hardware._memory import (
    CPU_RUNTIME_BYTES,
    CUDA_RUNTIME_BYTES,
    MEMORY_ESTIMATE_TOLERANCE,
    MOCK_RUNTIME_BYTES,
    MemoryEstimate,
    estimate_memory,
)
from autotune.core.hardware._screen import (
    PrecisionScreen,
    screen_precisions,
    study_precision_screen,
)
from autotune.core.hardware._workers import (
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
    "STUDY_PID_VARIABLE",
    "STUDY_WORKERS_VARIABLE",
    "DeviceCapabilities",
    "MachineFingerprint",
    "MemoryEstimate",
    "PrecisionScreen",
    "cpu_model_name",
    "detect_capabilities",
    "detect_fingerprint",
    "estimate_memory",
    "fingerprint_mismatch",
    "physical_cpu_cores",
    "precision_reason",
    "resolve_device",
    "screen_precisions",
    "study_precision_screen",
    "study_root_pid",
    "study_workers",
    "worker_share",
]
