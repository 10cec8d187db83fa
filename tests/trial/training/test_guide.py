"""The Tuning Guide's knobs as the doors apply them (autotune/trial/training/_guide.py): the
optimizer's implementation, activation checkpointing per block, FSDP2, and the process-wide
settings, each seen where a trial's process sees it."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

from autotune.core.config import MetricSpec, WorkloadSpec
from autotune.testing import make_trial_config
from autotune.trial.devices.cpu import CpuBackend
from autotune.trial.training._guide import (
    CheckpointedBlock,
    checkpoint_blocks,
    optimizer_impl_kwargs,
    with_optimizer_impl,
)
from autotune.trial.training._setup import prepare_training
from autotune.trial.workloads import load_workload


@pytest.mark.parametrize(
    ("impl", "flags"),
    [
        ("default", {}),
        ("for_loop", {"foreach": False}),
        ("foreach", {"foreach": True}),
        ("fused", {"fused": True}),
    ],
)
def test_each_implementation_is_its_constructor_flag(impl: str, flags: dict[str, bool]) -> None:
    assert optimizer_impl_kwargs(impl) == flags


def test_the_users_optimizer_is_rebuilt_over_the_same_groups_with_its_schedulers() -> None:
    model = nn.Linear(4, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    groups = optimizer.param_groups

    made = with_optimizer_impl(optimizer, "fused", [scheduler])

    assert made is not optimizer and made.defaults["fused"] is True
    assert made.param_groups[0] is groups[0]  # the same dict: rates stay shared
    assert made.defaults["weight_decay"] == 0.01
    assert scheduler.optimizer is made
    assert with_optimizer_impl(optimizer, "default") is optimizer


def test_an_optimizer_without_the_implementation_is_refused_by_name() -> None:
    optimizer = torch.optim.RMSprop(nn.Linear(4, 2).parameters())

    with pytest.raises(TypeError, match="optimizer_impl=fused: RMSprop cannot run it"):
        with_optimizer_impl(optimizer, "fused")


def test_checkpointing_wraps_each_named_block_and_keeps_the_math() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Sequential(nn.Linear(4, 8), nn.ReLU()), nn.Linear(8, 2))
    x = torch.randn(3, 4)
    plain = model(x).sum()
    plain.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()

    wrapped = checkpoint_blocks(model, ["Sequential"])

    assert wrapped == 1 and isinstance(model, nn.Sequential)  # the root is not a block of itself
    assert isinstance(model[0], CheckpointedBlock)
    model(x).sum().backward()
    assert all(torch.allclose(p.grad, g) for p, g in zip(model.parameters(), grads, strict=True))


def test_checkpointing_names_the_classes_when_no_block_matches() -> None:
    with pytest.raises(ValueError, match=r"no module of class Block .*its classes: Linear"):
        checkpoint_blocks(nn.Sequential(nn.Linear(2, 2)), ["Block"])


def test_the_workload_door_builds_the_fused_optimizer_and_checkpoints_the_builtin_blocks() -> None:
    config = make_trial_config(
        depth=2, width=8, optimizer_impl="fused", activation_checkpointing=True
    )

    training = prepare_training(config, CpuBackend(), load_workload(config.workload), 0, 1)

    assert training.optimizer.defaults["fused"] is True
    blocks = [m for m in training.model.modules() if isinstance(m, CheckpointedBlock)]
    assert [type(b.block).__name__ for b in blocks] == ["ConvBlock", "ConvBlock"]


def _loop_trial(function: str, **fields: Any) -> Any:
    spec = WorkloadSpec(
        ref=f"tests.trial.training.door_code:{function}",
        door="loop",
        metric=MetricSpec(name="probe", direction="maximize"),
    )
    return make_trial_config(
        workload=spec,
        model={"width": 4},
        batch_size=8,
        train={"epochs": 1, "warmup_steps": 1},
        measure={"windows": 2},
        **fields,
    )


@pytest.mark.slow
def test_a_trials_process_runs_its_cpu_threads() -> None:
    from autotune.study.search import run_trial

    assert (
        run_trial(
            _loop_trial("reports_its_threads", cpu_threads=1).model_copy(update={"timeout_s": 300})
        ).val_metric
        == 1.0
    )


@pytest.mark.slow
def test_the_allocator_setting_is_in_the_ranks_environment_before_cuda_starts() -> None:
    from autotune.study.search import run_trial

    on = run_trial(
        _loop_trial("reports_its_allocator_setting", cuda_expandable_segments=True).model_copy(
            update={"timeout_s": 300}
        )
    )
    off = run_trial(
        _loop_trial("reports_its_allocator_setting").model_copy(update={"timeout_s": 300})
    )

    assert (on.val_metric, off.val_metric) == (1.0, 0.0)


@pytest.mark.slow
def test_fsdp_shards_the_loops_model_and_the_optimizer_is_rebuilt_over_the_shards() -> None:
    from autotune.study.search import run_trial

    config = _loop_trial(
        "reports_its_sharding",
        gpu_count=2,
        data_parallel="fsdp",
        optimizer_impl="foreach",
        blocks=("Linear",),
    )

    # Sharded (1), not fused (2): SGD in foreach (fused SGD has no DTensor strategy).
    assert run_trial(config.model_copy(update={"timeout_s": 300})).val_metric == 1.0


def test_fsdp_gathers_in_the_trials_autocast_dtype_and_reduces_in_fp32() -> None:
    from autotune.trial.training._guide import fsdp_mixed_precision

    for dtype in (torch.bfloat16, torch.float16):
        policy = fsdp_mixed_precision(dtype)
        assert (policy.param_dtype, policy.reduce_dtype) == (dtype, torch.float32)
    assert fsdp_mixed_precision(None) is None  # fp32 and tf32: FSDP's default, all fp32


@pytest.mark.slow
def test_an_fsdp_bf16_channels_last_trial_computes_in_bf16_and_channels_last() -> None:
    # fully_shard refused channels_last weights (non-contiguous parameters), and without a
    # MixedPrecisionPolicy gathered fp32 parameters for a bf16 trial.
    from autotune.study.search import run_trial

    config = _loop_trial(
        "reports_its_fsdp_compute",
        gpu_count=2,
        data_parallel="fsdp",
        precision="bf16",
        memory_format="channels_last",
    )

    assert run_trial(config.model_copy(update={"timeout_s": 300})).val_metric == 3.0


@pytest.mark.slow
def test_fsdp_trains_the_workload_door_with_the_same_accuracy_as_ddp() -> None:
    from autotune.study.search import run_trial

    ddp = run_trial(
        make_trial_config(depth=2, width=8, gpu_count=2).model_copy(update={"timeout_s": 300})
    )
    fsdp = run_trial(
        make_trial_config(depth=2, width=8, gpu_count=2, data_parallel="fsdp").model_copy(
            update={"timeout_s": 300}
        )
    )

    assert fsdp.steps == ddp.steps
    assert fsdp.val_metric == pytest.approx(ddp.val_metric, abs=0.01)
    assert fsdp.extra["flops_per_sample"] > 0
