"""A LightningModule and LightningDataModule for MNIST: autotune's ``lightning:`` door.

The module is the built-in CNN (``depth`` conv blocks of ``width * 2**i`` channels, BatchNorm,
ReLU, max-pooling, a linear head) with cross-entropy and AdamW in ``configure_optimizers``;
``validation_step`` logs ``val_acc`` (top-1) and ``val_loss``. The datamodule serves the
10,000 MNIST images that ship with autotune (8,000 train, 2,000 validate). Nothing here is
autotune's but :func:`build`, which the space names; autotune builds the ``Trainer`` and maps
the knobs onto it (``precision="bf16-mixed"``, ``devices``, ``strategy``, ``torch.compile``,
the training loader's batch size and workers). On its own it trains with Lightning's
defaults::

    python examples/lightning_mnist/train.py
    autotune run space=examples/lightning_mnist/space.yaml --trials 3 device=cpu
"""

from __future__ import annotations

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

import autotune
from autotune.core.config import DataSettings
from autotune.trial.workloads.builtin import build_model, load_dataset


class MNISTData(pl.LightningDataModule):
    """The shipped MNIST images, standardized, split 8,000 / 2,000 with a fixed seed."""

    def __init__(self, batch_size: int = 64) -> None:
        super().__init__()
        self.batch_size = batch_size

    def setup(self, stage: str | None = None) -> None:
        data = load_dataset(DataSettings(name="mnist"))
        self.input_shape, self.num_classes = data.input_shape, data.num_classes
        self.train_set = TensorDataset(data.train_x, data.train_y)
        self.val_set = TensorDataset(data.val_x, data.val_y)

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val_set, batch_size=256)


class LitCNN(pl.LightningModule):
    """The built-in CNN as a LightningModule: cross-entropy, AdamW at ``lr``."""

    def __init__(self, depth: int = 3, width: int = 16, lr: float = 3.0e-3) -> None:
        super().__init__()
        self.net = build_model("cnn", depth, width, (1, 28, 28), 10)
        self.lr = lr

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)  # (B, 1, 28, 28) -> (B, 10)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y)

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(dim=1) == y).float().mean())

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.parameters(), lr=self.lr)


def build(trial: autotune.LightningTrial) -> tuple[LitCNN, MNISTData]:
    """The module of the trial's model knobs and the datamodule (autotune rebuilds its
    training loader with the trial's batch size and workers)."""
    return LitCNN(**trial.model), MNISTData(batch_size=64)


if __name__ == "__main__":
    trial = autotune.LightningTrial()
    module, data = build(trial)
    trainer = pl.Trainer(max_epochs=1, logger=False, enable_checkpointing=False, **trial.trainer_kwargs())
    trainer.fit(module, datamodule=data)
    print(trainer.validate(module, datamodule=data, verbose=False))
