"""The time-to-accuracy objective's loop (``objective=time_to_accuracy``): train until the
validation metric meets the target, in the trial's child process.

As MLPerf Training scores a run (Mattson et al., "MLPerf Training Benchmark", MLSys 2020,
section 3: the clock runs from the start of training to reaching the quality target,
evaluations included), the clock starts before the first optimizer step, once the data,
model and optimizer exist, and stops at the end of the first evaluation whose metric meets
the target; compilation (the first step's excess over a later step) is inside it and also
reported apart as ``compile_s``. The learning-rate schedule spans the budget
(``train.epochs``), so a trial stops at the first of: the target met, the end of the
schedule, ``train.max_time_s``. A trial that stops without the target has no time to
accuracy (``target_reached=False``); the study marks it infeasible.

Evaluations happen every ``train.eval_every_steps`` steps, every ``train.eval_every_s``
seconds of training, or else at the end of every epoch, and always at the end of the
schedule. Each one synchronizes the device; between them the clock is read without waiting
for the device (host time, to decide when ``eval_every_s`` or ``max_time_s`` has passed).
Under DDP the ranks agree on each evaluation and on stopping (rank 0 evaluates and
broadcasts the metric; a time-based decision is all-reduced every step, on the host: see
:class:`HostAgreement`).
"""

from __future__ import annotations

import time
from dataclasses import replace

import torch
import torch.distributed as dist

from autotune.core.flops import count_parameters
from autotune.trial.measure import Measurement, WindowClock, summarize_windows
from autotune.trial.training._meter import HostAgreement
from autotune.trial.training._setup import Training
from autotune.trial.training._throughput import train_for_throughput


def _met(metric: float, target: float, maximize: bool) -> bool:
    return metric >= target if maximize else metric <= target


def _broadcast_metric(metric: float, world_size: int, device: torch.device) -> float:
    if world_size == 1:
        return metric
    tensor = torch.tensor([metric], dtype=torch.float64, device=device)
    dist.broadcast(tensor, src=0)
    return float(tensor.item())


