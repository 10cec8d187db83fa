"""Replays of a recorded real study: the default GP sampler against itself with one feature
switched off, answered from what a real study measured (issue 41, part 1).

A *recording* is a real main-job study exported to a small JSON file under
``benchmarks/data/`` (:func:`export_recording`): per trial its knob values, state, the three
objective values, failure kind, ``compile_s`` and ``train_s``, and the study's directions,
space file, device and the precisions the device screened out.

A *replay* runs the real study objective (:class:`autotune.study.search.TrialObjective`) in-process
on an in-memory Optuna storage, with the sampler a study of that space and device gets
(:func:`autotune.study.search.study_sampler`, or a variant of :data:`FEATURES`) and the PyTorch-defaults
baseline enqueued first, as ``run_study`` does and as Table 2 drives the mock
(``_search_efficiency.sampler_run``). Its ``run_trial`` answers every configuration with the
recorded figures of that configuration (its earliest trial), or, when the study never measured
it, with those of its **nearest recorded configuration**: the distance between two
configurations is the sum over knobs of ``|rank difference| / (levels - 1)`` for an ordered
knob (numbers: depth, width, batch size, workers, GPU count) and ``1`` for a differing
unordered one (precision, memory format, compile mode), so each knob adds at most 1; ties go
to the earliest recorded trial. :attr:`Replay.exact` counts the proposals the table answered
exactly.

The score of a replay after ``b`` trials is the hypervolume of the configurations its first
``b`` trials found (feasible ones, each judged by the recorded figures that answered it) over
the hypervolume of the recording's own front (every distinct configuration by its earliest
measurement, the same table the replay reads, so a score lies in [0, 1]), in Table 2's
normalized space (``_search_efficiency``: ``(-log throughput, -accuracy, log memory)``, the
reference front's ideal 0 and nadir 1, reference point 1.1).

Features switched off (benchmark-only: arguments of :func:`autotune.study.search.make_sampler` and,
for the torch-function switch, a patch of the sampler class inside the harness; no
production flag): see :data:`FEATURES`.

Run: ``PYTHONPATH=$PWD python benchmarks/_replay.py replay SEEDS`` (or ``mock SEEDS``).
"""

from __future__ import annotations

import contextlib
import json
import math
import sqlite3
import statistics
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _search_efficiency as search
import numpy as np
import optuna
from optuna.trial import FrozenTrial, TrialState
from scipy.stats import qmc

from autotune.core.config import RunConfig, SearchSpace, TrialConfig, load_run_config
from autotune.core.exceptions import TrialError
from autotune.core.hardware import DeviceCapabilities
from autotune.study.baseline import enqueue_baseline, enqueue_same_model
from autotune.study.feasibility import restrict_space
from autotune.study.objectives import OBJECTIVES
from autotune.study.search import TrialObjective, make_sampler, study_sampler
from autotune.study.search._opening import feasibility_test, prior_mean, startup_design
from autotune.study.search._samplers import LeanGPSampler, OneThreadSampler
from autotune.study.trial_result import TrialResult
from autotune.trial.measure import Measurement

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "benchmarks" / "data"
#: The budgets scored (trials, baseline included).
BUDGETS = (25, 50)
#: The knobs whose levels are unordered (the rest are numbers, ordered by value).
UNORDERED = frozenset({"precision", "memory_format", "compile_mode"})
#: The sampler variants compared: the default and each feature off.
FEATURES = (
    "default",
    "prior mean off",
    "torch functions on",
    "design repairs off",
)

Knobs = tuple[Any, ...]


# --- recordings -------------------------------------------------------------------------


