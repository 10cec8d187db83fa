"""The loop door (autotune/trial/training/_loop.py): the user's own training function, given a
LoopTrial, run in this process as one rank of a trial on the CPU. The functions are in
tests/trial/training/door_code.py."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
import torch

from autotune.core.config import MetricSpec, ReusedMetric, TrialConfig, WorkloadSpec
from autotune.core.exceptions import DoorUsageError
from autotune.testing import make_trial_config
from autotune.trial.devices.cpu import CpuBackend
from autotune.trial.training import LoopTrial
from autotune.trial.training._loop import PreparedOptimizer, PreparedScheduler, run_loop
from tests.trial.training import door_code

#: The functions by module reference: the same module (and SEEN) as this file imports.
CODE = "tests.trial.training.door_code"


def loop_config(function: str = "classify", **overrides: Any) -> TrialConfig:
    """A loop-door trial of ``door_code.FUNCTION``: 2 epochs of 12 batches of 8, one window."""
    spec = WorkloadSpec(
        ref=f"{CODE}:{function}",
        door="loop",
        metric=MetricSpec(name="accuracy", direction="maximize"),
    )
    train = {
        "epochs": 2,
        "warmup_steps": 2,
        "reference_batch_size": 8,
        **overrides.pop("train", {}),
    }
    fields: dict[str, Any] = {
        "workload": spec,
        "model": {"width": 4},
        "batch_size": 8,
        "train": train,
        "measure": {"windows": 2},
        **overrides,
    }
    return make_trial_config(**fields)


def run(config: TrialConfig) -> Any:
    return run_loop(config, CpuBackend(), 0, 1, ())


def test_a_loop_trains_its_budget_and_reports_its_metric() -> None:
    config = loop_config()

    m = run(config)

    assert m.steps == 2 * (door_code.N_TRAIN // 8)  # 2 epochs of 12 steps
    assert len(door_code.SEEN["batches"]) == m.steps
    assert (
        m.val_metric == door_code.SEEN["last_accuracy"]
        if "last_accuracy" in door_code.SEEN
        else 0 <= m.val_metric <= 1
    )
    assert m.val_samples == door_code.N_VAL
    assert m.throughput_sps > 0 and m.simulated is False
    assert m.samples_per_step == 8
    assert m.parameters == sum(p.numel() for p in door_code.Net(4).parameters())
    assert math.isfinite(m.train_loss)
    assert m.extra["flops_per_sample"] > 0  # counted on the last warm-up step
    assert m.extra["lr_scale"] == 1.0


def test_dict_batches_and_a_custom_collate_reach_the_loop_on_the_device() -> None:
    run(loop_config())

    batch = door_code.SEEN["batches"][0]
    assert set(batch) == {"image", "label", "note"}
    assert batch["note"] == "collated by door_code.collate"  # the user's collate_fn ran
    assert batch["image"].shape == (8, 1, 8, 8) and batch["label"].dtype == torch.int64
    assert door_code.SEEN["val_devices"] == {"cpu"}


def test_the_users_optimizer_and_scheduler_are_kept_and_step_once_per_step() -> None:
    run(loop_config())

    seen = door_code.SEEN
    assert isinstance(seen["optimizer"], PreparedOptimizer)
    assert seen["optimizer"].optimizer is seen["user_optimizer"]  # SGD, the user's own
    assert isinstance(seen["optimizer"].optimizer, torch.optim.SGD)
    assert isinstance(seen["scheduler"], PreparedScheduler)
    # StepLR(step_size=1, gamma=0.5) stepped once per optimizer step: 0.1 * 0.5**24.
    assert seen["last_lr"] == pytest.approx(0.1 * 0.5**24)


@pytest.mark.parametrize(
    ("knobs", "expected"),
    [
        ({}, {"format": torch.contiguous_format, "autocast": False, "batch": 8, "workers": 0}),
        (
            {"memory_format": "channels_last", "precision": "bf16", "batch_size": 16},
            {"format": torch.channels_last, "autocast": torch.bfloat16, "batch": 16, "workers": 0},
        ),
        (
            {"num_workers": 1},
            {"format": torch.contiguous_format, "autocast": False, "batch": 8, "workers": 1},
        ),
    ],
)
def test_the_trials_knobs_reach_the_users_objects(
    knobs: dict[str, Any], expected: dict[str, Any]
) -> None:
    run(loop_config(**knobs))

    seen = door_code.SEEN
    weight = seen["model"].conv.weight
    assert weight.is_contiguous(memory_format=expected["format"])
    assert seen["batches"][0]["image"].is_contiguous(memory_format=expected["format"])
    assert set(seen["autocast"]) == {expected["autocast"]}
    assert seen["train_batch_size"] == expected["batch"]
    assert seen["batches"][0]["image"].shape[0] == expected["batch"]
    assert seen["train_workers"] == expected["workers"]


def test_the_learning_rate_follows_the_global_batch_by_the_optimizers_rule() -> None:
    # SGD: linear scaling from the reference batch 8 to 16.
    run(loop_config(batch_size=16))

    assert door_code.SEEN["lr_after"] == pytest.approx(2 * door_code.SEEN["lr_before"])


@pytest.mark.slow
def test_a_compiled_trial_trains_the_compiled_model() -> None:
    m = run(loop_config(compile_mode="default"))

    assert hasattr(door_code.SEEN["model"], "_orig_mod")  # torch.compile's OptimizedModule
    assert m.compile_s >= 0 and m.steps == 24


def test_gradient_accumulation_steps_the_optimizer_once_per_global_batch() -> None:
    config = loop_config(train={"global_batch_size": 16})

    m = run(config)

    assert m.samples_per_step == 16
    assert m.steps == 2 * (door_code.N_TRAIN // 16)
    assert len(door_code.SEEN["batches"]) == 2 * m.steps  # two micro-batches of 8 per step
    # SGD's rate doubled with the global batch (8 -> 16), halved once per optimizer step.
    assert door_code.SEEN["last_lr"] == pytest.approx(0.2 * 0.5**m.steps)
    assert m.extra["accumulation_steps"] == 2


def test_a_trial_that_reuses_a_metric_stops_after_its_windows() -> None:
    reuse = ReusedMetric(from_trial=3, val_metric=0.875, train_loss=0.25, steps=24)
    config = loop_config().model_copy(update={"reuse": reuse})

    m = run(config)

    assert m.val_metric == 0.875 and m.train_loss == 0.25
    assert "last_lr" not in door_code.SEEN  # the function ended inside trial.steps()
    assert m.steps <= 24


def test_the_baselines_warm_up_run_is_timed_only_but_runs_and_checks_the_code_after_the_loop() -> (
    None
):
    config = loop_config().model_copy(update={"reuse": ReusedMetric.warm_up(0)})

    m = run(config)

    assert m.steps < 2 * (door_code.N_TRAIN // 8)  # its windows, not the budget
    assert "last_lr" in door_code.SEEN  # the code after the loop ran
    assert m.val_metric == 0.0  # what it reported was checked, then discarded


@pytest.mark.parametrize(
    ("function", "reason"),
    [
        ("no_report", "returned without trial.report(metric)"),
        ("reports_nan", "the accuracy is nan, not a finite number"),
        ("reports_a_percentage", "the accuracy is 87.5, outside [0, 1]"),
    ],
)
def test_the_warm_up_run_fails_on_the_faults_a_full_run_would_show_after_the_budget(
    function: str, reason: str
) -> None:
    config = loop_config(function).model_copy(update={"reuse": ReusedMetric.warm_up(0)})

    with pytest.raises(DoorUsageError, match=re.escape(reason)):
        run(config)


def test_a_trial_below_its_floor_stops_too_slow() -> None:
    config = loop_config().model_copy(update={"min_throughput_sps": 1e12})

    m = run(config)

    assert m.too_slow and math.isnan(m.val_metric)
    assert "last_lr" not in door_code.SEEN


@pytest.mark.parametrize(
    ("function", "reason"),
    [
        ("no_report", "returned without trial.report(metric)"),
        ("never_iterates", "trial.report(metric) came before trial.steps() ran to its end"),
        ("prepares_twice", "trial.prepare() was called twice"),
        ("leaves_early", "the loop left trial.steps() after 2 of 24 steps"),
        ("reports_twice", "trial.report() was called twice"),
        ("reports_text", "trial.report(metric): the metric must be a real number, got 'high'"),
        ("reports_nan", "trial.report(metric): the accuracy is nan, not a finite number"),
        ("reports_a_percentage", "trial.report(metric): the accuracy is 87.5, outside [0, 1]"),
        (
            "steps_before_prepare",
            "trial.steps(loader): call trial.prepare(model, optimizer, loader) first",
        ),
        (
            "steps_over_the_users_loader",
            "trial.steps(loader): pass the training DataLoader that trial.prepare() returned",
        ),
        ("prepares_without_a_loader", "give it your training DataLoader too"),
        (
            "epoch_skips_steps",
            "epoch 0 of trial.epochs() did not iterate trial.steps(train_loader) to its end",
        ),
    ],
)
def test_each_misuse_fails_the_trial_with_a_line_that_names_the_call(
    function: str, reason: str
) -> None:
    with pytest.raises(DoorUsageError) as err:
        run(loop_config(function))

    message = str(err.value)
    assert reason in message
    assert "\n" not in message


def test_the_script_trains_on_its_own_with_pytorchs_defaults() -> None:
    value = door_code.classify(LoopTrial(epochs=1, seed=0))

    seen = door_code.SEEN
    assert 0.0 <= value <= 1.0
    assert len(seen["batches"]) == door_code.N_TRAIN // 8  # the user's batch size, one epoch
    assert seen["train_batch_size"] == 8 and seen["lr_after"] == seen["lr_before"]
    assert set(seen["autocast"]) == {False}
    assert seen["model"].conv.weight.is_contiguous()


def test_a_knob_given_on_its_own_applies_as_in_a_trial() -> None:
    door_code.classify(LoopTrial(batch_size=16, memory_format="channels_last", lr_scale=2.0))

    seen = door_code.SEEN
    assert seen["train_batch_size"] == 16
    assert seen["model"].conv.weight.is_contiguous(memory_format=torch.channels_last)
    assert seen["lr_after"] == pytest.approx(2 * seen["lr_before"])


def test_a_knob_outside_its_values_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"LoopTrial\(precision='fp8'\): must be one of fp32"):
        LoopTrial(precision="fp8")


@pytest.mark.slow
def test_two_ddp_ranks_train_the_loop_over_halves_of_the_data() -> None:
    from autotune.study.search import run_trial

    m = run_trial(loop_config(gpu_count=2).model_copy(update={"timeout_s": 300}))

    assert m.samples_per_step == 16  # 8 per rank
    assert m.steps == 2 * (door_code.N_TRAIN // 16)  # each rank sees its half, per epoch
    assert 0.0 <= m.val_metric <= 1.0


def test_an_epoch_shaped_loop_keeps_its_per_epoch_test_and_step_lr() -> None:
    """pytorch/examples' mnist/main.py's shape: ``for epoch in trial.epochs(): for batch in
    trial.steps(loader)``, a test and a StepLR step after each epoch."""
    m = run(loop_config("epoch_shaped"))

    seen = door_code.SEEN
    assert seen["epochs"] == [0, 1]
    assert seen["steps_per_epoch"] == [12, 12] and m.steps == 24
    assert seen["lrs"] == pytest.approx([0.1, 0.05])  # StepLR halved it after epoch 0
    assert len(seen["accuracies"]) == 2
    assert m.val_metric == seen["accuracies"][-1]  # the last epoch's test, reported


def test_an_epoch_loop_stops_where_a_max_steps_budget_ends() -> None:
    m = run(loop_config("epoch_shaped", train={"epochs": 3, "max_steps": 18}))

    assert door_code.SEEN["steps_per_epoch"] == [12, 6] and m.steps == 18


def test_the_time_between_epochs_is_not_timed() -> None:
    from autotune.trial.measure._windows import WindowClock

    now = [0.0]
    clock = WindowClock(lambda: None, clock=lambda: now[0])
    assert clock.mark() == 0.0
    now[0] = 2.0
    clock.pause()
    now[0] = 7.0  # an evaluation between two epochs
    clock.resume()
    now[0] = 8.0
    assert clock.mark() == 3.0


def test_an_epoch_loop_trains_on_its_own_for_its_epochs() -> None:
    door_code.epoch_shaped(LoopTrial(epochs=2))

    assert door_code.SEEN["epochs"] == [0, 1]
    assert door_code.SEEN["steps_per_epoch"] == [12, 12]


def test_the_users_own_manual_seed_is_derived_from_the_trials_seed() -> None:
    """The user's ``torch.manual_seed(1)`` reseeds where they wrote it, from the trial's seed:
    two trial seeds build two models, the same seed the same one, and the trial says so."""
    torch_seeding = (torch.manual_seed, torch.random.manual_seed)
    first = run(loop_config("epoch_shaped", seed=0))
    weight_0 = door_code.SEEN["init_weight"]
    run(loop_config("epoch_shaped", seed=0))
    again = door_code.SEEN["init_weight"]
    run(loop_config("epoch_shaped", seed=1))
    weight_1 = door_code.SEEN["init_weight"]

    assert torch.equal(weight_0, again)
    assert not torch.equal(weight_0, weight_1)
    assert first.extra["user_seeds"] == "torch.manual_seed(1): derived from the trial's seed"
    assert (torch.manual_seed, torch.random.manual_seed) == torch_seeding  # put back


@pytest.mark.parametrize(("argv", "interval"), [(None, 10), (["--log-interval", "1000"], 1000)])
def test_a_script_parses_its_own_command_line_from_workload_args(
    argv: list[str] | None, interval: int
) -> None:
    config = loop_config("parses_its_command_line")
    args = {"argv": argv} if argv is not None else {}
    config = config.model_copy(
        update={"workload": config.workload.model_copy(update={"args": args})}
    )

    run(config)

    seen = door_code.SEEN
    assert seen["argv"][0].endswith("door_code.py") and seen["argv"][1:] == (argv or [])
    assert seen["log_interval"] == interval
