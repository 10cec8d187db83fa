"""autotune's built-in CNN on the shipped MNIST, written as a plain PyTorch training loop:
the ``loop:`` door.

The model, data, optimizer and learning-rate schedule are the ``cnn_small`` space's (the
built-in ``cnn`` family: ``depth`` conv blocks of ``width * 2**i`` channels; the 10,000 MNIST
images shipped with autotune, 8,000 to train and 2,000 to validate; AdamW at 3e-3 with a
linear warm-up over 5 % of the steps, then a cosine decay), so that the same knobs train the
same model through either door. Five lines are autotune's: ``trial.prepare``,
``trial.budget_steps``, ``trial.steps``, ``trial.autocast``, ``trial.backward`` and
``trial.report``; the rest is an ordinary loop, and ``python train.py`` trains it on its own
with PyTorch's defaults::

    python examples/loop_cnn/train.py
    autotune run space=examples/loop_cnn/space.yaml --trials 3 device=cpu
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.optim.lr_scheduler import CosineAnnealingLR, LinearLR, SequentialLR
from torch.utils.data import DataLoader, TensorDataset

import autotune
from autotune.core.config import DataSettings
from autotune.trial.workloads.builtin import build_model, load_dataset

LR = 3.0e-3  # AdamW's rate at the baseline's batch (autotune scales it with the batch)
WARMUP_FRACTION = 0.05  # linear warm-up over this share of the steps, then cosine to 0


def schedule(optimizer: torch.optim.Optimizer, total_steps: int) -> torch.optim.lr_scheduler.LRScheduler:
    """A linear warm-up over ``WARMUP_FRACTION`` of ``total_steps``, then a cosine decay to 0."""
    warmup = max(1, math.ceil(round(WARMUP_FRACTION * total_steps, 9)))
    if warmup < 2:
        return CosineAnnealingLR(optimizer, T_max=total_steps)
    return SequentialLR(
        optimizer,
        [
            LinearLR(optimizer, start_factor=1.0 / warmup, end_factor=1.0, total_iters=warmup - 1),
            CosineAnnealingLR(optimizer, T_max=total_steps - warmup + 1),
        ],
        milestones=[warmup - 1],
    )


@torch.no_grad()
def accuracy(model: torch.nn.Module, loader: DataLoader, trial: autotune.LoopTrial) -> tuple[float, int]:
    """Top-1 accuracy over ``loader`` and the samples it counted."""
    model.eval()
    correct = total = 0
    for x, y in loader:
        with trial.autocast():
            correct += int((model(x).argmax(dim=1) == y).sum())
        total += len(y)
    model.train()
    return correct / max(1, total), total


def train(trial: autotune.LoopTrial) -> float:
    """Train the CNN of ``trial.model``'s depth and width for the trial's budget; report and
    return the validation accuracy."""
    data = load_dataset(DataSettings(name="mnist"))
    knobs = {"depth": 3, "width": 16, **trial.model}
    model = build_model("cnn", knobs["depth"], knobs["width"], data.input_shape, data.num_classes)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR)
    train_loader = DataLoader(TensorDataset(data.train_x, data.train_y), batch_size=64, shuffle=True)
    val_loader = DataLoader(TensorDataset(data.val_x, data.val_y), batch_size=256)
    model, optimizer, train_loader, val_loader = trial.prepare(
        model, optimizer, train_loader, val_loader
    )
    lr_schedule = schedule(optimizer, trial.budget_steps(train_loader))
    for x, y in trial.steps(train_loader):
        optimizer.zero_grad(set_to_none=True)
        with trial.autocast():
            loss = F.cross_entropy(model(x), y)
        trial.backward(loss)
        optimizer.step()
        lr_schedule.step()
    value, samples = accuracy(model, val_loader, trial)
    trial.report(value, samples=samples)
    return value


if __name__ == "__main__":
    print(f"validation accuracy {train(autotune.LoopTrial(epochs=3, seed=0)):.4f}")
