"""Parametric model families (autotune/trial/workloads/builtin/networks.py)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from autotune.core.flops import count_parameters
from autotune.trial.workloads.builtin.networks import MLP, ConvNet, build_model


@pytest.mark.parametrize("family", ["cnn", "mlp"])
@pytest.mark.parametrize("input_shape", [(1, 8, 8), (1, 28, 28), (3, 5, 7)])
@pytest.mark.parametrize("depth", [1, 3])
def test_logits_shape(family: str, input_shape: tuple[int, int, int], depth: int) -> None:
    model = build_model(family, depth, 8, input_shape, num_classes=10)

    logits = model(torch.randn(4, *input_shape))  # (B, C, H, W)

    assert logits.shape == (4, 10)  # (B, num_classes)


def test_family_picks_the_class() -> None:
    assert isinstance(build_model("cnn", 1, 8, (1, 8, 8), 10), ConvNet)
    assert isinstance(build_model("mlp", 1, 8, (1, 8, 8), 10), MLP)


def test_cnn_block_widths_double() -> None:
    model = build_model("cnn", 3, 8, (1, 28, 28), 10)

    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    assert [c.out_channels for c in convs] == [8, 16, 32]
    head = [m for m in model.modules() if isinstance(m, nn.Linear)]
    assert head[-1].in_features == 32 * 3 * 3  # the flattened map: 28 -> 14 -> 7 -> 3


def test_cnn_deeper_than_the_image_stops_pooling() -> None:
    # 8 -> 4 -> 2 -> 1: the 4th and 5th blocks keep the 1x1 map instead of pooling it away.
    model = build_model("cnn", 5, 4, (1, 8, 8), 10)

    pools = [m for m in model.modules() if isinstance(m, nn.MaxPool2d)]
    assert len(pools) == 3
    assert model(torch.randn(2, 1, 8, 8)).shape == (2, 10)


def test_mlp_parameter_count() -> None:
    # 64 inputs -> 4 hidden -> 10 logits: (64*4 + 4) + (4*10 + 10).
    assert count_parameters(build_model("mlp", 1, 4, (1, 8, 8), 10)) == 310


def test_cnn_parameter_count() -> None:
    # conv 1->8 3x3 without bias (72) + BatchNorm (16) + linear 8x4x4->10 (1290): the head
    # takes the flattened 4x4 map.
    assert count_parameters(build_model("cnn", 1, 8, (1, 8, 8), 10)) == 72 + 16 + 1290 == 1378


def test_channels_last_gives_the_same_logits() -> None:
    torch.manual_seed(0)
    model = build_model("cnn", 2, 8, (1, 8, 8), 10).eval()
    x = torch.randn(4, 1, 8, 8)

    expected = model(x)
    model = model.to(memory_format=torch.channels_last)
    actual = model(x.to(memory_format=torch.channels_last))

    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("rnn", 1, 8), "unknown model family 'rnn'"),
        (("cnn", 0, 8), "depth >= 1 and width >= 1 must hold, but got depth=0, width=8"),
        (("mlp", 1, 0), "depth >= 1 and width >= 1 must hold, but got depth=1, width=0"),
    ],
)
def test_build_model_refuses(args: tuple[str, int, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_model(*args, (1, 8, 8), 10)
