"""What both training loops of a trial share: data loader, model, optimizer, learning-rate
schedule, autocast and the one optimizer step (:class:`Training`), and the evaluation.

The tuner's knobs map onto PyTorch here: batch size and workers -> ``DataLoader`` (pinned
memory on CUDA, persistent workers); precision -> ``torch.autocast`` (fp16, bf16; a
``GradScaler`` for fp16 on CUDA) or the TF32 flags (set by the backend); memory format ->
``channels_last`` for the model and 4-D inputs; compile mode -> ``torch.compile(mode=...)``;
GPU count -> ``DistributedDataParallel`` with that world size; ``train.global_batch_size`` ->
gradient accumulation over micro-batches of ``batch_size`` (DDP's ``no_sync`` between them).
The learning rate follows the global batch (``train.lr_scaling``) after a linear warm-up
(``torch.optim.lr_scheduler.LinearLR``), then ``train.lr_schedule`` (cosine decay to 0 by
default) over the budget's ``total_steps``.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset, DistributedSampler, RandomSampler

from autotune.core.config import BUILTIN_BLOCKS, MetricSpec, TrainSettings, TrialConfig
from autotune.core.hardware import study_root_pid
from autotune.trial.devices import Backend
from autotune.trial.lifetime import die_with_rank
from autotune.trial.measure import CpuShareMeter
from autotune.trial.training._guide import (
    checkpoint_blocks,
    gradient_sync,
    optimizer_impl_kwargs,
    shard_model,
)
from autotune.trial.training._metric import checked_metric
from autotune.trial.workloads import LoadedWorkload

_AUTOCAST_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def cpu_meter_roots(
    rank_pids: tuple[int, ...], environ: Mapping[str, str | None]
) -> tuple[int, ...]:
    """The process trees whose CPU time is the trial's own: its ranks', and, inside a study,
    the study's first worker process's (:func:`autotune.core.hardware.study_root_pid`), from which
    every other worker and their trials descend. Without it, several workers on one host
    flagged each other's trials as a busy machine."""
    root = study_root_pid(environ)
    return rank_pids if root is None or root in rank_pids else (*rank_pids, root)


def make_optimizer(
    settings: TrainSettings, params: Any, lr: float, impl: str = "default"
) -> torch.optim.Optimizer:
    """``train.optimizer`` (AdamW or SGD with momentum) at learning rate ``lr``, in the
    implementation ``impl`` (:func:`autotune.trial.training._guide.optimizer_impl_kwargs`)."""
    flags = optimizer_impl_kwargs(impl)
    if settings.optimizer == "sgd":
        return torch.optim.SGD(
            params, lr=lr, momentum=settings.momentum, weight_decay=settings.weight_decay, **flags
        )
    return torch.optim.AdamW(params, lr=lr, weight_decay=settings.weight_decay, **flags)


def make_lr_schedule(
    optimizer: torch.optim.Optimizer, settings: TrainSettings, total_steps: int
) -> torch.optim.lr_scheduler.LRScheduler | None:
    """The learning rate over a trial's ``total_steps`` optimizer steps, stepped once per step.

    A linear warm-up over ``settings.lr_warmup_steps(total_steps)`` steps (step ``k`` of ``w``
    uses ``k / w`` of the peak), then ``settings.lr_schedule``: ``constant`` keeps the peak;
    ``cosine`` decays it to 0 at the last step (Loshchilov & Hutter, "SGDR", ICLR 2017,
    without restarts). None when the learning rate never changes.
    """
    warmup_steps = settings.lr_warmup_steps(total_steps)
    warmup = (
        torch.optim.lr_scheduler.LinearLR(
            optimizer, start_factor=1.0 / warmup_steps, end_factor=1.0, total_iters=warmup_steps - 1
        )
        if warmup_steps >= 2
        else None
    )
    if settings.lr_schedule == "constant" or total_steps - max(warmup_steps, 1) < 1:
        return warmup
    decay_steps = total_steps - max(warmup_steps, 1) + 1
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=decay_steps, eta_min=0.0)
    if warmup is None:
        return cosine
    return torch.optim.lr_scheduler.SequentialLR(
        optimizer, [warmup, cosine], milestones=[warmup_steps - 1]
    )


