"""The fixed-budget loop (autotune/trial/training/_throughput.py): one real trial per knob, each in
child processes through autotune/study/search/_launcher.py, and the loop's device synchronizations in this
process. Every trial is one epoch of digits with a tiny model: seconds each, except
torch.compile (20-30 s cold on two cores)."""

from __future__ import annotations

import math

import pytest

from autotune.core.config import DataSettings, ReusedMetric
from autotune.study.search import run_trial
from autotune.testing import make_trial_config
from autotune.trial.training._throughput import train_for_throughput
from autotune.trial.workloads.builtin.data import load_dataset
from tests.trial.training.loops import N_TRAIN, TIMEOUT_S, check, counted_training, train_here

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    "device",
    ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)],
)
@pytest.mark.parametrize("family", ["cnn", "mlp"])
def test_eager_fp32(device: str, family: str) -> None:
    config = make_trial_config(device=device, family=family, width=8 if family == "cnn" else 64)

    m = run_trial(config.model_copy(update={"timeout_s": TIMEOUT_S}))

    if device == "cuda":  # the context counted where NVML gives it, else why it does not
        assert (m.memory_kind == "cuda_peak_plus_context") != ("process_memory_error" in m.extra)
    check(m, config, "cpu_peak_rss_growth" if device == "cpu" else m.memory_kind)
    assert m.compile_s == 0.0
    assert len(m.window_throughputs_sps) == 5


@pytest.mark.gpu
@pytest.mark.parametrize("compile_mode", ["default", "max-autotune"])
def test_a_compiled_tf32_trial_on_a_gpu(compile_mode: str) -> None:
    # TF32 set through the new fp32_precision API alone made Inductor's legacy reads raise
    # "mix of the legacy and new APIs" (issue 38, item 1): every compiled tf32 trial failed.
    config = make_trial_config(device="cuda", precision="tf32", compile_mode=compile_mode)

    m = run_trial(config.model_copy(update={"timeout_s": TIMEOUT_S}))

    check(m, config, m.memory_kind)
    assert m.compile_s > 0.0


def test_mlp_learns_in_one_epoch() -> None:
    # Digits are easy: one epoch of AdamW takes an MLP well above chance (10%).
    config = make_trial_config(family="mlp", width=64, train={"lr": 3.0e-3})

    m = run_trial(config.model_copy(update={"timeout_s": TIMEOUT_S}))

    assert m.val_metric > 0.5


def test_channels_last() -> None:
    config = make_trial_config(memory_format="channels_last")
    check(run_trial(config.model_copy(update={"timeout_s": TIMEOUT_S})), config)


def test_bf16_autocast() -> None:
    config = make_trial_config(precision="bf16")
    check(run_trial(config.model_copy(update={"timeout_s": TIMEOUT_S})), config)


def test_compile_default() -> None:
    config = make_trial_config(family="mlp", width=32, compile_mode="default")

    m = run_trial(config.model_copy(update={"timeout_s": TIMEOUT_S}))

    check(m, config)
    assert m.compile_s > 0.0  # the first step holds the compilation


def test_one_dataloader_worker() -> None:
    config = make_trial_config(num_workers=1)
    check(run_trial(config.model_copy(update={"timeout_s": TIMEOUT_S})), config)


def test_ddp_two_processes_with_gloo() -> None:
    config = make_trial_config(gpu_count=2)

    m = run_trial(config.model_copy(update={"timeout_s": TIMEOUT_S}))

    check(m, config)
    assert m.steps == 11  # ceil(1438 / 2) // 64
    assert m.samples_per_step == 128


def test_max_steps_caps_the_budget() -> None:
    config = make_trial_config(train={"epochs": 3, "max_steps": 9}, measure={"min_timed_s": 0.0})

    m = run_trial(config.model_copy(update={"timeout_s": TIMEOUT_S}))

    check(m, config)
    assert m.steps == 9
    assert m.timed_steps == 4  # 9 - 5 warm-up steps, in windows of >= 2 steps


def test_synthetic_data_probe() -> None:
    config = make_trial_config(
        family="mlp", width=32, data={"name": "synthetic", "synthetic_samples": 640}
    )

    m = run_trial(config.model_copy(update={"timeout_s": TIMEOUT_S}))

    assert m.steps == 512 // 64
    assert m.throughput_sps > 0
    assert 0.0 <= m.val_metric <= 1.0


def test_dataset_size_assumption() -> None:
    assert len(load_dataset(DataSettings(name="digits")).train_x) == N_TRAIN


def test_the_loop_syncs_only_at_window_edges() -> None:
    # Four epochs of digits at batch 64: 88 steps, 5 warm-up, 5 windows of 16, 3 untimed.
    config = make_trial_config(
        family="mlp", width=32, train={"epochs": 4}, measure={"min_timed_s": 0.0}
    )

    m, syncs = train_here(config)

    windows = len(m.window_throughputs_sps)
    assert (m.steps, windows, m.timed_steps) == (88, 5, 80)
    # The start, the end of warm-up, the windows' shared edges and the end: 0, 5, 21, 37, 53,
    # 69, 85, 88. A sync per step would have made 89. The gradient-noise probes
    # (autotune.trial.training._noise) pause the clock around each: two syncs a probe, off the clock.
    probe_syncs = 2 * m.extra["gradient_noise_probes"]
    assert m.extra["gradient_noise_probes"] == 8
    assert syncs - probe_syncs == 8
    assert syncs - probe_syncs <= 2 * windows + 3
    assert syncs < m.steps / 3
    # The whole loop holds the windows: 16 steps of 64 samples each.
    window_s = [16 * 64 / sps for sps in m.window_throughputs_sps]
    assert m.train_s > sum(window_s)
    assert m.step_time_s == pytest.approx(sorted(window_s)[2] / 16)


