"""TrialResult: the one reader of a trial's user attributes, typed; and the column registry."""

from __future__ import annotations

import dataclasses

import pytest
from optuna.trial import TrialState

from autotune.study.storage import TrialRecord
from autotune.study.trial_result import (
    BASELINE_ATTR,
    FAILURE_ATTR,
    FIGURE_COLUMNS,
    MATH_KEY_ATTR,
    METRIC_FROM_TRIAL_ATTR,
    WARM_START_ATTR,
    TrialResult,
)
from autotune.trial.measure import BUSY_ATTR
from tests.studies.mock import make_trial


def test_a_measured_trial_reads_its_figures_with_their_types() -> None:
    trial = make_trial(
        3,
        (1234.5, 0.97, 64 << 20),
        extra_attrs={
            "val_samples": 359,
            "memory_kind": "cpu_peak_rss_growth",
            "compile_cache": "warm",
            "metric_from_trial": 1,
            "other_cpu_share": 0.02,
            "math_key": "0123abcd",
            "warm_start_from": "older#7",
        },
        batch_size=128,
    )

    result = TrialResult.from_trial(trial)

    assert result.number == 3 and result.state == TrialState.COMPLETE
    assert result.values == (1234.5, 0.97, float(64 << 20))
    assert result.params["batch_size"] == 128
    assert result.throughput_sps == 1234.5 and isinstance(result.throughput_sps, float)
    assert result.val_metric == 0.97
    assert result.peak_memory_bytes == 64 << 20 and isinstance(result.peak_memory_bytes, int)
    assert result.val_samples == 359 and result.metric_from_trial == 1
    assert (result.memory_kind, result.compile_cache) == ("cpu_peak_rss_growth", "warm")
    assert result.other_cpu_share == 0.02
    assert (result.math_key, result.warm_start_from) == ("0123abcd", "older#7")
    assert result.simulated and not result.baseline
    assert result.measured and result.feasible and not result.failed
    assert result.failure_kind is None and not result.time_to_accuracy and not result.busy


def test_a_figure_of_the_wrong_type_reads_as_none_and_an_absent_one_too() -> None:
    trial = make_trial(
        1,
        (100.0, 0.5, 1 << 20),
        extra_attrs={
            "compile_s": True,  # a bool is no number
            "metric_from_trial": "2",  # text is no count
            "memory_kind": 7,  # a number is no text
            "target_reached": "yes",  # text is no bool
            "metric_curve": "not a list",
        },
    )

    result = TrialResult.from_trial(trial)

    assert result.compile_s is None and result.metric_from_trial is None
    assert result.memory_kind is None and result.target_reached is None
    assert result.metric_curve == () and result.eval_s is None and result.mfu is None


def test_a_count_stored_as_a_float_reads_as_an_int_and_a_nan_count_as_none() -> None:
    trial = make_trial(
        1, (100.0, 0.5, 1 << 20), extra_attrs={"steps": 12.0, "parameters": float("nan")}
    )

    result = TrialResult.from_trial(trial)

    assert result.steps == 12 and isinstance(result.steps, int)
    assert result.parameters is None


def test_a_failed_trial_says_its_kind_and_last_line() -> None:
    result = TrialResult.from_trial(make_trial(5, failure="oom", constraint=1.0))

    assert result.failed and result.failure_kind == "oom"
    assert result.last_failure_line == "last line of oom"
    assert not result.measured and not result.feasible


def test_a_pruned_trial_is_not_measured_and_a_broken_constraint_is_not_feasible() -> None:
    pruned = TrialResult.from_trial(make_trial(2, state=TrialState.PRUNED))
    over = TrialResult.from_trial(make_trial(4, (100.0, 0.5, 1 << 20), constraint=0.5))

    assert not pruned.measured and not pruned.failed and pruned.values is None
    assert over.measured and not over.feasible and over.constraints == {"failed": 0.5}


