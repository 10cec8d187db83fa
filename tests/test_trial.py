"""Real training of one trial per knob, each in child processes (autotune/trial.py through
autotune/runner.py). Every trial is one epoch of digits with a tiny model: seconds each,
except torch.compile (20-30 s cold on two cores)."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from autotune.config import TrainSettings, TrialConfig
from autotune.data import load_dataset
from autotune.devices.cpu import CpuBackend
from autotune.measure import Measurement
from autotune.models import count_parameters
from autotune.runner import run_trial
from autotune.testing import make_trial_config
from autotune.trial._setup import make_lr_schedule as _make_lr_schedule
from autotune.trial._setup import prepare_training
from autotune.trial._throughput import train_for_throughput
from autotune.trial._to_target import train_to_target
from autotune.workloads import load_workload

pytestmark = pytest.mark.slow

TIMEOUT_S = 300.0
#: digits: 1,797 samples, 359 held out.
N_TRAIN = 1438


def _expected_steps(config: TrialConfig) -> int:
    per_rank = math.ceil(N_TRAIN / config.gpu_count)  # DistributedSampler pads to equal shares
    steps = config.train.epochs * (per_rank // config.batch_size)  # drop_last
    return min(steps, config.train.max_steps or steps)


def _check(m: Measurement, config: TrialConfig, memory_kind: str = "cpu_peak_rss_growth") -> None:
    """What every real trial must report."""
    assert m.simulated is False
    assert m.throughput_sps > 0
    assert 0.0 <= m.val_metric <= 1.0
    assert m.peak_memory_bytes > 0
    assert m.memory_kind == memory_kind
    assert m.steps == _expected_steps(config)
    warmup = min(max(config.train.warmup_steps, config.compile_mode != "none"), m.steps - 1)
    extension = m.extra["timing_extension_steps"]
    if extension:  # timing-only steps after the evaluation: one untimed, then the windows
        assert m.timed_steps == extension - 1
    else:
        assert 0 < m.timed_steps <= m.steps - warmup
    assert m.samples_per_step == config.batch_size * config.gpu_count
    assert m.step_time_s > 0
    assert m.train_s > 0
    assert math.isfinite(m.train_loss)
    model = load_workload(config.workload).build_model(config.model)
    assert m.parameters == count_parameters(model)


@pytest.mark.parametrize(
    "device",
    ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)],
)
@pytest.mark.parametrize("family", ["cnn", "mlp"])
def test_eager_fp32(device: str, family: str) -> None:
    config = make_trial_config(device=device, family=family, width=8 if family == "cnn" else 64)

    m = run_trial(config, TIMEOUT_S)

    _check(m, config, "cpu_peak_rss_growth" if device == "cpu" else "cuda_allocator_peak")
    assert m.compile_s == 0.0
    assert len(m.window_throughputs_sps) == 5


def test_mlp_learns_in_one_epoch() -> None:
    # Digits are easy: one epoch of AdamW takes an MLP well above chance (10%).
    config = make_trial_config(family="mlp", width=64, train={"lr": 3.0e-3})

    m = run_trial(config, TIMEOUT_S)

    assert m.val_metric > 0.5


def test_channels_last() -> None:
    config = make_trial_config(memory_format="channels_last")
    _check(run_trial(config, TIMEOUT_S), config)


def test_bf16_autocast() -> None:
    config = make_trial_config(precision="bf16")
    _check(run_trial(config, TIMEOUT_S), config)


def test_compile_default() -> None:
    config = make_trial_config(family="mlp", width=32, compile_mode="default")

    m = run_trial(config, TIMEOUT_S)

    _check(m, config)
    assert m.compile_s > 0.0  # the first step holds the compilation


def test_one_dataloader_worker() -> None:
    config = make_trial_config(num_workers=1)
    _check(run_trial(config, TIMEOUT_S), config)


def test_ddp_two_processes_with_gloo() -> None:
    config = make_trial_config(gpu_count=2)

    m = run_trial(config, TIMEOUT_S)

    _check(m, config)
    assert m.steps == 11  # ceil(1438 / 2) // 64
    assert m.samples_per_step == 128


def test_max_steps_caps_the_budget() -> None:
    config = make_trial_config(train={"epochs": 3, "max_steps": 9}, measure={"min_timed_s": 0.0})

    m = run_trial(config, TIMEOUT_S)

    _check(m, config)
    assert m.steps == 9
    assert m.timed_steps == 4  # 9 - 5 warm-up steps, in windows of >= 2 steps


def test_synthetic_data_probe() -> None:
    config = make_trial_config(
        family="mlp", width=32, data={"name": "synthetic", "synthetic_samples": 640}
    )

    m = run_trial(config, TIMEOUT_S)

    assert m.steps == 512 // 64
    assert m.throughput_sps > 0
    assert 0.0 <= m.val_metric <= 1.0


def test_dataset_size_assumption() -> None:
    from autotune.config import DataSettings

    assert len(load_dataset(DataSettings(name="digits")).train_x) == N_TRAIN


# --------------------------------------------------------------------------------------------
# The training loop in this process, on a CPU backend that counts device synchronizations


class CountingCpuBackend(CpuBackend):
    """The CPU backend, counting :meth:`synchronize` calls (each one a clock read's sync)."""

    def __init__(self) -> None:
        super().__init__()
        self.syncs = 0

    def synchronize(self) -> None:
        self.syncs += 1
        super().synchronize()


def _train_here(config: TrialConfig) -> tuple[Measurement, int]:
    """Train and evaluate ``config`` as rank 0 of 1 in this process; (measurement, syncs)."""
    backend = CountingCpuBackend()
    training = prepare_training(config, backend, load_workload(config.workload), 0, 1)
    if config.objective == "time_to_accuracy":
        return train_to_target(training, 0, 1, maximize=True), backend.syncs
    m = train_for_throughput(training, 0, 1)
    return m, backend.syncs


def test_the_loop_syncs_only_at_window_edges() -> None:
    # Four epochs of digits at batch 64: 88 steps, 5 warm-up, 5 windows of 16, 3 untimed.
    config = make_trial_config(
        family="mlp", width=32, train={"epochs": 4}, measure={"min_timed_s": 0.0}
    )

    m, syncs = _train_here(config)

    windows = len(m.window_throughputs_sps)
    assert (m.steps, windows, m.timed_steps) == (88, 5, 80)
    # The start, the end of warm-up, the windows' shared edges and the end: 0, 5, 21, 37, 53,
    # 69, 85, 88. A sync per step would have made 89.
    assert syncs == 8
    assert syncs <= 2 * windows + 3
    assert syncs < m.steps / 10
    # The whole loop holds the windows: 16 steps of 64 samples each.
    window_s = [16 * 64 / sps for sps in m.window_throughputs_sps]
    assert m.train_s > sum(window_s)
    assert m.step_time_s == pytest.approx(sorted(window_s)[2] / 16)


def test_timing_only_steps_also_sync_only_at_their_window_edges() -> None:
    # One epoch: 22 steps, 5 warm-up, 5 windows of 3 (15 timed), 2 untimed; then timing-only
    # windows until three times what the whole budget took (however busy the shared CPU is).
    budget, _ = _train_here(make_trial_config(family="mlp", width=32))
    min_timed_s = round(3 * budget.train_s + 0.1, 3)
    config = make_trial_config(family="mlp", width=32, measure={"min_timed_s": min_timed_s})

    m, syncs = _train_here(config)

    assert m.extra["timing_extension_steps"] == m.timed_steps + 1
    assert m.timed_steps > 15
    # The budget's 8 reads, then the extension's: after its untimed step and at 5 window ends.
    assert syncs == 8 + 6


def test_the_peak_learning_rate_follows_the_global_batch() -> None:
    # SGD, linear rule: batch 128 against the reference 64 trains at twice the rate.
    config = make_trial_config(
        family="mlp",
        width=32,
        batch_size=128,
        train={"optimizer": "sgd", "lr": 0.05, "reference_batch_size": 64},
    )

    m, _ = _train_here(config)

    assert m.extra["lr_peak"] == pytest.approx(0.1)
    assert math.isfinite(m.train_loss)


def _lrs(settings: TrainSettings, total_steps: int) -> list[float]:
    """The learning rate of each of ``total_steps`` optimizer steps (peak 0.4)."""
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.4)
    schedule = _make_lr_schedule(optimizer, settings, total_steps)
    lrs = []
    for _ in range(total_steps):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        if schedule is not None:
            schedule.step()
    return lrs


