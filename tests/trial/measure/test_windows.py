"""Timed windows and their statistics (autotune/trial/measure/_windows.py)."""

from __future__ import annotations

import pytest

from autotune.testing import FakeClock
from autotune.trial.measure import (
    WindowClock,
    plan_reused_windows,
    plan_windows,
    spread_warning,
    summarize_windows,
)
from autotune.trial.measure._windows import (
    IQR_GROSS_WARN_RATIO,
    IQR_WARN_RATIO,
)

# --------------------------------------------------------------------------------------------
# summarize_windows


def test_summarize_windows_of_uneven_step_counts() -> None:
    # The stretches between a time-to-accuracy trial's evaluations: 4 steps in 2 s, 1 in 1 s.
    stats = summarize_windows([2.0, 1.0], window_steps=[4, 1], samples_per_step=10)

    assert stats.window_throughputs_sps == (20.0, 10.0)
    assert stats.step_time_s == pytest.approx(0.75)  # median of 0.5 and 1.0 s
    assert stats.timed_steps == 5
    with pytest.raises(ValueError, match="2 step counts for 1 windows"):
        summarize_windows([1.0], window_steps=[1, 2], samples_per_step=10)


def test_windows_give_throughput_and_step_time() -> None:
    # Three windows of two steps of 10 samples each: 2 s, 4 s and 8 s.
    stats = summarize_windows([2.0, 4.0, 8.0], window_steps=2, samples_per_step=10)

    assert stats.window_throughputs_sps == pytest.approx((10.0, 5.0, 2.5))
    assert stats.throughput_sps == pytest.approx(5.0)
    assert stats.throughput_iqr_sps == pytest.approx(3.75)
    # Step times per window: 1, 2 and 4 s; the 90th percentile at position 1.8 of 2.
    assert stats.step_time_s == pytest.approx(2.0)
    assert stats.step_time_p90_s == pytest.approx(2.0 + 0.8 * 2.0)
    assert stats.timed_steps == 6


def test_a_spread_of_a_tenth_of_the_median_is_warned_of_as_torch_benchmark_does() -> None:
    # torch/utils/benchmark/utils/common.py: _IQR_WARN_THRESHOLD and _IQR_GROSS_WARN_THRESHOLD.
    assert (IQR_WARN_RATIO, IQR_GROSS_WARN_RATIO) == (0.1, 0.25)
    # Windows of 10, 5 and 2.5 samples/s: IQR 3.75 over median 5.
    stats = summarize_windows([2.0, 4.0, 8.0], window_steps=2, samples_per_step=10)

    assert spread_warning(stats.throughput_iqr_sps, stats.throughput_sps) == (
        "the timed windows' interquartile range is 75.0 % of their median: "
        "this suggests significant environmental influence"
    )
    assert spread_warning(10.0, 100.0) == (  # meets_confidence: iqr / median < 0.1 passes
        "the timed windows' interquartile range is 10.0 % of their median: "
        "this could indicate system fluctuation"
    )
    assert spread_warning(9.9, 100.0) is None
    steady = summarize_windows([1.0, 1.01, 0.99], window_steps=2, samples_per_step=10)
    assert spread_warning(steady.throughput_iqr_sps, steady.throughput_sps) is None
    # Nothing to judge: a figure not measured, or no throughput.
    assert spread_warning(None, 100.0) is None
    assert spread_warning(10.0, None) is None
    assert spread_warning(10.0, 0.0) is None
    assert spread_warning(float("nan"), 100.0) is None


def test_no_windows_are_refused() -> None:
    with pytest.raises(ValueError, match="no timed steps"):
        summarize_windows([], window_steps=2, samples_per_step=8)


@pytest.mark.parametrize("bad", [0.0, -1.0])
def test_non_positive_window_time_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="window times must be > 0 s"):
        summarize_windows([1.0, bad], window_steps=2, samples_per_step=8)


def test_empty_windows_are_refused() -> None:
    with pytest.raises(ValueError, match="window_steps >= 1"):
        summarize_windows([1.0], window_steps=0, samples_per_step=8)


# --------------------------------------------------------------------------------------------
# plan_windows


def test_plan_warmup_then_equal_windows_then_untimed_steps() -> None:
    # 22 steps (one epoch of digits at batch 64): 5 warm-up, 17 left for 5 windows of 3,
    # and the last 2 steps train untimed.
    plan = plan_windows(22, warmup_steps=5, windows=5, min_window_steps=2)

    assert (plan.warmup_steps, plan.windows, plan.window_steps) == (5, 5, 3)
    assert plan.timed_steps == 15
    assert plan.window_edges == (5, 8, 11, 14, 17, 20)
    assert plan.edges == (0, 5, 8, 11, 14, 17, 20, 22)


def test_plan_fewer_windows_when_steps_run_short() -> None:
    # 9 steps, 5 of them warm-up: 4 left make 2 windows of the minimum 2 steps.
    plan = plan_windows(9, warmup_steps=5, windows=5, min_window_steps=2)

    assert (plan.warmup_steps, plan.windows, plan.window_steps) == (5, 2, 2)
    assert plan.edges == (0, 5, 7, 9)


def test_plan_compiling_reads_the_clock_after_the_first_step() -> None:
    plan = plan_windows(20, warmup_steps=5, windows=5, min_window_steps=2, compiled=True)

    assert plan.edges[:3] == (0, 1, 5)


def test_plan_compiling_makes_the_first_step_warm_up() -> None:
    plan = plan_windows(20, warmup_steps=0, windows=5, min_window_steps=2, compiled=True)

    assert plan.warmup_steps == 1
    assert plan.edges[:2] == (0, 1)
    assert plan.window_edges[0] == 1


