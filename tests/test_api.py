"""run_study and prepare_run (autotune/api.py), on SQLite in tmp_path.

Trials are played by FakeRunTrial (canned outcomes, then the mock cost model in this process);
one test goes through the real child-process runner on the mock device.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import optuna
import pytest
from optuna.trial import FrozenTrial, TrialState

from autotune.api import PreparedRun, StudyProgress, prepare_run, run_study
from autotune.config import RunConfig, load_run_config
from autotune.exceptions import ConfigError, DataError, StorageError, TrialError, WorkloadError
from autotune.hardware import DeviceCapabilities
from autotune.objectives import OBJECTIVES, study_objectives
from autotune.storage import ResultsStore
from autotune.testing import FakeRunTrial, make_capabilities, make_measurement

from .conftest import MINIMAL_SPACE
from .workloads.sources import REGRESSION_SPACE, write_regression


def _config(sqlite_url: str, *args: str) -> RunConfig:
    """A mock run; verification off (tests/test_api_verify.py covers it), so the fakes here
    see the search's trials alone."""
    return load_run_config(["device=mock", f"storage={sqlite_url}", "verify.rounds=0", *args])


def _prepared(config: RunConfig, caps: DeviceCapabilities) -> PreparedRun:
    """A run on a fake device, with the space deliberately left unrestricted."""
    return PreparedRun(
        config=config,
        capabilities=caps,
        space=config.space,
        removed_choices=[],
        objectives=OBJECTIVES,
    )


def _load(config: RunConfig) -> optuna.Study:
    return optuna.load_study(study_name=config.study, storage=config.storage)


def _summary(trials: list[FrozenTrial]) -> list[tuple[int, dict[str, object], list[float] | None]]:
    return [(t.number, t.params, t.values) for t in trials]


# --------------------------------------------------------------------------------------------
# prepare_run


def test_prepare_mock_run_removes_nothing(sqlite_url: str) -> None:
    prepared = prepare_run(_config(sqlite_url))

    assert prepared.capabilities.simulated is True
    assert prepared.removed_choices == []
    assert prepared.space == prepared.config.space


def test_prepare_cpu_run_removes_what_a_cpu_cannot_run(sqlite_url: str) -> None:
    prepared = prepare_run(_config(sqlite_url, "device=cpu"))

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
        prepare_run(_config(sqlite_url, *args))

    assert list(tmp_path.iterdir()) == []


def test_prepare_checks_the_workload_and_takes_its_metric(tmp_path: Path, sqlite_url: str) -> None:
    space = write_regression(tmp_path)

    prepared = prepare_run(_config(sqlite_url, f"space={space}", "device=cpu"))

    assert prepared.objectives == study_objectives("val_mse", "minimize")
    assert prepared.space.model.knobs == prepared.config.space.model.knobs  # nothing too big
    assert prepare_run(_config(sqlite_url)).objectives == OBJECTIVES  # the built-in: accuracy


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
        prepare_run(_config(url, f"space={path}", *args))

    assert message in str(err.value)
    assert "\n" not in str(err.value)
    assert sorted(tmp_path.iterdir()) == before  # no database, no directory


def test_a_workload_study_records_its_metric(tmp_path: Path, sqlite_url: str) -> None:
    space = write_regression(tmp_path)
    config = _config(sqlite_url, f"space={space}", "device=cpu")
    prepared = prepare_run(config)
    fake = FakeRunTrial([make_measurement(val_metric=v, simulated=False) for v in (0.5, 0.2, 0.9)])

    result = run_study(config, 3, run_trial_fn=fake, prepared=prepared)

    study = _load(config)
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


# --------------------------------------------------------------------------------------------
# run_study: counting, topping up, reproducibility


