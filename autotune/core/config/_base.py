"""The base of every settings model: unknown keys refused, instances immutable."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    """Base for every settings model: unknown keys refused, instances immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)
