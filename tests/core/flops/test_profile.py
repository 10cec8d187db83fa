"""The model profile of the memory estimate and the parameter count
(autotune/core/flops/_profile.py): both are handed a model, never build a workload's."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from autotune.core.flops import count_parameters, profile_model
from autotune.trial.workloads.builtin.networks import build_model

#: Four 1x8x8 digit-shaped samples with their labels, as a ``Dataset`` gives them.
SAMPLES = [(torch.rand(1, 8, 8), torch.tensor(i % 10)) for i in range(4)]


def _cnn() -> torch.nn.Module:
    return build_model("cnn", 3, 64, (1, 8, 8), 10)


def test_profile_model_counts_what_backward_keeps() -> None:
    fp32 = profile_model(_cnn, SAMPLES, F.cross_entropy, "fp32")
    bf16 = profile_model(_cnn, SAMPLES, F.cross_entropy, "bf16")

    assert fp32.parameters == count_parameters(_cnn())
    # Block 1 alone saves its conv output and BatchNorm/ReLU output (2 x 64 x 8 x 8 fp32).
    assert fp32.activation_bytes_per_sample > 2 * 64 * 8 * 8 * 4
    assert bf16.activation_bytes_per_sample < 0.75 * fp32.activation_bytes_per_sample
    assert bf16.activation_fixed_bytes > fp32.activation_fixed_bytes  # autocast weight casts
    assert fp32.input_bytes_per_sample == 4 * 64 + 8
    assert profile_model(_cnn, SAMPLES, F.cross_entropy, "tf32") == fp32
    # Fewer samples than the 4 traced are cycled: the same shapes, the same bytes.
    assert profile_model(_cnn, SAMPLES[:1], F.cross_entropy, "fp32") == fp32


def test_profile_model_traces_under_no_grad_and_leaves_the_random_state() -> None:
    expected = profile_model(_cnn, SAMPLES, F.cross_entropy, "fp32")
    torch.manual_seed(123)
    state = torch.get_rng_state()
    with torch.no_grad():  # a sampler's acquisition runs so; autograd saves nothing there
        profiled = profile_model(_cnn, SAMPLES, F.cross_entropy, "fp32")

    assert profiled == expected
    assert profiled.activation_bytes_per_sample > 0
    assert torch.equal(torch.get_rng_state(), state)  # the caller's draws are not reseeded


def test_profile_model_checkpoints_the_named_blocks() -> None:
    plain = profile_model(_cnn, SAMPLES, F.cross_entropy, "fp32")
    blocked = profile_model(_cnn, SAMPLES, F.cross_entropy, "fp32", ("ConvBlock",))

    assert (plain.blocks, plain.checkpointed_bytes_per_sample) == (0, None)
    assert blocked.blocks == 3
    assert blocked.checkpointed_bytes_per_sample is not None
    assert blocked.checkpointed_bytes_per_sample < plain.activation_bytes_per_sample


def test_profile_model_needs_a_sample() -> None:
    with pytest.raises(ValueError, match="at least one training sample, but got none"):
        profile_model(_cnn, [], F.cross_entropy, "fp32")


def test_count_parameters_skips_frozen() -> None:
    model = build_model("mlp", 1, 4, (1, 8, 8), 10)
    for p in model.net[1].parameters():
        p.requires_grad_(False)

    assert count_parameters(model) == 50
