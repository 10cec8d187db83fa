"""The Hugging Face door (autotune/trial/training/_hf.py): a function that builds a
transformers.Trainer on trial.training_args(...), run in this process as one rank of a trial
on the CPU. The user code is in tests/trial/training/door_code.py."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from autotune.core.config import MetricSpec, ReusedMetric, TrialConfig, WorkloadSpec
from autotune.core.exceptions import DoorUsageError
from autotune.testing import make_trial_config
from autotune.trial.devices.cpu import CpuBackend
from autotune.trial.training import HFTrial
from autotune.trial.training._hf import run_hf_trainer
from tests.trial.training import door_code

pytest.importorskip("transformers")
pytest.importorskip("accelerate")

CODE = "tests.trial.training.door_code"


def hf_config(
    function: str = "hf_trainer", metric: str = "eval_loss", **overrides: Any
) -> TrialConfig:
    """An hf_trainer trial of ``door_code.FUNCTION``: 64 windows, batch 4, 2 epochs."""
    spec = WorkloadSpec(
        ref=f"{CODE}:{function}",
        args=overrides.pop("args", {}),
        door="hf_trainer",
        metric=MetricSpec(name=metric, direction="minimize"),
    )
    train = {
        "epochs": 2,
        "warmup_steps": 2,
        "reference_batch_size": 4,
        **overrides.pop("train", {}),
    }
    fields: dict[str, Any] = {
        "workload": spec,
        "model": {"n_embd": 16},
        "batch_size": 4,
        "train": train,
        "measure": {"windows": 2},
        **overrides,
    }
    return make_trial_config(**fields)


def run(config: TrialConfig) -> Any:
    return run_hf_trainer(config, CpuBackend(), 0, 1, ())


def test_a_trainer_trains_its_budget_and_reports_eval_loss() -> None:
    m = run(hf_config())

    assert m.steps == 2 * 64 // 4  # max_steps set to the budget
    assert door_code.SEEN["trainer"].state.global_step == m.steps
    assert 0 < m.val_metric < 6 and m.val_samples == 32
    assert math.isfinite(m.train_loss) and m.throughput_sps > 0
    assert m.samples_per_step == 4 and m.extra["flops_per_sample"] > 0


def test_dict_batches_go_through_the_users_collator() -> None:
    run(hf_config())

    assert door_code.SEEN["collated"] >= 32  # 32 training steps, and the evaluation's


@pytest.mark.parametrize(
    ("knobs", "expected"),
    [
        ({}, {"bf16": False, "per_device_train_batch_size": 4, "dataloader_num_workers": 0}),
        (
            {"precision": "bf16", "batch_size": 8, "num_workers": 1},
            {
                "bf16": True,
                "per_device_train_batch_size": 8,
                "dataloader_num_workers": 1,
                "dataloader_persistent_workers": True,
            },
        ),
    ],
)
def test_the_trials_knobs_reach_the_training_arguments(
    knobs: dict[str, Any], expected: dict[str, Any]
) -> None:
    m = run(hf_config(**knobs))

    args = door_code.SEEN["args"]
    for name, value in expected.items():
        assert getattr(args, name) == value, name
    assert args.seed == 0 and args.data_seed == 0 and args.use_cpu
    assert args.report_to == [] and not args.torch_compile
    assert m.samples_per_step == args.per_device_train_batch_size


def test_the_users_optimizer_and_scheduler_are_kept_and_follow_the_batch() -> None:
    run(hf_config(batch_size=8))  # twice the reference batch 4: SGD's rate doubles

    trainer = door_code.SEEN["trainer"]
    assert (
        getattr(trainer.optimizer, "optimizer", trainer.optimizer)
        is door_code.SEEN["user_optimizer"]
    )
    assert door_code.SEEN["user_optimizer"].param_groups[0]["lr"] == pytest.approx(0.1)
    assert door_code.SEEN["user_scheduler"].base_lrs == [pytest.approx(0.1)]


def test_the_trainers_own_adamw_follows_the_batch_by_the_square_root() -> None:
    m = run(hf_config(batch_size=16, args={"own_optimizer": False}))

    assert m.extra["lr_scale"] == pytest.approx(2.0)  # sqrt(16 / 4)


def test_gradient_accumulation_maps_onto_the_trainers_steps() -> None:
    m = run(hf_config(train={"global_batch_size": 8}))

    assert door_code.SEEN["args"].gradient_accumulation_steps == 2
    assert m.steps == 2 * 64 // 8 and m.samples_per_step == 8


def test_an_epoch_ends_on_a_whole_optimizer_step() -> None:
    # 16 batches an epoch, 3 micro-batches a step: the Trainer's sixth step of each epoch
    # took the one batch left, and the meter counted it as 12 samples.
    m = run(hf_config(train={"global_batch_size": 12}))

    trainer = door_code.SEEN["trainer"]
    assert m.steps == 2 * 5 and m.samples_per_step == 12
    assert trainer.state.global_step == m.steps
    assert trainer.state.epoch == 2.0  # two whole epochs of 5 steps; 1.75 with a partial one
    assert len(trainer.get_train_dataloader()) == 15


def test_a_trial_that_reuses_a_metric_stops_after_its_windows() -> None:
    reuse = ReusedMetric(from_trial=2, val_metric=3.25, train_loss=3.5, steps=32)

    m = run(hf_config().model_copy(update={"reuse": reuse}))

    assert (m.val_metric, m.train_loss) == (3.25, 3.5)
    assert door_code.SEEN["trainer"].state.global_step == m.steps < 32


def test_a_trial_below_its_floor_stops_too_slow() -> None:
    m = run(hf_config().model_copy(update={"min_throughput_sps": 1e12}))

    assert m.too_slow and math.isnan(m.val_metric)


@pytest.mark.parametrize(
    ("function", "metric", "reason"),
    [
        (
            "hf_returns_a_model",
            "eval_loss",
            "returned a GPT2LMHeadModel, not a transformers.Trainer",
        ),
        (
            "hf_builds_its_own_arguments",
            "eval_loss",
            "build the Trainer with args=trial.training_args(",
        ),
        ("hf_maps_twice", "eval_loss", "trial.training_args(args) was called twice"),
        ("hf_trainer", "eval_accuracy", "trainer.evaluate() returned no 'eval_accuracy'"),
        (
            "hf_evaluates_nan",
            "eval_loss",
            "trainer.evaluate()['eval_loss']: the eval_loss is nan, not a finite number",
        ),
    ],
)
def test_each_misuse_fails_the_trial_with_a_line_that_names_the_call(
    function: str, metric: str, reason: str
) -> None:
    with pytest.raises(DoorUsageError) as err:
        run(hf_config(function, metric=metric))

    assert reason in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("function", "metric", "reason"),
    [
        ("hf_trainer", "eval_accuracy", "before the budget trained"),
        ("hf_without_eval_dataset", "eval_loss", "the Trainer has no eval_dataset"),
    ],
)
def test_an_evaluation_that_cannot_give_the_metric_fails_before_the_budget_trains(
    function: str, metric: str, reason: str
) -> None:
    with pytest.raises(DoorUsageError, match=reason):
        run(hf_config(function, metric=metric))

    assert door_code.SEEN["trainer"].state.global_step == 0  # not one training step ran


def test_on_its_own_the_trial_leaves_the_users_arguments_as_written() -> None:
    args = door_code._training_args(bf16=True, per_device_train_batch_size=12)

    mapped = HFTrial().training_args(args)

    assert mapped.bf16 and mapped.per_device_train_batch_size == 12
    assert mapped.learning_rate == args.learning_rate and mapped.output_dir == args.output_dir


def test_a_knob_given_on_its_own_maps_as_in_a_trial() -> None:
    args = door_code._training_args()

    mapped = HFTrial(precision="bf16", batch_size=32, lr_scale=2.0).training_args(args)

    assert mapped.bf16 and not mapped.fp16 and mapped.per_device_train_batch_size == 32
    assert mapped.learning_rate == pytest.approx(2 * args.learning_rate)


def test_the_script_trains_on_its_own() -> None:
    trainer = door_code.hf_trainer(HFTrial())

    output = trainer.train()

    assert output.global_step == 3 * 64 // 4  # TrainingArguments' own 3 epochs
    assert isinstance(door_code.SEEN["user_optimizer"], torch.optim.SGD)


@pytest.mark.slow
def test_two_ddp_ranks_train_the_trainer_over_the_trials_process_group() -> None:
    from autotune.study.search import run_trial

    m = run_trial(hf_config(gpu_count=2).model_copy(update={"timeout_s": 300}))

    assert m.samples_per_step == 8 and m.steps == 2 * 64 // 8
    assert 0 < m.val_metric < 6


def test_compile_and_the_optimizers_implementation_map_onto_the_arguments() -> None:
    args = door_code._training_args()

    mapped = HFTrial(compile_mode="max-autotune", optimizer_impl="fused").training_args(args)
    eager = HFTrial(compile_mode="none").training_args(args)

    assert mapped.torch_compile and mapped.torch_compile_mode == "max-autotune"
    assert str(getattr(mapped.optim, "value", mapped.optim)) == "adamw_torch_fused"
    assert not eager.torch_compile and eager.torch_compile_mode is None


def test_channels_last_converts_the_models_4d_inputs_after_the_transfer() -> None:
    from autotune.trial.training._hf import inputs_in_format

    seen: dict[str, torch.Tensor] = {}

    class Model(torch.nn.Module):
        def forward(self, pixel_values: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
            seen.update(pixel_values=pixel_values, ids=ids)
            return pixel_values.sum()

    model = Model()
    inputs_in_format(model, torch.channels_last)
    model(pixel_values=torch.randn(2, 3, 4, 4), ids=torch.zeros(2, 3))  # as the Trainer calls it

    assert seen["pixel_values"].is_contiguous(memory_format=torch.channels_last)
    assert not seen["pixel_values"].is_contiguous()
    assert seen["ids"].shape == (2, 3)


def test_a_channels_last_trial_leaves_the_users_collator_as_it_is() -> None:
    # Converting in the collator ran on the host inside the timed windows (0 workers).
    run(hf_config(memory_format="channels_last"))

    assert door_code.SEEN["trainer"].data_collator is door_code.token_collate


def test_a_trial_sets_tf32_from_its_precision_never_from_the_users_arguments(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # TrainingArguments(tf32=True) on a CPU refuses; as on an Ampere GPU, with torch's flags
    # left alone (transformers' enable_tf32 recorded instead).
    import transformers.training_args as hf_args

    set_by_transformers: list[bool] = []
    monkeypatch.setattr(hf_args, "is_torch_tf32_available", lambda: True)
    monkeypatch.setattr(hf_args, "enable_tf32", set_by_transformers.append)
    users = door_code._training_args(tf32=True)

    fp32 = HFTrial(precision="fp32").training_args(users)
    tf32 = HFTrial(precision="tf32").training_args(users)

    assert users.tf32 is True and fp32.tf32 is False and tf32.tf32 is True
    assert set_by_transformers == [True, False, True]


def test_a_cuda_trial_resets_tf32_from_its_precision_just_before_training(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import autotune.trial.devices.cuda

    reset: list[tuple[str, bool]] = []
    monkeypatch.setattr(
        autotune.trial.devices.cuda,
        "reset_tf32",
        lambda precision: reset.append((precision, "trainer" in door_code.SEEN)),
    )

    class CudaKind(CpuBackend):  # trains on the CPU; the door's CUDA-only steps run
        kind = "cuda"

    run_hf_trainer(hf_config(precision="bf16"), CudaKind(), 0, 1, ())

    assert reset == [("bf16", True)]  # after the user's TrainingArguments were built


def test_a_trial_whose_windows_are_short_says_why_they_are_not_extended() -> None:
    m = run(hf_config(measure={"windows": 2, "min_timed_s": 100.0}))

    assert "the hf_trainer door times the budget's steps only" in m.extra["timing_note"]
    assert m.extra["timing_extension_steps"] == 0
