"""Parametric model families whose size the study searches: ``cnn`` and ``mlp``."""

from __future__ import annotations

import torch
from torch import nn

__all__ = [
    "BUILTIN_BLOCKS",
    "MLP",
    "ConvBlock",
    "ConvNet",
    "HiddenLayer",
    "build_model",
]

#: The built-in models' repeated blocks (module class names): what activation checkpointing
#: wraps and FSDP shards one by one.
BUILTIN_BLOCKS: tuple[str, ...] = ("ConvBlock", "HiddenLayer")


# autotune.core.config.BUILTIN_BLOCKS names these two: activation checkpointing's and FSDP's units.
class ConvBlock(nn.Sequential):
    """conv3x3 (no bias) - BatchNorm - ReLU, then a 2x2 max-pool when ``pool``:
    ``(B, C_in, H, W)`` -> ``(B, C_out, H', W')``."""

    def __init__(self, channels: int, out: int, pool: bool) -> None:
        layers: list[nn.Module] = [
            nn.Conv2d(channels, out, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(out),
            nn.ReLU(inplace=True),
        ]
        if pool:
            layers.append(nn.MaxPool2d(2))
        super().__init__(*layers)


class HiddenLayer(nn.Sequential):
    """Linear - ReLU: ``(B, features)`` -> ``(B, width)``."""

    def __init__(self, features: int, width: int) -> None:
        super().__init__(nn.Linear(features, width), nn.ReLU(inplace=True))


class ConvNet(nn.Module):
    """A plain CNN: ``depth`` blocks of conv3x3-BatchNorm-ReLU-maxpool (:class:`ConvBlock`),
    then a linear head on
    the flattened feature map (as LeNet-5 and PyTorch's MNIST example net keep the spatial
    map to the head; a global-average-pooling head reached 82 % on MNIST at depth 2, width
    16, this one 98.4 %: docs/benchmarks.md).

    Block ``i`` has ``width * 2**i`` output channels; pooling halves the spatial size while it
    is at least 2 (8x8 digits at depth 3: a 1x1 map; 28x28 MNIST at depth 3: 3x3). Input
    ``(B, C, H, W)``, output logits ``(B, num_classes)``.
    """

    def __init__(
        self, depth: int, width: int, input_shape: tuple[int, int, int], num_classes: int
    ) -> None:
        super().__init__()
        channels, height, breadth = input_shape
        blocks: list[nn.Module] = []
        for i in range(depth):
            out = width * 2**i
            pool = height >= 2 and breadth >= 2
            blocks.append(ConvBlock(channels, out, pool))
            if pool:
                height, breadth = height // 2, breadth // 2
            channels = out
        self.features = nn.Sequential(*blocks)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(channels * height * breadth, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)  # (B, width * 2**(depth-1), H', W')
        return self.head(x)  # (B, num_classes)


class MLP(nn.Module):
    """A multilayer perceptron: ``depth`` hidden layers of ``width`` units with ReLU.

    Input ``(B, C, H, W)`` is flattened to ``(B, C*H*W)``; output logits ``(B, num_classes)``.
    """

    def __init__(
        self, depth: int, width: int, input_shape: tuple[int, int, int], num_classes: int
    ) -> None:
        super().__init__()
        features = input_shape[0] * input_shape[1] * input_shape[2]
        layers: list[nn.Module] = [nn.Flatten()]
        for _ in range(depth):
            layers.append(HiddenLayer(features, width))
            features = width
        layers.append(nn.Linear(features, num_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)  # (B, num_classes)


def build_model(
    family: str, depth: int, width: int, input_shape: tuple[int, int, int], num_classes: int
) -> nn.Module:
    """Build a model of the given family and size.

    Args:
        family: ``"cnn"`` or ``"mlp"``.
        depth: blocks (cnn) or hidden layers (mlp), >= 1.
        width: base channels (cnn) or hidden units (mlp), >= 1.
        input_shape: ``(C, H, W)`` of one sample.
        num_classes: number of output logits.

    Raises:
        ValueError: for an unknown family or a size below 1.
    """
    if depth < 1 or width < 1:
        raise ValueError(f"depth >= 1 and width >= 1 must hold, but got {depth=}, {width=}")
    if family == "cnn":
        return ConvNet(depth, width, input_shape, num_classes)
    if family == "mlp":
        return MLP(depth, width, input_shape, num_classes)
    raise ValueError(f"unknown model family {family!r} (known: cnn, mlp)")