def export_recording(
    db: str | Path, study_name: str, space_file: str, out: str | Path | None = None
) -> dict[str, Any]:
    """Export study ``study_name`` of the SQLite storage ``db`` (an autotune study: Optuna's
    tables and ``autotune_*``) to the recording format, written to ``out`` when given.
    The knobs' levels are the distributions of the study's first trial (the restricted space)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        (study_id,) = con.execute(
            "select study_id from studies where study_name = ?", (study_name,)
        ).fetchone()
        directions = [
            d.lower()
            for (d,) in con.execute(
                "select direction from study_directions where study_id = ? order by objective",
                (study_id,),
            )
        ]
        hw = con.execute(
            "select h.device_kind, h.device_name, h.device_count, h.device_memory_bytes "
            "from autotune_hardware h join autotune_studies s on s.hardware_id = h.id "
            "where s.optuna_study_name = ?",
            (study_name,),
        ).fetchone()
        rows = con.execute(
            "select trial_id, number, state from trials where study_id = ? order by number",
            (study_id,),
        ).fetchall()
        levels: dict[str, list[Any]] = {}
        trials = []
        for trial_id, number, state in rows:
            params: dict[str, Any] = {}
            for name, value, dist in con.execute(
                "select param_name, param_value, distribution_json from trial_params "
                "where trial_id = ?",
                (trial_id,),
            ):
                d = json.loads(dist)
                if d["name"] == "CategoricalDistribution":
                    choices = d["attributes"]["choices"]
                    params[name] = choices[int(value)]
                    levels.setdefault(name, list(choices))
                else:  # IntDistribution (depth): its range
                    a = d["attributes"]
                    params[name] = int(value)
                    levels.setdefault(name, list(range(a["low"], a["high"] + 1, a["step"])))
            values = [
                v
                for (v,) in con.execute(
                    "select value from trial_values where trial_id = ? order by objective",
                    (trial_id,),
                )
            ]
            attrs = {
                k: json.loads(v)
                for k, v in con.execute(
                    "select key, value_json from trial_user_attributes where trial_id = ?",
                    (trial_id,),
                )
            }
            trials.append(
                {
                    "number": number,
                    "params": params,
                    "state": state,
                    "values": values or None,
                    "failure": attrs.get("failure"),
                    "compile_s": attrs.get("compile_s"),
                    "train_s": attrs.get("train_s"),
                    "metric_from_trial": attrs.get("metric_from_trial"),
                    "steps": attrs.get("steps"),
                    "train_loss": attrs.get("train_loss"),
                }
            )
        screened = sorted(
            {"fp32", "tf32", "fp16", "bf16"}
            - set(levels.get("precision", []))
            - ({"tf32"} if hw[0] == "cpu" else set())  # a rule's, not the screen's
        )
    finally:
        con.close()
    recording = {
        "study": study_name,
        "space": space_file,
        "source": Path(db).name,
        "directions": directions,
        "device": {"kind": hw[0], "name": hw[1], "count": hw[2], "memory_bytes": hw[3]},
        "screened_precisions": screened,
        "levels": levels,
        "trials": trials,
    }
    if out is not None:
        head = json.dumps({k: v for k, v in recording.items() if k != "trials"}, indent=1)
        lines = ",\n".join("  " + json.dumps(t) for t in trials)
        Path(out).write_text(f'{head[:-2]},\n "trials": [\n{lines}\n ]\n}}\n')
    return recording


def load_recording(path: str | Path) -> dict[str, Any]:
    """A recording written by :func:`export_recording`."""
    recording: dict[str, Any] = json.loads(Path(path).read_text())
    return recording


class Lookup:
    """The recorded figures of a configuration: its own earliest trial, or its nearest
    recorded configuration's (module docstring). ``knob_names`` fixes the key order."""

    def __init__(self, recording: Mapping[str, Any], knob_names: Sequence[str]) -> None:
        self.knob_names = tuple(knob_names)
        self.levels = {k: list(recording["levels"][k]) for k in self.knob_names}
        self.table: dict[Knobs, dict[str, Any]] = {}
        for t in sorted(recording["trials"], key=lambda t: t["number"]):
            if t["state"] != "COMPLETE" or t["values"] is None:
                continue
            self.table.setdefault(self.key(t["params"]), t)  # the earliest measurement
        self._keys = list(self.table)
        self._ranks = np.array([self._rank(k) for k in self._keys], dtype=float)
        self._ordered = np.array([k not in UNORDERED for k in self.knob_names])
        self._spans = np.array([max(len(self.levels[k]) - 1, 1) for k in self.knob_names])

    def key(self, params: Mapping[str, Any]) -> Knobs:
        return tuple(params[k] for k in self.knob_names)

    def _rank(self, key: Knobs) -> list[int]:
        return [self.levels[k].index(v) for k, v in zip(self.knob_names, key, strict=True)]

    def distances(self, key: Knobs) -> np.ndarray:
        """Distance from ``key`` to every recorded configuration, in table order."""
        diff = np.abs(self._ranks - np.asarray(self._rank(key), dtype=float))
        per_knob = np.where(self._ordered, diff / self._spans, (diff > 0).astype(float))
        return np.asarray(per_knob.sum(axis=1))

    def nearest(self, key: Knobs) -> tuple[Knobs, bool]:
        """The recorded configuration answering ``key``, and whether it is ``key`` itself.
        Table order is trial order, so ``argmin`` breaks ties to the earliest."""
        if key in self.table:
            return key, True
        return self._keys[int(np.argmin(self.distances(key)))], False

    def values(self, key: Knobs) -> tuple[float, float, float]:
        v = self.table[key]["values"]
        return float(v[0]), float(v[1]), float(v[2])


