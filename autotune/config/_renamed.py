"""Keys that moved: the research knobs went under ``advanced.*`` (``search.reuse_metric`` is
``advanced.search.reuse_metric``), and the two busy-run budgets got names that say how they
differ. An old key still works for one release with a note naming the new one
(:class:`DeprecatedKeyWarning`), as the CLI's other deprecated spellings do; a study stored
with the old shape is read in the new one (:func:`upgrade_space_record`)."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Mapping
from typing import Any

from autotune.exceptions import ConfigError

#: Old key (or old group) -> its new key. A group moved whole moves every key under it.
MOVED_KEYS: dict[str, str] = {
    "search": "advanced.search",
    "measure": "advanced.measure",
    "hardware": "advanced.hardware",
    "mock.fault": "advanced.mock.fault",
    "mock.fault_trials": "advanced.mock.fault_trials",
    "data.synthetic_samples": "advanced.data.synthetic_samples",
    "train.warmup_steps": "advanced.train.warmup_steps",
    "train.lr_warmup_fraction": "advanced.train.lr_warmup_fraction",
    "train.reference_batch_size": "advanced.train.reference_batch_size",
    "train.max_time_vs_baseline": "advanced.train.max_time_vs_baseline",
    "trial.heartbeat_s": "advanced.trial.heartbeat_s",
    "trial.min_throughput_vs_baseline": "advanced.trial.min_throughput_vs_baseline",
    "trial.busy_remeasures": "advanced.trial.busy_retimes",
    "verify.race_rounds": "advanced.verify.race_rounds",
    "verify.candidates": "advanced.verify.candidates",
    "verify.screen_z": "advanced.verify.screen_z",
    "verify.busy_reruns": "advanced.verify.busy_rerun_budget",
}


class DeprecatedKeyWarning(FutureWarning):
    """A key written with its old name (:data:`MOVED_KEYS`): it works for this release.

    Attributes:
        where: the file or override that wrote it.
        old: the key as written.
        new: the key to write instead.
    """

    def __init__(self, where: str, old: str, new: str) -> None:
        self.where, self.old, self.new = where, old, new
        super().__init__(f"{where}: {old} is deprecated and goes in the next release; write {new}")


def new_key(key: str) -> str | None:
    """The key ``key`` is now (``verify.screen_z`` -> ``advanced.verify.screen_z``), or None
    when it did not move."""
    for old, new in MOVED_KEYS.items():
        if key == old or key.startswith(old + "."):
            return new + key[len(old) :]
    return None


def _moved_leaves(key: str, value: Any) -> tuple[list[tuple[str, str, Any]], Any]:
    """The moved keys inside ``key``'s value, as (old, new, value), and what stays at ``key``
    (None when nothing does)."""
    renamed = new_key(key)
    if renamed is not None:
        return [(key, renamed, value)], None
    if not isinstance(value, Mapping) or not any(old.startswith(key + ".") for old in MOVED_KEYS):
        return [], value
    moved: list[tuple[str, str, Any]] = []
    kept: dict[str, Any] = {}
    for name, inner in value.items():
        found, rest = _moved_leaves(f"{key}.{name}", inner)
        moved.extend(found)
        if rest is not None or not found:
            kept[name] = rest if found else inner
    # A group whose keys all moved is gone (as a stored study's defaults are left out).
    return moved, (kept if kept or not moved else None)


def _set(raw: dict[str, Any], key: str, value: Any, where: str, old: str) -> None:
    *parents, leaf = key.split(".")
    node = raw
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(
                f"{where}: {'.'.join(parents)} is a single value, not a group of keys"
            )
        node = child
    if leaf in node:
        raise ConfigError(f"{where}: {old} and {key} are the same setting; keep {key}")
    node[leaf] = value


def upgrade_keys(raw: Mapping[str, Any], where: str, *, note: bool = True) -> dict[str, Any]:
    """``raw`` (a space file's or a run's mapping) with every old key at its new place, a
    :class:`DeprecatedKeyWarning` for each when ``note``.

    Raises:
        ConfigError: an old key beside its new one.
    """
    upgraded: dict[str, Any] = {}
    moves: list[tuple[str, str, Any]] = []
    for key, value in raw.items():
        found, rest = _moved_leaves(str(key), value)
        moves.extend(found)
        if not found:
            upgraded[key] = value
        elif rest is not None:
            upgraded[key] = rest
    for old, new, value in moves:
        if note:
            warnings.warn(DeprecatedKeyWarning(where, old, new), stacklevel=3)
        _set(upgraded, new, copy.deepcopy(value), where, old)
    return upgraded


def upgrade_override(key: str, value: Any, text: str) -> list[tuple[str, Any, str]]:
    """One parsed ``key=value`` override with old keys renamed (a note for each): usually
    itself, or the same with its new key; a group override (``trial={timeout_s: 5,
    heartbeat_s: 2}``) splits into the part that stayed and the keys that moved."""
    found, rest = _moved_leaves(key, value)
    if not found:
        return [(key, value, text)]
    where = f"override {text}"
    for old, new, _ in found:
        warnings.warn(DeprecatedKeyWarning(where, old, new), stacklevel=3)
    kept = [(key, rest, text)] if rest else []
    return [*kept, *((new, inner, text) for _, new, inner in found)]


def upgrade_space_record(space: Mapping[str, Any] | None) -> dict[str, Any]:
    """A space as a study stored it (``model_dump(mode="json", exclude_defaults=True)``) in
    the shape of this release: a study written before ``advanced.*`` kept ``search``,
    ``measure`` and four ``train`` keys at the top; the same settings compare equal now."""
    if not space:
        return {}
    return upgrade_keys(space, "the stored study", note=False)
