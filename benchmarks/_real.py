"""Tables 1, 3 and 4: real CPU (or CUDA) measurements through ``autotune.study.search.run_trial``.

- Table 1 runs (or reuses) a real ``space=cnn_small`` study through ``autotune.study.api.run_study``
  (search and verification), takes the study's verified recommendation as the tuned
  configuration, and measures the PyTorch defaults, an expert recipe and the tuned
  configuration interleaved (A B C A B C ...).
- Table 3 reads the cost of tuning off the same study (wall time, trials until the final best
  was first found, per-trial overhead inside the study) and measures ``run_trial``'s own
  overhead (wall time minus ``Measurement.train_s``) on eager trials.
- Table 4 repeats one identical configuration back to back and reports the coefficient of
  variation of its throughput; the interleaved repeats of Table 1 are reported beside it.

Every trial runs in the trial runner's forkserver children, exactly as a study runs it.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from autotune.core.config import RunConfig, SearchSpace, TrialConfig, load_run_config, load_space
from autotune.core.exceptions import TrialError
from autotune.core.hardware import DeviceCapabilities, detect_capabilities
from autotune.study.api import run_study
from autotune.study.baseline import baseline_params, baseline_trial, trial_train_settings
from autotune.study.feasibility import restrict_space, trial_infeasibility_reason
from autotune.study.search import run_trial
from autotune.study.storage import ResultsStore
from autotune.study.verification import VerificationSummary, load_verification
from autotune.trial.measure import Measurement

__all__ = [
    "ACCURACY_TOLERANCE",
    "Arm",
    "ArmRuns",
    "Selection",
    "StudyCost",
    "defaults_knobs",
    "expert_knobs",
    "measure_interleaved",
    "measure_repeats",
    "open_space",
    "run_tuning_study",
    "select_tuned",
    "study_cost",
]

#: The tuned configuration may lose at most this much validation accuracy against the
#: defaults (0.5 percentage points).
ACCURACY_TOLERANCE = 0.005

Progress = Callable[[str], None]


def open_space(device: str, overrides: Sequence[str]) -> tuple[SearchSpace, DeviceCapabilities]:
    """``cnn_small`` with ``overrides``, restricted to what ``device`` can run."""
    caps = detect_capabilities(device)
    space, _ = restrict_space(load_space("cnn_small", overrides), caps)
    return space, caps


def trial_config(
    space: SearchSpace, caps: DeviceCapabilities, knobs: dict[str, Any], seed: int
) -> TrialConfig:
    """A complete trial configuration of ``space`` (as ``TrialObjective`` builds one)."""
    return TrialConfig.from_knobs(
        knobs,
        space,
        device=caps.kind,
        seed=seed,
        train=trial_train_settings(space),  # LR scaled as in a study
    )


def defaults_knobs(space: SearchSpace) -> dict[str, Any]:
    """PyTorch's defaults: :func:`autotune.study.baseline.baseline_params`, the very configuration
    every study measures as its baseline trial (fp32, contiguous, eager, ``num_workers=0``,
    one device, the space's middle model, batch 64 as in PyTorch's MNIST example)."""
    return baseline_params(space)[0]


def expert_knobs(space: SearchSpace, caps: DeviceCapabilities) -> dict[str, Any]:
    """The expert recipe of PyTorch's Performance Tuning Guide, on the defaults' model.

    bf16 autocast, ``channels_last``, ``torch.compile`` (default mode), the largest batch of
    the space that the device's feasibility rules (memory included) allow, and one DataLoader
    worker per CPU core (``os.cpu_count()``). Source: Szymon Migacz, "Performance Tuning
    Guide", https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html (asynchronous data
    loading with ``num_workers > 0``; mixed precision / AMP; channels_last for convolutional
    networks; operator fusion with ``torch.compile``).
    """
    knobs = {
        **defaults_knobs(space),
        "precision": "bf16",
        "memory_format": "channels_last",
        "compile_mode": "default",
        "num_workers": os.cpu_count() or 1,
        "gpu_count": 1,
    }
    for batch in sorted(space.batch_size.values(), reverse=True):
        candidate = {**knobs, "batch_size": batch}
        if trial_infeasibility_reason(trial_config(space, caps, candidate, 0), caps) is None:
            return candidate
    raise ValueError("no batch size of the space fits the expert recipe on this device")


# --------------------------------------------------------------------------------------------
# The tuning study


def run_tuning_study(
    storage: str,
    study_name: str,
    n_trials: int,
    device: str,
    overrides: Sequence[str],
    progress: Progress,
) -> tuple[optuna.Study, RunConfig, int]:
    """Run (or top up, or just reuse) a ``cnn_small`` study of ``n_trials`` finished trials.

    Returns:
        The study, the run configuration, and the number of trials this call ran.
    """
    config = load_run_config(
        [
            "space=cnn_small",
            f"device={device}",
            f"storage={storage}",
            f"study={study_name}",
            "seed=0",
            *overrides,
        ]
    )

    def on_trial(p: Any) -> None:
        t = p.last
        what = t.user_attrs.get("failure") or (
            f"{t.user_attrs.get('throughput_sps', 0):,.0f} samples/s, "
            f"acc {t.user_attrs.get('val_metric', 0):.3f}"
        )
        progress(
            f"  study {study_name}: trial {p.finished}/{p.target} ({p.elapsed_s:.0f} s): {what}"
        )

    result = run_study(config, n_trials, on_trial=on_trial)
    progress(f"  study {study_name}: {result.finished} finished, {result.ran} run now")
    return optuna.load_study(study_name=study_name, storage=storage), config, result.ran


def _finished(study: optuna.Study) -> list[FrozenTrial]:
    return sorted(
        study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)),
        key=lambda t: t.number,
    )


def _feasible(t: FrozenTrial) -> bool:
    return t.state == TrialState.COMPLETE and all(v <= 0 for v in t.constraints.values())


@dataclass(frozen=True)
class Selection:
    """The tuned configuration picked from a study.

    Attributes:
        trial: the chosen trial: the study's verified recommendation, else (unverified) the
            fastest Pareto-optimal trial within the accuracy rule.
        knobs: its knob values.
        defaults_accuracy: the defaults' validation accuracy the rule compares with.
        defaults_source: where that accuracy came from.
        candidates: Pareto-optimal trials meeting the accuracy rule.
        pareto: Pareto-optimal trials in all.
        verification: the study's newest finished verification (None when it has none).
    """

    trial: FrozenTrial
    knobs: dict[str, Any]
    defaults_accuracy: float
    defaults_source: str
    candidates: int
    pareto: int
    verification: VerificationSummary | None = None

    @property
    def verified(self) -> bool:
        """The chosen trial is the verified recommendation."""
        rec = self.verification.recommended if self.verification else None
        return rec is not None and rec.trial_number == self.trial.number


def select_tuned(
    study: optuna.Study,
    space: SearchSpace,
    caps: DeviceCapabilities,
    timeout_s: float,
    storage: str | None = None,
) -> Selection:
    """The study's verified recommendation (:mod:`autotune.study.verification`), read from
    ``storage``; where the study has none, the highest-throughput Pareto-optimal trial whose
    accuracy is within :data:`ACCURACY_TOLERANCE` of the defaults' (measured as the study's
    baseline trial, or now if the study has none), which the table then calls unverified.

    Raises:
        ValueError: no recommendation and no Pareto-optimal trial meets the rule.
    """
    verification = None
    if storage is not None:
        with ResultsStore.open(storage, create=False) as results:
            verification = load_verification(study, results)
    base = baseline_trial(study.trials)
    if base is not None and _feasible(base):
        defaults_accuracy = float(base.user_attrs["val_metric"])
        source = f"the study's baseline trial #{base.number}"
    else:
        m = run_trial(
            trial_config(space, caps, defaults_knobs(space), 0).model_copy(
                update={"timeout_s": timeout_s}
            )
        )
        defaults_accuracy = m.val_metric
        source = "one defaults trial run now (the study has no baseline trial)"
    pareto = study.best_trials
    candidates = [
        t for t in pareto if t.values[1] >= defaults_accuracy - ACCURACY_TOLERANCE - 1e-12
    ]
    if not candidates:
        raise ValueError(
            f"no Pareto-optimal trial has accuracy >= {defaults_accuracy - ACCURACY_TOLERANCE:.4f}"
        )
    best = max(candidates, key=lambda t: (t.values[0], -t.number))
    rec = verification.recommended if verification is not None else None
    if rec is not None:
        best = study.trials[rec.trial_number]
    knobs = {name: best.params[name] for name in space.knobs()}
    return Selection(
        best, knobs, defaults_accuracy, source, len(candidates), len(pareto), verification
    )


@dataclass(frozen=True)
class StudyCost:
    """Table 3's figures read off a finished study.

    Attributes:
        finished: trials counting towards the target.
        wall_s: first trial start to last trial end (seconds).
        first_found: 1-based position (among finished trials) of the first trial with the
            tuned configuration's knobs.
        within_5pct: 1-based position of the first trial meeting the accuracy rule with at
            least 95 % of the tuned trial's throughput.
        in_study_overhead_s: per eager, single-process, feasible trial: its duration in the
            study (sampler, storage, ``run_trial``) minus its ``train_s``.
        sampler_s: per finished trial, in order, the seconds the sampler took to propose it
            (its ``sampler_s`` user attribute; NaN where a study predates it).
    """

    finished: int
    wall_s: float
    first_found: int
    within_5pct: int
    in_study_overhead_s: list[float]
    sampler_s: list[float]

    def sampler_s_around(self, trials: int, window: int = 5) -> float:
        """Median sampler seconds over the ``window`` trials ending at trial ``trials``
        (1-based; NaN if the study is shorter)."""
        values = self.sampler_s[max(0, trials - window) : trials]
        if len(self.sampler_s) < trials or not values:
            return float("nan")
        return float(statistics.median(values))


def study_cost(study: optuna.Study, selection: Selection) -> StudyCost:
    """Cost of tuning, from the study's trial timestamps and user attributes."""
    finished = _finished(study)
    starts = [t.datetime_start for t in finished if t.datetime_start is not None]
    ends = [t.datetime_complete for t in finished if t.datetime_complete is not None]
    wall_s = (max(ends) - min(starts)).total_seconds() if starts and ends else float("nan")
    position = {t.number: i + 1 for i, t in enumerate(finished)}
    first_found = min(position[t.number] for t in finished if t.params == selection.trial.params)
    floor_acc = selection.defaults_accuracy - ACCURACY_TOLERANCE - 1e-12
    floor_sps = 0.95 * selection.trial.values[0]
    # The verified recommendation's accuracy in the search may be below the rule's floor (its
    # confirmation rounds judge it): then it is the first such trial itself.
    within = min(
        (
            position[t.number]
            for t in finished
            if _feasible(t) and t.values[1] >= floor_acc and t.values[0] >= floor_sps
        ),
        default=first_found,
    )
    overhead = [
        (t.datetime_complete - t.datetime_start).total_seconds() - float(t.user_attrs["train_s"])
        for t in finished
        if _feasible(t)
        and t.params.get("compile_mode") == "none"
        and t.params.get("gpu_count") == 1
        and t.datetime_start is not None
        and t.datetime_complete is not None
        and "train_s" in t.user_attrs
    ]
    sampler_s = [float(t.user_attrs.get("sampler_s", float("nan"))) for t in finished]
    return StudyCost(len(finished), wall_s, first_found, within, overhead, sampler_s)


