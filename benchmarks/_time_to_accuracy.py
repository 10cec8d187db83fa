"""Table 5: time to accuracy, as MLPerf Training and DAWNBench score training.

A real ``space=cnn_small objective=time_to_accuracy`` study (search and verification through
``autotune.study.api.run_study``) gives the tuned configuration: its verified recommendation, or
(marked UNVERIFIED) its fastest trial that reached the target. The PyTorch defaults, the
expert recipe of Table 1 and the tuned configuration then train to the target in interleaved
rounds (defaults, expert, tuned, defaults, ...), round ``r`` with seed ``r``, each in fresh
trial processes exactly as a study runs them. Each arm's figure is MLPerf's: with 5 rounds or
more the mean after dropping the fastest and the slowest run, else the median
(:func:`autotune.study.verification.mlperf_time_to_accuracy_s`, as the verification reports it).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from autotune.core.config import SearchSpace, TrialConfig, load_run_config
from autotune.core.exceptions import TrialError
from autotune.core.hardware import DeviceCapabilities
from autotune.study.api import run_study
from autotune.study.baseline import trial_train_settings
from autotune.study.search import run_trial
from autotune.study.storage import ResultsStore
from autotune.study.verification import (
    VerificationSummary,
    load_verification,
    mlperf_time_to_accuracy_s,
)
from autotune.trial.measure import Measurement

__all__ = [
    "TtaArmRuns",
    "TtaSelection",
    "measure_to_target",
    "mlperf_time_to_accuracy_s",
    "run_tta_study",
    "select_tta",
]

Progress = Callable[[str], None]


def run_tta_study(
    storage: str,
    study_name: str,
    n_trials: int,
    device: str,
    overrides: Sequence[str],
    progress: Progress,
) -> tuple[optuna.Study, int]:
    """Run (or top up, or reuse) a time-to-accuracy ``cnn_small`` study of ``n_trials``
    finished trials, with its verification; ``overrides`` set the target and the data.

    Returns:
        The study and the number of trials this call ran.
    """
    config = load_run_config(
        [
            "space=cnn_small",
            f"device={device}",
            f"storage={storage}",
            f"study={study_name}",
            "seed=0",
            "objective=time_to_accuracy",
            *overrides,
        ]
    )

    def on_trial(p: Any) -> None:
        t = p.last
        attrs = t.user_attrs
        if attrs.get("failure"):
            what = attrs["failure"]
        elif attrs.get("target_reached"):
            what = f"reached in {attrs['time_to_accuracy_s']:.1f} s"
        else:
            what = (
                f"missed ({attrs.get('val_metric', 0):.4f} after {attrs.get('train_s', 0):.1f} s)"
            )
        progress(
            f"  study {study_name}: trial {p.finished}/{p.target} ({p.elapsed_s:.0f} s): {what}"
        )

    result = run_study(config, n_trials, on_trial=on_trial)
    progress(f"  study {study_name}: {result.finished} finished, {result.ran} run now")
    return optuna.load_study(study_name=study_name, storage=storage), result.ran


@dataclass(frozen=True)
class TtaSelection:
    """The tuned configuration of a time-to-accuracy study.

    Attributes:
        trial: the verified recommendation, else the fastest trial that reached the target.
        knobs: its knob values.
        reached: trials of the study that reached the target.
        finished: finished trials of the study.
        verification: the study's newest finished verification (None without one).
    """

    trial: FrozenTrial
    knobs: dict[str, Any]
    reached: int
    finished: int
    verification: VerificationSummary | None

    @property
    def verified(self) -> bool:
        """The chosen trial is the verified recommendation."""
        rec = self.verification.recommended if self.verification else None
        return rec is not None and rec.trial_number == self.trial.number


def select_tta(study: optuna.Study, space: SearchSpace, storage: str) -> TtaSelection:
    """The study's verified recommendation, else its fastest trial that reached the target.

    Raises:
        ValueError: no trial of the study reached the target.
    """
    with ResultsStore.open(storage, create=False) as results:
        verification = load_verification(study, results)
    finished = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    reached = [
        t
        for t in finished
        if t.user_attrs.get("target_reached") and all(v <= 0 for v in t.constraints.values())
    ]
    if not reached:
        raise ValueError(f"no trial of study {study.study_name} reached the target")
    best = min(reached, key=lambda t: (float(t.user_attrs["time_to_accuracy_s"]), t.number))
    rec = verification.recommended if verification is not None else None
    if rec is not None:
        best = study.trials[rec.trial_number]
    knobs = {name: best.params[name] for name in space.knobs()}
    return TtaSelection(best, knobs, len(reached), len(finished), verification)


@dataclass
class TtaArmRuns:
    """One arm's runs to the target (rounds numbered from 0)."""

    name: str
    knobs: dict[str, Any]
    origin: str
    rounds: dict[int, Measurement] = field(default_factory=dict)
    failures: dict[int, str] = field(default_factory=dict)

    def times_s(self) -> list[float]:
        """Times to target of the rounds that reached it, in round order."""
        return [
            float(m.time_to_accuracy_s)
            for _, m in sorted(self.rounds.items())
            if m.target_reached and m.time_to_accuracy_s is not None
        ]

    def missed(self) -> int:
        """Rounds that ran but did not reach the target, plus failed rounds."""
        return sum(not m.target_reached for m in self.rounds.values()) + len(self.failures)

    def paired_ratios(self, baseline: TtaArmRuns) -> list[float]:
        """How many times sooner than ``baseline``, round by round (rounds both reached)."""
        ratios = []
        for r, m in sorted(self.rounds.items()):
            base = baseline.rounds.get(r)
            if (
                base is not None
                and m.time_to_accuracy_s
                and base.time_to_accuracy_s
                and m.target_reached
                and base.target_reached
            ):
                ratios.append(base.time_to_accuracy_s / m.time_to_accuracy_s)
        return ratios


def geometric_mean(values: Sequence[float]) -> float:
    """NaN for no values."""
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else float("nan")


def measure_to_target(
    space: SearchSpace,
    caps: DeviceCapabilities,
    arms: Sequence[TtaArmRuns],
    repeats: int,
    timeout_s: float,
    progress: Progress,
) -> None:
    """Train every arm to the space's target, interleaved, ``repeats`` rounds; round ``r``
    uses seed ``r`` for every arm. Fills each arm's ``rounds`` and ``failures``."""
    for r in range(repeats):
        for arm in arms:
            config = TrialConfig.from_knobs(
                arm.knobs,
                space,
                device=caps.kind,
                seed=r,
                train=trial_train_settings(space),
                objective="time_to_accuracy",
            )
            label = f"time to target round {r + 1}/{repeats} {arm.name}"
            started = time.monotonic()
            try:
                m = run_trial(config.model_copy(update={"timeout_s": timeout_s}))
            except TrialError as e:
                arm.failures[r] = e.failure
                progress(f"  {label}: FAILED ({e.failure})")
                continue
            arm.rounds[r] = m
            what = (
                f"reached in {m.time_to_accuracy_s:.2f} s"
                if m.target_reached and m.time_to_accuracy_s is not None
                else f"missed ({m.val_metric:.4f} after {m.train_s:.1f} s)"
            )
            progress(f"  {label}: {what} (wall {time.monotonic() - started:.1f} s)")