def test_timing_only_steps_also_sync_only_at_their_window_edges() -> None:
    # One epoch: 22 steps, 5 warm-up, 5 windows of 3 (15 timed), 2 untimed; then timing-only
    # windows until three times what the whole budget took (however busy the shared CPU is).
    budget, _ = train_here(make_trial_config(family="mlp", width=32))
    min_timed_s = round(3 * budget.train_s + 0.1, 3)
    config = make_trial_config(family="mlp", width=32, measure={"min_timed_s": min_timed_s})

    m, syncs = train_here(config)

    assert m.extra["timing_extension_steps"] == m.timed_steps + 1
    assert m.timed_steps > 15
    # The budget's 8 reads, then the extension's: after its untimed step and at 5 window ends.
    assert syncs == 8 + 6 + 2 * m.extra["gradient_noise_probes"]  # and the probes' pauses


def test_short_budgets_are_timed_longer_without_changing_the_accuracy() -> None:
    """advanced.measure.min_timed_s: the same trial timed over its budget alone (0 s) and extended to
    at least three times the budget's windows; the extension runs after the evaluation."""
    short = make_trial_config(measure={"min_timed_s": 0.0})
    a = run_trial(short.model_copy(update={"timeout_s": TIMEOUT_S}))
    # Three times the whole training loop of the first: more than the timed windows take in
    # the next process too, unless the shared CPU gets three times slower in between.
    extended = make_trial_config(measure={"min_timed_s": round(3 * a.train_s + 0.1, 3)})
    b = run_trial(extended.model_copy(update={"timeout_s": TIMEOUT_S}))

    assert a.extra["timing_extension_steps"] == 0
    assert b.extra["timing_extension_steps"] > a.timed_steps
    # About min_timed_s of windows, sized from the budget's median step: 5 equal windows
    # after one untimed step. (Their seconds are not checked: on a shared CPU a step of the
    # budget and one of the extension can differ tenfold.)
    assert b.timed_steps == b.extra["timing_extension_steps"] - 1
    assert b.timed_steps % 5 == 0 and len(b.window_throughputs_sps) == 5
    assert b.val_metric == a.val_metric and b.steps == a.steps  # same budget, same seed
    check(a, short)
    check(b, extended)


def test_a_trial_below_its_floor_stops_at_its_second_windows_end() -> None:
    # Four epochs of digits at batch 64: 5 warm-up steps, then windows of 16 steps. At a
    # floor no CPU reaches, a fast trial (its steps never run for the 2 s a stretch of early
    # evidence needs) stops at the second window's end, both windows below the floor,
    # without evaluating.
    config = make_trial_config(
        family="mlp", width=32, train={"epochs": 4}, min_throughput_sps=1.0e12
    )

    m, syncs = train_here(config)

    assert m.too_slow is True
    assert (m.steps, m.timed_steps, len(m.window_throughputs_sps)) == (37, 32, 2)
    assert 0 < m.throughput_sps < 1.0e12
    assert math.isnan(m.val_metric)
    assert syncs == 4  # the start, the end of warm-up, the ends of the two windows
    assert m.extra["min_throughput_sps"] == 1.0e12


def test_a_trial_above_its_floor_runs_its_whole_budget() -> None:
    config = make_trial_config(family="mlp", width=32, min_throughput_sps=1.0)

    m = run_trial(
        config.model_copy(update={"timeout_s": TIMEOUT_S})
    )  # a fresh process: its peak memory is its own

    assert m.too_slow is False
    check(m, config)


def test_ddp_ranks_stop_together_below_the_floor() -> None:
    config = make_trial_config(gpu_count=2, min_throughput_sps=1.0e12)

    m = run_trial(config.model_copy(update={"timeout_s": TIMEOUT_S}))

    # DDP ranks decide together at the second window's end (5 warm-up steps, windows of 2).
    assert m.too_slow is True and (m.steps, m.timed_steps) == (9, 4)
    assert m.samples_per_step == 128


def test_a_reused_trial_trains_only_its_warm_up_and_windows_and_never_evaluates() -> None:
    reuse = ReusedMetric(from_trial=4, val_metric=0.123, train_loss=0.456, steps=66)
    training, calls = counted_training(make_trial_config(train={"epochs": 3}, reuse=reuse))

    m = train_for_throughput(training, 0, 1)

    # digits: 22 steps an epoch; 5 warm-up steps, then one epoch of 5 windows of 4 steps.
    assert calls == ["step"] * (5 + 22)
    assert (m.steps, m.timed_steps) == (27, 20)
    assert (m.val_metric, m.train_loss) == (0.123, 0.456)
    assert m.throughput_sps > 0 and m.peak_memory_bytes >= 0


def test_ddp_with_a_global_batch_accumulates_micro_batches() -> None:
    # 2 ranks x micro-batches of 16 x 2 accumulation steps = the global batch of 64.
    config = make_trial_config(batch_size=16, gpu_count=2, train={"global_batch_size": 64})

    m = run_trial(config.model_copy(update={"timeout_s": TIMEOUT_S}))

    assert m.samples_per_step == 64
    assert m.extra["accumulation_steps"] == 2
    assert m.steps == (N_TRAIN // 2) // 32  # each rank's 719 samples in batches of 2 x 16
    assert 0.0 <= m.val_metric <= 1.0 and m.throughput_sps > 0
