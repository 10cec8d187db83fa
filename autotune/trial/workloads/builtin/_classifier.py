"""The built-in workloads: image classifiers (``cnn``, ``mlp``) on ``digits``, ``mnist``,
``fashion_mnist`` or ``synthetic`` data, written with the same protocol as a user's workload
(:class:`autotune.trial.workloads.Workload`)."""

from __future__ import annotations

from typing import Any

from torch import nn
from torch.utils.data import TensorDataset

from autotune.core.config import BUILTIN_FAMILIES, DataSettings
from autotune.trial.workloads.builtin.data import Dataset, load_dataset
from autotune.trial.workloads.builtin.networks import build_model

__all__ = ["ImageClassifier"]


class ImageClassifier:
    """A built-in model family on a built-in data set, as a workload.

    Knobs: ``depth`` (conv blocks of the ``cnn``, hidden layers of the ``mlp``) and
    ``width`` (base channels, hidden units); see :mod:`autotune.trial.workloads.builtin.networks`.
    Loss: cross-entropy; metric: top-1 validation accuracy (the defaults).

    Args:
        family: ``cnn`` or ``mlp``.
        data: the data set's settings (a :class:`DataSettings` or its JSON mapping).

    Raises:
        ValueError: an unknown family.
        pydantic.ValidationError: invalid data settings.
    """

    metric_name = "accuracy"
    metric_direction = "maximize"

    def __init__(self, family: str, data: DataSettings | dict[str, Any]) -> None:
        if family not in BUILTIN_FAMILIES:
            known = ", ".join(BUILTIN_FAMILIES)
            raise ValueError(f"unknown model family {family!r} (known: {known})")
        self.family = family
        self.data = data if isinstance(data, DataSettings) else DataSettings.model_validate(data)
        self._dataset: Dataset | None = None

    def _load(self) -> Dataset:
        if self._dataset is None:
            self._dataset = load_dataset(self.data)
        return self._dataset

    def build_model(self, depth: int, width: int) -> nn.Module:
        """The family's model for the data set's input shape and classes.

        Raises:
            ValueError: ``depth`` or ``width`` below 1.
            DataError: the data set cannot be loaded (its shape is needed).
        """
        dataset = self._load()
        return build_model(self.family, depth, width, dataset.input_shape, dataset.num_classes)

    def datasets(self) -> tuple[TensorDataset, TensorDataset]:
        """``(train, validation)``: ``(x, y)`` pairs, x ``(C, H, W)`` float32, y int64.

        Raises:
            DataError: missing or corrupt data.
        """
        dataset = self._load()
        return (
            TensorDataset(dataset.train_x, dataset.train_y),
            TensorDataset(dataset.val_x, dataset.val_y),
        )
