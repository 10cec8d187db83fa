"""A study run writes the results tables and measures the baseline once; Optuna still reads it."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest
import sqlalchemy as sa
from optuna.trial import TrialState

from autotune.core.config import GUIDE_KNOB_DEFAULTS, GUIDE_KNOBS, load_space
from autotune.study.baseline import baseline_params, baseline_trial, enqueue_baseline
from autotune.study.feasibility import restrict_space
from autotune.study.storage import KNOB_COLUMNS, ResultsStore, create_results_engine
from autotune.testing import make_capabilities
from tests.studies.mock import FAILING_TRIALS, DemoStudy, run_mock_study, sqlite_url

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)


def test_every_finished_trial_has_one_row_matching_optuna(demo_study: DemoStudy) -> None:
    study = optuna.load_study(study_name=demo_study.name, storage=demo_study.url)
    finished = study.get_trials(states=FINISHED)
    with ResultsStore.open(demo_study.url, create=False) as store:
        rows = {r.trial_number: r for r in store.trials(demo_study.name)}
        record = store.study(demo_study.name)
    assert sorted(rows) == [t.number for t in finished] and len(rows) == demo_study.n_trials
    for trial in finished:
        row = rows[trial.number]
        if "failure" in trial.user_attrs:
            assert row.failure == trial.user_attrs["failure"] and row.throughput_sps is None
        else:
            assert row.throughput_sps == trial.user_attrs["throughput_sps"]
            assert row.peak_memory_bytes == trial.user_attrs["peak_memory_bytes"]
        tuner = {k: getattr(row, k) for k in KNOB_COLUMNS if k not in GUIDE_KNOBS}
        assert {**json.loads(row.model_knobs_json), **tuner} == trial.params
        # A study that does not search the guide's knobs ran at PyTorch's defaults.
        assert {k: getattr(row, k) for k in GUIDE_KNOBS} == GUIDE_KNOB_DEFAULTS
        assert row.workload == "cnn"
        assert row.is_feasible == (
            "failure" not in trial.user_attrs and all(v <= 0 for v in trial.constraints.values())
        )
        assert row.simulated
        config = json.loads(row.config_json)
        assert config["seed"] == 0 and config["train"]["epochs"] == 3  # the study seed, every trial
    assert {rows[n].failure for n in FAILING_TRIALS} == {"oom"}
    assert any(not r.is_feasible and r.failure is None for r in rows.values())  # over the limit
    assert record is not None and record.simulated and record.hardware is not None
    assert record.hardware.simulated and record.space_name == "cnn_small"


def test_optuna_load_study_sees_every_trial(demo_study: DemoStudy) -> None:
    study = optuna.load_study(study_name=demo_study.name, storage=demo_study.url)
    assert len(study.get_trials(states=FINISHED)) == demo_study.n_trials
    assert optuna.get_all_study_names(demo_study.url) == [demo_study.name]
    assert study.best_trials  # the Pareto front is there for Optuna's own tools


def test_the_baseline_is_trial_0_with_pytorch_defaults(demo_study: DemoStudy) -> None:
    study = optuna.load_study(study_name=demo_study.name, storage=demo_study.url)
    base = baseline_trial(study.trials)
    assert base is not None and base.number == 0
    assert sum(bool(t.user_attrs.get("baseline")) for t in study.trials) == 1
    assert base.params == {
        "depth": 3,  # the middle of cnn_small's 2..4
        "width": 16,
        "batch_size": 64,
        "precision": "fp32",
        "memory_format": "contiguous",
        "compile_mode": "none",
        "num_workers": 0,
        "gpu_count": 1,
    }
    engine = create_results_engine(demo_study.url)
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text("SELECT trial_number FROM autotune_trial_results WHERE is_baseline")
        ).all()
    assert rows == [(0,)]


def test_topping_up_keeps_one_baseline_and_adds_rows(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    run_mock_study(url, 4, constrained=False)
    run_mock_study(url, 6, constrained=False)
    study = optuna.load_study(study_name="demo", storage=url)
    assert [t.number for t in study.trials if t.user_attrs.get("baseline")] == [0]
    with ResultsStore.open(url, create=False) as store:
        assert sorted(store.recorded_trial_numbers("demo")) == list(range(6))


def test_a_new_run_writes_the_rows_that_are_missing(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    run_mock_study(url, 4, constrained=False)
    engine = create_results_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM autotune_trial_results WHERE trial_number IN (1, 2)"))
    run_mock_study(url, 4, constrained=False)  # target already met: no trial runs, rows return
    with ResultsStore.open(url, create=False) as store:
        rows = store.trials("demo")
    assert [r.trial_number for r in rows] == [0, 1, 2, 3]
    assert json.loads(rows[1].config_json)["train"]["optimizer"] == "adamw"


def test_baseline_params_take_the_middle_model_and_a_common_batch() -> None:
    space = load_space("cnn_small")  # depth 2..4, width [8, 16, 32, 64], batch [16..256]
    params, notes = baseline_params(space)
    assert (params["depth"], params["width"], params["batch_size"]) == (3, 16, 64)
    assert notes == []
    odd = load_space("cnn_small", ["batch_size=[16,100,500]", "model.width=[8,16,32]"])
    params, _ = baseline_params(odd)
    assert params["batch_size"] == 100 and params["width"] == 16


def test_baseline_without_fp32_uses_the_spaces_first_choice_and_says_so() -> None:
    space = load_space("cnn_small", ["precision=[bf16,fp16]", "compile_mode=[default]"])
    params, notes = baseline_params(space)
    assert params["precision"] == "bf16" and params["compile_mode"] == "default"
    assert any("no fp32" in n for n in notes) and any("no none" in n for n in notes)


def test_enqueue_baseline_only_once() -> None:
    space, _ = restrict_space(load_space("cnn_small"), make_capabilities("mock"))
    study = optuna.create_study(directions=["maximize", "maximize", "minimize"])
    assert enqueue_baseline(study, space)
    assert not enqueue_baseline(study, space)  # queued already
    waiting = study.get_trials(states=(TrialState.WAITING,))
    assert len(waiting) == 1 and waiting[0].user_attrs["baseline"] is True


@pytest.mark.parametrize("n", [1])
def test_a_one_trial_study_is_just_the_baseline(tmp_path: Path, n: int) -> None:
    url = sqlite_url(tmp_path)
    result = run_mock_study(url, n, constrained=False)
    assert result.finished == 1
    study = optuna.load_study(study_name="demo", storage=url)
    assert study.trials[0].user_attrs.get("baseline") is True
