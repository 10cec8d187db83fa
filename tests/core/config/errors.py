"""A check shared by the config tests: a ConfigError's message is one line."""

from __future__ import annotations

import pytest

from autotune.core.exceptions import ConfigError


def one_line(err: pytest.ExceptionInfo[ConfigError]) -> str:
    """The error's message, asserting it holds no line break."""
    message = str(err.value)
    assert "\n" not in message, f"error message is not one line: {message!r}"
    return message
