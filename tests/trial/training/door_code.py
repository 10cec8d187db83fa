"""User code for the tests of the loop door (autotune/trial/training/_loop.py): training functions
a space's ``loop:`` names, each run in the test process by :func:`autotune.trial.training._loop.run_loop`.
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


def reports_nan(trial: Any) -> None:
    """A loop whose training diverged: its metric is NaN."""
    _train_all(trial)
    trial.report(float("nan"))


def reports_a_percentage(trial: Any) -> None:
    """Reports its accuracy in percent (the default metric is a fraction in [0, 1])."""
    _train_all(trial)
    trial.report(87.5)


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


# --- Hugging Face Trainer (the hf_trainer door) ----------------------------------------------


class TokenWindows(Dataset):
    """Items ``{"input_ids": (16,) int64, "labels": (16,) int64}`` over a vocabulary of 32."""

    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, 32, (n, 16), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def token_collate(features: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """A custom data collator that counts its calls."""
    SEEN["collated"] = SEEN.get("collated", 0) + 1
    return {key: torch.stack([f[key] for f in features]) for key in features[0]}


def _gpt2(trial: Any) -> Any:
    from transformers import GPT2Config, GPT2LMHeadModel

    knobs = {"n_layer": 1, "n_embd": 16, "n_head": 2, **trial.model}
    config = GPT2Config(vocab_size=32, n_positions=16, bos_token_id=0, eos_token_id=0, **knobs)
    return GPT2LMHeadModel(config)


def _training_args(**overrides: Any) -> Any:
    from transformers import TrainingArguments

    fields = {
        "output_dir": "unused-by-a-trial",
        "learning_rate": 1.0e-3,
        "per_device_train_batch_size": 4,
        "per_device_eval_batch_size": 16,
        "report_to": "none",
        "use_cpu": True,
        "save_strategy": "no",
        **overrides,
    }
    return TrainingArguments(**fields)


def hf_trainer(trial: Any, own_optimizer: bool = True) -> Any:
    """A Trainer of a tiny GPT-2 with a custom collator and, by default, the user's own SGD
    and scheduler."""
    from transformers import Trainer

    SEEN.clear()
    model = _gpt2(trial)
    args = trial.training_args(_training_args())
    optimizers: Any = (None, None)
    if own_optimizer:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
        optimizers = (optimizer, scheduler)
        SEEN.update(user_optimizer=optimizer, user_scheduler=scheduler)
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=TokenWindows(64, 0),
        eval_dataset=TokenWindows(32, 1),
        data_collator=token_collate,
        optimizers=optimizers,
    )
    SEEN.update(args=args, trainer=trainer)
    return trainer


def hf_evaluates_nan(trial: Any) -> Any:
    """:func:`hf_trainer` whose ``evaluate()`` returns a NaN loss (a diverged model)."""
    trainer = hf_trainer(trial)
    trainer.evaluate = lambda *args, **kwargs: {"eval_loss": float("nan"), "epoch": 2.0}
    return trainer


def hf_without_eval_dataset(trial: Any) -> Any:
    """:func:`hf_trainer` built without an ``eval_dataset``."""
    trainer = hf_trainer(trial)
    trainer.eval_dataset = None
    return trainer


def hf_returns_a_model(trial: Any) -> Any:
    trial.training_args(_training_args())
    return _gpt2(trial)


def hf_builds_its_own_arguments(trial: Any) -> Any:
    from transformers import Trainer

    trial.training_args(_training_args())
    return Trainer(model=_gpt2(trial), args=_training_args(), train_dataset=TokenWindows(64, 0))


def hf_maps_twice(trial: Any) -> Any:
    trial.training_args(_training_args())
    return trial.training_args(_training_args())


# --- Lightning (the lightning door) ----------------------------------------------------------


def _lightning_classes() -> tuple[Any, Any]:
    import lightning.pytorch as pl

    class LitNet(pl.LightningModule):
        """Net on dict batches; SGD and StepLR of its own; logs val_acc and val_loss."""

        def __init__(self, width: int = 4) -> None:
            super().__init__()
            self.net = Net(width)

        def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
            SEEN.setdefault("batches", []).append(batch)
            SEEN.setdefault("autocast", []).append(
                torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu")
            )
            return F.cross_entropy(self.net(batch["image"]), batch["label"])

        def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
            logits = self.net(batch["image"])
            self.log("val_loss", F.cross_entropy(logits, batch["label"]))
            self.log("val_acc", (logits.argmax(1) == batch["label"]).float().mean())

        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
            scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
            SEEN.update(user_optimizer=optimizer, user_scheduler=scheduler)
            return {
                "optimizer": optimizer,
                "lr_scheduler": {"scheduler": scheduler, "interval": "step"},
            }

    class Images(pl.LightningDataModule):
        def setup(self, stage: str | None = None) -> None:
            self.train_set, self.val_set = DictImages(N_TRAIN, 0), DictImages(N_VAL, 1)

        def train_dataloader(self) -> DataLoader:
            return DataLoader(self.train_set, batch_size=8, shuffle=True, collate_fn=collate)

        def val_dataloader(self) -> DataLoader:
            return DataLoader(self.val_set, batch_size=16, collate_fn=collate)

    return LitNet, Images


def lightning_module(trial: Any) -> Any:
    """A LightningModule on dict batches with a custom collate, and its datamodule."""
    SEEN.clear()
    lit_net, images = _lightning_classes()
    module = lit_net(**trial.model)
    SEEN["module"] = module
    return module, images()


def lightning_logs(trial: Any, name: str, value: float) -> Any:
    """:func:`lightning_module` whose validation logs ``name`` as ``value`` alone."""
    lit_net, images = _lightning_classes()

    class Logs(lit_net):  # type: ignore[misc,valid-type]
        def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
            self.log(name, torch.tensor(value))

    return Logs(**trial.model), images()


def lightning_reads_its_datamodule(trial: Any) -> Any:
    """As the official Lightning examples do: a callback and the module's own code read
    ``trainer.datamodule``."""
    import lightning.pytorch as pl

    SEEN.clear()
    lit_net, images = _lightning_classes()

    class ReadsData(lit_net):  # type: ignore[misc,valid-type]
        def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
            SEEN["module_saw"] = len(self.trainer.datamodule.train_set)
            return super().training_step(batch, batch_idx)

    class DataCallback(pl.Callback):
        def on_train_start(self, trainer: Any, pl_module: Any) -> None:
            SEEN["callback_saw"] = trainer.datamodule

    data = images()
    SEEN["datamodule"] = data
    return ReadsData(**trial.model), data, {"callbacks": [DataCallback()]}


def lightning_without_validation_step(trial: Any) -> Any:
    """A LightningModule that trains and never validates."""
    import lightning.pytorch as pl

    _, images = _lightning_classes()

    class TrainsOnly(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = Net(4)

        def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
            SEEN.setdefault("batches", []).append(batch)
            return F.cross_entropy(self.net(batch["image"]), batch["label"])

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    SEEN.clear()
    return TrainsOnly(), images()


def lightning_returns_a_model(trial: Any) -> Any:
    return Net()


def lightning_sets_precision(trial: Any) -> Any:
    lit_net, images = _lightning_classes()
    return lit_net(), images(), {"precision": "bf16-mixed"}


# --- what a trial's process sees (the guide's knobs), reported as its metric -------------


def _train_briefly(trial: Any) -> tuple[Any, Any]:
    model, optimizer, _, train_loader, _ = _objects(trial)
    model, optimizer, train_loader = trial.prepare(model, optimizer, train_loader)
    for batch in trial.steps(train_loader):
        optimizer.zero_grad()
        trial.backward(F.cross_entropy(model(batch["image"]), batch["label"]))
        optimizer.step()
    return model, optimizer


def reports_its_threads(trial: Any) -> None:
    """The metric is this rank's intra-op thread count."""
    _train_briefly(trial)
    trial.report(torch.get_num_threads())


