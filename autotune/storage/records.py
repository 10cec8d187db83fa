"""Frozen value objects the results store hands back (never ORM rows), and the pure builder
that turns one finished Optuna trial into a :class:`TrialRecord`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from optuna.trial import FrozenTrial, TrialState

from autotune.config import TUNER_KNOBS

__all__ = [
    "FINISHED_STATES",
    "KNOB_COLUMNS",
    "HardwareFingerprint",
    "StudyRecord",
    "TrialRecord",
    "VerificationPlan",
    "VerificationRecord",
    "VerificationRun",
    "is_feasible",
    "trial_record",
]

#: The tuner's knobs, stored one column each (same names as the Optuna parameters); the
#: model's knobs, whose names are the workload's own, are stored as JSON (``model_knobs_json``).
KNOB_COLUMNS = TUNER_KNOBS
#: Trial states that count towards ``--trials`` and get a results row: a measured (or
#: failed-as-data) trial. PRUNED is what studies made before infeasible trials were reported as
#: COMPLETE hold for a trial that was never launched. FAIL is reserved for interrupted trials,
#: which are run again.
FINISHED_STATES = (TrialState.COMPLETE, TrialState.PRUNED)


@dataclass(frozen=True)
class HardwareFingerprint:
    """What makes two measurements comparable: the device, its software stack and the host.

    Attributes:
        device_kind: ``cpu``, ``cuda`` or ``mock``.
        device_name: GPU model, CPU model, or the mock profile's label (says "simulated").
        device_count: GPUs visible (cuda, mock) or logical CPU cores (cpu).
        device_memory_bytes: memory of one device (host RAM on cpu), None when unknown.
        compute_capability: CUDA ``"major.minor"``, None on cpu.
        driver_version: NVIDIA driver from NVML, None off CUDA or without NVML.
        cuda_version: CUDA runtime torch was built with, None off CUDA.
        cudnn_version: cuDNN version as torch reports it, None off CUDA.
        torch_version: ``torch.__version__``.
        cpu_model: host CPU model name.
        cpu_cores: host logical CPU cores.
        simulated: True for the mock device: no figure measured on it is real.
    """

    device_kind: str
    device_name: str
    device_count: int
    device_memory_bytes: int | None
    compute_capability: str | None
    driver_version: str | None
    cuda_version: str | None
    cudnn_version: str | None
    torch_version: str
    cpu_model: str
    cpu_cores: int
    simulated: bool

    @property
    def fingerprint_sha256(self) -> str:
        """SHA-256 of the fields as sorted JSON: equal hardware and stack, equal hash."""
        text = json.dumps(dataclasses.asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()

    def rows(self) -> list[tuple[str, str]]:
        """``(label, value)`` pairs for display; unknown values read "n/a"."""
        mib = self.device_memory_bytes / (1 << 20) if self.device_memory_bytes else None
        pairs: list[tuple[str, Any]] = [
            ("device", f"{self.device_kind}: {self.device_name}"),
            ("device count", self.device_count),
            ("device memory", f"{mib:,.0f} MiB" if mib is not None else None),
            ("compute capability", self.compute_capability),
            ("NVIDIA driver", self.driver_version),
            ("CUDA", self.cuda_version),
            ("cuDNN", self.cudnn_version),
            ("torch", self.torch_version),
            ("CPU", f"{self.cpu_model} ({self.cpu_cores} logical cores)"),
            ("simulated", "yes: SIMULATED, no figure is a measurement" if self.simulated else "no"),
            ("fingerprint", self.fingerprint_sha256[:16]),
        ]
        return [(label, "n/a" if value is None else str(value)) for label, value in pairs]


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


@dataclass(frozen=True)
class TrialRecord:
    """One row per finished trial: every figure with its unit in its name, and the config.

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
        simulated: produced by the mock device (no figure is a measurement).
        failure: ``oom``, ``error``, ``crash``, ``timeout``, ``infeasible`` or None.
        failure_detail: the end of the error output, or the broken rule.
        throughput_sps: global training samples/s (median of timed windows).
        throughput_iqr_sps: interquartile range of the window throughputs (samples/s).
        step_time_s: median seconds per optimizer step.
        step_time_p90_s: 90th percentile seconds per optimizer step.
        compile_s: seconds torch.compile added before the first timed step.
        peak_memory_bytes: peak memory (see ``memory_kind``).
        memory_kind: what ``peak_memory_bytes`` is (``cuda_allocator_peak``, ...).
        val_metric: the workload's validation metric (top-1 accuracy in [0, 1] for the
            built-ins; see the study's ``metric_name``).
        train_loss: mean training loss over the last epoch.
        train_s: wall seconds of the training loop.
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
        seed: the trial's training seed, None when unknown.
        config_json: the full trial configuration as JSON (knobs, training, data, timing).
        started_at, completed_at: Optuna's trial start and completion times.
        duration_s: seconds between them.
    """

    study_name: str
    trial_number: int
    state: str
    is_baseline: bool
    is_feasible: bool
    simulated: bool
    failure: str | None
    failure_detail: str | None
    throughput_sps: float | None
    throughput_iqr_sps: float | None
    step_time_s: float | None
    step_time_p90_s: float | None
    compile_s: float | None
    peak_memory_bytes: int | None
    memory_kind: str | None
    val_metric: float | None
    train_loss: float | None
    train_s: float | None
    flops_per_sample: float | None
    mfu: float | None
    energy_j_per_sample: float | None
    parameters: int | None
    samples_per_step: int | None
    steps: int | None
    timed_steps: int | None
    workload: str | None
    model_knobs_json: str | None
    batch_size: int | None
    precision: str | None
    memory_format: str | None
    compile_mode: str | None
    num_workers: int | None
    gpu_count: int | None
    seed: int | None
    config_json: str
    started_at: dt.datetime | None
    completed_at: dt.datetime | None
    duration_s: float | None

    def as_row(self) -> dict[str, Any]:
        """The record as a flat mapping (CSV row, JSON payload)."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class VerificationPlan:
    """What one verification re-measures: the baseline and the finalists, R rounds, R seeds.

    Attributes:
        baseline_trial: the study's baseline trial number.
        candidates: the finalists' trial numbers, in the order they run within a round.
        seeds: the training seed of each round (``len(seeds)`` is the number of rounds).
        accuracy_tolerance_pt: how many accuracy points (0.5 = 0.005) below the baseline's
            mean a candidate may be and still qualify.
    """

    baseline_trial: int
    candidates: tuple[int, ...]
    seeds: tuple[int, ...]
    accuracy_tolerance_pt: float

    @property
    def rounds(self) -> int:
        """Verification rounds (one seed each)."""
        return len(self.seeds)

    def schedule(self) -> list[tuple[int, int]]:
        """``(round_index, trial_number)`` in run order, interleaved: baseline, c1..cK, then
        the next round's baseline, c1..cK, ... (so slow drifts of the machine hit every
        configuration alike). Empty without candidates: there is nothing to compare."""
        if not self.candidates:
            return []
        order = (self.baseline_trial, *self.candidates)
        return [(r, number) for r in range(self.rounds) for number in order]


