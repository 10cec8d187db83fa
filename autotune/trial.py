"""Build, train and evaluate one :class:`~autotune.config.TrialConfig` in this process.

This module runs inside a trial's child process (see :mod:`autotune.runner`), one call per
DDP rank. It never sees the study: it takes a frozen config and returns a
:class:`~autotune.measure.Measurement`.

The model, its data, loss and metric come from the trial's workload, imported here by
reference (:func:`autotune.workloads.load_workload`): the model knobs ->
``workload.build_model(**knobs)``; ``workload.datasets()`` -> the training and validation
data. The tuner's knobs map onto PyTorch as follows: batch size and workers -> ``DataLoader``
(pinned memory on CUDA, persistent workers); precision -> ``torch.autocast`` (fp16, bf16; a
``GradScaler`` for fp16 on CUDA) or the TF32 flags; memory format -> ``channels_last`` for
the model and 4-D inputs; compile mode ->
``torch.compile(mode=...)``; GPU count -> ``DistributedDataParallel`` with that world size.
The learning rate follows the global batch (``train.lr_scaling``) after a linear warm-up
(``torch.optim.lr_scheduler.LinearLR``), then ``train.lr_schedule`` (cosine decay to 0 by
default).

Timing: the device is synchronized and the clock read only at the edges of the timed windows
(:func:`autotune.measure.plan_windows`), never inside one, so the host queues kernels ahead of
the device as in an untimed loop; each window includes fetching its batches from the DataLoader.

One module of about 450 lines on purpose: its one job is a trial's training run in the child,
and the training loop, its timed windows and its evaluation share the same state (model,
autocast, device synchronization); split, each part would need all of it passed along.
"""

from __future__ import annotations

import itertools
import math
import os
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset, DistributedSampler, RandomSampler

from autotune.config import TrainSettings, TrialConfig
from autotune.devices import Backend, make_backend
from autotune.flops import trial_extras
from autotune.measure import (
    Measurement,
    ThroughputStats,
    WindowClock,
    WindowPlan,
    plan_windows,
)
from autotune.models import count_parameters
from autotune.nvml import GpuWindowMeter
from autotune.workloads import LoadedWorkload, load_workload

__all__ = ["run_rank"]

_AUTOCAST_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
#: Most timing-only steps a trial takes to reach ``measure.min_timed_s`` (a bound, not a target).
_MAX_EXTENSION_STEPS = 100_000


def run_rank(
    config: TrialConfig, rank: int = 0, world_size: int = 1, init_file: str | None = None
) -> Measurement | None:
    """Train and evaluate as DDP rank ``rank`` of ``world_size``.

    Args:
        config: the trial (``device`` is ``cpu``, ``cuda`` or ``mock``).
        rank: this process's rank.
        world_size: number of ranks (``config.gpu_count``).
        init_file: a path for torch.distributed's file rendezvous (needed when world_size > 1).

    Returns:
        The trial's measurement on rank 0 (figures combined over ranks), None on other ranks.

    Raises:
        torch.OutOfMemoryError, MemoryError: the device ran out of memory.
        ValueError: the batch is larger than the training split.
        Exception: whatever the workload raises (the runner records it as ``failure=error``).
    """
    if config.device == "mock":
        from autotune.devices.mock import simulate

        _inject_fault(config.mock_fault)
        return simulate(config)
    backend = make_backend(config.device)
    backend.setup(rank, world_size, config.precision)
    if world_size > 1:
        if init_file is None:
            raise ValueError("world_size > 1 needs init_file for the rendezvous")
        dist.init_process_group(
            backend.ddp_backend, init_method=f"file://{init_file}", rank=rank, world_size=world_size
        )
    try:
        workload = load_workload(config.workload)
        local = _train_and_evaluate(config, backend, workload, rank, world_size)
        if world_size == 1:
            return local
        gathered: list[Any] = [None] * world_size
        dist.all_gather_object(gathered, local.peak_memory_bytes)
        if rank != 0:
            return None
        # CPU ranks share one host, so their memory adds up; each GPU holds its own rank.
        combine = sum if backend.kind == "cpu" else max
        return _replace_memory(local, int(combine(gathered)))
    finally:
        if world_size > 1 and dist.is_initialized():
            dist.destroy_process_group()