# --------------------------------------------------------------------------------------------
# Measuring configurations


@dataclass(frozen=True)
class Arm:
    """One configuration measured side by side with others."""

    name: str  # "defaults", "expert", "tuned"
    knobs: dict[str, Any]
    origin: str  # where the configuration comes from, for the table


@dataclass
class ArmRuns:
    """The repeats of one arm on one data set (rounds numbered from 0)."""

    arm: Arm
    dataset: str
    rounds: dict[int, Measurement] = field(default_factory=dict)  # successful rounds
    wall_s: dict[int, float] = field(default_factory=dict)  # run_trial wall time per round
    failures: dict[int, str] = field(default_factory=dict)  # failure kind per failed round

    @property
    def measurements(self) -> list[Measurement]:
        return [self.rounds[r] for r in sorted(self.rounds)]

    def throughputs(self) -> list[float]:
        return [m.throughput_sps for m in self.measurements]

    def median_throughput(self) -> float:
        values = self.throughputs()
        return statistics.median(values) if values else float("nan")

    def paired_ratios(self, other: ArmRuns) -> list[float]:
        """Throughput over ``other``'s, round by round (rounds where both succeeded)."""
        common = sorted(set(self.rounds) & set(other.rounds))
        return [
            self.rounds[r].throughput_sps / other.rounds[r].throughput_sps
            for r in common
            if other.rounds[r].throughput_sps
        ]

    def overheads_s(self) -> list[float]:
        """``run_trial`` wall time minus ``train_s`` per successful round."""
        return [self.wall_s[r] - self.rounds[r].train_s for r in sorted(self.rounds)]

    def cv(self) -> float:
        """Sample standard deviation over mean of the throughputs (NaN below 2 repeats)."""
        values = self.throughputs()
        if len(values) < 2:
            return float("nan")
        return statistics.stdev(values) / statistics.fmean(values)