@dataclass(frozen=True)
class VerificationRecord:
    """One configuration measured in one verification round.

    Attributes:
        round_index: the round (0-based).
        seed: the round's training seed.
        trial_number: the study trial whose configuration was re-run.
        is_baseline: it is the baseline.
        simulated: the mock device produced it.
        failure: ``oom``, ``error``, ``crash``, ``timeout`` or None when measured.
        failure_detail: the end of the error output.
        throughput_sps: global training samples/s (median of timed windows).
        throughput_iqr_sps: interquartile range of the window throughputs.
        step_time_s: median seconds per optimizer step.
        val_metric: validation metric (top-1 accuracy in [0, 1]).
        peak_memory_bytes: peak memory in bytes.
        train_s: wall seconds of the training loop.
        config_json: the full trial configuration that ran (seed included).
    """

    round_index: int
    seed: int
    trial_number: int
    is_baseline: bool
    simulated: bool
    failure: str | None
    failure_detail: str | None
    throughput_sps: float | None
    throughput_iqr_sps: float | None
    step_time_s: float | None
    val_metric: float | None
    peak_memory_bytes: int | None
    train_s: float | None
    config_json: str


@dataclass(frozen=True)
class VerificationRun:
    """A verification of a study as stored: its number, plan, rows and state.

    Attributes:
        study_name: the Optuna study name.
        number: 1 for the study's first verification, 2 for the next, ...
        plan: what it re-measures.
        rows: the measurements so far, by round.
        started_at: when it was planned (UTC).
        completed_at: when its last round finished (UTC); None while rounds are missing.
    """

    study_name: str
    number: int
    plan: VerificationPlan
    rows: tuple[VerificationRecord, ...]
    started_at: dt.datetime | None
    completed_at: dt.datetime | None

    @property
    def complete(self) -> bool:
        """Every round of every configuration has a row."""
        return self.completed_at is not None

    def done(self) -> set[tuple[int, int]]:
        """``(round_index, trial_number)`` pairs that have a row."""
        return {(r.round_index, r.trial_number) for r in self.rows}