def test_reaches_exactly_n_finished_trials(sqlite_url: str) -> None:
    config = _config(sqlite_url)
    fake = FakeRunTrial()

    result = run_study(config, 6, run_trial_fn=fake)

    assert result.finished == 6
    assert result.ran == 6
    assert result.study_name == "cnn_small"
    assert result.storage == sqlite_url
    assert result.capabilities.simulated is True
    study = _load(config)
    assert len(study.trials) == 6
    assert all(t.state == TrialState.COMPLETE for t in study.trials)
    infeasible = [t for t in study.trials if t.user_attrs.get("failure") == "infeasible"]
    # Infeasible configurations are never launched, but they count (and teach the sampler).
    assert len(fake.calls) == 6 - len(infeasible)
    assert all(t.constraints["failed"] == 1.0 for t in infeasible)


def test_running_again_tops_up_and_keeps_earlier_trials(sqlite_url: str) -> None:
    config = _config(sqlite_url)
    run_study(config, 4, run_trial_fn=FakeRunTrial())
    before = _summary(_load(config).trials)

    result = run_study(config, 7, run_trial_fn=FakeRunTrial())

    assert (result.finished, result.ran) == (7, 3)
    after = _load(config).trials
    assert len(after) == 7
    assert _summary(after[:4]) == before


def test_running_again_with_the_same_target_runs_nothing(sqlite_url: str) -> None:
    config = _config(sqlite_url)
    run_study(config, 3, run_trial_fn=FakeRunTrial())
    fake = FakeRunTrial()

    result = run_study(config, 3, run_trial_fn=fake)

    assert (result.finished, result.ran) == (3, 0)
    assert fake.calls == []


def test_seed_makes_a_mock_study_reproducible(tmp_path: Path) -> None:
    def params(name: str, seed: int) -> list[dict[str, object]]:
        config = _config(f"sqlite:///{tmp_path}/{name}.db", f"seed={seed}")
        run_study(config, 12, run_trial_fn=FakeRunTrial())
        return [t.params for t in _load(config).trials]

    first = params("a", seed=3)

    assert params("b", seed=3) == first
    assert params("c", seed=4) != first


def test_on_trial_reports_every_finished_trial(sqlite_url: str) -> None:
    seen: list[StudyProgress] = []

    run_study(_config(sqlite_url), 4, run_trial_fn=FakeRunTrial(), on_trial=seen.append)

    assert [p.finished for p in seen] == [1, 2, 3, 4]
    assert {p.target for p in seen} == {4}
    assert [p.last.number for p in seen] == [0, 1, 2, 3]
    assert set(seen[-1].best) == {"throughput_sps", "accuracy", "peak_memory_bytes"}
    assert seen[-1].best["throughput_sps"] == max(p.last.values[0] for p in seen)


@pytest.mark.parametrize("n_trials", [0, -1])
def test_target_below_one_is_refused_before_writing(
    tmp_path: Path, sqlite_url: str, n_trials: int
) -> None:
    with pytest.raises(ConfigError, match=f"^--trials: must be >= 1, but got {n_trials}$"):
        run_study(_config(sqlite_url), n_trials, run_trial_fn=FakeRunTrial())

    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------------------------
# run_study: failures, infeasible configurations, the Pareto front


def test_failures_are_recorded_and_never_on_the_pareto_front(sqlite_url: str) -> None:
    config = _config(sqlite_url)
    # With an unknown memory size, a failure scores (0, 0, 0 bytes): by its values alone it
    # would be Pareto-optimal (nothing uses less memory), so only the constraint keeps it off.
    caps = make_capabilities("mock", memory_bytes=None)
    fake = FakeRunTrial(
        [
            make_measurement(throughput_sps=500.0, val_metric=0.9, peak_memory_bytes=8 << 20),
            TrialError("oom", "MemoryError: out of memory"),
            make_measurement(throughput_sps=900.0, val_metric=0.8, peak_memory_bytes=9 << 20),
            TrialError("timeout", "no result after the 600 s limit"),
        ]
    )

    result = run_study(config, 4, run_trial_fn=fake, prepared=_prepared(config, caps))

    trials = _load(config).trials
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 4
    assert [t.user_attrs.get("failure") for t in trials] == [None, "oom", None, "timeout"]
    assert [t.constraints["failed"] for t in trials] == [0.0, 1.0, 0.0, 1.0]
    assert trials[1].values == [0.0, 0.0, 0.0]
    assert trials[3].user_attrs["failure_detail"] == "no result after the 600 s limit"
    assert sorted(t.number for t in result.pareto_trials) == [0, 2]