def train_to_target(t: Training, rank: int, world_size: int, maximize: bool) -> Measurement:
    """Train until the validation metric meets ``train.target`` (see the module docstring).

    Args:
        t: the prepared training (``t.config.objective == "time_to_accuracy"``).
        rank: this process's rank; rank 0 evaluates.
        world_size: DDP ranks.
        maximize: the workload's metric is better higher (accuracy), else lower (a loss).

    Returns:
        A measurement whose ``time_to_accuracy_s`` (None when not reached),
        ``target_reached``, ``eval_s`` and ``metric_curve`` hold the run to the target;
        ``val_metric`` is the last evaluation's; ``train_s`` the whole loop, evaluations
        included; throughput and step time come from the stretches between evaluations
        (the first step, which holds any compilation, left out).

    Raises:
        ValueError: the configuration has no target.
    """
    backend, settings = t.backend, t.config.train
    target = settings.target
    if target is None:
        raise ValueError("objective=time_to_accuracy needs train.target_accuracy or target_metric")
    if t.config.reuse is not None:
        return _reused_to_target(t, rank, world_size, target)
    steps_per_epoch = len(t.loader)
    time_based = settings.eval_every_s is not None or settings.max_time_s is not None
    agreement = HostAgreement(world_size if time_based else 1, backend.ddp_backend)
    clock = WindowClock(backend.synchronize)
    cpu_meter = t.cpu_meter(rank)  # other processes' CPU share over the whole run
    cpu_meter.start()
    start_s = clock.mark()
    host_start_s = last_eval_host_s = time.perf_counter()
    first_step_s = 0.0
    segment_start_s, segment_start_step = start_s, 0
    segments_s: list[float] = []
    segment_steps: list[int] = []
    curve: list[tuple[float, int, float]] = []
    eval_s = 0.0
    metric = float("nan")
    reached_s: float | None = None
    step = 0
    epoch_loss = torch.zeros((), device=t.device)
    epoch_steps = 0
    current_epoch = 0
    for epoch, x, y in t.batches():
        if epoch != current_epoch:
            current_epoch, epoch_steps = epoch, 0
            epoch_loss.zero_()
        loss = t.train_step(x, y)
        epoch_loss += loss.detach().float()
        epoch_steps += 1
        step += 1
        if step == 1:  # the first step holds the compilation: timed apart
            segment_start_s = clock.mark()
            segment_start_step = 1
            first_step_s = segment_start_s - start_s
        if settings.eval_every_steps is not None:
            due = step % settings.eval_every_steps == 0
        elif settings.eval_every_s is not None:
            due = time.perf_counter() - last_eval_host_s >= settings.eval_every_s
        else:
            due = step % steps_per_epoch == 0
        out_of_time = (
            settings.max_time_s is not None
            and time.perf_counter() - host_start_s >= settings.max_time_s
        )
        if time_based:
            due, out_of_time = agreement.any([due, out_of_time])
        end_of_schedule = step >= t.total_steps
        if not (due or end_of_schedule or out_of_time):
            continue
        before_eval_s = clock.mark()
        if step > segment_start_step:
            segments_s.append(before_eval_s - segment_start_s)
            segment_steps.append(step - segment_start_step)
        evaluated = t.evaluate() if rank == 0 or t.sharded else 0.0  # sharded: collective
        metric = _broadcast_metric(evaluated, world_size, t.device)
        t.model.train()
        after_eval_s = clock.mark()
        eval_s += after_eval_s - before_eval_s
        curve.append((after_eval_s - start_s, step, metric))
        last_eval_host_s = time.perf_counter()
        segment_start_s, segment_start_step = after_eval_s, step
        if _met(metric, target, maximize):
            reached_s = after_eval_s - start_s
            break
        if end_of_schedule or out_of_time:
            break
    train_s = clock.mark() - start_s
    cpu_meter.stop()
    peak_memory = backend.peak_memory_bytes()
    if not segments_s:  # stopped after the first step: that step is the only window
        segments_s, segment_steps = [first_step_s], [1]
    stats = summarize_windows(segments_s, segment_steps, t.samples_per_step)
    compile_s = max(0.0, first_step_s - stats.step_time_s) if t.compiled else 0.0
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
        time_to_accuracy_s=reached_s,
        target_reached=reached_s is not None,
        eval_s=eval_s,
        metric_curve=tuple(curve),
        extra={"lr_peak": t.peak_lr, "target": target} if rank == 0 else {},
    ).with_load(cpu_meter.load)


def _reused_to_target(t: Training, rank: int, world_size: int, target: float) -> Measurement:
    """A time-to-accuracy trial that reuses the steps to the target of a trial with the same
    math key (``t.config.reuse``): the warm-up and timed windows of a reused throughput run
    (:func:`~autotune.trial.training._throughput.train_for_throughput`), then one timed evaluation,
    and the time to accuracy on this configuration's own clock:

        ``compile_s + reuse.steps * step_time_s + reuse.evaluations * one evaluation's s``

    (the first step's compilation, the source's steps at this trial's median step time, the
    source's evaluations at this trial's evaluation time). Past ``train.max_time_s`` the
    target counts as missed, as a full run would have stopped there. ``metric_curve`` holds
    the one point at the target; ``train_s`` is the seconds this run really took.
    """
    reuse = t.config.reuse
    assert reuse is not None
    measured = train_for_throughput(t, rank, world_size)
    clock = WindowClock(t.backend.synchronize)
    before_s = clock.mark()
    if rank == 0 or t.sharded:
        t.evaluate()  # timed only: the reused metric is the source's
    one_eval_s = clock.mark() - before_s
    eval_s = reuse.evaluations * one_eval_s
    estimate_s = measured.compile_s + reuse.steps * measured.step_time_s + eval_s
    max_time_s = t.config.train.max_time_s
    reached = max_time_s is None or estimate_s <= max_time_s
    return replace(
        measured,
        train_s=measured.train_s + one_eval_s,
        time_to_accuracy_s=estimate_s if reached else None,
        target_reached=reached,
        eval_s=eval_s,
        metric_curve=((estimate_s, reuse.steps, reuse.val_metric),) if reached else (),
        extra={**measured.extra, "target": target} if rank == 0 else {},
    )
