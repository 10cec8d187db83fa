"""The verdict: the race's survivor, each configuration's confirmed figures, and the one
recommendation, or why there is none.

A verification has two stages (:class:`~autotune.study.storage.records.VerificationPlan`). The
*race* (stage A) re-runs the baseline and every finalist over a few rounds and keeps one
survivor: the fastest finalist that measured in every round, kept the run's limits, passed
the accuracy screen on its pooled validation counts, and beat the baseline. Picking the
fastest of K noisy estimates favours the luckiest (the winner's curse; with K = 4 and the
claim made on the same rounds, a family-wise false-claim rate up to ~10 %), so the
*confirmation* (stage B) re-runs the baseline and the survivor alone over fresh seeds, and
only its rounds make a claim. This is racing as in SMAC's intensification (F. Hutter, H. Hoos
and K. Leyton-Brown, "Sequential Model-Based Optimization for General Algorithm
Configuration", LION 5, 2011) and in F-Race (M. Birattari et al., GECCO 2002), followed by a
confirmatory test on fresh data.

Two modes, as the study's (:func:`autotune.study.objectives.objective_mode`):

- ``throughput``: as in :mod:`._throughput`: the survivor is recommended when every
  confirmation round measured it, the run's limits hold on the verified figures, the mean of
  its paired metric difference (its metric minus the same round's baseline's) is within the
  tolerance, and the 95 % confidence interval of its paired speedup lies above 1.0 (finite).
  Where that difference's interval reaches past the tolerance, the claim says "accuracy
  unresolved at n=..." instead of "the same accuracy".
- ``time_to_accuracy``: as in :mod:`._to_target`: the target reached in every round, and the
  interval of how many times sooner above 1.0.

Three endings, worded so that a user can tell them apart (:attr:`VerificationSummary.ending`):
a verified recommendation; ``verified: not faster`` (the survivor failed its confirmation, or
no finalist survived the race; the figures say why); ``nothing to verify`` (no search trial
passed the screen; the closest one is named).
"""

from __future__ import annotations

import shlex
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Literal

from autotune.core.units import MIB
from autotune.study.objectives import Objective, ObjectiveMode
from autotune.study.storage.records import (
    ANSWERS,
    LANES,
    Answer,
    Lane,
    VerificationPlan,
    VerificationRecord,
    VerificationRun,
)
from autotune.study.verification._metric import (
    ACCURACY,
    DEFAULT_SCREEN_Z,
    difference_number,
    difference_unit,
    metric_allowance,
    tolerance_text,
    within_tolerance,
)
from autotune.study.verification._speedup import (
    mean_difference_ci95,
    projected_half_width,
    rounds_to_resolve,
)
from autotune.study.verification._throughput import throughput_verdict
from autotune.study.verification._to_target import to_target_headline, to_target_verdict
from autotune.study.verification._verdict import (
    ANSWER_WORDS,
    CandidateVerdict,
    Stage,
    metric_versus,
)

__all__ = [
    "DEFAULTS_WORDS",
    "ENDING_WORDS",
    "YOUR_BASELINE_WORDS",
    "Ending",
    "VerificationSummary",
    "race_survivors",
    "summarize_verification",
]

#: What every output calls the baseline when the space names none (``baseline:``).
DEFAULTS_WORDS = "PyTorch's defaults"
#: ... and when it names one.
YOUR_BASELINE_WORDS = "your baseline"

#: How a verification ended (:attr:`VerificationSummary.ending`).
Ending = Literal["recommended", "not_faster", "nothing_to_verify", "incomplete"]
#: Each ending in the few words of ``autotune ls`` and the report's badge.
ENDING_WORDS: dict[Ending, str] = {
    "recommended": "recommended",
    "not_faster": "verified: not faster",
    "nothing_to_verify": "nothing to verify",
    "incomplete": "incomplete",
}


