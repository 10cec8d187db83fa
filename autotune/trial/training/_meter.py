"""The one measuring core behind every door (workload, loop, Hugging Face Trainer, Lightning):
:class:`StepMeter` times a fixed budget of optimizer steps, told of each step by the door's
loop, wherever that loop lives (autotune's own, the user's function, a Trainer's callback).

Timing: the device is synchronized and the clock read only at the edges of the timed windows
(:func:`autotune.trial.measure.plan_windows`), never inside one, so the host queues kernels ahead of
the device as in an untimed loop; each window includes fetching its batches. After the
warm-up the peak-memory window restarts, and the meters of the other processes' CPU share
and of the GPU's power and utilization run over the windows. With a throughput floor
(``config.min_throughput_sps``) a trial far below it stops after its compile steps and two
stretches of about 2 s of steady steps, each below the floor, or at the end of its second
window when both ran below it (:class:`~autotune.trial.measure.ThroughputFloor`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.distributed as dist

from autotune.core.config import TrialConfig
from autotune.core.nvml import GpuWindowMeter, GpuWindowReading
from autotune.trial.devices import Backend
from autotune.trial.measure import (
    CpuShareMeter,
    MachineLoad,
    Measurement,
    ThroughputFloor,
    ThroughputStats,
    WindowClock,
    WindowPlan,
    graph_recording_steps,
    plan_reused_windows,
    plan_windows,
    reused_timing_steps,
    summarize_windows,
)

__all__ = [
    "BudgetTiming",
    "StepMeter",
    "StepVerdict",
    "budget_plan",
    "extend_timing",
    "extension_window_steps",
]

#: What a door's loop does after a step: train on, stop because the trial runs below its
#: throughput floor, or stop because the planned steps are done.
StepVerdict = Literal["train", "too_slow", "done"]

#: Most timing-only steps a trial takes to reach ``advanced.measure.min_timed_s`` (a bound, not a target).
_MAX_EXTENSION_STEPS = 100_000


def budget_plan(
    config: TrialConfig, device_kind: str, total_steps: int, steps_per_epoch: int
) -> WindowPlan:
    """The warm-up and windows of a trial's budget: over the whole budget (or its first
    ``train.evidence_share``, :meth:`~autotune.core.config.TrainSettings.evidence_steps`), or,
    for a trial that reuses another's metric (``config.reuse``), over one epoch after the
    warm-up (:func:`autotune.trial.measure.plan_reused_windows`).

    Args:
        config: the trial.
        device_kind: ``cpu`` or ``cuda``.
        total_steps: optimizer steps of the budget (``train.epochs`` passes, capped by
            ``train.max_steps``).
        steps_per_epoch: optimizer steps of one pass over the training split.
    """
    compiled = config.compile_mode != "none"
    compile_steps = graph_recording_steps(config, device_kind)
    settings, measure = config.train, config.measure
    if config.reuse is not None:
        return plan_reused_windows(
            total_steps,
            steps_per_epoch=steps_per_epoch,
            warmup_steps=settings.warmup_steps,
            windows=measure.windows,
            min_window_steps=measure.min_window_steps,
            compiled=compiled,
            compile_steps=compile_steps,
            timing_steps=reused_timing_steps(config),
        )
    # Short evidence (train.evidence_share): the budget's schedule, stopped at its share.
    return plan_windows(
        settings.evidence_steps(total_steps),
        warmup_steps=settings.warmup_steps,
        windows=measure.windows,
        min_window_steps=measure.min_window_steps,
        compiled=compiled,
        compile_steps=compile_steps,
    )


@dataclass(frozen=True)
class BudgetTiming:
    """What a :class:`StepMeter` measured over a budget that ran to its end.

    Attributes:
        stats: the timed windows' statistics (global samples/s).
        compile_s: seconds compilation (and CUDA graphs' recording) added to the first
            steps, beyond their time at the windows' pace; 0 without compile.
        train_s: wall seconds of the whole loop, warm-up included (one sync at its end).
        steps: optimizer steps taken.
        timed_s: seconds the windows covered together.
        peak_memory_bytes: the device's peak since the warm-up ended
            (:meth:`autotune.trial.devices.Backend.peak_memory_bytes`).
        warmup_peak_memory_bytes: the warm-up's peak, where the device keeps it apart.
        gpu_reading: NVML's power and utilization over the windows (CUDA, rank 0), or None.
        load: the other processes' CPU share over the windows, or None (not rank 0).
    """

    stats: ThroughputStats
    compile_s: float
    train_s: float
    steps: int
    timed_s: float
    peak_memory_bytes: int
    warmup_peak_memory_bytes: int | None
    gpu_reading: GpuWindowReading | None
    load: MachineLoad | None


class StepMeter:
    """One trial's measuring core, told of each optimizer step by the door's loop.

    The door calls :meth:`start` once the model, optimizer and data exist (just before the
    first step), then :meth:`after_step` after every optimizer step, and stops when it says
    so. Only :meth:`start` and :meth:`after_step` at a planned edge synchronize the device.

    Args:
        plan: the warm-up and windows (:func:`budget_plan`).
        backend: the trial's device.
        samples_per_step: global samples per optimizer step (all ranks, all micro-batches).
        rank: this process's rank (rank 0 meters the GPUs and decides on the floor).
        world_size: DDP ranks.
        cpu_meter: the other processes' CPU share (rank 0's; the other ranks' measures
            nothing).
        floor_sps: the throughput floor, global samples/s (``config.min_throughput_sps``);
            None: no floor. Under DDP every rank builds the meter at the same point (the
            floor's host agreement makes a gloo group on CUDA, a collective call).
        door_flops: the door counts FLOPs on a warm-up step (:attr:`flops_step`; the loop,
            HF and Lightning doors), whose time the floor's evidence leaves out: counting
            runs the step eagerly under ``FlopCounterMode``, many times slower than a
            compiled step. The workload door counts after its windows (False).
    """

    def __init__(
        self,
        plan: WindowPlan,
        backend: Backend,
        samples_per_step: int,
        *,
        rank: int,
        world_size: int,
        cpu_meter: CpuShareMeter,
        floor_sps: float | None = None,
        door_flops: bool = False,
    ) -> None:
        self.plan = plan
        self.samples_per_step = samples_per_step
        self.rank = rank
        self._backend = backend
        self._edges = frozenset(plan.edges)
        self._timed_end = plan.window_edges[-1]
        self._cpu_meter = cpu_meter
        # NVML power and utilization over the timed windows: rank 0 reads every rank's GPU.
        self.gpu_meter: GpuWindowMeter | None = backend.gpu_meter(world_size) if rank == 0 else None
        self._clock = WindowClock(backend.synchronize)
        self._floor = (
            ThroughputFloor(
                floor_sps,
                plan,
                samples_per_step,
                world_size,
                agreement=HostAgreement(world_size, backend.ddp_backend),
                rank=rank,
                excluded_step=self.flops_step if door_flops else None,
            )
            if floor_sps is not None
            else None
        )
        self.floor_sps = floor_sps
        #: Clock seconds by step count, read at the planned edges (and at a stop).
        self.marks_s: dict[int, float] = {}
        #: Optimizer steps taken so far.
        self.step = 0
        self._gpu_reading: GpuWindowReading | None = None
        self._warmup_peak_bytes: int | None = None
        # A too-slow stop's evidence: (steps per window, each window's seconds).
        self._slow: tuple[int, tuple[float, ...]] | None = None
        self._load: MachineLoad | None = None

    @property
    def floor(self) -> ThroughputFloor | None:
        """The throughput floor this meter judges the trial by (None without one)."""
        return self._floor

    @property
    def compiled(self) -> bool:
        """The first step(s) hold torch.compile's compilation."""
        return self.plan.compiled

    @property
    def flops_step(self) -> int | None:
        """The step a door whose model autotune does not build counts FLOPs on: the last
        warm-up step, when it holds neither compilation nor CUDA graphs' recording (counting
        runs the step under ``FlopCounterMode``, which the timed windows must not see); None
        when there is no such step, or on ranks other than 0."""
        step = self.plan.warmup_steps
        first_free = self.plan.compile_steps + 1 if self.compiled else 1
        return step if self.rank == 0 and step >= first_free else None

    def start(self) -> None:
        """The loop begins: read the clock (after syncing), and start the meters when there
        is no warm-up."""
        if self.plan.warmup_steps == 0:
            self._start_meters()
        self.marks_s[0] = self._clock.mark()

    def pause(self) -> None:
        """The door's loop leaves its steps for code of the user's between two of them (a
        loop's per-epoch evaluation, :meth:`~autotune.trial.training.LoopTrial.epochs`): the clock
        stops, after a sync, until :meth:`resume`, so the windows time training alone."""
        self._clock.pause()

    def resume(self) -> None:
        """The steps go on: the clock runs again (after a sync)."""
        self._clock.resume()

    def _start_meters(self) -> None:
        """The timed windows open: sync, then the meters, then (the caller) the clock, so
        that the meters' set-up (NVML handles and first readings, /proc reads) falls outside
        window 1 and the meters see the whole of it."""
        self._cpu_meter.start()
        if self.gpu_meter is not None:
            self._backend.synchronize()  # the GPU's queue drained before NVML's first readings
            self.gpu_meter.start()

    def after_step(self) -> StepVerdict:
        """One more optimizer step has been queued: read the clock if this is a planned edge
        (and restart the peak-memory window at the warm-up's end), and decide.

        Returns:
            ``train``: take another step; ``too_slow``: stop, below the floor
            (:meth:`too_slow_measurement`); ``done``: the planned steps are taken
            (:meth:`budget`).
        """
        self.step += 1
        step = self.step
        floor = self._floor
        if floor is not None and floor.crossed_early(step):
            self.marks_s[step] = self._clock.mark()  # it cannot end above the floor: stop now
            if self.gpu_meter is not None:
                self.gpu_meter.stop()
            self._slow = floor.evidence()  # the steady steps it judged, their host seconds
            # A machine busy with other work can make a trial too slow: say so (the load over
            # the part of the first window that ran, none when it stopped in the warm-up).
            self._load = self._cpu_meter.stop()
            return "too_slow"
        if step in self._edges:
            if step == self.plan.warmup_steps and step > 0:
                self._warmup_peak_bytes = self._backend.restart_peak_memory()
                self._start_meters()  # before the first window's clock read
            self.marks_s[step] = self._clock.mark()  # syncs the device: the edge of a window
            if step == self._timed_end:  # the meters stop after the last window's clock read
                self._load = self._cpu_meter.stop()
                if self.gpu_meter is not None:
                    self._gpu_reading = self.gpu_meter.stop()
            if floor is not None and floor.below_at_edge(step, self.marks_s):
                if self.gpu_meter is not None and self._gpu_reading is None:
                    self.gpu_meter.stop()
                if step != self._timed_end:
                    self._load = self._cpu_meter.stop()
                self._slow = floor.evidence()  # the judged windows, each below the floor
                return "too_slow"
        return "done" if step >= self.plan.total_steps else "train"

    def budget(self) -> BudgetTiming:
        """The budget's figures, once :meth:`after_step` said ``done``; reads the device's
        peak memory (call it before anything else allocates).

        Raises:
            RuntimeError: the budget has not run to its end.
        """
        if self.step < self.plan.total_steps or self._slow is not None:
            raise RuntimeError(
                f"the budget's figures need its {self.plan.total_steps} steps; "
                f"{self.step} ran{' (stopped too slow)' if self._slow else ''}"
            )
        step = self.step
        stats = self.plan.summarize(self.marks_s, self.samples_per_step)
        # Compilation (and, in CUDA-graph modes, the graphs' recording at step 2) less the
        # steps' own time at the timed windows' pace.
        k = self.plan.compile_steps
        compile_s = (
            max(0.0, self.marks_s[k] - self.marks_s[0] - k * stats.step_time_s)
            if self.compiled
            else 0.0
        )
        return BudgetTiming(
            stats=stats,
            compile_s=compile_s,
            train_s=self.marks_s[step] - self.marks_s[0],
            steps=step,
            timed_s=sum(self.plan.window_times_s(self.marks_s)),
            peak_memory_bytes=self._backend.peak_memory_bytes(),
            warmup_peak_memory_bytes=self._warmup_peak_bytes,
            gpu_reading=self._gpu_reading,
            load=self._load,
        )

    def too_slow_measurement(self, parameters: int) -> Measurement:
        """The measurement of a trial stopped below its floor (``too_slow``): the windows it
        was judged on (:meth:`ThroughputFloor.evidence
        <autotune.trial.measure.ThroughputFloor.evidence>`), the memory so far, no evaluation
        (``val_metric`` NaN).

        Args:
            parameters: trainable parameters of the model.

        Raises:
            RuntimeError: the trial did not stop too slow.
        """
        if self._slow is None:
            raise RuntimeError("too_slow_measurement() after a trial that did not stop too slow")
        steps, seconds = self._slow
        end_step = max(self.marks_s)
        stats = summarize_windows(
            [max(s, 1e-9) for s in seconds], max(steps, 1), self.samples_per_step
        )
        compile_s = (
            max(0.0, self.marks_s[1] - self.marks_s[0] - stats.step_time_s)
            if self.compiled and 1 in self.marks_s
            else 0.0
        )
        return Measurement.from_stats(
            stats,
            compile_s=compile_s,
            peak_memory_bytes=self._backend.peak_memory_bytes(),
            val_metric=math.nan,
            train_loss=math.nan,
            train_s=self.marks_s[end_step] - self.marks_s[0],
            steps=end_step,
            samples_per_step=self.samples_per_step,
            parameters=parameters,
            memory_kind=self._backend.memory_kind,
            simulated=False,
            too_slow=True,
            extra={"min_throughput_sps": self.floor_sps},
        ).with_load(self._load)

    def measurement(
        self,
        timing: BudgetTiming,
        *,
        val_metric: float,
        train_loss: float,
        parameters: int,
        val_samples: int | None,
        extra: Mapping[str, Any],
        stats: ThroughputStats | None = None,
    ) -> Measurement:
        """The trial's measurement from its budget's timing and the door's figures.

        Args:
            timing: :meth:`budget`'s figures.
            val_metric: the validation metric of the budget's model (or the reused one).
            train_loss: the mean training loss over the last epoch (NaN where the door
                cannot see it).
            parameters: trainable parameters of the model.
            val_samples: validation samples the metric was computed on, or None.
            extra: the door's extra figures (rank 0's; empty on the others).
            stats: window statistics that replace the budget's (the timing extension's).
        """
        return Measurement.from_stats(
            stats or timing.stats,
            compile_s=timing.compile_s,
            peak_memory_bytes=timing.peak_memory_bytes,
            val_metric=val_metric,
            train_loss=train_loss,
            train_s=timing.train_s,
            steps=timing.steps,
            samples_per_step=self.samples_per_step,
            parameters=parameters,
            memory_kind=self._backend.memory_kind,
            simulated=False,
            val_samples=val_samples,
            extra=dict(extra),
        ).with_load(self._cpu_meter.load)

    def extend(
        self,
        train_step: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
        batches: Iterator[tuple[torch.Tensor, torch.Tensor]],
        *,
        windows: int,
        per_window: int,
    ) -> tuple[ThroughputStats, int, GpuWindowReading | None]:
        """The timing extension (:func:`extend_timing`) with this meter's clock, CPU-share
        meter and GPU meter."""
        return extend_timing(
            train_step,
            batches,
            WindowClock(self._backend.synchronize),
            windows,
            per_window,
            self.samples_per_step,
            self._cpu_meter,
            self.gpu_meter,
        )

    def common_extra(self, timing: BudgetTiming) -> dict[str, Any]:
        """The figures every door adds on rank 0: the warm-up's peak where the device keeps
        it apart, and why the GPU figures are missing where NVML failed."""
        extra: dict[str, Any] = {}
        if timing.warmup_peak_memory_bytes is not None:
            extra["warmup_peak_memory_bytes"] = timing.warmup_peak_memory_bytes
        if self.gpu_meter is not None and self.gpu_meter.error is not None:
            extra["gpu_telemetry_error"] = self.gpu_meter.error  # the GPU figures are missing: why
        return extra


class HostAgreement:
    """The ranks' agreement on time-based decisions (a time-to-accuracy run's evaluate now and
    out of time, a throughput run's too slow), made on the host so that it never waits for the
    device.

    A time-based decision reads each rank's host clock, so ranks must agree on it every step
    (a rank that evaluated or stopped alone would leave the others in a collective that never
    completes). Made with the DDP group on CUDA, that is an NCCL all-reduce of a device
    tensor and a ``.tolist()`` that copies it back: the host waits for every kernel queued
    before it, once per step, and can no longer run ahead of the device (what the timed loop
    is careful to allow). So the flags travel through a gloo group of the same ranks
    (``dist.new_group(backend="gloo")``, PyTorch docs "Distributed communication package -
    torch.distributed": gloo runs collectives on CPU tensors; NCCL on CUDA tensors only), as
    CPU tensors: a host round trip of a few tens of microseconds, no device sync. With gloo
    as the DDP backend already (the CPU), its default group serves.

    Every rank must construct it at the same point (``new_group`` is itself collective).

    Args:
        world_size: DDP ranks (1: no collective at all).
        ddp_backend: the trial's torch.distributed backend (``gloo`` or ``nccl``).
    """

    def __init__(self, world_size: int, ddp_backend: str) -> None:
        self._world_size = world_size
        self.group: Any = None  # None: the default (DDP) group
        if world_size > 1 and ddp_backend != "gloo":
            self.group = dist.new_group(backend="gloo")

    def any(self, flags: list[bool]) -> list[bool]:
        """Any rank's flag set -> set on every rank (one host all-reduce; none without DDP)."""
        if self._world_size == 1:
            return flags
        tensor = torch.tensor([float(f) for f in flags])  # (len(flags),) on the CPU
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX, group=self.group)
        return [bool(v) for v in tensor.tolist()]