def test_lr_warmup_rises_linearly_to_the_peak() -> None:
    constant = TrainSettings(lr_schedule="constant", lr_warmup_fraction=0.5)  # 4 of 8 steps

    assert _lrs(constant, 8) == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.4, 0.4, 0.4, 0.4])


@pytest.mark.parametrize(
    "settings",
    [
        TrainSettings(lr_schedule="constant", lr_scaling="none"),  # no warm-up
        TrainSettings(lr_schedule="constant", lr_warmup_fraction=0.05),  # 1 step of 10
    ],
)
def test_no_lr_warmup_below_two_steps(settings: TrainSettings) -> None:
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.4)

    assert _make_lr_schedule(optimizer, settings, 10) is None
    assert _lrs(settings, 10) == [0.4] * 10


def test_cosine_decays_from_the_peak_after_the_warm_up() -> None:
    lrs = _lrs(TrainSettings(lr_warmup_fraction=0.25), 8)  # 2 warm-up steps, then cosine

    assert lrs[:2] == pytest.approx([0.2, 0.4])
    assert all(a > b for a, b in itertools.pairwise(lrs[1:]))
    assert 0 < lrs[-1] < 0.05 * 0.4  # near 0 at the last step


def test_short_budgets_are_timed_longer_without_changing_the_accuracy() -> None:
    """measure.min_timed_s: the same trial timed over its budget alone (0 s) and extended to
    at least three times the budget's windows; the extension runs after the evaluation."""
    short = make_trial_config(measure={"min_timed_s": 0.0})
    a = run_trial(short, TIMEOUT_S)
    # Three times the whole training loop of the first: more than the timed windows take in
    # the next process too, unless the shared CPU gets three times slower in between.
    extended = make_trial_config(measure={"min_timed_s": round(3 * a.train_s + 0.1, 3)})
    b = run_trial(extended, TIMEOUT_S)

    assert a.extra["timing_extension_steps"] == 0
    assert b.extra["timing_extension_steps"] > a.timed_steps
    # About min_timed_s of windows, sized from the budget's median step: 5 equal windows
    # after one untimed step. (Their seconds are not checked: on a shared CPU a step of the
    # budget and one of the extension can differ tenfold.)
    assert b.timed_steps == b.extra["timing_extension_steps"] - 1
    assert b.timed_steps % 5 == 0 and len(b.window_throughputs_sps) == 5
    assert b.val_metric == a.val_metric and b.steps == a.steps  # same budget, same seed
    _check(a, short)
    _check(b, extended)


