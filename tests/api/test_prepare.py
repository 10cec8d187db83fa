"""prepare_run (autotune/api/_prepare.py): everything validated before anything is written;
and a workload study recording the metric prepare_run took from it."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from autotune.api import prepare_run, run_study
from autotune.exceptions import ConfigError, DataError, StorageError, WorkloadError
from autotune.objectives import OBJECTIVES, study_objectives
from autotune.storage import ResultsStore
from autotune.testing import FakeRunTrial, make_measurement

from ..workloads.sources import REGRESSION_SPACE, write_regression
from .runs import load_study, mock_run_config

# --------------------------------------------------------------------------------------------
# prepare_run


def test_prepare_mock_run_removes_nothing(sqlite_url: str) -> None:
    prepared = prepare_run(mock_run_config(sqlite_url))

    assert prepared.capabilities.simulated is True
    assert prepared.removed_choices == []
    assert prepared.space == prepared.config.space


def test_prepare_cpu_run_removes_what_a_cpu_cannot_run(sqlite_url: str) -> None:
    prepared = prepare_run(mock_run_config(sqlite_url, "device=cpu"))

    assert prepared.capabilities.kind == "cpu"
    assert "tf32" not in prepared.space.precision.values()
    assert "reduce-overhead" not in prepared.space.compile_mode.values()
    removed = [line.split(":")[0] for line in prepared.removed_choices]
    assert "precision=tf32" in removed
    assert "compile_mode=reduce-overhead" in removed


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["data=mnist", "data.root=/no/such/dir"], DataError),
        (["storage=not a url"], StorageError),
        (["device=cpu", "precision=tf32"], ConfigError),
    ],
)
def test_prepare_refuses_before_writing(
    tmp_path: Path, sqlite_url: str, args: list[str], error: type[Exception]
) -> None:
    with pytest.raises(error):
        prepare_run(mock_run_config(sqlite_url, *args))

    assert list(tmp_path.iterdir()) == []


def test_prepare_checks_the_workload_and_takes_its_metric(tmp_path: Path, sqlite_url: str) -> None:
    space = write_regression(tmp_path)

    prepared = prepare_run(mock_run_config(sqlite_url, f"space={space}", "device=cpu"))

    assert prepared.objectives == study_objectives("val_mse", "minimize")
    assert prepared.space.model.knobs == prepared.config.space.model.knobs  # nothing too big
    assert (
        prepare_run(mock_run_config(sqlite_url)).objectives == OBJECTIVES
    )  # the built-in: accuracy


@pytest.mark.parametrize(
    ("space", "args", "error", "message"),
    [
        (
            REGRESSION_SPACE.replace("  hidden: [4, 8]", "  hidden: [4, 8]\n  depth: [1]"),
            ["device=cpu"],
            WorkloadError,
            "model.depth: build_model() of regression.py:Regression has no such argument",
        ),
        (
            REGRESSION_SPACE,
            ["device=mock"],
            ConfigError,
            "device=mock: the mock device simulates the built-in workloads (cnn, mlp) only",
        ),
        (
            REGRESSION_SPACE + "constraints: {min_accuracy: 0.9}\n",
            ["device=cpu"],
            ConfigError,
            "constraints.min_accuracy: the workload's metric is val_mse, not accuracy",
        ),
    ],
    ids=["unknown-knob", "mock-device", "min-accuracy"],
)
def test_prepare_refuses_a_workload_before_writing(
    tmp_path: Path,
    space: str,
    args: list[str],
    error: type[Exception],
    message: str,
) -> None:
    path = write_regression(tmp_path, space)
    before = sorted(tmp_path.iterdir())
    url = f"sqlite:///{tmp_path / 'studies' / 'autotune.db'}"

    with pytest.raises(error) as err:
        prepare_run(mock_run_config(url, f"space={path}", *args))

    assert message in str(err.value)
    assert "\n" not in str(err.value)
    assert sorted(tmp_path.iterdir()) == before  # no database, no directory


def test_a_workload_study_records_its_metric(tmp_path: Path, sqlite_url: str) -> None:
    space = write_regression(tmp_path)
    config = mock_run_config(sqlite_url, f"space={space}", "device=cpu")
    prepared = prepare_run(config)
    fake = FakeRunTrial([make_measurement(val_metric=v, simulated=False) for v in (0.5, 0.2, 0.9)])

    result = run_study(config, 3, run_trial_fn=fake, prepared=prepared)

    study = load_study(config)
    assert result.finished == 3
    assert study.metric_names == ["throughput_sps", "val_mse", "peak_memory_bytes"]
    assert study.directions[1] == optuna.study.StudyDirection.MINIMIZE
    for trial_config, _ in fake.calls:
        assert trial_config.workload == config.space.workload_spec()
        assert set(trial_config.model) == {"hidden", "activation", "scale"}
    with ResultsStore.open(sqlite_url) as store:
        record = store.study(config.study)
        rows = store.trials(config.study)
    assert record is not None
    assert (record.metric_name, record.metric_direction) == ("val_mse", "minimize")
    assert sorted(r.val_metric for r in rows if r.val_metric is not None) == [0.2, 0.5, 0.9]
    assert {r.workload for r in rows} == {"regression.py:Regression"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["objective=time_to_accuracy"],
            "objective=time_to_accuracy needs train.target_accuracy",
        ),
        (["train.target_accuracy=0.98"], "train.target_accuracy: only read with objective="),
        (["train.eval_every_steps=10"], "train.eval_every_steps: only read with objective="),
        (
            [
                "objective=time_to_accuracy",
                "train.target_accuracy=0.98",
                "constraints.min_accuracy=0.9",
            ],
            "constraints.min_accuracy: not used with objective=time_to_accuracy",
        ),
    ],
)
def test_prepare_refuses_time_to_accuracy_settings_that_disagree(
    tmp_path: Path, sqlite_url: str, args: list[str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        prepare_run(mock_run_config(sqlite_url, *args))

    assert list(tmp_path.iterdir()) == []


def test_prepare_time_to_accuracy_has_two_objectives_and_keeps_the_metric(
    sqlite_url: str,
) -> None:
    prepared = prepare_run(
        mock_run_config(sqlite_url, "objective=time_to_accuracy", "train.target_accuracy=0.98")
    )

    assert [o.name for o in prepared.objectives] == ["time_to_accuracy_s", "peak_memory_bytes"]
    assert [o.direction for o in prepared.objectives] == ["minimize", "minimize"]
    assert prepared.metric.name == "accuracy"
    assert prepared.space.train.target == 0.98