def _measure(
    space: SearchSpace,
    caps: DeviceCapabilities,
    runs: ArmRuns,
    round_no: int,
    seed: int,
    timeout_s: float,
    progress: Progress,
    label: str,
) -> None:
    config = trial_config(space, caps, runs.arm.knobs, seed)
    started = time.monotonic()
    try:
        m = run_trial(config.model_copy(update={"timeout_s": timeout_s}))
    except TrialError as e:
        runs.failures[round_no] = e.failure
        progress(f"  {label}: FAILED ({e.failure}): {e.detail.strip().splitlines()[-1:]}")
        return
    wall = time.monotonic() - started
    runs.rounds[round_no] = m
    runs.wall_s[round_no] = wall
    progress(
        f"  {label}: {m.throughput_sps:,.0f} samples/s, acc {m.val_metric:.3f}, "
        f"train {m.train_s:.1f} s, wall {wall:.1f} s"
    )


def measure_interleaved(
    space: SearchSpace,
    caps: DeviceCapabilities,
    dataset: str,
    arms: Sequence[Arm],
    repeats: int,
    timeout_s: float,
    progress: Progress,
) -> list[ArmRuns]:
    """Measure ``arms`` interleaved, A B C A B C ..., ``repeats`` rounds.

    Round ``r`` trains every arm with seed ``r`` (paired: the same data order and
    initialization within a round), so the accuracies also show the spread over seeds.
    """
    results = [ArmRuns(arm, dataset) for arm in arms]
    for r in range(repeats):
        for runs in results:
            label = f"{dataset} round {r + 1}/{repeats} {runs.arm.name}"
            _measure(space, caps, runs, r, r, timeout_s, progress, label)
    return results


def measure_repeats(
    space: SearchSpace,
    caps: DeviceCapabilities,
    dataset: str,
    arm: Arm,
    repeats: int,
    timeout_s: float,
    progress: Progress,
) -> ArmRuns:
    """Run one identical configuration (seed 0) ``repeats`` times back to back."""
    runs = ArmRuns(arm, dataset)
    for r in range(repeats):
        _measure(
            space,
            caps,
            runs,
            r,
            0,
            timeout_s,
            progress,
            f"{dataset} repeat {r + 1}/{repeats} {arm.name}",
        )
    return runs