@dataclass(frozen=True)
class VerificationSummary:
    """What one verification of a study found; every output shows this and nothing else as
    its claim.

    Attributes:
        study_name: the Optuna study name.
        number: the verification's number within the study (1, 2, ...).
        rounds: confirmation rounds planned.
        seeds: the training seed of each confirmation round.
        accuracy_tolerance_pt: accuracy points a candidate may give up (for another metric,
            percent of the baseline's value: :func:`metric_allowance`).
        complete: every planned run has a row.
        runs_done: planned runs with a row.
        runs_planned: the race's runs plus (1 + confirmed) x rounds (while the race is
            running, as if it will leave a survivor).
        simulated: the figures come from the mock device (SIMULATED).
        baseline: the baseline's confirmed figures (stage B; in a plan without a race, its
            only stage).
        candidates: the confirmed configurations' verdicts (each lane's survivor; every
            finalist in a plan without a race), each with its ``answer``.
        recommended: the headline: the faster of the two answers' confirmed candidates that
            qualify (verifiably faster and shown non-inferior; in a time-to-accuracy
            verification: the highest ``speedup``, i.e. verifiably soonest), or None.
        metric: the study's validation metric (name, direction, display format).
        objective: the study's mode, ``throughput`` or ``time_to_accuracy``.
        target: the quality target of a time-to-accuracy study (a value of ``metric``);
            None in a throughput study.
        search_baseline_time_to_accuracy_s: the baseline trial's time to accuracy in the
            search (time-to-accuracy studies), what the headline states when no finalist was
            re-run; None when unknown or missed.
        finalists: the trial numbers that passed the screen and entered the race.
        race_seeds: the seed of each race round (empty: no race).
        race: the race's verdicts, the baseline's first (stage A; empty without a race).
        survivors: each lane's race survivor (lanes without one left out).
        baseline_words: what the outputs call the baseline: ``your baseline`` when the space
            named one (``baseline:``), else ``PyTorch's defaults``.
        screen_z: the screen's z (None: a verification stored before the screen).
        closest: with no finalist, the search trial that came closest to the screen, in
            words (:func:`~autotune.study.verification._finalists.closest_trial`).
        notes: lines about this verification's run (e.g. a resumed plan whose settings differ
            from the ones asked for now).
        busy_runs: runs that count (the last attempt of each round and configuration)
            measured on a busy machine: other processes used more than
            ``advanced.measure.max_other_cpu_share`` of the CPUs over their timed windows.
        busy_reruns: busy runs measured again (``advanced.verify.busy_rerun_budget`` bounds them).
        busiest_share: the largest share other processes used in a busy run that counts.
        run_s: wall seconds of its runs, every attempt (its cost; the mock's simulated
            seconds; 0 for rows stored before runs recorded their seconds).
        runs: its runs, every attempt.
        short_evidence: where a short-evidence study's runs were evaluated (``after 30 of
            the budget's 600 steps``; :attr:`autotune.core.config.BudgetSettings.short_evidence`):
            its non-inferiority holds there, not over the budget; ``""`` otherwise.
    """

    study_name: str
    number: int
    rounds: int
    seeds: tuple[int, ...]
    accuracy_tolerance_pt: float
    complete: bool
    runs_done: int
    runs_planned: int
    simulated: bool
    baseline: CandidateVerdict
    candidates: tuple[CandidateVerdict, ...]
    recommended: CandidateVerdict | None
    metric: Objective = ACCURACY
    objective: ObjectiveMode = "throughput"
    target: float | None = None
    search_baseline_time_to_accuracy_s: float | None = None
    finalists: tuple[int, ...] = ()
    race_seeds: tuple[int, ...] = ()
    race: tuple[CandidateVerdict, ...] = ()
    survivors: Mapping[Lane, int] = field(default_factory=dict)
    baseline_words: str = DEFAULTS_WORDS
    screen_z: float | None = None
    closest: str | None = None
    notes: tuple[str, ...] = ()
    busy_runs: int = 0
    busy_reruns: int = 0
    busiest_share: float | None = None
    run_s: float = 0.0
    runs: int = 0
    short_evidence: str = ""

    @property
    def is_time_to_accuracy(self) -> bool:
        """A time-to-accuracy verification (``objective == "time_to_accuracy"``)."""
        return self.objective == "time_to_accuracy"

    @property
    def ending(self) -> Ending:
        """How it ended: ``recommended``, ``not_faster`` (re-measured, and no claim holds),
        ``nothing_to_verify`` (no trial passed the screen) or ``incomplete``."""
        if not self.complete:
            return "incomplete"
        if self.recommended is not None:
            return "recommended"
        if not self.finalists and not self.candidates:
            return "nothing_to_verify"
        return "not_faster"

    def target_text(self) -> str:
        """The target as the headline says it: ``98.0 %`` for accuracy, ``val_loss 1.2``
        otherwise; ``the target`` when the study recorded none."""
        if self.target is None:
            return "the target"
        if self.metric.is_accuracy:
            return f"{100 * self.target:.1f} %"
        return f"{self.metric.name} {self.metric.format(self.target, 1)}"

    def tolerance_text(self) -> str:
        """The tolerance in words (``0.5 pt``; ``0.5 % of the baseline's val_loss``), and
        where the metric was measured under short evidence (``0.5 pt after 30 of the
        budget's 600 steps``)."""
        text = tolerance_text(self.metric, self.accuracy_tolerance_pt)
        return f"{text} {self.short_evidence}" if self.short_evidence else text

    def stages_text(self) -> str:
        """How the claim was measured: ``confirmed over 5 rounds after a 2-round race of 4
        finalists`` (``verified over 3 rounds`` without a race)."""
        if not self.race_seeds:
            return f"verified over {self.rounds} rounds"
        finalists = len(self.finalists)
        return (
            f"confirmed over {self.rounds} rounds after a {len(self.race_seeds)}-round race "
            f"of {finalists} finalist{'s' if finalists != 1 else ''}"
        )

    def metric_difference_text(self, verdict: CandidateVerdict, *, with_n: bool = True) -> str:
        """The paired metric difference as measured: ``98.42 % vs 98.50 % (difference
        -0.08 pt, 95 % CI -0.31 to +0.15 pt, n=2,000)``; ``with_n=False`` leaves out the
        validation size (where the sentence already says it)."""
        base = self.baseline.val_metric_mean
        if verdict.val_metric_mean is None or base is None:
            return "metric not measured"
        n = f", n={verdict.val_samples:,}" if with_n and verdict.val_samples else ""
        values = metric_versus(self.metric, verdict.val_metric_mean, base)
        if verdict.metric_diff_mean is None:
            return f"{values}{n}"
        number, unit = partial(difference_number, self.metric), difference_unit(self.metric)
        diff = f"difference {number(verdict.metric_diff_mean)}{unit}"
        if verdict.metric_diff_ci95 is not None:
            low, high = verdict.metric_diff_ci95
            diff += f", 95 % CI {number(low)} to {number(high)}{unit}"
        return f"{values} ({diff}{n})"

    def accuracy_text(self) -> str:
        """The recommendation's accuracy verdict in a few words, for ``ls`` and tables: ``same
        accuracy (non-inferior): -0.13 pt (-0.31 to +0.05)``; ``target reached in every
        round`` (time to accuracy); ``""`` without a recommendation."""
        rec = self.recommended
        if rec is None:
            return ""
        if self.is_time_to_accuracy:
            return "target reached in every round"
        same = "accuracy" if self.metric.is_accuracy else self.metric.name
        if rec.inherits_accuracy:
            return f"same {same} (inherited: {rec.evidence})"
        where = f" {self.short_evidence}" if self.short_evidence else ""
        if rec.metric_diff_mean is None:
            return f"same {same} (non-inferior{where})"
        return f"same {same} (non-inferior{where}): {self._difference_figures(rec)}"

    def end_to_end_text(self, verdict: CandidateVerdict) -> str:
        """The speedup over a whole run of the budget, compilation included, when it is
        verifiably below 1 (its 95 % interval below 1.0x) while the steady state's is above:
        ``0.83x end to end over the budget (95 % CI 0.70-0.99x), compilation included:
        WARNING: slower over a run this short ...``; ``""`` otherwise."""
        e2e, ci = verdict.end_to_end_speedup, verdict.end_to_end_ci95
        if e2e is None or ci is None or not ci[1] < 1.0:
            return ""
        return (
            f"{e2e:.2f}x end to end over the budget (95 % CI {ci[0]:.2f}-{ci[1]:.2f}x), "
            "compilation included: WARNING: slower over a run this short; the steady-state "
            "speedup pays for the compilation only over a longer run"
        )

    def same_metric_text(self, verdict: CandidateVerdict) -> str:
        """Why a qualifying candidate's metric is the baseline's, with its evidence: ``the
        same (non-inferior within 0.5 pt): 98.42 % vs 98.50 % (...)``, or for one that
        inherits it ``inherited, not re-trained: the same computation (the paired check over
        20 steps held in each of 10 rounds ...)``."""
        if verdict.inherits_accuracy:
            return f"inherited, not re-trained: {verdict.evidence} ({verdict.check_text})"
        return (
            f"the same (non-inferior within {self.tolerance_text()}): "
            f"{self.metric_difference_text(verdict)}"
        )

    def _difference_figures(self, verdict: CandidateVerdict) -> str:
        """The paired metric difference and its interval: ``-0.44 pt (-0.68 to -0.20 pt)``;
        ``""`` when it was not measured."""
        if verdict.metric_diff_mean is None:
            return ""
        number, unit = partial(difference_number, self.metric), difference_unit(self.metric)
        text = f"{number(verdict.metric_diff_mean)}{unit}"
        if verdict.metric_diff_ci95 is not None:
            low, high = verdict.metric_diff_ci95
            text += f" ({number(low)} to {number(high)}{unit})"
        return text

    def busy_text(self) -> str | None:
        """What the verdict says when runs that count were measured on a busy machine (as
        pyperf warns that a result "may be unreliable"): ``2 of 14 runs were measured on a
        busy machine (other processes used up to 48 % of the CPUs; 2 re-runs spent): the
        figures may be unreliable``; None when none was."""
        if not self.busy_runs:
            return None
        share = (
            f"other processes used up to {100 * self.busiest_share:.0f} % of the CPUs"
            if self.busiest_share is not None
            else "other processes used the CPUs"
        )
        reruns = f"; {self.busy_reruns} re-run{'s' if self.busy_reruns != 1 else ''} spent"
        return (
            f"{self.busy_runs} of {self.runs_done} runs "
            f"{'was' if self.busy_runs == 1 else 'were'} measured on a busy machine "
            f"({share}{reruns if self.busy_reruns else ''}): the figures may be unreliable"
        )

    def answer(self, answer: Answer) -> CandidateVerdict | None:
        """The confirmed candidate of one answer (its race survivor, or in a plan without a
        race the fastest of its finalists), or None when it has none."""
        mine = [c for c in self.candidates if c.answer == answer]
        return max(mine, key=lambda c: (c.qualifies, c.speedup or 0.0), default=None)

    @property
    def trade_offs(self) -> tuple[CandidateVerdict, ...]:
        """Confirmed candidates that are verifiably faster than the recommendation (than the
        baseline, without one) but not shown non-inferior: shown, never the headline."""
        rec = self.recommended
        floor = (rec.speedup or 0.0) if rec is not None else 0.0
        return tuple(c for c in self.candidates if c.trade_off and (c.speedup or 0.0) > floor)

    def trade_off_text(self, verdict: CandidateVerdict) -> str:
        """One trade-off in one line: ``a model change (depth 3->2): 2.17x (1.96-2.40x) at
        -0.44 pt (-0.68 to -0.20 pt)``."""
        words = "a model change" if verdict.answer == "model_change" else "a system change"
        figures = self._speed_and_difference(verdict)
        return f"{words} ({verdict.changes_text()}): {figures}, trial {verdict.trial_number}"

    def _speed_and_difference(self, verdict: CandidateVerdict) -> str:
        """``2.17x (1.96-2.40x) at -0.44 pt (-0.68 to -0.20 pt)``."""
        speed = f"{verdict.speedup or 0.0:.2f}x" + (
            f" ({verdict.speedup_ci95[0]:.2f}-{verdict.speedup_ci95[1]:.2f}x)"
            if verdict.speedup_ci95
            else ""
        )
        figures = self._difference_figures(verdict)
        return speed + (f" at {figures}" if figures else "")

    def headline(self) -> str:
        """The one-line verdict: the recommendation, or which of the other endings and why;
        then the faster trade-off a model change offers, where one was confirmed; followed by
        :meth:`busy_text` when runs were measured on a busy machine."""
        busy = self.busy_text()
        trade = "; ".join(self.trade_off_text(v) for v in self.trade_offs)
        return (
            self._headline()
            + (f"; trade-off, not recommended: {trade}" if trade and self.complete else "")
            + (f"; WARNING: {busy}" if busy else "")
        )

    def verdict_block(self) -> list[str]:
        """The verdict as a short block for the terminal, one line each: change, speed,
        accuracy, memory, then each trade-off and each answer's outcome; the one-line form
        (:meth:`headline`) is for logs and ``ls``.

        Returns:
            ``["change    precision fp32->bf16, ...", "speed     2.17x faster ...", ...]``;
            for the other endings, the headline as the first line and each answer's
            outcome after it.
        """
        prefix = "SIMULATED (mock device): " if self.simulated else ""
        rec = self.recommended
        lines: list[str] = []
        if rec is None or self.is_time_to_accuracy or not self.complete:
            lines.append(self._headline())
        else:
            assert rec.speedup is not None and rec.speedup_ci95 is not None
            low, high = rec.speedup_ci95
            same = "accuracy" if self.metric.is_accuracy else self.metric.name
            lines += [
                f"{prefix}verified: {ANSWER_WORDS[rec.answer]} answer, trial {rec.trial_number}",
                f"change    {rec.changes_text()}",
                f"speed     {rec.speedup:.2f}x faster than {self.baseline_words} "
                f"(95 % CI {low:.2f}-{high:.2f}x, {self.stages_text()})",
                f"{same:<9} {self.same_metric_text(rec)}",
            ]
            whole = self.end_to_end_text(rec)
            if whole:
                lines.append(f"whole run {whole}")
            if rec.peak_memory_max_bytes is not None:
                base_memory = self.baseline.peak_memory_max_bytes
                versus = (
                    f" (baseline {base_memory / MIB:,.0f} MiB)" if base_memory is not None else ""
                )
                lines.append(f"memory    peak {rec.peak_memory_max_bytes / MIB:,.0f} MiB{versus}")
        if self.complete:
            lines += [f"trade-off {self.trade_off_text(v)}" for v in self.trade_offs]
            for answer in ANSWERS:
                verdict = self.answer(answer)
                if (
                    verdict is not None
                    and verdict is not rec
                    and not verdict.trade_off
                    and not verdict.futile
                ):
                    lines.append(
                        f"{ANSWER_WORDS[answer]}: trial {verdict.trial_number} "
                        f"({verdict.changes_text()}): {verdict.verdict}"
                    )
            lines += [
                f"not confirmed: trial {v.trial_number} ({v.changes_text()}), "
                f"{self._speed_and_difference(v)}: {v.verdict}"
                for v in self.candidates
                if v.futile
            ]
            lines += [
                f"not confirmed: trial {v.trial_number} ({v.changes_text()}), "
                f"{v.speedup or 0.0:.2f}x in the race: {v.verdict}"
                for v in self.race
                if v.futile and (self.candidates or v is not self._fastest_racer())
            ]
        busy = self.busy_text()
        if busy:
            lines.append(f"WARNING: {busy}")
        return lines

    def _headline(self) -> str:
        prefix = "SIMULATED (mock device): " if self.simulated else ""
        if not self.complete:
            return (
                f"{prefix}verification {self.number} is incomplete ({self.runs_done} of "
                f"{self.runs_planned} runs); `autotune verify study={shlex.quote(self.study_name)}` finishes it"
            )
        if self.is_time_to_accuracy:
            return prefix + to_target_headline(
                self.target_text(),
                self.rounds,
                self.baseline,
                self.recommended,
                candidates_run=bool(self.candidates) or bool(self.finalists),
                searched=self.search_baseline_time_to_accuracy_s,
                stages=self.stages_text(),
                not_faster=self._not_faster_reason(),
                baseline_words=self.baseline_words,
            )
        rec = self.recommended
        same = "accuracy" if self.metric.is_accuracy else self.metric.name
        if rec is None and self.ending == "nothing_to_verify":
            closest = f"; closest: {self.closest}" if self.closest else ""
            z = self.screen_z if self.screen_z is not None else DEFAULT_SCREEN_Z
            return (
                f"{prefix}nothing to verify: no trial of the search was faster than "
                f"{self.baseline_words} with its {same} within {self.tolerance_text()} + "
                f"{z:g} standard errors of theirs{closest}"
            )
        if rec is None:
            return (
                f"{prefix}verified: not faster than {self.baseline_words} at the same {same} "
                f"({self._not_faster_reason()})"
            )
        assert rec.speedup is not None and rec.speedup_ci95 is not None
        low, high = rec.speedup_ci95
        memory = (
            f", peak memory {rec.peak_memory_max_bytes / MIB:,.0f} MiB"
            if rec.peak_memory_max_bytes is not None
            else ""
        )
        accuracy = (
            f"at the same {same} (inherited: {rec.evidence}; {rec.check_text})"
            if rec.inherits_accuracy
            else f"at the same {same} (non-inferior within {self.tolerance_text()}): "
            f"{self.metric_difference_text(rec)}"
        )
        whole = self.end_to_end_text(rec)
        return (
            f"{prefix}{rec.speedup:.2f}x faster than {self.baseline_words} (95 % CI "
            f"{low:.2f}-{high:.2f}x, {self.stages_text()}) {accuracy}{memory}: "
            f"{ANSWER_WORDS[rec.answer]}, trial {rec.trial_number}, {rec.changes_text()}"
            + (f"; {whole}" if "WARNING" in whole else "")
        )

    def _fastest_racer(self) -> CandidateVerdict | None:
        """The race's fastest finalist (the headline names it when none survived)."""
        racers = [v for v in self.race if not v.is_baseline]
        return max(racers, key=lambda v: v.speedup or 0.0, default=None)

    def _not_faster_reason(self) -> str:
        """Why a verification that re-measured finalists recommends nothing."""
        if self.candidates:
            if self.race_seeds:
                parts = []
                for v in self.candidates:
                    ci = (
                        f", 95 % CI {v.speedup_ci95[0]:.2f}-{v.speedup_ci95[1]:.2f}x"
                        if v.speedup_ci95
                        else ""
                    )
                    figure = f"{v.speedup:.2f}x{ci}, " if v.speedup is not None else ""
                    accuracy = (
                        f"{self.metric_difference_text(v)}: "
                        if not self.is_time_to_accuracy and v.metric_diff_mean is not None
                        else ""
                    )
                    parts.append(
                        f"race survivor trial {v.trial_number} ({ANSWER_WORDS[v.answer]}) "
                        f"{self.stages_text()}: {figure}{accuracy}{v.verdict}"
                    )
                return "; ".join(parts)
            return f"{self.stages_text()}: " + "; ".join(
                f"trial {c.trial_number} {c.verdict}" for c in self.candidates
            )
        best = self._fastest_racer()
        figure = (
            f"; fastest: trial {best.trial_number} at {best.speedup:.2f}x, {best.verdict}"
            if best is not None and best.speedup is not None
            else ""
        )
        return (
            f"no finalist of {len(self.finalists)} survived a {len(self.race_seeds)}-round "
            f"race{figure}"
        )


