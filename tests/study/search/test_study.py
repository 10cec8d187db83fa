"""The Optuna side: storage, samplers, the study record and the trial objective
(autotune/study/search/_opening.py, autotune/study/search/_objective.py). Trials are run by FakeRunTrial; no child
process is started."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.trial import FrozenTrial, TrialState

from autotune.core.config import RunConfig, SearchSpace, load_run_config, load_space
from autotune.core.exceptions import ConfigError, TrialError
from autotune.core.hardware import DeviceCapabilities
from autotune.study.baseline import baseline_global_batch, enqueue_baseline
from autotune.study.feasibility import (
    estimate_trial_memory,
    fits_memory_with_margin,
    restrict_space,
    trial_infeasibility_reason,
)
from autotune.study.objectives import (
    OBJECTIVES,
    failed_values,
    objective_values,
    objectives_of_study,
    study_metric,
    study_objectives,
    study_target,
)
from autotune.study.search import (
    GP_STARTUP_TRIALS,
    LeanGPSampler,
    TrialObjective,
    WarpedSampler,
    count_finished,
    open_study,
    prior_mean,
    startup_design,
    study_sampler,
)
from autotune.study.search._opening import feasibility_test, knob_trial_config
from autotune.study.search._samplers import (
    DesignSampler,
    OneThreadSampler,
    covering_design,
    design_levels,
)
from autotune.study.storage import open_storage
from autotune.testing import FakeRunTrial, make_capabilities, make_measurement
from autotune.trial.measure import Measurement
from tests.conftest import MINIMAL_SPACE
from tests.studies.mock import DEFAULT_PARAMS

#: GPU memory that refuses about half the rows of cnn_small's unrepaired design (8x8 digits).
TIGHT_MEMORY_BYTES = 16 << 20
DIRECTIONS = [optuna.study.StudyDirection.MAXIMIZE] * 2 + [optuna.study.StudyDirection.MINIMIZE]


def _run_config(*args: str) -> RunConfig:
    return load_run_config(["device=mock", "data=digits", *args])


#: One GPU: every configuration a seeded random sampler proposes runs on the mock's simulated
#: GPU (two would let it propose CUDA graphs under DDP, which a GPU, simulated too, refuses).
ONE_GPU = "gpu_count=[1]"


def _optimize(
    objective: TrialObjective, n_trials: int, study: optuna.Study | None = None
) -> optuna.Study:
    """Run the objective in an in-memory study with a seeded random sampler."""
    study = study or optuna.create_study(
        directions=[o.direction for o in OBJECTIVES],
        sampler=optuna.samplers.RandomSampler(seed=0),
    )
    study.optimize(objective, n_trials=n_trials)
    return study


def _objective(
    run_trial: FakeRunTrial,
    *,
    caps: DeviceCapabilities | None = None,
    space: SearchSpace | None = None,
    config: RunConfig | None = None,
    **kwargs: Any,
) -> TrialObjective:
    config = config or _run_config()
    return TrialObjective(
        config, space or config.space, caps or make_capabilities("mock"), run_trial, **kwargs
    )


# --------------------------------------------------------------------------------------------
# open_study


def test_new_study_records_objectives_and_space(sqlite_url: str) -> None:
    config = _run_config(f"storage={sqlite_url}", "study=s1")
    caps = make_capabilities("mock")

    study = open_study(config, config.space, caps, open_storage(sqlite_url))

    assert study.directions == DIRECTIONS
    assert study.metric_names == ["throughput_sps", "accuracy", "peak_memory_bytes"]
    assert objectives_of_study(study) == OBJECTIVES
    record = study.user_attrs["autotune"]
    assert record["space_source"] == "search_spaces/cnn_small.yaml"
    assert record["device_kind"] == "mock"
    assert record["simulated"] is True
    assert SearchSpace.model_validate(record["space"]) == config.space
    assert isinstance(study.sampler, OneThreadSampler)
    design = study.sampler.sampler  # the default sampler, GP, after its start-up design
    assert isinstance(design, DesignSampler)
    assert design.design == startup_design(config, config.space, caps)
    assert isinstance(design.sampler, WarpedSampler)
    assert isinstance(design.sampler.sampler, LeanGPSampler)
    # The memory estimate is the prior mean, which the warped view passes on per proposal.
    assert design.sampler.prior_mean is not None and design.sampler.feasible is not None
    assert design.sampler.sampler.prior_mean is None


def test_reopening_with_the_same_space_loads_the_study(sqlite_url: str) -> None:
    config = _run_config(f"storage={sqlite_url}", "study=s1")
    caps = make_capabilities("mock")
    first = open_study(config, config.space, caps, open_storage(sqlite_url))
    first.add_trial(optuna.trial.create_trial(values=[1.0, 0.5, 2.0]))

    again = open_study(config, config.space, caps, open_storage(sqlite_url))

    assert again.study_name == "s1"
    assert len(again.trials) == 1


def _levels(space: SearchSpace) -> set[tuple[str, Any]]:
    return {(name, v) for name, knob in space.knobs().items() for v in knob.values()}


def _covered(rows: list[dict[str, Any]]) -> set[tuple[str, Any]]:
    return {(name, v) for row in rows for name, v in row.items()}


@pytest.mark.parametrize(
    ("caps", "screened"),
    [
        (make_capabilities("mock"), None),
        (make_capabilities("cuda", count=2), {"fp16": "screened: far below fp32's peak"}),
        # Tight memory: the widest models at the largest batches do not fit.
        (make_capabilities("cuda", count=2, memory_bytes=TIGHT_MEMORY_BYTES), None),
    ],
    ids=["mock", "screened", "tight-memory"],
)
@pytest.mark.parametrize("n_queued", [1, 4])
def test_the_startup_design_covers_every_level_with_feasible_rows(
    caps: DeviceCapabilities, screened: dict[str, str] | None, n_queued: int
) -> None:
    config = _run_config()
    space, _ = restrict_space(config.space, caps, screened)

    rows = startup_design(config, space, caps, n_queued=n_queued)

    most_levels = max(len(k.values()) for k in space.knobs().values())
    n_rows = max(GP_STARTUP_TRIALS - n_queued, most_levels)
    assert len(rows) == n_rows
    unrepaired = covering_design(design_levels(space.knobs(), n_rows), n_rows, config.seed)
    refused = [
        r
        for r in unrepaired
        if trial_infeasibility_reason(knob_trial_config(config, space, caps, r), caps)
    ]
    # Repairs were needed on every GPU, the mock's simulated one too: CUDA graphs under DDP,
    # and the tight memory.
    assert bool(refused) == caps.is_gpu
    assert _covered(rows) == _levels(space)
    assert screened is None or all(row["precision"] != "fp16" for row in rows)
    for row in rows:
        reason = trial_infeasibility_reason(knob_trial_config(config, space, caps, row), caps)
        assert reason is None, (row, reason)
    assert rows == startup_design(config, space, caps, n_queued=n_queued)  # deterministic


def test_the_design_prefers_rows_that_fit_in_memory_even_if_the_estimate_is_too_low() -> None:
    config = _run_config()
    # 24 MiB: some rows fit with the margin and some levels fit only without it.
    caps = make_capabilities("cuda", count=2, memory_bytes=24 << 20)
    space, _ = restrict_space(config.space, caps)

    rows = startup_design(config, space, caps)

    def fits(row: dict[str, Any]) -> bool:
        return fits_memory_with_margin(knob_trial_config(config, space, caps, row), caps)

    margin_rows = [r for r in rows if fits(r)]
    assert 0 < len(margin_rows) < len(rows)
    assert _covered(rows) == _levels(space)
    # A row that may run out of memory is there only for a level no margin row holds.
    for row in rows:
        if not fits(row):
            assert set(row.items()) - _covered(margin_rows), row


def _tight_gpus() -> tuple[
    RunConfig, DeviceCapabilities, SearchSpace, dict[str, Any], dict[str, Any]
]:
    """Two GPUs of :data:`TIGHT_MEMORY_BYTES`, the space restricted to them, and its
    smallest and largest configurations (every knob at its first, or last, value)."""
    config = _run_config()
    caps = make_capabilities("cuda", count=2, memory_bytes=TIGHT_MEMORY_BYTES)
    space, _ = restrict_space(config.space, caps)
    knobs = space.knobs()
    smallest = {name: knob.values()[0] for name, knob in knobs.items()}
    largest = {name: knob.values()[-1] for name, knob in knobs.items()}
    return config, caps, space, smallest, largest


def test_the_gp_checks_its_proposals_against_the_same_rules_as_the_design() -> None:
    config, caps, space, smallest, largest = _tight_gpus()
    feasible = feasibility_test(config, space, caps)

    def rules_accept(row: dict[str, Any]) -> bool:
        reason = trial_infeasibility_reason(knob_trial_config(config, space, caps, row), caps)
        return reason is None

    for row in (smallest, largest, {**smallest, "gpu_count": 3}):
        assert feasible(row) == rules_accept(row), row
    assert not feasible(largest)  # the widest model at the largest batch: tight memory
    assert feasible({**smallest, "batch_size": -1})  # no configuration: the trial reports it
    sampler = study_sampler(config.model_copy(update={"sampler": "gp"}), space, caps, seed=0)
    warped = sampler.sampler.sampler  # OneThreadSampler > DesignSampler > WarpedSampler
    assert isinstance(warped, WarpedSampler)
    assert warped.feasible is not None
    assert warped.feasible(largest) is False


def test_the_gp_prior_of_peak_memory_is_the_memory_estimate() -> None:
    config, caps, space, smallest, largest = _tight_gpus()
    prior = prior_mean(config, space, caps)
    for row in (smallest, largest):  # infeasible configurations too: the GP prices candidates
        estimate = estimate_trial_memory(knob_trial_config(config, space, caps, row), caps)
        assert prior(row) == {"peak_memory_bytes": float(estimate.total_bytes)}
    assert prior(dict(reversed(list(largest.items())))) == prior(largest)  # order-free
    assert prior({**smallest, "batch_size": -1}) == {}  # no trial configuration holds it
    sampler = study_sampler(config.model_copy(update={"sampler": "gp"}), space, caps, seed=0)
    warped = sampler.sampler.sampler  # OneThreadSampler > DesignSampler > WarpedSampler
    assert isinstance(warped, WarpedSampler)
    assert warped.prior_mean is not None
    assert warped.prior_mean(largest) == prior(largest)


def test_the_memory_prior_stops_tracing_new_models_at_its_budget() -> None:
    config, caps, space, smallest, _ = _tight_gpus()
    now = [0.0]

    def clock() -> float:
        now[0] += 0.5  # each trace reads the clock twice: 0.5 s a model
        return now[0]

    prior = prior_mean(config, space, caps, profile_budget_s=1.0, clock=clock)
    widths = space.knobs()["width"].values()
    assert len(widths) >= 3
    first, second, third = ({**smallest, "width": w} for w in widths[:3])
    assert "peak_memory_bytes" in prior(first)
    assert "peak_memory_bytes" in prior(second)  # 1.0 s spent: the budget
    assert prior(third) == {}  # a model not traced yet: no prior
    assert "peak_memory_bytes" in prior({**first, "batch_size": smallest["batch_size"] * 2})


def test_the_design_runs_after_the_baseline_and_a_resumed_study_goes_on_with_it(
    sqlite_url: str,
) -> None:
    config = _run_config(f"storage={sqlite_url}", "study=d", "verify.rounds=0")
    caps = make_capabilities("mock")
    design = startup_design(config, config.space, caps)

    def run(n_trials: int) -> optuna.Study:
        study = open_study(config, config.space, caps, open_storage(sqlite_url))
        enqueue_baseline(study, config.space)
        study.optimize(_objective(FakeRunTrial(), config=config), n_trials=n_trials)
        return study

    run(3)  # the baseline, rows 0 and 1
    study = run(2)  # resumed in a new process: rows 2 and 3, not 0 and 1 again

    params = [t.params for t in sorted(study.trials, key=lambda t: t.number)]
    assert study.trials[0].user_attrs.get("baseline") is True
    assert params[1:] == design[:4]


def test_the_gp_models_the_study_from_the_first_trial_after_the_design(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _run_config(f"storage={sqlite_url}", "study=g", "verify.rounds=0")
    caps = make_capabilities("mock")
    design = startup_design(config, config.space, caps)
    modelled_at: list[int] = []
    sample = LeanGPSampler._sample_relative_impl

    def spied(self: LeanGPSampler, study: optuna.Study, completed: list[Any], *a: Any) -> Any:
        modelled_at.append(len(completed))
        return sample(self, study, completed, *a)

    monkeypatch.setattr(LeanGPSampler, "_sample_relative_impl", spied)
    study = open_study(config, config.space, caps, open_storage(sqlite_url))
    enqueue_baseline(study, config.space)
    study.optimize(_objective(FakeRunTrial(), config=config), n_trials=len(design) + 2)

    most_levels = max(len(k.values()) for k in config.space.knobs().values())
    assert len(design) == most_levels == GP_STARTUP_TRIALS - 1  # the smallest covering design
    params = [t.params for t in sorted(study.trials, key=lambda t: t.number)]
    assert params[1 : len(design) + 1] == design
    assert modelled_at == [GP_STARTUP_TRIALS]  # no trial between the design and the GP


def test_reopening_with_another_space_is_refused(sqlite_url: str) -> None:
    config = _run_config(f"storage={sqlite_url}", "study=s1")
    caps = make_capabilities("mock")
    open_study(config, config.space, caps, open_storage(sqlite_url))
    other = _run_config(f"storage={sqlite_url}", "study=s1", "train.epochs=2")

    with pytest.raises(ConfigError) as err:
        open_study(other, other.space, caps, open_storage(sqlite_url))

    assert str(err.value) == (
        "study=s1: it was created with another search space (search_spaces/cnn_small.yaml); "
        "choose a new study name (study=NAME) or the original settings"
    )


def test_reopening_on_another_device_kind_is_refused(sqlite_url: str) -> None:
    config = _run_config(f"storage={sqlite_url}", "study=s1")
    open_study(config, config.space, make_capabilities("mock"), open_storage(sqlite_url))

    with pytest.raises(
        ConfigError, match=r"^study=s1: it was created with another device \(mock\)"
    ):
        open_study(config, config.space, make_capabilities("cuda"), open_storage(sqlite_url))


def test_reopening_with_another_metric_is_refused(sqlite_url: str) -> None:
    """The workload's metric names an objective: a workload that now reports another one
    (same direction, so Optuna's own check of the directions passes) would mix two metrics
    in one study's values."""
    config = _run_config(f"storage={sqlite_url}", "study=m1")
    caps = make_capabilities("mock")
    f1 = study_objectives("f1", "maximize")
    open_study(config, config.space, caps, open_storage(sqlite_url), objectives=f1)

    with pytest.raises(ConfigError) as err:
        open_study(config, config.space, caps, open_storage(sqlite_url))

    assert str(err.value) == (
        "study=m1: it was created with another metric (throughput_sps, f1, peak_memory_bytes); "
        "choose a new study name (study=NAME) or the original settings"
    )


def test_a_study_keeps_its_workloads_metric(sqlite_url: str) -> None:
    config = _run_config(f"storage={sqlite_url}", "study=loss")
    objectives = study_objectives("val_loss", "minimize")

    open_study(
        config,
        config.space,
        make_capabilities("mock"),
        open_storage(sqlite_url),
        objectives=objectives,
    )
    study = optuna.load_study(study_name="loss", storage=sqlite_url)

    assert study.metric_names == ["throughput_sps", "val_loss", "peak_memory_bytes"]
    assert (
        study.directions
        == [optuna.study.StudyDirection.MAXIMIZE] + [optuna.study.StudyDirection.MINIMIZE] * 2
    )
    assert objectives_of_study(study) == objectives
    assert study.user_attrs["autotune"]["objectives"] == [o.name for o in objectives]


# --------------------------------------------------------------------------------------------
# TrialObjective


def test_successful_trial_stores_every_figure() -> None:
    measurement = make_measurement(throughput_sps=1234.0, val_metric=0.75)
    fake = FakeRunTrial([measurement])

    study = _optimize(_objective(fake), 1)

    trial = study.trials[0]
    assert trial.state == TrialState.COMPLETE
    assert trial.values == list(objective_values(measurement))
    assert trial.constraints == {"failed": 0.0}
    for key, value in measurement.as_user_attrs().items():
        assert trial.user_attrs[key] == value
    assert "failure" not in trial.user_attrs


def test_trial_config_comes_from_the_sampler_and_the_run() -> None:
    config = _run_config("seed=10", "trial.timeout_s=42", ONE_GPU)
    fake = FakeRunTrial()

    study = _optimize(_objective(fake, config=config), 3)

    assert len(fake.configs) == 3
    for trial, trial_config in zip(study.trials, fake.configs, strict=True):
        assert trial_config.knobs() == trial.params
        assert trial_config.seed == 10
        assert trial_config.device == "mock"
        assert trial_config.workload == config.space.workload_spec()
        assert trial_config.workload.args["family"] == "cnn"
        assert trial_config.workload.args["data"] == config.space.data_settings().model_dump()
        assert trial_config.train == config.space.train_settings().model_copy(
            update={"reference_batch_size": baseline_global_batch(config.space)}
        )
        assert trial_config.timeout_s == 42.0


def test_every_trial_of_a_study_trains_with_the_study_seed() -> None:
    # Common random numbers: the same initialization and data order for every configuration.
    fake = FakeRunTrial()

    _optimize(_objective(fake, config=_run_config("seed=7", ONE_GPU)), 4)

    configs = list(fake.configs)
    assert len({tuple(c.knobs().items()) for c in configs}) > 1  # different configurations
    assert [c.seed for c in configs] == [7, 7, 7, 7]


def test_trials_carry_the_baseline_global_batch_as_lr_reference() -> None:
    # cnn_small: batch sizes 16 .. 256, the baseline takes 64 on one device.
    config = _run_config("space=cnn_small")
    fake = FakeRunTrial()

    _optimize(_objective(fake, config=config), 3)

    assert baseline_global_batch(config.space) == 64
    for trial_config in fake.configs:
        assert trial_config.train.reference_batch_size == 64
        assert trial_config.train.lr == config.space.train.lr


def test_a_reference_batch_the_space_sets_is_kept() -> None:
    config = _run_config("space=cnn_small", "advanced.train.reference_batch_size=256")
    fake = FakeRunTrial()

    _optimize(_objective(fake, config=config), 2)

    assert {c.train.reference_batch_size for c in fake.configs} == {256}


@pytest.mark.parametrize("failure", ["oom", "timeout"])
def test_failed_trial_is_complete_infeasible_data(failure: str) -> None:
    caps = make_capabilities("mock")
    fake = FakeRunTrial([TrialError(failure, "Traceback ...\nthe last line")])

    study = _optimize(_objective(fake, caps=caps), 1)

    trial = study.trials[0]
    assert trial.state == TrialState.COMPLETE
    assert trial.values == list(failed_values(caps.memory_bytes))
    assert trial.values == [0.0, 0.0, float(caps.memory_bytes)]
    assert trial.constraints == {"failed": 1.0}
    assert trial.user_attrs["failure"] == failure
    assert trial.user_attrs["failure_detail"] == "Traceback ...\nthe last line"
    assert len(fake.configs) == 1  # out of memory and timeouts would only repeat


@pytest.mark.parametrize("failure", ["error", "crash"])
def test_error_or_crash_gets_one_more_try(failure: str) -> None:
    fake = FakeRunTrial([TrialError(failure, "flaky"), make_measurement()])

    study = _optimize(_objective(fake), 1)

    trial = study.trials[0]
    assert len(fake.configs) == 2
    assert fake.configs[0] == fake.configs[1]
    assert trial.constraints == {"failed": 0.0}
    assert trial.user_attrs["retried_after"] == f"{failure}: flaky"
    assert "failure" not in trial.user_attrs


def test_error_twice_is_a_failure() -> None:
    fake = FakeRunTrial([TrialError("error", "first"), TrialError("error", "second")])

    study = _optimize(_objective(fake), 1)

    trial = study.trials[0]
    assert trial.user_attrs["failure"] == "error"
    assert trial.user_attrs["failure_detail"] == "second"
    assert trial.constraints == {"failed": 1.0}


def test_failure_detail_keeps_the_last_2000_characters() -> None:
    detail = "x" * 5000 + "END"
    fake = FakeRunTrial([TrialError("oom", detail)])

    trial = _optimize(_objective(fake), 1).trials[0]

    assert trial.user_attrs["failure_detail"] == detail[-2000:]


def test_infeasible_configuration_is_never_run_but_reported_to_the_sampler(
    write_space: Callable[..., Path],
) -> None:
    # The space is not restricted first, so tf32 reaches a CPU and the rule must stop it.
    space = load_space(str(write_space(MINIMAL_SPACE + "precision: tf32\n")))
    fake = FakeRunTrial()

    study = _optimize(_objective(fake, caps=make_capabilities("cpu"), space=space), 2)

    assert fake.configs == []
    for trial in study.trials:
        # COMPLETE with a violated constraint, as an OOM: samplers learn from it (a PRUNED
        # trial teaches them nothing), and it never reaches the Pareto front.
        assert trial.state == TrialState.COMPLETE
        assert trial.values == list(failed_values(make_capabilities("cpu").memory_bytes))
        assert trial.constraints["failed"] == 1.0
        assert trial.user_attrs["failure"] == "infeasible"
        assert trial.user_attrs["failure_detail"] == (
            "tf32 is a CUDA tensor-core mode; the CPU has no TF32"
        )
    assert study.best_trials == []


def test_a_failed_trial_of_a_minimized_metric_gets_the_worst_measured_value() -> None:
    objectives = study_objectives("val_loss", "minimize")
    caps = make_capabilities("mock")
    fake = FakeRunTrial(
        [
            TrialError("oom", "before any measurement"),
            make_measurement(val_metric=2.5),
            make_measurement(val_metric=1.0),
            TrialError("oom", "after two"),
        ]
    )
    study = optuna.create_study(
        directions=[o.direction for o in objectives],
        sampler=optuna.samplers.RandomSampler(seed=0),
    )

    config = _run_config(ONE_GPU)
    _optimize(_objective(fake, caps=caps, config=config, objectives=objectives), 4, study)

    first, _, _, last = study.trials
    assert first.values == [0.0, 0.0, float(caps.memory_bytes)]  # nothing measured yet
    assert last.values == [0.0, 2.5, float(caps.memory_bytes)]  # the worst loss measured
    assert last.user_attrs["failure"] == "oom"
    assert study.best_trials and all("failure" not in t.user_attrs for t in study.best_trials)


@pytest.mark.parametrize(
    ("direction", "worst", "expected"),
    [("maximize", 0.3, 0.0), ("minimize", 4.2, 4.2), ("minimize", None, 0.0)],
)
def test_failed_values_take_the_worst_metric_of_its_direction(
    direction: str, worst: float | None, expected: float
) -> None:
    assert failed_values(1024, direction, worst) == (0.0, expected, 1024.0)
    assert failed_values(None) == (0.0, 0.0, 0.0)


def test_calling_the_objective_directly_returns_failed_values_for_an_infeasible_config(
    write_space: Callable[..., Path],
) -> None:
    space = load_space(str(write_space(MINIMAL_SPACE + "compile_mode: reduce-overhead\n")))
    fake = FakeRunTrial()
    objective = _objective(fake, caps=make_capabilities("cpu"), space=space)
    study = optuna.create_study(directions=[o.direction for o in OBJECTIVES])
    trial = study.ask()

    assert objective(trial) == failed_values(make_capabilities("cpu").memory_bytes)
    assert fake.configs == []
    assert "reduce-overhead uses CUDA graphs" in study.trials[0].user_attrs["failure_detail"]


def test_memory_and_accuracy_limits_become_constraints(write_space: Callable[..., Path]) -> None:
    space = load_space(
        str(
            write_space(
                MINIMAL_SPACE + "constraints: {max_memory_bytes: 4MiB, min_accuracy: 0.95}\n"
            )
        )
    )
    fake = FakeRunTrial([make_measurement(peak_memory_bytes=5 << 20, val_metric=0.9)])

    trial = _optimize(_objective(fake, space=space), 1).trials[0]

    assert trial.constraints["failed"] == 0.0
    assert trial.constraints["max_memory_bytes"] == float(1 << 20)
    assert trial.constraints["min_accuracy"] == pytest.approx(0.05)


def test_mock_fault_reaches_only_the_chosen_trials() -> None:
    config = _run_config("advanced.mock.fault=crash", "advanced.mock.fault_trials=[1]", ONE_GPU)
    fake = FakeRunTrial([make_measurement()] * 4)

    _optimize(_objective(fake, config=config), 3)

    assert [c.mock_fault for c in fake.configs] == ["none", "crash", "none"]


def test_count_finished_counts_complete_and_pruned() -> None:
    study = optuna.create_study(directions=[o.direction for o in OBJECTIVES])
    study.add_trial(optuna.trial.create_trial(values=[1.0, 0.5, 2.0]))
    study.add_trial(optuna.trial.create_trial(state=TrialState.PRUNED))
    study.add_trial(optuna.trial.create_trial(state=TrialState.FAIL))

    assert count_finished(study) == 2


# --------------------------------------------------------------------------------------------
# objective=time_to_accuracy

_TTA_ARGS = ("objective=time_to_accuracy", "train.target_accuracy=0.95")


def _tta_study() -> optuna.Study:
    return optuna.create_study(
        directions=["minimize", "minimize"], sampler=optuna.samplers.RandomSampler(seed=0)
    )


def test_time_to_accuracy_trials_are_scored_on_seconds_and_memory() -> None:
    objectives = study_objectives(mode="time_to_accuracy")
    reached = make_measurement(
        time_to_accuracy_s=4.0, target_reached=True, train_s=4.0, peak_memory_bytes=1000
    )
    missed = make_measurement(
        time_to_accuracy_s=None, target_reached=False, train_s=2.5, peak_memory_bytes=900
    )
    fake = FakeRunTrial([reached, missed])
    objective = _objective(fake, config=_run_config(*_TTA_ARGS), objectives=objectives)

    study = _optimize(objective, 2, _tta_study())

    first, second = study.trials
    assert fake.configs[0].objective == "time_to_accuracy"
    assert fake.configs[0].train.target_accuracy == 0.95
    assert first.values == [4.0, 1000.0]
    assert first.constraints == {"failed": 0.0, "target_not_reached": 0.0}
    # Missed: no time to accuracy; no better than the slowest trial that reached it.
    assert second.values == [4.0, 900.0]
    assert second.constraints == {"failed": 0.0, "target_not_reached": 1.0}
    assert second.user_attrs["target_reached"] is False
    assert [t.number for t in study.best_trials] == [0]


def test_a_failed_time_to_accuracy_trial_gets_the_slowest_measured_time() -> None:
    objectives = study_objectives(mode="time_to_accuracy")
    caps = make_capabilities("mock")
    fake = FakeRunTrial(
        [
            make_measurement(time_to_accuracy_s=7.0, target_reached=True),
            make_measurement(time_to_accuracy_s=3.0, target_reached=True),
            TrialError("oom", "out of memory"),
        ]
    )
    objective = _objective(fake, caps=caps, config=_run_config(*_TTA_ARGS), objectives=objectives)

    study = _optimize(objective, 3, _tta_study())

    assert study.trials[2].values == [7.0, float(caps.memory_bytes)]
    assert failed_values(64, mode="time_to_accuracy") == (0.0, 64.0)


def test_a_study_keeps_its_objective_mode_and_target(sqlite_url: str) -> None:
    tta = _run_config(f"storage={sqlite_url}", *_TTA_ARGS)
    caps = make_capabilities("mock")
    objectives = study_objectives(mode="time_to_accuracy")
    metric = study_objectives()[1]
    study = open_study(
        tta, tta.space, caps, open_storage(sqlite_url), objectives=objectives, metric=metric
    )

    assert study.directions == [optuna.study.StudyDirection.MINIMIZE] * 2
    assert objectives_of_study(study) == objectives
    assert study.user_attrs["autotune"]["objective"] == "time_to_accuracy"
    assert study_target(study) == 0.95
    assert study_metric(study).name == "accuracy"

    throughput = _run_config(f"storage={sqlite_url}")
    with pytest.raises(ConfigError, match="created with objective=time_to_accuracy"):
        open_study(throughput, throughput.space, caps, open_storage(sqlite_url))


def test_time_to_accuracy_trials_stop_at_a_multiple_of_the_baselines_time() -> None:
    from autotune.study.baseline import enqueue_baseline

    config = _run_config(*_TTA_ARGS, "train.max_time_s=30")
    fake = FakeRunTrial(
        [
            make_measurement(time_to_accuracy_s=5.0, target_reached=True),  # discarded, cold
            make_measurement(time_to_accuracy_s=4.0, target_reached=True),
            make_measurement(time_to_accuracy_s=9.0, target_reached=True),
        ]
    )
    objective = _objective(
        fake, config=config, objectives=study_objectives(mode="time_to_accuracy")
    )
    study = _tta_study()
    enqueue_baseline(study, config.space)

    _optimize(objective, 2, study)

    _, baseline_config, second_config = fake.configs
    assert baseline_config.train.max_time_s == 30.0  # no baseline time yet: the setting alone
    assert second_config.train.max_time_s == 16.0  # 4 x the baseline's (warm) 4.0 s
    assert study.trials[1].user_attrs["time_limit_s"] == 16.0
    assert "time_limit_s" not in study.trials[0].user_attrs


def test_the_baseline_is_measured_warm_after_one_discarded_run() -> None:
    from autotune.study.baseline import enqueue_baseline

    config = _run_config()
    fake = FakeRunTrial(
        [
            make_measurement(throughput_sps=600.0),  # the cold first process: discarded
            make_measurement(throughput_sps=1000.0),
            make_measurement(throughput_sps=1500.0),
        ]
    )
    study = optuna.create_study(
        directions=[o.direction for o in OBJECTIVES],
        sampler=optuna.samplers.RandomSampler(seed=0),
    )
    enqueue_baseline(study, config.space)

    _optimize(_objective(fake, config=config), 2, study)

    assert len(fake.configs) == 3  # the baseline twice, the next trial once
    twin, measured = fake.configs[0], fake.configs[1]
    # The discarded run is the baseline's float64 twin, timed only (the paired check's floor).
    assert (twin.twin, measured.twin) == ("float64", "none")
    assert twin.reuse is not None and measured.reuse is None
    assert twin.model_copy(update={"twin": "none", "reuse": None}) == measured  # seed included
    baseline, other = study.trials
    assert baseline.user_attrs["throughput_sps"] == 1000.0
    assert baseline.user_attrs["cold_throughput_sps"] == 600.0
    # make_measurement records no check losses: the floor falls back to float32's epsilon.
    assert baseline.user_attrs["twin_failure"] == "the twin recorded no check losses"
    assert "cold_throughput_sps" not in other.user_attrs


def test_without_the_paired_check_the_discarded_run_is_timed_and_checks_the_users_evaluation() -> (
    None
):
    config = _run_config("advanced.measure.check_steps=0")
    fake = FakeRunTrial([make_measurement(throughput_sps=600.0)])
    study = optuna.create_study(
        directions=[o.direction for o in OBJECTIVES],
        sampler=optuna.samplers.RandomSampler(seed=0),
    )
    enqueue_baseline(study, config.space)

    _optimize(_objective(fake, config=config), 1, study)

    warm_up, measured = fake.configs
    # Timed only (not a second run of the budget), the code after the loop run and checked.
    assert warm_up.reuse is not None and warm_up.reuse.check_evaluation
    assert measured.reuse is None and warm_up.twin == "none"
    assert warm_up.model_copy(update={"reuse": None}) == measured
    assert study.trials[0].user_attrs["cold_throughput_sps"] == 600.0


def test_a_warm_up_run_that_fails_with_an_error_fails_the_baseline_before_its_budget() -> None:
    config = _run_config("advanced.measure.check_steps=0")
    no_report = TrialError("error", "DoorUsageError: loop train.py:train returned without ...")
    fake = FakeRunTrial([no_report])
    study = optuna.create_study(
        directions=[o.direction for o in OBJECTIVES],
        sampler=optuna.samplers.RandomSampler(seed=0),
    )
    enqueue_baseline(study, config.space)

    _optimize(_objective(fake, config=config), 1, study)

    assert len(fake.configs) == 1  # the measured run, the budget, never started
    baseline = study.trials[0]
    assert baseline.user_attrs["failure"] == "error"
    assert "returned without" in baseline.user_attrs["failure_detail"]


def _too_slow(throughput_sps: float, **fields: Any) -> Measurement:
    """A run stopped after its first two windows below its floor: never evaluated."""
    nan = float("nan")
    return make_measurement(
        throughput_sps=throughput_sps,
        window_throughputs_sps=(throughput_sps, throughput_sps),
        timed_steps=32,
        val_metric=nan,
        train_loss=nan,
        too_slow=True,
        **fields,
    )


def _floored_study(
    config: RunConfig, *runs: Measurement
) -> tuple[FakeRunTrial, optuna.Study, TrialObjective]:
    """A study with its baseline queued whose runs answer: the baseline's discarded twin at
    900 samples/s, the baseline at 1,000, then ``runs``."""
    fake = FakeRunTrial(
        [make_measurement(throughput_sps=900.0), make_measurement(throughput_sps=1000.0), *runs]
    )
    study = optuna.create_study(
        directions=[o.direction for o in OBJECTIVES],
        sampler=optuna.samplers.RandomSampler(seed=0),
    )
    enqueue_baseline(study, config.space)
    return fake, study, _objective(fake, config=config)


def _add_timed_trial(
    study: optuna.Study, baseline: FrozenTrial, workers: int, sps: float, **attrs: Any
) -> None:
    """Add a finished channels_last trial of the baseline's model whose accuracy the paired
    check kept (the same computation), at ``sps`` samples/s, with ``workers`` DataLoader
    workers."""
    study.add_trial(
        optuna.trial.create_trial(
            values=[sps, 0.9, 2**20],
            params={**baseline.params, "memory_format": "channels_last", "num_workers": workers},
            distributions=baseline.distributions,
            user_attrs={
                "evidence_class": "same_computation",
                "accuracy_source": "inherited",
                "throughput_sps": sps,
                **attrs,
            },
        )
    )


def test_trials_slower_than_a_tenth_of_the_baseline_stop_as_too_slow() -> None:
    config = _run_config()
    too_slow = _too_slow(80.0, peak_memory_bytes=3 * 2**20)
    fake, study, objective = _floored_study(
        config, too_slow, make_measurement(throughput_sps=500.0)
    )

    _optimize(objective, 3, study)

    baseline_config, second_config, third_config = fake.configs[1:]
    assert baseline_config.min_throughput_sps is None  # nothing to compare with yet
    assert second_config.min_throughput_sps == pytest.approx(100.0)  # 0.1 x the warm 1,000
    assert third_config.min_throughput_sps == pytest.approx(100.0)
    baseline, slow, other = study.trials
    assert "min_throughput_sps" not in baseline.user_attrs
    assert slow.user_attrs["failure"] == "too_slow"
    assert slow.user_attrs["failure_detail"].startswith(
        "its first 2 timed windows ran 80 and 80 samples/s, each below the floor of 100 "
        "samples/s (advanced.trial.min_throughput_vs_baseline=0.1 x the baseline's)"
    )
    assert "val_metric" not in slow.user_attrs  # never evaluated
    assert slow.constraints["failed"] == 1.0  # `failed`: infeasible, never on the front
    # Its measured throughput and memory teach the sampler; the metric is the worst (0).
    assert slow.values == [80.0, 0.0, 3 * 2**20]
    assert other.values[0] == 500.0 and "failure" not in other.user_attrs


def test_under_a_cost_cap_a_trained_trial_must_reach_the_fastest_same_computation_one() -> None:
    """A change of the math trains only where it could be the faster answer: under
    ``budget.full_runs`` its floor is 0.9 x the fastest trial whose accuracy is the
    baseline's by its check, not 0.9 x the baseline's; a timed trial keeps the baseline's."""
    config = _run_config("budget.full_runs=20")
    fake, study, objective = _floored_study(
        config, _too_slow(1500.0), make_measurement(throughput_sps=1400.0)
    )
    _optimize(objective, 1, study)
    (baseline,) = study.trials
    _add_timed_trial(study, baseline, 1, 2000.0)
    _add_timed_trial(study, baseline, 2, 2600.0, busy_machine=True)
    study.enqueue_trial({**baseline.params, "precision": "bf16"})  # trains: a new math key
    study.enqueue_trial({**baseline.params, "num_workers": 2})  # timed: the baseline's metric
    _optimize(objective, 2, study)

    trained, timed_config = fake.configs[2:]
    # 0.9 x trial 1's 2,000: trial 2's 2,600 was measured on a busy machine.
    assert trained.reuse is None and trained.min_throughput_sps == pytest.approx(1800.0)
    assert timed_config.reuse is not None
    assert timed_config.min_throughput_sps == pytest.approx(900.0)  # 0.9 x the baseline's
    bf16, other = study.trials[3:]
    assert bf16.user_attrs["min_throughput_from_trial"] == 1
    assert bf16.user_attrs["failure"] == "too_slow"
    assert (
        "1,500 and 1,500 samples/s, each below the floor of 1,800 samples/s (0.9 x trial 1's, "
        "the fastest with the "
        "baseline's accuracy by its paired check" in bf16.user_attrs["failure_detail"]
    )
    assert "min_throughput_from_trial" not in other.user_attrs


def test_without_a_cost_cap_a_trained_trial_keeps_the_baselines_floor() -> None:
    config = _run_config()
    fake, study, objective = _floored_study(config, make_measurement(throughput_sps=1000.0))
    _optimize(objective, 1, study)
    (baseline,) = study.trials
    _add_timed_trial(study, baseline, 1, 2000.0)
    study.enqueue_trial({**baseline.params, "precision": "bf16"})
    _optimize(objective, 1, study)

    assert fake.configs[-1].min_throughput_sps == pytest.approx(100.0)  # 0.1 x the baseline's


def test_no_throughput_floor_when_the_ratio_is_zero() -> None:
    from autotune.study.baseline import enqueue_baseline

    config = _run_config("advanced.trial.min_throughput_vs_baseline=0")
    fake = FakeRunTrial([make_measurement(throughput_sps=1000.0)] * 3)
    study = optuna.create_study(directions=[o.direction for o in OBJECTIVES])
    enqueue_baseline(study, config.space)

    _optimize(_objective(fake, config=config), 2, study)

    assert all(config.min_throughput_sps is None for config in fake.configs)


@pytest.mark.parametrize("ratio", ["1", "-0.1", "1.5", "nan"])
def test_min_throughput_vs_baseline_is_a_share_below_one(ratio: str) -> None:
    with pytest.raises(ConfigError, match=r"trial\.min_throughput_vs_baseline"):
        _run_config(f"advanced.trial.min_throughput_vs_baseline={ratio}")


def test_a_baseline_warm_up_that_fails_is_forgotten_and_the_trial_measured() -> None:
    from autotune.study.baseline import enqueue_baseline

    config = _run_config()
    fake = FakeRunTrial([TrialError("crash", "SIGSEGV"), make_measurement(throughput_sps=900.0)])
    study = optuna.create_study(directions=[o.direction for o in OBJECTIVES])
    enqueue_baseline(study, config.space)

    _optimize(_objective(fake, config=config), 1, study)

    (baseline,) = study.trials
    assert baseline.user_attrs["throughput_sps"] == 900.0 and "failure" not in baseline.user_attrs


def test_a_time_to_accuracy_baseline_sets_the_evaluation_cadence() -> None:
    from autotune.study.baseline import enqueue_baseline

    config = _run_config(*_TTA_ARGS)
    fake = FakeRunTrial(
        [
            make_measurement(time_to_accuracy_s=13.3, target_reached=True),  # discarded
            make_measurement(time_to_accuracy_s=9.0, target_reached=True),
            make_measurement(time_to_accuracy_s=6.0, target_reached=True),
        ]
    )
    study = _tta_study()
    enqueue_baseline(study, config.space)
    objective = _objective(
        fake, config=config, objectives=study_objectives(mode="time_to_accuracy")
    )

    _optimize(objective, 2, study)

    cold, measured, later = fake.configs
    assert cold.train.eval_every_s is None  # once per epoch: the cadence is not known yet
    # 10 % of the discarded run's time to the target, for the measured baseline and after.
    assert measured.train.eval_every_s == pytest.approx(1.33)
    assert later.train.eval_every_s == pytest.approx(1.33)
    assert study.trials[0].user_attrs["eval_every_s"] == pytest.approx(1.33)
    assert study.trials[0].user_attrs["cold_time_to_accuracy_s"] == 13.3


def test_a_cadence_the_space_sets_is_kept() -> None:
    from autotune.study.baseline import enqueue_baseline

    config = _run_config(*_TTA_ARGS, "train.eval_every_steps=7")
    fake = FakeRunTrial(
        [make_measurement(time_to_accuracy_s=s, target_reached=True) for s in (13.3, 9.0, 6.0)]
    )
    study = _tta_study()
    enqueue_baseline(study, config.space)
    objective = _objective(
        fake, config=config, objectives=study_objectives(mode="time_to_accuracy")
    )

    _optimize(objective, 2, study)

    assert {config.train.eval_every_steps for config in fake.configs} == {7}
    assert {config.train.eval_every_s for config in fake.configs} == {None}
    assert "eval_every_s" not in study.trials[0].user_attrs


# --------------------------------------------------------------------------------------------
# Reuse where the math is the same (advanced.search.reuse_metric)

_REUSE_BASE = DEFAULT_PARAMS


def _run_enqueued(
    changes: list[dict[str, Any]], *args: str, objectives: tuple[Any, ...] = OBJECTIVES
) -> tuple[optuna.Study, FakeRunTrial]:
    """Run the base configuration, then each of ``changes`` to it, on the mock device."""
    fake = FakeRunTrial()
    study = optuna.create_study(
        directions=[o.direction for o in objectives],
        sampler=optuna.samplers.RandomSampler(seed=0),
    )
    for change in [{}, *changes]:
        study.enqueue_trial({**_REUSE_BASE, **change})
    objective = _objective(fake, config=_run_config(*args), objectives=objectives)
    return _optimize(objective, len(changes) + 1, study), fake


def test_memory_format_compile_and_workers_reuse_the_metric_of_the_same_math() -> None:
    study, fake = _run_enqueued(
        [{"memory_format": "channels_last"}, {"compile_mode": "default"}, {"num_workers": 2}]
    )

    source, *reusers = study.trials
    assert fake.configs[0].reuse is None
    assert "metric_from_trial" not in source.user_attrs
    for trial, config in zip(reusers, fake.configs[1:], strict=True):
        assert config.reuse is not None and config.reuse.from_trial == 0
        assert trial.user_attrs["metric_from_trial"] == 0
        assert trial.user_attrs["math_key"] == source.user_attrs["math_key"]
        assert trial.user_attrs["val_metric"] == source.user_attrs["val_metric"]
        assert trial.values[1] == source.values[1]
        # Measured for real: its own throughput, and only the warm-up and windows (one
        # epoch of 22 digits steps after 5 warm-up steps, of cnn_small's 3 epochs).
        assert trial.values[0] != source.values[0]
        assert trial.user_attrs["steps"] == 5 + 22 < source.user_attrs["steps"] == 3 * 22


@pytest.mark.parametrize("change", [{"precision": "fp16"}, {"batch_size": 32}, {"width": 8}])
def test_a_change_of_precision_batch_or_model_never_reuses(change: dict[str, Any]) -> None:
    study, fake = _run_enqueued([change])

    assert fake.configs[1].reuse is None
    assert "metric_from_trial" not in study.trials[1].user_attrs
    assert study.trials[1].user_attrs["math_key"] != study.trials[0].user_attrs["math_key"]


def test_a_change_of_seed_never_reuses() -> None:
    # Two studies' configurations differ only by the seed: different keys.
    first, _ = _run_enqueued([], "seed=1")
    second, _ = _run_enqueued([], "seed=2")

    assert first.trials[0].user_attrs["math_key"] != second.trials[0].user_attrs["math_key"]


def test_reuse_is_off_with_search_reuse_metric_false() -> None:
    study, fake = _run_enqueued(
        [{"memory_format": "channels_last"}], "advanced.search.reuse_metric=false"
    )

    assert fake.configs[1].reuse is None
    assert "metric_from_trial" not in study.trials[1].user_attrs
    assert study.trials[1].user_attrs["steps"] == 3 * 22  # cnn_small's 3 epochs, in full


def test_a_failed_or_reused_trial_is_never_a_source() -> None:
    fake = FakeRunTrial([TrialError("oom", "out of memory")])
    study = optuna.create_study(directions=[o.direction for o in OBJECTIVES])
    for change in ({}, {"num_workers": 1}, {"num_workers": 2}):
        study.enqueue_trial({**_REUSE_BASE, **change})

    _optimize(_objective(fake), 3, study)

    # Trial 0 failed: trial 1 trains in full; trial 2 reuses trial 1 (measured in full).
    assert [c.reuse.from_trial if c.reuse else None for c in fake.configs] == [None, None, 1]


def test_a_time_to_accuracy_trial_reuses_the_steps_to_the_target() -> None:
    objectives = study_objectives(mode="time_to_accuracy")
    study, fake = _run_enqueued(
        [{"memory_format": "channels_last"}], *_TTA_ARGS, objectives=objectives
    )

    source, reuser = study.trials
    reuse = fake.configs[1].reuse
    assert source.user_attrs["target_reached"] is True
    assert reuse is not None
    assert reuse.steps == source.user_attrs["steps"]
    assert reuse.evaluations == len(source.user_attrs["metric_curve"])
    assert reuser.user_attrs["metric_from_trial"] == 0
    assert reuser.user_attrs["target_reached"] is True
    assert reuser.values[0] == reuser.user_attrs["time_to_accuracy_s"] > 0


def test_under_a_global_batch_a_change_of_batch_size_reuses_the_metric() -> None:
    study, fake = _run_enqueued(
        [{"batch_size": 16}], "batch_size=[16,32,64]", "train.global_batch_size=64"
    )

    reuse = fake.configs[1].reuse
    assert reuse is not None and reuse.from_trial == 0
    assert study.trials[1].user_attrs["samples_per_step"] == 64
    assert study.trials[1].user_attrs["lr_peak"] == study.trials[0].user_attrs["lr_peak"]


def test_the_runs_advanced_settings_may_change_when_a_study_resumes(sqlite_url: str) -> None:
    config = _run_config(f"storage={sqlite_url}", "study=s2")
    caps = make_capabilities("mock")
    open_study(config, config.space, caps, open_storage(sqlite_url))
    again = _run_config(
        f"storage={sqlite_url}",
        "study=s2",
        "advanced.verify.screen_z=2",
        "advanced.trial.heartbeat_s=5",
        "advanced.mock.fault=oom",
    )

    open_study(again, again.space, caps, open_storage(sqlite_url))


def test_a_trial_reuses_the_nearest_measured_trial_of_its_math_key() -> None:
    from optuna.distributions import CategoricalDistribution

    from autotune.study.search._objective import reuse_source

    dists = {
        "compile_mode": CategoricalDistribution(["none", "default"]),
        "num_workers": CategoricalDistribution([0, 1]),
    }

    def measured(number: int, compile_mode: str, workers: int) -> optuna.trial.FrozenTrial:
        trial = optuna.trial.create_trial(
            state=TrialState.COMPLETE,
            values=[1.0, 0.9, 1.0],
            params={"compile_mode": compile_mode, "num_workers": workers},
            distributions=dists,
            user_attrs={"math_key": "k", "val_metric": 0.9, "steps": 10},
        )
        trial.number = number
        return trial

    completed = [measured(3, "default", 0), measured(10, "none", 0)]
    eager = {"compile_mode": "none", "num_workers": 1}
    source = reuse_source(completed, 11, "k", False, eager)
    assert source is not None and source.number == 10  # one knob apart, not two
    first = reuse_source(completed, 11, "k", False)
    assert first is not None and first.number == 3  # without the trial's knobs: the earliest
    assert reuse_source(completed, 11, "other", False, eager) is None
    # One knob apart either way: the one apart in DataLoader workers (the same arithmetic)
    # is nearer than the one apart in compile mode (another order of it).
    two = [measured(4, "none", 0), measured(5, "default", 1)]
    nearest = reuse_source(two, 11, "k", False, {"compile_mode": "default", "num_workers": 0})
    assert nearest is not None and nearest.number == 5  # not the earlier trial 4


def test_a_batch_change_records_e_of_b_and_goodput_against_the_baseline_noise_scale() -> None:
    from autotune.core.goodput import statistical_efficiency
    from autotune.study.search._objective import goodput_attrs
    from autotune.study.trial_result import TrialResult

    base = TrialResult(
        number=0, state=TrialState.COMPLETE, samples_per_step=64, gradient_noise_scale=192.0
    )
    attrs = goodput_attrs(256, 2000.0, base)
    # E(256) = (192 + 64) / (192 + 256) = 4/7: each sample at 256 is worth 4/7 of one at 64.
    assert attrs["statistical_efficiency"] == pytest.approx(4 / 7)
    assert attrs["statistical_efficiency"] == statistical_efficiency(256, 64, 192.0)
    assert attrs["goodput_sps"] == pytest.approx(2000.0 * 4 / 7)
    assert goodput_attrs(64, 2000.0, base) == {}  # the baseline's batch: E(B) = 1, no column
    unresolved = TrialResult(number=0, state=TrialState.COMPLETE, samples_per_step=64)
    assert goodput_attrs(256, 2000.0, unresolved) == {}
    assert goodput_attrs(256, 2000.0, None) == {}
