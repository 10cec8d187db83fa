"""SQLAlchemy 2.0 models of autotune's results tables.

They live in the same database as Optuna's tables and beside them: every table name starts
with ``autotune_``, they have their own metadata and their own Alembic version table
(``autotune_alembic_version``), and nothing here references or alters an Optuna table. Studies
are linked to Optuna's by the study name.

These models are the one source of the schema. A measured run's figures and a trial's are
declared once, as the fields of the frozen records
(:class:`~autotune.study.storage.records.MeasuredRun`,
:class:`~autotune.study.storage.records.TrialRecord`), and become columns here through
:func:`record_columns`; the models declare the rest (keys, links, the other tables). The
schema is created and upgraded by the migrations in ``autotune/study/storage/migrations``
(:func:`autotune.study.storage.upgrade_schema`), which at head match the models exactly
(``tests/study/storage/test_migrations.py``: Alembic's autogenerate finds no difference), so
a new figure is a record's field plus its migration from Alembic's autogenerate (how:
``migrations/env.py``). How each record maps to its row is
:mod:`autotune.study.storage._rows`.

Finders are classmethods that take the session explicitly, as in Optuna's ``_rdb/models.py``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import typing
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    select,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship
from sqlalchemy.types import TypeEngine

from autotune.study.storage.records import COLUMN_ATTR, MeasuredRun, TrialRecord

__all__ = [
    "TABLE_PREFIX",
    "Base",
    "HardwareModel",
    "MeasuredRunColumns",
    "StudyModel",
    "TrialFigureColumns",
    "TrialResultModel",
    "VerificationModel",
    "VerificationRunModel",
    "record_columns",
]

#: Prefix of every autotune table, so none can collide with Optuna's.
TABLE_PREFIX = "autotune_"

_NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

#: Optuna's study names are at most 512 characters.
_NAME_LEN = 512


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


#: A record field's column type by its Python type (:func:`record_columns`).
_SQL_TYPES: dict[type, type[TypeEngine[Any]]] = {
    bool: Boolean,
    int: Integer,
    float: Float,
    str: Text,
    dt.datetime: DateTime,
}
_MEASURED_RUN_FIELDS = tuple(f.name for f in dataclasses.fields(MeasuredRun))
_T = TypeVar("_T")


def record_columns(
    record: type[Any], exclude: tuple[str, ...] = ()
) -> Callable[[type[_T]], type[_T]]:
    """A class decorator that gives a declarative mixin one mapped column per field of the
    frozen dataclass ``record`` (but those in ``exclude``), so a figure is declared once, as
    the record's field, and its column follows.

    A field's column has the SQL type of its :data:`~autotune.study.storage.records.COLUMN_ATTR`
    metadata (:func:`autotune.study.storage.records.column`), or else of its Python type
    (:data:`_SQL_TYPES`; a name ending in ``_bytes`` is ``BigInteger``); ``X | None`` is
    nullable, anything else NOT NULL. SQLAlchemy copies a mixin's columns into each model
    that derives from it ("Composing Mapped Hierarchies with Mixins").

    Raises:
        TypeError: a field whose Python type has no SQL type here (a tuple, a mapping): give
            it one with ``column()``, or store it as JSON text.
    """
    hints = typing.get_type_hints(record)

    def add_columns(mixin: type[_T]) -> type[_T]:
        for spec in dataclasses.fields(record):
            if spec.name in exclude:
                continue
            hint = hints[spec.name]
            args = typing.get_args(hint)
            nullable = type(None) in args
            types = [t for t in args if t is not type(None)] or [hint]
            sql_type = spec.metadata.get(COLUMN_ATTR)
            if sql_type is None:
                if len(types) != 1 or types[0] not in _SQL_TYPES:
                    raise TypeError(
                        f"record_columns({record.__name__}): field {spec.name}: {hint} has no "
                        "SQL type (give it one with column(), or store it as JSON text)"
                    )
                by_type = _SQL_TYPES[types[0]]
                sql_type = BigInteger if spec.name.endswith("_bytes") else by_type
            setattr(mixin, spec.name, mapped_column(sql_type, nullable=nullable))
        return mixin

    return add_columns


class Base(DeclarativeBase):
    """Declarative base with its own metadata (never Optuna's)."""

    metadata = MetaData(naming_convention=_NAMING)


class HardwareModel(Base):
    """A hardware fingerprint; one row per distinct machine and software stack."""

    __tablename__ = f"{TABLE_PREFIX}hardware"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    fingerprint_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    device_kind: Mapped[str] = mapped_column(String(16))
    device_name: Mapped[str] = mapped_column(String(256))
    device_count: Mapped[int] = mapped_column(Integer)
    device_memory_bytes: Mapped[int | None] = mapped_column(BigInteger)
    compute_capability: Mapped[str | None] = mapped_column(String(16))
    driver_version: Mapped[str | None] = mapped_column(String(64))
    cuda_version: Mapped[str | None] = mapped_column(String(32))
    cudnn_version: Mapped[str | None] = mapped_column(String(32))
    torch_version: Mapped[str] = mapped_column(String(64))
    cpu_model: Mapped[str] = mapped_column(String(256))
    cpu_cores: Mapped[int] = mapped_column(Integer)
    simulated: Mapped[bool] = mapped_column(Boolean)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=_utcnow)

    @classmethod
    def find_by_fingerprint(cls, session: Session, fingerprint_sha256: str) -> HardwareModel | None:
        """The row with this fingerprint hash, or None."""
        return session.scalars(
            select(cls).where(cls.fingerprint_sha256 == fingerprint_sha256)
        ).one_or_none()