def _by_trial(rows: Iterable[VerificationRecord]) -> dict[int, list[VerificationRecord]]:
    """Rows grouped by the trial they re-measured, in their order."""
    grouped: dict[int, list[VerificationRecord]] = {}
    for row in rows:
        grouped.setdefault(row.trial_number, []).append(row)
    return grouped


def _stage_verdict(
    number: int,
    rows: Sequence[VerificationRecord],
    base_rows: Sequence[VerificationRecord],
    params_by_trial: Mapping[int, Mapping[str, Any]],
    plan: VerificationPlan,
    complete: bool,
    metric: Objective,
    objective: ObjectiveMode,
    stage: Stage,
) -> CandidateVerdict:
    """One configuration's verdict in one stage, in the study's mode."""
    params = params_by_trial.get(number, {})
    base_params = params_by_trial.get(plan.baseline_trial, {})
    if objective == "time_to_accuracy":
        verdict = to_target_verdict(
            number, rows, base_rows, params, base_params, plan, complete, stage
        )
    else:
        verdict = throughput_verdict(
            number, rows, base_rows, params, base_params, plan, complete, metric, stage
        )
    return replace(verdict, busy_runs=sum(r.busy for r in rows))


def race_survivors(
    plan: VerificationPlan,
    rows: Sequence[VerificationRecord],
    params_by_trial: Mapping[int, Mapping[str, Any]] | None = None,
    metric: Objective = ACCURACY,
    objective: ObjectiveMode = "throughput",
) -> tuple[tuple[CandidateVerdict, ...], dict[Lane, int]]:
    """The race's verdicts and each lane's survivor (stage A).

    A finalist passes the race when it measured in every race round, kept the run's limits,
    its metric pooled over the rounds passed the screen against the baseline's pooled metric
    (in a time-to-accuracy race: it reached the target in every round), and it beat the
    baseline (speedup above 1.0; no interval: the race only ranks). Each lane
    (:data:`~autotune.study.storage.records.Lane`: an answer, and whether its finalists'
    accuracy is trained or inherited with the paired check) keeps its own survivor: the
    fastest of its finalists that passed, preferring one whose paired mean accuracy is within
    the tolerance; among those within :data:`RACE_TIE_SHARE` of the fastest (the race cannot
    rank them), the one that changes the fewest knobs (then the faster, then the lower trial
    number). Two lanes of one answer both go on: a
    trained numerics change may be faster, and a timed same-computation one cheaper to
    verify (its evidence does not wait on a budget's learning); the confirmation recommends
    the fastest that qualifies. A trained survivor whose race says its confirmation could not
    show it non-inferior (the interval the confirmation's rounds would give, at the race's
    spread, is wider than the tolerance: :func:`_futility`) is not confirmed: its lane keeps
    no survivor, and its verdict says why and how many rounds would resolve it.

    Args:
        plan: the verification's plan.
        rows: its rows so far (any stage; the race's are picked by round).
        params_by_trial: the knobs of each trial, for the verdicts' changed knobs.
        metric: the study's validation metric.
        objective: the study's mode.

    Returns:
        ``(verdicts, survivors)``: the baseline's verdict first, then each finalist's; the
        survivor's trial number by lane, without the lanes that have none (and empty
        while the race is incomplete, or without a race).
    """
    if not plan.race_seeds or not plan.candidates:
        return (), {}
    race_rows = [r for r in rows if plan.is_race_round(r.round_index)]
    complete = set(plan.race_schedule()) <= {(r.round_index, r.trial_number) for r in race_rows}
    by_trial = _by_trial(race_rows)
    base_rows = by_trial.get(plan.baseline_trial, [])
    params = params_by_trial or {}
    verdicts = [
        replace(
            _stage_verdict(
                n, by_trial.get(n, []), base_rows, params, plan, complete, metric, objective, "race"
            ),
            answer=plan.answer_of(n),
        )
        for n in (plan.baseline_trial, *plan.candidates)
    ]
    base_mean = verdicts[0].val_metric_mean

    def within(v: CandidateVerdict) -> bool:
        """Its race accuracy (the paired mean difference) is within the tolerance: what the
        confirmation will hold it to. Time to accuracy: the target is the bar (always)."""
        if objective == "time_to_accuracy" or v.metric_diff_mean is None or base_mean is None:
            return True
        return within_tolerance(
            metric, base_mean + v.metric_diff_mean, base_mean, plan.accuracy_tolerance_pt
        )

    tolerance = tolerance_text(metric, plan.accuracy_tolerance_pt)
    labels: dict[int, str] = {}
    survivors: dict[Lane, int] = {}
    for lane in LANES:
        passed = [v for v in verdicts[1:] if v.qualifies and plan.lane_of(v.trial_number) == lane]
        # The screen keeps a finalist whose accuracy may be within the tolerance (not to drop
        # it for its luck); the survivor sent to the confirmation is the fastest whose
        # measured accuracy is within it, when there is one, since the confirmation holds it
        # to the tolerance: on digits a 1.54x finalist at -1.25 pt passed the screen and
        # failed its confirmation, where a 1.24x one at +0.00 pt was left behind.
        pool = [v for v in passed if within(v)] or passed
        fastest = max(pool, key=lambda v: (v.speedup or 0.0, -v.trial_number), default=None)
        if fastest is None:
            continue
        # Finalists the race cannot tell apart from the fastest: the one that changes the
        # fewest knobs goes on (the simpler change; on a Xeon's long run channels_last with a
        # DataLoader worker beat channels_last alone by 0.1 % in the race, and workers cost
        # on that CPU).
        floor = (1.0 - RACE_TIE_SHARE) * (fastest.speedup or 0.0)
        tied = [v for v in pool if (v.speedup or 0.0) >= floor]
        best = min(tied, key=lambda v: (len(v.changed), -(v.speedup or 0.0), v.trial_number))
        survivors[lane] = best.trial_number
        skipped = any(v not in pool for v in passed)
        answer, evidence = lane
        words = ANSWER_WORDS[answer] + (", accuracy inherited" if evidence == "inherited" else "")
        for v in passed:
            if v is best and best is not fastest:
                labels[v.trial_number] = (
                    f"survivor ({words}): within {RACE_TIE_SHARE:.0%} of the fastest in the "
                    f"race (trial {fastest.trial_number}), with fewer knobs changed"
                )
            elif v is best:
                labels[v.trial_number] = f"survivor ({words}): the fastest in the race" + (
                    f" within the {tolerance} tolerance" if skipped else ""
                )
            elif v in tied and len(v.changed) > len(best.changed):
                labels[v.trial_number] = (
                    f"passed, tied in the race with trial {best.trial_number} ({words}), "
                    "which changes fewer knobs"
                )
            elif v not in pool:
                labels[v.trial_number] = (
                    f"passed the screen; not the survivor: its accuracy is outside the "
                    f"{tolerance} tolerance (mean difference "
                    f"{difference_number(metric, v.metric_diff_mean or 0.0)}"
                    f"{difference_unit(metric)})"
                )
            else:
                labels[v.trial_number] = (
                    f"passed, slower than trial {best.trial_number} ({words}) in the race"
                )
    futile: set[int] = set()
    if complete and objective != "time_to_accuracy" and base_mean is not None:
        for lane, number in list(survivors.items()):
            if lane[1] != "trained":
                continue
            race_verdict = next(v for v in verdicts if v.trial_number == number)
            reason = _futility(race_verdict, by_trial, base_rows, base_mean, plan, metric)
            if reason is not None:
                del survivors[lane]
                futile.add(number)
                labels[number] = f"passed; its confirmation was not run: {reason}"
    labelled = tuple(
        replace(v, verdict=labels[v.trial_number], futile=v.trial_number in futile)
        if v.trial_number in labels
        else v
        for v in verdicts
    )
    return labelled, survivors