@dataclass(frozen=True)
class Reference:
    """The recording's own front (every distinct configuration by its earliest measurement) and
    Table 2's normalization of it."""

    front: np.ndarray
    ideal: np.ndarray
    nadir: np.ndarray
    hypervolume: float

    @classmethod
    def of(cls, points: Sequence[tuple[float, float, float]]) -> Reference:
        front = search._pareto(np.asarray(points, dtype=float))
        t = search._to_minimization(front)
        ideal, nadir = t.min(axis=0), t.max(axis=0)
        nadir = np.where(nadir > ideal, nadir, ideal + 1.0)  # a flat axis: no division by 0
        ref = cls(front, ideal, nadir, 0.0)
        return cls(front, ideal, nadir, search.hypervolume(ref.normalize(front)))

    def normalize(self, raw: np.ndarray) -> np.ndarray:
        return (search._to_minimization(raw) - self.ideal) / (self.nadir - self.ideal)

    def fraction(self, points: Sequence[tuple[float, float, float]]) -> float:
        if not points:
            return 0.0
        raw = search._pareto(np.asarray(points, dtype=float))
        return search.hypervolume(self.normalize(raw)) / self.hypervolume


# --- the study's inputs, as the recording's device saw them ---------------------------------


def recorded_run(recording: Mapping[str, Any]) -> tuple[RunConfig, SearchSpace, DeviceCapabilities]:
    """The run, restricted space and device capabilities of the recording: the space file
    restricted by the device's rules and the recorded precision screen."""
    device = recording["device"]
    space_file = REPO / recording["space"]  # the repository's file, never an installed copy
    config = load_run_config([f"space={space_file}", f"device={device['kind']}"])
    caps = DeviceCapabilities(
        kind=device["kind"],
        name=device["name"],
        count=int(device["count"]),
        memory_bytes=device["memory_bytes"],
        compute_capability=None,
    )
    screened = {p: "screened in the recording" for p in recording["screened_precisions"]}
    space, _ = restrict_space(config.space, caps, screened)
    for name, knob in space.knobs().items():
        if list(_levels(knob)) != list(recording["levels"][name]):
            raise ValueError(f"{name}: the restricted space's levels differ from the recording's")
    return config.model_copy(update={"space": space}), space, caps


def _levels(knob: Any) -> list[Any]:
    """A discrete knob's levels (every knob of a recorded space is discrete)."""
    return list(knob.values())


# --- the features ---------------------------------------------------------------------------


def plain_qmc_design(
    config: RunConfig, space: SearchSpace, caps: DeviceCapabilities, seed: int
) -> list[dict[str, Any]]:
    """As many start-up rows as :func:`startup_design` gives, from Optuna ``QMCSampler``'s
    default sequence (scrambled Halton, seeded) mapped onto each knob's levels: no coverage
    repairs and no feasibility filter."""
    n_rows = len(startup_design(config, space, caps))
    knobs = {name: list(_levels(k)) for name, k in space.knobs().items()}
    points = qmc.Halton(len(knobs), scramble=True, seed=seed).random(n_rows)
    return [
        {
            name: levels[min(int(p * len(levels)), len(levels) - 1)]
            for (name, levels), p in zip(knobs.items(), row, strict=True)
        }
        for row in points
    ]


@contextlib.contextmanager
def torch_functions_on() -> Iterator[None]:
    """The GP's proposals without ``torch._C.DisableTorchFunction`` (a speed feature):
    ``LeanGPSampler._sample_relative_impl`` patched to call its body directly."""
    original = LeanGPSampler._sample_relative_impl

    def impl(self: Any, study: Any, completed: Any, running: Any, space: Any) -> Any:
        return self._sample_on_cpu(study, completed, running, space)

    LeanGPSampler._sample_relative_impl = impl  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        LeanGPSampler._sample_relative_impl = original  # type: ignore[method-assign]


