"""The Lightning door (autotune/trial/training/_lightning.py): a function returning a LightningModule
and a LightningDataModule, trained by a Trainer autotune builds, in this process as one rank of
a trial on the CPU. The user code is in tests/trial/training/door_code.py."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from autotune.core.config import MetricSpec, ReusedMetric, TrialConfig, WorkloadSpec
from autotune.core.exceptions import DoorUsageError
from autotune.testing import make_trial_config
from autotune.trial.devices.cpu import CpuBackend
from autotune.trial.training import LightningTrial
from autotune.trial.training._lightning import run_lightning
from tests.trial.training import door_code

pytest.importorskip("lightning")

CODE = "tests.trial.training.door_code"


def lightning_config(
    function: str = "lightning_module", metric: str = "val_acc", **overrides: Any
) -> TrialConfig:
    """A lightning trial of ``door_code.FUNCTION``: 96 images, batch 8, 2 epochs."""
    spec = WorkloadSpec(
        ref=f"{CODE}:{function}",
        args=overrides.pop("args", {}),
        door="lightning",
        metric=MetricSpec(name=metric, direction="maximize"),
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
    return run_lightning(config, CpuBackend(), 0, 1, ())


def test_a_module_trains_its_budget_and_reports_what_it_logged() -> None:
    m = run(lightning_config())

    assert m.steps == 2 * (door_code.N_TRAIN // 8)
    assert len(door_code.SEEN["batches"]) == m.steps
    assert 0 <= m.val_metric <= 1 and m.val_samples == door_code.N_VAL
    assert math.isfinite(m.train_loss) and m.throughput_sps > 0
    assert m.extra["flops_per_sample"] > 0


def test_dict_batches_and_the_users_collate_reach_training_step() -> None:
    run(lightning_config())

    batch = door_code.SEEN["batches"][0]
    assert batch["note"] == "collated by door_code.collate" and batch["image"].shape == (8, 1, 8, 8)


@pytest.mark.parametrize(
    ("knobs", "expected"),
    [
        ({}, {"format": torch.contiguous_format, "autocast": False, "batch": 8}),
        (
            {"memory_format": "channels_last", "precision": "bf16", "batch_size": 16},
            {"format": torch.channels_last, "autocast": torch.bfloat16, "batch": 16},
        ),
    ],
)
def test_the_trials_knobs_reach_the_trainer_and_the_module(
    knobs: dict[str, Any], expected: dict[str, Any]
) -> None:
    run(lightning_config(**knobs))

    seen = door_code.SEEN
    assert seen["module"].net.conv.weight.is_contiguous(memory_format=expected["format"])
    assert seen["batches"][0]["image"].is_contiguous(memory_format=expected["format"])
    assert seen["batches"][0]["image"].shape[0] == expected["batch"]
    assert set(seen["autocast"]) == {expected["autocast"]}


def test_channels_last_converts_the_batches_after_the_transfer_not_in_the_collate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Converting in the collate function ran on the host inside the timed windows (0 workers).
    from autotune.trial.training import _lightning

    loaders: list[Any] = []
    rebuild_loader = _lightning.rebuild_loader

    def recording(*args: Any, **kwargs: Any) -> Any:
        loaders.append(rebuild_loader(*args, **kwargs))
        return loaders[-1]

    converted: list[Any] = []
    to_memory_format = _lightning.to_memory_format

    def converting(batch: Any, memory_format: torch.memory_format) -> Any:
        converted.append(batch)
        return to_memory_format(batch, memory_format)

    monkeypatch.setattr(_lightning, "rebuild_loader", recording)
    monkeypatch.setattr(_lightning, "to_memory_format", converting)
    m = run(lightning_config(memory_format="channels_last"))

    assert loaders[0].collate_fn is door_code.collate  # the user's, unwrapped
    # Every training batch converted in on_after_batch_transfer (the validations' too).
    assert len(converted) >= m.steps
    assert all(batch["note"] == "collated by door_code.collate" for batch in converted)


def test_the_users_optimizer_and_scheduler_are_kept_and_follow_the_batch() -> None:
    m = run(lightning_config(batch_size=16))  # SGD: linear, twice the reference batch

    seen = door_code.SEEN
    assert isinstance(seen["user_optimizer"], torch.optim.SGD)
    assert m.extra["lr_scale"] == pytest.approx(2.0)
    # StepLR(gamma=0.5) stepped once per optimizer step from the doubled rate 0.2.
    assert seen["user_scheduler"].get_last_lr()[0] == pytest.approx(0.2 * 0.5**m.steps)


def test_gradient_accumulation_maps_onto_accumulate_grad_batches() -> None:
    m = run(lightning_config(train={"global_batch_size": 16}))

    assert m.samples_per_step == 16 and m.steps == 2 * (door_code.N_TRAIN // 16)
    assert len(door_code.SEEN["batches"]) == 2 * m.steps
    assert m.extra["accumulation_steps"] == 2


def test_a_trial_that_reuses_a_metric_stops_after_its_windows() -> None:
    reuse = ReusedMetric(from_trial=2, val_metric=0.75, train_loss=0.5, steps=24)

    m = run(lightning_config().model_copy(update={"reuse": reuse}))

    assert (m.val_metric, m.train_loss) == (0.75, 0.5) and m.steps <= 24


def test_a_trial_below_its_floor_stops_too_slow() -> None:
    m = run(lightning_config().model_copy(update={"min_throughput_sps": 1e12}))

    assert m.too_slow and math.isnan(m.val_metric)


@pytest.mark.parametrize(
    ("function", "metric", "reason"),
    [
        ("lightning_returns_a_model", "val_acc", "returned (Net); return a LightningModule"),
        (
            "lightning_sets_precision",
            "val_acc",
            "Trainer argument 'precision' is the trial's to set",
        ),
        ("lightning_module", "val_f1", "validation logged no 'val_f1'"),
    ],
)
def test_each_misuse_fails_the_trial_with_a_line_that_names_the_call(
    function: str, metric: str, reason: str
) -> None:
    with pytest.raises(DoorUsageError) as err:
        run(lightning_config(function, metric=metric))

    assert reason in str(err.value) and "\n" not in str(err.value)


def test_the_datamodule_is_attached_so_callbacks_and_the_module_read_it() -> None:
    m = run(lightning_config("lightning_reads_its_datamodule", metric="val_acc"))

    seen = door_code.SEEN
    assert seen["callback_saw"] is seen["datamodule"]
    assert seen["module_saw"] == door_code.N_TRAIN
    assert m.steps == 2 * (door_code.N_TRAIN // 8)  # the trial's rebuilt loader trained
    assert "train_dataloader" not in vars(seen["datamodule"])  # the user's methods are back
    assert m.extra["train_loader_in"] == "LightningDataModule"  # for best --diff


@pytest.mark.parametrize(
    ("function", "metric", "reason"),
    [
        ("lightning_without_validation_step", "val_loss", "TrainsOnly has no validation_step"),
        ("lightning_module", "val_f1", "on one batch, before the budget trained"),
    ],
)
def test_a_validation_that_cannot_give_the_metric_fails_before_the_budget_trains(
    function: str, metric: str, reason: str
) -> None:
    with pytest.raises(DoorUsageError, match=reason):
        run(lightning_config(function, metric=metric))

    assert "batches" not in door_code.SEEN  # not one training step ran


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("val_loss", math.nan, "trainer.validate()['val_loss']: the val_loss is nan, not a finite"),
        ("accuracy", 87.5, "trainer.validate()['accuracy']: the accuracy is 87.5, outside [0, 1]"),
    ],
)
def test_a_metric_the_study_cannot_rank_fails_the_trial_with_one_line(
    name: str, value: float, reason: str
) -> None:
    config = lightning_config("lightning_logs", metric=name, args={"name": name, "value": value})

    with pytest.raises(DoorUsageError) as err:
        run(config)

    assert reason in str(err.value) and "\n" not in str(err.value)


def test_the_script_trains_on_its_own() -> None:
    import lightning.pytorch as pl

    trial = LightningTrial(precision="bf16")
    module, data = door_code.lightning_module(trial)
    trainer = pl.Trainer(
        max_epochs=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        **trial.trainer_kwargs(),
    )

    trainer.fit(module, datamodule=data)

    assert trial.trainer_kwargs() == {"precision": "bf16-mixed"}
    assert LightningTrial().trainer_kwargs() == {}
    assert trainer.global_step == door_code.N_TRAIN // 8


@pytest.mark.slow
def test_two_ddp_ranks_train_the_module_over_the_trials_process_group() -> None:
    from autotune.study.search import run_trial

    m = run_trial(lightning_config(gpu_count=2).model_copy(update={"timeout_s": 300}))

    assert m.samples_per_step == 16 and m.steps == 2 * (door_code.N_TRAIN // 16)
    assert 0.0 <= m.val_metric <= 1.0


@pytest.mark.slow
def test_a_compiled_trial_fits_the_compiled_module() -> None:
    m = run(lightning_config(compile_mode="default"))

    assert m.steps == 2 * (door_code.N_TRAIN // 8) and m.compile_s >= 0
    assert 0.0 <= m.val_metric <= 1.0


def test_checkpointing_wraps_the_modules_named_blocks() -> None:
    from autotune.trial.training._guide import CheckpointedBlock

    run(lightning_config(activation_checkpointing=True, blocks=("Net",)))

    assert isinstance(door_code.SEEN["module"].net, CheckpointedBlock)


def test_a_trial_whose_windows_are_short_says_why_they_are_not_extended() -> None:
    m = run(lightning_config(measure={"windows": 2, "min_timed_s": 100.0}))

    assert "the lightning door times the budget's steps only" in m.extra["timing_note"]
    assert m.extra["timing_extension_steps"] == 0
