"""The results store: reads and writes autotune's tables, hands back frozen records."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from sqlalchemy import Engine, inspect
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from autotune.core.config import display_url
from autotune.core.exceptions import StorageError
from autotune.study.storage._migrate import head_revision, schema_revision, upgrade_schema
from autotune.study.storage._rows import (
    TRIAL,
    VERIFICATION,
    new_hardware_row,
    new_run_row,
    new_study_row,
    run_from_rows,
    study_from_row,
    trial_from_row,
)
from autotune.study.storage._session import create_results_engine, session_scope
from autotune.study.storage.models import (
    HardwareModel,
    StudyModel,
    TrialResultModel,
    VerificationModel,
    VerificationRunModel,
)
from autotune.study.storage.records import (
    HardwareFingerprint,
    StudyRecord,
    TrialRecord,
    VerificationPlan,
    VerificationRecord,
    VerificationRun,
)

__all__ = ["ResultsStore"]


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


class ResultsStore:
    """autotune's results tables in one database (the study storage URL).

    Open it with :meth:`open`. A store opened with ``create=False`` never writes: where the
    tables do not exist (a database made before them, or by Optuna alone) it reads as empty.

    Args:
        engine: the SQLAlchemy engine.
        url: the storage URL, for messages.
        available: whether the tables exist at the newest revision.
    """

    def __init__(self, engine: Engine, url: str, *, available: bool) -> None:
        self._engine = engine
        self.url = url
        self.available = available

    @classmethod
    def open(cls, url: str, *, create: bool = True) -> ResultsStore:
        """Open the results tables at ``url``.

        Args:
            url: the study storage URL (any SQLAlchemy URL).
            create: create or upgrade the tables (Alembic) when True; read only when False.

        Raises:
            StorageError: the database fails, or (``create=False``) its tables are at another
                revision than this version of autotune reads.
        """
        engine = create_results_engine(url)
        if create:
            upgrade_schema(engine)
            return cls(engine, url, available=True)
        revision = schema_revision(engine)
        if revision is None:
            return cls(engine, url, available=False)
        if revision != head_revision():
            engine.dispose()
            raise StorageError(
                f"storage={display_url(url)}: results tables are at revision {revision}, this autotune reads "
                f"{head_revision()}; run `autotune run` with this storage once to upgrade them"
            )
        return cls(engine, url, available=True)

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (for tests and ad-hoc queries)."""
        return self._engine

    def close(self) -> None:
        """Release the engine's connections."""
        self._engine.dispose()

    def __enter__(self) -> ResultsStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def table_names(self) -> list[str]:
        """Names of every table in the database (ours and Optuna's)."""
        return sorted(inspect(self._engine).get_table_names())

    # ----------------------------------------------------------------------------------------
    # Writing

    def _require_tables(self) -> None:
        if not self.available:
            raise StorageError(
                f"storage={display_url(self.url)}: the results tables do not exist here"
            )

    @staticmethod
    def _hardware_row(session: Session, hardware: HardwareFingerprint) -> HardwareModel:
        sha = hardware.fingerprint_sha256
        row = HardwareModel.find_by_fingerprint(session, sha)
        if row is not None:
            return row
        try:
            with session.begin_nested():
                row = new_hardware_row(hardware)
                session.add(row)
            return row
        except IntegrityError:  # another worker inserted the same fingerprint meanwhile
            found = HardwareModel.find_by_fingerprint(session, sha)
            assert found is not None
            return found

    @staticmethod
    def _trial_row(session: Session, study_id: int, record: TrialRecord) -> TrialResultModel:
        """The trial's row, inserted or updated. Several workers of one study each write the
        trials they see finished, so two may insert the same trial at once: the insert runs
        in a savepoint, and the loser updates the winner's row instead (as for hardware)."""
        row = TrialResultModel.find(session, study_id, record.trial_number)
        if row is None:
            try:
                with session.begin_nested():
                    row = TrialResultModel(study_id=study_id, **TRIAL.values(record))
                    session.add(row)
                return row
            except IntegrityError:  # another worker inserted this trial's row meanwhile
                row = TrialResultModel.find(session, study_id, record.trial_number)
                assert row is not None
        TRIAL.assign(row, record)
        return row

    def record_study(self, record: StudyRecord) -> StudyRecord:
        """Record a study the first time it is opened; later calls keep the first record.

        Returns:
            The stored record (the first one written).

        Raises:
            StorageError: the database failed.
        """
        self._require_tables()
        with session_scope(self._engine) as session:
            row = StudyModel.find_by_name(session, record.study_name)
            if row is None:
                hardware = self._hardware_row(session, record.hardware) if record.hardware else None
                row = new_study_row(record, hardware)
                session.add(row)
                session.flush()
            return study_from_row(row)

    def record_trials(
        self, records: Iterable[TrialRecord], hardware: HardwareFingerprint | None = None
    ) -> int:
        """Insert or update trial rows (one per study and trial number).

        Args:
            records: rows built by :func:`autotune.study.storage.trial_record`; their studies must
                have been recorded with :meth:`record_study`.
            hardware: the machine the trials ran on.

        Returns:
            The number of rows written.

        Raises:
            StorageError: a study is not recorded, or the database failed.
        """
        self._require_tables()
        written = 0
        with session_scope(self._engine) as session:
            hardware_row = self._hardware_row(session, hardware) if hardware else None
            studies: dict[str, StudyModel] = {}
            for record in records:
                study = studies.get(record.study_name) or StudyModel.find_by_name(
                    session, record.study_name
                )
                if study is None:
                    raise StorageError(
                        f"results tables: study {record.study_name!r} is not recorded; "
                        "record_study() comes first"
                    )
                studies[record.study_name] = study
                row = self._trial_row(session, study.id, record)
                if hardware_row is not None:
                    row.hardware_id = hardware_row.id
                written += 1
        return written

    # ----------------------------------------------------------------------------------------
    # Reading

    def study(self, study_name: str) -> StudyRecord | None:
        """Our record of the Optuna study ``study_name``, or None."""
        if not self.available:
            return None
        with session_scope(self._engine) as session:
            row = StudyModel.find_by_name(session, study_name)
            return study_from_row(row) if row is not None else None

    def studies(self) -> list[StudyRecord]:
        """Every recorded study, oldest first."""
        if not self.available:
            return []
        with session_scope(self._engine) as session:
            return [study_from_row(row) for row in StudyModel.find_all(session)]

    def trials(self, study_name: str) -> list[TrialRecord]:
        """The trial rows of ``study_name`` by trial number (empty when none are recorded)."""
        if not self.available:
            return []
        with session_scope(self._engine) as session:
            study = StudyModel.find_by_name(session, study_name)
            if study is None:
                return []
            return [
                trial_from_row(study_name, row)
                for row in TrialResultModel.find_by_study(session, study.id)
            ]

    def recorded_trial_numbers(self, study_name: str) -> set[int]:
        """Trial numbers of ``study_name`` that have a row."""
        if not self.available:
            return set()
        with session_scope(self._engine) as session:
            study = StudyModel.find_by_name(session, study_name)
            return TrialResultModel.trial_numbers(session, study.id) if study else set()

    # ----------------------------------------------------------------------------------------
    # Verifications

    def _study_row(self, session: Session, study_name: str) -> StudyModel:
        row = StudyModel.find_by_name(session, study_name)
        if row is None:
            raise StorageError(
                f"results tables: study {study_name!r} is not recorded; record_study() comes first"
            )
        return row

    def start_verification(self, study_name: str, plan: VerificationPlan) -> VerificationRun:
        """Record a new verification of ``study_name`` (numbered after the newest one).

        Returns:
            The new run, with no rows yet.

        Raises:
            StorageError: the study is not recorded, or the database failed.
        """
        self._require_tables()
        with session_scope(self._engine) as session:
            study = self._study_row(session, study_name)
            latest = VerificationRunModel.find_latest(session, study.id)
            number = (latest.number if latest is not None else 0) + 1
            run = new_run_row(study.id, number, plan, _utcnow())
            session.add(run)
            session.flush()
            return run_from_rows(study_name, run, [])

    def _run_row(self, session: Session, study_name: str, number: int) -> VerificationRunModel:
        study = self._study_row(session, study_name)
        row = VerificationRunModel.find_by_number(session, study.id, number)
        if row is None:
            raise StorageError(
                f"results tables: study {study_name!r} has no verification number {number}"
            )
        return row

    def record_verification(self, study_name: str, number: int, record: VerificationRecord) -> None:
        """Store one configuration's measurement in one round of verification ``number``
        (a row already there for that round, trial and attempt is replaced; another attempt
        is a row of its own).

        Raises:
            StorageError: no such verification, or the database failed.
        """
        self._require_tables()
        with session_scope(self._engine) as session:
            run = self._run_row(session, study_name, number)
            for row in VerificationModel.find_by_run(session, run.id):
                key = (row.round_index, row.trial_number, row.attempt)
                if key == (record.round_index, record.trial_number, record.attempt):
                    VERIFICATION.assign(row, record)
                    return
            session.add(VerificationModel(run_id=run.id, **VERIFICATION.values(record)))

    def complete_verification(self, study_name: str, number: int) -> VerificationRun:
        """Mark verification ``number`` finished (every round measured) and return it.

        Raises:
            StorageError: no such verification, or the database failed.
        """
        self._require_tables()
        with session_scope(self._engine) as session:
            run = self._run_row(session, study_name, number)
            run.completed_at = _utcnow()
            session.flush()
            return run_from_rows(study_name, run, VerificationModel.find_by_run(session, run.id))

    def latest_verification(
        self, study_name: str, *, complete: bool = False
    ) -> VerificationRun | None:
        """The newest verification of ``study_name`` (the newest finished one when
        ``complete``), with its rows; None when there is none."""
        if not self.available:
            return None
        with session_scope(self._engine) as session:
            study = StudyModel.find_by_name(session, study_name)
            if study is None:
                return None
            run = VerificationRunModel.find_latest(session, study.id, complete=complete)
            if run is None:
                return None
            return run_from_rows(study_name, run, VerificationModel.find_by_run(session, run.id))
