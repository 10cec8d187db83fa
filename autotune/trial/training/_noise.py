"""The gradient noise scale of a trial's run (:mod:`autotune.core.goodput`), from probes off the
timed windows: on a few sampled steps, before the step, two pieces of the step's own batch go
forward and backward through the eager model, and the squared gradient norms after the first
piece and after both give the two batch sizes of McCandlish et al. 2018, Appendix A.1.

What it costs: per probe, a forward and backward pass over two pieces (half the batch each, or
two micro-batches under accumulation) and two norm reductions, with the meter's clock paused
(two device syncs); :data:`NOISE_PROBES` probes per run. What it leaves unchanged: the step
itself. The probe's gradients are discarded (the step zeroes them first), and the model's
buffers (BatchNorm's running statistics) and the random number generators' states are
restored, so the trained trajectory is the same, bit for bit, as without probes.
"""

from __future__ import annotations

import torch

from autotune.core.goodput import NoiseScaleEma
from autotune.trial.training._setup import Training

__all__ = ["NOISE_PROBES", "probe_noise", "probe_steps"]

#: Probes of the gradient noise scale per run, spread evenly over its steps.
NOISE_PROBES = 8


def probe_steps(total_steps: int, probes: int = NOISE_PROBES) -> frozenset[int]:
    """The steps (0-based, counted before each step) whose batch is probed: ``probes`` spread
    evenly over ``total_steps``, fewer on a shorter run."""
    return frozenset(int((i + 0.5) * total_steps / probes) for i in range(probes))


def probe_noise(t: Training, x: torch.Tensor, y: torch.Tensor, ema: NoiseScaleEma) -> bool:
    """One probe on the batch ``(x, y)`` the next step will take (x: (k*B, ...)); adds its
    pair of squared norms to ``ema``. False (nothing done) when the batch has fewer than 2
    pieces.

    The small batch is one piece of m samples (m = B/2 without accumulation, the micro-batch B
    with it), the big one both pieces (2m): after the first piece's backward of half its mean
    loss the gradient is G_small / 2; after the second's it is G_big.
    """
    micro = t.config.batch_size // 2 if t.accumulation_steps == 1 else t.config.batch_size
    if micro < 1 or x.shape[0] < 2 * micro:
        return False
    model = t.model
    params = [p for p in model.parameters() if p.requires_grad]
    buffers = [b.detach().clone() for b in model.buffers()]
    cpu_rng = torch.get_rng_state()
    cuda_rng = torch.cuda.get_rng_state_all() if t.device.type == "cuda" else None
    model.zero_grad(set_to_none=True)
    sq_norms: list[float] = []
    for i in range(2):
        piece = slice(i * micro, (i + 1) * micro)
        with torch.autocast(
            t.device.type, dtype=t.autocast_dtype, enabled=t.autocast_dtype is not None
        ):
            loss = t.workload.loss(model(x[piece]), y[piece]) * 0.5
        loss.backward()
        grads = [p.grad.detach().double() for p in params if p.grad is not None]
        sq_norms.append(float(sum(g.pow(2).sum() for g in grads)))  # one sync per piece
    model.zero_grad(set_to_none=True)
    with torch.no_grad():
        for buffer, saved in zip(model.buffers(), buffers, strict=True):
            buffer.copy_(saved)
    torch.set_rng_state(cpu_rng)
    if cuda_rng is not None:
        torch.cuda.set_rng_state_all(cuda_rng)
    ema.update(4.0 * sq_norms[0], sq_norms[1], micro, 2 * micro)
    return True