#: Figures copied from the trial's user attributes as floats / ints, when present.
_FLOAT_ATTRS = (
    "throughput_sps",
    "throughput_iqr_sps",
    "step_time_s",
    "step_time_p90_s",
    "compile_s",
    "val_metric",
    "train_loss",
    "train_s",
    "flops_per_sample",
    "mfu",
    "energy_j_per_sample",
)
_INT_ATTRS = ("peak_memory_bytes", "parameters", "samples_per_step", "steps", "timed_steps")


def is_feasible(trial: FrozenTrial) -> bool:
    """Measured (COMPLETE, no ``failure``) and within every Optuna constraint (all <= 0)."""
    return (
        trial.state == TrialState.COMPLETE
        and "failure" not in trial.user_attrs
        and all(v <= 0 for v in trial.constraints.values())
    )


def _number(value: Any, kind: type) -> Any:
    if value is None or isinstance(value, bool):
        return None
    try:
        return kind(value)
    except (TypeError, ValueError):
        return None


def _workload_label(config: Mapping[str, Any]) -> str | None:
    """The short name of a trial configuration's workload (``cnn``, ``gpt.py:CharGPT``);
    ``family`` for configurations written before workloads."""
    workload = config.get("workload")
    if isinstance(workload, Mapping) and isinstance(workload.get("ref"), str):
        ref = str(workload["ref"])
        args = workload.get("args") or {}
        if ref.endswith(":ImageClassifier") and ref.startswith("autotune."):
            return str(args.get("family", "builtin"))
        path, _, name = ref.rpartition(":")
        return f"{path.rsplit('/', 1)[-1]}:{name}"
    family = config.get("family")
    return str(family) if family is not None else None


def trial_record(
    study_name: str, trial: FrozenTrial, config: Mapping[str, Any] | None = None
) -> TrialRecord:
    """Build the results row of one finished trial from Optuna's record of it (pure).

    Args:
        study_name: the Optuna study name.
        trial: the finished trial (COMPLETE or PRUNED).
        config: the full trial configuration (``TrialConfig.model_dump(mode="json")``); when
            None, only the knobs (``trial.params``) are stored in ``config_json``.

    Returns:
        The row, with None for every figure the trial does not carry.
    """
    attrs = trial.user_attrs
    params = trial.params
    full = dict(config) if config is not None else {"knobs": dict(params)}
    model_knobs = {k: v for k, v in params.items() if k not in KNOB_COLUMNS}
    workload = _workload_label(full)
    started, completed = trial.datetime_start, trial.datetime_complete
    figures: dict[str, Any] = {name: _number(attrs.get(name), float) for name in _FLOAT_ATTRS}
    if figures["val_metric"] is None:  # studies written before workloads: val_accuracy
        figures["val_metric"] = _number(attrs.get("val_accuracy"), float)
    figures.update({name: _number(attrs.get(name), int) for name in _INT_ATTRS})
    knobs = {name: params.get(name) for name in KNOB_COLUMNS}
    seed = full.get("seed")
    detail = attrs.get("failure_detail")
    return TrialRecord(
        study_name=study_name,
        trial_number=trial.number,
        state=trial.state.name,
        is_baseline=bool(attrs.get("baseline", False)),
        is_feasible=is_feasible(trial),
        simulated=bool(attrs.get("simulated", False)),
        failure=attrs.get("failure"),
        failure_detail=str(detail)[-2000:] if detail is not None else None,
        memory_kind=attrs.get("memory_kind"),
        workload=workload,
        model_knobs_json=json.dumps(model_knobs, sort_keys=True),
        seed=int(seed) if isinstance(seed, int) else None,
        config_json=json.dumps(full, sort_keys=True),
        started_at=started,
        completed_at=completed,
        duration_s=(completed - started).total_seconds() if started and completed else None,
        **figures,
        **knobs,
    )
