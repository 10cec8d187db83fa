"""FLOPs, peaks and model FLOP utilization (MFU); the model profile the memory estimate uses.

- :mod:`._peaks`: :data:`PUBLISHED_PEAKS`, NVIDIA's published dense peak FLOP/s per
  precision.
- :mod:`._benchmark`: :func:`measure_matmul_peak` measures a peak where the device is not in
  the table (the CPU included), cheaply and once per process.
- :mod:`._counting`: :func:`count_training_flops` counts the FLOPs of one forward and backward
  pass of a real batch. The trial process calls it once, after its timed steps.
- :mod:`._profile`: :func:`profile_model` traces the tensors a model it is handed saves for
  backward, per sample, for :func:`autotune.core.hardware.estimate_memory` (the workload side hands
  it the model: :func:`autotune.trial.workloads.profile_workload`); :func:`count_parameters`, a
  model's trainable parameters, which every door records.
- :mod:`._mfu`: MFU = achieved FLOP/s / peak FLOP/s for the trial's precision
  (:func:`mfu_figures`; ``autotune.study.api`` adds it to every measurement of a study);
  :func:`flops_text` writes a FLOP/s figure for display.
"""

from __future__ import annotations

from autotune.core.flops._benchmark import measure_matmul_peak
from autotune.core.flops._counting import (
    StepFlopCounter,
    TrainingFlops,
    count_training_flops,
)
from autotune.core.flops._mfu import (
    blended_peak_flops_per_s,
    flops_text,
    mfu_figures,
    step_extras,
    trial_extras,
)
from autotune.core.flops._peaks import PUBLISHED_PEAKS, published_peak
from autotune.core.flops._profile import ModelProfile, count_parameters, profile_model

__all__ = [
    "PUBLISHED_PEAKS",
    "ModelProfile",
    "StepFlopCounter",
    "TrainingFlops",
    "blended_peak_flops_per_s",
    "count_parameters",
    "count_training_flops",
    "flops_text",
    "measure_matmul_peak",
    "mfu_figures",
    "profile_model",
    "published_peak",
    "step_extras",
    "trial_extras",
]
