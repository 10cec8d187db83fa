"""Storage URLs as every output shows them (autotune/core/config/_url.py): the password masked."""

from __future__ import annotations

import pytest

from autotune.core.config import DEFAULT_STORAGE_URL, display_url

SECRET = "S3cret"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        pytest.param(DEFAULT_STORAGE_URL, DEFAULT_STORAGE_URL, id="sqlite-relative"),
        pytest.param(
            "sqlite:////tmp/my studies/a.db", "sqlite:////tmp/my studies/a.db", id="sqlite-absolute"
        ),
        pytest.param("sqlite://", "sqlite://", id="sqlite-memory"),
        pytest.param(
            "postgresql+psycopg://alice@db.example/autotune",
            "postgresql+psycopg://alice@db.example/autotune",
            id="no-password",
        ),
        pytest.param(
            f"postgresql+psycopg://alice:{SECRET}@127.0.0.1:1/x",
            "postgresql+psycopg://alice:***@127.0.0.1:1/x",
            id="password",
        ),
        pytest.param(
            "mysql+pymysql://bob:p%40ss%2Fw0rd@db:3306/x?charset=utf8mb4",
            "mysql+pymysql://bob:***@db:3306/x?charset=utf8mb4",
            id="escaped-password-and-query",
        ),
        pytest.param(
            f"postgresql+psycopg://db/x?sslmode=require&password={SECRET}",
            "postgresql+psycopg://db/x?password=***&sslmode=require",  # SQLAlchemy sorts them
            id="password-in-query",
        ),
        pytest.param(
            f"postgresql://alice:{SECRET}@db:notaport/x",
            "postgresql://***@db:notaport/x",
            id="unparsable-port",
        ),
        pytest.param(
            f"postgresql://alice:S3/c@{SECRET}@db/x",
            "postgresql://***@db/x",
            id="unescaped-at-in-password",
        ),
        pytest.param(
            f"stroage=postgresql://alice:{SECRET}@db/x",
            "stroage=postgresql://***@db/x",
            id="unparsable-override-text",
        ),
        pytest.param(f"alice:{SECRET}@db", "***@db", id="unparsable-no-scheme"),
        pytest.param("not a url", "not a url", id="unparsable-plain"),
        pytest.param("train.epochs=2", "train.epochs=2", id="not-a-url"),
        pytest.param("", "", id="empty"),
    ],
)
def test_display_url_masks_the_password(url: str, shown: str) -> None:
    assert display_url(url) == shown
    assert SECRET not in display_url(url)
    assert "%40ss" not in display_url(url)
