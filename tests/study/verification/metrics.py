"""User workloads' metrics for the verification tests."""

from __future__ import annotations

from autotune.study.objectives import METRIC_INDEX, study_objectives

#: A user workload's metric: a validation loss, lower is better.
VAL_LOSS = study_objectives("val_loss", "minimize")[METRIC_INDEX]
#: A user workload's metric that is maximized but is not a top-1 accuracy.
F1 = study_objectives("f1", "maximize")[METRIC_INDEX]
