"""A verification fitted within what the cost cap leaves (autotune/study/verification/_budget.py)."""

from __future__ import annotations

import pytest

from autotune.study.verification import (
    fit_budget,
)
from autotune.study.verification._budget import (
    MIN_ROUNDS,
    projected_full_runs,
)

#: The baseline (trial 0) and a trained finalist cost one full run each; timed ones 0.1.
COSTS = {0: 1.0, 5: 0.1, 6: 0.1, 9: 1.2}


def test_the_projection_counts_warm_up_race_and_confirmation() -> None:
    # warm-up 1.2 + race 2 x (1 + 0.1 + 1.2) + confirm 8 x (1 + 0.1 + 1.2)
    assert projected_full_runs(COSTS, 0, (5, 9), (9,), 8, 2) == pytest.approx(24.2)


def test_a_trained_and_a_timed_finalist_of_one_answer_race_in_lanes_of_their_own() -> None:
    """One lane each (the same model, trained and timed): no race, and the confirmation pays
    for both, the trained one's full run and the timed one's seconds."""
    costs = {0: 1.0, 4: 1.1, 5: 0.1}
    # warm-up 1.1 + confirm 8 x (1 + 1.1 + 0.1)
    assert projected_full_runs(costs, 0, (4, 5), (), 8, 0, frozenset({4})) == pytest.approx(18.7)
    plan = fit_budget(costs, 0, (4, 5), (), frozenset({4}), 8, 2, None)
    assert (plan.finalists, plan.race_rounds) == ((4, 5), 0)
    # Two timed finalists share a lane: they race.
    plan = fit_budget({**costs, 6: 0.1}, 0, (4, 5, 6), (), frozenset({4}), 8, 2, None)
    assert plan.race_rounds == 2


def test_under_short_evidence_a_lone_trained_finalist_races_as_its_futility_pilot() -> None:
    """A lane of one trained finalist each, under short evidence (``pilot``): the race runs,
    and the projection prices it: warm-up 0.05 + race 2 x (0.05 + 0.05 + 0.01) + confirm
    8 x (0.05 + 0.05 + 0.01). Timed finalists alone need no pilot."""
    costs = {0: 0.05, 4: 0.05, 5: 0.01}
    plan = fit_budget(costs, 0, (4, 5), (), frozenset({4}), 8, 2, None, pilot=True)
    assert (plan.finalists, plan.race_rounds) == ((4, 5), 2)
    assert plan.projected_full_runs == pytest.approx(0.05 + 2 * 0.11 + 8 * 0.11)
    assert fit_budget(costs, 0, (4, 5), (), frozenset({4}), 8, 2, None).race_rounds == 0
    timed = fit_budget(costs, 0, (5,), (), frozenset(), 8, 2, None, pilot=True)
    assert timed.race_rounds == 0


def test_without_a_cap_the_plan_stays() -> None:
    plan = fit_budget(COSTS, 0, (5, 6, 9), (9,), frozenset({9}), 8, 2, None)
    assert (plan.finalists, plan.rounds, plan.race_rounds, plan.notes) == ((5, 6, 9), 8, 2, ())


def test_the_dearest_finalists_go_first_then_the_rounds() -> None:
    # The trained model change (1.2 a run) goes first; the two timed finalists keep 8 rounds.
    plan = fit_budget(COSTS, 0, (5, 6, 9), (9,), frozenset({9}), 8, 2, 12.0)
    assert plan.finalists == (5, 6)
    assert plan.rounds == 8 and plan.race_rounds == 2
    assert len(plan.notes) == 1
    assert "not verified: trial 9 (a model change, trained" in plan.notes[0]
    assert plan.projected_full_runs <= 12.0


def test_the_screens_fastest_is_left_out_last_where_it_alone_fits() -> None:
    # A trained same-model finalist (bf16, say) that the screen ranks first, and a timed one:
    # the timed one goes, and the fastest is confirmed over fewer rounds.
    costs = {0: 1.0, 4: 1.1, 5: 0.1}
    plan = fit_budget(costs, 0, (4, 5), (), frozenset({4}), 10, 2, 8.0, fastest=4)
    assert plan.finalists == (4,)
    assert MIN_ROUNDS <= plan.rounds < 10 and plan.projected_full_runs <= 8.0
    assert "not verified: trial 5 (the same model, timed" in plan.notes[0]
    # Where it alone cannot fit at the fewest rounds, the dearest goes first, as without it.
    tight = fit_budget(costs, 0, (4, 5), (), frozenset({4}), 10, 2, 3.0, fastest=4)
    assert tight.finalists == (5,)