def test_infeasible_configurations_are_never_launched(
    write_space: Callable[..., Path], sqlite_url: str
) -> None:
    # Forced tf32 on a CPU: restrict_space would refuse it up front, so the run is prepared by
    # hand to reach the per-trial rule.
    path = write_space(MINIMAL_SPACE + "precision: tf32\n")
    config = _config(sqlite_url, f"space={path}")
    fake = FakeRunTrial()

    result = run_study(
        config, 3, run_trial_fn=fake, prepared=_prepared(config, make_capabilities("cpu"))
    )

    assert fake.calls == []
    assert result.finished == 3
    assert result.pareto_trials == []
    trials = _load(config).trials
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 3
    assert {t.user_attrs["failure"] for t in trials} == {"infeasible"}
    assert all(t.constraints["failed"] == 1.0 for t in trials)


def test_only_infeasible_choices_are_refused(sqlite_url: str) -> None:
    config = _config(sqlite_url)
    caps = make_capabilities("cpu", count=2)
    fake = FakeRunTrial()

    run_study(config, 20, run_trial_fn=fake, prepared=_prepared(config, caps))

    trials = _load(config).trials
    refused = [t for t in trials if t.user_attrs.get("failure") == "infeasible"]
    complete = [t for t in trials if t.user_attrs.get("failure") != "infeasible"]
    assert len(trials) == 20 and all(t.state == TrialState.COMPLETE for t in trials)
    assert len(fake.calls) >= len(complete)  # every launched trial ran (some maybe retried)
    assert refused and complete
    for t in refused:
        assert t.params["precision"] == "tf32" or t.params["compile_mode"] == "reduce-overhead"
    for t in complete:
        assert t.params["precision"] != "tf32"
        assert t.params["compile_mode"] != "reduce-overhead"


def test_reopening_with_another_space_is_refused_and_adds_nothing(sqlite_url: str) -> None:
    run_study(_config(sqlite_url), 2, run_trial_fn=FakeRunTrial())

    with pytest.raises(
        ConfigError, match=r"^study=cnn_small: it was created with another search space"
    ):
        run_study(_config(sqlite_url, "train.epochs=2"), 4, run_trial_fn=FakeRunTrial())

    assert len(_load(_config(sqlite_url)).trials) == 2


def test_optuna_load_study_sees_every_trial(
    write_space: Callable[..., Path], sqlite_url: str
) -> None:
    config = _config(sqlite_url, "study=shared")
    caps = make_capabilities("cpu", count=2)
    fake = FakeRunTrial([TrialError("oom", "MemoryError")])

    result = run_study(config, 10, run_trial_fn=fake, prepared=_prepared(config, caps))

    study = optuna.load_study(study_name="shared", storage=sqlite_url)
    assert len(study.trials) == result.finished == 10
    assert study.metric_names == ["throughput_sps", "accuracy", "peak_memory_bytes"]
    states = {t.state for t in study.trials}
    assert states == {TrialState.COMPLETE}
    for t in study.trials:
        if t.state == TrialState.COMPLETE and "failure" not in t.user_attrs:
            assert t.user_attrs["throughput_sps"] == t.values[0]
            assert t.user_attrs["simulated"] is True  # FakeRunTrial's mock measurements


# --------------------------------------------------------------------------------------------
# The real runner: child processes on the mock device


@pytest.mark.slow
def test_mock_study_through_child_processes(sqlite_url: str) -> None:
    config = _config(sqlite_url, "mock.fault=crash", "mock.fault_trials=[1]")

    result = run_study(config, 3)

    trials = _load(config).trials
    assert result.finished == 3
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 3
    assert trials[1].user_attrs["failure"] == "crash"
    assert "killed by signal SIGSEGV" in trials[1].user_attrs["failure_detail"]
    assert trials[1] not in result.pareto_trials
    for t in (trials[0], trials[2]):
        assert t.user_attrs["simulated"] is True
        assert t.user_attrs["memory_kind"] == "simulated"
        assert t.constraints["failed"] == 0.0
