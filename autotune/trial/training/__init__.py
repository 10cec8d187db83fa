"""Build, train and evaluate one :class:`~autotune.core.config.TrialConfig` in this process.

This package runs inside a trial's child process (see :mod:`autotune.study.search._launcher`), one
:func:`run_rank` call per DDP rank. It never sees the study: it takes a frozen config and
returns a :class:`~autotune.trial.measure.Measurement`.

The model, its data, loss and metric come from the trial's workload, imported here by
reference (:func:`autotune.trial.workloads.load_workload`): the model knobs ->
``workload.build_model(**knobs)``; ``workload.datasets()`` -> the training and validation
data. Parts:

- ``_setup``: what both loops share (loader, model, optimizer, schedule, autocast, the
  optimizer step, the evaluation) and how the tuner's knobs map onto PyTorch.
- ``_throughput``: ``objective=throughput``, the fixed budget with its timed windows.
- ``_to_target``: ``objective=time_to_accuracy``, training until the validation metric
  meets the target.
"""

from autotune.trial.training._hf import HFTrial
from autotune.trial.training._lightning import LightningTrial
from autotune.trial.training._loop import LoopTrial
from autotune.trial.training._rank import compile_cache_figures, run_rank

__all__ = [
    "HFTrial",
    "LightningTrial",
    "LoopTrial",
    "compile_cache_figures",
    "run_rank",
]