def make_loader(
    config: TrialConfig, data: Dataset[Any], backend: Backend, rank: int, world_size: int
) -> DataLoader[Any]:
    """The training loader: shuffled with the trial's seed (a ``DistributedSampler`` under
    DDP), ``drop_last`` so that every step has the same batch; its worker processes die with
    this rank (:func:`autotune.trial.lifetime.die_with_rank`), even when it is killed. Each of its
    batches is one optimizer step's share of this rank: ``batch_size`` samples, or with
    ``train.global_batch_size`` that many micro-batches of ``batch_size``
    (:meth:`Training.train_step` splits them).

    Raises:
        ValueError: the global batch is not a whole number of micro-batches.
    """
    # The loader's generator seeds its workers: each new iterator (every epoch without
    # persistent workers, once with them) draws a seed from it. The sampler shuffles with a
    # generator of its own, so that those draws never shift the data order: with one shared
    # generator, num_workers would change the order from the second epoch on, and the
    # workers are outside the math key (autotune.core.config.math_key).
    generator = torch.Generator().manual_seed(config.seed)
    sampler: Any
    if world_size > 1:
        sampler = DistributedSampler(data, world_size, rank, shuffle=True, seed=config.seed)
    else:
        shuffle = torch.Generator().manual_seed(config.seed)
        sampler = RandomSampler(data, generator=shuffle)  # type: ignore[arg-type]
    # The start method DataLoader uses for its workers (multiprocessing's default here:
    # forkserver in a trial's rank, the forkserver's own).
    start_method = multiprocessing.get_context().get_start_method()
    accumulation = config.train.accumulation_steps(config.batch_size, world_size)
    return DataLoader(
        data,
        batch_size=config.batch_size * accumulation,
        sampler=sampler,
        num_workers=config.num_workers,
        # Pinned only with workers: without, PyTorch's default (False), the baseline's.
        pin_memory=backend.pin_memory and config.num_workers > 0,
        drop_last=True,  # equal batches: steady timing, no recompiles on a ragged last batch
        persistent_workers=config.num_workers > 0,
        generator=generator,
        worker_init_fn=functools.partial(die_with_rank, os.getpid(), start_method),
    )


def to_device(batch: Any, device: torch.device, memory_format: torch.memory_format) -> torch.Tensor:
    """One collated input or target on the device; 4-D tensors in ``memory_format``.

    Raises:
        TypeError: the batch is not a tensor (the workload's items collate to something else).
    """
    if not isinstance(batch, torch.Tensor):
        raise TypeError(
            f"the workload's datasets() items must collate to tensors (input, target), "
            f"got a {type(batch).__name__}"
        )
    if batch.dim() == 4:
        return batch.to(device, non_blocking=True, memory_format=memory_format)
    return batch.to(device, non_blocking=True)


