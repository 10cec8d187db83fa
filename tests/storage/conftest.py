"""The shared mock study for these tests (built once per session; tests only read it)."""

from __future__ import annotations

import pytest

from tests.studies.mock import DemoStudy, shared_demo_study


@pytest.fixture(scope="session")
def demo_study(tmp_path_factory: pytest.TempPathFactory) -> DemoStudy:
    return shared_demo_study(tmp_path_factory)
