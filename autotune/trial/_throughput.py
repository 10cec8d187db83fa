"""The throughput objective's loop: the fixed budget with its timed windows
(:func:`train_for_throughput`), in the trial's child process.

Timing: the device is synchronized and the clock read only at the edges of the timed windows
(:func:`autotune.measure.plan_windows`), never inside one, so the host queues kernels ahead of
the device as in an untimed loop; each window includes fetching its batches from the DataLoader.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import torch
import torch.distributed as dist

from autotune.flops import trial_extras
from autotune.measure import (
    CpuShareMeter,
    Measurement,
    ThroughputStats,
    WindowClock,
    WindowPlan,
    plan_windows,
)
from autotune.models import count_parameters
from autotune.nvml import GpuWindowMeter
from autotune.trial._setup import Training

#: Most timing-only steps a trial takes to reach ``measure.min_timed_s`` (a bound, not a target).
_MAX_EXTENSION_STEPS = 100_000


def train_for_throughput(t: Training, rank: int, world_size: int) -> Measurement:
    """The fixed budget (``train.epochs`` passes, capped by ``train.max_steps``): timed
    windows, then one evaluation of the budget's model, then timing-only steps when the
    windows covered less than ``measure.min_timed_s``.

    Timing: the device is synchronized and the clock read only at the edges of the timed
    windows (:func:`autotune.measure.plan_windows`), never inside one, so the host queues
    kernels ahead of the device as in an untimed loop; each window includes fetching its
    batches from the DataLoader.
    """
    config, backend = t.config, t.backend
    plan = plan_windows(
        t.total_steps,
        warmup_steps=config.train.warmup_steps,
        windows=config.measure.windows,
        min_window_steps=config.measure.min_window_steps,
        compiled=t.compiled,
    )
    edges = frozenset(plan.edges)
    timed_end = plan.window_edges[-1]
    epoch_loss = torch.zeros((), device=t.device)
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
    cpu_meter = t.cpu_meter(rank)  # other processes' CPU share, first window edge to last
    if plan.warmup_steps == 0:
        cpu_meter.start()
    marks_s = {0: clock.mark()}
    if gpu_meter is not None and plan.warmup_steps == 0:
        gpu_meter.start()
    batches = t.batches()
    current_epoch = 0
    for epoch, x, y in batches:
        if epoch != current_epoch:
            current_epoch = epoch
            epoch_loss.zero_()
            epoch_steps = 0
        loss = t.train_step(x, y)
        epoch_loss += loss.detach().float()
        epoch_steps += 1
        step += 1
        if step in edges:
            if step == plan.warmup_steps and step > 0:
                cpu_meter.start()  # before the first window's clock read
            marks_s[step] = clock.mark()  # syncs the device: the edge of a window
            if step == timed_end:
                cpu_meter.stop()  # after the last's
            if gpu_meter is not None and step == plan.warmup_steps:
                gpu_meter.start()  # the timed windows start now
            if gpu_meter is not None and step == timed_end:
                gpu_reading = gpu_meter.stop()  # and end now
        if step >= t.total_steps:
            break
    train_s = marks_s[step] - marks_s[0]  # the whole loop, one sync at its end
    peak_memory = backend.peak_memory_bytes()

    stats = plan.summarize(marks_s, t.samples_per_step)
    # The first step holds the compilation: its seconds beyond a timed step's.
    compile_s = max(0.0, marks_s[1] - marks_s[0] - stats.step_time_s) if t.compiled else 0.0
    # The budget's accuracy, before any timing-only step changes the weights.
    metric = t.evaluate() if rank == 0 else 0.0
    budget_timed_s = sum(plan.window_times_s(marks_s))
    extension_steps = 0
    if budget_timed_s < config.measure.min_timed_s:
        t.model.train()
        stats, extension_steps = _extend_timing(
            t.train_step,
            ((bx, by) for _, bx, by in batches),
            WindowClock(backend.synchronize),
            stats,
            config.measure.min_timed_s,
            t.samples_per_step,
            world_size,
            t.device,
            cpu_meter,
        )
    # FLOPs of one more step on the last batch (x, y), after the timed steps and the memory
    # reading; the model's buffers are restored (autotune.flops.count_training_flops).
    extra = (
        trial_extras(
            t.model,
            x,
            y,
            loss_fn=t.workload.loss,
            precision=config.precision,
            autocast_dtype=t.autocast_dtype,
            device_kind=backend.kind,
            gpu_reading=gpu_reading,
            samples_per_s=stats.throughput_sps,
        )
        if rank == 0
        else {}
    )
    if rank == 0:
        extra["lr_peak"] = t.peak_lr
        extra["timing_extension_steps"] = extension_steps
    return Measurement.from_stats(
        stats,
        compile_s=compile_s,
        peak_memory_bytes=peak_memory,
        val_metric=metric,
        train_loss=float(epoch_loss.item() / max(1, epoch_steps)),
        train_s=train_s,
        steps=step,
        samples_per_step=t.samples_per_step,
        parameters=count_parameters(t.model),
        memory_kind=backend.memory_kind,
        simulated=False,
        val_samples=t.val_samples,
        extra=extra,
    ).with_load(cpu_meter.load)


def _extend_timing(
    train_step: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    batches: Iterator[tuple[torch.Tensor, torch.Tensor]],
    clock: WindowClock,
    budget: ThroughputStats,
    min_timed_s: float,
    samples_per_step: int,
    world_size: int,
    device: torch.device,
    cpu_meter: CpuShareMeter,
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
        cpu_meter: the other processes' CPU share, measured again over the new windows.

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
            if step == plan.warmup_steps:
                cpu_meter.start()
            marks_s[step] = clock.mark()
    cpu_meter.stop()
    return plan.summarize(marks_s, samples_per_step), plan.total_steps
