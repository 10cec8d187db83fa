"""User code for the tests of the loop door (autotune/training/_loop.py): training functions
a space's ``loop:`` names, each run in the test process by :func:`autotune.training._loop.run_loop`.
What a function saw is kept in :data:`SEEN` for the test to read."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

#: What the last function run saw, by name (cleared by each function).
SEEN: dict[str, Any] = {}

N_TRAIN, N_VAL = 96, 32


class DictImages(Dataset):
    """Items ``{"image": (1, 8, 8) float32, "label": int64}``: dict batches once collated."""

    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, 1, 8, 8, generator=g)
        self.y = (self.x.mean(dim=(1, 2, 3)) > 0).long()

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"image": self.x[i], "label": self.y[i]}


def collate(items: list[dict[str, torch.Tensor]]) -> dict[str, Any]:
    """A custom collate: stacks the dicts and adds a field of its own."""
    return {
        "image": torch.stack([item["image"] for item in items]),
        "label": torch.stack([item["label"] for item in items]),
        "note": "collated by door_code.collate",
    }


class Net(torch.nn.Module):
    def __init__(self, width: int = 4) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(1, width, 3, padding=1)
        self.head = torch.nn.Linear(width * 64, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(F.relu(self.conv(x)).flatten(1))  # (B, 1, 8, 8) -> (B, 2)


def _objects(trial: Any) -> tuple[Any, ...]:
    model = Net(**trial.model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    train_loader = DataLoader(
        DictImages(N_TRAIN, 0), batch_size=8, shuffle=True, collate_fn=collate
    )
    val_loader = DataLoader(DictImages(N_VAL, 1), batch_size=16, collate_fn=collate)
    return model, optimizer, scheduler, train_loader, val_loader


def classify(trial: Any) -> float:
    """A loop with dict batches, a custom collate, the user's SGD and StepLR; records what the
    trial's knobs did to them."""
    SEEN.clear()
    model, optimizer, scheduler, train_loader, val_loader = _objects(trial)
    SEEN["user_optimizer"] = optimizer
    SEEN["lr_before"] = optimizer.param_groups[0]["lr"]
    model, optimizer, train_loader, val_loader, scheduler = trial.prepare(
        model, optimizer, train_loader, val_loader, scheduler
    )
    SEEN.update(
        model=model,
        optimizer=optimizer,
        scheduler=scheduler,
        lr_after=optimizer.param_groups[0]["lr"],
        train_batch_size=train_loader.batch_size,
        train_workers=train_loader.num_workers,
        budget=trial.budget_steps(train_loader),
        batches=[],
        autocast=[],
    )
    for batch in trial.steps(train_loader):
        SEEN["batches"].append(batch)
        optimizer.zero_grad()
        with trial.autocast():
            SEEN["autocast"].append(
                torch.is_autocast_enabled(batch["image"].device.type)
                and torch.get_autocast_dtype(batch["image"].device.type)
            )
            loss = F.cross_entropy(model(batch["image"]), batch["label"])
        trial.backward(loss)
        trial.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
    SEEN["last_lr"] = scheduler.get_last_lr()[0]
    correct = total = 0
    with torch.no_grad():
        for batch in val_loader:
            SEEN.setdefault("val_devices", set()).add(batch["image"].device.type)
            correct += int((model(batch["image"]).argmax(1) == batch["label"]).sum())
            total += len(batch["label"])
    SEEN["accuracy"] = correct / total
    trial.report(correct / total, samples=total)
    return correct / total


def _train_all(trial: Any) -> tuple[Any, ...]:
    model, optimizer, _, train_loader, val_loader = _objects(trial)
    model, optimizer, train_loader, val_loader = trial.prepare(
        model, optimizer, train_loader, val_loader
    )
    for batch in trial.steps(train_loader):
        optimizer.zero_grad()
        trial.backward(F.cross_entropy(model(batch["image"]), batch["label"]))
        optimizer.step()
    return model, optimizer, train_loader, val_loader


def no_report(trial: Any) -> None:
    """Trains, never reports."""
    _train_all(trial)


def never_iterates(trial: Any) -> None:
    """Prepares, reports, never trains."""
    model, optimizer, _, train_loader, _ = _objects(trial)
    trial.prepare(model, optimizer, train_loader)
    trial.report(0.5)


def prepares_twice(trial: Any) -> None:
    model, optimizer, _, train_loader, _ = _objects(trial)
    trial.prepare(model, optimizer, train_loader)
    trial.prepare(model, optimizer, train_loader)


def leaves_early(trial: Any) -> None:
    """Breaks out of the loop after two steps, then reports."""
    model, optimizer, _, train_loader, _ = _objects(trial)
    model, optimizer, train_loader = trial.prepare(model, optimizer, train_loader)
    for i, batch in enumerate(trial.steps(train_loader)):
        optimizer.zero_grad()
        trial.backward(F.cross_entropy(model(batch["image"]), batch["label"]))
        optimizer.step()
        if i == 1:
            break
    trial.report(0.5)


def reports_twice(trial: Any) -> None:
    _train_all(trial)
    trial.report(0.5)
    trial.report(0.6)


def reports_text(trial: Any) -> None:
    _train_all(trial)
    trial.report("high")


def steps_before_prepare(trial: Any) -> None:
    _, _, _, train_loader, _ = _objects(trial)
    for _batch in trial.steps(train_loader):
        pass


def steps_over_the_users_loader(trial: Any) -> None:
    """Iterates the loader it gave prepare, not the one prepare returned."""
    model, optimizer, _, train_loader, _ = _objects(trial)
    trial.prepare(model, optimizer, train_loader)
    for _batch in trial.steps(train_loader):
        pass


def prepares_without_a_loader(trial: Any) -> None:
    model, optimizer, _, _, _ = _objects(trial)
    trial.prepare(model, optimizer)
