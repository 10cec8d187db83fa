"""Tests of autotune.core.goodput: the noise-scale estimators on synthetic gradients with known
tr(Sigma) and |G|^2, E(B), goodput and the ranking."""

from __future__ import annotations

import math

import numpy as np
import pytest

from autotune.core.goodput import (
    NoiseScaleEma,
    goodput_sps,
    noise_estimates,
    rank_by_goodput,
    statistical_efficiency,
)


def test_estimates_invert_the_expected_norms_exactly() -> None:
    g2, s = 4.0, 800.0  # E|G_B|^2 = |G|^2 + S / B
    small, big = 32, 64
    est_g2, est_s = noise_estimates(g2 + s / small, g2 + s / big, small, big)
    assert est_g2 == pytest.approx(g2)
    assert est_s == pytest.approx(s)


def test_ema_recovers_known_noise_scale_from_sampled_gradients() -> None:
    rng = np.random.default_rng(0)
    dim, small, big = 50, 8, 16
    true_g = np.full(dim, 0.2)  # |G|^2 = 2.0
    sigma = 1.0  # per-sample noise sd per coordinate: tr(Sigma) = 50
    ema = NoiseScaleEma(decay=0.99)
    for _ in range(3000):
        samples = true_g + sigma * rng.standard_normal((big, dim))  # (B_big, dim)
        g_small = samples[:small].mean(axis=0)
        g_big = samples.mean(axis=0)
        ema.update(float(g_small @ g_small), float(g_big @ g_big), small, big)
    assert ema.grad_sq_norm == pytest.approx(2.0, rel=0.25)
    assert ema.trace_sigma == pytest.approx(50.0, rel=0.15)
    assert ema.noise_scale_samples == pytest.approx(25.0, rel=0.3)


def test_ema_unresolved_and_invalid() -> None:
    ema = NoiseScaleEma()
    assert ema.noise_scale_samples is None
    assert math.isnan(ema.grad_sq_norm)
    ema.update(1.0, 2.0, 4, 8)  # the bigger batch's norm is larger: S < 0
    assert ema.noise_scale_samples is None
    with pytest.raises(ValueError, match="decay"):
        NoiseScaleEma(decay=1.0)
    with pytest.raises(ValueError, match="batch_small < batch_big"):
        noise_estimates(1.0, 1.0, 8, 8)
    with pytest.raises(ValueError, match="finite"):
        noise_estimates(math.nan, 1.0, 4, 8)


def test_statistical_efficiency_values() -> None:
    assert statistical_efficiency(64, 64, 100.0) == 1.0
    assert statistical_efficiency(256, 64, 100.0) == pytest.approx(164 / 356)
    assert statistical_efficiency(32, 64, 100.0) == pytest.approx(164 / 132)
    # A noise scale far above the batches: no loss of efficiency (perfect scaling).
    assert statistical_efficiency(512, 64, 1e9) == pytest.approx(1.0, abs=1e-6)
    with pytest.raises(ValueError, match="positive"):
        statistical_efficiency(64, 64, 0.0)
    with pytest.raises(ValueError, match="at least 1"):
        statistical_efficiency(0, 64, 10.0)


def test_goodput_and_ranking() -> None:
    assert goodput_sps(1000.0, 0.5) == 500.0
    with pytest.raises(ValueError, match="throughput_sps"):
        goodput_sps(-1.0, 0.5)
    # B0 = 64, B_noise = 64: batch 512 is 4x faster but E = 128/576 -> goodput 0.89x.
    rows = rank_by_goodput([(0, 64, 1000.0), (1, 512, 4000.0), (2, 128, 1800.0)], 64, 64.0)
    assert [r.trial_number for r in rows] == [2, 0, 1]
    assert rows[0].efficiency == pytest.approx(128 / 192)
    assert rows[0].goodput_sps == pytest.approx(1800.0 * 128 / 192)
    assert rows[2].goodput_sps == pytest.approx(4000.0 * 128 / 576)
