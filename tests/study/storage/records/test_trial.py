"""The record of a finished Optuna trial (autotune/study/storage/records/_trial.py): every figure
with its unit, the workload's short name, any model knobs; failed and pruned trials."""

from __future__ import annotations

import dataclasses
import json

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

from autotune.study.storage import TrialRecord, trial_record
from autotune.testing import make_trial_config
from tests.studies.mock import make_trial


def test_trial_record_of_a_measured_trial_copies_every_figure_with_its_unit() -> None:
    extra = {"flops_per_sample": 3.5e6, "mfu": 0.41, "energy_j_per_sample": 2.0e-4}
    trial = make_trial(5, (5000.0, 0.97, 7 << 20), extra_attrs=extra, batch_size=128)
    config = make_trial_config(seed=5, batch_size=128, depth=2, width=16).model_dump(mode="json")
    record = trial_record("s", trial, config)
    assert record.trial_number == 5 and record.state == "COMPLETE"
    assert record.throughput_sps == 5000.0 and record.val_metric == 0.97
    assert record.peak_memory_bytes == 7 << 20 and record.step_time_s == pytest.approx(64 / 5000)
    assert (record.flops_per_sample, record.mfu, record.energy_j_per_sample) == (
        3.5e6,
        0.41,
        2.0e-4,
    )
    assert record.batch_size == 128 and record.workload == "cnn" and record.seed == 5
    assert json.loads(record.model_knobs_json or "") == {"depth": 2, "width": 16}
    assert json.loads(record.config_json) == config
    assert record.is_feasible and record.failure is None


def test_a_rows_trial_config_is_the_configuration_the_trial_ran() -> None:
    trial = make_trial(5, (5000.0, 0.97, 7 << 20), batch_size=128)
    config = make_trial_config(seed=5, batch_size=128, depth=2, width=16)

    assert trial_record("s", trial, config.model_dump(mode="json")).trial_config() == config
    # A trial that stored no configuration: its row holds the knobs alone, nothing to re-run.
    assert trial_record("s", trial).trial_config() is None


@pytest.mark.parametrize(
    ("config", "workload"),
    [
        ({"workload": {"ref": "/home/me/gpt.py:CharGPT", "args": {}}}, "gpt.py:CharGPT"),
        ({"workload": {"ref": "my_models.gpt:CharGPT"}}, "my_models.gpt:CharGPT"),
        (None, None),
    ],
)
def test_trial_record_names_the_workload_and_keeps_any_model_knobs(
    config: dict[str, object] | None, workload: str | None
) -> None:
    trial = optuna.trial.create_trial(
        values=[100.0, 1.25, 1024.0],
        params={"n_layer": 4, "dropout": 0.1, "batch_size": 32, "precision": "bf16"},
        distributions={
            "n_layer": IntDistribution(2, 6),
            "dropout": FloatDistribution(0.0, 0.5),
            "batch_size": CategoricalDistribution((16, 32)),
            "precision": CategoricalDistribution(("fp32", "bf16")),
        },
        user_attrs={"val_metric": 1.25, "simulated": False},
        constraints={"failed": 0.0},
    )

    record = trial_record("s", trial, config)

    assert record.workload == workload
    assert json.loads(record.model_knobs_json or "") == {"n_layer": 4, "dropout": 0.1}
    assert (record.batch_size, record.precision, record.gpu_count) == (32, "bf16", None)
    assert record.val_metric == 1.25


def test_trial_record_of_failed_and_pruned_trials_has_no_figures() -> None:
    failed = trial_record("s", make_trial(1, None, failure="oom", constraint=1.0))
    assert failed.failure == "oom" and not failed.is_feasible
    assert failed.throughput_sps is None and failed.peak_memory_bytes is None
    assert failed.mfu is None and failed.failure_detail.endswith("last line of oom")
    pruned = trial_record("s", make_trial(2, state=TrialState.PRUNED, failure="infeasible"))
    assert pruned.state == "PRUNED" and not pruned.is_feasible
    assert json.loads(pruned.config_json)["knobs"]["precision"] == "fp32"


def test_trial_record_field_names_carry_units() -> None:
    figures = {
        "throughput_sps",
        "throughput_iqr_sps",
        "step_time_s",
        "step_time_p90_s",
        "compile_s",
        "peak_memory_bytes",
        "train_s",
        "duration_s",
        "energy_j_per_sample",
        "flops_per_sample",
    }
    assert figures <= {f.name for f in dataclasses.fields(TrialRecord)}


def test_trial_record_of_a_time_to_accuracy_trial_keeps_its_time_and_curve() -> None:
    curve = [[0.5, 10, 0.81], [1.0, 20, 0.93], [1.5, 30, 0.982]]
    extra = {"time_to_accuracy_s": 1.5, "target_reached": True, "eval_s": 0.12}
    trial = make_trial(3, (900.0, 0.982, 5 << 20), extra_attrs={**extra, "metric_curve": curve})

    record = trial_record("s", trial)

    assert record.time_to_accuracy_s == 1.5 and record.target_reached is True
    assert record.eval_s == 0.12
    assert json.loads(record.metric_curve_json or "") == curve


def test_trial_record_of_a_missed_target_has_no_time_and_of_a_throughput_trial_no_tta() -> None:
    missed = make_trial(
        4,
        (900.0, 0.91, 5 << 20),
        extra_attrs={"time_to_accuracy_s": None, "target_reached": False, "metric_curve": []},
    )
    throughput = make_trial(5, (900.0, 0.91, 5 << 20))

    record = trial_record("s", missed)
    plain = trial_record("s", throughput)

    assert record.time_to_accuracy_s is None and record.target_reached is False
    assert record.metric_curve_json == "[]"
    assert (plain.time_to_accuracy_s, plain.target_reached, plain.eval_s) == (None, None, None)
    assert plain.metric_curve_json is None


def test_trial_record_keeps_the_compile_cache_and_nvmls_process_memory() -> None:
    attrs = {"compile_s": 31.2, "compile_cache": "warm", "process_memory_bytes": 900 << 20}
    trial = make_trial(3, (5000.0, 0.97, 7 << 20), extra_attrs=attrs)

    record = trial_record("s", trial)

    assert record.compile_cache == "warm"
    assert record.process_memory_bytes == 900 << 20
    eager_cpu = trial_record("s", make_trial(4, (5000.0, 0.97, 7 << 20)))
    assert eager_cpu.compile_cache is None and eager_cpu.process_memory_bytes is None


def test_trial_record_names_the_trial_whose_metric_it_reused() -> None:
    reused = make_trial(5, (900.0, 0.98, 5 << 20), extra_attrs={"metric_from_trial": 2})
    trained = make_trial(2, (800.0, 0.98, 5 << 20))

    assert trial_record("s", reused).metric_from_trial == 2
    assert trial_record("s", trained).metric_from_trial is None
