"""Workload files of the kind users write, as text for tests to put in ``tmp_path``."""

from __future__ import annotations

from pathlib import Path

#: A small regression workload with its own loss, metric and direction: y = x @ w + noise on
#: 4 features; the metric is the validation mean squared error (lower is better).
REGRESSION = """\
import torch
from torch import nn
from torch.utils.data import TensorDataset


class Regression:
    metric_name = "val_mse"
    metric_direction = "minimize"

    def __init__(self, samples: int = 256) -> None:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(samples, 4, generator=g)
        y = x @ torch.tensor([1.0, -2.0, 0.5, 3.0]) + 0.01 * torch.randn(samples, generator=g)
        cut = samples * 3 // 4
        self._data = (TensorDataset(x[:cut], y[:cut]), TensorDataset(x[cut:], y[cut:]))
        self.evaluated: list[float] = []

    def build_model(self, hidden: int, activation: str = "relu", scale: float = 1.0):
        act = nn.ReLU() if activation == "relu" else nn.GELU()
        return nn.Sequential(nn.Linear(4, hidden), act, nn.Linear(hidden, 1), nn.Flatten(0))

    def datasets(self):
        return self._data

    def loss(self, output, target):
        return nn.functional.mse_loss(output, target)

    def evaluate(self, model, loader, device):
        total, n = 0.0, 0
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            total += float(nn.functional.mse_loss(model(x), y, reduction="sum"))
            n += len(y)
        self.evaluated.append(total / n)
        return total / n


WORKLOAD = Regression()
"""

#: A space for :data:`REGRESSION` (``workload: regression.py:Regression``).
REGRESSION_SPACE = """\
name: regression
workload: regression.py:Regression
workload_args: {samples: 256}
model:
  hidden: [4, 8]
  activation: [relu, gelu]
  scale: {low: 0.5, high: 2.0}
batch_size: [16, 32]
train:
  epochs: 1
"""


def write_regression(directory: Path, space: str = REGRESSION_SPACE) -> Path:
    """Write ``regression.py`` and its space into ``directory``; return the space's path."""
    (directory / "regression.py").write_text(REGRESSION, encoding="utf-8")
    path = directory / "regression.yaml"
    path.write_text(space, encoding="utf-8")
    return path
