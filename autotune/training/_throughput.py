"""The throughput objective's loop: the fixed budget with its timed windows
(:func:`train_for_throughput`), in the trial's child process.

Timing: the device is synchronized and the clock read only at the edges of the timed windows
(:func:`autotune.measure.plan_windows`), never inside one, so the host queues kernels ahead of
the device as in an untimed loop; each window includes fetching its batches from the DataLoader.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator

import torch
import torch.distributed as dist

from autotune.config import TrialConfig
from autotune.flops import trial_extras
from autotune.hardware import CUDA_GRAPH_MODES
from autotune.measure import (
    CpuShareMeter,
    Measurement,
    ThroughputStats,
    WindowClock,
    WindowPlan,
    plan_reused_windows,
    plan_windows,
    summarize_windows,
)
from autotune.nvml import GpuWindowMeter, GpuWindowReading
from autotune.training._setup import HostAgreement, Training
from autotune.workloads.builtin.networks import count_parameters

#: Most timing-only steps a trial takes to reach ``measure.min_timed_s`` (a bound, not a target).
_MAX_EXTENSION_STEPS = 100_000


def train_for_throughput(t: Training, rank: int, world_size: int) -> Measurement:
    """The fixed budget (``train.epochs`` passes, capped by ``train.max_steps``): timed
    windows, then one evaluation of the budget's model, then timing-only steps when the
    windows covered less than ``measure.min_timed_s``. With ``config.min_throughput_sps``
    set (the study's floor, ``trial.min_throughput_vs_baseline`` of the baseline's), a
    warm-up or first window below it ends the loop there (:class:`_ThroughputFloor`): a
    :attr:`Measurement.too_slow` measurement of the steps it timed, without evaluation.
    With ``config.reuse`` set (a measured trial with the same math key), the loop runs the
    warm-up and one epoch of timed windows only, does not evaluate, and reports the reused
    metric and training loss.

    Timing: the device is synchronized and the clock read only at the edges of the timed
    windows (:func:`autotune.measure.plan_windows`), never inside one, so the host queues
    kernels ahead of the device as in an untimed loop; each window includes fetching its
    batches from the DataLoader.
    """
    config, backend = t.config, t.backend
    plan = _plan(t)
    edges = frozenset(plan.edges)
    timed_end = plan.window_edges[-1]
    floor = (
        _ThroughputFloor(
            config.min_throughput_sps,
            plan,
            t.samples_per_step,
            world_size,
            # Every rank builds it here (new_group is collective on CUDA).
            agreement=HostAgreement(world_size, backend.ddp_backend),
            rank=rank,
        )
        if config.min_throughput_sps is not None
        else None
    )
    epoch_loss = torch.zeros((), device=t.device)
    epoch_steps = 0
    step = 0
    # NVML power and utilization over the timed windows: rank 0 reads every rank's GPU (CUDA).
    gpu_meter = backend.gpu_meter(world_size) if rank == 0 else None
    gpu_reading = None
    # Clock readings (seconds) by step count, taken at the planned edges only: each syncs the
    # device once; between edges nothing waits for it.
    clock = WindowClock(backend.synchronize)
    cpu_meter = t.cpu_meter(rank)  # other processes' CPU share, first window edge to last

    def start_meters() -> None:
        """The timed windows open: sync, then the meters, then (the caller) the clock, so
        that the meters' set-up (NVML handles and first readings, /proc reads) falls outside
        window 1 and the meters see the whole of it."""
        cpu_meter.start()
        if gpu_meter is not None:
            backend.synchronize()  # the GPU's queue drained before NVML's first readings
            gpu_meter.start()

    warmup_peak_bytes: int | None = None  # the warm-up's peak where the device keeps it apart
    if plan.warmup_steps == 0:
        start_meters()
    marks_s = {0: clock.mark()}
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
        if floor is not None and floor.crossed_early(step):
            marks_s[step] = clock.mark()  # it cannot end above the floor: stop now
            if gpu_meter is not None:
                gpu_meter.stop()
            assert floor.first_step_s is not None  # set after the first step
            slow = _too_slow(t, step - 1, marks_s[step] - floor.first_step_s, marks_s)
            # A machine busy with other work can make a trial too slow: say so (the load over
            # the part of the first window that ran, none when it stopped in the warm-up).
            return slow.with_load(cpu_meter.stop())
        if step in edges:
            if step == plan.warmup_steps and step > 0:
                warmup_peak_bytes = backend.restart_peak_memory()
                start_meters()  # before the first window's clock read
            marks_s[step] = clock.mark()  # syncs the device: the edge of a window
            if step == timed_end:  # the meters stop after the last window's clock read
                cpu_meter.stop()
                if gpu_meter is not None:
                    gpu_reading = gpu_meter.stop()
            if floor is not None and floor.below_at_edge(step, marks_s):
                if gpu_meter is not None and gpu_reading is None:
                    gpu_meter.stop()
                load = cpu_meter.load if step == timed_end else cpu_meter.stop()
                window_s = marks_s[step] - marks_s[floor.start_step]
                return _too_slow(t, step - floor.start_step, window_s, marks_s).with_load(load)
        if step >= plan.total_steps:
            break
    train_s = marks_s[step] - marks_s[0]  # the whole loop, one sync at its end
    peak_memory = backend.peak_memory_bytes()

    stats = plan.summarize(marks_s, t.samples_per_step)
    # The first step holds the compilation: its seconds beyond a timed step's.
    # Compilation (and, in CUDA-graph modes, the graphs' recording at step 2) less the steps'
    # own time at the timed windows' pace.
    k = plan.compile_steps
    compile_s = max(0.0, marks_s[k] - marks_s[0] - k * stats.step_time_s) if t.compiled else 0.0
    # The budget's accuracy, before any timing-only step changes the weights; or the metric
    # of the trial with the same math key (config.reuse), which trained the budget.
    reuse = config.reuse
    if reuse is not None:
        metric = reuse.val_metric
    elif rank == 0:
        metric = t.evaluate()
    else:
        metric = 0.0
    budget_timed_s = sum(plan.window_times_s(marks_s))
    extension_steps = 0
    metered_samples = plan.timed_steps * t.samples_per_step
    per_window = _extension_window_steps(
        stats,
        budget_timed_s,
        config.measure.min_timed_s_on(backend.kind),
        rank,
        world_size,
        t.device,
    )
    if per_window > 0:
        t.model.train()
        stats, extension_steps, extension_reading = _extend_timing(
            t.train_step,
            ((bx, by) for _, bx, by in batches),
            WindowClock(backend.synchronize),
            len(stats.window_throughputs_sps),
            per_window,
            t.samples_per_step,
            cpu_meter,
            gpu_meter,
        )
        if gpu_meter is not None:
            # The throughput now comes from the extension's windows: so do the GPU's power,
            # utilization and energy per sample, metered over the same windows.
            gpu_reading = extension_reading
            metered_samples = (extension_steps - 1) * t.samples_per_step
    # FLOPs of one more step on the last batch (x, y), after the timed steps and the memory
    # reading; the model's buffers are restored (autotune.flops.count_training_flops).
    extra = (
        trial_extras(
            t.model,
            x[: config.batch_size],  # one micro-batch: the FLOPs per sample are the same
            y[: config.batch_size],
            loss_fn=t.workload.loss,
            precision=config.precision,
            autocast_dtype=t.autocast_dtype,
            device_kind=backend.kind,
            gpu_reading=gpu_reading,
            metered_samples=metered_samples,
        )
        if rank == 0
        else {}
    )
    if rank == 0:
        extra["lr_peak"] = t.peak_lr
        if t.accumulation_steps > 1:
            extra["accumulation_steps"] = t.accumulation_steps
        extra["timing_extension_steps"] = extension_steps
        if warmup_peak_bytes is not None:
            extra["warmup_peak_memory_bytes"] = warmup_peak_bytes
        if gpu_meter is not None and gpu_meter.error is not None:
            extra["gpu_telemetry_error"] = gpu_meter.error  # the GPU figures are missing: why
    return Measurement.from_stats(
        stats,
        compile_s=compile_s,
        peak_memory_bytes=peak_memory,
        val_metric=metric,
        train_loss=(
            reuse.train_loss
            if reuse is not None
            else float(epoch_loss.item() / max(1, epoch_steps))
        ),
        train_s=train_s,
        steps=step,
        samples_per_step=t.samples_per_step,
        parameters=count_parameters(t.model),
        memory_kind=backend.memory_kind,
        simulated=False,
        val_samples=t.val_samples,
        extra=extra,
    ).with_load(cpu_meter.load)


def _plan(t: Training) -> WindowPlan:
    """The loop's warm-up and windows: over the whole budget, or, for a trial that reuses
    another's metric (``config.reuse``), over one epoch after the warm-up
    (:func:`autotune.measure.plan_reused_windows`)."""
    config = t.config
    if config.reuse is not None:
        return plan_reused_windows(
            t.total_steps,
            steps_per_epoch=len(t.loader),
            warmup_steps=config.train.warmup_steps,
            windows=config.measure.windows,
            min_window_steps=config.measure.min_window_steps,
            compiled=t.compiled,
            compile_steps=graph_recording_steps(config, t.backend.kind),
        )
    return plan_windows(
        t.total_steps,
        warmup_steps=config.train.warmup_steps,
        windows=config.measure.windows,
        min_window_steps=config.measure.min_window_steps,
        compiled=t.compiled,
        compile_steps=graph_recording_steps(config, t.backend.kind),
    )


def graph_recording_steps(config: TrialConfig, device_kind: str) -> int:
    """Steps whose time holds a compiled trial's compilation: 2 where CUDA graphs record on
    the second call (``reduce-overhead`` and ``max-autotune`` on CUDA: Inductor's cudagraph
    trees warm up on the first call and record on the second), else 1."""
    if device_kind == "cuda" and config.compile_mode in CUDA_GRAPH_MODES:
        return 2
    return 1


class _ThroughputFloor:
    """``config.min_throughput_sps`` (global samples/s) over the warm-up and the first timed
    window.

    Rank 0 reads the host clock after each step up to the first window's end, without
    synchronizing the device, and the trial stops once the steps since its first one (which
    holds compilation and first-touch costs) have run for at least ``min_evidence_s`` and
    taken longer than they may at the floor: the host runs ahead of a GPU, so host seconds
    past the limit mean device seconds past it too. The evidence bound keeps one late step
    (a DataLoader worker still starting, a page-fault burst: tenths of a second) from
    stopping a fast trial. So a trial far below the floor costs its first step and about
    ``min_evidence_s``, not its warm-up plus a window (a quick run's fp16 trial on a CPU
    without fp16 units took 45 s to reach its first window's end; a 2-rank one, deciding
    only at that end, 165 s). DDP ranks take rank 0's decision each step through
    :class:`~autotune.training._setup.HostAgreement` (a host all-reduce of one flag, tens of
    microseconds, no device sync), only until the first window's end; at that end, rank 0
    also decides on the window's throughput.

    Args:
        floor_sps: the floor, global samples/s (> 0).
        plan: the loop's windows.
        samples_per_step: global samples per optimizer step.
        world_size: DDP ranks.
        min_evidence_s: host seconds of steps an early stop needs.
        clock: the host clock (``time.perf_counter``; tests inject a fake).
        agreement: how DDP ranks agree each step (None: one process).
        rank: this process's rank (rank 0 decides).
    """

    def __init__(
        self,
        floor_sps: float,
        plan: WindowPlan,
        samples_per_step: int,
        world_size: int,
        min_evidence_s: float = 2.0,
        clock: Callable[[], float] = time.perf_counter,
        agreement: HostAgreement | None = None,
        rank: int = 0,
    ) -> None:
        self.floor_sps = floor_sps
        self.start_step, self.end_step = plan.window_edges[0], plan.window_edges[1]
        self.samples_per_step = samples_per_step
        self.world_size = world_size
        self.min_evidence_s = min_evidence_s
        self._clock = clock
        self._agreement = agreement
        self._rank = rank
        #: Host clock after the first step, once it has run.
        self.first_step_s: float | None = None

    def crossed_early(self, step: int) -> bool:
        """Before the first window's end: the steps after the first have run for
        ``min_evidence_s`` and taken longer than they may at the floor, by rank 0's host
        clock (no device sync), agreed by every rank. Every rank calls it after every step,
        so that the ranks' collectives match."""
        if step >= self.end_step:
            return False
        now_s = self._clock()
        if self.first_step_s is None:
            self.first_step_s = now_s
            return False
        elapsed_s = now_s - self.first_step_s
        below = (
            self._rank == 0
            and elapsed_s >= self.min_evidence_s
            and elapsed_s * self.floor_sps > (step - 1) * self.samples_per_step
        )
        if self.world_size > 1:
            assert self._agreement is not None, "DDP ranks agree through a HostAgreement"
            (below,) = self._agreement.any([below])
        return below

    def below_at_edge(self, step: int, marks_s: dict[int, float]) -> bool:
        """At the first window's end: whether it ran below the floor, as rank 0 measured it
        (every rank takes rank 0's decision through the same host agreement as
        :meth:`crossed_early`, so all stop or go on together)."""
        if step != self.end_step:
            return False
        seconds = max(marks_s[step] - marks_s[self.start_step], 1e-9)
        below = (
            self._rank == 0
            and (step - self.start_step) * self.samples_per_step / seconds < self.floor_sps
        )
        if self.world_size > 1:
            assert self._agreement is not None, "DDP ranks agree through a HostAgreement"
            (below,) = self._agreement.any([below])
        return below


