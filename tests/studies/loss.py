"""A study whose metric is a loss (``val_loss``, minimized) and whose model knobs have a user
workload's names (``n_layer``, ``n_embd``), for the tests that check every output and the
verification follow the study's metric and knob names.

The workload is a tiny regression written to ``tmp_path`` (it is imported and its smallest
model built before the study, never trained); the trials and the verification runs are played
in this process by :func:`scripted_loss`, whose figures are set so that the minimized metric
and a maximized one would choose differently:

- the baseline (batch 64, ``n_embd`` 8): 1,000 samples/s, ``val_loss`` 1.000;
- ``n_embd=16``: 1.3x faster, ``val_loss`` 0.001 lower (better): qualifies;
- batch 128: 2x faster, ``val_loss`` 0.008 higher, more than 0.5 % worse: never a finalist
  (a maximized metric would take it for the better one);
- ``n_layer=2``: ``val_loss`` 0.1 lower, a quarter as fast: never faster than the baseline.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from autotune.core.config import RunConfig, TrialConfig, load_run_config
from autotune.study.api import StudyResult, run_study
from autotune.testing import make_measurement
from autotune.trial.measure import Measurement

#: Finished trials of the study.
N_TRIALS = 12

WORKLOAD = '''\
"""A tiny regression whose validation metric is its loss."""
import torch
from torch import nn
from torch.utils.data import TensorDataset


class TinyRegression:
    metric_name = "val_loss"
    metric_direction = "minimize"

    def build_model(self, n_layer: int, n_embd: int) -> nn.Module:
        layers = [nn.Linear(4, n_embd)]
        for _ in range(n_layer - 1):
            layers += [nn.ReLU(), nn.Linear(n_embd, n_embd)]
        return nn.Sequential(*layers, nn.Linear(n_embd, 1))

    def datasets(self):
        x = torch.randn(64, 4, generator=torch.Generator().manual_seed(0))
        y = x.sum(dim=1, keepdim=True)
        return TensorDataset(x[:48], y[:48]), TensorDataset(x[48:], y[48:])

    def loss(self, output, target):
        return nn.functional.mse_loss(output, target)

    def evaluate(self, model, loader, device):
        return 1.0
'''

SPACE = """\
name: tiny_loss
workload: tiny_regression.py:TinyRegression
model:
  n_layer: [1, 2]
  n_embd: [8, 16]
batch_size: [32, 64, 128]
train:
  epochs: 1
"""


def scripted_loss(config: TrialConfig) -> Measurement:
    """The figures of the module docstring (throughput varies a little with the seed)."""
    batch, n_layer, n_embd = config.batch_size, config.model["n_layer"], config.model["n_embd"]
    speed = (batch / 64) * (1.3 if n_embd == 16 else 1.0) / n_layer**2
    loss = 1.0 + 0.008 * (batch // 64 - 1) - 0.001 * (n_embd == 16) - 0.1 * (n_layer - 1)
    return make_measurement(
        throughput_sps=1000.0 * speed + config.seed % 5,
        val_metric=round(loss, 6),
        simulated=False,
        memory_kind="process_rss_peak",
    )


@dataclass(frozen=True)
class LossStudy:
    """The study's configuration and what its run returned (verified: 3 rounds)."""

    config: RunConfig
    result: StudyResult

    @property
    def url(self) -> str:
        return self.config.storage

    @property
    def name(self) -> str:
        return self.config.study


def write_loss_space(directory: Path) -> Path:
    """Write the workload and its space file into ``directory``; return the space file."""
    (directory / "tiny_regression.py").write_text(WORKLOAD, encoding="utf-8")
    space = directory / "space.yaml"
    space.write_text(SPACE, encoding="utf-8")
    return space


def loss_config(directory: Path, *extra: str) -> RunConfig:
    """A run configuration of the loss study on ``cpu``, its database in ``directory``."""
    space = write_loss_space(directory)
    return load_run_config(
        [
            f"space={space}",
            "device=cpu",
            "study=loss",
            f"storage=sqlite:///{directory / 'autotune.db'}",
            "verify.rounds=3",
            "advanced.verify.candidates=3",
            # 0.2 %: the screen (3 x the tolerance for a loss, 0.6 %) keeps out the faster
            # trials whose loss is 0.7-0.8 % above the baseline's, so the race's survivor is
            # the lower-loss one the confirmation recommends.
            "verify.accuracy_tolerance_pt=0.2",
            *extra,
        ]
    )


_SHARED: dict[str, LossStudy] = {}


def shared_loss_study(tmp_path_factory: pytest.TempPathFactory) -> LossStudy:
    """One verified :class:`LossStudy` per test session (built on first use; tests only read
    it)."""
    if "study" not in _SHARED:
        config = loss_config(tmp_path_factory.mktemp("loss_study"))
        _SHARED["study"] = LossStudy(
            config, run_study(config, N_TRIALS, run_trial_fn=scripted_loss)
        )
    return _SHARED["study"]
