"""The measurement a trial returns, and its flat form for Optuna's trial user attributes."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from autotune.trial.measure._load import MachineLoad, is_busy
from autotune.trial.measure._windows import ThroughputStats

__all__ = ["Measurement"]


@dataclass(frozen=True)
class Measurement:
    """Everything one trial measured. Units are in the names; ``simulated`` marks the mock.

    Attributes:
        throughput_sps: global training samples/s, median of timed windows, input pipeline in.
        throughput_iqr_sps: IQR of the window throughputs.
        step_time_s: median over the timed windows of seconds per optimizer step (a window's
            seconds over its steps).
        step_time_p90_s: 90th percentile over the timed windows of seconds per step.
        compile_s: seconds torch.compile added before the first timed step: the first step's
            seconds minus ``step_time_s`` (0 without compile).
        peak_memory_bytes: CUDA: allocator peak over the steps after the warm-up plus the
            CUDA graphs' private pools (``extra``'s ``cuda_graph_pool_bytes``; their replays
            allocate nothing) plus the memory the rank's process holds outside the allocator
            (its CUDA context, NCCL's buffers: NVML's figure less the allocator's reserved
            bytes, ``extra``'s ``gpu_context_bytes``), of the busiest GPU (``memory_kind``
            ``cuda_peak_plus_context``; ``cuda_allocator_peak`` where NVML gave no figure,
            ``extra``'s ``process_memory_error`` says why); the warm-up's allocator peak,
            with its trial workspaces, is ``extra``'s ``warmup_peak_memory_bytes``. CPU: peak
            RSS growth of the training processes since the trial began, summed over ranks;
            mock: the cost model's estimate.
        val_metric: top-1 accuracy on the held-out validation split, in [0, 1].
        train_loss: mean training loss over the last epoch.
        train_s: wall seconds of the whole training loop, compile and warm-up included.
        steps: optimizer steps taken.
        timed_steps: steps inside the timed windows.
        samples_per_step: global batch (per-rank batch times world size).
        parameters: trainable parameters of the model.
        memory_kind: what ``peak_memory_bytes`` is (``cuda_peak_plus_context``,
            ``cuda_allocator_peak``, ``cpu_peak_rss_growth``, ``simulated``).
        simulated: True when the mock device produced this (no real training happened).
        window_throughputs_sps: each timed window's samples/s.
        time_to_accuracy_s: time-to-accuracy trials only (``objective=time_to_accuracy``):
            wall seconds from the first training step to the end of the first evaluation
            that met the target, compilation and evaluations included; None when the target
            was not reached or in a throughput trial.
        target_reached: time-to-accuracy trials: whether the validation metric met the
            target; None in a throughput trial.
        eval_s: time-to-accuracy trials: wall seconds spent evaluating (inside
            ``time_to_accuracy_s``); None otherwise.
        metric_curve: time-to-accuracy trials: one ``(wall_s, step, metric)`` per
            evaluation, in order (wall seconds since the first step); empty otherwise.
        val_samples: how many validation samples ``val_metric`` was computed on (the
            validation split's size); None when the split has no length. The verification's
            accuracy screen widens with its standard error (:mod:`autotune.study.verification`).
        too_slow: throughput trials: the steps judged ran below the trial's
            ``min_throughput_sps`` floor (:class:`~autotune.trial.measure.ThroughputFloor`:
            the first two timed windows, or two stretches of steady steps before them), so
            the trial stopped there, without evaluating: the timing figures are those
            steps', ``val_metric`` and ``train_loss`` are NaN (nothing was judged). The study records it as ``failure=too_slow``.
        other_cpu_share: the share of the trial's CPUs (its affinity) that other processes
            used over the timed windows, in [0, 1] (:class:`CpuShareMeter`; a throughput
            trial's windows that count, a time-to-accuracy trial's whole run); None when not
            measured (the mock device, a simulation, measures no machine).
        load_avg_1m: the machine's 1-minute load average at the end of the timed windows
            (``os.getloadavg``); None when not measured.
        extra: more per-trial figures (e.g. NVML readings, ``lr_peak``: the learning rate
            after warm-up; CUDA: ``process_memory_bytes``, NVML's memory of the trial's
            processes summed over ranks, ``process_memory_max_bytes``, the most one rank
            held, ``process_memory_method``, how NVML gave it: the process's own entry, or
            the GPU's used memory less its reading before the rank's first CUDA call;
            compiled trials: ``compile_cache``, ``cold`` / ``warm`` / ``partly warm``, with
            ``compile_cache_hits`` and ``compile_cache_misses``), stored as user attributes too.
    """

    throughput_sps: float
    throughput_iqr_sps: float
    step_time_s: float
    step_time_p90_s: float
    compile_s: float
    peak_memory_bytes: int
    val_metric: float
    train_loss: float
    train_s: float
    steps: int
    timed_steps: int
    samples_per_step: int
    parameters: int
    memory_kind: str
    simulated: bool
    window_throughputs_sps: tuple[float, ...] = ()
    time_to_accuracy_s: float | None = None
    target_reached: bool | None = None
    eval_s: float | None = None
    metric_curve: tuple[tuple[float, int, float], ...] = ()
    val_samples: int | None = None
    too_slow: bool = False
    other_cpu_share: float | None = None
    load_avg_1m: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_stats(cls, stats: ThroughputStats, **figures: Any) -> Measurement:
        """A measurement whose timing figures come from ``stats``; ``figures`` gives the rest."""
        return cls(
            throughput_sps=stats.throughput_sps,
            throughput_iqr_sps=stats.throughput_iqr_sps,
            step_time_s=stats.step_time_s,
            step_time_p90_s=stats.step_time_p90_s,
            timed_steps=stats.timed_steps,
            window_throughputs_sps=stats.window_throughputs_sps,
            **figures,
        )

    def with_load(self, load: MachineLoad | None) -> Measurement:
        """This measurement with ``load``'s figures (unchanged for None: not measured)."""
        if load is None:
            return self
        return replace(self, other_cpu_share=load.other_cpu_share, load_avg_1m=load.load_avg_1m)

    @property
    def budget_steps(self) -> int | None:
        """Where a run stopped at a share of the budget (short evidence): the budget's
        optimizer steps, of which it trained :attr:`steps` (``extra["budget_steps"]``, written
        by the training loop); None for a run that trained the budget or was only timed."""
        value = self.extra.get("budget_steps")
        return (
            value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
        )

    def busy(self, max_other_cpu_share: float) -> bool:
        """Measured on a busy machine (:func:`is_busy`)."""
        return is_busy(self.other_cpu_share, max_other_cpu_share)

    def as_user_attrs(self) -> dict[str, Any]:
        """Flat JSON-ready figures for Optuna trial user attributes: the machine's load only
        when measured; a measurement that stopped :attr:`too_slow` leaves out the figures it
        has not measured (``val_metric``, ``train_loss``, ``val_samples``) and the flag itself
        (the study records ``failure=too_slow``)."""
        attrs = asdict(self)
        for key in ("other_cpu_share", "load_avg_1m"):
            if attrs[key] is None:
                del attrs[key]
        if attrs.pop("too_slow"):
            for key in ("val_metric", "train_loss", "val_samples"):
                attrs.pop(key)
        attrs["window_throughputs_sps"] = list(self.window_throughputs_sps)
        curve = attrs.pop("metric_curve")
        if self.target_reached is None:  # a throughput trial: no time-to-accuracy figures
            for key in ("time_to_accuracy_s", "target_reached", "eval_s"):
                attrs.pop(key)
        else:
            attrs["metric_curve"] = [list(point) for point in curve]
        attrs.update(attrs.pop("extra"))
        return attrs