class StudyModel(Base):
    """autotune's record of an Optuna study, linked by ``optuna_study_name``."""

    __tablename__ = f"{TABLE_PREFIX}studies"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    optuna_study_name: Mapped[str] = mapped_column(String(_NAME_LEN), unique=True)
    space_name: Mapped[str] = mapped_column(String(256))
    space_source: Mapped[str] = mapped_column(String(1024))
    device_kind: Mapped[str] = mapped_column(String(16))
    simulated: Mapped[bool] = mapped_column(Boolean)
    sampler: Mapped[str] = mapped_column(String(32))
    seed: Mapped[int] = mapped_column(Integer)
    metric_name: Mapped[str] = mapped_column(String(64), server_default="accuracy")
    metric_direction: Mapped[str] = mapped_column(String(8), server_default="maximize")
    # ``throughput`` or ``time_to_accuracy`` (autotune.study.objectives); the target's value in the
    # second mode (the metric is ``metric_name``), None in the first.
    objective: Mapped[str] = mapped_column(String(32), server_default="throughput")
    target: Mapped[float | None] = mapped_column(Float)
    hardware_id: Mapped[int | None] = mapped_column(ForeignKey(f"{TABLE_PREFIX}hardware.id"))
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=_utcnow)

    hardware: Mapped[HardwareModel | None] = relationship(lazy="joined")

    @classmethod
    def find_by_name(cls, session: Session, study_name: str) -> StudyModel | None:
        """The record of the Optuna study ``study_name``, or None."""
        return session.scalars(select(cls).where(cls.optuna_study_name == study_name)).one_or_none()

    @classmethod
    def find_all(cls, session: Session) -> list[StudyModel]:
        """Every study record, oldest first."""
        return list(session.scalars(select(cls).order_by(cls.id)))


@record_columns(MeasuredRun)
class MeasuredRunColumns:
    """The figures of one measured run, as columns of the two tables that store runs:
    ``autotune_trial_results`` (a study's trial) and ``autotune_verifications`` (a
    verification's re-run). A declarative mixin (SQLAlchemy 2.0, "Composing Mapped
    Hierarchies with Mixins"): each model gets its own copy of these columns. The figures
    are declared once, as the fields of
    :class:`~autotune.study.storage.records.MeasuredRun` (units in the names, what each
    means in its docstring); :func:`record_columns` makes them columns."""

    recorded_at: Mapped[dt.datetime] = mapped_column(DateTime, default=_utcnow)


@record_columns(TrialRecord, exclude=("study_name", "trial_number", *_MEASURED_RUN_FIELDS))
class TrialFigureColumns:
    """A trial's own figures and knobs, as columns of ``autotune_trial_results``: the fields
    of :class:`~autotune.study.storage.records.TrialRecord` past those of every measured run
    (:class:`MeasuredRunColumns`), less its study's name (the row holds the study's key) and
    its trial number (declared with the model's key)."""


