"""The records of a verification: its plan, its measurements and the run that holds both."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from autotune.study.storage.records._results import MeasuredRun

__all__ = [
    "ANSWERS",
    "LANES",
    "Answer",
    "Evidence",
    "Lane",
    "VerificationPlan",
    "VerificationRecord",
    "VerificationRun",
    "counted_rows",
    "rotated",
]


def rotated(order: tuple[int, ...], round_index: int) -> tuple[int, ...]:
    """``order`` started at position ``round_index mod len(order)``: round 0 runs it as it is,
    round 1 from its second entry, ... so that no configuration always runs first (right
    after a start, or after the same neighbour) and a drift of the machine within a round
    does not always favour the same one."""
    if not order:
        return order
    start = round_index % len(order)
    return order[start:] + order[:start]


#: The two answers a verification gives (DESIGN.md, "same-model answer / model-change answer"):
#: ``same_model``, a change of system knobs only (the model knobs stay at the baseline's), and
#: ``model_change``, a change that also changes the model. Each has its own finalists, race
#: finalists and confirmation.
Answer = Literal["same_model", "model_change"]
#: The answers in the order every output shows them.
ANSWERS: tuple[Answer, ...] = ("same_model", "model_change")
#: What a finalist's accuracy rests on in the verification: ``trained`` (each run trains the
#: budget, or its share under short evidence) or ``inherited`` (each run is timed, and the
#: round's paired check against the baseline stands for the accuracy).
Evidence = Literal["trained", "inherited"]
#: A race lane: an answer and its finalists' evidence. The race keeps one survivor per lane,
#: so a faster numerics change (bf16: trained evidence, which a cost cap may leave too weak
#: to show non-inferiority) never takes the place of a verifiable same-computation one
#: (channels_last: timed, with its check) of the same answer.
Lane = tuple[Answer, Evidence]
#: The lanes in the order every output shows them.
LANES: tuple[Lane, ...] = (
    ("same_model", "trained"),
    ("same_model", "inherited"),
    ("model_change", "trained"),
    ("model_change", "inherited"),
)


@dataclass(frozen=True)
class VerificationPlan:
    """What one verification re-measures, in two stages.

    Stage A, the *race*: the baseline and every finalist over ``len(race_seeds)`` rounds; the
    survivor of each lane (:data:`Lane`; :func:`autotune.study.verification.race_survivors`)
    alone goes on. Stage B, the
    *confirmation*: the baseline and the survivor over ``len(seeds)`` rounds of fresh seeds;
    only these make the claim. Round indexes run over both stages: ``0 .. A-1`` are the race's,
    ``A .. A+R-1`` the confirmation's. A plan without race seeds (one finalist, or a
    lane of one finalist each, outside short evidence) confirms every candidate directly;
    under short evidence a lone trained finalist still races: the race is its futility
    pilot.

    Attributes:
        baseline_trial: the study's baseline trial number.
        candidates: the finalists' trial numbers, in their order within the first round.
        seeds: the training seed of each confirmation round (``len(seeds)`` rounds).
        accuracy_tolerance_pt: how many accuracy points (0.5 = 0.005) below the baseline's
            a candidate may be (for another metric, percent of the baseline's value).
        race_seeds: the training seed of each race round; empty: no race.
        screen_z: the z of the accuracy screen (``advanced.verify.screen_z``); None in verifications
            stored before the screen existed.
        max_memory_bytes: the run's ``constraints.max_memory_bytes`` when it was planned.
        min_accuracy: the run's ``constraints.min_accuracy`` when it was planned.
        model_changes: the finalists that change the model (the ``model_change`` answer's);
            empty in a space without model knobs and in verifications stored before the two
            answers (one answer, ``same_model``, as they were read then).
        inherited: the finalists whose accuracy is inherited (identical or the same
            computation in the search): their runs are timed, not trained to the budget, and
            each round's paired check against the same round's baseline stands for the
            accuracy (:mod:`autotune.study.evidence`).
        check_floor_json: the check's floor and margin as JSON (``first``, ``trajectory``,
            ``source``, ``margin``); None without inherited finalists.
        budget_steps: optimizer steps of one full run (the baseline trial's), over which a
            timed run's end-to-end seconds are projected; None when unknown.
    """

    baseline_trial: int
    candidates: tuple[int, ...]
    seeds: tuple[int, ...]
    accuracy_tolerance_pt: float
    race_seeds: tuple[int, ...] = ()
    screen_z: float | None = None
    max_memory_bytes: int | None = None
    min_accuracy: float | None = None
    model_changes: tuple[int, ...] = ()
    inherited: tuple[int, ...] = ()
    check_floor_json: str | None = None
    budget_steps: int | None = None

    @property
    def timing_only(self) -> bool:
        """Every finalist inherits its accuracy: the baseline's runs are timed only too."""
        return bool(self.candidates) and set(self.candidates) <= set(self.inherited)

    def answer_of(self, trial_number: int) -> Answer:
        """The answer a finalist belongs to."""
        return "model_change" if trial_number in self.model_changes else "same_model"

    def answer_candidates(self, answer: Answer) -> tuple[int, ...]:
        """The finalists of one answer, in their order."""
        return tuple(n for n in self.candidates if self.answer_of(n) == answer)

    def lane_of(self, trial_number: int) -> Lane:
        """The race lane of a finalist: its answer and its evidence."""
        evidence: Evidence = "inherited" if trial_number in self.inherited else "trained"
        return self.answer_of(trial_number), evidence

    def lane_candidates(self, lane: Lane) -> tuple[int, ...]:
        """The finalists of one lane, in their order."""
        return tuple(n for n in self.candidates if self.lane_of(n) == lane)

    @property
    def rounds(self) -> int:
        """Confirmation rounds (one seed each)."""
        return len(self.seeds)

    @property
    def race_rounds(self) -> int:
        """Race rounds (0: no race)."""
        return len(self.race_seeds)

    def seed(self, round_index: int) -> int:
        """The training seed of round ``round_index`` (race rounds first)."""
        return (*self.race_seeds, *self.seeds)[round_index]

    def is_race_round(self, round_index: int) -> bool:
        """Round ``round_index`` belongs to the race (stage A)."""
        return round_index < self.race_rounds

    def race_schedule(self) -> list[tuple[int, int]]:
        """The race's ``(round_index, trial_number)`` in run order: the baseline and every
        finalist, each round :func:`rotated` by its index. Empty without a race or without
        candidates."""
        if not self.candidates:
            return []
        order = (self.baseline_trial, *self.candidates)
        return [(r, n) for r in range(self.race_rounds) for n in rotated(order, r)]

    def confirmed(self, survivors: Mapping[Lane, int]) -> tuple[int, ...]:
        """The candidates the confirmation runs: each lane's race survivor (in
        :data:`LANES` order; none when the race left none), or every candidate in a plan
        without a race."""
        if not self.race_seeds:
            return self.candidates
        return tuple(survivors[lane] for lane in LANES if lane in survivors)

    def confirm_schedule(self, survivors: Mapping[Lane, int]) -> list[tuple[int, int]]:
        """The confirmation's ``(round_index, trial_number)`` in run order: the baseline and
        :meth:`confirmed`, each round rotated. Empty when nothing is confirmed."""
        confirmed = self.confirmed(survivors)
        if not confirmed:
            return []
        order = (self.baseline_trial, *confirmed)
        return [(self.race_rounds + r, n) for r in range(self.rounds) for n in rotated(order, r)]

    def provisional_survivors(self) -> dict[Lane, int]:
        """Survivors as counted while the race runs: each lane's first finalist."""
        firsts = {lane: self.lane_candidates(lane) for lane in LANES}
        return {lane: numbers[0] for lane, numbers in firsts.items() if numbers}

    def provisional_schedule(self) -> list[tuple[int, int]]:
        """What is planned while the race runs: the race, then a confirmation counted as if
        the race will leave a survivor for each lane that has finalists (progress
        displays; a summary's run count)."""
        return self.schedule(self.provisional_survivors())

    def schedule(self, survivors: Mapping[Lane, int] | None = None) -> list[tuple[int, int]]:
        """Every planned ``(round_index, trial_number)`` in run order: the race, then the
        confirmation of ``survivors`` (:meth:`confirm_schedule`)."""
        return self.race_schedule() + self.confirm_schedule(survivors or {})


@dataclass(frozen=True, kw_only=True)
class VerificationRecord(MeasuredRun):
    """One configuration measured in one verification round: the figures of every measured
    run (:class:`~autotune.study.storage.records.MeasuredRun`) and where the run sits in its
    verification.

    Attributes:
        round_index: the round (0-based).
        seed: the round's training seed.
        trial_number: the study trial whose configuration was re-run.
        is_baseline: it is the baseline.
        attempt: 0, or 1, 2, ... for a run measured again because the attempt before it was
            busy (``advanced.verify.busy_rerun_budget``); the last attempt of a round and trial counts.
        check_losses_json: its first K training losses as a JSON list (the paired check,
            :mod:`autotune.study.evidence`); None when not recorded.
    """

    round_index: int
    seed: int
    trial_number: int
    is_baseline: bool
    attempt: int = 0
    check_losses_json: str | None = None

    @property
    def check_losses(self) -> tuple[float, ...]:
        """The recorded check losses (empty when none)."""
        if not self.check_losses_json:
            return ()
        return tuple(float(v) for v in json.loads(self.check_losses_json))

    @property
    def busy(self) -> bool:
        """Measured on a busy machine."""
        return bool(self.busy_machine)


def counted_rows(
    rows: tuple[VerificationRecord, ...],
) -> tuple[tuple[VerificationRecord, ...], tuple[VerificationRecord, ...]]:
    """``(counted, superseded)``: the last attempt of each round and trial, in the rows'
    order, and the earlier (busy) attempts that were measured again."""
    last: dict[tuple[int, int], VerificationRecord] = {}
    for row in rows:
        key = (row.round_index, row.trial_number)
        if key not in last or row.attempt >= last[key].attempt:
            last[key] = row
    kept = {id(row) for row in last.values()}
    return (
        tuple(row for row in rows if id(row) in kept),
        tuple(row for row in rows if id(row) not in kept),
    )


@dataclass(frozen=True)
class VerificationRun:
    """A verification of a study as stored: its number, plan, rows and state.

    Attributes:
        study_name: the Optuna study name.
        number: 1 for the study's first verification, 2 for the next, ...
        plan: what it re-measures.
        rows: the measurements so far that count, by round: one per round and trial (its
            last attempt).
        started_at: when it was planned (UTC).
        completed_at: when its last round finished (UTC); None while rounds are missing.
        superseded: the attempts measured on a busy machine and measured again (kept, never
            counted): ``len(superseded)`` re-runs were spent (``advanced.verify.busy_rerun_budget``).
    """

    study_name: str
    number: int
    plan: VerificationPlan
    rows: tuple[VerificationRecord, ...]
    started_at: dt.datetime | None
    completed_at: dt.datetime | None
    superseded: tuple[VerificationRecord, ...] = ()

    @property
    def complete(self) -> bool:
        """Every round of every configuration has a row."""
        return self.completed_at is not None

    def done(self) -> set[tuple[int, int]]:
        """``(round_index, trial_number)`` pairs that have a row."""
        return {(r.round_index, r.trial_number) for r in self.rows}
