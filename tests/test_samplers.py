"""The study process's samplers run on one torch thread and give the count back."""

from __future__ import annotations

import optuna
import pytest
import torch

from autotune.samplers import OneThreadSampler, one_torch_thread


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
    from autotune.study import TrialObjective, make_sampler
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
