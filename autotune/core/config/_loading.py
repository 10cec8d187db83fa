"""Loading: a space from a shipped name or a YAML file (a relative ``workload:`` file
resolved against the file's directory), with ``key=value`` overrides, into validated models;
a refusal names the file or override, the key and the rule (``file: key: rule``)."""

from __future__ import annotations

import copy
import difflib
import functools
import importlib.resources
import re
import typing
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from autotune.core.config._knobs import SYSTEM_KNOBS
from autotune.core.config._overrides import parse_overrides, set_path
from autotune.core.config._run import RunConfig, VerifyRequest
from autotune.core.config._space import DOORS, SearchSpace
from autotune.core.config._url import display_url
from autotune.core.exceptions import ConfigError

#: Keys of a run that are not part of the search space.
_RUN_KEYS = (
    "space",
    "device",
    "study",
    "storage",
    "sampler",
    "objective",
    "seed",
    "trial",
    "workers",
    "mock",
    "warm_start",
    "allow_hardware_change",
    "verify",
)


#: Keys whose value is a name or a URL, taken as written: OmegaConf would read ``study=007``
#: as the number 7 and ``study=`` as None. Every command names the study and the storage so.
_VERBATIM_KEYS = ("study", "storage")


def _verbatim(key: str, value: Any, text: str) -> Any:
    """The value of one ``key=value`` argument: as written (stripped) for
    :data:`_VERBATIM_KEYS`, else as OmegaConf parsed it."""
    return text.partition("=")[2].strip() if key in _VERBATIM_KEYS else value


def available_spaces() -> list[str]:
    """Names of the spaces shipped with autotune (``search_spaces/*.yaml``)."""
    root = importlib.resources.files("autotune.search_spaces")
    return sorted(p.name[: -len(".yaml")] for p in root.iterdir() if p.name.endswith(".yaml"))


def _read_space_file(space: str) -> tuple[dict[str, Any], str]:
    """Read a space given by shipped name or path; returns (raw mapping, source label)."""
    if space.endswith((".yaml", ".yml")) or "/" in space or "\\" in space:
        path = Path(space)
        if not path.is_file():
            raise ConfigError(f"space={space}: no such file")
        text, source = path.read_text(encoding="utf-8"), str(path)
    else:
        if space not in available_spaces():
            known = ", ".join(available_spaces())
            raise ConfigError(
                f"space={space}: unknown space name (shipped: {known}); "
                "or pass a path to a .yaml file"
            )
        resource = importlib.resources.files("autotune.search_spaces") / f"{space}.yaml"
        text, source = resource.read_text(encoding="utf-8"), f"search_spaces/{space}.yaml"
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"{source}:{where}: malformed YAML: {problem}") from e
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of keys to values")
    raw.setdefault("name", Path(source).stem)
    return raw, source


def _field_keys(model: type[BaseModel], prefix: str = "") -> Iterator[str]:
    """Every dotted key of ``model``'s fields, its nested settings' keys included."""
    for name, field in model.model_fields.items():
        key = prefix + (field.alias or name)
        yield key
        for annotation in (field.annotation, *typing.get_args(field.annotation)):
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                yield from _field_keys(annotation, key + ".")


@functools.cache
def _known_keys() -> tuple[str, ...]:
    """The keys a space file or a ``key=value`` argument can set (a run's, a space's and
    ``autotune verify``'s; the model's knobs, which each space names, left out)."""
    run = (k for k in _field_keys(RunConfig) if k.split(".")[0] not in ("space", "space_source"))
    keys = {*run, *_field_keys(SearchSpace), *_field_keys(VerifyRequest)}
    return tuple(sorted(keys))


def _key_hint(key: str, on_command_line: bool) -> str:
    """What an unknown ``key`` may have meant: its place under ``advanced.*`` (where the
    research knobs live), or the nearest key of its group (:func:`difflib.get_close_matches`).
    A key that exists elsewhere is said to, never suggested as itself: a run's key on another
    command's line (``device=cpu`` to ``autotune verify``, which runs on the study's own
    device), or a command-line key in a space file (``device: cpu``)."""
    known = _known_keys()
    if key in known and on_command_line:
        return " (a key of `autotune run`; this command does not take it)"
    if key in known:
        return f" (a key of the command line, {key}=VALUE, not of a space file)"
    if f"advanced.{key}" in known:
        return f" (did you mean advanced.{key}? the research knobs live under advanced.*)"
    parent = key.rpartition(".")[0]
    siblings = [k for k in known if k.rpartition(".")[0] == parent]  # its group's keys
    close = difflib.get_close_matches(key, siblings, n=1, cutoff=0.8)
    return f" (did you mean {close[0]}?)" if close else ""


