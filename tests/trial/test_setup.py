"""What both loops share (autotune/trial/_setup.py): the peak learning rate scaled with the
global batch, and the learning-rate schedule (linear warm-up, then constant or cosine)."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from autotune.config import TrainSettings
from autotune.testing import make_trial_config
from autotune.trial._setup import make_lr_schedule
from tests.trial.loops import train_here

pytestmark = pytest.mark.slow


def test_the_peak_learning_rate_follows_the_global_batch() -> None:
    # SGD, linear rule: batch 128 against the reference 64 trains at twice the rate.
    config = make_trial_config(
        family="mlp",
        width=32,
        batch_size=128,
        train={"optimizer": "sgd", "lr": 0.05, "reference_batch_size": 64},
    )

    m, _ = train_here(config)

    assert m.extra["lr_peak"] == pytest.approx(0.1)
    assert math.isfinite(m.train_loss)


def _lrs(settings: TrainSettings, total_steps: int) -> list[float]:
    """The learning rate of each of ``total_steps`` optimizer steps (peak 0.4)."""
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.4)
    schedule = make_lr_schedule(optimizer, settings, total_steps)
    lrs = []
    for _ in range(total_steps):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        if schedule is not None:
            schedule.step()
    return lrs


def test_lr_warmup_rises_linearly_to_the_peak() -> None:
    constant = TrainSettings(lr_schedule="constant", lr_warmup_fraction=0.5)  # 4 of 8 steps

    assert _lrs(constant, 8) == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.4, 0.4, 0.4, 0.4])


@pytest.mark.parametrize(
    "settings",
    [
        TrainSettings(lr_schedule="constant", lr_scaling="none"),  # no warm-up
        TrainSettings(lr_schedule="constant", lr_warmup_fraction=0.05),  # 1 step of 10
    ],
)
def test_no_lr_warmup_below_two_steps(settings: TrainSettings) -> None:
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.4)

    assert make_lr_schedule(optimizer, settings, 10) is None
    assert _lrs(settings, 10) == [0.4] * 10


def test_cosine_decays_from_the_peak_after_the_warm_up() -> None:
    lrs = _lrs(TrainSettings(lr_warmup_fraction=0.25), 8)  # 2 warm-up steps, then cosine

    assert lrs[:2] == pytest.approx([0.2, 0.4])
    assert all(a > b for a, b in itertools.pairwise(lrs[1:]))
    assert 0 < lrs[-1] < 0.05 * 0.4  # near 0 at the last step
