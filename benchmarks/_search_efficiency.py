"""Table 2: search efficiency of the samplers on the mock device, against exhaustive truth.

The ``cnn_small`` space is already discrete (depth 1..3 and categorical knobs), so the
"discretized space" is the space itself: every configuration the mock device's feasibility
rules allow is simulated once (:func:`autotune.trial.devices.mock.simulate`, milliseconds each)
and the Pareto front of the feasible ones is the ground truth. Configurations pruned by the
feasibility rules or out of (simulated) memory are infeasible and never part of a front.

Each sampler then runs the real study objective (:class:`autotune.study.search.TrialObjective`, with
the sampler ``open_study`` gives a study, :func:`autotune.study.search.study_sampler`, and the
PyTorch-defaults baseline enqueued first, as ``run_study`` does) **in-process** on an in-memory Optuna storage: a mock
trial costs milliseconds, so forking a process per trial (``run_study device=mock``) would only
add time, not fidelity. As in a real study, every trial of a run simulates with the run's seed
(common random numbers), so the sampler sees that seed's noisy values (the mock's measurement
noise); the configurations it found are scored with their ground-truth values, so every run
is judged on one fixed front.

The ground truth is the mock's **noise-free** values (``simulate(..., noise=False)``: every
noise draw at its median), not one seed's noisy values: the mock's accuracy noise (0.3 pt per
configuration and seed) is a large share of MNIST's accuracy range (about 1.5 pt across the
space), so a front of one seed's values is mostly that seed's lucky draws, which no sampler
running another seed can find. (Measured when this changed: the front of *all* 6,912 feasible
configurations as seeds 1-3 measure them scored 0.825-0.839 of seed 0's front, and 0.983-0.986
of the noise-free front.)

Hypervolume (moocore's): objectives are mapped to a minimization space where they are comparable:
``(-log throughput, -accuracy, log peak memory)`` (throughput and memory span orders of
magnitude and are judged as ratios, accuracy as points), then scaled so that the true front's
ideal point is 0 and its nadir point is 1 on every axis. The reference point is 1.1 on every
axis (nadir plus 10 % of the true front's range). The found front's hypervolume is divided by
the true front's.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import math
import multiprocessing
import statistics
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import moocore
import numpy as np
import optuna
import scipy.stats
from optuna.trial import FrozenTrial

from autotune.core.config import RunConfig, SearchSpace, TrialConfig, load_run_config
from autotune.core.exceptions import TrialError
from autotune.core.hardware import DeviceCapabilities, detect_capabilities
from autotune.study.baseline import enqueue_baseline, enqueue_same_model, trial_train_settings
from autotune.study.feasibility import restrict_space, trial_infeasibility_reason
from autotune.study.objectives import OBJECTIVES
from autotune.study.search import TrialObjective, study_sampler
from autotune.trial.devices.mock import simulate
from autotune.trial.measure import Measurement

__all__ = [
    "MEDIAN_CONFIDENCE",
    "MEDIAN_RESAMPLES",
    "REFERENCE_POINT",
    "SAMPLERS",
    "SECONDS_MULTIPLES",
    "SECONDS_REFERENCE",
    "EfficiencyRow",
    "GroundTruth",
    "SearchRun",
    "enumerate_ground_truth",
    "hypervolume",
    "median_interval",
    "run_search_efficiency",
    "trials_within",
]

#: The row the seconds budget is measured on: the default sampler ("within the simulated
#: seconds of 50 full trials of today's default").
SECONDS_REFERENCE = "gp"
#: The rows compared (``sampler=`` names).
SAMPLERS = ("nsga2", "tpe", "gp", "random")
#: Reference point in the normalized minimization space (true front: ideal 0, nadir 1).
REFERENCE_POINT = (1.1, 1.1, 1.1)
#: Confidence level of the interval around a median over seeds (:func:`median_interval`).
MEDIAN_CONFIDENCE = 0.95
#: Bootstrap resamples behind that interval (seeded, so a table is reproducible).
MEDIAN_RESAMPLES = 10_000

Knobs = tuple[Any, ...]


@dataclass(frozen=True)
class GroundTruth:
    """Every configuration of the space on the mock device.

    Attributes:
        knob_names: the knob order of the keys of ``values``.
        values: ``(throughput_sps, val_metric, peak_memory_bytes)`` of every feasible
            configuration (simulated without noise), by knob values.
        n_configs: configurations enumerated.
        n_pruned: configurations the feasibility rules refuse (never launched).
        n_oom: configurations that ran out of simulated memory.
        train_seconds: the simulated seconds each feasible configuration costs trained in
            full (the mock's noise-free ``train_s``), by knob values: the cost model of the
            seconds-budget columns.
        front: the true Pareto front, ``(P, 3)`` raw objective values.
        ideal: per-axis best of the front in the transformed minimization space.
        nadir: per-axis worst of the front in the transformed minimization space.
        hypervolume: the true front's hypervolume (normalized space, :data:`REFERENCE_POINT`).
        seconds: wall time of the enumeration.
    """

    knob_names: tuple[str, ...]
    values: dict[Knobs, tuple[float, float, float]]
    train_seconds: dict[Knobs, float]
    n_configs: int
    n_pruned: int
    n_oom: int
    front: np.ndarray
    ideal: np.ndarray
    nadir: np.ndarray
    hypervolume: float
    seconds: float

    def normalize(self, raw: np.ndarray) -> np.ndarray:
        """``(N, 3)`` raw objective values -> the normalized minimization space."""
        return (_to_minimization(raw) - self.ideal) / (self.nadir - self.ideal)

    def fraction(self, found: Sequence[Knobs]) -> float:
        """Hypervolume of the feasible configurations in ``found`` over the true front's."""
        points = [self.values[k] for k in found if k in self.values]
        if not points:
            return 0.0
        raw = np.asarray(points, dtype=float)
        return hypervolume(self.normalize(_pareto(raw))) / self.hypervolume


@dataclass(frozen=True)
class SearchRun:
    """One (sampler, seed) study of :func:`sampler_run`, trial by trial in number order.

    Attributes:
        found: each trial's knob values, None for an infeasible trial (refused before launch,
            out of memory, stopped as too slow or over a constraint).
        cost_s: each trial's simulated seconds (the mock's ``train_s``: compilation, warm-up,
            training and evaluation; a trial that reused a metric pays only its warm-up and
            timed windows; 0 for one refused before launch or out of memory).
        reused: whether each trial reused another trial's metric (``metric_from_trial``).
    """

    found: list[Knobs | None]
    cost_s: list[float]
    reused: list[bool]

    def full_cost_s(self, truth: GroundTruth) -> list[float]:
        """Each trial's simulated seconds had it trained in full: a reused trial costs what
        its configuration costs in ``truth`` (noise-free), every other trial what it cost."""
        return [
            truth.train_seconds.get(knobs, cost) if reused and knobs is not None else cost
            for knobs, cost, reused in zip(self.found, self.cost_s, self.reused, strict=True)
        ]

    def within(self, seconds: float) -> int:
        """How many of the first trials fit in ``seconds`` of simulated time."""
        return trials_within(self.cost_s, seconds)


def trials_within(cost_s: Sequence[float], seconds: float) -> int:
    """How many of the first trials, costing ``cost_s`` seconds each (>= 0), fit in
    ``seconds`` in all."""
    spent, n = 0.0, 0
    for cost in cost_s:
        spent += cost
        if spent > seconds:
            break
        n += 1
    return n


#: Multiples of the seconds budget (the simulated seconds of the default sampler's first
#: ``max(budgets)`` trials, each counted as trained in full) shown in Table 2's second part.
SECONDS_MULTIPLES = (0.5, 1.0)


def median_interval(
    values: Sequence[float], confidence: float = MEDIAN_CONFIDENCE
) -> tuple[float, float]:
    """Percentile-bootstrap confidence interval of the median of ``values`` (one figure per
    seed): how far the median of another draw of as many seeds could lie (Efron and
    Tibshirani, "An Introduction to the Bootstrap", 1993, chapter 13; scipy's
    ``scipy.stats.bootstrap``, :data:`MEDIAN_RESAMPLES` resamples, seeded). Per seed the
    samplers' fractions spread widely (at 25 trials the default ranged from 0.75 to 0.91 over
    seeds 0-9), so a median a few thousandths from a target says nothing either way; the
    interval says so.

    Args:
        values: one figure per seed, at least one.
        confidence: the interval's confidence level, in (0, 1).

    Returns:
        ``(low, high)``; both the single value when ``values`` has fewer than 2 distinct
        values (nothing to resample).

    Raises:
        ValueError: ``values`` is empty or ``confidence`` is outside (0, 1).
    """
    if not values:
        raise ValueError("median_interval needs at least one value, got none")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    data = np.asarray(values, dtype=float)
    if np.ptp(data) == 0:
        return float(data[0]), float(data[0])
    result = scipy.stats.bootstrap(
        (data,),
        np.median,
        confidence_level=confidence,
        n_resamples=MEDIAN_RESAMPLES,
        method="percentile",
        rng=np.random.default_rng(0),
    )
    interval = result.confidence_interval
    return float(interval.low), float(interval.high)


@dataclass(frozen=True)
class EfficiencyRow:
    """One sampler's hypervolume fractions over seeds, per trial budget and per budget of
    simulated seconds."""

    sampler: str
    fractions: dict[int, list[float]]  # budget -> one fraction per seed
    run_seconds: list[float]  # wall time of each seed's study (sampler + simulation)
    by_seconds: dict[float, list[float]] = field(default_factory=dict)  # multiple -> per seed
    trials_in_seconds: dict[float, list[int]] = field(default_factory=dict)  # the same

    def median_by_seconds(self, multiple: float) -> float:
        """Median fraction over seeds within ``multiple`` x the seconds budget."""
        return statistics.median(self.by_seconds[multiple])

    def median(self, budget: int) -> float:
        """Median fraction over seeds after ``budget`` trials."""
        return statistics.median(self.fractions[budget])

    def median_interval(self, budget: int) -> tuple[float, float]:
        """95 % bootstrap interval of :meth:`median` over seeds (:func:`median_interval`)."""
        return median_interval(self.fractions[budget])

    def median_interval_by_seconds(self, multiple: float) -> tuple[float, float]:
        """95 % bootstrap interval of :meth:`median_by_seconds` (:func:`median_interval`)."""
        return median_interval(self.by_seconds[multiple])

    def quartiles(self, budget: int) -> tuple[float, float]:
        """(25th, 75th) percentile of the fractions over seeds after ``budget`` trials."""
        values = self.fractions[budget]
        if len(values) < 2:
            return values[0], values[0]
        q = statistics.quantiles(values, n=4, method="inclusive")
        return q[0], q[2]


def _to_minimization(raw: np.ndarray) -> np.ndarray:
    """``(throughput, accuracy, memory)`` -> ``(-log throughput, -accuracy, log memory)``."""
    return np.stack([-np.log(raw[:, 0]), -raw[:, 1], np.log(np.maximum(raw[:, 2], 1.0))], axis=1)


def _pareto(raw: np.ndarray) -> np.ndarray:
    """The non-dominated rows of raw objective values (max, max, min); duplicates kept once
    (moocore's ``is_nondominated``)."""
    maximise = [o.direction == "maximize" for o in OBJECTIVES]
    points = np.unique(raw, axis=0)
    return points[moocore.is_nondominated(points, maximise=maximise)]


def hypervolume(points: np.ndarray, reference: Sequence[float] = REFERENCE_POINT) -> float:
    """Hypervolume dominated by ``points`` (all minimized) up to ``reference``, by moocore's
    ``hypervolume`` (exact; Fonseca et al.'s algorithm in 3-D). Points worse than the
    reference on any axis add nothing."""
    if len(points) == 0:
        return 0.0
    return float(moocore.hypervolume(points, ref=np.asarray(reference, dtype=float)))


def _mock_run(config: RunConfig) -> tuple[SearchSpace, DeviceCapabilities]:
    caps = detect_capabilities("mock", mock_profile=config.mock.profile)
    space, _ = restrict_space(config.space, caps)
    return space, caps


def _trial_config(
    space: SearchSpace, caps: DeviceCapabilities, knobs: dict[str, Any]
) -> TrialConfig:
    return TrialConfig.from_knobs(
        knobs,
        space,
        device="mock",
        seed=0,
        train=trial_train_settings(space),  # LR scaled as in a study
        mock_profile="default",
    )


def enumerate_ground_truth(config: RunConfig) -> GroundTruth:
    """Simulate every configuration of ``config``'s space on the mock device, noise-free."""
    started = time.monotonic()
    space, caps = _mock_run(config)
    knobs = space.knobs()
    names = tuple(knobs)
    values: dict[Knobs, tuple[float, float, float]] = {}
    train_seconds: dict[Knobs, float] = {}
    n = pruned = oom = 0
    levels = []
    for name in names:
        knob = knobs[name]
        if not hasattr(knob, "values"):
            raise ValueError(f"{name}: a real-valued knob cannot be enumerated")
        levels.append(knob.values())
    for combo in itertools.product(*levels):
        n += 1
        trial = _trial_config(space, caps, dict(zip(names, combo, strict=True)))
        if trial_infeasibility_reason(trial, caps) is not None:
            pruned += 1
            continue
        try:
            m = simulate(trial, noise=False)
        except MemoryError:
            oom += 1
            continue
        values[combo] = (m.throughput_sps, m.val_metric, float(m.peak_memory_bytes))
        train_seconds[combo] = m.train_s
    front = _pareto(np.asarray(list(values.values()), dtype=float))
    transformed = _to_minimization(front)
    ideal, nadir = transformed.min(axis=0), transformed.max(axis=0)
    truth = GroundTruth(
        knob_names=names,
        values=values,
        train_seconds=train_seconds,
        n_configs=n,
        n_pruned=pruned,
        n_oom=oom,
        front=front,
        ideal=ideal,
        nadir=nadir,
        hypervolume=0.0,
        seconds=0.0,
    )
    hv = hypervolume(truth.normalize(front))
    return GroundTruth(
        **{**truth.__dict__, "hypervolume": hv, "seconds": time.monotonic() - started}
    )


def _simulated_trial(config: TrialConfig) -> Measurement:
    """``run_trial`` for the mock device, in-process: out of memory becomes ``failure=oom``."""
    try:
        return simulate(config)
    except MemoryError as e:
        raise TrialError("oom", str(e)) from None


def sampler_run(
    config: RunConfig,
    sampler: str,
    seed: int,
    n_trials: int,
    knob_names: Sequence[str],
    factory: Callable[[str, int], optuna.samplers.BaseSampler] | None = None,
) -> SearchRun:
    """Run one study in-process: each trial's knob values (None for an infeasible trial),
    simulated seconds and whether it reused a metric (:class:`SearchRun`).

    ``factory(name, seed)`` builds the sampler; by default, the one ``open_study`` gives a
    study (:func:`autotune.study.search.study_sampler`: the start-up design, the metric's knobs and
    proposals checked against the feasibility rules); experiments pass their own.
    """
    space, caps = _mock_run(config)
    run = config.model_copy(update={"seed": seed, "sampler": sampler})
    chosen = study_sampler(run, space, caps, seed) if factory is None else factory(sampler, seed)
    study = optuna.create_study(directions=[o.direction for o in OBJECTIVES], sampler=chosen)
    enqueue_baseline(study, space)  # run_study measures the PyTorch defaults first
    objective = TrialObjective(run, space, caps, _simulated_trial)

    def same_model(s: optuna.Study, _: FrozenTrial) -> None:
        """As run_study: a share of the trials keeps the baseline's model."""
        enqueue_same_model(s, space)

    study.optimize(objective, n_trials=n_trials, gc_after_trial=False, callbacks=[same_model])
    found: list[Knobs | None] = []
    cost_s: list[float] = []
    reused: list[bool] = []
    for t in sorted(study.trials, key=lambda t: t.number):
        feasible = t.state == optuna.trial.TrialState.COMPLETE and all(
            v <= 0 for v in t.constraints.values()
        )
        found.append(tuple(t.params[k] for k in knob_names) if feasible else None)
        cost_s.append(float(t.user_attrs.get("train_s") or 0.0))
        reused.append("metric_from_trial" in t.user_attrs)
    return SearchRun(found, cost_s, reused)


def _run_one(task: tuple[str, int, int, tuple[str, ...], str]) -> tuple[SearchRun, float]:
    """Pool worker: one (sampler, seed) study; returns its trials and its wall time."""
    sampler, seed, n_trials, knob_names, space = task
    import torch

    # One intra-op thread per run: the GP sampler fits its models with torch, and parallel
    # runs must not oversubscribe the cores. Sampler time per trial is reported this way.
    torch.set_num_threads(1)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
    started = time.monotonic()
    config = load_run_config([f"space={space}", "device=mock"])
    found = sampler_run(config, sampler, seed, n_trials, knob_names)
    return found, time.monotonic() - started


def run_search_efficiency(
    seeds: int,
    budgets: Sequence[int] = (10, 25, 50),
    samplers: Sequence[str] = SAMPLERS,
    space: str = "cnn_small",
    jobs: int = 1,
    progress: Callable[[str], None] = lambda _: None,
    seconds_reference: str = SECONDS_REFERENCE,
    extra_trials_fraction: float = 0.6,
) -> tuple[GroundTruth, list[EfficiencyRow]]:
    """Table 2: hypervolume fraction after each budget of trials and of simulated seconds,
    for each sampler over ``seeds`` seeds.

    Each (sampler, seed) runs one study of ``max(budgets) * (1 + extra_trials_fraction)``
    trials (rounded up); the fraction after ``b`` trials is scored on its first ``b`` trials
    (a sequential study's first ``b`` trials are exactly what a ``b``-trial study would have
    run). The seconds budget of a seed is the simulated seconds of ``seconds_reference``'s
    first ``max(budgets)`` trials with that seed (:data:`SECONDS_REFERENCE`: the default
    sampler; the first of ``samplers`` when it is not among them), each counted as trained
    in full (what the default cost before trials could reuse a metric); the fraction within ``m`` x that budget
    is scored on the first trials whose simulated seconds (reused trials paying only their
    timed windows) fit in it, for each ``m`` of :data:`SECONDS_MULTIPLES`. A run that ends
    before its budget is spent is scored on all its trials (it then understates). Seeds
    0..seeds-1 are shared by all samplers. ``jobs`` runs that many studies at once in spawned
    processes (mock only: never run this beside real measurements).
    """
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    config = load_run_config([f"space={space}", "device=mock"])
    truth = enumerate_ground_truth(config)
    progress(
        f"ground truth: {truth.n_configs} configurations, {len(truth.values)} feasible, "
        f"true front of {len(truth.front)} ({truth.seconds:.1f} s)"
    )
    n_trials = math.ceil(max(budgets) * (1 + extra_trials_fraction))
    tasks = [
        (sampler, seed, n_trials, truth.knob_names, space)
        for sampler in samplers
        for seed in range(seeds)
    ]
    results: dict[tuple[str, int], tuple[SearchRun, float]] = {}
    if jobs > 1:
        ctx = multiprocessing.get_context("spawn")  # never the trial runner's forkserver
        with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=ctx) as pool:
            futures = {pool.submit(_run_one, task): task for task in tasks}
            for future in concurrent.futures.as_completed(futures):
                sampler, seed = futures[future][:2]
                results[sampler, seed] = future.result()
                progress(f"  {sampler} seed {seed} done ({results[sampler, seed][1]:.1f} s)")
    else:
        for task in tasks:
            results[task[0], task[1]] = _run_one(task)
            progress(f"  {task[0]} seed {task[1]} done ({results[task[0], task[1]][1]:.1f} s)")
    reference = seconds_reference if seconds_reference in samplers else samplers[0]
    seconds_budget = {
        seed: sum(results[reference, seed][0].full_cost_s(truth)[: max(budgets)])
        for seed in range(seeds)
    }
    rows = []
    for sampler in samplers:
        fractions: dict[int, list[float]] = {b: [] for b in budgets}
        by_seconds: dict[float, list[float]] = {m: [] for m in SECONDS_MULTIPLES}
        trials_in: dict[float, list[int]] = {m: [] for m in SECONDS_MULTIPLES}
        for seed in range(seeds):
            run = results[sampler, seed][0]
            for b in budgets:
                fractions[b].append(truth.fraction([k for k in run.found[:b] if k is not None]))
            for m in SECONDS_MULTIPLES:
                n = run.within(m * seconds_budget[seed])
                trials_in[m].append(n)
                by_seconds[m].append(truth.fraction([k for k in run.found[:n] if k is not None]))
        row = EfficiencyRow(
            sampler,
            fractions,
            [results[sampler, s][1] for s in range(seeds)],
            by_seconds,
            trials_in,
        )
        progress(
            f"{sampler}: median "
            + ", ".join(f"{b} trials {row.median(b):.3f}" for b in budgets)
            + ", "
            + ", ".join(
                f"{m:g}x seconds {row.median_by_seconds(m):.3f} "
                f"({statistics.median(trials_in[m]):.0f} trials)"
                for m in SECONDS_MULTIPLES
            )
        )
        rows.append(row)
    return truth, rows


if __name__ == "__main__":  # Table 2 alone: python benchmarks/_search_efficiency.py [SEEDS] [JOBS]
    import sys

    run_search_efficiency(
        int(sys.argv[1]) if len(sys.argv) > 1 else 10,
        jobs=int(sys.argv[2]) if len(sys.argv) > 2 else 1,
        progress=print,
    )
