"""The pure builder of a :class:`TrialRecord` from one finished Optuna trial, and which trial
states count as finished and feasible."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from optuna.trial import FrozenTrial, TrialState

from autotune.config import GUIDE_KNOB_DEFAULTS, GUIDE_KNOBS, TUNER_KNOBS
from autotune.measure import BUSY_ATTR
from autotune.storage.records._results import TrialRecord

__all__ = ["FINISHED_STATES", "KNOB_COLUMNS", "is_feasible", "trial_record"]

#: The tuner's and the guide's knobs, stored one column each (same names as the Optuna
#: parameters); the
#: model's knobs, whose names are the workload's own, are stored as JSON (``model_knobs_json``).
KNOB_COLUMNS = (*TUNER_KNOBS, *GUIDE_KNOBS)
#: Trial states that count towards ``--trials`` and get a results row: a measured (or
#: failed-as-data) trial. PRUNED is what studies made before infeasible trials were reported as
#: COMPLETE hold for a trial that was never launched. FAIL is reserved for interrupted trials,
#: which are run again.
FINISHED_STATES = (TrialState.COMPLETE, TrialState.PRUNED)

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
    "time_to_accuracy_s",
    "eval_s",
    "other_cpu_share",
    "load_avg_1m",
)
_INT_ATTRS = (
    "peak_memory_bytes",
    "parameters",
    "samples_per_step",
    "steps",
    "timed_steps",
    "val_samples",
    "process_memory_bytes",
)


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
    knobs = {name: params.get(name) for name in TUNER_KNOBS}
    # The guide's knobs: the trial's value where the study searched it, else the
    # configuration's (a space's fixed setting, or PyTorch's default).
    knobs.update(
        {
            name: params[name] if name in params else full.get(name, GUIDE_KNOB_DEFAULTS[name])
            for name in GUIDE_KNOBS
        }
    )
    seed = full.get("seed")
    detail = attrs.get("failure_detail")
    reached = attrs.get("target_reached")
    curve = attrs.get("metric_curve")
    busy = attrs.get(BUSY_ATTR)
    cache = attrs.get("compile_cache")
    reused_from = attrs.get("metric_from_trial")
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
        target_reached=reached if isinstance(reached, bool) else None,
        metric_curve_json=json.dumps(curve) if isinstance(curve, list) else None,
        busy_machine=busy if isinstance(busy, bool) else None,
        compile_cache=cache if isinstance(cache, str) else None,
        metric_from_trial=_number(reused_from, int),
        **figures,
        **knobs,
    )
