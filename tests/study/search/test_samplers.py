"""The study process's samplers run on one torch thread and give the count back."""

from __future__ import annotations

import contextlib
import itertools
import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pytest
import torch

from autotune.core.exceptions import ConfigError
from autotune.study.api import run_study
from autotune.study.search._samplers import (
    PRIOR_SLOPE_BOUNDS,
    REPEAT_LOG_PENALTY,
    STARTUP_DESIGN_SAMPLERS,
    DesignSampler,
    LeanGPSampler,
    OneThreadSampler,
    WarpedSampler,
    covering_design,
    design_levels,
    make_sampler,
    modelled_values,
    one_torch_thread,
)
from tests.studies import loss as loss_study


def test_one_torch_thread_restores_the_count() -> None:
    before = torch.get_num_threads()
    with one_torch_thread():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


class _RecordingSampler(optuna.samplers.RandomSampler):
    """A random sampler that notes the torch thread count at each call."""

    def __init__(self) -> None:
        super().__init__(seed=0)
        self.threads: list[int] = []

    def sample_relative(self, study, trial, search_space):  # type: ignore[no-untyped-def]
        self.threads.append(torch.get_num_threads())
        return super().sample_relative(study, trial, search_space)

    def sample_independent(self, study, trial, param_name, param_distribution):  # type: ignore[no-untyped-def]
        self.threads.append(torch.get_num_threads())
        return super().sample_independent(study, trial, param_name, param_distribution)


def test_the_wrapped_sampler_samples_on_one_thread_and_the_study_runs_as_before() -> None:
    inner = _RecordingSampler()
    sampler = OneThreadSampler(inner)
    study = optuna.create_study(sampler=sampler)
    before = torch.get_num_threads()
    study.optimize(lambda t: t.suggest_float("x", 0, 1) + t.suggest_int("n", 1, 4), n_trials=5)
    assert len(study.trials) == 5
    assert inner.threads and set(inner.threads) == {1}
    assert torch.get_num_threads() == before
    assert sampler.sampler_s > 0


def test_the_wrapper_proposes_what_the_wrapped_sampler_proposes() -> None:
    def objective(trial: optuna.Trial) -> float:
        return trial.suggest_float("x", -1, 1) ** 2

    plain = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=3))
    wrapped = optuna.create_study(sampler=OneThreadSampler(optuna.samplers.TPESampler(seed=3)))
    plain.optimize(objective, n_trials=15)
    wrapped.optimize(objective, n_trials=15)
    assert [t.params for t in plain.trials] == [t.params for t in wrapped.trials]


def test_each_trial_records_the_seconds_its_parameters_took_to_sample() -> None:
    from autotune.core.config import load_run_config
    from autotune.core.hardware import detect_capabilities
    from autotune.study.search import TrialObjective
    from autotune.testing import make_measurement

    config = load_run_config(["device=mock", "verify.rounds=0"])
    caps = detect_capabilities("mock")
    objective = TrialObjective(config, config.space, caps, lambda trial_config: make_measurement())
    sampler = make_sampler("tpe", seed=0)
    study = optuna.create_study(directions=["maximize", "maximize", "minimize"], sampler=sampler)
    study.optimize(objective, n_trials=4)
    seconds = [t.user_attrs["sampler_s"] for t in study.trials]
    assert all(s >= 0 for s in seconds)
    assert sum(seconds) == pytest.approx(sampler.sampler_s)


def _three_objective_study(sampler: optuna.samplers.BaseSampler | None = None) -> optuna.Study:
    return optuna.create_study(
        directions=["maximize", "maximize", "minimize"],
        sampler=sampler,
    )


def _add(
    study: optuna.Study, values: tuple[float, float, float], failed: bool = False, x: float = 0.5
) -> None:
    trial = optuna.trial.create_trial(
        params={"x": x},
        distributions={"x": optuna.distributions.FloatDistribution(0, 1)},
        values=list(values),
        user_attrs={"failure": "oom"} if failed else {},
        system_attrs={"constraints": [1.0 if failed else 0.0]},
    )
    study.add_trial(trial)


def test_modelled_values_take_logs_and_impute_failures_at_the_median() -> None:

    study = _three_objective_study()
    _add(study, (1000.0, 0.9, 2.0**20))
    _add(study, (10.0, 0.95, 2.0**30))
    _add(study, (0.0, 0.0, 2.0**34), failed=True)  # out of memory: placeholder values
    _add(study, (100.0, 0.7, 2.0**25))
    modelled = modelled_values(study)
    assert modelled[0] == pytest.approx([math.log(1000.0), 0.9, math.log(2.0**20)])
    assert modelled[1] == pytest.approx([math.log(10.0), 0.95, math.log(2.0**30)])
    # The failed trial reads as the median measured value of each objective (not as zeros,
    # and not as the worst: one failure must not condemn its whole region).
    assert modelled[2] == pytest.approx([math.log(100.0), 0.9, math.log(2.0**25)])
    # The study itself keeps the raw figures.
    assert study.trials[0].values == [1000.0, 0.9, 2.0**20]


def test_a_too_slow_trial_keeps_its_throughput_and_memory_and_only_its_metric_is_imputed() -> None:
    study = _three_objective_study()
    _add(study, (1000.0, 0.9, 2.0**20))
    _add(study, (100.0, 0.7, 2.0**25))
    _add(study, (10.0, 0.95, 2.0**30))
    study.add_trial(
        optuna.trial.create_trial(
            params={"x": 0.5},
            distributions={"x": optuna.distributions.FloatDistribution(0, 1)},
            values=[3.0, 0.0, 2.0**22],  # stopped after its first window: 3 samples/s
            user_attrs={"failure": "too_slow"},
            system_attrs={"constraints": [1.0]},
        )
    )
    assert modelled_values(study)[3] == pytest.approx([math.log(3.0), 0.9, math.log(2.0**22)])