def test_plan_of_a_cuda_graph_mode_reads_the_clock_after_the_recording_step_too() -> None:
    # CUDA graphs record on the second call: compile_s counts steps 1 and 2, the recording
    # included.
    plan = plan_windows(
        20, warmup_steps=0, windows=5, min_window_steps=2, compiled=True, compile_steps=2
    )

    assert plan.warmup_steps == 2 and plan.compile_steps == 2
    assert plan.edges[:3] == (0, 1, 2) and plan.window_edges[0] == 2
    # Eager trials read no such edges, whatever they are asked.
    eager = plan_windows(20, warmup_steps=0, windows=5, compile_steps=2)
    assert eager.compile_steps == 1 and 1 not in eager.edges


@pytest.mark.parametrize("compiled", [False, True])
def test_plan_always_times_one_step(compiled: bool) -> None:
    plan = plan_windows(1, warmup_steps=5, windows=5, min_window_steps=2, compiled=compiled)

    assert (plan.warmup_steps, plan.windows, plan.window_steps) == (0, 1, 1)
    assert plan.edges == (0, 1)


@pytest.mark.parametrize("total_steps", [1, 2, 3, 7, 22, 100, 1000])
@pytest.mark.parametrize("warmup_steps", [0, 1, 5, 50])
@pytest.mark.parametrize("windows", [1, 3, 5])
@pytest.mark.parametrize("compiled", [False, True])
def test_plan_reads_the_clock_at_most_twice_per_window(
    total_steps: int, warmup_steps: int, windows: int, compiled: bool
) -> None:
    plan = plan_windows(
        total_steps,
        warmup_steps=warmup_steps,
        windows=windows,
        min_window_steps=2,
        compiled=compiled,
    )

    # Windows share their edges; the start, the compile edge and the end add at most 3.
    assert len(plan.edges) <= plan.windows + 4 <= 2 * plan.windows + 3
    assert plan.edges == tuple(sorted(set(plan.edges)))
    assert plan.edges[0] == 0 and plan.edges[-1] == total_steps
    assert set(plan.window_edges) <= set(plan.edges)
    assert 1 <= plan.timed_steps <= total_steps - plan.warmup_steps
    assert plan.windows <= windows


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"total_steps": 0}, "no timed steps"),
        ({"windows": 0}, "windows >= 1"),
        ({"min_window_steps": 0}, "min_window_steps >= 1"),
    ],
)
def test_plan_refuses_bad_arguments(kwargs: dict[str, int], match: str) -> None:
    arguments = {"total_steps": 10, "warmup_steps": 2, "windows": 3, "min_window_steps": 1}
    arguments.update(kwargs)
    total = arguments.pop("total_steps")

    with pytest.raises(ValueError, match=match):
        plan_windows(total, **arguments)


def test_a_reused_plan_times_one_epoch_after_the_same_warm_up() -> None:
    full = plan_windows(110, warmup_steps=5, windows=5, min_window_steps=2)
    reused = plan_reused_windows(110, steps_per_epoch=22, warmup_steps=5, windows=5)

    assert (reused.warmup_steps, reused.total_steps) == (full.warmup_steps, 27)
    assert (reused.windows, reused.window_steps) == (5, 4)  # 22 steps: 2 untimed at the end
    # At least the windows' minimum steps; never beyond the budget.
    short = plan_reused_windows(
        110, steps_per_epoch=3, warmup_steps=5, windows=5, min_window_steps=2
    )
    assert short.total_steps == 15
    assert plan_reused_windows(20, steps_per_epoch=22, warmup_steps=5, windows=5).total_steps == 20


# --------------------------------------------------------------------------------------------
# WindowClock


@pytest.mark.parametrize("compiled", [False, True])
def test_a_timed_loop_syncs_only_at_the_window_edges(compiled: bool) -> None:
    # The loop of autotune.trial.training on a fake clock: 100 steps, the first 5 warm-up at 1 s each
    # (the first at 10 s when compiling), then 0.1 s each; 10 samples per step.
    plan = plan_windows(100, warmup_steps=5, windows=5, min_window_steps=2, compiled=compiled)
    fake = FakeClock()
    clock = WindowClock(fake.sync, fake.clock)
    edges = set(plan.edges)

    marks_s = {0: clock.mark()}
    for step in range(1, 101):
        fake.now_s += 10.0 if compiled and step == 1 else 1.0 if step <= 5 else 0.1
        if step in edges:
            marks_s[step] = clock.mark()
    stats = plan.summarize(marks_s, samples_per_step=10)

    # 95 timed steps make 5 windows of 19: edges 0, 5, 24, 43, 62, 81, 100 (and 1 compiling).
    assert fake.syncs == fake.reads == len(plan.edges) == 7 + compiled
    assert fake.syncs <= 2 * plan.windows + 3
    assert stats.window_throughputs_sps == pytest.approx((100.0,) * 5)
    assert stats.step_time_s == pytest.approx(0.1)
    assert stats.timed_steps == 95
    assert marks_s[100] - marks_s[0] == pytest.approx(4.0 + (10.0 if compiled else 1.0) + 9.5)
    if compiled:
        assert marks_s[1] - marks_s[0] - stats.step_time_s == pytest.approx(9.9)


def test_window_clock_syncs_before_every_read() -> None:
    fake = FakeClock()

    clock = WindowClock(fake.sync, fake.clock)
    for _ in range(3):
        clock.mark()

    assert fake.events == ["sync", "read"] * 3


def test_window_clock_defaults_to_a_real_clock() -> None:
    clock = WindowClock(lambda: None)
    start = clock.mark()
    assert 0.0 <= clock.mark() - start < 1.0
