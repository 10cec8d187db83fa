"""The mock device's cost model (autotune/trial/devices/mock.py)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from autotune.core.config import ReusedMetric
from autotune.core.hardware import detect_capabilities
from autotune.core.hardware.simulated import DEFAULT_PROFILE
from autotune.testing import make_trial_config
from autotune.trial.devices.mock import _stopped_too_slow, simulate
from autotune.trial.measure import plan_windows


def _mock(**overrides: object):
    return make_trial_config(device="mock", **overrides)


def test_same_config_gives_the_same_measurement() -> None:
    assert simulate(_mock(width=32, precision="bf16")) == simulate(
        _mock(width=32, precision="bf16")
    )


def test_seed_changes_the_noise() -> None:
    first, second = simulate(_mock(seed=0)), simulate(_mock(seed=1))

    assert first.throughput_sps != second.throughput_sps
    assert first.throughput_sps == pytest.approx(second.throughput_sps, rel=0.1)


def test_noise_free_values_are_the_same_for_every_seed_and_the_noise_centres_on_them() -> None:
    config = _mock(width=32, batch_size=64)
    expected = [simulate(config.model_copy(update={"seed": s}), noise=False) for s in (0, 1)]
    noisy = [simulate(config.model_copy(update={"seed": s})) for s in range(40)]

    # Another seed is another initialization: its check's losses differ; nothing else does.
    assert expected[0].extra["check_losses"] != expected[1].extra["check_losses"]
    without = [
        dataclasses.replace(m, extra={k: v for k, v in m.extra.items() if k != "check_losses"})
        for m in expected
    ]
    assert without[0] == without[1]
    assert expected[0].peak_memory_bytes == noisy[0].peak_memory_bytes  # memory has no noise
    # The per-run throughput factor is log-normal around 1 (sigma 5 %) and the accuracy
    # offset normal around 0 (0.3 pt): 40 seeds' medians land near the noise-free values.
    median_sps = float(np.median([m.throughput_sps for m in noisy]))
    median_metric = float(np.median([m.val_metric for m in noisy]))
    assert median_sps == pytest.approx(expected[0].throughput_sps, rel=0.03)
    assert median_metric == pytest.approx(expected[0].val_metric, abs=0.002)
    assert len({m.val_metric for m in noisy}) > 1


def test_a_floor_above_the_throughput_stops_after_two_windows_below_it() -> None:
    # Four epochs of digits at batch 64: windows of 16 steps.
    full = simulate(_mock(width=32, train={"epochs": 4}))
    floored = simulate(_mock(width=32, train={"epochs": 4}, min_throughput_sps=1.0))
    stopped = simulate(
        _mock(width=32, train={"epochs": 4}, min_throughput_sps=2 * full.throughput_sps)
    )

    # A floor it clears changes nothing, not even the noise, but the gradient-noise probe
    # (the baseline's alone: a study's other trials have a floor).
    noise_keys = ("gradient_noise_probes", "gradient_noise_scale", "gradient_noise_scale_simulated")
    unprobed = {k: v for k, v in full.extra.items() if k not in noise_keys}
    assert floored == dataclasses.replace(full, extra=unprobed)
    assert stopped.too_slow is True and math.isnan(stopped.val_metric)
    # Its steps take microseconds, never the 2 s an early stretch needs: the second window's
    # end decides, both windows below the floor, as for a real fast trial.
    assert (stopped.steps, stopped.timed_steps) == (5 + 2 * 16, 2 * 16)
    assert stopped.window_throughputs_sps == pytest.approx(full.window_throughputs_sps[:2])
    assert stopped.train_s < full.train_s


def test_the_mock_stops_where_the_real_floor_would() -> None:
    # The real rule (autotune.trial.measure.ThroughputFloor) on the simulated clock.
    plan = plan_windows(88, warmup_steps=5, windows=5)  # windows of 16 steps from step 5
    slow = np.full((5, 16), 1.0)  # 1 s per step of 64 samples
    # Below 100 samples/s from the first step on: two stretches of 2 s after step 1
    # (steps 2-3, then 4-5), each below, stop it in the warm-up.
    assert _stopped_too_slow(100.0, plan, 1.0, slow, 64) == (5, (4, (4.0,)))
    # Fast warm-up steps, slow windows: the first stretch (steps 2-7, 2.4 s) clears the
    # floor of 66, the next two (steps 8-9, 10-11) do not.
    assert _stopped_too_slow(66.0, plan, 0.1, slow, 64) == (11, (4, (4.0,)))
    assert _stopped_too_slow(10.0, plan, 1.0, slow, 64) is None  # above the floor: never
    # Steps too quick for a stretch: the windows' ends decide, both below 2,000 samples/s.
    quick = np.full((5, 16), 0.04)  # 1,600 samples/s
    stopped = _stopped_too_slow(2000.0, plan, 0.04, quick, 64)
    assert stopped is not None and stopped[0] == 5 + 32
    assert stopped[1][0] == 16 and stopped[1][1] == pytest.approx((0.64, 0.64))
    # One slow window is not enough: the better of the two decides.
    noisy_first = quick.copy()
    noisy_first[1] = 0.02  # the second window at 3,200 samples/s
    assert _stopped_too_slow(2000.0, plan, 0.04, noisy_first, 64) is None
    noisy_second = quick.copy()
    noisy_second[0] = 0.02  # the first window clears the trial: the second is not judged
    assert _stopped_too_slow(2000.0, plan, 0.04, noisy_second, 64) is None
    # Compiled with CUDA graphs (a simulated GPU under reduce-overhead), the evidence starts
    # after the two compile steps, as a real trial's does: stretches of steps 3-4 and 5-6.
    graphs = plan_windows(88, warmup_steps=5, windows=5, compiled=True, compile_steps=2)
    assert _stopped_too_slow(100.0, graphs, 1.0, slow, 64) == (6, (4, (4.0,)))


def test_measurement_says_it_is_simulated() -> None:
    m = simulate(_mock())

    assert m.simulated is True
    assert m.memory_kind == "simulated"
    assert m.throughput_sps > 0
    assert 0.0 <= m.val_metric <= 1.0
    assert 0 < m.peak_memory_bytes <= DEFAULT_PROFILE.memory_bytes


def test_gradient_noise_scale_is_simulated_and_says_so() -> None:
    from autotune.trial.devices.mock import SIMULATED_NOISE_SCALE_SAMPLES

    m = simulate(_mock())
    assert m.extra["gradient_noise_scale"] == SIMULATED_NOISE_SCALE_SAMPLES
    assert m.extra["gradient_noise_scale_simulated"] is True
    assert m.simulated is True
    # A trial under the study's throughput floor (not the baseline) is not probed.
    floored = simulate(_mock().model_copy(update={"min_throughput_sps": 1.0}))
    assert "gradient_noise_scale" not in floored.extra


def test_steps_follow_epochs_batch_and_world_size() -> None:
    # digits: 1,438 training samples.
    assert simulate(_mock(batch_size=64, train={"epochs": 2})).steps == 2 * (1438 // 64)
    assert simulate(_mock(batch_size=64, gpu_count=2)).steps == 1438 // 128
    assert simulate(_mock(batch_size=64, train={"epochs": 5, "max_steps": 7})).steps == 7


def test_samples_per_step_is_the_global_batch() -> None:
    assert simulate(_mock(batch_size=32, gpu_count=4)).samples_per_step == 128


def test_above_capacity_is_out_of_memory() -> None:
    config = _mock(depth=3, width=64, batch_size=4096)

    with pytest.raises(MemoryError, match=r"simulated CUDA out of memory: needs \d+ bytes"):
        simulate(config)


def test_capacity_comes_from_the_profile() -> None:
    config = _mock(depth=3, width=64, batch_size=4096)
    roomy = dataclasses.replace(DEFAULT_PROFILE, memory_bytes=1 << 40)

    assert simulate(config, roomy).peak_memory_bytes > DEFAULT_PROFILE.memory_bytes


def test_lower_precision_is_faster_and_smaller() -> None:
    # A model whose steps are mostly compute (a small one is bound by launches and loading,
    # where bf16 gains less than the 5 % per-process noise); room for it on the mock GPU.
    roomy = dataclasses.replace(DEFAULT_PROFILE, memory_bytes=1 << 40)
    fp32 = simulate(_mock(depth=3, width=64, batch_size=256, precision="fp32"), roomy)
    bf16 = simulate(_mock(depth=3, width=64, batch_size=256, precision="bf16"), roomy)

    assert bf16.throughput_sps > fp32.throughput_sps
    assert bf16.peak_memory_bytes < fp32.peak_memory_bytes


def test_compile_costs_compile_time() -> None:
    assert simulate(_mock()).compile_s == 0.0
    assert simulate(_mock(compile_mode="default")).compile_s > 0.0


def test_profile_capabilities() -> None:
    caps = detect_capabilities("mock")

    assert caps.simulated is True
    assert caps.kind == "mock"
    assert caps.memory_bytes == DEFAULT_PROFILE.memory_bytes
    assert caps.compute_capability == DEFAULT_PROFILE.compute_capability
    assert caps.count == DEFAULT_PROFILE.count


def test_timed_steps_follow_the_window_plan() -> None:
    # One epoch of digits at batch 64: 22 steps, 5 warm-up, 5 windows of 3 (as autotune.trial.training).
    m = simulate(_mock(batch_size=64))

    assert m.steps == 22
    assert m.timed_steps == 15
    assert len(m.window_throughputs_sps) == 5


def test_compiling_makes_the_first_step_warm_up() -> None:
    m = simulate(_mock(compile_mode="default", train={"warmup_steps": 0}))

    assert m.timed_steps == 20  # 21 steps after the compiling one: 5 windows of 4


def test_peak_learning_rate_follows_the_global_batch() -> None:
    train = {"lr": 1.0e-3, "reference_batch_size": 64}

    assert simulate(_mock(batch_size=256, train=train)).extra["lr_peak"] == pytest.approx(2.0e-3)
    # SGD scales linearly with the global batch: 32 per rank x 4 ranks = 2 x the reference.
    sgd = {**train, "optimizer": "sgd"}
    assert simulate(_mock(batch_size=32, gpu_count=4, train=sgd)).extra["lr_peak"] == 2.0e-3


def test_lr_scaling_makes_up_for_fewer_steps() -> None:
    # Five epochs at batch 256: 25 steps. Scaled by sqrt(256 / 64) = 2, they count as 50.
    train = {"epochs": 5, "reference_batch_size": 64}
    scaled = simulate(_mock(batch_size=256, train=train))
    fixed = simulate(_mock(batch_size=256, train={**train, "lr_scaling": "none"}))

    assert scaled.steps == fixed.steps == 25
    assert fixed.train_loss == pytest.approx(2.3 * math.exp(-25 / 80))
    assert scaled.train_loss == pytest.approx(2.3 * math.exp(-50 / 80))
    # The under-training penalty drops from 0.36 exp(-25/24.5) to 0.36 exp(-50/24.5): 8.3
    # points, far above the simulated noise (0.3 points).
    gain = 0.36 * (math.exp(-25 / 24.5) - math.exp(-50 / 24.5))
    assert gain == pytest.approx(0.083, abs=0.001)
    assert scaled.val_metric - fixed.val_metric == pytest.approx(gain, abs=0.015)


def test_the_reference_batch_trains_as_without_scaling() -> None:
    train = {"epochs": 5, "reference_batch_size": 64}
    scaled = simulate(_mock(batch_size=64, train=train))
    fixed = simulate(_mock(batch_size=64, train={**train, "lr_scaling": "none"}))

    assert scaled.extra["lr_peak"] == fixed.extra["lr_peak"] == 1.0e-3
    assert scaled.train_loss == fixed.train_loss


def test_only_the_builtin_workloads_are_simulated() -> None:
    config = make_trial_config(
        device="mock", workload={"ref": "my_models.gpt:CharGPT"}, model={"n_layer": 2}
    )

    with pytest.raises(
        ValueError,
        match=r"simulates the built-in workloads \(cnn, mlp\) only, not my_models\.gpt:CharGPT",
    ):
        simulate(config)


# --------------------------------------------------------------------------------------------
# objective=time_to_accuracy: a SIMULATED learning curve


def _to_target(target: float, **overrides: object):
    train = {"epochs": 5, "target_accuracy": target, **overrides.pop("train", {})}  # type: ignore[dict-item]
    return simulate(
        _mock(objective="time_to_accuracy", depth=2, width=16, train=train, **overrides)
    )


def test_mock_time_to_accuracy_stops_at_the_first_evaluation_that_meets_the_target() -> None:
    m = _to_target(0.95)

    assert m.simulated is True
    assert m.target_reached is True
    wall_s, step, metric = m.metric_curve[-1]
    assert m.time_to_accuracy_s == wall_s
    assert metric >= 0.95
    assert all(point[2] < 0.95 for point in m.metric_curve[:-1])
    # Once per epoch by default: 1438 digits samples at batch 64 -> 22 steps an epoch.
    assert [point[1] for point in m.metric_curve] == [
        22 * (i + 1) for i in range(len(m.metric_curve))
    ]
    assert [p[0] for p in m.metric_curve] == sorted(p[0] for p in m.metric_curve)
    assert m.steps == step


def test_mock_time_to_accuracy_evaluates_every_n_steps_and_may_miss() -> None:
    m = _to_target(0.999, train={"eval_every_steps": 10})

    assert m.target_reached is False
    assert m.time_to_accuracy_s is None
    assert [p[1] for p in m.metric_curve] == [10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110]
    assert m.steps == 110  # the whole schedule: 5 epochs of 22 steps


def test_mock_time_to_accuracy_stops_at_max_time_s() -> None:
    full = _to_target(0.999, train={"eval_every_steps": 10})
    capped = _to_target(0.999, train={"eval_every_steps": 10, "max_time_s": full.train_s / 3})

    assert capped.target_reached is False
    assert capped.steps < full.steps
    assert capped.metric_curve[-1][0] <= full.train_s / 3 + full.metric_curve[0][0]


# --------------------------------------------------------------------------------------------
# A trial that reuses another's metric (advanced.search.reuse_metric)

_REUSE = ReusedMetric(from_trial=0, val_metric=0.5, train_loss=1.25, steps=40, evaluations=2)


def test_a_reused_trial_costs_only_its_warm_up_and_windows() -> None:
    full = simulate(_mock(depth=2, width=16, train={"epochs": 5}))
    reused = simulate(_mock(depth=2, width=16, train={"epochs": 5}, reuse=_REUSE))

    # digits: 22 steps an epoch, 5 epochs; reused: 5 warm-up steps and one epoch of windows.
    assert (full.steps, reused.steps) == (110, 27)
    assert reused.train_s == pytest.approx(full.train_s * 27 / 110, rel=0.1)
    assert (reused.val_metric, reused.train_loss) == (0.5, 1.25)
    assert reused.throughput_sps == pytest.approx(full.throughput_sps, rel=0.1)
    assert reused.peak_memory_bytes == full.peak_memory_bytes


def test_a_reused_time_to_accuracy_trial_takes_the_sources_steps_on_its_own_clock() -> None:
    train = {"target_accuracy": 0.9, "epochs": 5}
    full = simulate(_mock(objective="time_to_accuracy", depth=2, width=16, train=train))
    reused = simulate(
        _mock(objective="time_to_accuracy", depth=2, width=16, train=train, reuse=_REUSE)
    )
    capped = simulate(
        _mock(
            objective="time_to_accuracy",
            depth=2,
            width=16,
            train={**train, "max_time_s": 1e-6},
            reuse=_REUSE,
        )
    )

    step_s = reused.step_time_s
    eval_s = reused.eval_s
    assert reused.target_reached is True
    assert eval_s == pytest.approx(2 * full.eval_s / len(full.metric_curve))
    assert reused.time_to_accuracy_s == pytest.approx(40 * step_s + eval_s, rel=0.1)
    assert reused.train_s == pytest.approx(27 * step_s + eval_s / 2, rel=0.1)  # 27 steps run
    assert capped.target_reached is False and capped.time_to_accuracy_s is None


def test_a_global_batch_keeps_steps_and_learning_rate_across_micro_batches() -> None:
    fixed = {"global_batch_size": 128, "reference_batch_size": 64, "epochs": 5}
    whole = simulate(_mock(depth=2, width=16, batch_size=128, train=fixed))
    micro = simulate(_mock(depth=2, width=16, batch_size=32, train=fixed))

    # digits: 1438 samples -> 11 steps of 128 an epoch, 5 epochs, whatever the micro-batch.
    assert (whole.steps, micro.steps) == (55, 55)
    assert whole.samples_per_step == micro.samples_per_step == 128
    assert whole.extra["lr_peak"] == micro.extra["lr_peak"]
    assert micro.peak_memory_bytes < whole.peak_memory_bytes  # a quarter of the activations