# --------------------------------------------------------------------------------------------
# objective=time_to_accuracy: the real loop


def _to_target(**train: object) -> TrialConfig:
    return make_trial_config(
        family="mlp", width=32, objective="time_to_accuracy", train={"epochs": 6, **train}
    )


def test_time_to_accuracy_stops_at_the_first_evaluation_that_meets_the_target() -> None:
    config = _to_target(target_accuracy=0.8)

    m, _ = _train_here(config)

    assert m.target_reached is True
    wall_s, step, metric = m.metric_curve[-1]
    assert m.time_to_accuracy_s == wall_s
    assert metric >= 0.8 and m.val_metric == metric
    assert all(point[2] < 0.8 for point in m.metric_curve[:-1])
    # Once per epoch by default: 1150 training digits at batch 64 -> 17 steps an epoch.
    per_epoch = _expected_steps(make_trial_config(family="mlp", width=32))
    assert [p[1] for p in m.metric_curve] == [
        per_epoch * (i + 1) for i in range(len(m.metric_curve))
    ]
    assert m.steps == step
    assert 0 < m.eval_s < m.time_to_accuracy_s <= m.train_s
    assert [p[0] for p in m.metric_curve] == sorted(p[0] for p in m.metric_curve)
    assert m.throughput_sps > 0 and m.compile_s == 0.0


def test_time_to_accuracy_evaluates_every_n_steps_and_misses_an_unreachable_target() -> None:
    config = _to_target(target_accuracy=1.0, eval_every_steps=7, epochs=1)

    m, syncs = _train_here(config)

    per_epoch = _expected_steps(make_trial_config(family="mlp", width=32))
    assert m.target_reached is False and m.time_to_accuracy_s is None
    assert m.steps == per_epoch  # the whole schedule
    expected = [*range(7, per_epoch + 1, 7)]
    if expected[-1] != per_epoch:
        expected.append(per_epoch)  # and at the end of the schedule
    assert [p[1] for p in m.metric_curve] == expected
    # Syncs: start, after the first step, two per evaluation, end.
    assert syncs == 3 + 2 * len(expected)


def test_time_to_accuracy_stops_at_max_time_s() -> None:
    config = _to_target(target_accuracy=1.0, eval_every_steps=1, epochs=50, max_time_s=0.5)

    m, _ = _train_here(config)

    assert m.target_reached is False
    assert m.steps < 50 * _expected_steps(make_trial_config(family="mlp", width=32))
    assert m.metric_curve[-1][0] >= 0.5


def test_time_to_accuracy_under_ddp_stops_on_every_rank() -> None:
    config = make_trial_config(
        objective="time_to_accuracy",
        gpu_count=2,
        train={"epochs": 4, "target_accuracy": 0.5, "eval_every_s": 0.05},
    )

    m = run_trial(config, TIMEOUT_S)

    assert m.target_reached is True
    assert m.samples_per_step == 128
    assert m.time_to_accuracy_s == m.metric_curve[-1][0]
