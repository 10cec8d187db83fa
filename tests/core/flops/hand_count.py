"""Training FLOPs counted by hand, to check the counter against."""

from __future__ import annotations


def cnn_flops_per_sample(width: int, h: int = 8, w: int = 8) -> int:
    """One conv block (1 -> width channels, 3x3, pad 1, then a 2x2 max-pool) and a linear
    head on the flattened pooled map, by hand.

    Forward: conv 2*H*W*Cin*Cout*9, linear 2*(width*H/2*W/2)*10. Backward: the conv's weight
    gradient only (the input needs none), the linear's weight and input gradients.
    """
    conv = 2 * h * w * 1 * width * 9
    linear = 2 * width * (h // 2) * (w // 2) * 10
    return conv + linear + conv + 2 * linear


def cnn_conv_flops_per_sample(width: int, h: int = 8, w: int = 8) -> int:
    """The convolutions' share of :func:`cnn_flops_per_sample`: the forward conv and its
    weight gradient."""
    return 2 * (2 * h * w * 1 * width * 9)
