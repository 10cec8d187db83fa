"""Goodput's prediction against measured steps to target (issue 48, item 3): the built-in CNN
(depth 3, width 16) on the shipped MNIST test set (8,000 train / 2,000 validation), AdamW at
3e-3 for the baseline batch B0 = 64 and the repo's default square-root scaling for the others.

For every seed: the B0 run measures the gradient noise scale B_simple (autotune.core.goodput: two
half-batch gradients of the step's own batch, every 8th step, off the step's math), and every
batch size B trains until the validation loss (2,000 images, evaluated every 256 samples
seen) reaches the target. E(B) = (B_noise + B0)/(B_noise + B) predicts samples to target at B0
over samples to target at B (McCandlish et al. 2018, eq. 2.11; Pollux, OSDI '21), that is
(B0 x steps(B0)) / (B x steps(B)): that measured ratio is compared with it. Step counts are not
timing: the machine need not be idle.

Usage::

    python benchmarks/goodput.py                         # batches 32 64 128 256, seeds 0 1 2
    python benchmarks/goodput.py --batches 64 256 --seeds 1 --target-loss 0.3
"""

from __future__ import annotations

import argparse
import statistics

import torch

from autotune.core.config import DataSettings
from autotune.core.goodput import NoiseScaleEma, statistical_efficiency
from autotune.trial.workloads.builtin import build_model, load_dataset

B0 = 64
LR0 = 3.0e-3
EVAL_EVERY_SAMPLES = 256  # the resolution of steps to target, in samples seen


def _val_loss(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    model.eval()
    with torch.no_grad():
        loss = float(torch.nn.functional.cross_entropy(model(x), y))
    model.train()
    return loss


def _sq_norm(model: torch.nn.Module) -> float:
    return float(
        sum(p.grad.double().pow(2).sum() for p in model.parameters() if p.grad is not None)
    )


def run(batch: int, seed: int, target: float, max_samples: int) -> tuple[int | None, float | None]:
    """Steps to the target validation loss at ``batch`` (None: not reached within
    ``max_samples``), and at B0 the measured B_simple (samples)."""
    data = load_dataset(DataSettings(name="mnist"))
    torch.manual_seed(seed)
    model = build_model("cnn", 3, 16, data.input_shape, data.num_classes)
    opt = torch.optim.AdamW(model.parameters(), lr=LR0 * (batch / B0) ** 0.5)
    gen = torch.Generator().manual_seed(seed)
    ema = NoiseScaleEma(decay=0.9)
    eval_every = max(1, EVAL_EVERY_SAMPLES // batch)
    steps, n = 0, len(data.train_x)
    while steps * batch < max_samples:
        order = torch.randperm(n, generator=gen)
        for i in range(n // batch):
            idx = order[i * batch : (i + 1) * batch]
            x, y = data.train_x[idx], data.train_y[idx]
            if batch == B0 and steps % 8 == 0:  # the probe: two halves of the step's batch
                opt.zero_grad(set_to_none=True)
                half = batch // 2
                (torch.nn.functional.cross_entropy(model(x[:half]), y[:half]) * 0.5).backward()
                small = 4.0 * _sq_norm(model)
                (torch.nn.functional.cross_entropy(model(x[half:]), y[half:]) * 0.5).backward()
                ema.update(small, _sq_norm(model), half, batch)
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            steps += 1
            if steps % eval_every == 0 and _val_loss(model, data.val_x, data.val_y) <= target:
                return steps, ema.noise_scale_samples
    return None, ema.noise_scale_samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[32, 64, 128, 256])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--target-loss", type=float, default=0.15)
    parser.add_argument("--max-samples", type=int, default=64_000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    batches = sorted(set(args.batches) | {B0})
    print(f"target validation loss {args.target_loss}; B0 = {B0}; seeds {args.seeds}")
    print(
        "| seed | B_noise (samples) | B | steps | samples | E(B) predicted | measured S(B0)/S(B) |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    errors: dict[int, list[float]] = {b: [] for b in batches}
    for seed in range(args.seeds):
        results = {b: run(b, seed, args.target_loss, args.max_samples) for b in batches}
        steps0, noise = results[B0]
        for b in batches:
            steps, _ = results[b]
            pred = statistical_efficiency(b, B0, noise) if noise else float("nan")
            meas = (B0 * steps0) / (b * steps) if steps and steps0 else float("nan")
            errors[b].append(meas / pred if pred == pred and meas == meas else float("nan"))
            noise_s = f"{noise:.0f}" if noise else "unresolved"
            steps_s = str(steps) if steps else "not reached"
            print(
                f"| {seed} | {noise_s} | {b} | {steps_s} | {b * steps if steps else '-'} "
                f"| {pred:.3f} | {meas:.3f} |",
                flush=True,
            )
    print("\nmeasured / predicted, mean over seeds:")
    for b in batches:
        ok = [e for e in errors[b] if e == e]
        print(f"  B={b}: {statistics.fmean(ok):.2f}" if ok else f"  B={b}: -")


if __name__ == "__main__":
    main()