def feature_sampler(
    feature: str, config: RunConfig, space: SearchSpace, caps: DeviceCapabilities, seed: int
) -> OneThreadSampler:
    """The default study sampler with ``feature`` (one of :data:`FEATURES`) off."""
    run = config.model_copy(update={"seed": seed, "sampler": "gp"})
    if feature in ("default", "torch functions on"):
        return study_sampler(run, space, caps, seed)
    kwargs: dict[str, Any] = {
        "design": startup_design(run, space, caps),
        "feasible": feasibility_test(run, space, caps),
        "prior_mean": prior_mean(run, space, caps),
    }
    if feature == "prior mean off":
        kwargs["prior_mean"] = None
    elif feature == "design repairs off":
        kwargs["design"] = plain_qmc_design(run, space, caps, seed)
    else:
        raise ValueError(f"unknown feature {feature!r} (known: {', '.join(FEATURES)})")
    return make_sampler("gp", seed, **kwargs)


# --- one replay -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Replay:
    """One replayed study, trial by trial: the recorded configuration answering each trial
    (None for one refused or failed), whether the table held it exactly, the recorded seconds
    it cost (``compile_s + train_s`` of the configuration that answered it; 0 for a proposal
    refused before it ran), and the replay's own seconds."""

    answered: list[Knobs | None]
    exact: list[bool]
    trial_s: list[float]
    sampler_s: float
    wall_s: float


def _measurement(t: Mapping[str, Any], config: TrialConfig) -> Measurement:
    throughput, metric, memory = (float(v) for v in t["values"])
    return Measurement(
        throughput_sps=throughput,
        throughput_iqr_sps=0.0,
        step_time_s=config.batch_size * config.gpu_count / throughput,
        step_time_p90_s=config.batch_size * config.gpu_count / throughput,
        compile_s=float(t["compile_s"] or 0.0),
        peak_memory_bytes=int(memory),
        val_metric=metric,
        train_loss=float(t.get("train_loss") or 0.0),
        train_s=float(t["train_s"] or 0.0),
        steps=int(t.get("steps") or 1),
        timed_steps=1,
        samples_per_step=config.batch_size * config.gpu_count,
        parameters=0,
        memory_kind="replayed",
        simulated=True,
        too_slow=config.min_throughput_sps is not None and throughput < config.min_throughput_sps,
    )


def replay(
    recording: Mapping[str, Any],
    seed: int,
    n_trials: int = max(BUDGETS),
    feature: str = "default",
    sampler: Callable[[RunConfig, SearchSpace, DeviceCapabilities, int], Any] | None = None,
) -> Replay:
    """Replay ``recording`` with the default sampler, ``feature`` off (:data:`FEATURES`), or
    ``sampler(config, space, caps, seed)`` when given."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    config, space, caps = recorded_run(recording)
    lookup = Lookup(recording, list(space.knobs()))
    run = config.model_copy(update={"seed": seed, "sampler": "gp"})
    # Per configuration asked for (its repr): the recorded one answering it, whether exactly,
    # and its recorded seconds.
    answered_by: dict[str, tuple[Knobs, bool, float]] = {}

    def run_trial(trial_config: TrialConfig) -> Measurement:
        key = lookup.key(trial_config.knobs())
        found, exact = lookup.nearest(key)
        t = lookup.table[found]
        answered_by[repr(key)] = found, exact, trial_seconds(t)
        if t["failure"]:
            raise TrialError(t["failure"], "recorded failure")
        return _measurement(t, trial_config)

    started = time.monotonic()
    chosen = (
        feature_sampler(feature, config, space, caps, seed)
        if sampler is None
        else sampler(config, space, caps, seed)
    )
    study = optuna.create_study(directions=[o.direction for o in OBJECTIVES], sampler=chosen)
    enqueue_baseline(study, space)
    objective = TrialObjective(run, space, caps, run_trial)

    def same_model(s: optuna.Study, _: FrozenTrial) -> None:
        enqueue_same_model(s, space)

    patch = torch_functions_on() if feature == "torch functions on" else contextlib.nullcontext()
    with patch, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study.optimize(objective, n_trials=n_trials, gc_after_trial=False, callbacks=[same_model])
    answered: list[Knobs | None] = []
    exact: list[bool] = []
    trial_s: list[float] = []
    for t in sorted(study.trials, key=lambda t: t.number):
        if not t.state.is_finished():  # queued by the same-model callback after the last
            continue
        if set(t.params) != set(lookup.knob_names):
            raise RuntimeError(f"trial {t.number} ({t.state.name}) lacks knobs: {t.params}")
        key = lookup.key(t.params)
        hit = answered_by.get(repr(key))
        feasible = t.state == TrialState.COMPLETE and all(v <= 0 for v in t.constraints.values())
        answered.append(hit[0] if hit is not None and feasible else None)
        exact.append(hit is not None and hit[1])
        refused = TrialResult.from_trial(t).failure_kind == "infeasible"  # never launched
        trial_s.append(0.0 if refused or hit is None else hit[2])
    sampler_s = float(getattr(chosen, "sampler_s", math.nan))
    return Replay(answered, exact, trial_s, sampler_s, time.monotonic() - started)


def trial_seconds(t: Mapping[str, Any]) -> float:
    """A recorded trial's seconds: its compilation and training (``compile_s + train_s``).
    The trial's fixed costs (its processes' start, evaluation) are left out: the recording
    does not hold them, and they are alike for every configuration."""
    return float(t["compile_s"] or 0.0) + float(t["train_s"] or 0.0)


def recorded_seconds(recording: Mapping[str, Any], n_trials: int) -> float:
    """The seconds (:func:`trial_seconds`) the recorded study's first ``n_trials`` took."""
    trials = sorted(recording["trials"], key=lambda t: t["number"])[:n_trials]
    return sum(trial_seconds(t) for t in trials)