def test_modelled_values_leave_failures_alone_while_nothing_is_measured() -> None:

    study = _three_objective_study()
    _add(study, (0.0, 0.0, 2.0**34), failed=True)
    assert modelled_values(study)[0] == pytest.approx([0.0, 0.0, 34 * math.log(2)])


def test_modelled_values_read_a_missed_target_as_the_slowest_time_to_accuracy() -> None:
    study = optuna.create_study(directions=["minimize", "minimize"])
    with pytest.warns(optuna.exceptions.ExperimentalWarning):
        study.set_metric_names(["time_to_accuracy_s", "peak_memory_bytes"])
    for seconds, memory, reached in (
        (4.0, 2.0**20, True),
        (9.0, 2.0**21, True),
        (2.0, 2.0**19, False),
    ):
        study.add_trial(
            optuna.trial.create_trial(
                params={"x": 0.5},
                distributions={"x": optuna.distributions.FloatDistribution(0, 1)},
                values=[seconds, memory],
                user_attrs={"target_reached": reached},
            )
        )

    modelled = modelled_values(study)

    assert modelled[0] == pytest.approx([math.log(4.0), math.log(2.0**20)])
    # 2 s without reaching the target is a lower bound, not a fast trial: the worst measured.
    assert modelled[2] == pytest.approx([math.log(9.0), math.log(2.0**21)])


class _ValueRecordingSampler(optuna.samplers.RandomSampler):
    """Notes the values of the COMPLETE trials in the study each relative call sees."""

    def __init__(self) -> None:
        super().__init__(seed=0)
        self.seen: list[list[list[float]]] = []

    def infer_relative_search_space(self, study, trial):  # type: ignore[no-untyped-def]
        return {"x": optuna.distributions.FloatDistribution(0, 1)}

    def sample_relative(self, study, trial, search_space):  # type: ignore[no-untyped-def]
        done = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        self.seen.append([list(t.values) for t in done])
        assert study.get_trials(deepcopy=False)[trial.number].state.name == "RUNNING"
        return {"x": 0.25}


def test_the_log_scale_sampler_shows_the_wrapped_sampler_log_values_and_stores_raw_ones() -> None:

    inner = _ValueRecordingSampler()
    study = _three_objective_study(WarpedSampler(inner))
    _add(study, (100.0, 0.9, 1000.0))
    study.optimize(lambda t: (t.suggest_float("x", 0, 1) * 10 + 1, 0.5, 2000.0), n_trials=2)
    assert [t.params["x"] for t in study.trials[1:]] == [0.25, 0.25]  # the relative proposal
    assert inner.seen[0] == [pytest.approx([math.log(100.0), 0.9, math.log(1000.0)])]
    assert inner.seen[1][1] == pytest.approx([math.log(3.5), 0.5, math.log(2000.0)])
    assert study.trials[1].values == [3.5, 0.5, 2000.0]  # raw figures in the study


def test_gp_behind_both_wrappers_samples_a_constrained_three_objective_study() -> None:

    def objective(trial: optuna.Trial) -> tuple[float, float, float]:
        x = trial.suggest_float("x", 0, 1)
        width = trial.suggest_categorical("width", [8, 16, 32])
        failed = x > 0.9
        trial.set_constraint("failed", 1.0 if failed else 0.0)
        if failed:
            trial.set_user_attr("failure", "oom")
            return 0.0, 0.0, 1e9
        return 1e4 * x / width, 1 - x / 2, 1e6 * width

    gp = optuna.samplers.GPSampler(seed=0, n_startup_trials=4)
    study = _three_objective_study(OneThreadSampler(WarpedSampler(gp)))
    study.optimize(objective, n_trials=8)
    assert len(study.trials) == 8
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)


def test_numeric_choices_reach_the_wrapped_sampler_as_ranks_and_come_back_as_values() -> None:

    seen: list[tuple[dict, dict]] = []

    class _Inner(optuna.samplers.RandomSampler):
        def sample_relative(self, study, trial, search_space):  # type: ignore[no-untyped-def]
            done = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
            seen.append((dict(search_space), done[0].params))
            return {"batch_size": 3, "precision": "bf16"}

        def infer_relative_search_space(self, study, trial):  # type: ignore[no-untyped-def]
            return optuna.search_space.intersection_search_space(study.get_trials())

    def objective(trial: optuna.Trial) -> tuple[float, float, float]:
        trial.suggest_categorical("batch_size", [256, 16, 64, 32])
        trial.suggest_categorical("precision", ["fp32", "bf16"])
        return 1.0, 0.5, 1.0

    study = _three_objective_study(WarpedSampler(_Inner()))
    study.enqueue_trial({"batch_size": 64, "precision": "fp32"})
    study.optimize(objective, n_trials=2)
    space, first_params = seen[0]
    assert space["batch_size"] == optuna.distributions.IntDistribution(0, 3)
    assert isinstance(space["precision"], optuna.distributions.CategoricalDistribution)
    assert first_params == {"batch_size": 2, "precision": "fp32"}  # 64 is the 3rd of 16..256
    assert study.trials[1].params == {"batch_size": 256, "precision": "bf16"}


