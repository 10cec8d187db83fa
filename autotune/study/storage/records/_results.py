"""The records of a study and of its finished trials, as the results store hands them back."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import BigInteger, String
from sqlalchemy.types import TypeEngine

from autotune.core.config import TrialConfig
from autotune.study.storage.records._hardware import HardwareFingerprint

__all__ = ["COLUMN_ATTR", "MeasuredRun", "StudyRecord", "TrialRecord", "column"]

#: The key of a record field's dataclass metadata holding its column's SQL type, where the
#: field's Python type does not decide it (a short text's length, a 64-bit count):
#: :func:`autotune.study.storage.models.record_columns` reads it.
COLUMN_ATTR = "column_type"


def column(sql_type: TypeEngine[Any] | type[TypeEngine[Any]], **field_args: Any) -> Any:
    """A record field whose column has the SQL type ``sql_type`` (e.g. ``String(32)``,
    ``BigInteger``); ``field_args`` are :func:`dataclasses.field`'s (``default=``).

    A field without it gets its column's type from its Python type: float ``Float``, int
    ``Integer`` (``BigInteger`` for a name ending in ``_bytes``), bool ``Boolean``, str
    ``Text``, datetime ``DateTime``; ``... | None`` is a nullable column.
    """
    return dataclasses.field(metadata={COLUMN_ATTR: sql_type}, **field_args)


@dataclass(frozen=True)
class StudyRecord:
    """Our record of one Optuna study (linked by its study name).

    Attributes:
        study_name: the Optuna study name.
        space_name: the search space's ``name``.
        space_source: the file the space came from.
        device_kind: ``cpu``, ``cuda`` or ``mock``.
        simulated: True when the study ran on the mock device.
        sampler: ``nsga2``, ``tpe``, ``gp`` or ``random``.
        seed: the sampler seed of the first run.
        metric_name: the workload's validation metric (``accuracy``, ``val_loss``, ...).
        metric_direction: ``maximize`` or ``minimize``: the metric's better direction.
        objective: ``throughput`` (the default) or ``time_to_accuracy``
            (:mod:`autotune.study.objectives`).
        target: the quality target of a ``time_to_accuracy`` study (a value of
            ``metric_name``, e.g. 0.98 top-1 accuracy); None in a throughput study.
        created_at: when the record was written (UTC).
        hardware: the fingerprint of the machine that opened the study first.
    """

    study_name: str
    space_name: str
    space_source: str
    device_kind: str
    simulated: bool
    sampler: str
    seed: int
    created_at: dt.datetime | None
    hardware: HardwareFingerprint | None
    metric_name: str = "accuracy"
    metric_direction: str = "maximize"
    objective: str = "throughput"
    target: float | None = None


@dataclass(frozen=True, kw_only=True)
class MeasuredRun:
    """The figures of one measured run, declared once for both records of runs: a study's
    trial (:class:`TrialRecord`) and a verification's re-run
    (:class:`~autotune.study.storage.records.VerificationRecord`); their tables share these
    columns (:class:`~autotune.study.storage.models.MeasuredRunColumns`). Keyword-only.

    Attributes:
        simulated: produced by the mock device (no figure is a measurement).
        failure: ``oom``, ``error``, ``crash``, ``timeout``, ``infeasible`` (a trial never
            launched) or None when measured.
        failure_detail: the end of the error output, or the broken rule.
        throughput_sps: global training samples/s (median of timed windows).
        throughput_iqr_sps: interquartile range of the window throughputs (samples/s).
        step_time_s: median seconds per optimizer step.
        compile_s: seconds torch.compile added before the first timed step (0 eager); None
            when unknown.
        peak_memory_bytes: peak memory (a trial's ``memory_kind`` says which).
        val_metric: the workload's validation metric (top-1 accuracy in [0, 1] for the
            built-ins; see the study's ``metric_name``).
        train_s: wall seconds of the training loop.
        time_to_accuracy_s: time-to-accuracy studies: wall seconds from the first training step
            to the end of the first evaluation that met the target (compilation and
            evaluations included); None when missed and in throughput studies.
        target_reached: time-to-accuracy studies: whether the target was met; None in
            throughput studies and for a run that produced no measurement.
        metric_curve_json: time-to-accuracy studies: the evaluations as a JSON list of
            ``[wall_s, step, metric]``.
        val_samples: validation samples ``val_metric`` was computed on; None when unknown
            (a split without a length).
        other_cpu_share: the share of the run's CPUs other processes used over its timed
            windows, in [0, 1]; None when not measured (the mock device).
        load_avg_1m: the machine's 1-minute load average at the end of the timed windows.
        busy_machine: the share passed ``advanced.measure.max_other_cpu_share``: measured on a
            busy machine; None when not measured.
        run_s: wall seconds of the run (its cost; the mock's simulated seconds).
        config_json: the full trial configuration that ran, as JSON (knobs, training, data,
            timing, seed).
    """

    simulated: bool
    failure: str | None = column(String(32))
    failure_detail: str | None
    throughput_sps: float | None
    throughput_iqr_sps: float | None
    step_time_s: float | None
    compile_s: float | None = None
    peak_memory_bytes: int | None
    val_metric: float | None
    train_s: float | None
    time_to_accuracy_s: float | None = None
    target_reached: bool | None = None
    metric_curve_json: str | None = None
    val_samples: int | None = None
    other_cpu_share: float | None = None
    load_avg_1m: float | None = None
    busy_machine: bool | None = None
    run_s: float | None = None
    config_json: str


@dataclass(frozen=True, kw_only=True)
class TrialRecord(MeasuredRun):
    """One row per finished trial: every figure with its unit in its name, and the config;
    the figures every measured run has are :class:`MeasuredRun`'s.

    Figures are None where the trial produced none (a failed or never-launched trial) or where
    the measurement did not include them (``flops_per_sample``, ``mfu``,
    ``energy_j_per_sample`` exist only when the trial recorded them).

    Attributes:
        study_name: the Optuna study name.
        trial_number: Optuna's trial number within the study.
        state: Optuna's state: ``COMPLETE``, or ``PRUNED`` for a never-launched infeasible
            trial of a study written before such trials were reported as COMPLETE.
        is_baseline: the study's baseline trial (PyTorch defaults).
        is_feasible: measured and within every constraint (Optuna's constraints <= 0).
        step_time_p90_s: 90th percentile seconds per optimizer step.
        memory_kind: what ``peak_memory_bytes`` is (``cuda_peak_plus_context``, ...).
        train_loss: mean training loss over the last epoch.
        flops_per_sample: model FLOPs per training sample (forward + backward).
        mfu: model FLOP/s utilization in [0, 1].
        energy_j_per_sample: joules per training sample.
        parameters: trainable parameters.
        samples_per_step: global batch (per-rank batch times world size).
        steps: optimizer steps taken.
        timed_steps: steps inside the timed windows.
        workload: the workload's short name (``cnn``, ``gpt.py:CharGPT``), None when unknown.
        model_knobs_json: the model knobs as JSON (``{"depth": 2, "width": 16}``).
        batch_size, precision, memory_format, compile_mode, num_workers, gpu_count: the
            tuner's knobs.
        optimizer_impl, activation_checkpointing, cpu_threads, cudnn_benchmark,
            cuda_expandable_segments, data_parallel: the Tuning Guide's knobs (PyTorch's
            defaults where the study did not search them); None in rows written before
            they existed.
        seed: the trial's training seed, None when unknown.
        started_at, completed_at: Optuna's trial start and completion times.
        duration_s: seconds between them.
        eval_s: time-to-accuracy studies: seconds spent evaluating, within the time above.
        compile_cache: whether torch.compile found the trial's graphs in its cache
            (``cold``, ``warm``, ``partly warm``); None when not compiled or not known.
        process_memory_bytes: CUDA: NVML's memory of the trial's processes on their GPUs,
            summed over ranks; None on the CPU or without NVML's figure.
        metric_from_trial: the number of the trial whose validation metric (and steps to the
            target) this trial reused, its math key being the same (``advanced.search.reuse_metric``);
            None when it trained in full.
        warmup_peak_memory_bytes: CUDA: the allocator's peak over the warm-up (its one-off
            workspaces), kept apart from ``peak_memory_bytes``; None on the CPU and the mock
            device.
        evidence_class: what the trial changes against the baseline, by measured evidence
            (``baseline``, ``identical``, ``same_computation``, ``numerics``, ``dynamics``,
            ``model``; :mod:`autotune.study.evidence`).
        accuracy_source: ``measured`` (trained the budget and evaluated), ``inherited`` (the
            same math as ``metric_from_trial``, with a passed paired check) or
            ``inherited_unchecked``.
        evidence_detail: the paired check's line, or why the trial fell to another class.
        check_first_divergence: the paired check's relative loss divergence at step 1.
        check_max_divergence: its largest over the checked steps.
        gradient_noise_scale: the baseline only: the gradient noise scale B_simple its run
            measured, in samples (:mod:`autotune.core.goodput`); None where not resolved.
        statistical_efficiency: a global-batch change: E(B) against the baseline's batch and
            noise scale (AdaptDL's; Qiao et al., OSDI '21); None for the baseline's batch.
        goodput_sps: with it: throughput x E(B), samples/s of the baseline's batch.
    """

    study_name: str
    trial_number: int
    state: str = column(String(16))
    is_baseline: bool
    is_feasible: bool
    step_time_p90_s: float | None
    memory_kind: str | None = column(String(32))
    train_loss: float | None
    flops_per_sample: float | None
    mfu: float | None
    energy_j_per_sample: float | None
    parameters: int | None = column(BigInteger)
    samples_per_step: int | None
    steps: int | None
    timed_steps: int | None
    workload: str | None = column(String(255))
    model_knobs_json: str | None
    batch_size: int | None
    precision: str | None = column(String(8))
    memory_format: str | None = column(String(16))
    compile_mode: str | None = column(String(32))
    num_workers: int | None
    gpu_count: int | None
    seed: int | None
    started_at: dt.datetime | None
    completed_at: dt.datetime | None
    duration_s: float | None
    eval_s: float | None = None
    compile_cache: str | None = column(String(16), default=None)
    process_memory_bytes: int | None = None
    metric_from_trial: int | None = None
    optimizer_impl: str | None = column(String(16), default=None)
    activation_checkpointing: bool | None = None
    cpu_threads: int | None = None
    cudnn_benchmark: bool | None = None
    cuda_expandable_segments: bool | None = None
    data_parallel: str | None = column(String(8), default=None)
    warmup_peak_memory_bytes: int | None = None
    evidence_class: str | None = column(String(32), default=None)
    accuracy_source: str | None = column(String(32), default=None)
    evidence_detail: str | None = None
    check_first_divergence: float | None = None
    check_max_divergence: float | None = None
    gradient_noise_scale: float | None = None
    statistical_efficiency: float | None = None
    goodput_sps: float | None = None

    def as_row(self) -> dict[str, Any]:
        """The record as a flat mapping (CSV row, JSON payload)."""
        return dataclasses.asdict(self)

    def trial_config(self) -> TrialConfig | None:
        """The configuration the trial ran, as it stored it (``config_json``): the one reader
        of it, for whatever re-runs a trial (a verification run, a ground-truth run). None
        where the row holds the knobs alone (a trial that stored no configuration).

        Raises:
            pydantic.ValidationError: the stored configuration is not valid.
        """
        stored = json.loads(self.config_json)
        if not stored or set(stored) == {"knobs"}:
            return None
        return TrialConfig.from_stored(stored)