def score(recording: Mapping[str, Any], runs: Replay, budget: int) -> float:
    """Hypervolume fraction of ``runs``' first ``budget`` trials (module docstring)."""
    _, space, _ = recorded_run(recording)
    lookup = Lookup(recording, list(space.knobs()))
    reference = Reference.of([lookup.values(k) for k in lookup.table])
    return reference.fraction([lookup.values(k) for k in runs.answered[:budget] if k is not None])


def seconds_score(recording: Mapping[str, Any], runs: Replay, budget_s: float) -> float:
    """Hypervolume fraction of the configurations ``runs`` found within ``budget_s`` recorded
    seconds: its trials, in order, while their :attr:`Replay.trial_s` add up to at most
    ``budget_s`` (Table 2 scores its seconds columns the same way on the mock)."""
    return score(recording, runs, search.trials_within(runs.trial_s, budget_s))


# --- the tables -----------------------------------------------------------------------------


def paired_table(
    fractions: Mapping[str, Mapping[int, Sequence[float]]], budgets: Sequence[int] = BUDGETS
) -> list[str]:
    """Markdown rows: per feature off, the median paired difference default - off with its
    95 % bootstrap interval (``_search_efficiency.median_interval``), per budget."""
    lines = []
    base = fractions["default"]
    for feature, by_budget in fractions.items():
        cells = []
        for b in budgets:
            if feature == "default":
                vals = list(by_budget[b])
                low, high = search.median_interval(vals)
                cells.append(f"{statistics.median(vals):.3f} [{low:.3f}, {high:.3f}]")
                continue
            diffs = [d - f for d, f in zip(base[b], by_budget[b], strict=True)]
            low, high = search.median_interval(diffs)
            cells.append(f"{statistics.median(diffs):+.3f} [{low:+.3f}, {high:+.3f}]")
        lines.append(f"| {feature} | " + " | ".join(cells) + " |")
    return lines


def run_replays(path: Path, seeds: Sequence[int], features: Sequence[str] = FEATURES) -> None:
    """The replay table on one recording, printed as it goes (one process, one thread)."""
    import torch

    torch.set_num_threads(1)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    recording = load_recording(path)
    fractions: dict[str, dict[int, list[float]]] = {f: {b: [] for b in BUDGETS} for f in features}
    hits: list[float] = []
    sampler_s: dict[str, list[float]] = {f: [] for f in features}
    for seed in seeds:
        for feature in features:
            r = replay(recording, seed, feature=feature)
            sampler_s[feature].append(r.sampler_s)
            for b in BUDGETS:
                fractions[feature][b].append(score(recording, r, b))
            hits.append(sum(r.exact) / len(r.exact))
            print(
                f"seed {seed} {feature}: "
                + ", ".join(f"{b}: {fractions[feature][b][-1]:.3f}" for b in BUDGETS)
                + f", exact {hits[-1]:.2f}, sampler {r.sampler_s:.1f} s, wall {r.wall_s:.1f} s",
                flush=True,
            )
    print(
        f"exact-hit share: median {statistics.median(hits):.2f}, "
        f"range {min(hits):.2f}-{max(hits):.2f}"
    )
    print("\n".join(paired_table(fractions)))
    if "torch functions on" in features and "default" in features:
        ratios = [
            on / off
            for on, off in zip(sampler_s["torch functions on"], sampler_s["default"], strict=True)
        ]
        low, high = search.median_interval(ratios)
        print(
            f"sampler seconds, torch functions on / default: median "
            f"{statistics.median(ratios):.3f} [{low:.3f}, {high:.3f}]"
        )