class _ScriptedSampler(optuna.samplers.RandomSampler):
    """Proposes ``proposals`` in turn (relative sampling), recording the COMPLETE trials of
    the study it was asked with."""

    def __init__(self, proposals: list[dict[str, Any]]) -> None:
        super().__init__(seed=0)
        self.proposals = proposals
        self.seen: list[list[optuna.trial.FrozenTrial]] = []

    def infer_relative_search_space(self, study, trial):  # type: ignore[no-untyped-def]
        return optuna.search_space.intersection_search_space(study.get_trials())

    def sample_relative(self, study, trial, search_space):  # type: ignore[no-untyped-def]
        if not search_space:
            return {}
        self.seen.append(
            study.get_trials(deepcopy=True, states=(optuna.trial.TrialState.COMPLETE,))
        )
        return self.proposals[min(len(self.seen), len(self.proposals)) - 1]


def _width_objective(trial: optuna.Trial) -> tuple[float, float, float]:
    width = trial.suggest_categorical("width", [8, 16, 32, 64])
    trial.suggest_categorical("precision", ["fp32", "bf16"])
    trial.set_constraint("failed", 0.0)
    return 1000.0 / width, 0.9, 1e6 * width


def test_a_proposal_the_rules_refuse_is_asked_again_and_the_model_learns_it_failed() -> None:
    inner = _ScriptedSampler([{"width": 3, "precision": "bf16"}, {"width": 1, "precision": "fp32"}])
    sampler = WarpedSampler(inner, feasible=lambda knobs: knobs["width"] < 64)
    study = _three_objective_study(sampler)
    for width in (8, 32):
        study.enqueue_trial({"width": width, "precision": "fp32"})
    study.optimize(_width_objective, n_trials=3)

    assert study.trials[2].params == {"width": 16, "precision": "fp32"}  # the second proposal
    assert sampler.refused_proposals == 1
    first, second = inner.seen
    assert len(first) == 2 and len(second) == 3
    refused = second[2]  # the refused proposal, as the model saw it: a failed trial
    assert refused.params == {"width": 3, "precision": "bf16"}  # width as its rank
    assert refused.constraints == {"failed": 1.0}
    measured = [t.values for t in first]
    assert refused.values == pytest.approx(
        [statistics.median(v[i] for v in measured) for i in range(3)]
    )
    assert len(study.trials) == 3  # the refused proposal never became a trial


def test_a_refused_proposal_takes_the_median_of_the_measured_trials_only() -> None:
    """A time-to-accuracy trial that missed its target is a lower bound (modelled as the
    worst), not a measurement: the refused point's median leaves it out, as
    ``modelled_values``' median of failures does."""

    def objective(trial: optuna.Trial) -> tuple[float, float]:
        width = trial.suggest_categorical("width", [8, 16, 32, 64])
        trial.set_constraint("failed", 0.0)
        trial.set_user_attr("target_reached", width != 32)
        return 10.0 * width, 1e6 * width

    inner = _ScriptedSampler([{"width": 3}, {"width": 1}])
    sampler = WarpedSampler(inner, feasible=lambda knobs: knobs["width"] < 64)
    study = optuna.create_study(directions=["minimize", "minimize"], sampler=sampler)
    with pytest.warns(optuna.exceptions.ExperimentalWarning):
        study.set_metric_names(["time_to_accuracy_s", "peak_memory_bytes"])
    for width in (8, 16, 32):  # 32 misses its target: modelled as the worst, width 16
        study.enqueue_trial({"width": width})
    study.optimize(objective, n_trials=4)

    refused = inner.seen[1][3]
    assert refused.constraints == {"failed": 1.0}
    # the median of widths 8 and 16 alone; with the missed target it would be width 16's
    assert refused.values == pytest.approx(
        [(math.log(80.0) + math.log(160.0)) / 2, (math.log(8e6) + math.log(16e6)) / 2]
    )


def test_after_max_refused_proposals_the_last_one_is_handed_on() -> None:
    inner = _ScriptedSampler([{"width": 3, "precision": "bf16"}])
    sampler = WarpedSampler(inner, feasible=lambda knobs: False, max_refused=2)
    study = _three_objective_study(sampler)
    study.enqueue_trial({"width": 8, "precision": "fp32"})
    study.optimize(_width_objective, n_trials=2)

    assert len(inner.seen) == 3  # asked, refused twice, then handed on
    assert sampler.refused_proposals == 2
    assert study.trials[1].params == {"width": 64, "precision": "bf16"}


def test_nothing_is_refused_without_a_failed_constraint_to_teach_the_model() -> None:
    def objective(trial: optuna.Trial) -> tuple[float, float, float]:
        trial.suggest_categorical("width", [8, 16, 32, 64])
        trial.suggest_categorical("precision", ["fp32", "bf16"])
        return 1.0, 0.9, 1.0

    inner = _ScriptedSampler([{"width": 3, "precision": "bf16"}])
    sampler = WarpedSampler(inner, feasible=lambda knobs: False)
    study = _three_objective_study(sampler)
    study.enqueue_trial({"width": 8, "precision": "fp32"})
    study.optimize(objective, n_trials=2)

    assert len(inner.seen) == 1 and sampler.refused_proposals == 0


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("nsga2", optuna.samplers.NSGAIISampler),
        ("tpe", optuna.samplers.TPESampler),
        ("gp", optuna.samplers.GPSampler),
        ("random", optuna.samplers.RandomSampler),
    ],
)
def test_make_sampler(name: str, cls: type) -> None:
    sampler = make_sampler(name, seed=0)
    assert isinstance(sampler, OneThreadSampler)
    inner = (
        sampler.sampler.sampler if isinstance(sampler.sampler, WarpedSampler) else sampler.sampler
    )
    assert isinstance(inner, cls)
    assert isinstance(sampler.sampler, WarpedSampler) == (name == "gp")
    assert isinstance(inner, LeanGPSampler) == (name == "gp")


