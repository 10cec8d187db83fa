"""Workloads for the paired check's tests (tests/trial/training/test_check.py): a small CNN on
scikit-learn's digits whose custom op reads its input's memory as if it were contiguous, the
kind of op that breaks silently under channels_last."""

from __future__ import annotations

import torch
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import TensorDataset


class ContiguousOnlyShift(nn.Module):
    """A custom op written for contiguous NCHW input: it shifts each row of pixels by one
    position by reading the raw storage with contiguous strides. Under channels_last the same
    storage holds another order, so it silently computes something else."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, C, H, W)
        n, c, h, w = x.shape
        flat = torch.as_strided(x, (n, c, h, w), (c * h * w, h * w, w, 1))  # assumes NCHW
        return torch.roll(flat, shifts=1, dims=3)


class StridedDigits:
    """Digits through conv -> the contiguous-only op -> linear."""

    def build_model(self, width: int = 4) -> nn.Module:
        return nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1),
            ContiguousOnlyShift(),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(width * 64, 10),
        )

    def datasets(self) -> tuple[TensorDataset, TensorDataset]:
        digits = load_digits()
        x = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16  # (N, 1, 8, 8)
        y = torch.tensor(digits.target)
        return TensorDataset(x[:1400], y[:1400]), TensorDataset(x[1400:], y[1400:])


class NanDigits(StridedDigits):
    """A workload whose evaluation returns NaN (a diverged model's accuracy, say)."""

    def evaluate(self, model: nn.Module, loader: object, device: object) -> float:
        return float("nan")
