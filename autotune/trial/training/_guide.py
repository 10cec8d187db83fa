"""The Performance Tuning Guide's knobs as every door applies them to a model and optimizer:
the optimizer's implementation (:func:`optimizer_impl_kwargs`, :func:`with_optimizer_impl`),
activation checkpointing per block (:func:`checkpoint_blocks`), and FSDP2's sharding
(:func:`shard_model`, :func:`gradient_sync`). The process-wide ones (CPU threads, cuDNN's
autotuning) are the device backend's (:mod:`autotune.trial.devices`); the CUDA allocator's setting
is the launcher's, in the rank's environment before CUDA starts.

Sources: PyTorch's Performance Tuning Guide (docs.pytorch.org, recipes/tuning_guide);
``torch.optim`` ("Algorithms": for-loop, foreach and fused implementations);
``torch.utils.checkpoint.checkpoint`` (``use_reentrant=False``, the recommended variant);
``torch.distributed.fsdp.fully_shard`` (FSDP2: Zhao et al., "PyTorch FSDP", VLDB 2023; ZeRO
stage 3 in Rajbhandari et al., "ZeRO", SC 2020).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

__all__ = [
    "CheckpointedBlock",
    "apply_process_knobs",
    "checkpoint_blocks",
    "fsdp_mixed_precision",
    "gradient_sync",
    "optimizer_impl_kwargs",
    "shard_model",
    "with_optimizer_impl",
]


def apply_process_knobs(cpu_threads: int, cudnn_benchmark: bool, device_kind: str) -> None:
    """The guide's process-wide knobs, after the device backend's set-up: ``cpu_threads`` > 0
    sets this rank's intra-op threads (``torch.set_num_threads``; 0 keeps the backend's share
    of PyTorch's count), and on CUDA ``torch.backends.cudnn.benchmark`` (cuDNN times its
    convolution algorithms for each new input shape and keeps the fastest)."""
    if cpu_threads > 0:
        torch.set_num_threads(cpu_threads)
    if device_kind == "cuda":
        torch.backends.cudnn.benchmark = cudnn_benchmark


def optimizer_impl_kwargs(impl: str) -> dict[str, Any]:
    """The optimizer constructor's arguments for an implementation: ``default`` gives none
    (PyTorch picks foreach on CUDA, the for-loop elsewhere); ``for_loop`` ``foreach=False``;
    ``foreach`` ``foreach=True``; ``fused`` ``fused=True`` (Adam, AdamW and SGD on CUDA and,
    since torch 2.4, the CPU).

    Raises:
        ValueError: an unknown implementation.
    """
    kwargs = {
        "default": {},
        "for_loop": {"foreach": False},
        "foreach": {"foreach": True},
        "fused": {"fused": True},
    }
    if impl not in kwargs:
        raise ValueError(f"optimizer_impl must be one of {', '.join(kwargs)}, but got {impl!r}")
    return dict(kwargs[impl])


def with_optimizer_impl(
    optimizer: torch.optim.Optimizer,
    impl: str,
    schedulers: Sequence[Any] = (),
    replaced: Mapping[int, nn.Parameter] | None = None,
) -> torch.optim.Optimizer:
    """The user's optimizer in implementation ``impl`` and over ``replaced`` parameters:
    itself when neither changes anything, else the same class over the same parameter groups
    (the group dicts themselves, so their learning rates are shared; their ``params`` mapped
    through ``replaced``) with the same defaults plus the implementation's flag;
    ``schedulers`` built on the old one are pointed at the new one. Call it before the first
    step (the optimizer's state is not carried over).

    Args:
        optimizer: the user's optimizer.
        impl: :func:`optimizer_impl_kwargs`'s implementation.
        schedulers: learning-rate schedulers over ``optimizer``.
        replaced: new parameters by ``id()`` of the old (FSDP2 replaces a model's parameters
            with sharded ones); None: none replaced.

    Raises:
        TypeError: the optimizer's class takes no such flag (say ``fused`` for RMSprop).
    """
    if impl == "default" and not replaced:
        return optimizer
    flags = optimizer_impl_kwargs(impl)
    defaults = dict(optimizer.defaults)
    if impl != "default":
        defaults = {k: v for k, v in defaults.items() if k not in ("foreach", "fused")}
    for group in optimizer.param_groups:
        if impl != "default":
            group.pop("foreach", None)
            group.pop("fused", None)
        if replaced:
            group["params"] = [replaced.get(id(p), p) for p in group["params"]]
    cls = type(optimizer)
    # The defaults the constructor takes (AdamW keeps a `decoupled_weight_decay` it does not).
    accepted = inspect.signature(cls.__init__).parameters
    defaults = {k: v for k, v in defaults.items() if k in accepted}
    try:
        made = cls(optimizer.param_groups, **{**defaults, **flags})
    except (TypeError, RuntimeError, ValueError) as e:
        raise TypeError(
            f"optimizer_impl={impl}: {cls.__name__} cannot run it ({e}); search optimizer_impl "
            "only for optimizers that offer it (Adam, AdamW, SGD, ...)"
        ) from None
    for scheduler in schedulers:
        if getattr(scheduler, "optimizer", None) is optimizer:
            scheduler.optimizer = made
    return made


class CheckpointedBlock(nn.Module):
    """A block whose forward runs under ``torch.utils.checkpoint.checkpoint(use_reentrant=
    False)``: its activations are dropped after the forward and recomputed in the backward
    (the RNG state is restored, so dropout draws the same masks). Attribute reads fall through
    to the block."""

    def __init__(self, block: nn.Module) -> None:
        super().__init__()
        self.block = block

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return checkpoint(self.block, *args, use_reentrant=False, **kwargs)


def _blocks_of(model: nn.Module, names: Iterable[str]) -> list[tuple[nn.Module, str, nn.Module]]:
    """``(parent, attribute, block)`` of every submodule whose class is named in ``names``,
    outermost first (a block inside another named block is not counted again)."""
    wanted = set(names)
    found: list[tuple[nn.Module, str, nn.Module]] = []

    def walk(module: nn.Module) -> None:
        for attr, child in module.named_children():
            if type(child).__name__ in wanted:
                found.append((module, attr, child))
            else:
                walk(child)

    walk(model)
    return found


def checkpoint_blocks(model: nn.Module, names: Sequence[str]) -> int:
    """Wrap every block of ``model`` whose class is named in ``names`` in a
    :class:`CheckpointedBlock`, in place.

    Returns:
        How many blocks were wrapped.

    Raises:
        ValueError: none of the model's modules has such a class (the message lists them).
    """
    blocks = _blocks_of(model, names)
    if not blocks:
        classes = sorted({type(m).__name__ for m in model.modules()})
        raise ValueError(
            f"activation_checkpointing: the model has no module of class "
            f"{', '.join(names)} (blocks:); its classes: {', '.join(classes)}"
        )
    for parent, attr, block in blocks:
        setattr(parent, attr, CheckpointedBlock(block))
    return len(blocks)


def fsdp_mixed_precision(autocast_dtype: torch.dtype | None) -> Any:
    """FSDP2's ``MixedPrecisionPolicy`` for a trial's precision: parameters all-gathered in
    the autocast dtype (``param_dtype``: the forward and backward run on bf16 or fp16
    parameters, as autocast would cast them for its matmuls and convolutions) and gradients
    reduce-scattered in fp32 (``reduce_dtype``, as DDP's fp32 gradients are reduced, and
    torchtitan's default); None (FSDP's default, everything in the parameters' fp32) for fp32
    and tf32. Without it a bf16 trial all-gathered and reduced fp32: twice the bytes on the
    wire of what a bf16 FSDP job moves (PyTorch docs, ``torch.distributed.fsdp.fully_shard``,
    ``MixedPrecisionPolicy``)."""
    if autocast_dtype is None:
        return None
    from torch.distributed.fsdp import MixedPrecisionPolicy

    return MixedPrecisionPolicy(param_dtype=autocast_dtype, reduce_dtype=torch.float32)


def shard_model(
    model: nn.Module,
    names: Sequence[str],
    world_size: int,
    device: torch.device,
    autocast_dtype: torch.dtype | None = None,
) -> nn.Module:
    """FSDP2: ``fully_shard`` each block named in ``names`` (its own all-gather and
    reduce-scatter unit), then the whole model, over one mesh of ``world_size`` ranks on
    ``device``'s type, in the trial's precision (:func:`fsdp_mixed_precision`). Its
    parameters become ``DTensor`` shards (each rank keeps 1 / ``world_size`` of them, their
    gradients and the optimizer's state); the default process group must be up.

    ``channels_last`` weights are sharded in the contiguous format first: ``fully_shard``
    refuses non-contiguous parameters (``NotImplementedError``, torch 2.13's
    ``_fsdp_param.py``), and its shards and all-gathered parameters are contiguous whatever
    the format. The convolutions still run in channels_last: their inputs are (the doors move
    batches in the trial's format), and cuDNN and oneDNN pick channels_last when the input or
    the weight is, reordering the weight per call (``cudnn_conv_suggest_memory_format``,
    ``mkldnn_conv_use_channels_last``), a copy of the weight beside the activations.

    Args:
        model: the model, on ``device``.
        names: the blocks' module class names.
        world_size: ranks.
        device: this rank's device.
        autocast_dtype: the trial's autocast dtype (bf16/fp16), or None (fp32, tf32).

    Returns:
        The sharded model (the same module, its class swapped for FSDP's).
    """
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    for parameter in model.parameters():
        if not parameter.is_contiguous():
            parameter.data = parameter.data.contiguous()
    mesh = init_device_mesh(device.type, (world_size,))
    policy = fsdp_mixed_precision(autocast_dtype)
    options: dict[str, Any] = (
        {"mesh": mesh} if policy is None else {"mesh": mesh, "mp_policy": policy}
    )
    for _, _, block in _blocks_of(model, names):
        inner = block.block if isinstance(block, CheckpointedBlock) else block
        fully_shard(inner, **options)
    fully_shard(model, **options)
    return model


@contextlib.contextmanager
def gradient_sync(model: Any, ddp: Any, sync: bool) -> Iterator[None]:
    """Gradients synchronized across ranks in this micro-batch's backward (``sync``), or
    kept local for the next one's: DDP's ``no_sync()``, FSDP2's
    ``set_requires_gradient_sync(False)``; nothing with one rank.

    Args:
        model: the model (an FSDP2 module has ``set_requires_gradient_sync``).
        ddp: the DDP wrapper, or None.
        sync: this micro-batch ends its step.
    """
    if sync:
        yield
        return
    if ddp is not None:
        with ddp.no_sync():
            yield
        return
    set_sync = getattr(model, "set_requires_gradient_sync", None)
    if set_sync is None:
        yield
        return
    set_sync(False)
    try:
        yield
    finally:
        set_sync(True)