def _too_slow(t: Training, steps: int, seconds: float, marks_s: dict[int, float]) -> Measurement:
    """The measurement of a trial stopped before or at the end of its first timed window
    (``too_slow``): its last ``steps`` steps in ``seconds`` as its one window, the memory so
    far, no evaluation (``val_metric`` NaN); ``marks_s`` holds its clock readings, the last
    one at the stop."""
    end_step = max(marks_s)
    stats = summarize_windows([max(seconds, 1e-9)], steps, t.samples_per_step)
    compile_s = (
        max(0.0, marks_s[1] - marks_s[0] - stats.step_time_s)
        if t.compiled and 1 in marks_s
        else 0.0
    )
    return Measurement.from_stats(
        stats,
        compile_s=compile_s,
        peak_memory_bytes=t.backend.peak_memory_bytes(),
        val_metric=math.nan,
        train_loss=math.nan,
        train_s=marks_s[end_step] - marks_s[0],
        steps=end_step,
        samples_per_step=t.samples_per_step,
        parameters=count_parameters(t.model),
        memory_kind=t.backend.memory_kind,
        simulated=False,
        too_slow=True,
        extra={"min_throughput_sps": t.config.min_throughput_sps},
    )


def _extension_window_steps(
    budget: ThroughputStats,
    budget_timed_s: float,
    min_timed_s: float,
    rank: int,
    world_size: int,
    device: torch.device,
) -> int:
    """Steps per window of the timing-only extension (:func:`_extend_timing`); 0: none.

    The windows are sized from the budget's median step time so that together they cover
    ``min_timed_s``. Under DDP rank 0 decides, from its own clock, and broadcasts the decision
    and the step count in one collective: every rank then runs the same extension, or none.
    Each rank deciding from its own clock (it was so) let a budget near ``min_timed_s`` send
    one rank into the extension's collectives while another went on to the trial's closing
    ``all_gather_object``: the collectives no longer matched and the trial hung until its
    timeout. torch.distributed requires every rank of a group to call the same collectives in
    the same order (PyTorch docs, "Distributed communication package - torch.distributed",
    Collective functions).

    Args:
        budget: the budget's window statistics (this rank's).
        budget_timed_s: seconds the budget's windows covered (this rank's clock).
        min_timed_s: seconds the windows should cover together (``measure.min_timed_s``).
        rank: this process's rank; rank 0 decides.
        world_size: DDP ranks.
        device: this rank's device (NCCL broadcasts device tensors only; once per trial).
    """
    per_window = 0
    if rank == 0 and budget_timed_s < min_timed_s:
        windows = len(budget.window_throughputs_sps)
        per_window = math.ceil(min_timed_s / windows / max(budget.step_time_s, 1e-9))
        per_window = max(1, min(per_window, _MAX_EXTENSION_STEPS // windows))
    if world_size > 1:
        decided = torch.tensor([per_window], dtype=torch.int64, device=device)
        dist.broadcast(decided, src=0)
        per_window = int(decided.item())
    return per_window


def _extend_timing(
    train_step: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    batches: Iterator[tuple[torch.Tensor, torch.Tensor]],
    clock: WindowClock,
    windows: int,
    per_window: int,
    samples_per_step: int,
    cpu_meter: CpuShareMeter,
    gpu_meter: GpuWindowMeter | None = None,
) -> tuple[ThroughputStats, int, GpuWindowReading | None]:
    """Time more steps when the budget's windows cover less than ``measure.min_timed_s``.

    A small budget (digits: ~0.4 s of timed steps on a CPU) leaves throughput at the mercy
    of a few milliseconds of scheduling noise: one configuration measured in fresh processes
    then spans tens of percent. As ``torch.utils.benchmark``'s ``blocked_autorange`` grows
    its blocks until a minimum run time, this runs the same number of windows again, each
    long enough that together they cover ``min_timed_s`` (``per_window`` steps, sized from the
    budget's median step time by :func:`_extension_window_steps`, which every DDP rank agrees
    on), after one untimed step. It runs after the evaluation, so the accuracy is the
    budget's; the windows replace the budget's in the throughput and step-time figures.

    Args:
        train_step: one optimizer step on a batch already on the device.
        batches: endless ``(x, y)`` batches on the device (x: (B, C, H, W), y: (B,)).
        clock: reads the clock after synchronizing the device (at window edges only).
        windows: timed windows (as many as the budget's).
        per_window: steps per window (the same on every rank).
        samples_per_step: global samples per step.
        cpu_meter: the other processes' CPU share, measured again over the new windows.
        gpu_meter: NVML's power and utilization (CUDA, rank 0), metered again over the new
            windows, since they give the throughput (None: no GPU meter).

    Returns:
        ``(statistics of the new windows, timing-only steps taken, the GPU meter's reading
        over the new windows or None)``; the windows hold all steps but the first, untimed
        one.
    """
    plan = WindowPlan(
        total_steps=1 + per_window * windows,
        warmup_steps=1,
        window_steps=per_window,
        windows=windows,
    )
    edges = frozenset(plan.window_edges)
    marks_s: dict[int, float] = {}
    reading: GpuWindowReading | None = None
    for step in range(1, plan.total_steps + 1):
        train_step(*next(batches))
        if step in edges:
            if step == plan.warmup_steps:
                cpu_meter.start()
                if gpu_meter is not None:
                    clock.mark()  # the GPU's queue drained before NVML's first readings
                    gpu_meter.start()
            marks_s[step] = clock.mark()
    cpu_meter.stop()
    if gpu_meter is not None:
        reading = gpu_meter.stop()
    return plan.summarize(marks_s, samples_per_step), plan.total_steps, reading
