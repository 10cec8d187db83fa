"""Workloads: a model, its data, loss and metric behind one small protocol.

The built-in ``cnn`` and ``mlp`` (:mod:`autotune.trial.workloads.builtin`) and a user's own model go
through the same door: a reference resolved in the trial process (:func:`load_workload`),
checked before a study opens (:func:`check_workload`); its model traced for the memory
estimate (:func:`profile_workload`).
"""

from autotune.trial.workloads._loader import (
    LoadedWorkload,
    check_workload,
    load_workload,
)
from autotune.trial.workloads._profile import profile_workload
from autotune.trial.workloads._protocol import MetricDirection, Workload

__all__ = [
    "LoadedWorkload",
    "MetricDirection",
    "Workload",
    "check_workload",
    "load_workload",
    "profile_workload",
]
