"""``key=value`` overrides in Hydra's form (``train.epochs=2``, ``precision=[fp32,bf16]``);
OmegaConf parses each value."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from autotune.core.config._url import display_url
from autotune.core.exceptions import ConfigError

#: ``key=value`` shorthands: ``data=mnist`` selects the data set by name, as Hydra's groups do.
_ALIASES = {"data": "data.name"}


def parse_overrides(overrides: Sequence[str]) -> list[tuple[str, Any, str]]:
    """Split ``key=value`` strings; OmegaConf parses the values (ints, floats, lists, ...)."""
    parsed = []
    for text in overrides:
        key, sep, _ = text.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(
                f"override {display_url(text)!r}: expected key=value (e.g. train.epochs=2)"
            )
        key = _ALIASES.get(key, key)
        try:
            conf = OmegaConf.from_dotlist([f"{key}={text.partition('=')[2]}"])
            value = OmegaConf.to_container(conf, resolve=True)
        except OmegaConfBaseException as e:
            reason = display_url(str(e).splitlines()[0])
            raise ConfigError(f"override {display_url(text)}: cannot parse: {reason}") from None
        for part in key.split("."):
            assert isinstance(value, dict)
            value = value[part]
        parsed.append((key, value, text))
    return parsed


def set_path(raw: dict[str, Any], key: str, value: Any, text: str) -> None:
    """Set ``raw[a][b][c] = value`` for ``key == "a.b.c"``, creating mappings on the way."""
    *parents, leaf = key.split(".")
    node = raw
    for i, part in enumerate(parents):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            fixed = ".".join(parents[: i + 1])
            raise ConfigError(
                f"override {display_url(text)}: {fixed} is a single value, not a group of keys"
            )
        node = child
    node[leaf] = value