def _format_validation_error(
    err: ValidationError, source: str, overridden: dict[str, str], prefix: str = ""
) -> str:
    """One line naming where (file or override), which key, and the rule broken."""
    first = err.errors()[0]
    loc = [str(p) for p in first["loc"] if not str(p).startswith(("function-", "tagged-union"))]
    if loc[:2] == ["model", "knobs"]:  # ModelSpace keeps its knobs apart; YAML does not
        loc = ["model", *loc[2:]]
    rule = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        unknown = prefix + ".".join(loc)
        rule = "unknown key" + _key_hint(unknown, _set_by(unknown, overridden) is not None)
    # A rule of a whole model that names the key it is about ("model.family: ...") moves the
    # key into the location.
    named = re.match(r"([A-Za-z_]\w*(?:\.\w+)*): (.+)", rule)
    if named and first["type"] == "value_error":
        loc, rule = [*loc, *named.group(1).split(".")], named.group(2)
    key = prefix + ".".join(loc) if loc else (prefix.rstrip(".") or "(top level)")
    text = _set_by(key, overridden)
    if text is not None:
        return f"override {display_url(text)}: {key}: {rule}"
    return f"{source}: {key}: {rule}"


def _set_by(key: str, overridden: dict[str, str]) -> str | None:
    """The ``key=value`` override that set ``key``, a key inside it, or a key a rule on it
    reads; None where the key came from the file."""
    for set_key, text in overridden.items():
        if key == set_key or key.startswith(set_key + ".") or set_key.startswith(key + "."):
            return text
    return None


def load_space(space: str, overrides: Sequence[str] = ()) -> SearchSpace:
    """Load and validate a search space, applying ``key=value`` overrides to it.

    Args:
        space: a shipped space name (``cnn_small``) or a path to a YAML file.
        overrides: ``key=value`` strings for fields of the space (``train.epochs=2``).

    Returns:
        The validated, immutable :class:`SearchSpace`.

    Raises:
        ConfigError: unknown name, missing file, malformed YAML, unknown key, wrong type or a
            broken rule; the message names the file or override and the key.
    """
    return _load_space_with_source(space, parse_overrides(overrides))[0]


def _space_directory(source: str) -> Path:
    """The directory a space's relative ``workload:`` file is resolved against."""
    if source.startswith("search_spaces/") and not Path(source).is_file():
        return Path(str(importlib.resources.files("autotune.search_spaces")))
    return Path(source).parent


def _absolute_workload(raw: dict[str, Any], source: str) -> None:
    """Make each door's ``FILE.py:NAME`` reference (``workload:``, ``loop:``, ``hf_trainer:``,
    ``lightning:``) absolute, FILE relative to the space file."""
    for key in DOORS:
        ref = raw.get(key)
        if not isinstance(ref, str):
            continue
        path, sep, name = ref.rpartition(":")
        if sep and path.endswith(".py") and not Path(path).expanduser().is_absolute():
            raw[key] = f"{(_space_directory(source) / path).resolve()}:{name}"
        elif sep and path.endswith(".py"):
            raw[key] = f"{Path(path).expanduser()}:{name}"


def _load_space_with_source(
    space: str, overrides: Sequence[tuple[str, Any, str]]
) -> tuple[SearchSpace, str]:
    """The space and its source label, with parsed overrides applied."""
    raw, source = _read_space_file(space)
    overridden: dict[str, str] = {}
    for key, value, text in overrides:
        set_path(raw, key, value, text)
        overridden[key] = text
    _absolute_workload(raw, source)
    try:
        return SearchSpace.model_validate(raw), source
    except ValidationError as e:
        raise ConfigError(_format_validation_error(e, source, overridden)) from None


