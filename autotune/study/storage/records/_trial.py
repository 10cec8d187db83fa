"""The pure builder of a :class:`TrialRecord` from one finished Optuna trial, and which trial
states count as finished and feasible."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from optuna.trial import FrozenTrial, TrialState

from autotune.core.config import GUIDE_KNOB_DEFAULTS, GUIDE_KNOBS, TUNER_KNOBS
from autotune.study.storage.records._results import TrialRecord
from autotune.study.trial_result import TrialResult

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

#: The record's fields that are the trial result's of the same name
#: (:class:`~autotune.study.trial_result.TrialResult`), copied as it reads them: a new figure is a
#: field of each and no line here. ``state`` (the record keeps its name) and
#: ``failure_detail`` (its end) are the builder's.
_COPIED = (
    frozenset(f.name for f in dataclasses.fields(TrialRecord))
    & frozenset(f.name for f in dataclasses.fields(TrialResult))
) - {"state", "failure_detail"}


def is_feasible(trial: FrozenTrial) -> bool:
    """Measured (COMPLETE, no ``failure``) and within every Optuna constraint (all <= 0)."""
    return TrialResult.from_trial(trial).feasible


def _workload_label(config: Mapping[str, Any]) -> str | None:
    """The short name of a trial configuration's workload (``cnn``, ``gpt.py:CharGPT``);
    None where it names none."""
    workload = config.get("workload")
    if isinstance(workload, Mapping) and isinstance(workload.get("ref"), str):
        ref = str(workload["ref"])
        args = workload.get("args") or {}
        if ref.endswith(":ImageClassifier") and ref.startswith("autotune."):
            return str(args.get("family", "builtin"))
        path, _, name = ref.rpartition(":")
        return f"{path.rsplit('/', 1)[-1]}:{name}"
    return None


def trial_record(
    study_name: str, trial: FrozenTrial, config: Mapping[str, Any] | None = None
) -> TrialRecord:
    """Build the results row of one finished trial from Optuna's record of it (pure): every
    figure from its :class:`~autotune.study.trial_result.TrialResult`, the one reader of its user
    attributes.

    Args:
        study_name: the Optuna study name.
        trial: the finished trial (COMPLETE or PRUNED).
        config: the full trial configuration (``TrialConfig.model_dump(mode="json")``); when
            None, the one the trial stored as it ran (``TrialResult.trial_config``), or where
            it stored none only the knobs (``trial.params``), go in ``config_json``.

    Returns:
        The row, with None for every figure the trial does not carry.
    """
    result = TrialResult.from_trial(trial)
    params = trial.params
    config = config if config is not None else result.trial_config
    full = dict(config) if config is not None else {"knobs": dict(params)}
    model_knobs = {k: v for k, v in params.items() if k not in KNOB_COLUMNS}
    started, completed = trial.datetime_start, trial.datetime_complete
    figures: dict[str, Any] = {name: getattr(result, name) for name in _COPIED}
    knobs: dict[str, Any] = {name: params.get(name) for name in TUNER_KNOBS}
    # The guide's knobs: the trial's value where the study searched it, else the
    # configuration's (a space's fixed setting, or PyTorch's default).
    knobs.update(
        {
            name: params[name] if name in params else full.get(name, GUIDE_KNOB_DEFAULTS[name])
            for name in GUIDE_KNOBS
        }
    )
    seed = full.get("seed")
    detail = result.failure_detail
    curve = [list(point) for point in result.metric_curve]
    return TrialRecord(
        study_name=study_name,
        trial_number=trial.number,
        state=trial.state.name,
        is_baseline=result.baseline,
        is_feasible=result.feasible,
        failure=result.failure_kind,
        failure_detail=detail[-2000:] if detail is not None else None,
        workload=_workload_label(full),
        model_knobs_json=json.dumps(model_knobs, sort_keys=True),
        seed=int(seed) if isinstance(seed, int) else None,
        config_json=json.dumps(full, sort_keys=True),
        started_at=started,
        completed_at=completed,
        duration_s=(completed - started).total_seconds() if started and completed else None,
        metric_curve_json=json.dumps(curve) if result.time_to_accuracy else None,
        **figures,
        **knobs,
    )
