"""Time-to-accuracy trials built by hand, and a time-to-accuracy study on the mock device, for
the report and export tests (``objective=time_to_accuracy``: two objectives, the seconds to
the target and peak memory)."""

from __future__ import annotations

from dataclasses import dataclass

import optuna
import pytest
from optuna.trial import FrozenTrial

from autotune.core.units import MIB
from autotune.study.api import StudyResult
from tests.studies.mock import make_trial, run_mock_study, sqlite_url

#: The target of the hand-built trials and of the mock study (top-1 accuracy).
TARGET = 0.95


def tta_trial(
    number: int,
    time_s: float,
    memory_mib: float,
    *,
    reached: bool = True,
    metric: float = 0.96,
    baseline: bool = False,
    failure: str | None = None,
    **params: object,
) -> FrozenTrial:
    """A finished trial of a time-to-accuracy study as autotune records it.

    Args:
        number: its trial number.
        time_s: its time to target, or when ``reached`` is False the seconds it trained (its
            first objective value: a lower bound).
        memory_mib: its peak memory in MiB.
        reached: whether it met :data:`TARGET` (False: infeasible, ``target_not_reached``).
        metric: the accuracy of its last evaluation.
        baseline: mark it as the baseline.
        failure: a failure (``oom``...): no measurement, infeasible.
        **params: knob values overriding the defaults.
    """
    memory = memory_mib * MIB
    trial = make_trial(number, None, baseline=baseline, failure=failure)
    attrs = dict(trial.user_attrs)
    if failure is None:
        # Three evaluations, the last at time_s; the first two below the target.
        curve = [[time_s / 3, 10, 0.80], [2 * time_s / 3, 20, 0.90], [time_s, 30, metric]]
        attrs.update(
            throughput_sps=1000.0 + number,
            val_metric=metric,
            peak_memory_bytes=int(memory),
            step_time_s=0.01,
            compile_s=0.5,
            train_s=time_s,
            time_to_accuracy_s=time_s if reached else None,
            target_reached=reached,
            eval_s=0.1,
            metric_curve=curve,
            target=TARGET,
        )
    failed = 1.0 if failure is not None else 0.0
    built = optuna.trial.create_trial(
        state=trial.state,
        values=[time_s, memory],
        params={**trial.params, **params},
        distributions=trial.distributions,
        user_attrs=attrs,
        constraints={
            "failed": failed,
            "target_not_reached": 0.0 if reached or failure else 1.0,
        },
    )
    built.number = number
    return built


def hand_trials() -> list[FrozenTrial]:
    """Baseline 10 s at 12 MiB; trial 1 5 s at 8 MiB and trial 3 4 s at 16 MiB (the front);
    trial 2 missed the target (it would dominate everything at 2 MiB); trial 4 dominated by
    trial 1; trial 5 ran out of memory."""
    return [
        tta_trial(0, 10.0, 12.0, baseline=True),
        tta_trial(1, 5.0, 8.0, precision="bf16"),
        tta_trial(2, 1.0, 2.0, reached=False, metric=0.91),
        tta_trial(3, 4.0, 16.0, batch_size=128),
        tta_trial(4, 6.0, 9.0),
        tta_trial(5, 0.0, 16.0, failure="oom"),
    ]


@dataclass(frozen=True)
class TtaStudy:
    """A finished time-to-accuracy cnn_small study on the mock device (not verified).

    Attributes:
        url: its SQLite storage URL.
        name: its study name.
        n_trials: its finished trials.
        result: what the run returned.
    """

    url: str
    name: str
    n_trials: int
    result: StudyResult


def build_tta_study(tmp_path_factory: pytest.TempPathFactory, n_trials: int = 12) -> TtaStudy:
    """Run a time-to-accuracy study (target accuracy :data:`TARGET`) on the mock device."""
    url = sqlite_url(tmp_path_factory.mktemp("tta_study"))
    result = run_mock_study(
        url,
        n_trials,
        study="tta",
        extra=[
            "objective=time_to_accuracy",
            f"train.target_accuracy={TARGET}",
            "verify.rounds=0",
        ],
        constrained=False,
    )
    return TtaStudy(url=url, name="tta", n_trials=n_trials, result=result)
