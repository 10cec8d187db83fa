"""FLOP counting of one training step (autotune/core/flops/_counting.py)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from autotune.core.flops import (
    count_training_flops,
)
from autotune.core.flops._counting import (
    count_training_flops_by_kind,
)
from autotune.trial.workloads.builtin.networks import build_model

from .hand_count import cnn_flops_per_sample


@pytest.mark.parametrize("width", [8, 16])
def test_counts_a_cnn_block_exactly(width: int) -> None:
    model = build_model("cnn", 1, width, (1, 8, 8), 10)
    x, y = torch.randn(4, 1, 8, 8), torch.zeros(4, dtype=torch.long)

    flops = count_training_flops(model, x, y)

    assert flops == 4 * cnn_flops_per_sample(width)


def test_flops_grow_linearly_with_the_batch() -> None:
    model = build_model("cnn", 2, 8, (1, 8, 8), 10)

    small = count_training_flops(model, torch.randn(2, 1, 8, 8), torch.zeros(2, dtype=torch.long))
    large = count_training_flops(model, torch.randn(6, 1, 8, 8), torch.zeros(6, dtype=torch.long))

    assert large == 3 * small


def test_autocast_and_channels_last_count_the_same_flops() -> None:
    model = build_model("cnn", 2, 8, (1, 8, 8), 10)
    x, y = torch.randn(4, 1, 8, 8), torch.zeros(4, dtype=torch.long)

    fp32 = count_training_flops(model, x, y)
    bf16 = count_training_flops(
        model.to(memory_format=torch.channels_last),
        x.to(memory_format=torch.channels_last),
        y,
        autocast_dtype=torch.bfloat16,
    )

    assert bf16 == fp32


def test_counting_leaves_the_model_as_it_was() -> None:
    model = build_model("cnn", 1, 8, (1, 8, 8), 10)
    model.eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}

    count_training_flops(model, torch.randn(4, 1, 8, 8) + 3.0, torch.zeros(4, dtype=torch.long))

    assert model.training is False
    assert all(p.grad is None for p in model.parameters())
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # BatchNorm stats too


def test_a_workloads_loss_is_counted() -> None:
    model = build_model("mlp", 1, 8, (1, 8, 8), 10)
    x, y = torch.randn(4, 1, 8, 8), torch.zeros(4, dtype=torch.long)
    called: list[tuple[int, ...]] = []

    def loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        called.append(tuple(output.shape))
        return (output @ output.T).sum()  # a 4x10 @ 10x4 matmul the default loss does not do

    default = count_training_flops(model, x, y)
    own = count_training_flops(model, x, y, loss_fn=loss)

    assert called == [(4, 10)]
    assert own > default


def test_the_convolutions_share_is_counted_apart() -> None:
    x, y = torch.randn(4, 1, 8, 8), torch.zeros(4, dtype=torch.long)
    cnn = build_model("cnn", 1, 8, (1, 8, 8), 10)
    mlp = build_model("mlp", 1, 16, (1, 8, 8), 10)

    flops = count_training_flops_by_kind(cnn, x, y)

    assert flops.total == count_training_flops(cnn, x, y)
    # The CNN's head is a linear layer: its matmuls are the rest.
    assert 0 < flops.convolution < flops.total
    assert count_training_flops_by_kind(mlp, x, y).convolution == 0


def test_step_flop_counter_leaves_the_compiled_frame_compiled() -> None:
    """Issue 49: a compiled step counted under FlopCounterMode must not leave Dynamo's frame
    skipped; the steps after the count (the timed windows) run the compiled graph."""
    import torch

    from autotune.core.flops import StepFlopCounter

    compiled_calls = [0]

    def backend(gm: Any, example_inputs: Any) -> Any:
        def run(*args: Any) -> Any:
            compiled_calls[0] += 1
            return gm.forward(*args)

        return run

    model = torch.nn.Linear(8, 8)
    step = torch.compile(lambda x: torch.relu(model(x)).sum(), backend=backend)
    x = torch.randn(4, 8)
    for _ in range(2):
        step(x).backward()
    assert compiled_calls[0] == 2
    counter = StepFlopCounter()
    counter.open()
    step(x).backward()
    counter.close()
    assert counter.flops is not None and counter.flops.total == 2 * 4 * 8 * 8 * 2
    assert compiled_calls[0] == 2  # the counted step ran eager
    for _ in range(3):
        step(x).backward()
    assert compiled_calls[0] == 5  # every later step ran the compiled graph


def _flops_of_a_step(model: torch.nn.Module, x: torch.Tensor) -> int:
    from autotune.core.flops import StepFlopCounter

    counter = StepFlopCounter()
    counter.open()
    model(x).sum().backward()
    counter.close()
    assert counter.flops is not None
    return counter.flops.total


def test_activation_checkpointings_recomputed_forward_is_not_counted() -> None:
    """Issue 49, CUDA item 3: MFU counts model FLOPs; the forward a checkpointed block runs
    again in the backward is hardware work (HFU's), and would read as ~1.3x the MFU."""
    from autotune.trial.training._guide import checkpoint_blocks

    plain = build_model("cnn", 2, 8, (1, 8, 8), 10)
    checkpointed = build_model("cnn", 2, 8, (1, 8, 8), 10)
    assert checkpoint_blocks(checkpointed, ["ConvBlock"]) == 2
    x, y = torch.randn(4, 1, 8, 8), torch.zeros(4, dtype=torch.long)

    assert count_training_flops(checkpointed, x, y) == count_training_flops(plain, x, y)
    assert _flops_of_a_step(checkpointed, x) == _flops_of_a_step(plain, x)


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_a_users_own_checkpointed_module_is_counted_once(use_reentrant: bool) -> None:
    from torch.utils.checkpoint import checkpoint

    inner = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8))

    class Checkpointed(torch.nn.Module):  # as a user's model, or transformers', calls it
        def __init__(self) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return checkpoint(self.inner, x, use_reentrant=use_reentrant)

    x = torch.randn(4, 8, requires_grad=True)
    forward_and_backward = 3 * 2 * 4 * (8 * 16 + 16 * 8)  # forward, input and weight grads

    assert _flops_of_a_step(Checkpointed(), x) == forward_and_backward
    assert _flops_of_a_step(inner, x) == forward_and_backward