def test_a_lone_finalist_keeps_fewer_rounds() -> None:
    plan = fit_budget(COSTS, 0, (9,), (9,), frozenset({9}), 8, 2, 12.0)
    assert plan.finalists == (9,)
    assert MIN_ROUNDS <= plan.rounds < 8
    assert plan.projected_full_runs <= 12.0
    assert "confirmation rounds instead of 8" in plan.notes[0]


def test_a_costly_timed_finalist_gives_way_to_a_cheap_one() -> None:
    # A compiled finalist pays its compile in every fresh process: 1.5 a run against 0.1.
    costs = {0: 0.1, 5: 0.1, 7: 1.5}
    plan = fit_budget(costs, 0, (7, 5), (), frozenset(), 10, 2, 3.0)
    assert plan.finalists == (5,)
    assert plan.rounds == 10
    assert "not verified: trial 7 (the same model, timed" in plan.notes[0]


def test_a_cap_nothing_fits_says_so() -> None:
    plan = fit_budget(COSTS, 0, (5,), (), frozenset(), 8, 2, 0.5)
    assert plan.rounds == MIN_ROUNDS
    assert "pass the 0.5 the cap leaves" in plan.notes[-1]


def test_min_rounds_below_two_is_refused() -> None:
    with pytest.raises(ValueError, match="fit_budget: min_rounds >= 2"):
        fit_budget(COSTS, 0, (5,), (), frozenset(), 8, 2, 1.0, min_rounds=1)


def test_the_end_to_end_speedup_counts_the_compilation() -> None:
    from autotune.study.storage import VerificationRecord
    from autotune.study.verification._throughput import end_to_end, end_to_end_seconds

    def row(step_s: float, compile_s: float) -> VerificationRecord:
        return VerificationRecord(
            round_index=0, seed=0, trial_number=1, is_baseline=False, simulated=False,
            failure=None, failure_detail=None, throughput_sps=1.0, throughput_iqr_sps=0.0,
            step_time_s=step_s, val_metric=None, peak_memory_bytes=1, train_s=1.0,
            config_json="{}", compile_s=compile_s,
        )  # fmt: skip

    # 375 steps: the baseline 20 ms a step; compiled 14 ms a step, after 4 s of compiling.
    base, compiled = row(0.020, 0.0), row(0.014, 4.0)
    assert end_to_end_seconds(base, 375) == pytest.approx(7.5)
    assert end_to_end_seconds(compiled, 375) == pytest.approx(9.25)
    speedup, _ = end_to_end([(compiled, base), (compiled, base)], 375)
    assert speedup == pytest.approx(7.5 / 9.25)  # 1.43x a step, 0.81x a whole run
    long_run, _ = end_to_end([(compiled, base), (compiled, base)], 100_000)
    assert long_run is not None and long_run > 1.4
    assert end_to_end([(compiled, base)], None) == (None, None)


def test_a_timed_finalist_against_a_short_trained_baseline_is_compared_over_the_budget() -> None:
    """Short evidence: the baseline trains 600 of the budget's 12,000 steps (its loop 30 s),
    the same-computation finalist is timed. Both are projected over the budget from their step
    seconds; the baseline's loop alone read as a run 20 times shorter (the long run's verdict
    said "0.06x end to end" for a 1.25x channels_last)."""
    from autotune.study.storage import VerificationRecord
    from autotune.study.verification._throughput import end_to_end

    def row(step_s: float, val_metric: float | None, train_s: float) -> VerificationRecord:
        return VerificationRecord(
            round_index=0, seed=0, trial_number=1, is_baseline=False, simulated=False,
            failure=None, failure_detail=None, throughput_sps=1.0, throughput_iqr_sps=0.0,
            step_time_s=step_s, val_metric=val_metric, peak_memory_bytes=1, train_s=train_s,
            config_json="{}", compile_s=0.0,
        )  # fmt: skip

    base, timed = row(0.050, 0.95, 30.0), row(0.040, None, 2.0)
    speedup, _ = end_to_end([(timed, base), (timed, base)], 12_000)
    assert speedup == pytest.approx(1.25)
    # Two trained runs of the same share compare their loops as they ran.
    trained = row(0.040, 0.95, 24.0)
    speedup, _ = end_to_end([(trained, base), (trained, base)], 12_000)
    assert speedup == pytest.approx(1.25)
