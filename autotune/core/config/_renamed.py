"""Keys that moved or went: the research knobs went under ``advanced.*``
(``search.reuse_metric`` is ``advanced.search.reuse_metric``), the two busy-run budgets got
names that say how they differ, and a setting whose feature was removed
(:data:`REMOVED_KEYS`) is ignored. An old key still works for one release with a note naming
the new one, or saying that it is ignored and why (:class:`DeprecatedKeyWarning`), as the
CLI's other deprecated spellings do; a study stored with the old shape is read in the new one
(:func:`upgrade_space_record`)."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Mapping
from typing import Any

from autotune.core.exceptions import ConfigError

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

#: Keys whose feature was removed (at their place under ``advanced.*``) -> why. A space or
#: override that sets one gets a note and the key is dropped; a stored study's is dropped.
REMOVED_KEYS: dict[str, str] = {
    "advanced.search.metric_knobs": (
        "the validation metric's model sees every knob; the replays of recorded studies "
        "found no gain from hiding the speed knobs (docs/research/sampler-features.md)"
    ),
    "advanced.search.cost_aware_after_trials": (
        "the GP sampler no longer weighs compilation seconds; the replays of recorded studies "
        "found no gain within their seconds (docs/research/sampler-features.md)"
    ),
}


class DeprecatedKeyWarning(FutureWarning):
    """A key written with its old name (:data:`MOVED_KEYS`): it works for this release; or a
    key whose feature was removed (:data:`REMOVED_KEYS`): it is ignored.

    Attributes:
        where: the file or override that wrote it.
        old: the key as written (a removed key: at its place under ``advanced.*``).
        new: the key to write instead; None for a removed key.
        reason: why a removed key went (None for a moved one).
    """

    def __init__(self, where: str, old: str, new: str | None, reason: str | None = None) -> None:
        self.where, self.old, self.new, self.reason = where, old, new, reason
        super().__init__(
            f"{where}: {old} is deprecated and goes in the next release; write {new}"
            if new is not None
            else f"{where}: {old} was removed and is ignored ({reason}); delete it"
        )


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
    for removed, reason in REMOVED_KEYS.items():
        if _pop(upgraded, removed) and note:
            warnings.warn(DeprecatedKeyWarning(where, removed, None, reason), stacklevel=3)
    return upgraded


def _pop(raw: dict[str, Any], key: str) -> bool:
    """Remove ``key`` (dotted) from ``raw``, and a group it leaves empty; whether it was there."""
    first, _, rest = key.partition(".")
    if first not in raw:
        return False
    if not rest:
        del raw[first]
        return True
    child = raw[first]
    if not isinstance(child, dict) or not _pop(child, rest):
        return False
    if not child:
        del raw[first]
    return True


def upgrade_override(key: str, value: Any, text: str) -> list[tuple[str, Any, str]]:
    """One parsed ``key=value`` override with old keys renamed (a note for each): usually
    itself, or the same with its new key; a group override (``trial={timeout_s: 5,
    heartbeat_s: 2}``) splits into the part that stayed and the keys that moved; a removed
    key (:data:`REMOVED_KEYS`) is dropped with its note, and the override with it when nothing
    else is left."""
    where = f"override {text}"
    found, rest = _moved_leaves(key, value)
    for old, new, _ in found:
        warnings.warn(DeprecatedKeyWarning(where, old, new), stacklevel=3)
    parsed = [(key, rest, text)] if rest or not found else []
    parsed += [(new, inner, text) for _, new, inner in found]
    kept: list[tuple[str, Any, str]] = []
    for name, inner, _ in parsed:
        node: Any = copy.deepcopy(inner)
        for part in reversed(name.split(".")):
            node = {part: node}  # the override at its dotted place in a space
        for removed, reason in REMOVED_KEYS.items():
            if _pop(node, removed):
                warnings.warn(DeprecatedKeyWarning(where, removed, None, reason), stacklevel=3)
        for part in name.split("."):
            if not isinstance(node, dict) or part not in node:
                break
            node = node[part]
        else:
            kept.append((name, node, text))
    return kept


def upgrade_space_record(space: Mapping[str, Any] | None) -> dict[str, Any]:
    """A space as a study stored it (``model_dump(mode="json", exclude_defaults=True)``) in
    the shape of this release: a study written before ``advanced.*`` kept ``search``,
    ``measure`` and four ``train`` keys at the top; the same settings compare equal now."""
    if not space:
        return {}
    return upgrade_keys(space, "the stored study", note=False)