def test_a_time_to_accuracy_trial_reads_its_curve_and_its_seconds_to_beat() -> None:
    curve = [[0.5, 10, 0.81], [1.0, 20, 0.93], ["bad"], [1.5, 30, 0.982]]
    reached = make_trial(
        3,
        extra_attrs={"time_to_accuracy_s": 1.5, "target_reached": True, "metric_curve": curve},
    )
    missed = make_trial(4, extra_attrs={"target_reached": False, "train_s": 9.0, "target": 0.98})

    r, m = TrialResult.from_trial(reached), TrialResult.from_trial(missed)

    assert r.time_to_accuracy and r.target_reached is True
    assert r.metric_curve == ((0.5, 10, 0.81), (1.0, 20, 0.93), (1.5, 30, 0.982))
    assert r.seconds_trained_to_target == 1.5
    assert m.time_to_accuracy and m.target_reached is False
    assert m.seconds_trained_to_target == 9.0 and m.target == 0.98


def test_the_machine_marks_read_as_typed_flags() -> None:
    trial = make_trial(
        1,
        (100.0, 0.5, 1 << 20),
        baseline=True,
        extra_attrs={
            BUSY_ATTR: True,
            "other_cpu_share": 0.48,
            "busy_remeasures": 2,
            "busy_run_shares": [0.6, "x", 0.1],
        },
    )

    result = TrialResult.from_trial(trial)

    assert result.baseline and result.busy and result.busy_machine is True
    assert result.busy_remeasures == 2 and result.busy_run_shares == (0.6, 0.1)


@pytest.mark.parametrize("entry", FIGURE_COLUMNS, ids=lambda e: e.figure)
def test_every_registered_figure_is_a_trial_result_field_and_a_results_column(
    entry: object,
) -> None:
    """The registry's figures are read by TrialResult and stored by the results row (and so
    written by ``trials --csv``) under the same name."""
    figure = entry.figure
    assert figure in {f.name for f in dataclasses.fields(TrialResult)}
    assert figure in {f.name for f in dataclasses.fields(TrialRecord)}


def test_each_attribute_a_writer_names_is_a_field_the_record_reads() -> None:
    # The writers (the study's objective, the warm start, the baseline) import these names;
    # a renamed attribute must rename the field that reads it, or the read silently is None.
    fields = {f.name for f in dataclasses.fields(TrialResult)}
    for name in (BASELINE_ATTR, MATH_KEY_ATTR, METRIC_FROM_TRIAL_ATTR, WARM_START_ATTR):
        assert name in fields, name
    assert FAILURE_ATTR == "failure" and "failure_kind" in fields


def test_the_study_attributes_are_read_typed_and_malformed_entries_read_as_absent() -> None:
    from autotune.study.trial_result import STUDY_RECORD_ATTR, StudyAttributes

    attrs = StudyAttributes.from_attrs(
        {
            STUDY_RECORD_ATTR: {
                "space": {"name": "s", "baseline": {"batch_size": 32}, "constraints": {}},
                "device_kind": "cuda",
                "device_name": "NVIDIA H200",
                "simulated": False,
                "objective": "time_to_accuracy",
                "target": {"metric": "accuracy", "direction": "maximize", "value": 0.98},
                "precision_screen": {"min_peak_ratio": 0.1},
            },
            "hardware": {"cpu": "x"},
            "hardware_changes": [{"from_trial": 3, "hardware": {"cpu": "y"}}, "junk"],
        }
    )

    assert attrs.space["name"] == "s" and attrs.names_baseline
    assert (attrs.device_kind, attrs.device_name, attrs.simulated) == ("cuda", "NVIDIA H200", False)
    assert attrs.objective == "time_to_accuracy" and attrs.target["value"] == 0.98
    assert attrs.precision_screen == {"min_peak_ratio": 0.1}
    assert attrs.latest_hardware == {"cpu": "y"} and len(attrs.hardware_changes) == 1

    empty = StudyAttributes.from_attrs({STUDY_RECORD_ATTR: "not a record", "hardware": 3})
    assert empty.record == {} and empty.space == {} and empty.device_kind is None
    assert empty.objective == "throughput" and empty.hardware is None
    assert empty.latest_hardware is None and not empty.names_baseline