def reports_its_allocator_setting(trial: Any) -> None:
    """The metric is 1 when PYTORCH_CUDA_ALLOC_CONF asks for expandable segments, else 0."""
    import os

    _train_briefly(trial)
    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF") or ""
    trial.report(1.0 if "expandable_segments:True" in conf else 0.0)


def reports_its_sharding(trial: Any) -> None:
    """The metric is 1 when the prepared model's parameters are FSDP2 shards (DTensors)."""
    from torch.distributed.tensor import DTensor

    model, optimizer = _train_briefly(trial)
    sharded = all(isinstance(p, DTensor) for p in model.parameters())
    fused = bool(optimizer.optimizer.defaults.get("fused"))
    trial.report(1.0 * sharded + 2.0 * fused)


def _evaluate(model: Any, val_loader: Any) -> float:
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for batch in val_loader:
            correct += int((model(batch["image"]).argmax(1) == batch["label"]).sum())
            total += len(batch["label"])
    model.train()
    return correct / total


def epoch_shaped(trial: Any, user_seed: int = 1) -> None:
    """pytorch/examples' mnist/main.py's shape: the user's own ``torch.manual_seed``, an epoch
    loop with a per-epoch test, a per-epoch StepLR and per-epoch logging, the metric reported
    after the last epoch."""
    SEEN.clear()
    torch.manual_seed(user_seed)
    SEEN["init_weight"] = Net(**trial.model).conv.weight.detach().clone()
    model, optimizer, scheduler, train_loader, val_loader = _objects(trial)
    model, optimizer, train_loader, val_loader, scheduler = trial.prepare(
        model, optimizer, train_loader, val_loader, scheduler
    )
    SEEN.update(epochs=[], steps_per_epoch=[], lrs=[], accuracies=[])
    accuracy = 0.0
    for epoch in trial.epochs():
        SEEN["epochs"].append(epoch)
        steps = 0
        for batch in trial.steps(train_loader):
            optimizer.zero_grad()
            trial.backward(F.cross_entropy(model(batch["image"]), batch["label"]))
            optimizer.step()
            steps += 1
        SEEN["steps_per_epoch"].append(steps)
        accuracy = _evaluate(model, val_loader)  # per epoch, as the user wrote it
        SEEN["accuracies"].append(accuracy)
        SEEN["lrs"].append(optimizer.param_groups[0]["lr"])
        scheduler.step()  # StepLR, once per epoch
    trial.report(accuracy)