def _inject_fault(fault: str) -> None:
    """Fail on purpose, as the mock device's ``mock.fault`` asks (tests of failure handling)."""
    if fault == "oom":
        raise MemoryError("simulated out of memory (mock.fault=oom)")
    if fault == "error":
        raise RuntimeError("simulated error (mock.fault=error)")
    if fault == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    if fault == "hang":
        while True:
            time.sleep(3600)


def _replace_memory(m: Measurement, peak_bytes: int) -> Measurement:
    from dataclasses import replace

    return replace(m, peak_memory_bytes=peak_bytes)


def _make_optimizer(settings: TrainSettings, params: Any, lr: float) -> torch.optim.Optimizer:
    if settings.optimizer == "sgd":
        return torch.optim.SGD(
            params, lr=lr, momentum=settings.momentum, weight_decay=settings.weight_decay
        )
    return torch.optim.AdamW(params, lr=lr, weight_decay=settings.weight_decay)


def _make_lr_schedule(
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


def _make_loader(
    config: TrialConfig, data: Dataset[Any], backend: Backend, rank: int, world_size: int
) -> DataLoader[Any]:
    generator = torch.Generator().manual_seed(config.seed)
    sampler: Any
    if world_size > 1:
        sampler = DistributedSampler(data, world_size, rank, shuffle=True, seed=config.seed)
    else:
        sampler = RandomSampler(data, generator=generator)  # type: ignore[arg-type]
    return DataLoader(
        data,
        batch_size=config.batch_size,
        sampler=sampler,
        num_workers=config.num_workers,
        pin_memory=backend.pin_memory,
        drop_last=True,  # equal batches: steady timing, no recompiles on a ragged last batch
        persistent_workers=config.num_workers > 0,
        generator=generator,
    )


def _to_device(
    batch: Any, device: torch.device, memory_format: torch.memory_format
) -> torch.Tensor:
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


def _train_and_evaluate(
    config: TrialConfig, backend: Backend, workload: LoadedWorkload, rank: int, world_size: int
) -> Measurement:
    device = backend.torch_device()
    train_data, val_data = workload.datasets()
    torch.manual_seed(config.seed)
    loader = _make_loader(config, train_data, backend, rank, world_size)
    steps_per_epoch = len(loader)
    if steps_per_epoch == 0:
        raise ValueError(
            f"batch_size={config.batch_size} x gpu_count={world_size} is larger than the "
            f"{len(train_data)} training samples"  # type: ignore[arg-type]
        )
    total_steps = config.train.epochs * steps_per_epoch
    if config.train.max_steps is not None:
        total_steps = min(total_steps, config.train.max_steps)
    compiled = config.compile_mode != "none"
    plan = plan_windows(
        total_steps,
        warmup_steps=config.train.warmup_steps,
        windows=config.measure.windows,
        min_window_steps=config.measure.min_window_steps,
        compiled=compiled,
    )
    edges = frozenset(plan.edges)
    timed_end = plan.window_edges[-1]
    samples_per_step = config.batch_size * world_size
    peak_lr = config.train.peak_lr(samples_per_step)

    backend.reset_peak_memory()
    channels_last = config.memory_format == "channels_last"
    memory_format = torch.channels_last if channels_last else torch.contiguous_format
    # Module.to takes memory_format (keyword only; documented, and parsed at run time by
    # torch._C._nn._parse_to), but torch's overloads of `to` leave it out.
    model = workload.build_model(config.model).to(  # type: ignore[call-overload]
        device=device, memory_format=memory_format
    )
    train_model: torch.nn.Module = model
    if world_size > 1:
        train_model = DistributedDataParallel(model)
    optimizer = _make_optimizer(config.train, model.parameters(), peak_lr)
    lr_schedule = _make_lr_schedule(optimizer, config.train, total_steps)
    step_model = torch.compile(train_model, mode=config.compile_mode) if compiled else train_model
    autocast_dtype = _AUTOCAST_DTYPES.get(config.precision)
    scaler = torch.amp.GradScaler(
        backend.kind, enabled=config.precision == "fp16" and backend.kind == "cuda"
    )

    def train_step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """One optimizer step on the batch ``(x, y)`` (already on the device); its loss."""
        with torch.autocast(backend.kind, dtype=autocast_dtype, enabled=autocast_dtype is not None):
            loss = workload.loss(step_model(x), y)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        if lr_schedule is not None:
            lr_schedule.step()
        return loss

    model.train()
    epoch_loss = torch.zeros((), device=device)
    epoch_steps = 0
    step = 0
    # NVML power and utilization over the timed windows: rank 0 reads every rank's GPU (CUDA).
    gpu_meter = (
        GpuWindowMeter.for_cuda_ranks(world_size) if backend.kind == "cuda" and rank == 0 else None
    )
    gpu_reading = None
    # Clock readings (seconds) by step count, taken at the planned edges only: each syncs the
    # device once; between edges nothing waits for it.
    clock = WindowClock(backend.synchronize)
    marks_s = {0: clock.mark()}
    if gpu_meter is not None and plan.warmup_steps == 0:
        gpu_meter.start()
    for epoch in range(config.train.epochs):
        if isinstance(loader.sampler, DistributedSampler):
            loader.sampler.set_epoch(epoch)
        epoch_loss.zero_()
        epoch_steps = 0
        for x, y in loader:
            x = _to_device(x, device, memory_format)  # (B, ...): (B, C, H, W) for images
            y = _to_device(y, device, memory_format)  # (B, ...)
            loss = train_step(x, y)
            epoch_loss += loss.detach().float()
            epoch_steps += 1
            step += 1
            if step in edges:
                marks_s[step] = clock.mark()  # syncs the device: the edge of a window
                if gpu_meter is not None and step == plan.warmup_steps:
                    gpu_meter.start()  # the timed windows start now
                if gpu_meter is not None and step == timed_end:
                    gpu_reading = gpu_meter.stop()  # and end now
            if step >= total_steps:
                break
        if step >= total_steps:
            break
    if step not in marks_s:  # never so: the loop always ends at total_steps, an edge
        marks_s[step] = clock.mark()
    train_s = marks_s[step] - marks_s[0]  # the whole loop, one sync at its end
    peak_memory = backend.peak_memory_bytes()

    stats = plan.summarize(marks_s, samples_per_step)
    # The first step holds the compilation: its seconds beyond a timed step's.
    compile_s = max(0.0, marks_s[1] - marks_s[0] - stats.step_time_s) if compiled else 0.0
    # The budget's accuracy, before any timing-only step changes the weights.
    metric = (
        _evaluate(workload, model, val_data, config, device, memory_format, autocast_dtype)
        if rank == 0
        else 0.0
    )
    budget_timed_s = sum(plan.window_times_s(marks_s))
    extension_steps = 0
    if budget_timed_s < config.measure.min_timed_s:
        model.train()

        def batches() -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
            for epoch_index in itertools.count(config.train.epochs):
                if isinstance(loader.sampler, DistributedSampler):
                    loader.sampler.set_epoch(epoch_index)
                for bx, by in loader:
                    yield (
                        _to_device(bx, device, memory_format),
                        _to_device(by, device, memory_format),
                    )

        stats, extension_steps = _extend_timing(
            train_step,
            batches(),
            WindowClock(backend.synchronize),
            stats,
            config.measure.min_timed_s,
            samples_per_step,
            world_size,
            device,
        )
    # FLOPs of one more step on the last batch (x, y), after the timed steps and the memory
    # reading; the model's buffers are restored (autotune.flops.count_training_flops).
    extra = (
        trial_extras(
            model,
            x,
            y,
            loss_fn=workload.loss,
            precision=config.precision,
            autocast_dtype=autocast_dtype,
            device_kind=backend.kind,
            gpu_reading=gpu_reading,
            samples_per_s=stats.throughput_sps,
        )
        if rank == 0
        else {}
    )
    if rank == 0:
        extra["lr_peak"] = peak_lr
        extra["timing_extension_steps"] = extension_steps
    return Measurement.from_stats(
        stats,
        compile_s=compile_s,
        peak_memory_bytes=peak_memory,
        val_metric=metric,
        train_loss=float(epoch_loss.item() / max(1, epoch_steps)),
        train_s=train_s,
        steps=step,
        samples_per_step=samples_per_step,
        parameters=count_parameters(model),
        memory_kind=backend.memory_kind,
        simulated=False,
        extra=extra,
    )


def _extend_timing(
    train_step: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    batches: Iterator[tuple[torch.Tensor, torch.Tensor]],
    clock: WindowClock,
    budget: ThroughputStats,
    min_timed_s: float,
    samples_per_step: int,
    world_size: int,
    device: torch.device,
) -> tuple[ThroughputStats, int]:
    """Time more steps when the budget's windows cover less than ``min_timed_s`` seconds.

    A small budget (digits: ~0.4 s of timed steps on a CPU) leaves throughput at the mercy
    of a few milliseconds of scheduling noise: one configuration measured in fresh processes
    then spans tens of percent. As ``torch.utils.benchmark``'s ``blocked_autorange`` grows
    its blocks until a minimum run time, this runs the same number of windows again, each
    long enough that together they cover ``min_timed_s`` (sized from the budget's median
    step time), after one untimed step. It runs after the evaluation, so the accuracy is the
    budget's; the windows replace the budget's in the throughput and step-time figures. All
    DDP ranks agree on the step count (the largest any rank asks for).

    Args:
        train_step: one optimizer step on a batch already on the device.
        batches: endless ``(x, y)`` batches on the device (x: (B, C, H, W), y: (B,)).
        clock: reads the clock after synchronizing the device (at window edges only).
        budget: the budget's window statistics.
        min_timed_s: seconds the windows should cover together (``measure.min_timed_s``).
        samples_per_step: global samples per step.
        world_size: DDP ranks.
        device: this rank's device.

    Returns:
        ``(statistics of the new windows, timing-only steps taken)``.
    """
    windows = len(budget.window_throughputs_sps)
    per_window = math.ceil(min_timed_s / windows / max(budget.step_time_s, 1e-9))
    per_window = max(1, min(per_window, _MAX_EXTENSION_STEPS // windows))
    if world_size > 1:
        wanted = torch.tensor([per_window], device=device)
        dist.all_reduce(wanted, op=dist.ReduceOp.MAX)
        per_window = int(wanted.item())
    plan = WindowPlan(
        total_steps=1 + per_window * windows,
        warmup_steps=1,
        window_steps=per_window,
        windows=windows,
    )
    edges = frozenset(plan.window_edges)
    marks_s: dict[int, float] = {}
    for step in range(1, plan.total_steps + 1):
        train_step(*next(batches))
        if step in edges:
            marks_s[step] = clock.mark()
    return plan.summarize(marks_s, samples_per_step), plan.total_steps


@torch.no_grad()
def _evaluate(
    workload: LoadedWorkload,
    model: torch.nn.Module,
    val_data: Dataset[Any],
    config: TrialConfig,
    device: torch.device,
    memory_format: torch.memory_format,
    autocast_dtype: torch.dtype | None,
) -> float:
    """The workload's validation metric of the eager model (top-1 accuracy in [0, 1] unless
    the workload brings its own ``evaluate``), in eval mode, under the trial's autocast.

    The validation batches are the trial's batch size, in order, without workers.
    """
    model.eval()
    loader = DataLoader(val_data, batch_size=config.batch_size, shuffle=False)
    device_type = device.type
    with torch.autocast(device_type, dtype=autocast_dtype, enabled=autocast_dtype is not None):
        return workload.evaluate(model, loader, device, memory_format)