def _futility(
    race_verdict: CandidateVerdict,
    by_trial: Mapping[int, list[VerificationRecord]],
    base_rows: Sequence[VerificationRecord],
    base_mean: float,
    plan: VerificationPlan,
    metric: Objective,
) -> str | None:
    """Why a trained survivor's confirmation would be futile (``race_verdict``: its race
    verdict), or None when it could resolve its metric (:func:`_futile_reason` on the race's
    paired differences and the race verdict's own interval). A race of one round
    (``advanced.verify.race_rounds=1``) or a plan with one confirmation round never calls it
    futile.
    """
    base_by_round = {r.round_index: r for r in base_rows if r.val_metric is not None}
    diffs = [
        float(r.val_metric) - float(base_by_round[r.round_index].val_metric or 0.0)
        for r in by_trial.get(race_verdict.trial_number, [])
        if r.val_metric is not None and r.round_index in base_by_round
    ]
    return _futile_reason(
        diffs, race_verdict.metric_diff_ci95, base_mean, plan, metric, "the race's"
    )


#: Finalists of one lane whose race speedup is within this share of the fastest's are tied:
#: two race rounds cannot rank them (one window's noise between fresh processes is about 9 %
#: on a 2-core CPU, :data:`autotune.study.cost.CAPPED_FLOOR_VS_BASELINE`), and the survivor is
#: the one that changes the fewest knobs (:func:`race_survivors`).
RACE_TIE_SHARE = 0.02
#: The fewest paired differences whose interval may show a trained candidate inferior
#: (:func:`_futile_reason`). Two are too few: the interval of two differences that happen to
#: lie close is narrow by luck (the long run's batch-128 finalist on a Xeon: -1.10 and -1.15 pt
#: in the race, an interval of -1.44 to -0.81 pt, then -1.35, -0.15, -0.80 and +0.95 pt in its
#: confirmation).
INFERIOR_MIN_ROUNDS = 3


