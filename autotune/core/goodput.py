"""Goodput: how a change of the global batch is ranked without training it to the end.

A larger global batch raises throughput (samples/s) but each sample then teaches less: past
the **gradient noise scale** B_noise, doubling the batch no longer halves the steps to a
target. Pollux (Qiao et al., "Pollux: Co-adaptive Cluster Scheduling for Goodput-Optimized
Deep Learning", OSDI '21, eq. 5; AdaptDL's ``adaptdl.goodput``) ranks a batch by

    goodput = throughput x E(B),    E(B) = (B_noise + B0) / (B_noise + B),

the **statistical efficiency** of a global batch B against the baseline's B0: the progress per
sample at B relative to B0 (1 at B0, below 1 for a larger batch). It comes from McCandlish et
al., "An Empirical Model of Large-Batch Training" (arXiv:1812.06162, 2018), eq. 2.11: the
samples needed to reach a target grow as E = E_min (1 + B / B_noise), so the samples to target
at B0 over those at B are (1 + B0/B_noise) / (1 + B/B_noise) = E(B). E(B) predicts a ratio of
**samples**; in optimizer steps the same model says steps(B) / steps(B0) = (B0 / B) / E(B).

B_noise is B_simple = tr(Sigma) / |G|^2 (McCandlish et al., eq. 2.8), measured during the
baseline's run from the squared norms of gradients over two batch sizes of the same weights
(:func:`noise_estimates`, their Appendix A.1) and averaged as a ratio of exponential moving
averages (:class:`NoiseScaleEma`). The module is pure (floats in, floats out): the trial side
measures the norms (``autotune.trial.training._throughput``), the outputs rank and show the goodput.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = [
    "GoodputRow",
    "NoiseScaleEma",
    "goodput_sps",
    "noise_estimates",
    "rank_by_goodput",
    "statistical_efficiency",
]


def _check_batches(batch_small: int, batch_big: int) -> None:
    if not 1 <= batch_small < batch_big:
        raise ValueError(
            f"`1 <= batch_small < batch_big` must hold, but got batch_small={batch_small}, "
            f"batch_big={batch_big}"
        )


def noise_estimates(
    sq_norm_small: float, sq_norm_big: float, batch_small: int, batch_big: int
) -> tuple[float, float]:
    """Unbiased estimates of the true gradient's squared norm |G|^2 and of the per-sample
    gradient noise tr(Sigma), from the squared norms of two mini-batch gradients of the same
    weights.

    A mini-batch gradient G_B over B samples has E|G_B|^2 = |G|^2 + tr(Sigma) / B; two batch
    sizes give two equations, whose solution is (McCandlish et al. 2018, Appendix A.1):

        |G|^2 ~ (B_big |G_big|^2 - B_small |G_small|^2) / (B_big - B_small)
        S = tr(Sigma) ~ (|G_small|^2 - |G_big|^2) / (1/B_small - 1/B_big)

    Each estimate is unbiased but noisy (either may be negative for one pair); average many
    before dividing one by the other (:class:`NoiseScaleEma`).

    Args:
        sq_norm_small: |G_small|^2, the squared L2 norm of the mean gradient over
            ``batch_small`` samples (summed over every parameter).
        sq_norm_big: |G_big|^2, the same over ``batch_big`` samples.
        batch_small: samples of the small batch.
        batch_big: samples of the big batch (> ``batch_small``).

    Returns:
        ``(g2, s)``: the |G|^2 estimate (squared gradient units) and the tr(Sigma) estimate
        (squared gradient units x samples).

    Raises:
        ValueError: ``1 <= batch_small < batch_big`` does not hold, or a norm is not finite.
    """
    _check_batches(batch_small, batch_big)
    if not (math.isfinite(sq_norm_small) and math.isfinite(sq_norm_big)):
        raise ValueError(
            f"squared gradient norms must be finite, but got {sq_norm_small}, {sq_norm_big}"
        )
    g2 = (batch_big * sq_norm_big - batch_small * sq_norm_small) / (batch_big - batch_small)
    s = (sq_norm_small - sq_norm_big) / (1.0 / batch_small - 1.0 / batch_big)
    return g2, s


@dataclass
class NoiseScaleEma:
    """The simple noise scale B_simple = tr(Sigma) / |G|^2 (samples), as the ratio of
    exponential moving averages of the two unbiased estimates of :func:`noise_estimates`.

    McCandlish et al. (2018, Appendix A.1) average S and |G|^2 separately and divide the
    averages: the mean of the ratios would be biased (a ratio of two noisy estimates, whose
    denominator may come near 0 or below it). Each average is debiased for its start at 0 as
    Adam does (Kingma & Ba, ICLR 2015, sec. 3); the debiasing factor is the same for both and
    cancels in the ratio, but keeps each average on its own scale.

    Args:
        decay: the weight of the past at each update (0 <= decay < 1; 0 keeps the last pair).

    Raises:
        ValueError: ``decay`` outside [0, 1).
    """

    decay: float = 0.9
    updates: int = 0
    _g2: float = field(default=0.0, repr=False)
    _s: float = field(default=0.0, repr=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.decay < 1.0:
            raise ValueError(f"`0 <= decay < 1` must hold, but got decay={self.decay}")

    def update(
        self, sq_norm_small: float, sq_norm_big: float, batch_small: int, batch_big: int
    ) -> None:
        """Add one pair of squared gradient norms of the same weights (:func:`noise_estimates`
        has the arguments and the errors raised)."""
        g2, s = noise_estimates(sq_norm_small, sq_norm_big, batch_small, batch_big)
        self._g2 = self.decay * self._g2 + (1.0 - self.decay) * g2
        self._s = self.decay * self._s + (1.0 - self.decay) * s
        self.updates += 1

    def _debiased(self, value: float) -> float:
        return value / (1.0 - self.decay**self.updates) if self.updates else math.nan

    @property
    def grad_sq_norm(self) -> float:
        """The average |G|^2 estimate (squared gradient units); NaN before any update."""
        return self._debiased(self._g2)

    @property
    def trace_sigma(self) -> float:
        """The average tr(Sigma) estimate S (squared gradient units x samples); NaN before any
        update."""
        return self._debiased(self._s)

    @property
    def noise_scale_samples(self) -> float | None:
        """B_simple in samples; None before any update or when the average |G|^2 or S is not
        positive (the noise drowns the signal: not resolved by these pairs)."""
        if not self.updates or self._g2 <= 0.0 or self._s <= 0.0:
            return None
        return self._s / self._g2


def statistical_efficiency(
    batch_samples: int, baseline_batch_samples: int, noise_scale_samples: float
) -> float:
    """AdaptDL's statistical efficiency of a global batch against the baseline's:
    E(B) = (B_noise + B0) / (B_noise + B) (Qiao et al., OSDI '21, eq. 5; McCandlish et al.
    2018, eq. 2.11). It predicts samples to target at B0 over samples to target at B, at
    each batch's well-tuned learning rate: 1 at B0, < 1 above it, > 1 (at most
    (B_noise + B0) / B_noise) below it.

    Args:
        batch_samples: B, the candidate's global batch (samples per optimizer step).
        baseline_batch_samples: B0, the baseline's global batch, where B_noise was measured.
        noise_scale_samples: B_noise (samples), the baseline's B_simple.

    Returns:
        E(B), dimensionless.

    Raises:
        ValueError: a batch below 1, or a noise scale that is not positive and finite.
    """
    if batch_samples < 1 or baseline_batch_samples < 1:
        raise ValueError(
            f"batches must be at least 1 sample, but got B={batch_samples}, "
            f"B0={baseline_batch_samples}"
        )
    if not (math.isfinite(noise_scale_samples) and noise_scale_samples > 0):
        raise ValueError(
            f"the noise scale must be positive and finite, but got {noise_scale_samples}"
        )
    return (noise_scale_samples + baseline_batch_samples) / (noise_scale_samples + batch_samples)


def goodput_sps(throughput_sps: float, efficiency: float) -> float:
    """Goodput: throughput x statistical efficiency (Pollux, OSDI '21, eq. 1), in samples/s
    of the baseline's batch: the rate of training progress, counted in the samples the
    baseline would need for the same progress.

    Raises:
        ValueError: a negative or non-finite throughput or efficiency.
    """
    for name, value in (("throughput_sps", throughput_sps), ("efficiency", efficiency)):
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"`{name}` must be finite and >= 0, but got {value}")
    return throughput_sps * efficiency


@dataclass(frozen=True)
class GoodputRow:
    """One candidate's goodput, beside its throughput.

    Attributes:
        trial_number: the Optuna trial.
        batch_samples: its global batch (samples per optimizer step).
        throughput_sps: its measured throughput (samples/s).
        efficiency: E(B) against the baseline's batch.
        goodput_sps: throughput x E(B) (samples/s of the baseline's batch).
    """

    trial_number: int
    batch_samples: int
    throughput_sps: float
    efficiency: float
    goodput_sps: float


def rank_by_goodput(
    candidates: Iterable[tuple[int, int, float]],
    baseline_batch_samples: int,
    noise_scale_samples: float,
) -> list[GoodputRow]:
    """Candidates ranked by goodput, best first (ties: the higher throughput, then the lower
    trial number).

    Args:
        candidates: ``(trial_number, batch_samples, throughput_sps)`` of each candidate.
        baseline_batch_samples: B0, the baseline's global batch.
        noise_scale_samples: the baseline's B_noise (samples).

    Raises:
        ValueError: as :func:`statistical_efficiency` and :func:`goodput_sps`.
    """
    rows = []
    for number, batch, throughput in candidates:
        efficiency = statistical_efficiency(batch, baseline_batch_samples, noise_scale_samples)
        rows.append(
            GoodputRow(number, batch, throughput, efficiency, goodput_sps(throughput, efficiency))
        )
    return sorted(rows, key=lambda r: (-r.goodput_sps, -r.throughput_sps, r.trial_number))