@pytest.mark.parametrize("name", ["nsga2", "tpe", "gp", "random"])
def test_only_samplers_with_a_random_start_up_take_the_design(name: str) -> None:
    sampler = make_sampler(name, seed=0, design=[{"x": 1}])
    assert isinstance(sampler.sampler, DesignSampler) == (name in STARTUP_DESIGN_SAMPLERS)
    assert set(STARTUP_DESIGN_SAMPLERS) == {"gp", "tpe"}


def test_unknown_sampler() -> None:
    with pytest.raises(ConfigError, match=r"^sampler=cmaes: unknown sampler"):
        make_sampler("cmaes", seed=0)


def test_a_failure_among_time_to_accuracy_trials_is_the_median_and_a_miss_the_worst() -> None:
    study = optuna.create_study(directions=["minimize", "minimize"])
    with pytest.warns(optuna.exceptions.ExperimentalWarning):
        study.set_metric_names(["time_to_accuracy_s", "peak_memory_bytes"])
    for seconds, memory, attrs in (
        (4.0, 2.0**20, {"target_reached": True}),
        (8.0, 2.0**22, {"target_reached": True}),
        (16.0, 2.0**21, {"target_reached": True}),
        (2.0, 2.0**19, {"target_reached": False}),
        (0.0, 0.0, {"failure": "oom"}),
    ):
        study.add_trial(
            optuna.trial.create_trial(
                params={"x": 0.5},
                distributions={"x": optuna.distributions.FloatDistribution(0, 1)},
                values=[seconds, memory],
                user_attrs=attrs,
            )
        )

    modelled = modelled_values(study)

    assert modelled[3] == pytest.approx([math.log(16.0), math.log(2.0**22)])  # the worst
    assert modelled[4] == pytest.approx([math.log(8.0), math.log(2.0**21)])  # the median


# --------------------------------------------------------------------------------------------
# the start-up design

LEVELS: dict[str, list[Any]] = {
    "depth": [2, 3, 4],
    "width": [8, 16, 32, 64],
    "batch_size": [16, 32, 64, 128, 256],
    "precision": ["fp32", "fp16", "bf16"],
    "memory_format": ["contiguous", "channels_last"],
    "compile_mode": ["none", "default", "max-autotune"],
    "num_workers": [0, 1, 2],
    "gpu_count": [1],
}


def _uncovered(rows: list[dict[str, Any]], levels: dict[str, list[Any]]) -> set[tuple[str, Any]]:
    return {(k, v) for k, values in levels.items() for v in values} - {
        (k, row[k]) for row in rows for k in levels
    }


@pytest.mark.parametrize("n_rows", [5, 9, 12])
def test_the_design_covers_every_level_of_every_knob(n_rows: int) -> None:
    rows = covering_design(LEVELS, n_rows, seed=3)

    assert len(rows) == n_rows
    assert _uncovered(rows, LEVELS) == set()
    assert all(list(row) == list(LEVELS) for row in rows)  # every knob, in order
    # Latin: a knob with as many levels as rows takes each level once.
    assert sorted(row["batch_size"] for row in covering_design(LEVELS, 5, seed=3)) == [
        16,
        32,
        64,
        128,
        256,
    ]


def test_the_design_is_deterministic_for_a_seed() -> None:
    assert covering_design(LEVELS, 9, seed=7) == covering_design(LEVELS, 9, seed=7)
    assert covering_design(LEVELS, 9, seed=7) != covering_design(LEVELS, 9, seed=8)


def test_refused_rows_are_replaced_by_feasible_ones_and_the_coverage_holds() -> None:
    def feasible(row: dict[str, Any]) -> bool:
        fits = row["width"] * row["batch_size"] <= 64 * 32  # big models at big batches do not
        bf16_ok = row["num_workers"] == 0 and row["width"] <= 16  # bf16: a narrow corner only
        return fits and (row["precision"] != "bf16" or bf16_ok)

    for seed in range(10):
        refused = [r for r in covering_design(LEVELS, 9, seed) if not feasible(r)]
        rows = covering_design(LEVELS, 9, seed, feasible)
        assert all(feasible(r) for r in rows)
        assert len(rows) == 9
        assert _uncovered(rows, LEVELS) == set(), (seed, refused)


def test_preferred_rows_are_chosen_where_the_coverage_allows_and_never_cost_a_level() -> None:
    def preferred(row: dict[str, Any]) -> bool:  # e.g. "fits in memory with a margin"
        return row["width"] * row["batch_size"] <= 32 * 32

    for seed in range(10):
        plain = covering_design(LEVELS, 9, seed)
        rows = covering_design(LEVELS, 9, seed, preferred=preferred)
        assert len(rows) == 9
        assert _uncovered(rows, LEVELS) == set(), seed
        # width 64 (or batch 256) fits no preferred row, so it goes in a row that is only
        # feasible; every other row is preferred.
        assert sum(not preferred(r) for r in rows) < sum(not preferred(r) for r in plain), seed
        assert sum(not preferred(r) for r in rows) <= 2, (seed, rows)


