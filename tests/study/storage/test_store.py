"""The results store: frozen records, upserts, read-only opening, errors, hardware fingerprints."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import optuna
import pytest
import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from autotune.core.exceptions import StorageError
from autotune.core.hardware import (
    detect_fingerprint,
)
from autotune.core.hardware._capabilities import (
    capabilities_from_fingerprint,
)
from autotune.study.storage import (
    HardwareFingerprint,
    ResultsStore,
    StudyNotFoundError,
    StudyRecord,
    TrialRecord,
    VerificationPlan,
    VerificationRecord,
    create_results_engine,
    load_existing_study,
    trial_record,
)
from autotune.study.storage._fingerprint import (
    hardware_fingerprint,
)
from autotune.study.storage._session import (
    session_scope,
)
from autotune.testing import make_capabilities
from autotune.testing.machines import simulated_machine
from tests.studies.mock import make_trial, sqlite_url

HARDWARE = HardwareFingerprint(
    device_kind="cuda",
    device_name="NVIDIA H100 80GB HBM3",
    device_count=8,
    device_memory_bytes=80 << 30,
    compute_capability="9.0",
    driver_version="550.54.15",
    cuda_version="12.4",
    cudnn_version="90100",
    torch_version="2.13.0",
    cpu_model="Intel Xeon",
    cpu_cores=64,
    simulated=False,
)


def _study(name: str = "s", hardware: HardwareFingerprint | None = HARDWARE) -> StudyRecord:
    return StudyRecord(
        study_name=name,
        space_name="cnn_small",
        space_source="search_spaces/cnn_small.yaml",
        device_kind="cuda",
        simulated=False,
        sampler="nsga2",
        seed=0,
        created_at=None,
        hardware=hardware,
    )


@pytest.fixture
def store(tmp_path: Path) -> ResultsStore:
    with ResultsStore.open(sqlite_url(tmp_path)) as s:
        yield s


def test_record_study_keeps_the_first_record_and_returns_frozen_values(store: ResultsStore) -> None:
    first = store.record_study(_study())
    again = store.record_study(dataclasses.replace(_study(), sampler="tpe", hardware=None))
    assert again.sampler == "nsga2" and again.hardware == HARDWARE
    assert store.study("s") == first
    assert isinstance(first.hardware, HardwareFingerprint)
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.seed = 3  # type: ignore[misc]
    assert store.study("missing") is None
    assert [s.study_name for s in store.studies()] == ["s"]


def test_hardware_rows_are_shared_by_fingerprint(store: ResultsStore) -> None:
    store.record_study(_study("a"))
    store.record_study(_study("b"))
    other = dataclasses.replace(HARDWARE, driver_version="560.0")
    store.record_study(_study("c", other))
    with store.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM autotune_hardware")).scalar() == 2


def test_record_trials_inserts_then_updates_one_row_per_trial(store: ResultsStore) -> None:
    store.record_study(_study())
    trial = make_trial(0, (1234.5, 0.91, 5e6), baseline=True)
    assert store.record_trials([trial_record("s", trial)], HARDWARE) == 1
    changed = make_trial(0, (2000.0, 0.95, 6e6), baseline=True)
    store.record_trials([trial_record("s", changed)], HARDWARE)
    rows = store.trials("s")
    assert len(rows) == 1 and isinstance(rows[0], TrialRecord)
    assert rows[0].throughput_sps == 2000.0 and rows[0].peak_memory_bytes == 6_000_000
    assert rows[0].is_baseline and rows[0].is_feasible
    assert store.recorded_trial_numbers("s") == {0}
    with store.engine.connect() as conn:
        gpu = conn.execute(
            sa.text(
                "SELECT h.device_name FROM autotune_trial_results r "
                "JOIN autotune_hardware h ON h.id = r.hardware_id"
            )
        ).scalar()
    assert gpu == "NVIDIA H100 80GB HBM3"


def test_a_trial_row_another_worker_inserted_meanwhile_is_updated_not_inserted_twice(
    store: ResultsStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two workers may both see a trial finished and insert its row at once (it crashed a
    worker of the 4-worker PostgreSQL study on a unique violation): the loser updates."""
    from autotune.study.storage.models import TrialResultModel

    store.record_study(_study())
    store.record_trials([trial_record("s", make_trial(0, (1234.5, 0.91, 5e6)))], HARDWARE)
    real_find = TrialResultModel.find.__func__  # type: ignore[attr-defined]
    calls: list[int] = []

    def find_missing_once(cls, session, study_id, trial_number):  # type: ignore[no-untyped-def]
        calls.append(trial_number)
        if len(calls) == 1:  # the other worker's row is not committed when this one looks
            return None
        return real_find(cls, session, study_id, trial_number)

    monkeypatch.setattr(TrialResultModel, "find", classmethod(find_missing_once))
    changed = make_trial(0, (2000.0, 0.95, 6e6))
    assert store.record_trials([trial_record("s", changed)], HARDWARE) == 1
    rows = store.trials("s")
    assert len(rows) == 1 and rows[0].throughput_sps == 2000.0
    assert calls == [0, 0]  # looked, collided, looked again


