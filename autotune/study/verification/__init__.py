"""Verified verdicts: which finalists to re-measure, and what their re-measurement says.

A search ranks configurations by single trials, whose figures are noisier than many of the
differences they rank (one configuration measured in five fresh processes spanned 9.4k-12.0k
samples/s on a 2-core CPU). So no single trial makes a claim to the user. When a study
reaches its trials, three steps decide:

1. The *screen* (:func:`select_finalists`): search trials faster than the (warm) baseline
   trial whose metric is not below the baseline's by more than the tolerance plus
   ``advanced.verify.screen_z`` standard errors of the difference (:func:`screen_allowance`,
   Agresti-Caffo on the validation counts; 3 x the tolerance for a metric that is not a
   proportion). With none, the ending is "nothing to verify" and :func:`closest_trial` names
   the trial that came closest.
   The finalists are chosen for two *answers* apart (:func:`changes_model`): the
   *same-model* answer changes only the tuner's knobs (precision, memory format, compile,
   workers, batch size with its learning rate, GPU count); the *model-change* answer also
   changes the model's knobs. Up to K finalists each.
2. The *race* (:func:`race_survivors`): the baseline and every finalist over
   ``advanced.verify.race_rounds`` rounds of fresh processes; each lane's survivor (an answer,
   its accuracy trained or inherited with the paired check) is its fastest
   finalist that measured in every round, kept the run's limits, beat the baseline, and
   passed the screen on its pooled validation counts. The race only picks.
3. The *confirmation*: the baseline and the survivors over ``verify.rounds`` rounds with
   fresh seeds, alone making the claims (racing, then a confirmatory test: SMAC's
   intensification and F-Race, so that picking the winner does not inflate the claim). Each
   round rotates the order. A survivor qualifies when every round measured it, its verified
   figures keep ``constraints.*``, its paired speedup's 95 % confidence interval lies above
   1.0 (:func:`speedup_ci95`, Kalibera & Jones), and its accuracy is shown *non-inferior*:
   the paired metric difference's 95 % interval lies entirely above -tolerance
   (:func:`is_non_inferior`, ICH E9). The recommendation (the headline) is the faster of the
   answers that qualify; a survivor that is faster but not non-inferior is a *trade-off*,
   shown in one line, never the headline. With none, the ending is "verified: not faster".
   A trained survivor is stopped early for futility (:func:`confirmation_stops`): after each
   round, once the spread of its paired metric differences so far says the planned rounds
   could not show it non-inferior, its remaining rounds are not run.

Evidence follows the math (:mod:`autotune.study.evidence`): a finalist that inherits the
baseline's accuracy (identical or the same computation, checked in the search) is timed in
each round, not trained, and its paired K-step check against the same round's baseline
stands for the accuracy; when every finalist is one, the baseline is timed too and the
confirmation runs at least ``advanced.verify.timing_rounds`` rounds. Under a cost cap
(``budget.full_runs``), :func:`fit_budget` fits the plan within what the search left.

In a time-to-accuracy study (``objective=time_to_accuracy``) each run trains to the study's
target; the finalists are feasible trials that reached it sooner than the baseline; a round
that misses the target counts at the seconds it trained (censored); a configuration's time is
the geometric mean over rounds (MLPerf's aggregate beside it, :func:`mlperf_time_to_accuracy_s`);
its speedup is how many times sooner than the baseline it reached the target (paired per
round), and it qualifies when it reached the target in every round and that speedup's 95 %
confidence interval lies above 1.0 (the target is the quality bar: no tolerance applies).

The metric is the study's (:func:`autotune.study.objectives.objectives_of_study`): top-1 accuracy
(maximized) for the built-in workloads, or a user workload's own, e.g. ``val_loss``
(minimized). The tolerance is ``verify.accuracy_tolerance_pt`` (:func:`within_tolerance`): for
accuracy, points below the baseline (0.5 = 0.005); for any other metric, a share of the
baseline's value in percent, in the metric's worse direction (0.5: a ``val_loss`` at most
0.5 % above the baseline's; an ``f1`` at most 0.5 % below it).

Everything here is pure: the runs happen in :func:`autotune.study.api.verify_study`, the rows live in
the results tables (:mod:`autotune.study.storage`), and every output (terminal, report, dashboard,
``best``, export) reads the same :class:`VerificationSummary`.

The package by job: :mod:`._metric` (the metric, its tolerance and the screen's width),
:mod:`._finalists` (the screen, the closest trial, the seeds), :mod:`._speedup` (the paired
speedup's and differences' confidence intervals), :mod:`._verdict` (one configuration's
verified figures and the run's limits), :mod:`._throughput` (the verdicts of a throughput
verification), :mod:`._to_target` (the verdicts and headline of a time-to-accuracy
verification), :mod:`._summary` (the race's survivor, the summary, the endings and the
recommendation) and :mod:`._load` (the verdict of a stored study).
"""

from __future__ import annotations

from autotune.study.verification._budget import fit_budget
from autotune.study.verification._finalists import (
    inherits_accuracy,
    likeliest_finalist,
    model_change_finalists,
    round_seeds,
    select_finalists,
)
from autotune.study.verification._load import load_verification, summarize_for_study
from autotune.study.verification._metric import (
    ACCURACY,
    difference_number,
    difference_unit,
    is_non_inferior,
    study_metric,
    tolerance_text,
)
from autotune.study.verification._speedup import (
    mean_difference_ci95,
    mlperf_time_to_accuracy_s,
    speedup_ci95,
)
from autotune.study.verification._summary import (
    ENDING_WORDS,
    VerificationSummary,
    confirmation_schedule,
    confirmation_stops,
    race_survivors,
    summarize_verification,
)
from autotune.study.verification._verdict import CandidateVerdict

__all__ = [
    "ACCURACY",
    "ENDING_WORDS",
    "CandidateVerdict",
    "VerificationSummary",
    "confirmation_schedule",
    "confirmation_stops",
    "difference_number",
    "difference_unit",
    "fit_budget",
    "inherits_accuracy",
    "is_non_inferior",
    "likeliest_finalist",
    "load_verification",
    "mean_difference_ci95",
    "mlperf_time_to_accuracy_s",
    "model_change_finalists",
    "race_survivors",
    "round_seeds",
    "select_finalists",
    "speedup_ci95",
    "study_metric",
    "summarize_for_study",
    "summarize_verification",
    "tolerance_text",
]
