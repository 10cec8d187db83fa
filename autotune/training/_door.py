"""What the doors to the user's own code share (the ``loop``, ``hf_trainer`` and ``lightning``
doors): a trial's knobs as PyTorch values (:class:`DoorKnobs`), batches moved to the device
(:func:`move_batch`), the user's DataLoader rebuilt with the trial's batch size, workers,
pinning and sampler (:func:`rebuild_loader`), and the learning-rate factor that follows the
global batch (:func:`lr_factor`)."""

from __future__ import annotations

import functools
import multiprocessing
import os
import random
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    DistributedSampler,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
)

from autotune.config import TrialConfig, scaled_lr
from autotune.devices import Backend
from autotune.exceptions import DoorUsageError
from autotune.lifetime import die_with_rank
from autotune.measure import CpuShareMeter
from autotune.training._meter import StepMeter, budget_plan
from autotune.training._setup import cpu_meter_roots

__all__ = [
    "AUTOCAST_DTYPES",
    "DoorKnobs",
    "lr_factor",
    "move_batch",
    "rebuild_loader",
    "seed_everything",
]

#: The autocast dtype of each mixed precision (fp32 and tf32 run without autocast).
AUTOCAST_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def seed_everything(seed: int) -> None:
    """Seed torch (every device), Python's ``random`` and, where the user's code imported it,
    numpy: the user's model is then initialized, and their data shuffled, the same way in
    every trial with this seed (the math key's promise)."""
    torch.manual_seed(seed)
    random.seed(seed)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(seed)


def lr_factor(rule: str, global_batch: int, reference_batch: int) -> float:
    """The factor the user's learning rate is multiplied by in a trial: their rate holds at
    ``reference_batch`` (the baseline's global batch), and follows the global batch by
    ``rule`` (:func:`autotune.config.scaled_lr`: ``linear``, ``sqrt`` or ``none``)."""
    return scaled_lr(1.0, rule, global_batch, reference_batch)


def optimizer_scaling_rule(optimizer: torch.optim.Optimizer, configured: str | None) -> str:
    """``train.lr_scaling`` when set, else the rule of the optimizer's kind: linear for SGD
    (Goyal et al. 2017), the square root for the adaptive ones (Malladi et al. 2022)."""
    if configured is not None:
        return configured
    return "linear" if isinstance(optimizer, torch.optim.SGD) else "sqrt"


