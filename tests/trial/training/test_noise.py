"""Tests of the gradient-noise probe (autotune.trial.training._noise): it measures, and leaves the
step's math unchanged (buffers, random state, gradients)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch

from autotune.core.goodput import NoiseScaleEma
from autotune.trial.training._noise import probe_noise, probe_steps


def _training(batch_size: int, accumulation: int = 1) -> Any:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(6, 8), torch.nn.BatchNorm1d(8), torch.nn.Dropout(0.3), torch.nn.Linear(8, 3)
    )
    return SimpleNamespace(
        config=SimpleNamespace(batch_size=batch_size),
        accumulation_steps=accumulation,
        model=model,
        device=torch.device("cpu"),
        autocast_dtype=None,
        workload=SimpleNamespace(loss=torch.nn.functional.cross_entropy),
    )


def test_probe_records_a_pair_and_restores_state() -> None:
    t = _training(batch_size=16)
    x, y = torch.randn(16, 6), torch.randint(0, 3, (16,))
    buffers = [b.clone() for b in t.model.buffers()]
    rng = torch.get_rng_state()
    ema = NoiseScaleEma()
    assert probe_noise(t, x, y, ema)
    assert ema.updates == 1 and ema.grad_sq_norm == ema.grad_sq_norm  # finite, not NaN
    assert all(torch.equal(a, b) for a, b in zip(buffers, t.model.buffers(), strict=True))
    assert torch.equal(rng, torch.get_rng_state())
    assert all(p.grad is None for p in t.model.parameters())


def test_probe_skips_a_batch_too_small() -> None:
    t = _training(batch_size=1)
    ema = NoiseScaleEma()
    assert not probe_noise(t, torch.randn(1, 6), torch.zeros(1, dtype=torch.long), ema)
    assert ema.updates == 0


def test_probe_steps_spread() -> None:
    assert probe_steps(80, 8) == frozenset(range(5, 80, 10))
    assert len(probe_steps(3, 8)) == 3
