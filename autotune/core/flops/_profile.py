"""The model profile of the memory estimate: :func:`profile_model` traces the tensors a
model saves for backward, per sample, for :func:`autotune.core.hardware.estimate_memory`; and
:func:`count_parameters`, a model's trainable parameters, which every door records.

Both are handed a model (or what builds one) and its samples; neither builds or loads a
workload: that is the workload's side (:func:`autotune.trial.workloads.profile_workload`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from autotune.core.flops._counting import _autocast

if TYPE_CHECKING:
    import torch

__all__ = ["ModelProfile", "count_parameters", "profile_model"]


def count_parameters(model: torch.nn.Module) -> int:
    """Number of trainable parameters (those with ``requires_grad``; frozen ones left out)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


@dataclass(frozen=True)
class ModelProfile:
    """Sizes of a model that decide its training memory.

    Attributes:
        parameters: trainable parameters.
        activation_bytes_per_sample: bytes autograd saves for backward per sample of the
            batch (outputs of convolutions, normalizations, activations, pooling indices;
            autocast copies), parameters and the input batch excluded.
        activation_fixed_bytes: saved bytes that do not grow with the batch (autocast's casts
            of the weights).
        input_bytes_per_sample: bytes of one input sample and its label (float32 and int64).
        blocks: the model's modules of the named block classes (0: none named or found).
        checkpointed_bytes_per_sample: with those blocks checkpointed, what autograd still
            saves per sample (their inputs and what lies outside them); None when no block
            was named or found.
    """

    parameters: int
    activation_bytes_per_sample: float
    activation_fixed_bytes: int
    input_bytes_per_sample: int
    blocks: int = 0
    checkpointed_bytes_per_sample: float | None = None


def _saved_bytes(model: Any, x: Any, y: Any, autocast_dtype: Any, loss_fn: Any) -> int:
    """Bytes of distinct storages autograd saves during one forward pass (params and x out)."""
    import torch

    excluded = {p.untyped_storage().data_ptr() for p in model.parameters()}
    excluded.add(x.untyped_storage().data_ptr())
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in excluded:
            seen[ptr] = max(seen.get(ptr, 0), storage.nbytes())
        return t

    with (
        torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t),
        _autocast("cpu", autocast_dtype),
    ):
        loss = loss_fn(model(x), y)
    del loss
    return sum(seen.values())


def profile_model(
    build_model: Callable[[], torch.nn.Module],
    samples: Sequence[Any],
    loss_fn: Callable[[Any, Any], torch.Tensor],
    precision: str,
    blocks: tuple[str, ...] = (),
) -> ModelProfile:
    """Trace what a model saves for backward, on the CPU, with batches of its first 2 and 4
    samples.

    Half the difference of the two is the per-sample activation memory; the rest of the
    2-sample trace is the fixed part. Precision matters through autocast (fp16/bf16 save half-width
    copies); ``tf32`` saves what ``fp32`` does. Memory format does not change byte counts.
    The model is built and traced with grad mode on whatever the caller's (a sampler may call
    this under ``torch.no_grad()``, where autograd saves nothing and every activation would
    read 0 bytes), under seed 0 (the same model each time), and the caller's random state is
    left as it was.

    Args:
        build_model: builds the model to trace (called once, under seed 0).
        samples: at least one ``(x, y)`` training sample, as a ``Dataset`` gives it
            (``default_collate`` batches them; the first 4 are used, cycled when fewer).
        loss_fn: ``loss_fn(model(x), y)``, the training loss.
        precision: the trial's precision.
        blocks: module class names of the model's blocks: traced again with each
            checkpointed (:func:`autotune.trial.training._guide.checkpoint_blocks`'s wrapping), for
            ``checkpointed_bytes_per_sample``.

    Raises:
        ValueError: ``samples`` is empty.
        Exception: whatever the model, the samples or the loss raise.
    """
    import torch
    from torch.utils.data import default_collate

    if not samples:
        raise ValueError("profile_model needs at least one training sample, but got none")
    # Batches of 2 and 4 (not 1: BatchNorm refuses one sample on a 1x1 map in training).
    items = [samples[i % len(samples)] for i in range(4)]
    autocast_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision)
    with torch.enable_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = build_model()
        model.train()
        saved = []
        for batch in (2, 4):
            x, y = default_collate(items[:batch])
            saved.append(_saved_bytes(model, x, y, autocast_dtype, loss_fn))
        parameters = count_parameters(model)
        found = _checkpointed(model, blocks) if blocks else 0
        checkpointed: float | None = None
        if found:
            kept = []
            for batch in (2, 4):
                x, y = default_collate(items[:batch])
                kept.append(_saved_bytes(model, x, y, autocast_dtype, loss_fn))
            checkpointed = max(0.0, (kept[1] - kept[0]) / 2)
    per_sample = max(0.0, (saved[1] - saved[0]) / 2)
    x, y = default_collate(items[:1])
    return ModelProfile(
        parameters=parameters,
        activation_bytes_per_sample=per_sample,
        activation_fixed_bytes=max(0, int(saved[0] - 2 * per_sample)),
        input_bytes_per_sample=x.element_size() * x.numel() + y.element_size() * y.numel(),
        blocks=found,
        checkpointed_bytes_per_sample=checkpointed,
    )


def _checkpointed(model: Any, names: tuple[str, ...]) -> int:
    """Wrap ``model``'s blocks of classes ``names`` in non-reentrant checkpoints, in place (as
    a trial does); how many."""
    import torch
    from torch.utils.checkpoint import checkpoint

    class Checkpointed(torch.nn.Module):
        def __init__(self, block: Any) -> None:
            super().__init__()
            self.block = block

        def forward(self, *args: Any) -> Any:
            return checkpoint(self.block, *args, use_reentrant=False)

    count = 0

    def walk(module: Any) -> None:
        nonlocal count
        for attr, child in module.named_children():
            if type(child).__name__ in names:
                setattr(module, attr, Checkpointed(child))
                count += 1
            else:
                walk(child)

    walk(model)
    return count