def test_a_row_nothing_can_repair_is_dropped() -> None:
    rows = covering_design({"a": [1, 2, 3], "b": ["x", "y"]}, 3, seed=0, feasible=lambda r: False)
    assert rows == []


def test_a_real_range_is_cut_into_strata() -> None:
    from autotune.core.config import FloatParam, IntParam

    levels = design_levels(
        {
            "dropout": FloatParam(low=0.0, high=0.4),
            "lr_mult": FloatParam(low=1.0e-2, high=1.0, log=True),
            "depth": IntParam(low=1, high=3),
        },
        4,
    )
    assert levels["dropout"] == pytest.approx([0.05, 0.15, 0.25, 0.35])
    assert levels["lr_mult"] == pytest.approx([10 ** (-2 + (i + 0.5) / 2) for i in range(4)])
    assert levels["depth"] == [1, 2, 3]


DESIGN = [{"x": i, "kind": "ab"[i % 2]} for i in range(4)]


def _design_objective(trial: optuna.Trial) -> float:
    return trial.suggest_int("x", 0, 9) + len(trial.suggest_categorical("kind", ["a", "b"]))


def test_proposed_trials_take_the_design_rows_in_order_after_the_queued_ones() -> None:
    study = optuna.create_study(sampler=DesignSampler(optuna.samplers.RandomSampler(0), DESIGN))
    study.enqueue_trial({"x": 9, "kind": "b"}, user_attrs={"baseline": True})
    study.optimize(_design_objective, n_trials=7)

    params = [t.params for t in study.trials]
    assert params[0] == {"x": 9, "kind": "b"}  # the baseline, queued
    assert params[1:5] == DESIGN
    assert params[5:] != DESIGN[:2]  # then the wrapped sampler


def test_a_resumed_study_goes_on_with_its_design_and_interrupted_rows_come_back(
    tmp_path: Any,
) -> None:
    storage = f"sqlite:///{tmp_path / 'd.db'}"

    def run(n_trials: int, interrupt_at: int | None = None) -> optuna.Study:
        study = optuna.load_study(
            study_name="s",
            storage=storage,
            sampler=DesignSampler(optuna.samplers.RandomSampler(1), DESIGN),
        )

        def objective(trial: optuna.Trial) -> float:
            value = _design_objective(trial)
            if trial.number == interrupt_at:
                raise KeyboardInterrupt  # Ctrl-C: the trial ends as FAIL
            return value

        with contextlib.suppress(KeyboardInterrupt):
            study.optimize(objective, n_trials=n_trials)
        return study

    optuna.create_study(study_name="s", storage=storage)
    run(2)  # rows 0 and 1
    run(5, interrupt_at=2)  # row 2 interrupted: the study stops there
    study = run(3)  # a new process: rows 3, then 2 again, then the wrapped sampler

    params = [t.params for t in study.trials]
    states = [t.state for t in study.trials]
    assert params[:4] == DESIGN
    assert states[2] == optuna.trial.TrialState.FAIL
    assert params[4] == DESIGN[2]  # the interrupted row, once more
    assert params[5] not in DESIGN[2:]


def test_many_workers_take_different_rows() -> None:
    workers = [DesignSampler(optuna.samplers.RandomSampler(i), DESIGN) for i in range(2)]
    study = optuna.create_study(sampler=workers[0])
    first = study.ask()  # worker 0 asks; worker 1 asks before worker 0 has sampled anything
    study.sampler = workers[1]
    second = study.ask()

    assert second.suggest_int("x", 0, 9) == DESIGN[1]["x"]
    study.sampler = workers[0]
    assert first.suggest_int("x", 0, 9) == DESIGN[0]["x"]


_SIX = {"x": [0, 1, 2], "kind": ["a", "b"]}


def _six_objective(trial: optuna.Trial) -> float:
    return trial.suggest_categorical("x", _SIX["x"]) + len(
        trial.suggest_categorical("kind", _SIX["kind"])
    )


def _six_study(design: list[dict[str, Any]], **kwargs: Any) -> optuna.Study:
    """A study of a 6-configuration space whose wrapped sampler (multivariate TPE) stays in
    its random start-up throughout, the baseline ``(0, a)`` queued first."""
    tpe = optuna.samplers.TPESampler(seed=3, multivariate=True, n_startup_trials=100)
    sampler = DesignSampler(tpe, design, **kwargs) if design or kwargs else tpe
    study = optuna.create_study(sampler=sampler)
    study.enqueue_trial({"x": 0, "kind": "a"}, user_attrs={"baseline": True})
    return study


def _configs(study: optuna.Study) -> list[tuple[Any, ...]]:
    return [(t.params["x"], t.params["kind"]) for t in study.trials]


def test_a_design_row_that_repeats_an_earlier_one_or_the_baseline_is_skipped() -> None:
    design = [{"x": 1, "kind": "a"}, {"x": 0, "kind": "a"}, {"x": 1, "kind": "a"}]
    design += [{"x": 2, "kind": "b"}]
    study = _six_study(design)
    study.optimize(_six_objective, n_trials=3)

    assert _configs(study) == [(0, "a"), (1, "a"), (2, "b")]


def test_the_random_start_up_after_the_design_proposes_untried_configurations() -> None:
    plain = _six_study([])
    plain.optimize(_six_objective, n_trials=6)
    assert len(set(_configs(plain))) < 6  # Optuna's random start-up repeats

    study = _six_study([{"x": 1, "kind": "b"}], seed=5)
    study.optimize(_six_objective, n_trials=8)

    configs = _configs(study)
    assert configs[:2] == [(0, "a"), (1, "b")]  # the baseline, then the design's row
    assert len(set(configs[:6])) == 6  # the whole space, each configuration once
    assert set(configs[6:]) <= set(configs[:6])  # then the wrapped sampler draws again