def epoch_skips_steps(trial: Any) -> None:
    """An epoch loop whose body never calls trial.steps()."""
    model, optimizer, _, train_loader, _ = _objects(trial)
    model, optimizer, train_loader = trial.prepare(model, optimizer, train_loader)
    for _ in trial.epochs():
        pass
    trial.report(0.5)


def parses_its_command_line(trial: Any) -> None:
    """A ``main()`` that parses its command line when called, as pytorch/examples' scripts do."""
    import argparse
    import sys

    SEEN.clear()
    parser = argparse.ArgumentParser()
    parser.add_argument("--log-interval", type=int, default=10)
    SEEN.update(argv=list(sys.argv), log_interval=parser.parse_args().log_interval)
    model, _, _, val_loader = _train_all(trial)
    trial.report(_evaluate(model, val_loader))


class TwoConvNet(torch.nn.Module):
    """Two convolutions, the second with several input channels: its weight in channels_last
    is not contiguous (the first's, with one input channel, is both)."""

    def __init__(self, width: int = 4) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(1, width, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(width, width, 3, padding=1)
        self.head = torch.nn.Linear(width * 64, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(F.relu(self.conv2(F.relu(self.conv(x)))).flatten(1))


def reports_its_fsdp_compute(trial: Any) -> None:
    """The metric: 1 when the second convolution's weight is bf16 in its forward (FSDP2's
    parameters all-gathered in the trial's precision), plus 2 when its output is channels_last
    (the convolution ran in the trial's memory format)."""
    seen: dict[str, Any] = {}

    def record(module: Any, args: Any, output: torch.Tensor) -> None:
        seen.update(dtype=module.weight.dtype, output=output)

    model = TwoConvNet(**trial.model)
    model.conv2.register_forward_hook(record)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    train_loader = DataLoader(
        DictImages(N_TRAIN, 0), batch_size=8, shuffle=True, collate_fn=collate
    )
    model, optimizer, train_loader = trial.prepare(model, optimizer, train_loader)
    for batch in trial.steps(train_loader):
        optimizer.zero_grad()
        with trial.autocast():
            loss = F.cross_entropy(model(batch["image"]), batch["label"])
        trial.backward(loss)
        optimizer.step()
    bf16 = seen["dtype"] == torch.bfloat16
    channels_last = seen["output"].is_contiguous(memory_format=torch.channels_last)
    trial.report(1.0 * bf16 + 2.0 * channels_last)