def load_run_config(args: Sequence[str], *, default_space: str = "cnn_small") -> RunConfig:
    """Build a :class:`RunConfig` from ``key=value`` arguments, as ``autotune run`` gets them.

    Run keys (``space``, ``device``, ``study``, ``storage``, ``sampler``, ``objective``, ``seed``,
    ``trial.*``, ``verify.*``, ...: :data:`_RUN_KEYS`) configure the run; every other key
    overrides a field of the space, ``advanced.*`` included (the research knobs, the run's
    among them).

    Args:
        args: ``key=value`` strings, e.g. ``["space=cnn_small", "device=cpu", "train.epochs=2"]``.
        default_space: the space used when no ``space=`` is given.

    Raises:
        ConfigError: see :func:`load_space`; also unknown run keys and invalid run values.
    """
    run_raw: dict[str, Any] = {}
    run_texts: dict[str, str] = {}
    space_overrides: list[tuple[str, Any, str]] = []
    for key, value, text in parse_overrides(args):
        if key.split(".")[0] in _RUN_KEYS:
            set_path(run_raw, key, _verbatim(key, value, text), text)
            run_texts[key] = text
        else:
            space_overrides.append((key, value, text))
    space_name = run_raw.pop("space", default_space)
    if not isinstance(space_name, str):
        raise ConfigError(
            f"override {display_url(run_texts['space'])}: space must be a name or a path"
        )
    space, source = _load_space_with_source(space_name, space_overrides)
    run_raw.setdefault("study", space.name)
    try:
        return RunConfig.model_validate(
            {**copy.deepcopy(run_raw), "space": space, "space_source": source}
        )
    except ValidationError as e:
        raise ConfigError(_format_validation_error(e, "command line", run_texts)) from None


def load_verify_request(args: Sequence[str]) -> VerifyRequest:
    """Validate ``autotune verify``'s ``key=value`` arguments (``study=NAME``, ``storage=URL``,
    ``verify.rounds=R``, ``verify.accuracy_tolerance_pt=X``, ``trial.timeout_s=S``,
    ``advanced.verify.candidates=K``, ...); ``study`` and ``storage`` are taken as written, as
    :func:`load_run_config` takes them.

    Raises:
        ConfigError: an unknown key or a value that breaks a rule; the message names it.
    """
    raw: dict[str, Any] = {}
    texts: dict[str, str] = {}
    for key, value, text in parse_overrides(args):
        set_path(raw, key, _verbatim(key, value, text), text)
        texts[key] = text
    try:
        return VerifyRequest.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(_format_validation_error(e, "command line", texts)) from None


def _knob_as_written(knob: Any) -> Any:
    """A knob in the form a space file or an override writes it: the list of choices, or
    ``{low, high}`` with ``step`` and ``log`` only where they are not the defaults."""
    dumped: dict[str, Any] = knob.model_dump(mode="json")
    if dumped.get("choices") is not None:
        return dumped["choices"]
    written = {"low": dumped["low"], "high": dumped["high"]}
    if dumped.get("step") not in (None, 1):
        written["step"] = dumped["step"]
    if dumped.get("log"):
        written["log"] = True
    return written


def run_config_document(config: RunConfig) -> dict[str, Any]:
    """The resolved configuration of a run as ``autotune config`` prints it: every key at the
    path a ``key=value`` argument gives it (``train.epochs``, ``verify.rounds``, ``precision``),
    so each line can be copied back as an override.

    ``space`` is the shipped space's name or the file the space came from; the space's fields
    follow the run's keys, its knobs in the form a space file writes them (a list of choices,
    or ``{low, high}``). The storage URL has its password masked
    (:func:`~autotune.core.config.display_url`).

    Args:
        config: a validated run configuration (:func:`load_run_config`).

    Returns:
        Plain values (str, int, float, bool, None, lists and dicts), ready for
        ``yaml.safe_dump``.
    """
    run = config.model_dump(mode="json", exclude={"space", "space_source"})
    run["storage"] = display_url(config.storage)
    space = config.space.model_dump(mode="json")
    for name in SYSTEM_KNOBS:
        space[name] = _knob_as_written(getattr(config.space, name))
    model = config.space.model
    space["model"] = {
        **({"family": model.family} if model.family is not None else {}),
        **{name: _knob_as_written(knob) for name, knob in model.knobs.items()},
    }
    return {"space": _space_argument(config.space_source), **run, **space}


def _space_argument(source: str) -> str:
    """What ``space=`` takes for a space read from ``source``: a shipped space's name (its
    source label, ``search_spaces/NAME.yaml``, is no path outside the repository), else the
    file as it was given."""
    stem = Path(source).stem
    return stem if source == f"search_spaces/{stem}.yaml" and stem in available_spaces() else source
