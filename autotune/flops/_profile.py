"""The model profile of the memory estimate: :func:`profile_model` traces the tensors a
model saves for backward, per sample, for :func:`autotune.hardware.estimate_memory`."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from autotune.flops._counting import _autocast

if TYPE_CHECKING:
    import torch

    from autotune.config import WorkloadSpec

__all__ = ["ModelProfile", "profile_model"]


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
    spec: WorkloadSpec,
    knobs: Mapping[str, Any],
    precision: str,
    blocks: tuple[str, ...] = (),
) -> ModelProfile:
    """Trace what a workload's model saves for backward, on the CPU, with batches of 2 and 4
    samples of its training set.

    Half the difference of the two is the per-sample activation memory; the rest of the
    2-sample trace is the fixed part. Precision matters through autocast (fp16/bf16 save half-width
    copies); ``tf32`` saves what ``fp32`` does. Memory format does not change byte counts.
    Cached per process (milliseconds per model of the shipped spaces); the workload is
    imported and its ``datasets()`` called once per process.

    Args:
        spec: the workload.
        knobs: its model knobs (``build_model(**knobs)``).
        precision: the trial's precision.
        blocks: module class names of the model's blocks: traced again with each
            checkpointed (:func:`autotune.training._guide.checkpoint_blocks`'s wrapping), for
            ``checkpointed_bytes_per_sample``.

    Raises:
        WorkloadError: the workload cannot be loaded.
        Exception: whatever the workload's model or data raise.
    """
    return _profile_cached(
        spec.model_dump_json(), json.dumps(dict(knobs), sort_keys=True), precision, blocks
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


@functools.lru_cache(maxsize=512)
def _profile_cached(
    spec_json: str, knobs_json: str, precision: str, blocks: tuple[str, ...]
) -> ModelProfile:
    import torch
    from torch.utils.data import default_collate

    from autotune.config import WorkloadSpec
    from autotune.workloads import load_workload
    from autotune.workloads.builtin.networks import count_parameters

    workload = load_workload(WorkloadSpec.model_validate_json(spec_json))
    train, _ = workload.datasets()
    # Batches of 2 and 4 (not 1: BatchNorm refuses one sample on a 1x1 map in training).
    items = [train[i % len(train)] for i in range(4)]  # type: ignore[arg-type]
    autocast_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision)
    # Grad mode on whatever the caller's (a sampler may call this under torch.no_grad(), where
    # autograd saves nothing and every activation would read 0 bytes, cached for the process),
    # and the caller's random state left as it was (the seed makes the traced model the same).
    with torch.enable_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = workload.build_model(json.loads(knobs_json))
        model.train()
        saved = []
        for batch in (2, 4):
            x, y = default_collate(items[:batch])
            saved.append(_saved_bytes(model, x, y, autocast_dtype, workload.loss))
        parameters = count_parameters(model)
        found = _checkpointed(model, blocks) if blocks else 0
        checkpointed: float | None = None
        if found:
            kept = []
            for batch in (2, 4):
                x, y = default_collate(items[:batch])
                kept.append(_saved_bytes(model, x, y, autocast_dtype, workload.loss))
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