class TrialResultModel(TrialFigureColumns, MeasuredRunColumns, Base):
    """One finished trial: every figure (unit in the column name) and the configuration,
    declared by :class:`~autotune.study.storage.records.TrialRecord`'s fields
    (:class:`TrialFigureColumns`, :class:`MeasuredRunColumns`); here its keys."""

    __tablename__ = f"{TABLE_PREFIX}trial_results"
    __table_args__ = (UniqueConstraint("study_id", "trial_number"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    study_id: Mapped[int] = mapped_column(
        ForeignKey(f"{TABLE_PREFIX}studies.id", ondelete="CASCADE"), index=True
    )
    trial_number: Mapped[int] = mapped_column(Integer)
    hardware_id: Mapped[int | None] = mapped_column(ForeignKey(f"{TABLE_PREFIX}hardware.id"))

    study: Mapped[StudyModel] = relationship()

    @classmethod
    def find(cls, session: Session, study_id: int, trial_number: int) -> TrialResultModel | None:
        """The row of trial ``trial_number`` of study ``study_id``, or None."""
        return session.scalars(
            select(cls).where(cls.study_id == study_id, cls.trial_number == trial_number)
        ).one_or_none()

    @classmethod
    def find_by_study(cls, session: Session, study_id: int) -> list[TrialResultModel]:
        """Every row of study ``study_id``, by trial number."""
        return list(
            session.scalars(select(cls).where(cls.study_id == study_id).order_by(cls.trial_number))
        )

    @classmethod
    def trial_numbers(cls, session: Session, study_id: int) -> set[int]:
        """Trial numbers of study ``study_id`` that already have a row."""
        return set(session.scalars(select(cls.trial_number).where(cls.study_id == study_id)))


class VerificationRunModel(Base):
    """One verification of a study: its plan (baseline, finalists, rounds, seeds) and state.

    A verification re-runs the baseline and the finalists in ``rounds`` interleaved rounds of
    fresh processes; its measurements are :class:`VerificationModel` rows. ``completed_at`` is
    None while rounds are missing (an interrupted verification resumes from its rows).
    """

    __tablename__ = f"{TABLE_PREFIX}verification_runs"
    __table_args__ = (UniqueConstraint("study_id", "number"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    study_id: Mapped[int] = mapped_column(
        ForeignKey(f"{TABLE_PREFIX}studies.id", ondelete="CASCADE"), index=True
    )
    number: Mapped[int] = mapped_column(Integer)  # 1, 2, ... per study
    baseline_trial: Mapped[int] = mapped_column(Integer)
    candidates_json: Mapped[str] = mapped_column(Text)  # candidate trial numbers, in order
    rounds: Mapped[int] = mapped_column(Integer)
    seeds_json: Mapped[str] = mapped_column(Text)  # the training seed of each round
    accuracy_tolerance_pt: Mapped[float] = mapped_column(Float)
    # Stage A (the race) before the confirmation rounds above: its seeds (empty for the
    # verifications before it), the screen's z, and the run's limits the verified figures
    # are checked against.
    race_seeds_json: Mapped[str] = mapped_column(Text, server_default="[]")
    screen_z: Mapped[float | None] = mapped_column(Float)
    max_memory_bytes: Mapped[int | None] = mapped_column(BigInteger)
    min_accuracy: Mapped[float | None] = mapped_column(Float)
    # The finalists of the model-change answer (the others keep the baseline's model); empty
    # for the verifications before the two answers.
    model_changes_json: Mapped[str] = mapped_column(Text, server_default="[]")
    # The finalists verified by timing and the paired check (their accuracy inherited), and
    # the check's floor and margin as JSON ({"first", "trajectory", "source", "margin"}).
    inherited_json: Mapped[str] = mapped_column(Text, server_default="[]")
    check_floor_json: Mapped[str | None] = mapped_column(Text)
    # Optimizer steps of one full run (the baseline trial's): a timed run's end-to-end
    # seconds are projected over them.
    budget_steps: Mapped[int | None] = mapped_column(Integer)
    started_at: Mapped[dt.datetime] = mapped_column(DateTime, default=_utcnow)
    completed_at: Mapped[dt.datetime | None] = mapped_column(DateTime)

    @classmethod
    def find_by_number(
        cls, session: Session, study_id: int, number: int
    ) -> VerificationRunModel | None:
        """Verification ``number`` of study ``study_id``, or None."""
        return session.scalars(
            select(cls).where(cls.study_id == study_id, cls.number == number)
        ).one_or_none()

    @classmethod
    def find_latest(
        cls, session: Session, study_id: int, *, complete: bool = False
    ) -> VerificationRunModel | None:
        """The newest verification of study ``study_id`` (the newest finished one when
        ``complete``), or None."""
        query = select(cls).where(cls.study_id == study_id)
        if complete:
            query = query.where(cls.completed_at.is_not(None))
        return session.scalars(query.order_by(cls.number.desc()).limit(1)).one_or_none()


class VerificationModel(MeasuredRunColumns, Base):
    """One configuration measured in one verification round (fresh processes, own seed): the
    figures of :class:`MeasuredRunColumns` and where the run sits in its verification."""

    __tablename__ = f"{TABLE_PREFIX}verifications"
    # Named: the naming convention's name would pass PostgreSQL's 63 characters.
    __table_args__ = (
        UniqueConstraint(
            "run_id",
            "round_index",
            "trial_number",
            "attempt",
            name="uq_autotune_verifications_run_round_trial_attempt",
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(
        ForeignKey(f"{TABLE_PREFIX}verification_runs.id", ondelete="CASCADE"), index=True
    )
    round_index: Mapped[int] = mapped_column(Integer)  # 0-based
    seed: Mapped[int] = mapped_column(Integer)
    trial_number: Mapped[int] = mapped_column(Integer)  # the study trial re-measured
    # 0; 1, 2, ... for the runs of the same round and trial measured again because the one
    # before was measured on a busy machine (the last attempt is the one that counts).
    attempt: Mapped[int] = mapped_column(Integer, server_default="0")
    is_baseline: Mapped[bool] = mapped_column(Boolean)
    # The run's first K training losses as a JSON list (the paired check).
    check_losses_json: Mapped[str | None] = mapped_column(Text)

    @classmethod
    def find_by_run(cls, session: Session, run_id: int) -> list[VerificationModel]:
        """Every row of verification ``run_id`` (every attempt), by round and then in run
        order."""
        return list(
            session.scalars(
                select(cls).where(cls.run_id == run_id).order_by(cls.round_index, cls.id)
            )
        )