def test_an_untried_configuration_passes_the_feasibility_rules() -> None:
    def feasible(knobs: Any) -> bool:
        return knobs != {"x": 2, "kind": "b"}

    study = _six_study([], feasible=feasible, seed=1)
    study.optimize(_six_objective, n_trials=5)

    configs = _configs(study)
    assert len(set(configs)) == 5
    assert (2, "b") not in configs


def test_a_space_that_cannot_be_enumerated_is_left_to_the_wrapped_sampler() -> None:
    sampler = DesignSampler(optuna.samplers.RandomSampler(0), [])
    study = optuna.create_study(sampler=sampler)
    study.ask()
    trial = study.trials[0]
    ten = optuna.distributions.CategoricalDistribution(list(range(10)))
    small = {"k0": ten, "n": optuna.distributions.IntDistribution(0, 8, step=4)}
    wide = {f"k{i}": ten for i in range(4)}  # 10,000 combinations
    real = {"lr": optuna.distributions.FloatDistribution(1e-4, 1e-1, log=True)}

    assert sampler.untried_configuration(study, trial, small) is not None
    assert sampler.untried_configuration(study, trial, wide) is None
    assert sampler.untried_configuration(study, trial, real) is None


# --------------------------------------------------------------------------------------------
# LeanGPSampler: every objective on every knob, prior means, repeats (its private Optuna
# names: test_optuna_private_names.py)


SPACE = {
    "width": optuna.distributions.CategoricalDistribution([8, 16, 32]),
    "compile_mode": optuna.distributions.CategoricalDistribution(["none", "default"]),
    "num_workers": optuna.distributions.IntDistribution(0, 2),
}


def _knob_study(n: int, seed: int = 0, skip: Sequence[tuple[Any, ...]] = ()) -> optuna.Study:
    """A study whose accuracy depends on width only; throughput on every knob. Its ``n``
    trials cycle through :data:`SPACE`'s configurations, less those in ``skip``."""
    study = _three_objective_study()
    rng = np.random.default_rng(seed)
    for width, mode, workers in itertools.islice(
        itertools.cycle(itertools.product([8, 16, 32], ["none", "default"], [0, 1, 2])), n
    ):
        if (width, mode, workers) in skip:
            continue
        noise = float(rng.normal(0, 0.01))
        study.add_trial(
            optuna.trial.create_trial(
                params={"width": width, "compile_mode": mode, "num_workers": workers},
                distributions=SPACE,
                values=[
                    100.0 * width * (2 if mode == "default" else 1) / (1 + workers),
                    0.5 + width / 100 + noise,
                    1e6 * width,
                ],
            )
        )
    return study


def test_every_objective_gp_sees_every_knob_and_optunas_fit_is_restored() -> None:
    study = _knob_study(12)
    sampler = LeanGPSampler(seed=0, n_startup_trials=4)
    trial = study.ask()
    sampler.sample_relative(study, study._storage.get_trial(trial._trial_id), SPACE)

    gps = sampler._gprs_cache_list or []
    assert len(gps) == 3
    for gp in gps:  # throughput, the metric and memory: inputs vary on every knob
        assert all(np.ptp(gp._X_train.numpy(), axis=0) > 0)
    from optuna._gp import gp as optuna_gp
    from optuna.samplers._gp import sampler as gp_sampler_module

    assert gp_sampler_module.gp.fit_kernel_params is optuna_gp.fit_kernel_params