def _futile_reason(
    diffs: Sequence[float],
    diff_ci: tuple[float, float] | None,
    base_mean: float,
    plan: VerificationPlan,
    metric: Objective,
    spread_of: str,
) -> str | None:
    """Why a confirmation of ``plan.rounds`` rounds could not show a trained candidate
    non-inferior, judged from a pilot's paired differences ``diffs`` (the race's, or the
    confirmation's first rounds at an interim look), or None when it could.

    A conditional-power check (futility stopping of group-sequential trials; C. Jennison and
    B. W. Turnbull, *Group Sequential Methods with Applications to Clinical Trials*, CRC
    Press, 2000, chapter 10): at the low end of the pilot's spread
    (:func:`~autotune.study.verification._speedup.projected_half_width`), ``plan.rounds``
    rounds give an interval wider than the tolerance even with no true difference (or the
    better one the pilot's own 95 % interval ``diff_ci`` shows, where it shows one), so the
    rounds would be spent for nothing. Or, from :data:`INFERIOR_MIN_ROUNDS` paired differences
    on, the pilot's own 95 % interval ``diff_ci`` lies wholly past the margin (its better end
    worse than ``-allowance``): the candidate is shown inferior, and the rounds could show it
    non-inferior only where this look's interval was wrong, at most 2.5 % of the time for a
    candidate truly at the margin (the futility boundary on the estimate itself, ch. 10
    ibid.). Futility only ever stops a candidate: it never makes a claim, so it costs power,
    never the claims' error rate.
    """
    allowance = metric_allowance(metric, base_mean, plan.accuracy_tolerance_pt)
    tolerance = tolerance_text(metric, plan.accuracy_tolerance_pt)
    if (
        len(diffs) >= INFERIOR_MIN_ROUNDS
        and diff_ci is not None
        and max(metric.gain(end) for end in diff_ci) < -allowance
    ):
        low, high = (difference_number(metric, end) for end in diff_ci)
        return (
            f"futile: {spread_of} 95 % interval of the {metric.name} difference, {low} to "
            f"{high}{difference_unit(metric)}, lies wholly past the {tolerance} tolerance: "
            "shown inferior"
        )
    half = projected_half_width(diffs, plan.rounds)
    if half is None:
        return None
    # A better metric counts only as far as the pilot itself shows it (the better end of its
    # 95 % interval nearest to no difference): two seeds' mean is mostly their luck (a
    # baseline's unlucky seed made a bf16 finalist +5 pt "better" on one Xeon).
    better = max(0.0, min(metric.gain(end) for end in diff_ci)) if diff_ci is not None else 0.0
    if half <= allowance + better:
        return None
    needed = rounds_to_resolve(diffs, allowance + better)
    width = f"{100 * half:.2f} pt" if metric.is_accuracy else f"{half:.3g}"
    rounds = f"at least {needed} rounds" if needed is not None else "more than 10,000 rounds"
    return (
        f"futile: at {spread_of} spread of the {metric.name} difference, {plan.rounds} rounds "
        f"would give an interval of +/-{width} at best, wider "
        f"than the {tolerance} tolerance; "
        f"it would take {rounds} to resolve it"
    )


