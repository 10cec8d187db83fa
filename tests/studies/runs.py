"""Run configurations shared by the api tests and the console tests."""

from __future__ import annotations

import optuna

from autotune.core.config import RunConfig, load_run_config


def mock_run_config(sqlite_url: str, *args: str) -> RunConfig:
    """A mock run; verification off (tests/study/api/test_verify.py covers it), so the fakes here
    see the search's trials alone. The default space, cnn_small, runs on digits, the data
    these tests' figures were written for (its own default is the shipped MNIST)."""
    data = [] if any(arg.startswith("space=") for arg in args) else ["data=digits"]
    return load_run_config(
        ["device=mock", *data, f"storage={sqlite_url}", "verify.rounds=0", *args]
    )


def load_study(config: RunConfig) -> optuna.Study:
    """The run's study, as Optuna loads it."""
    return optuna.load_study(study_name=config.study, storage=config.storage)