#: Trials a seconds-budget replay runs: more than the recording's 50, so a sampler that spends
#: fewer seconds a trial can use the recorded study's seconds to the end.
SECONDS_REPLAY_TRIALS = 70
#: The seconds budgets scored: the recorded study's seconds at these trial counts.
SECONDS_BUDGET_TRIALS = (35, 50)


def run_seconds_replays(
    path: Path, seeds: Sequence[int], features: Sequence[str] = FEATURES
) -> None:
    """The replay table scored within the recorded study's seconds (:func:`seconds_score`) at
    :data:`SECONDS_BUDGET_TRIALS` of its trials, each replay running
    :data:`SECONDS_REPLAY_TRIALS` trials: how a feature that trades trials for seconds (the
    removed cost weighting) is judged."""
    import torch

    torch.set_num_threads(1)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    recording = load_recording(path)
    budgets_s = {b: recorded_seconds(recording, b) for b in SECONDS_BUDGET_TRIALS}
    print(
        "seconds budgets: "
        + ", ".join(f"{b} recorded trials = {s:.0f} s" for b, s in budgets_s.items()),
        flush=True,
    )
    fractions: dict[str, dict[int, list[float]]] = {
        f: {b: [] for b in SECONDS_BUDGET_TRIALS} for f in features
    }
    for seed in seeds:
        for feature in features:
            r = replay(recording, seed, n_trials=SECONDS_REPLAY_TRIALS, feature=feature)
            cells = []
            for b, budget_s in budgets_s.items():
                fractions[feature][b].append(seconds_score(recording, r, budget_s))
                n = search.trials_within(r.trial_s, budget_s)
                cells.append(f"{b}: {fractions[feature][b][-1]:.3f} ({n} trials)")
            print(
                f"seed {seed} {feature}: " + ", ".join(cells) + f", wall {r.wall_s:.1f} s",
                flush=True,
            )
    print("\n".join(paired_table(fractions, SECONDS_BUDGET_TRIALS)))


def run_mock(seeds: Sequence[int], features: Sequence[str] = FEATURES) -> None:
    """Table 2's paired differences on the mock for the same switches (50 trials)."""
    import torch

    torch.set_num_threads(1)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    config = load_run_config([f"space={REPO / 'search_spaces' / 'cnn_small.yaml'}", "device=mock"])
    truth = search.enumerate_ground_truth(config)
    space, caps = search._mock_run(config)
    fractions: dict[str, dict[int, list[float]]] = {f: {b: [] for b in BUDGETS} for f in features}
    for seed in seeds:
        for feature in features:
            started = time.monotonic()
            run = config.model_copy(update={"seed": seed, "sampler": "gp"})

            def factory(_: str, s: int, feature: str = feature, run: RunConfig = run) -> Any:
                return feature_sampler(feature, run, space, caps, s)

            patch = (
                torch_functions_on()
                if feature == "torch functions on"
                else contextlib.nullcontext()
            )
            with patch, warnings.catch_warnings():
                warnings.simplefilter("ignore")
                found = search.sampler_run(
                    config, "gp", seed, max(BUDGETS), truth.knob_names, factory=factory
                )
            for b in BUDGETS:
                fractions[feature][b].append(
                    truth.fraction([k for k in found.found[:b] if k is not None])
                )
            print(
                f"mock seed {seed} {feature}: "
                + ", ".join(f"{b}: {fractions[feature][b][-1]:.3f}" for b in BUDGETS)
                + f", wall {time.monotonic() - started:.1f} s",
                flush=True,
            )
    print("\n".join(paired_table(fractions)))


if __name__ == "__main__":
    import sys

    what = sys.argv[1] if len(sys.argv) > 1 else "replay"
    # replay [SEEDS [FIRST [RECORDING.json]]] | seconds [SEEDS [FIRST [RECORDING.json]]]
    # | mock [SEEDS [FIRST]] | export DB STUDY SPACE OUT
    if what == "export":  # export DB STUDY SPACE_FILE OUT.json
        export_recording(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5])
        sys.exit()
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    first = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    if what == "mock":
        run_mock(range(first, first + n))
    else:
        recording = sys.argv[4] if len(sys.argv) > 4 else "cnn_small-cpu-epyc-1.json"
        runner = run_seconds_replays if what == "seconds" else run_replays
        runner(DATA / recording, range(first, first + n))