def test_the_gp_proposes_with_torch_functions_off_and_its_tensors_on_the_cpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GPSampler proposes under ``torch.device("cpu")``, a torch-function mode every torch
    call would go through; LeanGPSampler turns torch functions off around its fits and
    acquisition, and a global default device (the same kind of mode) still does not move
    them off the CPU."""
    enabled: list[bool] = []
    real = optuna.samplers.GPSampler._sample_relative_impl

    def recording(self: Any, *args: Any, **kwargs: Any) -> Any:
        enabled.append(torch._C._is_torch_function_enabled())
        return real(self, *args, **kwargs)

    monkeypatch.setattr(optuna.samplers.GPSampler, "_sample_relative_impl", recording)
    study = _knob_study(12)
    sampler = LeanGPSampler(seed=0, n_startup_trials=4)
    trial = study.ask()
    torch.set_default_device("meta")  # a tensor made there could not be computed on
    try:
        proposal = sampler.sample_relative(study, study._storage.get_trial(trial._trial_id), SPACE)
    finally:
        torch.set_default_device(None)

    assert enabled == [False]
    assert set(proposal) == set(SPACE)
    assert all(gp._X_train.device.type == "cpu" for gp in sampler._gprs_cache_list or [])
    assert torch._C._is_torch_function_enabled()  # restored after the proposal


# --------------------------------------------------------------------------------------------
# LeanGPSampler: prior means


def _fit_change(values: np.ndarray, prior: np.ndarray, measured: np.ndarray | None = None) -> Any:
    """A _FitChange of a minimized objective whose prior at row i is ``prior[i]``, and the
    standardized values Optuna would fit for ``values`` (sign -1, ddof-0 std)."""
    from autotune.study.search._samplers._gp import _FitChange

    class _Prior:
        def __call__(self, X: np.ndarray, objective: str) -> np.ndarray:
            return prior[X[:, 0].astype(int)]

    Y = -(values - values.mean()) / values.std()
    change = _FitChange(
        prior=_Prior(),  # type: ignore[arg-type]
        objective="peak_memory_bytes",
        direction_sign=-1.0,
        value_std=float(values.std()),
        measured=measured,
    )
    return change, Y


def test_the_prior_mean_is_the_least_squares_line_of_the_values_on_the_prior() -> None:
    h = np.array([1.0, 2.0, 3.0, 5.0, 8.0])
    X = np.arange(len(h), dtype=float)[:, None]
    change, Y = _fit_change(1.5 * h + 10.0, h)
    mean = change.prior_mean(X, Y)
    assert mean is not None
    np.testing.assert_allclose(mean(X), Y)  # the line explains every value: residuals 0
    # A value that falls as the prior rises gets the bound's slope, 0: the prior drops out.
    change, Y = _fit_change(-h, h)
    assert PRIOR_SLOPE_BOUNDS[0] == 0.0
    np.testing.assert_allclose(change.prior_mean(X, Y)(X), 0.0)
    # Steeper than the upper bound: held to it (2 on the modelled scale).
    change, Y = _fit_change(5.0 * h, h)
    slope = np.polyfit(h, change.prior_mean(X, Y)(X), 1)[0] * -change.value_std
    assert slope == pytest.approx(PRIOR_SLOPE_BOUNDS[1])


def test_imputed_values_and_unknown_rows_are_left_out_of_the_prior_mean() -> None:
    h = np.array([1.0, 2.0, 3.0, 9.0])
    X = np.arange(len(h), dtype=float)[:, None]
    values = np.array([2.0, 4.0, 6.0, 4.0])  # the last row failed: imputed at the median
    change, Y = _fit_change(values, h, measured=np.array([True, True, True, False]))
    mean = change.prior_mean(X, Y)
    assert mean is not None
    # Fitted on the measured rows alone: slope 2, centred on their mean prior (2).
    np.testing.assert_allclose(mean(X[:3]) * -change.value_std, [-2.0, 0.0, 2.0])
    # A row the prior does not know is left out of the fit, and gets no prior (the centre).
    change, Y = _fit_change(values, np.array([1.0, 2.0, math.nan, 9.0]), measured=None)
    mean = change.prior_mean(X, Y)
    assert mean is not None and mean(X)[2] == 0.0
    change, Y = _fit_change(
        values, np.array([1.0, math.nan, math.nan, 9.0]), measured=np.array([1, 1, 1, 0]) > 0
    )
    assert change.prior_mean(X, Y) is None  # fewer than 2 measured rows with a prior
    change, Y = _fit_change(values, np.full(4, 3.0))
    assert change.prior_mean(X, Y) is None  # the same prior everywhere says nothing


def _memory_study() -> optuna.Study:
    """A study over widths 8-32 whose peak memory is 1 MB x width, exactly."""
    study = _three_objective_study()
    for width, mode, workers in itertools.product([8, 16, 32], ["none", "default"], [0, 1]):
        study.add_trial(
            optuna.trial.create_trial(
                params={"width": width, "compile_mode": mode, "num_workers": workers},
                distributions=SPACE_64,
                values=[100.0 * width / (1 + workers), 0.5 + width / 100, 1e6 * width],
            )
        )
    return study


SPACE_64 = {**SPACE, "width": optuna.distributions.CategoricalDistribution([8, 16, 32, 64])}


def _normalized(params: dict[str, Any]) -> torch.Tensor:
    from optuna._gp import search_space as gp_search_space

    trial = optuna.trial.create_trial(params=params, distributions=SPACE_64, values=[0, 0, 0])
    row = gp_search_space.SearchSpace(SPACE_64).get_normalized_params([trial])
    return torch.from_numpy(row)


def test_the_memory_gp_predicts_an_untried_width_from_its_prior_mean() -> None:
    study = _memory_study()
    asked: list[dict[str, Any]] = []

    def estimate(knobs: Any) -> dict[str, float]:
        asked.append(dict(knobs))
        return {"peak_memory_bytes": 1e6 * knobs["width"]}

    predictions = {}
    for prior in (None, estimate):
        sampler = LeanGPSampler(seed=0, n_startup_trials=4, prior_mean=prior)
        trial = study.ask()
        sampler.sample_relative(study, study._storage.get_trial(trial._trial_id), SPACE_64)
        memory_gp = (sampler._gprs_cache_list or [])[2]
        mean, _ = memory_gp.posterior(
            _normalized({"width": 64, "compile_mode": "none", "num_workers": 0})
        )
        predictions[prior is not None] = mean.item()
    values = np.array([1e6 * w for w in [8, 16, 32] for _ in range(4)])
    truth = -(64e6 - values.mean()) / values.std()  # width 64, standardized as Optuna does
    assert predictions[True] == pytest.approx(truth, rel=0.05)
    assert abs(predictions[False] - truth) > 1.0  # a zero-mean GP stays near what it saw
    assert {a["width"] for a in asked} >= {8, 16, 32, 64}  # trials and candidates priced


def test_priced_rows_are_kept_from_one_proposal_to_the_next() -> None:
    study = _memory_study()

    def estimate(knobs: Any) -> dict[str, float]:
        return {"peak_memory_bytes": 1e6 * knobs["width"]}

    lean = LeanGPSampler(seed=0, n_startup_trials=4)
    sampler = WarpedSampler(lean, prior_mean=estimate)
    kept = []
    for _ in range(2):
        trial = study.ask()
        sampler.sample_relative(study, study._storage.get_trial(trial._trial_id), SPACE_64)
        kept.append(lean._row_prior)
    assert kept[0] is not None and kept[0] is kept[1]  # same prior, same space: same rows
    sampler.prior_mean = lambda knobs: {"peak_memory_bytes": 2e6 * knobs["width"]}
    trial = study.ask()
    sampler.sample_relative(study, study._storage.get_trial(trial._trial_id), SPACE_64)
    assert lean._row_prior is not kept[0]  # another prior: priced again


def test_the_warped_view_passes_the_prior_on_its_scales() -> None:
    study = _memory_study()
    seen: list[tuple[dict[str, Any], dict[str, float]]] = []

    def estimate(knobs: Any) -> dict[str, float]:
        return {"peak_memory_bytes": 1e6 * knobs["width"]}

    lean = LeanGPSampler(seed=0, n_startup_trials=4)
    original = lean.fit_changes

    def fit_changes(view, completed, space):  # type: ignore[no-untyped-def]
        assert lean.prior_mean is not None
        for t in completed[:2]:
            seen.append((dict(t.params), dict(lean.prior_mean(t.params))))
        return original(view, completed, space)

    lean.fit_changes = fit_changes  # type: ignore[method-assign]
    sampler = WarpedSampler(lean, prior_mean=estimate)
    trial = study.ask()
    sampler.sample_relative(study, study._storage.get_trial(trial._trial_id), SPACE_64)
    # The GP sees width as its rank (8 -> 0) and memory as its logarithm.
    assert seen[0] == (
        {"width": 0, "compile_mode": "none", "num_workers": 0},
        {"peak_memory_bytes": pytest.approx(math.log(8e6))},
    )
    assert lean.prior_mean is None  # restored after the call
    assert (lean._gprs_cache_list or [])[2]._prior is not None


def test_the_metric_names_reach_the_gp_through_the_warped_view() -> None:
    seen: list[Any] = []

    class _Inner(optuna.samplers.RandomSampler):
        def sample_relative(self, study, trial, search_space):  # type: ignore[no-untyped-def]
            seen.append(study.metric_names)
            return {}

        def infer_relative_search_space(self, study, trial):  # type: ignore[no-untyped-def]
            return {"x": optuna.distributions.FloatDistribution(0, 1)}

    study = optuna.create_study(
        directions=["minimize", "minimize"], sampler=WarpedSampler(_Inner())
    )
    with pytest.warns(optuna.exceptions.ExperimentalWarning):
        study.set_metric_names(["time_to_accuracy_s", "peak_memory_bytes"])
    study.optimize(lambda t: (t.suggest_float("x", 0, 1), 1.0), n_trials=1)
    assert seen == [["time_to_accuracy_s", "peak_memory_bytes"]]


# --------------------------------------------------------------------------------------------
# LeanGPSampler: no repeated proposals


def _loss_study_configs(
    directory: Path, penalty: float, monkeypatch: pytest.MonkeyPatch
) -> list[tuple[Any, ...]]:
    """The knob values of the 12 trials of tests/studies/loss.py's study (a space of 12
    configurations, deterministic figures), with ``penalty`` for a repeated proposal."""
    monkeypatch.setattr("autotune.study.search._samplers._gp.REPEAT_LOG_PENALTY", penalty)
    directory.mkdir()
    config = loss_study.loss_config(directory, "verify.rounds=0")
    run_study(config, loss_study.N_TRIALS, run_trial_fn=loss_study.scripted_loss)
    study = optuna.load_study(study_name=config.study, storage=config.storage)
    return [tuple(t.params.values()) for t in sorted(study.trials, key=lambda t: t.number)]


def test_the_gp_proposes_untried_configurations_while_there_are_any(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repeating = _loss_study_configs(tmp_path / "plain", 0.0, monkeypatch)
    assert len(set(repeating)) < len(repeating)  # Optuna's own acquisition re-proposes

    configs = _loss_study_configs(tmp_path / "untried", REPEAT_LOG_PENALTY, monkeypatch)

    assert len(configs) == loss_study.N_TRIALS == 12
    assert len(set(configs)) == 12  # the whole space, each configuration once


def _proposal_for_a_trial_that_fixes_the_width(monkeypatch: pytest.MonkeyPatch, fix: bool) -> Any:
    """The configuration a queued trial that fixes ``width=8`` runs, in a study of
    :data:`SPACE` where every configuration was tried but the fastest one, ``(32, default,
    0)``, and ``(8, none, 1)``."""
    if not fix:  # the GP as Optuna has it: the acquisition maximized over every knob
        monkeypatch.setattr("autotune.study.search._samplers._gp._fixed_columns", lambda *args: {})
    study = _knob_study(18, skip=((32, "default", 0), (8, "none", 1)))
    study.sampler = WarpedSampler(LeanGPSampler(seed=0, n_startup_trials=4))
    study.enqueue_trial({"width": 8})  # e.g. a trial that keeps the baseline's model
    trial = study.ask()
    return (
        trial.suggest_categorical("width", [8, 16, 32]),
        trial.suggest_categorical("compile_mode", ["none", "default"]),
        trial.suggest_int("num_workers", 0, 2),
    )


def test_a_trial_that_fixes_some_knobs_gets_the_best_untried_configuration_it_can_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with monkeypatch.context() as patched:  # width 8 and anything else: tried before
        assert _proposal_for_a_trial_that_fixes_the_width(patched, fix=False) != (8, "none", 1)

    assert _proposal_for_a_trial_that_fixes_the_width(monkeypatch, fix=True) == (8, "none", 1)