@dataclass
class Training:
    """One rank's training state, built by :func:`prepare_training`.

    Attributes:
        model: the eager model (evaluated, counted); ``step_model`` wraps it (DDP, compile).
        val_data: the validation split.
        loader: the training loader.
        total_steps: optimizer steps of the budget (``train.epochs`` passes, capped by
            ``train.max_steps``): the learning-rate schedule's length.
        samples_per_step: global batch (per-rank batch times world size, times the
            accumulation steps).
        accumulation_steps: micro-batches of ``batch_size`` per optimizer step and rank
            (``train.global_batch_size``; 1 without).
        ddp: the DDP wrapper of ``model`` (None with one rank), whose ``no_sync`` skips the
            gradient all-reduce of every micro-batch but an optimizer step's last.
        peak_lr: the learning rate after warm-up.
        compiled: ``compile_mode != "none"``.
        rank_pids: the process ids of every rank of the trial (rank 0's meter of the other
            processes' CPU share counts their trees as the trial's own).
        sharded: the model is FSDP2-sharded over several ranks: every forward pass, an
            evaluation's and the FLOP count's too, is collective (every rank runs it).
    """

    config: TrialConfig
    backend: Backend
    workload: LoadedWorkload
    device: torch.device
    memory_format: torch.memory_format
    autocast_dtype: torch.dtype | None
    model: torch.nn.Module
    step_model: Any
    optimizer: torch.optim.Optimizer
    lr_schedule: torch.optim.lr_scheduler.LRScheduler | None
    scaler: torch.amp.GradScaler
    val_data: Dataset[Any]
    loader: DataLoader[Any]
    total_steps: int
    samples_per_step: int
    peak_lr: float
    compiled: bool
    accumulation_steps: int = 1
    ddp: DistributedDataParallel | None = None
    rank_pids: tuple[int, ...] = ()
    sharded: bool = False

    def cpu_meter(self, rank: int) -> CpuShareMeter:
        """The meter of the other processes' CPU share: rank 0's over every rank's tree (this
        process alone when ``rank_pids`` is unset) and the study's own processes (every
        worker process of the study and its trials: :func:`cpu_meter_roots`); the other
        ranks' measures nothing."""
        if rank != 0:
            return CpuShareMeter(())
        return CpuShareMeter(cpu_meter_roots(self.rank_pids or (os.getpid(),), os.environ))

    def train_step(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """One optimizer step on this rank's batch ``(x, y)`` (already on the device); its
        loss.

        With ``accumulation_steps`` k > 1 the batch is k micro-batches of ``batch_size``:
        each one's loss over k is back-propagated, so the gradients add up to the mean over
        the whole batch (exact for a loss that averages over its samples, as cross-entropy
        does), under DDP's ``no_sync`` for all but the last, whose backward all-reduces the
        sum (the PyTorch docs' ``DistributedDataParallel.no_sync`` pattern); the returned
        loss is the micro-batches' mean.
        """
        self.optimizer.zero_grad(set_to_none=True)
        if self.accumulation_steps == 1:
            loss = self._backward(x, y)
        else:
            micro = self.config.batch_size
            pairs = list(zip(x.split(micro), y.split(micro), strict=True))
            loss = torch.zeros((), device=self.device)
            for i, (xm, ym) in enumerate(pairs):
                last = i == len(pairs) - 1
                with gradient_sync(self.model, self.ddp, last):
                    loss += self._backward(xm, ym, scale=1.0 / len(pairs)).detach()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        if self.lr_schedule is not None:
            self.lr_schedule.step()
        return loss

    def _backward(self, x: torch.Tensor, y: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        """Forward under the trial's autocast, then backward of the loss times ``scale``
        (through the fp16 ``GradScaler``); the scaled loss."""
        with torch.autocast(
            self.backend.kind, dtype=self.autocast_dtype, enabled=self.autocast_dtype is not None
        ):
            loss = self.workload.loss(self.step_model(x), y)
            if scale != 1.0:
                loss = loss * scale
        self.scaler.scale(loss).backward()
        return loss

    def batches(self, first_epoch: int = 0) -> Iterator[tuple[int, torch.Tensor, torch.Tensor]]:
        """Endless ``(epoch, x, y)`` on the device, one optimizer step's share of this rank
        each, epoch after epoch from ``first_epoch`` (x: (k*B, ...), (k*B, C, H, W) for
        images; y: (k*B, ...); B the batch size, k the accumulation steps)."""
        epoch = first_epoch
        while True:
            if isinstance(self.loader.sampler, DistributedSampler):
                self.loader.sampler.set_epoch(epoch)
            for x, y in self.loader:
                x = to_device(x, self.device, self.memory_format)
                if self.config.twin == "float64" and x.is_floating_point():
                    x = x.double()
                yield epoch, x, to_device(y, self.device, self.memory_format)
            epoch += 1

    @property
    def val_samples(self) -> int | None:
        """The validation split's size (samples), None when the dataset has no length."""
        try:
            return len(self.val_data)  # type: ignore[arg-type]
        except TypeError:
            return None

    @torch.no_grad()
    def evaluate(self) -> float:
        """The workload's validation metric of the eager model (top-1 accuracy in [0, 1]
        unless the workload brings its own ``evaluate``), in eval mode, under the trial's
        autocast. The model stays in eval mode: call ``model.train()`` before more steps.

        Raises:
            DoorUsageError: a metric that is not finite, or an accuracy outside [0, 1]
                (:func:`~autotune.trial.training._metric.checked_metric`): the trial fails as
                ``error`` with one line, and counts.

        The validation batches are the trial's batch size, in order, without workers.
        """
        self.model.eval()
        loader = DataLoader(self.val_data, batch_size=self.config.batch_size, shuffle=False)
        with torch.autocast(
            self.device.type, dtype=self.autocast_dtype, enabled=self.autocast_dtype is not None
        ):
            value = self.workload.evaluate(self.model, loader, self.device, self.memory_format)
        metric = MetricSpec.model_validate(
            {"name": self.workload.metric_name, "direction": self.workload.metric_direction}
        )
        return checked_metric(float(value), metric, "the workload's evaluate()")


def prepare_training(
    config: TrialConfig, backend: Backend, workload: LoadedWorkload, rank: int, world_size: int
) -> Training:
    """Load the data, build the model, optimizer and schedule; reset the peak-memory window
    before the model is built.

    Raises:
        ValueError: the global batch is larger than the training split.
    """
    device = backend.torch_device()
    train_data, val_data = workload.datasets()
    torch.manual_seed(config.seed)
    accumulation = config.train.accumulation_steps(config.batch_size, world_size)
    loader = make_loader(config, train_data, backend, rank, world_size)
    steps_per_epoch = len(loader)
    if steps_per_epoch == 0:
        steps = f" x {accumulation} accumulation steps" if accumulation > 1 else ""
        raise ValueError(
            f"batch_size={config.batch_size} x gpu_count={world_size}{steps} is larger than the "
            f"{len(train_data)} training samples"  # type: ignore[arg-type]
        )
    total_steps = config.train.epochs * steps_per_epoch
    if config.train.max_steps is not None:
        total_steps = min(total_steps, config.train.max_steps)
    compiled = config.compile_mode != "none"
    # Samples per optimizer step over all ranks: the global batch the learning rate follows.
    samples_per_step = config.batch_size * world_size * accumulation
    peak_lr = config.train.peak_lr(samples_per_step)

    backend.reset_peak_memory()
    channels_last = config.memory_format == "channels_last"
    memory_format = torch.channels_last if channels_last else torch.contiguous_format
    # Module.to takes memory_format (keyword only; documented, and parsed at run time by
    # torch._C._nn._parse_to), but torch's overloads of `to` leave it out.
    model = workload.build_model(config.model).to(  # type: ignore[call-overload]
        device=device, memory_format=memory_format
    )
    if (
        config.twin == "float64"
    ):  # the check's floor: the same run in float64 (autotune.study.evidence)
        model = model.to(torch.float64)
    blocks = config.blocks or (BUILTIN_BLOCKS if config.workload.is_builtin else ())
    if config.activation_checkpointing:
        checkpoint_blocks(model, blocks)
    train_model: torch.nn.Module = model
    ddp = None
    if world_size > 1 and config.data_parallel == "fsdp":
        train_model = model = shard_model(
            model, blocks, world_size, device, _AUTOCAST_DTYPES.get(config.precision)
        )
    elif world_size > 1:
        train_model = ddp = DistributedDataParallel(model)
    optimizer = make_optimizer(config.train, model.parameters(), peak_lr, config.optimizer_impl)
    lr_schedule = make_lr_schedule(optimizer, config.train, total_steps)
    step_model = torch.compile(train_model, mode=config.compile_mode) if compiled else train_model
    model.train()
    return Training(
        config=config,
        backend=backend,
        workload=workload,
        device=device,
        memory_format=memory_format,
        autocast_dtype=_AUTOCAST_DTYPES.get(config.precision),
        model=model,
        step_model=step_model,
        optimizer=optimizer,
        lr_schedule=lr_schedule,
        scaler=torch.amp.GradScaler(
            backend.kind, enabled=config.precision == "fp16" and backend.kind == "cuda"
        ),
        val_data=val_data,
        loader=loader,
        total_steps=total_steps,
        samples_per_step=samples_per_step,
        peak_lr=peak_lr,
        compiled=compiled,
        accumulation_steps=accumulation,
        ddp=ddp,
        sharded=world_size > 1 and config.data_parallel == "fsdp",
    )
