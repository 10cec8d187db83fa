"""The replay harness (``benchmarks/_replay.py``): its lookup of recorded figures, the nearest
recorded configuration, and the score's bounds, on a tiny synthetic recording."""

from __future__ import annotations

import importlib.util
import itertools
import sys
from pathlib import Path
from typing import Any

import pytest

_BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name: str) -> Any:
    """Loaded from its file, so the benchmarks' folder does not join every later test's
    sys.path (``_replay`` imports ``_search_efficiency`` by its bare name)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, _BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up while it executes
    spec.loader.exec_module(module)
    return module


_load("_search_efficiency")
replay = _load("_replay")

LEVELS: dict[str, list[Any]] = {
    "depth": [2, 3, 4],
    "width": [8, 16, 32, 64],
    "batch_size": [16, 32, 64, 128, 256],
    "precision": ["fp32", "bf16"],
    "memory_format": ["contiguous", "channels_last"],
    "compile_mode": ["none", "default", "max-autotune"],
    "num_workers": [0, 1, 2],
    "gpu_count": [1, 2],
}
NAMES = list(LEVELS)
BASELINE = {
    "depth": 3,
    "width": 16,
    "batch_size": 64,
    "precision": "fp32",
    "memory_format": "contiguous",
    "compile_mode": "none",
    "num_workers": 0,
    "gpu_count": 1,
}


def _trial(number: int, values: list[float] | None = None, **changes: Any) -> dict[str, Any]:
    params = {**BASELINE, **changes}
    # A made-up but monotone answer: bigger batches are faster, deeper models more accurate.
    default = [
        1000.0 * params["batch_size"] / 16 / (params["depth"] - 1),
        0.9 + 0.02 * params["depth"] + 0.001 * LEVELS["width"].index(params["width"]),
        1e6 * params["batch_size"] * params["width"],
    ]
    return {
        "number": number,
        "params": params,
        "state": "COMPLETE",
        "values": values or default,
        "failure": None,
        "compile_s": 0.0 if params["compile_mode"] == "none" else 5.0,
        "train_s": 6.0,
        "metric_from_trial": None,
        "steps": 100,
        "train_loss": 0.3,
    }


def _recording() -> dict[str, Any]:
    trials = [
        _trial(0),
        _trial(1, batch_size=256),
        _trial(2, depth=4, width=32),
        _trial(3, precision="bf16", compile_mode="default"),
        _trial(4, batch_size=16, depth=2),
        _trial(5, values=[1.0, 0.5, 1e12]),  # the baseline again: the earliest answers
        _trial(6, batch_size=128, memory_format="channels_last", num_workers=2, gpu_count=2),
    ]
    return {
        "study": "synthetic",
        "space": "search_spaces/cnn_small.yaml",
        "directions": ["maximize", "maximize", "minimize"],
        "device": {"kind": "cpu", "name": "AMD EPYC", "count": 2, "memory_bytes": 25276514304},
        "screened_precisions": ["fp16"],
        "levels": LEVELS,
        "trials": trials,
    }


def _key(**changes: Any) -> tuple[Any, ...]:
    return tuple({**BASELINE, **changes}[k] for k in NAMES)


def test_a_measured_configuration_is_answered_by_its_earliest_trial() -> None:
    lookup = replay.Lookup(_recording(), NAMES)
    found, exact = lookup.nearest(_key())
    assert exact and found == _key()
    assert lookup.table[found]["number"] == 0  # not trial 5, measured later
    assert lookup.values(_key(batch_size=256))[0] == pytest.approx(1000.0 * 16 / 2)


def test_the_nearest_configuration_counts_ordered_knobs_by_rank_and_the_rest_as_one() -> None:
    lookup = replay.Lookup(_recording(), NAMES)
    # batch 128 is one rank from 64 and one from 256: 1/4 either way; the baseline (trial 0)
    # is earlier than trial 1, so the tie goes to it.
    assert lookup.nearest(_key(batch_size=128)) == (_key(), False)
    # batch 256 with workers 1: 1/2 from trial 1 (workers 0 -> 1 of 0..2), 1 from the
    # baseline (batch 2/4, workers 1/2).
    assert lookup.nearest(_key(batch_size=256, num_workers=1))[0] == _key(batch_size=256)
    # A different compile mode costs 1 whatever the modes, so bf16 + max-autotune is 1 from
    # trial 3 (bf16, default) and 2 from the baseline.
    found, exact = lookup.nearest(_key(precision="bf16", compile_mode="max-autotune"))
    assert not exact and found == _key(precision="bf16", compile_mode="default")
    distances = lookup.distances(_key(depth=4))
    assert distances[0] == pytest.approx(0.5)  # depth 3 -> 4: one rank of two
    assert distances.min() >= 0 and distances.max() <= len(NAMES)


def test_every_configuration_of_the_space_gets_an_answer() -> None:
    lookup = replay.Lookup(_recording(), NAMES)
    for combo in itertools.islice(itertools.product(*LEVELS.values()), 0, None, 37):
        found, exact = lookup.nearest(combo)
        assert found in lookup.table
        assert exact == (combo in lookup.table)


def test_the_score_lies_in_0_1_and_is_1_for_the_whole_table() -> None:
    recording = _recording()
    lookup = replay.Lookup(recording, NAMES)
    reference = replay.Reference.of([lookup.values(k) for k in lookup.table])
    everything = [lookup.values(k) for k in lookup.table]
    assert reference.fraction(everything) == pytest.approx(1.0)
    assert reference.fraction([]) == 0.0
    for k in lookup.table:
        assert 0.0 <= reference.fraction([lookup.values(k)]) <= 1.0 + 1e-12
    run = replay.Replay(
        [_key(), None, _key(batch_size=256)], [True, False, True], [6.0, 6.0, 6.0], 0.0, 0.0
    )
    assert 0.0 < replay.score(recording, run, 3) <= 1.0
    assert replay.score(recording, run, 1) <= replay.score(recording, run, 3)


def test_a_seconds_budget_scores_the_trials_whose_recorded_seconds_fit_in_it() -> None:
    recording = _recording()
    # Trials 0-2 took 6 s each (eager), trial 3 11 s (compiled): 29 s for the first four.
    assert replay.recorded_seconds(recording, 4) == pytest.approx(29.0)
    assert replay.trial_seconds(recording["trials"][3]) == pytest.approx(11.0)
    run = replay.Replay(
        [_key(), _key(batch_size=256), _key(depth=4, width=32)],
        [True, True, True],
        [6.0, 6.0, 11.0],
        0.0,
        0.0,
    )
    assert replay.seconds_score(recording, run, 5.9) == 0.0  # not even the first fits
    assert replay.seconds_score(recording, run, 12.0) == replay.score(recording, run, 2)
    assert replay.seconds_score(recording, run, 23.0) == replay.score(recording, run, 3)


def test_a_short_replay_answers_every_trial_from_the_table() -> None:
    recording = _recording()
    runs = replay.replay(recording, seed=0, n_trials=4)
    assert len(runs.answered) == len(runs.exact) == len(runs.trial_s) == 4
    assert runs.trial_s[0] == pytest.approx(6.0)  # the baseline's recorded seconds
    assert runs.answered[0] == _key() and runs.exact[0]  # the baseline, enqueued first
    lookup = replay.Lookup(recording, NAMES)
    assert all(k is None or k in lookup.table for k in runs.answered)
    assert 0.0 <= replay.score(recording, runs, 4) <= 1.0
