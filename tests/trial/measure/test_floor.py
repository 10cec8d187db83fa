"""The throughput floor's rule (autotune/trial/measure/_floor.py): which steps are evidence of a
trial too slow to finish. A fake host clock; nothing is timed."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from autotune.trial.measure import FLOOR_JUDGED_WINDOWS, ThroughputFloor, plan_windows

PLAN = plan_windows(88, warmup_steps=5, windows=5)  # windows of 16 steps from step 5


def _driven(floor: ThroughputFloor, now: list[float]) -> Callable[[int, float], bool]:
    """One step of ``seconds`` on the fake clock, then the early judgement."""

    def after(step: int, seconds: float) -> bool:
        now[0] += seconds
        return floor.crossed_early(step)

    return after


def _windows(floor: ThroughputFloor, windows_s: list[float]) -> list[bool]:
    """The windows' ends of PLAN reached after ``windows_s`` seconds each: each edge's
    verdict."""
    marks_s = {PLAN.warmup_steps: 0.0}
    verdicts = []
    for i, seconds in enumerate(windows_s, start=1):
        step = PLAN.warmup_steps + i * PLAN.window_steps
        marks_s[step] = marks_s[step - PLAN.window_steps] + seconds
        verdicts.append(floor.below_at_edge(step, marks_s))
    return verdicts


def test_a_trial_stops_early_after_two_stretches_of_2_s_below_the_floor() -> None:
    now = [0.0]
    floor = ThroughputFloor(100.0, PLAN, 64, world_size=1, clock=lambda: now[0])
    after = _driven(floor, now)

    assert not after(1, 30.0)  # the first step (compilation): never judged
    assert not after(2, 1.5)  # 1 step in 1.5 s is below 100 samples/s, but under 2 s
    assert not after(3, 0.6)  # 2 steps in 2.1 s: 61 samples/s, one stretch below
    assert not after(4, 1.0)
    assert after(5, 1.0)  # the second stretch: 2 steps in 2.0 s, below too: stop
    assert floor.evidence() == (4, (pytest.approx(4.1),))
    assert not floor.judging


def test_one_slow_stretch_between_fast_ones_stops_nothing() -> None:
    # A burst of steal time: 2 s of one step, between stretches at 640 samples/s.
    now = [0.0]
    floor = ThroughputFloor(100.0, PLAN, 64, world_size=1, clock=lambda: now[0])
    after = _driven(floor, now)

    assert not after(1, 1.0)
    assert not after(2, 2.0)  # a stretch of one step at 32 samples/s: below
    assert not any(after(step, 0.1) for step in range(3, 23))  # the next at 640: above
    assert not after(23, 2.0)  # below again, but the stretch before it was above
    assert not any(after(step, 0.1) for step in range(24, 37))
    assert floor.evidence()[0] == 35


def test_one_late_step_in_a_fast_trial_is_no_evidence() -> None:
    now = [0.0]
    floor = ThroughputFloor(100.0, PLAN, 64, world_size=1, clock=lambda: now[0])
    after = _driven(floor, now)

    assert not after(1, 0.5)
    assert not after(2, 0.9)
    assert not any(after(step, 0.01) for step in range(3, 37))


def test_the_better_of_the_first_two_windows_decides_at_their_ends() -> None:
    # 16 steps of 64 samples: 0.5 s is 2,048 samples/s, 2 s is 512; the floor is 1,000.
    assert FLOOR_JUDGED_WINDOWS == 2

    def floor() -> ThroughputFloor:
        return ThroughputFloor(1000.0, PLAN, 64, world_size=1, clock=lambda: 0.0)

    stopped = floor()
    assert _windows(stopped, [2.0, 2.0]) == [False, True]  # both below: stop at the second
    assert stopped.evidence() == (16, (2.0, 2.0))
    noisy = floor()
    assert _windows(noisy, [2.0, 0.5, 2.0]) == [False, False, False]  # the second clears it
    assert not noisy.judging
    cleared = floor()
    assert _windows(cleared, [0.5, 2.0]) == [False, False]  # the first clears it
    assert not cleared.judging
    # Cleared, its early judgement is off too: no later stretch can stop it.
    assert not cleared.crossed_early(30)


def test_a_plan_with_one_window_is_judged_on_it() -> None:
    plan = plan_windows(21, warmup_steps=5, windows=5, min_window_steps=16)  # one window
    floor = ThroughputFloor(1000.0, plan, 64, world_size=1, clock=lambda: 0.0)

    assert floor.judged_windows == 1 and floor.end_step == 21
    assert floor.below_at_edge(21, {5: 0.0, 21: 2.0})


def test_ddp_ranks_take_rank_0s_decisions() -> None:
    asked: list[list[bool]] = []

    class Agreement:
        def __init__(self, answer: bool) -> None:
            self.answer = answer

        def any(self, flags: list[bool]) -> list[bool]:
            asked.append(flags)
            return [self.answer]

    now = [0.0]
    rank1 = ThroughputFloor(
        100.0, PLAN, 64, world_size=2, clock=lambda: now[0], agreement=Agreement(True), rank=1
    )
    assert not rank1.crossed_early(1)  # the first step: no collective on any rank
    assert asked == []
    assert rank1.crossed_early(2) and asked == [[False]]  # rank 1 alone would go on
    # At a window's end, rank 0's reading clears every rank: the early judgement stops
    # asking (no rank calls the collective any more).
    rank1 = ThroughputFloor(
        1000.0, PLAN, 64, world_size=2, clock=lambda: now[0], agreement=Agreement(False), rank=1
    )
    asked.clear()
    assert _windows(rank1, [2.0]) == [False] and asked == [[False]]
    assert not rank1.judging and not rank1.crossed_early(22) and len(asked) == 1


def test_the_cuda_graph_recording_step_is_no_evidence_of_a_slow_trial() -> None:
    # reduce-overhead on CUDA: step 1 compiles, step 2 records the graphs (seconds), then
    # steps of 10 ms, far above 100 samples/s at 64 samples a step.
    plan = plan_windows(88, warmup_steps=5, windows=5, compiled=True, compile_steps=2)
    now = [0.0]
    floor = ThroughputFloor(100.0, plan, 64, world_size=1, clock=lambda: now[0])
    after = _driven(floor, now)

    assert floor.evidence_start_step == 2
    assert not after(1, 30.0)  # compilation
    assert not after(2, 5.0)  # the recording: 5 s, which step 1's clock would have judged
    assert not any(after(step, 0.01) for step in range(3, 37))
    assert floor.evidence() == (34, (pytest.approx(0.34),))


def test_a_doors_flop_counted_step_is_no_evidence_of_a_slow_trial() -> None:
    now = [0.0]
    floor = ThroughputFloor(100.0, PLAN, 64, world_size=1, clock=lambda: now[0], excluded_step=5)
    after = _driven(floor, now)

    assert not after(1, 1.0)
    assert not any(after(step, 0.01) for step in (2, 3, 4))
    assert not after(5, 3.0)  # counted under FlopCounterMode: slow, and left out
    assert not any(after(step, 0.01) for step in range(6, 37))
    assert floor.evidence() == (34, (pytest.approx(0.34),))
    # A trial truly below the floor still stops, its FLOP step left out of the evidence.
    now = [0.0]
    floor = ThroughputFloor(200.0, PLAN, 64, world_size=1, clock=lambda: now[0], excluded_step=5)
    after = _driven(floor, now)
    assert not after(1, 1.0)
    assert not any(after(step, 0.5) for step in (2, 3, 4))  # 1.5 s: under 2 s
    assert not after(5, 3.0)  # the FLOP step alone does not decide
    assert not after(6, 0.5)  # 4 steady steps in 2 s: 128 samples/s < 200, one stretch
    assert not any(after(step, 0.5) for step in (7, 8, 9))
    assert after(10, 0.5)  # the second stretch of 4 steps in 2 s
    assert floor.evidence() == (8, (pytest.approx(4.0),))


def test_misuse_names_the_call() -> None:
    with pytest.raises(ValueError, match=r"ThroughputFloor\(floor_sps=0"):
        ThroughputFloor(0.0, PLAN, 64, world_size=1)
    with pytest.raises(ValueError, match=r"ThroughputFloor\(world_size=2\)"):
        ThroughputFloor(100.0, PLAN, 64, world_size=2)
