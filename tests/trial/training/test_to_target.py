"""objective=time_to_accuracy (autotune/trial/training/_to_target.py): train until the validation
metric meets the target, evaluating on the configured cadence, up to max_time_s; under DDP
every rank stops together."""

from __future__ import annotations

import pytest

from autotune.core.config import ReusedMetric, TrialConfig
from autotune.study.search import run_trial
from autotune.testing import make_trial_config
from autotune.trial.training._to_target import train_to_target
from tests.trial.training.loops import TIMEOUT_S, counted_training, expected_steps, train_here

pytestmark = pytest.mark.slow


def _to_target(**train: object) -> TrialConfig:
    return make_trial_config(
        family="mlp", width=32, objective="time_to_accuracy", train={"epochs": 6, **train}
    )


def test_time_to_accuracy_stops_at_the_first_evaluation_that_meets_the_target() -> None:
    config = _to_target(target_accuracy=0.8)

    m, _ = train_here(config)

    assert m.target_reached is True
    wall_s, step, metric = m.metric_curve[-1]
    assert m.time_to_accuracy_s == wall_s
    assert metric >= 0.8 and m.val_metric == metric
    assert all(point[2] < 0.8 for point in m.metric_curve[:-1])
    # Once per epoch by default: 1150 training digits at batch 64 -> 17 steps an epoch.
    per_epoch = expected_steps(make_trial_config(family="mlp", width=32))
    assert [p[1] for p in m.metric_curve] == [
        per_epoch * (i + 1) for i in range(len(m.metric_curve))
    ]
    assert m.steps == step
    assert m.eval_s is not None and m.time_to_accuracy_s is not None
    assert 0 < m.eval_s < m.time_to_accuracy_s <= m.train_s
    assert [p[0] for p in m.metric_curve] == sorted(p[0] for p in m.metric_curve)
    assert m.throughput_sps > 0 and m.compile_s == 0.0


def test_time_to_accuracy_evaluates_every_n_steps_and_misses_an_unreachable_target() -> None:
    config = _to_target(target_accuracy=1.0, eval_every_steps=7, epochs=1)

    m, syncs = train_here(config)

    per_epoch = expected_steps(make_trial_config(family="mlp", width=32))
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

    m, _ = train_here(config)

    assert m.target_reached is False
    assert m.steps < 50 * expected_steps(make_trial_config(family="mlp", width=32))
    assert m.metric_curve[-1][0] >= 0.5


def test_time_to_accuracy_under_ddp_stops_on_every_rank() -> None:
    config = make_trial_config(
        objective="time_to_accuracy",
        gpu_count=2,
        train={"epochs": 4, "target_accuracy": 0.5, "eval_every_s": 0.05},
    )

    m = run_trial(config.model_copy(update={"timeout_s": TIMEOUT_S}))

    assert m.target_reached is True
    assert m.samples_per_step == 128
    assert m.time_to_accuracy_s == m.metric_curve[-1][0]


def test_a_reused_time_to_accuracy_trial_times_the_sources_steps_and_one_evaluation() -> None:
    reuse = ReusedMetric(from_trial=2, val_metric=0.97, train_loss=0.1, steps=40, evaluations=3)
    config = _to_target(target_accuracy=0.95).model_copy(update={"reuse": reuse})
    training, calls = counted_training(config)

    m = train_to_target(training, 0, 1, maximize=True)

    # 5 warm-up steps and one epoch of windows (22 steps), then one timed evaluation.
    assert calls == ["step"] * 27 + ["evaluate"]
    assert m.target_reached is True
    assert m.val_metric == 0.97
    assert m.eval_s is not None and m.eval_s > 0
    assert m.time_to_accuracy_s == pytest.approx(40 * m.step_time_s + m.eval_s)
    assert m.metric_curve == ((m.time_to_accuracy_s, 40, 0.97),)
