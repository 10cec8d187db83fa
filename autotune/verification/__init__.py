"""Verified verdicts: which finalists to re-measure, and what their re-measurement says.

A search ranks configurations by single trials, whose figures are noisier than many of the
differences they rank (one configuration measured in five fresh processes spanned 9.4k-12.0k
samples/s on a 2-core CPU). So no single trial makes a claim to the user. When a study
reaches its trials, the baseline and up to K finalists are re-run in R *rounds* of fresh
processes, interleaved (baseline, c1..cK, baseline, c1..cK, ...), each round with its own
training seed: SMAC's intensification and MLPerf's repeated runs, in small. The
*recommendation* is the fastest verified candidate whose mean validation metric is within the
tolerance of the baseline's and whose speedup's 95 % confidence interval lies above 1.0.

In a time-to-accuracy study (``objective=time_to_accuracy``) each run trains to the study's
target; the finalists are feasible trials that reached it sooner than the baseline, a
candidate's time is the MLPerf-style aggregate over rounds (:func:`mlperf_time_to_accuracy_s`),
its speedup is how many times sooner than the baseline it reached the target (paired per
round), and it qualifies when it reached the target in every round and that speedup's 95 %
confidence interval lies above 1.0 (the target is the quality bar: no tolerance applies).

The metric is the study's (:func:`autotune.objectives.objectives_of_study`): top-1 accuracy
(maximized) for the built-in workloads, or a user workload's own, e.g. ``val_loss``
(minimized). The tolerance is ``verify.accuracy_tolerance_pt`` (:func:`within_tolerance`): for
accuracy, points below the baseline (0.5 = 0.005); for any other metric, a share of the
baseline's value in percent, in the metric's worse direction (0.5: a ``val_loss`` at most
0.5 % above the baseline's; an ``f1`` at most 0.5 % below it).

Everything here is pure: the runs happen in :func:`autotune.api.verify_study`, the rows live in
the results tables (:mod:`autotune.storage`), and every output (terminal, report, dashboard,
``best``, export) reads the same :class:`VerificationSummary`.

The package by job: :mod:`._metric` (the metric and its tolerance), :mod:`._finalists` (what
to re-measure, with which seeds), :mod:`._speedup` (the paired speedup's confidence
interval), :mod:`._verdict` (one configuration's verified figures), :mod:`._to_target` (the
verdicts and headline of a time-to-accuracy verification), :mod:`._summary` (the verdicts and
the recommendation) and :mod:`._load` (the verdict of a stored study).
"""

from __future__ import annotations

from autotune.verification._finalists import (
    SEED_STRIDE,
    closest_trial,
    round_seeds,
    select_finalists,
)
from autotune.verification._load import load_verification, summarize_for_study
from autotune.verification._metric import (
    ACCURACY,
    DEFAULT_SCREEN_Z,
    NON_PROPORTION_SCREEN_FACTOR,
    NOTHING_QUALIFIES,
    agresti_caffo_se,
    metric_allowance,
    nothing_qualifies,
    passes_screen,
    screen_allowance,
    study_metric,
    tolerance_text,
    trial_metric,
    within_tolerance,
)
from autotune.verification._speedup import (
    MLPERF_DROP_MIN_ROUNDS,
    is_valid_figure,
    mean_difference_ci95,
    mlperf_time_to_accuracy_s,
    speedup_ci95,
)
from autotune.verification._summary import (
    ENDING_WORDS,
    Ending,
    VerificationSummary,
    race_survivor,
    summarize_verification,
)
from autotune.verification._verdict import CandidateVerdict, changed_knobs

__all__ = [
    "ACCURACY",
    "DEFAULT_SCREEN_Z",
    "ENDING_WORDS",
    "MLPERF_DROP_MIN_ROUNDS",
    "NON_PROPORTION_SCREEN_FACTOR",
    "NOTHING_QUALIFIES",
    "SEED_STRIDE",
    "CandidateVerdict",
    "Ending",
    "VerificationSummary",
    "agresti_caffo_se",
    "changed_knobs",
    "closest_trial",
    "is_valid_figure",
    "load_verification",
    "mean_difference_ci95",
    "metric_allowance",
    "mlperf_time_to_accuracy_s",
    "nothing_qualifies",
    "passes_screen",
    "race_survivor",
    "round_seeds",
    "screen_allowance",
    "select_finalists",
    "speedup_ci95",
    "study_metric",
    "summarize_for_study",
    "summarize_verification",
    "tolerance_text",
    "trial_metric",
    "within_tolerance",
]
