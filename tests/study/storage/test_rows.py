"""Each frozen record maps to its model's row by name (autotune/study/storage/_rows.py): its fields
are the model's columns but for the differences its mapping declares, and a record stored and
read back is the same record."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest
import sqlalchemy as sa

from autotune.study.storage import (
    HardwareFingerprint,
    StudyRecord,
    VerificationPlan,
    VerificationRecord,
    trial_record,
)
from autotune.study.storage._rows import (
    MAPPINGS,
    PLAN,
    TRIAL,
    VERIFICATION,
    RowMapping,
    hardware_from_row,
    new_hardware_row,
    new_run_row,
    new_study_row,
    run_from_rows,
    study_from_row,
    trial_from_row,
)
from autotune.study.storage.models import TrialResultModel, VerificationModel
from tests.studies.mock import make_trial

HARDWARE = HardwareFingerprint(
    device_kind="cuda",
    device_name="NVIDIA H100 80GB HBM3",
    device_count=1,
    device_memory_bytes=80 << 30,
    compute_capability="9.0",
    driver_version="550.54.15",
    cuda_version="12.4",
    cudnn_version="90100",
    torch_version="2.13.0",
    cpu_model="Intel Xeon",
    cpu_cores=16,
    simulated=False,
)


def _name(mapping: RowMapping) -> str:
    return mapping.record.__name__


@pytest.mark.parametrize("mapping", MAPPINGS, ids=_name)
def test_fields_are_the_models_columns_but_for_the_declared_differences(
    mapping: RowMapping,
) -> None:
    fields = {f.name for f in dataclasses.fields(mapping.record)}
    columns = set(sa.inspect(mapping.model).columns.keys())

    assert mapping.record_only <= fields
    assert set(mapping.renamed) <= fields - mapping.record_only
    assert mapping.json_fields <= fields - mapping.record_only
    assert mapping.row_only <= columns
    assert {column for _, column in mapping.pairs()} == columns - mapping.row_only
    assert {name for name, _ in mapping.pairs()} == fields - mapping.record_only


def test_a_study_and_its_hardware_read_back_equal() -> None:
    record = StudyRecord(
        study_name="s",
        space_name="cnn_small",
        space_source="search_spaces/cnn_small.yaml",
        device_kind="cuda",
        simulated=False,
        sampler="gp",
        seed=3,
        created_at=dt.datetime(2026, 11, 23, 4, 0),
        hardware=HARDWARE,
        metric_name="val_loss",
        metric_direction="minimize",
    )
    hardware = new_hardware_row(HARDWARE)

    row = new_study_row(record, hardware)

    assert row.optuna_study_name == "s" and row.hardware is hardware
    assert hardware.fingerprint_sha256 == HARDWARE.fingerprint_sha256
    assert hardware_from_row(hardware) == HARDWARE and hardware_from_row(None) is None
    assert study_from_row(row) == record


def test_a_study_without_a_creation_time_leaves_it_to_the_column_default() -> None:
    record = StudyRecord("s", "space", "space.yaml", "mock", True, "tpe", 0, None, None)

    assert new_study_row(record, None).created_at is None  # set by the column's default on insert


def test_a_trial_reads_back_equal_and_its_study_is_the_callers() -> None:
    record = trial_record("s", make_trial(4, (5000.0, 0.97, 7 << 20), batch_size=128))

    row = TrialResultModel(study_id=1, **TRIAL.values(record))

    assert "study_name" not in TRIAL.values(record)
    assert trial_from_row("s", row) == record


def test_assign_overwrites_every_stored_field() -> None:
    old = trial_record("s", make_trial(4, None, failure="oom", constraint=1.0))
    new = trial_record("s", make_trial(4, (5000.0, 0.97, 7 << 20)))
    row = TrialResultModel(study_id=1, **TRIAL.values(old))

    TRIAL.assign(row, new)

    assert trial_from_row("s", row) == new


def test_a_verification_run_stores_its_plan_as_json_and_reads_back_equal() -> None:
    plan = VerificationPlan(0, (5, 2), (1000, 1001, 1002), 0.5)
    measured = VerificationRecord(
        round_index=1,
        seed=1001,
        trial_number=5,
        is_baseline=False,
        simulated=True,
        failure=None,
        failure_detail=None,
        throughput_sps=2000.0,
        throughput_iqr_sps=10.0,
        step_time_s=0.032,
        val_metric=0.96,
        peak_memory_bytes=1 << 20,
        train_s=1.5,
        config_json="{}",
    )
    started = dt.datetime(2026, 11, 23, 4, 0)

    run = new_run_row(7, 2, plan, started)
    read = run_from_rows("s", run, [VerificationModel(run_id=1, **VERIFICATION.values(measured))])

    assert (run.candidates_json, run.seeds_json, run.rounds) == ("[5, 2]", "[1000, 1001, 1002]", 3)
    assert PLAN.values(plan)["candidates_json"] == "[5, 2]"
    assert (read.study_name, read.number, read.plan) == ("s", 2, plan)
    assert read.rows == (measured,)
    assert (read.started_at, read.completed_at) == (started, None)