def move_batch(batch: Any, device: torch.device, memory_format: torch.memory_format) -> Any:
    """``batch`` on ``device``: tensors moved (``non_blocking``), 4-D floating-point tensors
    (images, ``(B, C, H, W)``) in ``memory_format``; mappings (dicts, Hugging Face's
    ``BatchEncoding``), lists, tuples and named tuples rebuilt around their moved items; any
    other object with a ``to(device)`` method moved by it; everything else as it is."""
    if isinstance(batch, torch.Tensor):
        if batch.dim() == 4 and batch.is_floating_point():
            return batch.to(device, non_blocking=True, memory_format=memory_format)
        return batch.to(device, non_blocking=True)
    if isinstance(batch, Mapping):
        moved = {key: move_batch(value, device, memory_format) for key, value in batch.items()}
        try:
            return type(batch)(moved)  # type: ignore[call-arg]
        except TypeError:  # a mapping type that cannot be built from a dict
            return moved
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # a named tuple
        return type(batch)(*(move_batch(item, device, memory_format) for item in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(move_batch(item, device, memory_format) for item in batch)
    to = getattr(batch, "to", None)
    if callable(to):
        return to(device)
    return batch


def batch_samples(batch: Any) -> int | None:
    """The samples in a collated batch: the first dimension of its first tensor (in a
    mapping, list or tuple), None when it holds no tensor."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() > 0 else None
    items = batch.values() if isinstance(batch, Mapping) else batch
    if isinstance(items, (list, tuple)) or isinstance(batch, Mapping):
        for item in items:
            found = batch_samples(item)
            if found is not None:
                return found
    return None


def _chained(first: Callable[[int], None], second: Callable[[int], None] | None) -> Any:
    if second is None:
        return first
    return functools.partial(_call_both, first, second)


def _call_both(first: Callable[[int], None], second: Callable[[int], None], worker: int) -> None:
    first(worker)
    second(worker)


def rebuild_loader(
    loader: DataLoader[Any],
    *,
    batch_size: int,
    num_workers: int,
    pin_memory: bool,
    seed: int,
    rank: int,
    world_size: int,
    call: str,
) -> DataLoader[Any]:
    """The user's training ``DataLoader`` with the trial's batch size (one micro-batch), workers,
    pinning and sampler; everything else (dataset, ``collate_fn``, ``timeout``, their
    ``worker_init_fn`` after autotune's) as the user made it.

    The sampler: a shuffling loader (``RandomSampler``) shuffles with the trial's seed, a
    ``DistributedSampler`` under DDP; a sequential one stays in order (sharded under DDP); a
    sampler of the user's own is kept with one rank. ``drop_last=True``, so that every step
    has the same batch (steady timing, no recompiles on a ragged last batch). Workers are
    persistent and die with this rank (:func:`autotune.lifetime.die_with_rank`).

    Args:
        loader: the user's loader.
        batch_size: per rank, one micro-batch.
        num_workers: DataLoader workers.
        pin_memory: pin host memory (CUDA with workers).
        seed: the trial's seed (data order).
        rank: this process's rank.
        world_size: DDP ranks.
        call: the user's call, for messages (``trial.prepare()``).

    Raises:
        DoorUsageError: a loader the trial's batch size or ranks cannot be applied to (its
            own ``batch_sampler``; an iterable dataset or a sampler of its own under DDP).
    """
    if not isinstance(loader.batch_sampler, BatchSampler) or type(loader.batch_sampler) not in (
        BatchSampler,
    ):
        raise DoorUsageError(
            f"{call}: the training DataLoader has its own batch_sampler "
            f"({type(loader.batch_sampler).__name__}); autotune sets the batch size, so give "
            "the DataLoader a batch_size and a sampler (or shuffle=True) instead"
        )
    dataset = loader.dataset
    iterable = isinstance(dataset, IterableDataset)
    sampler: Any
    if iterable:
        if world_size > 1:
            raise DoorUsageError(
                f"{call}: the training DataLoader reads an IterableDataset, which autotune cannot "
                "shard over DDP ranks; use a map-style dataset, or gpu_count: [1]"
            )
        sampler = None
    elif isinstance(loader.sampler, RandomSampler):
        if world_size > 1:
            sampler = DistributedSampler(dataset, world_size, rank, shuffle=True, seed=seed)
        else:
            shuffle = torch.Generator().manual_seed(seed)
            sampler = RandomSampler(dataset, generator=shuffle)  # type: ignore[arg-type]
    elif isinstance(loader.sampler, SequentialSampler):
        sampler = (
            DistributedSampler(dataset, world_size, rank, shuffle=False)
            if world_size > 1
            else SequentialSampler(dataset)  # type: ignore[arg-type]
        )
    elif world_size > 1:
        raise DoorUsageError(
            f"{call}: the training DataLoader has a sampler of its own "
            f"({type(loader.sampler).__name__}), which autotune cannot shard over DDP ranks; use "
            "shuffle=True, or gpu_count: [1]"
        )
    else:
        sampler = loader.sampler
    start_method = multiprocessing.get_context().get_start_method()
    die = functools.partial(die_with_rank, os.getpid(), start_method)
    return DataLoader(
        dataset,
        batch_size=batch_size,
        sampler=sampler,
        num_workers=num_workers,
        collate_fn=loader.collate_fn,
        pin_memory=pin_memory,
        drop_last=True,
        timeout=loader.timeout,
        worker_init_fn=_chained(die, loader.worker_init_fn) if num_workers > 0 else None,
        generator=torch.Generator().manual_seed(seed),
        persistent_workers=num_workers > 0,
    )


@dataclass
class DoorKnobs:
    """A trial's knobs as the doors apply them in the trial process.

    Attributes:
        config: the trial.
        backend: its device.
        rank: this process's rank.
        world_size: DDP ranks (``config.gpu_count``).
        rank_pids: every rank's process id (the CPU-share meter counts their trees as the
            trial's own).
    """

    config: TrialConfig
    backend: Backend
    rank: int
    world_size: int
    rank_pids: tuple[int, ...] = ()

    @property
    def device(self) -> torch.device:
        """The device this rank trains on."""
        return self.backend.torch_device()

    @property
    def memory_format(self) -> torch.memory_format:
        """``torch.channels_last`` or ``torch.contiguous_format``."""
        channels_last = self.config.memory_format == "channels_last"
        return torch.channels_last if channels_last else torch.contiguous_format

    @property
    def autocast_dtype(self) -> torch.dtype | None:
        """fp16 or bf16 for the mixed precisions; None (no autocast) for fp32 and tf32."""
        return AUTOCAST_DTYPES.get(self.config.precision)

    @property
    def accumulation_steps(self) -> int:
        """Micro-batches per optimizer step and rank (``train.global_batch_size``; 1 without)."""
        return self.config.train.accumulation_steps(self.config.batch_size, self.world_size)

    @property
    def samples_per_step(self) -> int:
        """Global samples per optimizer step: batch size x ranks x micro-batches."""
        return self.config.batch_size * self.world_size * self.accumulation_steps

    @property
    def pin_memory(self) -> bool:
        """Pinned host memory for the loaders: on CUDA with workers (as the workload door)."""
        return self.backend.pin_memory and self.config.num_workers > 0

    def lr_factor(self, rule: str) -> float:
        """The learning-rate factor at this trial's global batch (:func:`lr_factor`), against
        ``train.reference_batch_size`` (the baseline's global batch in a study)."""
        reference = self.config.train.reference_batch_size or self.samples_per_step
        return lr_factor(rule, self.samples_per_step, reference)

    def budget_steps(self, steps_per_epoch: int) -> int:
        """Optimizer steps of the budget: ``train.epochs`` passes, capped by
        ``train.max_steps``."""
        total = self.config.train.epochs * steps_per_epoch
        cap = self.config.train.max_steps
        return min(total, cap) if cap is not None else total

    def meter(self, steps_per_epoch: int) -> StepMeter:
        """The measuring core over this trial's budget (every rank builds it at the same
        point: the floor's host agreement is a collective call on CUDA)."""
        total = self.budget_steps(steps_per_epoch)
        plan = budget_plan(self.config, self.backend.kind, total, steps_per_epoch)
        roots = cpu_meter_roots(self.rank_pids or (os.getpid(),), os.environ)
        return StepMeter(
            plan,
            self.backend,
            self.samples_per_step,
            rank=self.rank,
            world_size=self.world_size,
            cpu_meter=CpuShareMeter(roots if self.rank == 0 else ()),
            floor_sps=self.config.min_throughput_sps,
        )