def test_record_trials_of_an_unrecorded_study_is_refused(store: ResultsStore) -> None:
    with pytest.raises(StorageError, match="not recorded"):
        store.record_trials([trial_record("ghost", make_trial(0, (1.0, 0.5, 1.0)))])
    assert store.trials("ghost") == []


def test_session_scope_rolls_back_and_raises_storage_error_from_the_cause(tmp_path: Path) -> None:
    engine = create_results_engine(sqlite_url(tmp_path))
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE t (x INTEGER)"))
    with (
        pytest.raises(StorageError, match="database error") as info,
        session_scope(engine) as session,
    ):
        session.execute(sa.text("INSERT INTO t VALUES (1)"))
        session.execute(sa.text("SELECT * FROM no_such_table"))
    assert isinstance(info.value.__cause__, SQLAlchemyError)
    assert "\n" not in str(info.value)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM t")).scalar() == 0  # rolled back


def test_read_only_open_creates_nothing_and_reads_as_empty(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    engine = create_results_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE other (x INTEGER)"))
    with ResultsStore.open(url, create=False) as reader:
        assert not reader.available
        assert reader.studies() == [] and reader.trials("x") == [] and reader.study("x") is None
        with pytest.raises(StorageError, match="do not exist"):
            reader.record_study(_study())
    assert sa.inspect(engine).get_table_names() == ["other"]


def test_read_only_open_refuses_tables_at_another_revision(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    ResultsStore.open(url).close()
    engine = create_results_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE autotune_alembic_version SET version_num = '9999_future'"))
    with pytest.raises(StorageError, match="revision 9999_future"):
        ResultsStore.open(url, create=False)


def test_hardware_fingerprint_of_the_mock_device_is_simulated_and_hash_is_stable() -> None:
    caps = make_capabilities("mock")
    assert caps.fingerprint is not None
    fp = hardware_fingerprint(caps, caps.fingerprint)
    assert fp.simulated and fp.device_kind == "mock"
    assert fp.cuda_version is None and fp.driver_version is None
    assert fp.fingerprint_sha256 == hardware_fingerprint(caps, caps.fingerprint).fingerprint_sha256
    assert (
        fp.fingerprint_sha256
        != dataclasses.replace(fp, cpu_cores=fp.cpu_cores + 1).fingerprint_sha256
    )
    assert ("simulated", "yes: SIMULATED, no figure is a measurement") in fp.rows()


def test_hardware_fingerprint_uses_the_machine_fingerprint_the_study_recorded() -> None:
    recorded = {
        "driver_version": "550.1",
        "cuda_version": "12.4",
        "cudnn_version": 90100,
        "torch_version": "2.13.0+cu124",
        "cpu_model": "EPYC 9654",
        "logical_cores": 192,
    }
    fp = hardware_fingerprint(make_capabilities("cuda"), recorded)
    assert (fp.driver_version, fp.cuda_version, fp.cudnn_version) == ("550.1", "12.4", "90100")
    assert (fp.torch_version, fp.cpu_model, fp.cpu_cores) == ("2.13.0+cu124", "EPYC 9654", 192)
    assert fp.device_name == "fake GPU" and fp.compute_capability == "8.0"


def test_hardware_fingerprint_is_read_from_the_machine_fingerprint_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    machine = detect_fingerprint("cuda", nvml=simulated_machine("h100x8"))
    caps = capabilities_from_fingerprint(machine)
    fp = hardware_fingerprint(caps, machine)
    assert fp == hardware_fingerprint(caps, machine.to_dict())
    assert (fp.driver_version, fp.torch_version, fp.cpu_cores) == (
        machine.driver_version,
        machine.torch_version,
        machine.logical_cores,
    )
    assert fp.device_name == machine.gpus[0].name and fp.device_count == 8
    on_cpu = hardware_fingerprint(make_capabilities("cpu"), machine)
    assert (on_cpu.driver_version, on_cpu.cuda_version, on_cpu.cudnn_version) == (None,) * 3


def test_reading_a_missing_sqlite_file_fails_without_creating_it(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "nowhere")
    with pytest.raises(StorageError, match="no database file"):
        load_existing_study("demo", url)
    assert not (tmp_path / "nowhere").exists()


def test_unknown_study_names_the_ones_there_are(tmp_path: Path) -> None:

    url = sqlite_url(tmp_path)
    optuna.create_study(study_name="real", storage=url)
    with pytest.raises(
        StudyNotFoundError, match=r"study=fake: no such study in .*; studies there: real$"
    ):
        load_existing_study("fake", url)


def _verification_row(round_index: int, trial_number: int, **figures: object) -> VerificationRecord:
    values: dict[str, object] = {
        "failure": None,
        "failure_detail": None,
        "throughput_sps": 1000.0 + trial_number,
        "throughput_iqr_sps": 5.0,
        "step_time_s": 0.064,
        "val_metric": 0.9,
        "peak_memory_bytes": 8 << 20,
        "train_s": 2.0,
    }
    values.update(figures)
    return VerificationRecord(
        round_index=round_index,
        seed=1000 + round_index,
        trial_number=trial_number,
        is_baseline=trial_number == 0,
        simulated=True,
        config_json="{}",
        **values,  # type: ignore[arg-type]
    )


def test_verifications_are_numbered_resumable_and_read_back_frozen(store: ResultsStore) -> None:
    store.record_study(_study())
    plan = VerificationPlan(0, (3, 5), (1000, 1001), 0.5)

    first = store.start_verification("s", plan)
    store.record_verification("s", 1, _verification_row(0, 0))
    store.record_verification("s", 1, _verification_row(0, 3, failure="oom", throughput_sps=None))
    store.record_verification("s", 1, _verification_row(0, 3))  # replaces the failed row

    latest = store.latest_verification("s")
    assert first.number == 1 and first.rows == () and not first.complete
    assert latest is not None and latest.plan == plan and not latest.complete
    assert latest.done() == {(0, 0), (0, 3)}
    assert [r.failure for r in latest.rows] == [None, None]
    assert store.latest_verification("s", complete=True) is None
    done = store.complete_verification("s", 1)
    second = store.start_verification("s", plan)
    assert done.complete and second.number == 2
    assert store.latest_verification("s", complete=True) == done
    with pytest.raises(dataclasses.FrozenInstanceError):
        done.number = 3  # type: ignore[misc]
    with pytest.raises(StorageError, match="no verification number 9"):
        store.record_verification("s", 9, _verification_row(0, 0))
    with pytest.raises(StorageError, match="not recorded"):
        store.start_verification("other", plan)


def test_a_time_to_accuracy_study_its_trials_and_verification_rows_read_back_whole(
    store: ResultsStore,
) -> None:
    study = dataclasses.replace(_study(), objective="time_to_accuracy", target=0.98)
    curve = [[0.5, 10, 0.9], [1.25, 25, 0.981]]
    trial = make_trial(
        1,
        (900.0, 0.981, 5 << 20),
        extra_attrs={
            "time_to_accuracy_s": 1.25,
            "target_reached": True,
            "eval_s": 0.1,
            "metric_curve": curve,
        },
    )
    row = _verification_row(
        0, 1, time_to_accuracy_s=1.3, target_reached=True, metric_curve_json="[[1.3, 26, 0.98]]"
    )
    missed = _verification_row(0, 0, time_to_accuracy_s=None, target_reached=False)

    recorded = store.record_study(study)
    store.record_trials([trial_record("s", trial)])
    store.start_verification("s", VerificationPlan(0, (1,), (1000,), 0.5))
    store.record_verification("s", 1, missed)
    store.record_verification("s", 1, row)

    (stored,) = store.trials("s")
    latest = store.latest_verification("s")
    assert (recorded.objective, recorded.target) == ("time_to_accuracy", 0.98)
    assert store.study("s") == recorded
    assert (stored.time_to_accuracy_s, stored.target_reached, stored.eval_s) == (1.25, True, 0.1)
    assert stored.metric_curve_json is not None and json.loads(stored.metric_curve_json) == curve
    assert latest is not None and latest.rows == (missed, row)


def test_a_study_recorded_without_objective_is_a_throughput_study(store: ResultsStore) -> None:
    record = store.record_study(_study())

    assert (record.objective, record.target) == ("throughput", None)
