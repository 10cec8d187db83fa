"""The workload protocol: what autotune needs of a model to tune its training."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    import torch
    from torch.utils.data import Dataset

__all__ = ["MetricDirection", "Workload"]

#: Whether a workload's validation metric is better higher (``maximize``) or lower
#: (``minimize``).
MetricDirection = Literal["maximize", "minimize"]


@runtime_checkable
class Workload(Protocol):
    """A model, its data, loss and metric behind one small protocol; autotune owns the loop
    and every system knob (batch size, precision, memory format, compile mode, DataLoader
    workers, GPU count).

    Nothing to subclass: any object with these two methods is a workload (as torchvision's
    model builders are plain functions whose keyword arguments are the knobs).

    Required:
        ``build_model(**knobs) -> torch.nn.Module``: the knobs are the keys under ``model:``
        in the space file, passed as keyword arguments (a fixed value, a choice, or a value
        from an int/float range). The module maps a collated input batch to the output the
        loss takes; autotune moves it to the device and the memory format, compiles it and
        wraps it in DDP.
        ``datasets() -> (train, validation)``: map-style ``torch.utils.data.Dataset``\\ s whose
        items are ``(input, target)`` pairs of tensors (or what the default collate turns
        into tensors). It should be deterministic (the same split every call), since every
        trial, in its own process, calls it again.

    Optional (defaults in parentheses):
        ``loss(output, target) -> Tensor``: a scalar to minimize
        (``torch.nn.functional.cross_entropy``).
        ``evaluate(model, loader, device) -> float``: the validation metric. autotune calls it
        with the model in eval mode, under ``torch.no_grad()`` and the trial's autocast;
        ``loader`` yields CPU batches ``(input, target)`` of the validation set, which the
        workload moves to ``device`` (top-1 accuracy in [0, 1]).
        ``metric_name: str`` (``"accuracy"``) and ``metric_direction``: ``"maximize"`` or
        ``"minimize"`` (``"maximize"``). The study's second objective is this metric, in this
        direction (e.g. ``"val_loss"``, ``"minimize"``).

    A space names a workload by reference, ``workload: FILE.py:NAME`` (FILE relative to the
    space file) or ``workload: package.module:NAME``; each trial process imports it again (no
    pickling). NAME is the workload itself, or a class or function that returns one when
    called with the space's ``workload_args`` as keyword arguments.
    """

    def build_model(self, **knobs: Any) -> torch.nn.Module: ...

    def datasets(self) -> tuple[Dataset[Any], Dataset[Any]]: ...
