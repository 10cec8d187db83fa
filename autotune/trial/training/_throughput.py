"""The workload door's fixed budget (:func:`train_for_throughput`), in the trial's child
process: autotune's own loop over the workload's model and data, timed by the measuring core
every door shares (:class:`~autotune.trial.training._meter.StepMeter`)."""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from autotune.core.config import TrialConfig
from autotune.core.flops import count_parameters, trial_extras
from autotune.core.goodput import NoiseScaleEma
from autotune.trial.measure import Measurement
from autotune.trial.training._meter import (
    StepMeter,
    budget_plan,
    extension_window_steps,
)
from autotune.trial.training._noise import probe_noise, probe_steps
from autotune.trial.training._setup import Training


def check_losses(losses: list[torch.Tensor], world_size: int) -> list[float]:
    """The paired check's record (:mod:`autotune.study.evidence`): the training loss of each of
    the first ``advanced.measure.check_steps`` optimizer steps, in float64, averaged over
    the ranks (an all-reduce when ``world_size`` > 1: every rank must call it); ``[]`` when
    the check is off. Read once, after the timed windows (one device sync)."""
    if not losses:
        return []
    stacked = torch.stack(losses)  # (K,)
    if world_size > 1 and dist.is_available() and dist.is_initialized():
        dist.all_reduce(stacked)
        stacked = stacked / world_size
    return [float(v) for v in stacked.tolist()]


def reuse_free(config: TrialConfig) -> bool:
    """The run trains its own budget: it reuses no other trial's metric and is no float64
    twin (the runs whose gradient noise scale is probed)."""
    return config.reuse is None and config.twin == "none"


def train_for_throughput(t: Training, rank: int, world_size: int) -> Measurement:
    """The fixed budget (``train.epochs`` passes, capped by ``train.max_steps``): timed
    windows, then one evaluation of the budget's model, then timing-only steps when the
    windows covered less than ``advanced.measure.min_timed_s``. With ``config.min_throughput_sps``
    set (the study's floor, ``advanced.trial.min_throughput_vs_baseline`` of the baseline's), a
    warm-up or first two windows below it end the loop there
    (:class:`~autotune.trial.measure.ThroughputFloor`): a :attr:`Measurement.too_slow`
    measurement of the steps it timed, without evaluation. With ``config.reuse`` set (a
    measured trial with the same math key), the loop runs the warm-up and one epoch of timed
    windows only, does not evaluate, and reports the reused metric and training loss.

    Timing: the device is synchronized and the clock read only at the edges of the timed
    windows (:func:`autotune.trial.measure.plan_windows`), never inside one, so the host queues
    kernels ahead of the device as in an untimed loop; each window includes fetching its
    batches from the DataLoader.
    """
    config, backend = t.config, t.backend
    plan = budget_plan(config, backend.kind, t.total_steps, len(t.loader))
    meter = StepMeter(
        plan,
        backend,
        t.samples_per_step,
        rank=rank,
        world_size=world_size,
        cpu_meter=t.cpu_meter(rank),  # other processes' CPU share, first window edge to last
        floor_sps=config.min_throughput_sps,
    )
    epoch_loss = torch.zeros((), device=t.device)
    epoch_steps = 0
    check_steps = config.measure.check_steps
    check: list[torch.Tensor] = []  # the first check_steps losses, read after the loop
    # The gradient noise scale (autotune.core.goodput), probed off the clock on a few steps of a
    # trained single-process run without a throughput floor: the study's baseline (every
    # other trial of a study has a floor) and runs outside a study; not under DDP or FSDP,
    # not a reused or twin run.
    noise = NoiseScaleEma()
    probing = (
        world_size == 1
        and reuse_free(config)
        and not t.sharded
        and config.min_throughput_sps is None
    )
    probes = probe_steps(plan.total_steps) if probing else frozenset()
    meter.start()
    batches = t.batches()
    current_epoch = 0
    for epoch, x, y in batches:
        if epoch != current_epoch:
            current_epoch = epoch
            epoch_loss.zero_()
            epoch_steps = 0
        if meter.step in probes:
            meter.pause()
            probe_noise(t, x, y, noise)
            meter.resume()
        loss = t.train_step(x, y)
        if len(check) < check_steps:
            check.append(loss.detach().double())
        epoch_loss += loss.detach().float()
        epoch_steps += 1
        verdict = meter.after_step()
        if verdict == "too_slow":
            return meter.too_slow_measurement(count_parameters(t.model))
        if verdict == "done":
            break
    timing = meter.budget()

    # The budget's accuracy, before any timing-only step changes the weights; or the metric
    # of the trial with the same math key (config.reuse), which trained the budget.
    reuse = config.reuse
    if reuse is not None:
        metric = reuse.val_metric
    elif config.twin != "none":  # the check's floor only: its metric is never read
        metric = math.nan
    elif rank == 0 or t.sharded:  # a sharded model's forward passes are collective
        metric = t.evaluate()
    else:
        metric = 0.0
    stats = timing.stats
    gpu_reading = timing.gpu_reading
    extension_steps = 0
    metered_samples = plan.timed_steps * t.samples_per_step
    per_window = extension_window_steps(
        stats,
        timing.timed_s,
        config.measure.min_timed_s_on(backend.kind),
        rank,
        world_size,
        t.device,
    )
    if per_window > 0:
        t.model.train()
        stats, extension_steps, extension_reading = meter.extend(
            t.train_step,
            ((bx, by) for _, bx, by in batches),
            windows=len(stats.window_throughputs_sps),
            per_window=per_window,
        )
        if meter.gpu_meter is not None:
            # The throughput now comes from the extension's windows: so do the GPU's power,
            # utilization and energy per sample, metered over the same windows.
            gpu_reading = extension_reading
            metered_samples = (extension_steps - 1) * t.samples_per_step
    # FLOPs of one more step on the last batch (x, y), after the timed steps and the memory
    # reading; the model's buffers are restored (autotune.core.flops.count_training_flops).
    extra = (
        trial_extras(
            t.model,
            x[: config.batch_size],  # one micro-batch: the FLOPs per sample are the same
            y[: config.batch_size],
            loss_fn=t.workload.loss,
            precision=config.precision,
            autocast_dtype=t.autocast_dtype,
            gpu_reading=gpu_reading,
            metered_samples=metered_samples,
        )
        if rank == 0 or t.sharded  # every rank runs a sharded model's counted step
        else {}
    )
    if rank != 0:
        extra = {}
    losses = check_losses(check, world_size)  # collective: every rank takes part
    if rank == 0:
        if losses:
            extra["check_losses"] = losses
        extra["lr_peak"] = t.peak_lr
        if config.train.evidence_share is not None and reuse is None:  # evaluated at a share
            extra["budget_steps"] = t.total_steps
        if t.accumulation_steps > 1:
            extra["accumulation_steps"] = t.accumulation_steps
        extra["timing_extension_steps"] = extension_steps
        if noise.updates:
            extra["gradient_noise_probes"] = noise.updates
            extra["gradient_noise_scale"] = noise.noise_scale_samples  # samples; None: unresolved
        extra.update(meter.common_extra(timing))
    return meter.measurement(
        timing,
        val_metric=metric,
        train_loss=(
            reuse.train_loss
            if reuse is not None
            else float(epoch_loss.item() / max(1, epoch_steps))
        ),
        parameters=count_parameters(t.model),
        val_samples=t.val_samples,
        extra=extra,
        stats=stats,
    )