def confirmation_stops(
    plan: VerificationPlan,
    rows: Sequence[VerificationRecord],
    survivors: Mapping[Lane, int],
    metric: Objective = ACCURACY,
    objective: ObjectiveMode = "throughput",
) -> dict[int, tuple[int, str]]:
    """The trained survivors the confirmation stops early for futility, each with the
    confirmation rounds it ran and why: ``{trial: (rounds, reason)}``.

    After each complete confirmation round from the second on, while two or more rounds are
    left to save (the last ones decide by the verdict itself, which also shows a trade-off's
    figures), the paired metric differences so far are the pilot of
    :func:`_futile_reason`: once the planned rounds could not show the candidate
    non-inferior, its remaining rounds are not run (the race's two rounds are a small pilot:
    on the long run a bf16 finalist's race differences were +0.00 and +0.10 pt, and its
    first confirmation rounds +0.55, -1.95, -1.65 and -1.25 pt). A pure function of the
    stored rows,
    so the runner and every summary stop at the same round. Timed survivors, a
    time-to-accuracy verification and a round without a paired metric are never stopped.

    Args:
        plan: the verification's plan.
        rows: its rows so far (any stage; the confirmation's are picked by round).
        survivors: the race's survivors (:func:`race_survivors`).
        metric: the study's validation metric.
        objective: the study's mode.
    """
    if objective == "time_to_accuracy":
        return {}
    confirm = _by_trial(r for r in rows if not plan.is_race_round(r.round_index))
    base = {
        r.round_index: float(r.val_metric)
        for r in confirm.get(plan.baseline_trial, [])
        if r.val_metric is not None
    }
    stops: dict[int, tuple[int, str]] = {}
    for number in plan.confirmed(survivors):
        if plan.lane_of(number)[1] != "trained":
            continue
        own = {r.round_index: r.val_metric for r in confirm.get(number, [])}
        diffs: list[float] = []
        for index in range(plan.race_rounds, plan.race_rounds + plan.rounds - 2):
            value = own.get(index)
            if value is None or index not in base:
                break
            diffs.append(float(value) - base[index])
            if len(diffs) < 2:
                continue
            base_mean = statistics.fmean(base[i] for i in range(plan.race_rounds, index + 1))
            _, diff_ci = mean_difference_ci95(diffs)
            where = f"its first {len(diffs)} rounds'"
            reason = _futile_reason(diffs, diff_ci, base_mean, plan, metric, where)
            if reason is not None:
                stops[number] = (len(diffs), reason)
                break
    return stops


