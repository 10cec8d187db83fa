"""run_study (autotune/study/api/_run.py), on SQLite in tmp_path.

Trials are played by FakeRunTrial (canned outcomes, then the mock cost model in this process);
one test goes through the real child-process runner on the mock device.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import optuna
import pytest
from optuna.trial import FrozenTrial, TrialState

from autotune.core.config import RunConfig
from autotune.core.exceptions import ConfigError, TrialError
from autotune.core.hardware import DeviceCapabilities
from autotune.study.api import PreparedRun, StudyProgress, run_study
from autotune.study.objectives import METRIC_INDEX, OBJECTIVES
from autotune.testing import FakeRunTrial, make_capabilities, make_measurement
from tests.conftest import MINIMAL_SPACE
from tests.studies.runs import load_study, mock_run_config


def _prepared(config: RunConfig, caps: DeviceCapabilities) -> PreparedRun:
    """A run on a fake device, with the space deliberately left unrestricted."""
    return PreparedRun(
        config=config,
        capabilities=caps,
        space=config.space,
        removed_choices=[],
        objectives=OBJECTIVES,
        metric=OBJECTIVES[METRIC_INDEX],
    )


def _summary(trials: list[FrozenTrial]) -> list[tuple[int, dict[str, object], list[float] | None]]:
    return [(t.number, t.params, t.values) for t in trials]


# --------------------------------------------------------------------------------------------
# run_study: counting, topping up, reproducibility


def test_reaches_exactly_n_finished_trials(sqlite_url: str) -> None:
    config = mock_run_config(sqlite_url)
    fake = FakeRunTrial()

    result = run_study(config, 6, run_trial_fn=fake)

    assert result.finished == 6
    assert result.ran == 6
    assert result.study_name == "cnn_small"
    assert result.storage == sqlite_url
    assert result.capabilities.simulated is True
    study = load_study(config)
    assert len(study.trials) == 6
    assert all(t.state == TrialState.COMPLETE for t in study.trials)
    infeasible = [t for t in study.trials if t.user_attrs.get("failure") == "infeasible"]
    # Infeasible configurations are never launched, but they count (and teach the sampler);
    # the baseline runs twice (its first, cold run is discarded).
    assert len(fake.configs) == 6 - len(infeasible) + 1
    assert all(t.constraints["failed"] == 1.0 for t in infeasible)


def test_running_again_tops_up_and_keeps_earlier_trials(sqlite_url: str) -> None:
    config = mock_run_config(sqlite_url)
    run_study(config, 4, run_trial_fn=FakeRunTrial())
    before = _summary(load_study(config).trials)

    result = run_study(config, 7, run_trial_fn=FakeRunTrial())

    assert (result.finished, result.ran) == (7, 3)
    after = load_study(config).trials
    assert len(after) == 7
    assert _summary(after[:4]) == before


def test_running_again_with_the_same_target_runs_nothing(sqlite_url: str) -> None:
    config = mock_run_config(sqlite_url)
    run_study(config, 3, run_trial_fn=FakeRunTrial())
    fake = FakeRunTrial()

    result = run_study(config, 3, run_trial_fn=fake)

    assert (result.finished, result.ran) == (3, 0)
    assert fake.configs == []


def test_seed_makes_a_mock_study_reproducible(tmp_path: Path) -> None:
    def params(name: str, seed: int) -> list[dict[str, object]]:
        config = mock_run_config(f"sqlite:///{tmp_path}/{name}.db", f"seed={seed}")
        run_study(config, 12, run_trial_fn=FakeRunTrial())
        return [t.params for t in load_study(config).trials]

    first = params("a", seed=3)

    assert params("b", seed=3) == first
    assert params("c", seed=4) != first


def test_on_trial_reports_every_finished_trial(sqlite_url: str) -> None:
    seen: list[StudyProgress] = []

    run_study(mock_run_config(sqlite_url), 4, run_trial_fn=FakeRunTrial(), on_trial=seen.append)

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
        run_study(mock_run_config(sqlite_url), n_trials, run_trial_fn=FakeRunTrial())

    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------------------------
# run_study: failures, infeasible configurations, the Pareto front


def test_failures_are_recorded_and_never_on_the_pareto_front(sqlite_url: str) -> None:
    config = mock_run_config(sqlite_url)
    # With an unknown memory size, a failure scores (0, 0, 0 bytes): by its values alone it
    # would be Pareto-optimal (nothing uses less memory), so only the constraint keeps it off.
    caps = make_capabilities("mock", memory_bytes=None)
    fake = FakeRunTrial(
        [
            make_measurement(throughput_sps=400.0),  # the baseline's discarded warm-up run
            make_measurement(throughput_sps=500.0, val_metric=0.9, peak_memory_bytes=8 << 20),
            TrialError("oom", "MemoryError: out of memory"),
            make_measurement(throughput_sps=900.0, val_metric=0.8, peak_memory_bytes=9 << 20),
            TrialError("timeout", "no result after the 600 s limit"),
        ]
    )

    result = run_study(config, 4, run_trial_fn=fake, prepared=_prepared(config, caps))

    trials = load_study(config).trials
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
    config = mock_run_config(sqlite_url, f"space={path}")
    fake = FakeRunTrial()

    result = run_study(
        config, 3, run_trial_fn=fake, prepared=_prepared(config, make_capabilities("cpu"))
    )

    assert fake.configs == []
    assert result.finished == 3
    assert result.pareto_trials == []
    trials = load_study(config).trials
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 3
    assert {t.user_attrs["failure"] for t in trials} == {"infeasible"}
    assert all(t.constraints["failed"] == 1.0 for t in trials)


def test_only_infeasible_choices_are_refused(sqlite_url: str) -> None:
    # The random sampler proposes what the rules refuse; the GP asks again instead (below).
    config = mock_run_config(sqlite_url, "sampler=random")
    caps = make_capabilities("cpu", count=2)
    fake = FakeRunTrial()

    run_study(config, 20, run_trial_fn=fake, prepared=_prepared(config, caps))

    trials = load_study(config).trials
    refused = [t for t in trials if t.user_attrs.get("failure") == "infeasible"]
    complete = [t for t in trials if t.user_attrs.get("failure") != "infeasible"]
    assert len(trials) == 20 and all(t.state == TrialState.COMPLETE for t in trials)
    assert len(fake.configs) >= len(complete)  # every launched trial ran (some maybe retried)
    assert refused and complete
    for t in refused:
        assert t.params["precision"] == "tf32" or t.params["compile_mode"] == "reduce-overhead"
    for t in complete:
        assert t.params["precision"] != "tf32"
        assert t.params["compile_mode"] != "reduce-overhead"


def test_the_gp_spends_fewer_trials_than_random_on_what_the_rules_refuse(
    tmp_path: Path,
) -> None:
    caps = make_capabilities("cpu", count=2)  # no tf32, no reduce-overhead on a CPU
    refused = {}
    for sampler in ("random", "gp"):
        config = mock_run_config(f"sqlite:///{tmp_path / sampler}.db", f"sampler={sampler}")
        run_study(config, 20, run_trial_fn=FakeRunTrial(), prepared=_prepared(config, caps))
        trials = load_study(config).trials
        refused[sampler] = sum(t.user_attrs.get("failure") == "infeasible" for t in trials)

    assert refused["random"] >= 3, refused  # a quarter of each of two knobs' choices refused
    assert refused["gp"] < refused["random"], refused


def test_reopening_with_another_space_is_refused_and_adds_nothing(sqlite_url: str) -> None:
    run_study(mock_run_config(sqlite_url), 2, run_trial_fn=FakeRunTrial())

    with pytest.raises(
        ConfigError, match=r"^study=cnn_small: it was created with another search space"
    ):
        run_study(mock_run_config(sqlite_url, "train.epochs=2"), 4, run_trial_fn=FakeRunTrial())

    assert len(load_study(mock_run_config(sqlite_url)).trials) == 2


def test_optuna_load_study_sees_every_trial(
    write_space: Callable[..., Path], sqlite_url: str
) -> None:
    config = mock_run_config(sqlite_url, "study=shared")
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
    config = mock_run_config(
        sqlite_url, "advanced.mock.fault=crash", "advanced.mock.fault_trials=[1]"
    )

    result = run_study(config, 3)

    trials = load_study(config).trials
    assert result.finished == 3
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 3
    assert trials[1].user_attrs["failure"] == "crash"
    assert "killed by signal SIGSEGV" in trials[1].user_attrs["failure_detail"]
    assert trials[1] not in result.pareto_trials
    for t in (trials[0], trials[2]):
        assert t.user_attrs["simulated"] is True
        assert t.user_attrs["memory_kind"] == "simulated"
        assert t.constraints["failed"] == 0.0


# --------------------------------------------------------------------------------------------
# a failed baseline: the study stops there, and a rerun retries it


def test_a_failed_baseline_stops_the_study_and_a_rerun_retries_it(sqlite_url: str) -> None:
    config = mock_run_config(sqlite_url)
    broken = [True]

    def user_code(trial_config: object) -> object:
        if broken[0]:
            raise TrialError("error", "Traceback ...\nAttributeError: 'Trainer' has no datamodule")
        return FakeRunTrial()(trial_config)  # type: ignore[arg-type]

    result = run_study(config, 5, run_trial_fn=user_code)  # type: ignore[arg-type]

    assert result.baseline_failure == (
        "trial 0: error (AttributeError: 'Trainer' has no datamodule)"
    )
    assert (result.finished, result.ran) == (1, 1)  # no trial after the baseline's failure
    assert result.verification is None

    broken[0] = False  # the user fixed their code, and runs the same command again
    again = run_study(config, 5, run_trial_fn=user_code)  # type: ignore[arg-type]

    assert again.baseline_failure is None and again.finished == 5
    trials = load_study(config).trials
    assert trials[1].user_attrs.get("baseline") is True  # the baseline, queued again first
    assert "failure" not in trials[1].user_attrs


@pytest.mark.parametrize("sampler", ["gp", "tpe"])  # the samplers with a start-up design
def test_in_a_space_of_two_configurations_the_second_trial_is_the_other_one(
    write_space: Callable[..., Path], sqlite_url: str, sampler: str
) -> None:
    """The baseline's configuration is never proposed again while another one is left."""
    space = """\
name: two
model:
  family: cnn
  depth: 1
  width: 8
batch_size: 32
compile_mode: [none, default]
train:
  epochs: 1
"""
    config = mock_run_config(sqlite_url, f"space={write_space(space)}", f"sampler={sampler}")

    run_study(config, 2, run_trial_fn=FakeRunTrial())

    trials = load_study(config).trials
    assert [t.params["compile_mode"] for t in trials] == ["none", "default"]
