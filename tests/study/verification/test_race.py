"""The race and the confirmation (autotune/study/verification/_summary.py, the plan's schedules in
autotune/study/storage/records/_verification.py): rotated rounds, the survivor, the run's limits on
verified figures, invalid figures, and the accuracy as measured, on hand-built rows."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Sequence

import pytest

from autotune.core.units import MIB
from autotune.study.storage import VerificationPlan, VerificationRecord, VerificationRun
from autotune.study.storage.records import rotated
from autotune.study.verification import (
    confirmation_schedule,
    confirmation_stops,
    race_survivors,
    summarize_verification,
)

#: Two race rounds (seeds 10, 11), then three confirmation rounds (seeds 20, 21, 22).
PLAN = VerificationPlan(0, (1, 2, 3), (20, 21, 22), 0.5, race_seeds=(10, 11), screen_z=1.645)
PARAMS = {n: {"batch_size": 2**n * 64} for n in range(4)}


def _row(
    round_index: int,
    trial_number: int,
    throughput_sps: float | None,
    val_metric: float = 0.985,
    *,
    val_samples: int | None = 2000,
    peak_memory_bytes: int = 8 * MIB,
    failure: str | None = None,
) -> VerificationRecord:
    return VerificationRecord(
        round_index=round_index,
        seed=PLAN.seed(round_index),
        trial_number=trial_number,
        is_baseline=trial_number == 0,
        simulated=False,
        failure=failure,
        failure_detail=None,
        throughput_sps=throughput_sps,
        throughput_iqr_sps=1.0,
        step_time_s=0.01,
        val_metric=val_metric,
        peak_memory_bytes=peak_memory_bytes,
        train_s=1.0,
        config_json="{}",
        val_samples=val_samples,
    )


def _race(speedups: dict[int, float], **per_trial: dict[str, object]) -> list[VerificationRecord]:
    """Both race rounds: the baseline at 1,000 samples/s, trial n at ``speedups[n]`` x that
    (a finalist of the plan not in ``speedups``: 0.9x, slower than the baseline)."""
    speedups = {n: speedups.get(n, 0.9) for n in PLAN.candidates}
    rows = []
    for r in range(PLAN.race_rounds):
        rows.append(_row(r, 0, 1000.0 + r))
        for n, speedup in speedups.items():
            rows.append(_row(r, n, speedup * (1000.0 + r), **per_trial.get(str(n), {})))  # type: ignore[arg-type]
    return rows


def _confirm(
    survivor: int, ratios: Sequence[float], metrics: Sequence[tuple[float, float]] | None = None
) -> list[VerificationRecord]:
    """The confirmation rounds: the baseline and ``survivor`` at ``ratios`` x the baseline;
    ``metrics``: ``(baseline's, survivor's)`` accuracy per round."""
    rows = []
    for i, ratio in enumerate(ratios):
        r = PLAN.race_rounds + i
        base_acc, acc = metrics[i] if metrics else (0.985, 0.985)
        rows += [_row(r, 0, 1000.0 + i, base_acc), _row(r, survivor, ratio * (1000.0 + i), acc)]
    return rows


def _run(rows: Sequence[VerificationRecord], plan: VerificationPlan = PLAN) -> VerificationRun:
    return VerificationRun(
        study_name="s",
        number=1,
        plan=plan,
        rows=tuple(rows),
        started_at=dt.datetime(2026, 11, 24),
        completed_at=dt.datetime(2026, 11, 24),
    )


#: The lane of the plans here: the same model, trained (none inherits its accuracy).
SAME_TRAINED = ("same_model", "trained")


def _one_survivor(*args, **kwargs):  # type: ignore[no-untyped-def]
    """:func:`race_survivors` of a plan with one answer: its verdicts and the same-model
    survivor (None without one)."""
    verdicts, survivors = race_survivors(*args, **kwargs)
    assert set(survivors) <= {SAME_TRAINED}
    return verdicts, survivors.get(SAME_TRAINED)


# --------------------------------------------------------------------------------------------
# schedules


def test_each_round_starts_one_position_later() -> None:
    assert rotated((0, 1, 2, 3), 0) == (0, 1, 2, 3)
    assert rotated((0, 1, 2, 3), 1) == (1, 2, 3, 0)
    assert rotated((0, 1, 2, 3), 5) == (1, 2, 3, 0)
    assert PLAN.race_schedule() == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 1), (1, 2), (1, 3), (1, 0)]
    assert PLAN.confirm_schedule({SAME_TRAINED: 2}) == [
        (2, 0),
        (2, 2),
        (3, 2),
        (3, 0),
        (4, 0),
        (4, 2),
    ]
    assert PLAN.confirm_schedule({}) == []
    assert [PLAN.seed(r) for r in range(5)] == [10, 11, 20, 21, 22]


def test_a_plan_without_a_race_confirms_every_candidate() -> None:
    plan = VerificationPlan(0, (1, 2), (20, 21, 22), 0.5)
    assert plan.race_schedule() == [] and plan.confirmed({}) == (1, 2)
    assert [n for _, n in plan.schedule()][:3] == [0, 1, 2]


# --------------------------------------------------------------------------------------------
# the race


def test_the_survivor_is_the_fastest_finalist_that_passes_the_race() -> None:
    verdicts, survivor = _one_survivor(PLAN, _race({1: 1.2, 2: 1.5, 3: 0.9}), PARAMS)

    assert survivor == 2
    by_trial = {v.trial_number: v for v in verdicts}
    assert by_trial[2].verdict == "survivor (same model): the fastest in the race"
    assert by_trial[1].verdict == "passed, slower than trial 2 (same model) in the race"
    assert by_trial[3].verdict.startswith("not faster than the baseline in the race (0.90x)")
    assert all(v.stage == "race" for v in verdicts)


def test_a_trained_and_a_timed_finalist_of_one_answer_both_survive() -> None:
    """One survivor per lane: the fastest trained finalist (bf16, say) does not take the place
    of a timed one whose accuracy is inherited with its paired check (channels_last): the
    confirmation runs both and recommends the fastest that qualifies. Under a cost cap the
    trained one's evidence may be too weak to show non-inferiority; the timed one's is not."""
    floor = {"first": 1e-6, "trajectory": 1e-4, "source": "float64 twin", "margin": 10.0}
    plan = dataclasses.replace(PLAN, inherited=(1,), check_floor_json=json.dumps(floor))
    losses = json.dumps([2.30, 2.10, 1.90])  # the same losses: the check passes
    race = [
        dataclasses.replace(r, check_losses_json=losses) if r.trial_number in (0, 1) else r
        for r in _race({1: 1.2, 2: 1.5, 3: 1.3})
    ]

    verdicts, survivors = race_survivors(plan, race, PARAMS)

    assert survivors == {("same_model", "trained"): 2, ("same_model", "inherited"): 1}
    by_trial = {v.trial_number: v for v in verdicts}
    assert by_trial[1].verdict == (
        "survivor (same model, accuracy inherited): the fastest in the race"
    )
    assert by_trial[3].verdict == "passed, slower than trial 2 (same model) in the race"
    assert plan.confirmed(survivors) == (2, 1)
    assert plan.provisional_survivors() == {
        ("same_model", "trained"): 2,
        ("same_model", "inherited"): 1,
    }


def test_a_faster_finalist_whose_pooled_accuracy_fails_the_screen_does_not_survive() -> None:
    # 2 pt lower over 4,000 pooled images: far past 0.5 pt + 1.645 standard errors.
    rows = _race({1: 1.2, 2: 1.5}, **{"2": {"val_metric": 0.965}})

    verdicts, survivor = _one_survivor(PLAN, rows, PARAMS)

    assert survivor == 1
    (two,) = [v for v in verdicts if v.trial_number == 2]
    assert two.verdict == "pooled accuracy failed the screen (96.50 % vs 98.50 %)"


def test_a_finalist_over_the_memory_limit_in_one_race_round_does_not_survive() -> None:
    plan = dataclasses.replace(PLAN, max_memory_bytes=10 * MIB)
    rows = _race({1: 1.2, 2: 1.5})
    rows = [dataclasses.replace(r, peak_memory_bytes=12 * MIB) if r == rows[2] else r for r in rows]

    verdicts, survivor = _one_survivor(plan, rows, PARAMS)

    assert survivor == 1
    (two,) = [v for v in verdicts if v.trial_number == 2]
    assert two.verdict == ("over constraints.max_memory_bytes: 12.0 MiB > 10.0 MiB in round 1")


def test_the_survivor_is_the_fastest_within_the_tolerance_when_there_is_one() -> None:
    """The issue's main-command run on digits: a 1.54x finalist at -1.25 pt passed the screen
    (n=718 pooled) and failed its confirmation; a 1.24x one at +0.00 pt was left behind."""
    rows = _race({1: 1.54, 2: 1.24}, **{"1": {"val_metric": 0.9725, "val_samples": 359}})
    rows = [dataclasses.replace(r, val_samples=359) for r in rows]

    verdicts, survivor = _one_survivor(PLAN, rows, PARAMS)

    assert survivor == 2
    by_trial = {v.trial_number: v for v in verdicts}
    assert by_trial[1].qualifies  # through the screen: 0.5 pt + 1.645 SE at n=718
    assert by_trial[1].verdict == (
        "passed the screen; not the survivor: its accuracy is outside the 0.5 pt tolerance "
        "(mean difference -1.25 pt)"
    )
    assert (
        by_trial[2].verdict
        == "survivor (same model): the fastest in the race within the 0.5 pt tolerance"
    )


def test_without_a_finalist_within_the_tolerance_the_fastest_through_the_screen_survives() -> None:
    rows = _race({1: 1.54, 2: 1.24}, **{"1": {"val_metric": 0.9775}, "2": {"val_metric": 0.979}})

    verdicts, survivor = _one_survivor(PLAN, rows, PARAMS)

    assert survivor == 1
    assert {v.trial_number: v.verdict for v in verdicts}[
        1
    ] == "survivor (same model): the fastest in the race"


def test_finalists_the_race_cannot_rank_send_on_the_one_with_fewer_knobs_changed() -> None:
    """The long run on a Xeon: channels_last with a worker beat channels_last alone by 0.1 %
    in the race. Within 2 % of the fastest, the simpler change goes on; a tied finalist that
    changes as few knobs is only slower."""
    params = {
        0: {"memory_format": "contiguous", "num_workers": 0},
        1: {"memory_format": "channels_last", "num_workers": 1},
        2: {"memory_format": "channels_last", "num_workers": 0},
        3: {"memory_format": "contiguous", "num_workers": 1},
    }
    rows = _race({1: 1.162, 2: 1.161, 3: 1.155})

    verdicts, survivor = _one_survivor(PLAN, rows, params)

    assert survivor == 2
    by_trial = {v.trial_number: v.verdict for v in verdicts}
    assert by_trial[2] == (
        "survivor (same model): within 2% of the fastest in the race (trial 1), with fewer "
        "knobs changed"
    )
    assert by_trial[1] == (
        "passed, tied in the race with trial 2 (same model), which changes fewer knobs"
    )
    assert by_trial[3] == "passed, slower than trial 2 (same model) in the race"


def test_an_incomplete_race_has_no_survivor_yet() -> None:
    rows = _race({1: 1.2, 2: 1.5, 3: 1.1})[:-1]

    _, survivor = _one_survivor(PLAN, rows, PARAMS)

    assert survivor is None


# --------------------------------------------------------------------------------------------
# the confirmation


def test_only_the_confirmation_makes_the_claim() -> None:
    rows = _race({1: 1.2, 2: 3.0, 3: 1.1}) + _confirm(2, (1.31, 1.28, 1.33))

    summary = summarize_verification(_run(rows), PARAMS, simulated=False)

    rec = summary.recommended
    assert rec is not None and rec.trial_number == 2 and rec.stage == "confirm"
    # The confirmation's 1.3x, not the race's lucky 3.0x.
    assert rec.speedup == pytest.approx((1.31 * 1.28 * 1.33) ** (1 / 3), rel=1e-3)
    assert summary.ending == "recommended" and summary.runs_done == summary.runs_planned == 14
    assert summary.headline().startswith(
        f"{rec.speedup:.2f}x faster than PyTorch's defaults (95 % CI "
    )
    assert "confirmed over 3 rounds after a 2-round race of 3 finalists) at the same accuracy" in (
        summary.headline()
    )


def test_a_survivor_that_fails_its_confirmation_is_reported_as_such() -> None:
    rows = _race({1: 1.2, 2: 1.5}) + _confirm(2, (1.02, 0.97, 1.05))

    summary = summarize_verification(_run(rows), PARAMS, simulated=False)

    assert summary.recommended is None and summary.ending == "not_faster"
    assert summary.headline().startswith(
        "verified: not faster than PyTorch's defaults at the same accuracy (race survivor trial 2 "
        "(same model) confirmed over 3 rounds after a 2-round race of 3 finalists: "
    )
    assert summary.headline().endswith("not verifiably faster (95 % CI reaches 1.0x))")


def test_a_memory_limit_broken_only_in_verification_is_not_recommended() -> None:
    plan = dataclasses.replace(PLAN, max_memory_bytes=10 * MIB)
    rows = _race({1: 1.2, 2: 1.5}) + _confirm(2, (1.5, 1.5, 1.5))
    rows = [
        dataclasses.replace(r, peak_memory_bytes=11 * MIB)
        if (r.round_index, r.trial_number) == (3, 2)
        else r
        for r in rows
    ]

    summary = summarize_verification(_run(rows, plan), PARAMS, simulated=False)

    assert summary.recommended is None
    assert summary.candidates[0].verdict == (
        "over constraints.max_memory_bytes: 11.0 MiB > 10.0 MiB in round 4"
    )


def test_a_mean_accuracy_under_the_minimum_is_not_recommended() -> None:
    plan = dataclasses.replace(PLAN, min_accuracy=0.99)
    # 99.5 % in the race (it survives), 98.5 % in the confirmation.
    rows = _race({1: 1.2, 2: 1.5}, **{"2": {"val_metric": 0.995}}) + _confirm(2, (1.5,) * 3)

    summary = summarize_verification(_run(rows, plan), PARAMS, simulated=False)

    assert summary.recommended is None
    assert summary.candidates[0].verdict == ("under constraints.min_accuracy: mean 0.9850 < 0.9900")


@pytest.mark.parametrize("bad", [float("nan"), 0.0, float("inf"), -5.0])
def test_a_nan_or_zero_throughput_never_qualifies_and_never_crashes(bad: float) -> None:
    rows = _race({1: 1.2, 2: 1.5}) + _confirm(2, (1.5, 1.5, 1.5))
    rows = [
        dataclasses.replace(r, throughput_sps=bad)
        if (r.round_index, r.trial_number) == (3, 2)
        else r
        for r in rows
    ]

    summary = summarize_verification(_run(rows), PARAMS, simulated=False)

    (candidate,) = summary.candidates
    assert summary.recommended is None and not candidate.qualifies
    assert candidate.verdict.startswith("failed (round 4: invalid throughput (")
    assert candidate.speedup is not None  # from the valid rounds only, finite
    assert summary.headline()  # every output's line renders


def test_a_baseline_with_a_nan_throughput_in_a_round_leaves_it_unpaired() -> None:
    rows = _race({1: 1.2, 2: 1.5}) + _confirm(2, (1.5, 1.5, 1.5))
    rows = [
        dataclasses.replace(r, throughput_sps=float("nan"))
        if (r.round_index, r.trial_number) == (2, 0)
        else r
        for r in rows
    ]

    summary = summarize_verification(_run(rows), PARAMS, simulated=False)

    assert summary.recommended is None
    assert summary.candidates[0].verdict == "the baseline failed in round 3"


def test_a_mean_within_the_tolerance_is_not_enough_it_is_a_trade_off() -> None:
    # Paired differences of -0.3, +0.6 and -0.9 pt: mean -0.2 pt (within 0.5 pt), but the
    # 95 % interval reaches well past -0.5 pt: not shown non-inferior, so a trade-off.
    metrics = [(0.985, 0.982), (0.980, 0.986), (0.990, 0.981)]
    rows = _race({1: 1.2, 2: 1.5}) + _confirm(2, (1.5, 1.52, 1.49), metrics)

    summary = summarize_verification(_run(rows), PARAMS, simulated=False)

    assert summary.recommended is None and summary.ending == "not_faster"
    (candidate,) = summary.candidates
    assert candidate.non_inferior is False and candidate.trade_off and not candidate.qualifies
    assert candidate.metric_diff_mean == pytest.approx(-0.002)
    assert candidate.metric_diff_ci95 is not None and candidate.metric_diff_ci95[0] < -0.005
    assert candidate.verdict.startswith(
        "a trade-off: verified faster, accuracy not shown non-inferior (the difference's 95 % "
        "CI reaches -"
    )
    assert summary.trade_offs == (candidate,)
    line = summary.headline()
    assert "the same accuracy (non-inferior" not in line
    assert "; trade-off, not recommended: a system change (batch_size 64->256): 1.50x (" in line


def test_a_non_inferior_accuracy_says_the_same_accuracy_with_its_interval() -> None:
    metrics = [(0.985, 0.984), (0.980, 0.980), (0.990, 0.989)]
    rows = _race({1: 1.2, 2: 1.5}) + _confirm(2, (1.5, 1.52, 1.49), metrics)

    summary = summarize_verification(_run(rows), PARAMS, simulated=False)

    rec = summary.recommended
    assert rec is not None and rec.non_inferior is True and not rec.trade_off
    assert rec.verdict == "verified faster at the same accuracy (non-inferior)"
    assert (
        " at the same accuracy (non-inferior within 0.5 pt): 98.43 % vs 98.50 % (difference "
        "-0.07 pt, 95 % CI "
    ) in summary.headline()
    assert ", n=2,000)" in summary.headline()
    assert summary.accuracy_text().startswith("same accuracy (non-inferior): -0.07 pt (")


def test_no_finalist_surviving_the_race_says_so_with_its_fastest() -> None:
    rows = _race({1: 0.97, 2: 0.99, 3: 0.95})

    summary = summarize_verification(_run(rows), PARAMS, simulated=False)

    assert not summary.survivors and summary.candidates == ()
    assert summary.ending == "not_faster" and summary.complete
    assert summary.headline() == (
        "verified: not faster than PyTorch's defaults at the same accuracy (no finalist of 3 "
        "survived a 2-round race; fastest: trial 2 at 0.99x, not faster than the baseline in "
        "the race (0.99x))"
    )


# --------------------------------------------------------------------------------------------
# futility: a trained survivor whose confirmation could not resolve its accuracy


def _race_accuracies(
    speedups: dict[int, float],
    accuracies: dict[int, tuple[float, float]],
    baseline: tuple[float, float] = (0.95, 0.95),
) -> list[VerificationRecord]:
    """:func:`_race` with each trial's accuracy per race round (the baseline's:
    ``baseline``; a finalist not in ``accuracies``: 0.95 both)."""
    accuracies = {0: baseline, **accuracies}
    return [
        dataclasses.replace(
            r, val_metric=accuracies.get(r.trial_number, (0.95, 0.95))[r.round_index]
        )
        for r in _race(speedups)
    ]


def test_a_trained_survivor_whose_confirmation_would_be_futile_is_not_confirmed() -> None:
    """The race's paired differences (-2 and +1 pt) give, at the low end of their spread, a
    3-round interval of +/-2.69 pt: wider than the 0.5 pt tolerance even with no true loss.
    The trained lane keeps no survivor; the timed one (its accuracy inherited) is confirmed
    and recommended, and the verdict says why the other was not run, and what would resolve
    it."""
    floor = {"first": 1e-6, "trajectory": 1e-4, "source": "float64 twin", "margin": 10.0}
    plan = dataclasses.replace(PLAN, inherited=(1,), check_floor_json=json.dumps(floor))
    losses = json.dumps([2.30, 2.10, 1.90])
    race = [
        dataclasses.replace(r, check_losses_json=losses) if r.trial_number in (0, 1) else r
        for r in _race_accuracies({1: 1.2, 2: 1.5}, {2: (0.93, 0.96), 1: (0.95, 0.95)})
    ]

    verdicts, survivors = race_survivors(plan, race, PARAMS)

    assert survivors == {("same_model", "inherited"): 1}
    trial_2 = next(v for v in verdicts if v.trial_number == 2)
    assert trial_2.futile
    assert trial_2.verdict == (
        "passed; its confirmation was not run: futile: at the race's spread of the "
        "accuracy difference, 3 rounds would give an interval of +/-2.69 pt at best, "
        "wider than the 0.5 pt tolerance; it would take at least 21 rounds to resolve it"
    )

    confirm = []
    for i in range(3):
        r = plan.race_rounds + i
        confirm += [
            dataclasses.replace(_row(r, 0, 1000.0 + i), check_losses_json=losses),
            dataclasses.replace(_row(r, 1, 1.2 * (1000.0 + i)), check_losses_json=losses),
        ]
    summary = summarize_verification(_run(race + confirm, plan), PARAMS, simulated=False)

    assert summary.recommended is not None and summary.recommended.trial_number == 1
    assert plan.confirmed(summary.survivors) == (1,)
    not_confirmed = [line for line in summary.verdict_block() if line.startswith("not confirmed")]
    assert not_confirmed == [
        f"not confirmed: trial 2 (batch_size 64->256), 1.50x in the race: {trial_2.verdict}"
    ]


@pytest.mark.parametrize(
    ("accuracies", "why"),
    [
        ((0.940, 0.941), "a narrow spread: +/-0.06 pt over 3 rounds"),
        ((0.983, 0.990), "a better mean the race shows (+4.3, +5.0 pt) outweighs the spread"),
        ((0.935, 0.935), "no spread (its mean is at the tolerance: the confirmation says more)"),
    ],
)
def test_a_trained_survivor_the_confirmation_can_resolve_is_confirmed(
    accuracies: tuple[float, float], why: str
) -> None:
    race = _race_accuracies({2: 1.5}, {2: accuracies}, baseline=(0.94, 0.94))

    verdicts, survivor = _one_survivor(PLAN, race, PARAMS)

    assert survivor == 2, why
    assert not any(v.futile for v in verdicts)


def test_a_race_of_one_round_has_no_spread_and_calls_nothing_futile() -> None:
    plan = dataclasses.replace(PLAN, race_seeds=(10,))
    rows = [
        dataclasses.replace(r, val_metric=0.945 if r.trial_number == 2 else 0.95)
        for r in _race({2: 1.5})
        if r.round_index == 0
    ]

    _, survivor = _one_survivor(plan, rows, PARAMS)

    assert survivor == 2


def test_a_lucky_race_mean_does_not_save_a_futile_confirmation() -> None:
    """The long run on a Xeon: the baseline's second seed stopped at 79.45 %, so bf16's race
    differences were -0.65 and +10.85 pt (mean +5.1). A better mean counts only as far as the
    race's own interval shows it, and two seeds show nothing: the 3 confirmation rounds
    (here) would still give an interval far wider than 0.5 pt."""
    race = _race_accuracies({2: 2.1}, {2: (0.9630, 0.9030)}, baseline=(0.9695, 0.7945))

    verdicts, survivor = _one_survivor(PLAN, race, PARAMS)

    assert survivor is None
    assert next(v for v in verdicts if v.trial_number == 2).futile


#: The long run's bf16 finalist on an AMD EPYC (docs/research/evidence.md): its race
#: differences +0.00 and +0.10 pt (not futile), then confirmation rounds at -1.95, -1.65 and
#: -1.25 pt after a first at +0.55.
LONG_RUN_CONFIRM = ((0.9695, 0.9750), (0.9835, 0.9640), (0.9820, 0.9655), (0.9720, 0.9595))


def _long_run_rows(plan: VerificationPlan, rounds: int) -> list[VerificationRecord]:
    """The race (trial 2 at 1.7x, its accuracy as the baseline's), then the first ``rounds``
    confirmation rounds of :data:`LONG_RUN_CONFIRM` (baseline, trial 2)."""
    rows = [
        dataclasses.replace(
            r,
            val_metric=(0.973, 0.975)[r.round_index]
            + (r.trial_number == 2) * 0.0005 * r.round_index,
        )
        for r in _race({2: 1.7})
        if r.trial_number in (0, 2)
    ]
    for i, (base, trial) in enumerate(LONG_RUN_CONFIRM[:rounds]):
        r = plan.race_rounds + i
        rows += [_at(plan, r, _row(0, 0, 1000.0, base)), _at(plan, r, _row(0, 2, 1700.0, trial))]
    return rows


def _at(plan: VerificationPlan, round_index: int, row: VerificationRecord) -> VerificationRecord:
    """``row`` moved to ``round_index`` of ``plan``, with that round's seed."""
    return dataclasses.replace(row, round_index=round_index, seed=plan.seed(round_index))


def test_the_confirmation_stops_a_trained_survivor_once_its_rounds_are_futile() -> None:
    """Interim looks: after one round there is no spread; after the second (+0.55 and -1.95
    pt), at the low end of the spread so far, 8 rounds would give an interval of +/-0.75 pt,
    wider than the 0.5 pt tolerance: stopped, and with no other survivor the baseline stops
    too. The summary, from the rows alone, is complete and says why."""
    plan = dataclasses.replace(PLAN, candidates=(2,), seeds=tuple(range(20, 28)))
    survivors = {SAME_TRAINED: 2}

    assert confirmation_stops(plan, _long_run_rows(plan, 1), survivors) == {}
    rows = _long_run_rows(plan, 2)
    stops = confirmation_stops(plan, rows, survivors)
    assert stops == {
        2: (
            2,
            "futile: at its first 2 rounds' spread of the accuracy difference, 8 rounds would "
            "give an interval of +/-0.75 pt at best, wider than the 0.5 pt tolerance; it "
            "would take at least 15 rounds to resolve it",
        )
    }
    assert confirmation_schedule(plan, survivors, stops) == [
        item for item in plan.confirm_schedule(survivors) if item[0] < plan.race_rounds + 2
    ]

    summary = summarize_verification(_run(rows, plan), PARAMS, simulated=False)

    assert summary.complete and summary.recommended is None
    (stopped,) = summary.candidates
    assert stopped.futile and not stopped.qualifies and not stopped.trade_off
    assert stopped.rounds_measured == 2
    assert stopped.verdict == f"stopped after 2 of 8 rounds: {stops[2][1]}"
    (line,) = [line for line in summary.verdict_block() if line.startswith("not confirmed")]
    assert line.startswith("not confirmed: trial 2 (batch_size 64->256), 1.70x (")
    assert line.endswith(f": {stopped.verdict}")


def test_a_trained_survivor_within_the_spread_the_rounds_resolve_goes_on() -> None:
    plan = dataclasses.replace(PLAN, candidates=(2,), seeds=tuple(range(20, 28)))
    rows = _long_run_rows(plan, 0)
    for i in range(7):
        r = plan.race_rounds + i
        rows += [
            _at(plan, r, _row(0, 0, 1000.0, 0.975)),
            _at(plan, r, _row(0, 2, 1700.0, 0.975 + (-1) ** i * 0.001)),
        ]
    assert confirmation_stops(plan, rows, {SAME_TRAINED: 2}) == {}


def test_the_confirmation_stops_a_trained_survivor_shown_inferior_from_its_third_round() -> None:
    """A narrow spread (its rounds would resolve it) whose interval lies wholly past the
    margin: after two rounds (-1.30, -1.10 pt) two differences are too few to call it; after
    the third (-1.20 pt) its 95 % interval, -1.45 to -0.95 pt, is past the 0.5 pt tolerance:
    stopped, shown inferior."""
    plan = dataclasses.replace(PLAN, candidates=(2,), seeds=tuple(range(20, 28)))
    survivors = {SAME_TRAINED: 2}
    rows = _long_run_rows(plan, 0)
    for i, diff in enumerate((-0.0130, -0.0110, -0.0120)):
        r = plan.race_rounds + i
        rows += [
            _at(plan, r, _row(0, 0, 1000.0, 0.975)),
            _at(plan, r, _row(0, 2, 1700.0, 0.975 + diff)),
        ]
        stops = confirmation_stops(plan, rows, survivors)
        if i < 2:
            assert stops == {}, f"stopped after {i + 1} rounds"
    assert stops == {
        2: (
            3,
            "futile: its first 3 rounds' 95 % interval of the accuracy difference, -1.45 to "
            "-0.95 pt, lies wholly past the 0.5 pt tolerance: shown inferior",
        )
    }


def test_a_timed_survivor_is_never_stopped_for_futility() -> None:
    plan = dataclasses.replace(PLAN, candidates=(2,), seeds=tuple(range(20, 28)), inherited=(2,))
    assert confirmation_stops(plan, _long_run_rows(plan, 4), {("same_model", "inherited"): 2}) == {}