def confirmation_schedule(
    plan: VerificationPlan,
    survivors: Mapping[Lane, int],
    stops: Mapping[int, tuple[int, str]],
) -> list[tuple[int, int]]:
    """The confirmation's ``(round_index, trial_number)`` in run order
    (:meth:`~autotune.study.storage.VerificationPlan.confirm_schedule`) less what ``stops``
    (:func:`confirmation_stops`) leaves out: a stopped survivor's rounds after its stop, and,
    once every survivor has stopped, the baseline's rounds after the last stop (nothing is
    left to compare with it)."""
    confirmed = plan.confirmed(survivors)
    end = (
        plan.race_rounds + max(stops[n][0] for n in confirmed)
        if confirmed and all(n in stops for n in confirmed)
        else None
    )

    def left_out(round_index: int, number: int) -> bool:
        stop = stops.get(number)
        if stop is not None and round_index >= plan.race_rounds + stop[0]:
            return True
        return end is not None and round_index >= end

    return [item for item in plan.confirm_schedule(survivors) if not left_out(*item)]


def summarize_verification(
    run: VerificationRun,
    params_by_trial: Mapping[int, Mapping[str, Any]],
    *,
    simulated: bool,
    metric: Objective = ACCURACY,
    objective: ObjectiveMode = "throughput",
    target: float | None = None,
    search_baseline_time_to_accuracy_s: float | None = None,
    closest: str | None = None,
    baseline_words: str = DEFAULTS_WORDS,
) -> VerificationSummary:
    """Summarize a stored verification: the race, then the confirmation, then the
    recommendation.

    Args:
        run: the verification with its rows (:meth:`autotune.study.storage.ResultsStore.latest_verification`).
        params_by_trial: the knobs of each trial number in the plan (Optuna's ``trial.params``).
        simulated: the study ran on the mock device.
        metric: the study's validation metric (default: accuracy, maximized). In a
            time-to-accuracy verification, the target's metric.
        objective: the study's mode (:func:`autotune.study.objectives.objective_mode`); in
            ``time_to_accuracy`` the verdicts compare times to the target (:mod:`._to_target`).
        target: the target's value (time-to-accuracy studies; for the headline).
        search_baseline_time_to_accuracy_s: the baseline trial's time to accuracy in the
            search (for the headline when no finalist was re-run).
        closest: the search trial closest to the screen, in words (for "nothing to verify").
        baseline_words: what the outputs call the baseline (:data:`YOUR_BASELINE_WORDS` when
            the space named one, else :data:`DEFAULTS_WORDS`).

    Returns:
        The summary; ``recommended`` is the qualifying confirmed candidate (of either
        answer) with the highest speedup (ties: the lower trial number), None when none
        qualifies or runs are missing.
    """
    plan = run.plan
    race, survivors = race_survivors(plan, run.rows, params_by_trial, metric, objective)
    race_done = set(plan.race_schedule()) <= run.done()
    by_trial = _by_trial(r for r in run.rows if not plan.is_race_round(r.round_index))
    stops = confirmation_stops(plan, run.rows, survivors, metric, objective) if race_done else {}
    schedule = (
        plan.race_schedule() + confirmation_schedule(plan, survivors, stops)
        if race_done
        else plan.provisional_schedule()
    )
    planned = len(schedule)
    done = len(run.done() & set(schedule))
    complete = run.complete or (race_done and done == planned)

    def verdict(number: int) -> CandidateVerdict:
        stop = stops.get(number)
        # A stopped candidate's figures are over the rounds it ran (and the baseline's same).
        end = plan.race_rounds + (stop[0] if stop else plan.rounds)
        confirmed = _stage_verdict(
            number,
            [r for r in by_trial.get(number, []) if r.round_index < end],
            [r for r in by_trial.get(plan.baseline_trial, []) if r.round_index < end],
            params_by_trial,
            replace(plan, seeds=plan.seeds[: stop[0]]) if stop else plan,
            complete,
            metric,
            objective,
            "confirm",
        )
        if stop is not None:
            confirmed = replace(
                confirmed,
                qualifies=False,
                trade_off=False,
                futile=True,
                verdict=f"stopped after {stop[0]} of {plan.rounds} rounds: {stop[1]}",
            )
        return replace(confirmed, answer=plan.answer_of(number))

    candidates = tuple(verdict(n) for n in plan.confirmed(survivors))
    busy = [r for r in run.rows if r.busy]
    qualifying = [c for c in candidates if c.qualifies]
    recommended = max(qualifying, key=lambda c: (c.speedup or 0.0, -c.trial_number), default=None)
    return VerificationSummary(
        study_name=run.study_name,
        number=run.number,
        rounds=plan.rounds,
        seeds=plan.seeds,
        accuracy_tolerance_pt=plan.accuracy_tolerance_pt,
        complete=complete,
        runs_done=done,
        runs_planned=planned,
        simulated=simulated or any(r.simulated for r in run.rows),
        baseline=verdict(plan.baseline_trial),
        candidates=candidates,
        recommended=recommended,
        metric=metric,
        objective=objective,
        target=target,
        search_baseline_time_to_accuracy_s=search_baseline_time_to_accuracy_s,
        finalists=plan.candidates,
        race_seeds=plan.race_seeds,
        race=race,
        survivors=survivors,
        baseline_words=baseline_words,
        screen_z=plan.screen_z,
        closest=closest,
        busy_runs=len(busy),
        busy_reruns=len(run.superseded),
        busiest_share=max(
            (r.other_cpu_share for r in busy if r.other_cpu_share is not None), default=None
        ),
        run_s=sum(r.run_s or 0.0 for r in (*run.rows, *run.superseded)),
        runs=len(run.rows) + len(run.superseded),
    )
