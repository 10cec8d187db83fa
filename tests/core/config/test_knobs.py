"""Knob parameter types and the forms a knob is written in (autotune/core/config/_knobs.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import ValidationError

from autotune.core.config import IntParam, load_space
from tests.conftest import MINIMAL_SPACE

# --------------------------------------------------------------------------------------------
# Knob forms


def test_knob_forms_scalar_list_mapping_and_range(write_space: Callable[..., Path]) -> None:
    path = write_space(
        MINIMAL_SPACE
        + "precision: bf16\n"
        + "memory_format: {choices: [contiguous, channels_last]}\n"
        + "num_workers: {low: 0, high: 4, step: 2}\n"
    )

    space = load_space(str(path))

    assert space.precision.values() == ["bf16"]
    assert space.memory_format.values() == ["contiguous", "channels_last"]
    assert space.num_workers.values() == [0, 2, 4]


# --------------------------------------------------------------------------------------------
# Parameter models


def test_int_param_range_with_step() -> None:
    assert IntParam(low=16, high=64, step=16).values() == [16, 32, 48, 64]


@pytest.mark.parametrize(
    ("fields", "rule"),
    [
        ({"choices": [1], "low": 1, "high": 2}, "not both"),
        ({"low": 1}, "give `choices` or both `low` and `high`"),
        ({"low": 1, "high": 4, "step": 0}, "`step >= 1` must hold"),
        ({"low": 1, "high": 8, "step": 2, "log": True}, "`log: true` needs step=1"),
    ],
)
def test_int_param_rules(fields: dict[str, object], rule: str) -> None:
    with pytest.raises(ValidationError, match=rule):
        IntParam.model_validate(fields)


def test_int_param_restricted_keeps_order_as_choices() -> None:
    restricted = IntParam(low=1, high=4).restricted([4, 2])

    assert restricted.choices == [2, 4]
    assert restricted.low is None