def extension_window_steps(
    budget: ThroughputStats,
    budget_timed_s: float,
    min_timed_s: float,
    rank: int,
    world_size: int,
    device: torch.device,
) -> int:
    """Steps per window of the timing-only extension (:func:`extend_timing`); 0: none.

    The windows are sized from the budget's median step time so that together they cover
    ``min_timed_s``. Under DDP rank 0 decides, from its own clock, and broadcasts the decision
    and the step count in one collective: every rank then runs the same extension, or none.
    Ranks deciding each from its own clock could disagree near ``min_timed_s`` and call
    different collectives, which hangs the trial until its timeout: torch.distributed requires
    every rank of a group to call the same collectives in the same order (PyTorch docs,
    "Distributed communication package - torch.distributed", Collective functions).

    Args:
        budget: the budget's window statistics (this rank's).
        budget_timed_s: seconds the budget's windows covered (this rank's clock).
        min_timed_s: seconds the windows should cover together (``advanced.measure.min_timed_s``).
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


def extend_timing(
    train_step: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    batches: Iterator[tuple[torch.Tensor, torch.Tensor]],
    clock: WindowClock,
    windows: int,
    per_window: int,
    samples_per_step: int,
    cpu_meter: CpuShareMeter,
    gpu_meter: GpuWindowMeter | None = None,
) -> tuple[ThroughputStats, int, GpuWindowReading | None]:
    """Time more steps when the budget's windows cover less than ``advanced.measure.min_timed_s``.

    A small budget (digits: ~0.4 s of timed steps on a CPU) leaves throughput at the mercy
    of a few milliseconds of scheduling noise: one configuration measured in fresh processes
    then spans tens of percent. As ``torch.utils.benchmark``'s ``blocked_autorange`` grows
    its blocks until a minimum run time, this runs the same number of windows again, each
    long enough that together they cover ``min_timed_s`` (``per_window`` steps, sized from the
    budget's median step time by :func:`extension_window_steps`, which every DDP rank agrees
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
