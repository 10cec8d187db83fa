"""Workloads: a model, its data, loss and metric behind one small protocol.

The built-in ``cnn`` and ``mlp`` (:mod:`autotune.workloads.builtin`) and a user's own model go
through the same door: a reference resolved in the trial process (:func:`load_workload`),
checked before a study opens (:func:`check_workload`); its model traced for the memory
estimate (:func:`profile_workload`).
"""

from autotune.workloads._loader import (
    LoadedWorkload,
    check_workload,
    default_evaluate,
    load_workload,
    smallest_knobs,
)
from autotune.workloads._profile import profile_workload
from autotune.workloads._protocol import MetricDirection, Workload

__all__ = [
    "LoadedWorkload",
    "MetricDirection",
    "Workload",
    "check_workload",
    "default_evaluate",
    "load_workload",
    "profile_workload",
    "smallest_knobs",
]
