"""Shared fixtures: temporary space files, SQLite storage, the real MNIST test set, and the
mock studies that tests only read (built once per session; tests/studies/)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from autotune.trial.workloads.builtin.data import SHIPPED_MNIST_DIR
from tests.studies.mock import DemoStudy, shared_demo_study
from tests.studies.tta import TtaStudy, build_tta_study

#: The MNIST test set in IDX form (10,000 digits). Tests use it when present; autotune itself
#: never needs it (a user passes data.root=DIR).
#: The MNIST test set: the copy shipped with the package unless AUTOTUNE_TEST_MNIST names a
#: directory of IDX files.
MNIST_DIR = Path(os.environ.get("AUTOTUNE_TEST_MNIST", str(SHIPPED_MNIST_DIR)))

#: A small, valid space, in the same form as the shipped ones.
MINIMAL_SPACE = """\
name: tiny
model:
  family: cnn
  depth: {low: 1, high: 2}
  width: [8, 16]
batch_size: [32, 64]
train:
  epochs: 1
"""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip ``gpu`` tests where torch sees no CUDA GPU."""
    if not any(item.get_closest_marker("gpu") for item in items):
        return
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU; torch sees none")
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(skip)


@pytest.fixture
def write_space(tmp_path: Path) -> Callable[..., Path]:
    """Write YAML text to ``tmp_path/<name>`` and return the path."""

    def write(text: str, name: str = "space.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A SQLite storage URL for a study database inside ``tmp_path``."""
    return f"sqlite:///{tmp_path / 'studies' / 'autotune.db'}"


@pytest.fixture
def mnist_dir() -> Path:
    """The real MNIST test set, or a skip saying where it was looked for."""
    if not (MNIST_DIR / "t10k-images-idx3-ubyte.gz").is_file():
        pytest.skip(f"MNIST test set not found at {MNIST_DIR} (set AUTOTUNE_TEST_MNIST=DIR)")
    return MNIST_DIR


@pytest.fixture(scope="session")
def demo_study(tmp_path_factory: pytest.TempPathFactory) -> DemoStudy:
    """A finished cnn_small study on the mock device (tests/studies/mock.py); tests only read
    it."""
    return shared_demo_study(tmp_path_factory)


@pytest.fixture(scope="session")
def tta_study(tmp_path_factory: pytest.TempPathFactory) -> TtaStudy:
    """A finished time-to-accuracy study on the mock device (tests/studies/tta.py); tests only
    read it."""
    return build_tta_study(tmp_path_factory)


#: The PostgreSQL server of the storage tests (the machine's, trust auth).
POSTGRES_URL = os.environ.get(
    "AUTOTUNE_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A schema of its own on the PostgreSQL server (its search path set in the URL; dropped
    afterwards), so that no other run's tables, at another schema revision, are in the test's
    way; the test is skipped without a server."""
    import sqlalchemy as sa

    schema = f"test_{uuid.uuid4().hex[:8]}"
    try:
        admin = sa.create_engine(POSTGRES_URL)
        with admin.begin() as conn:
            conn.execute(sa.text(f"CREATE SCHEMA {schema}"))
    except Exception as e:  # any driver or connection failure means: no server here
        pytest.skip(f"no PostgreSQL server answers at {POSTGRES_URL}: {type(e).__name__}")
    try:
        yield f"{POSTGRES_URL}?options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as conn:
            conn.execute(sa.text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()
