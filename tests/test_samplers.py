"""The study process's samplers run on one torch thread and give the count back."""

from __future__ import annotations

import math

import optuna
import pytest
import torch

from autotune.exceptions import ConfigError
from autotune.samplers import (
    OneThreadSampler,
    WarpedSampler,
    make_sampler,
    modelled_values,
    one_torch_thread,
)


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
    assert sampler.fit_s > 0


def test_the_wrapper_proposes_what_the_wrapped_sampler_proposes() -> None:
    def objective(trial: optuna.Trial) -> float:
        return trial.suggest_float("x", -1, 1) ** 2

    plain = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=3))
    wrapped = optuna.create_study(sampler=OneThreadSampler(optuna.samplers.TPESampler(seed=3)))
    plain.optimize(objective, n_trials=15)
    wrapped.optimize(objective, n_trials=15)
    assert [t.params for t in plain.trials] == [t.params for t in wrapped.trials]


def test_each_trial_records_the_seconds_its_parameters_took_to_sample() -> None:
    from autotune.config import load_run_config
    from autotune.hardware import detect_capabilities
    from autotune.study import TrialObjective
    from autotune.testing import make_measurement

    config = load_run_config(["device=mock", "verify.rounds=0"])
    caps = detect_capabilities("mock")
    objective = TrialObjective(
        config, config.space, caps, lambda trial_config, timeout_s: make_measurement()
    )
    sampler = make_sampler("tpe", seed=0)
    study = optuna.create_study(directions=["maximize", "maximize", "minimize"], sampler=sampler)
    study.optimize(objective, n_trials=4)
    seconds = [t.user_attrs["sampler_s"] for t in study.trials]
    assert all(s >= 0 for s in seconds)
    assert sum(seconds) == pytest.approx(sampler.fit_s)


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


def test_modelled_values_take_logs_of_throughput_and_memory_and_impute_failures() -> None:

    study = _three_objective_study()
    _add(study, (1000.0, 0.9, 2.0**20))
    _add(study, (10.0, 0.95, 2.0**30))
    _add(study, (0.0, 0.0, 2.0**34), failed=True)  # out of memory: placeholder values
    modelled = modelled_values(study)
    assert modelled[0] == pytest.approx([math.log(1000.0), 0.9, math.log(2.0**20)])
    assert modelled[1] == pytest.approx([math.log(10.0), 0.95, math.log(2.0**30)])
    # The failed trial reads as the worst measured value of each objective, not as zeros.
    assert modelled[2] == pytest.approx([math.log(10.0), 0.9, math.log(2.0**30)])
    # The study itself keeps the raw figures.
    assert study.trials[0].values == [1000.0, 0.9, 2.0**20]


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


def test_unknown_sampler() -> None:
    with pytest.raises(ConfigError, match=r"^sampler=cmaes: unknown sampler"):
        make_sampler("cmaes", seed=0)
