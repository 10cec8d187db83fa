"""The generated parts of the docs site: the options, the space file, the CLI and the storage
schema, written from the code at build time so they cannot drift from it.

It is an MkDocs hook (``hooks:`` in mkdocs.yml): each page under ``docs/reference/`` holds a
block that opens with ``<!-- autotune:options -->`` and closes with ``<!-- /autotune:options -->``,
which :func:`on_page_markdown` writes afresh from

- the pydantic models :class:`autotune.core.config.RunConfig` and :class:`autotune.core.config.SearchSpace`
  (every field, recursively: its key path, type, default and rules, and its description from
  ``Field(description=...)``, the class docstring's ``Attributes:`` or the comments written
  beside the field);
- the Typer app :data:`autotune.cli.app` (every command, argument and option);
- the SQLAlchemy models of :mod:`autotune.study.storage.models` (every table and column), with the
  meaning of each column read from ``storage/README.md``.

``tests/test_docs.py`` checks that every key :class:`RunConfig` accepts, every command and
every column appears, and that the committed pages hold what the code generates now (so they
read right outside the site too): ``python docs/gen_reference.py --write`` brings them up to
date, ``python docs/gen_reference.py options`` prints one generator's text.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import logging
import re
import sys
import textwrap
import tokenize
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import annotated_types
from pydantic import BaseModel, ByteSize
from pydantic.fields import FieldInfo

REPO = Path(__file__).resolve().parent.parent
STORAGE_README = REPO / "storage" / "README.md"

# --------------------------------------------------------------------------------------------
# Text from the source: comments, docstrings, validators' messages


def _plain(text: str) -> str:
    """Docstring markup as Markdown: ``code`` -> `code`, :func:`~a.b` -> `b`, :class:`X` -> `X`;
    the research notes where they now live (docs/research/)."""
    text = re.sub(r":(?:func|class|mod|data|meth|attr|obj):`~?([^`]+)`", _role, text)
    text = re.sub(r"\bdocs/(benchmarks(?:-notes)?\.md|main-job\.md)", r"docs/research/\1", text)
    return text.replace("``", "`")


def _role(match: re.Match[str]) -> str:
    whole = match.group(0)
    target = match.group(1)
    if "`~" in whole:
        target = target.rsplit(".", 1)[-1]
    return f"`{target}`"


def _one_line(text: str) -> str:
    return " ".join(text.split())


@dataclass
class _ClassText:
    """What a model class's source says about its fields."""

    intro: str = ""
    described: dict[str, str] = field(default_factory=dict)


def _docstring_attributes(doc: str) -> tuple[str, dict[str, str]]:
    """A class docstring's first paragraphs and its fields' descriptions: the entries of a
    Google-style ``Attributes:`` section, and paragraphs that open with ``name``: ..."""
    doc = inspect.cleandoc(doc)
    described: dict[str, str] = {}
    intro_lines: list[str] = []
    lines = doc.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip() in ("Attributes:", "Raises:", "Args:", "Returns:"):
            section = line.strip()
            i += 1
            name = None
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith(" ")):
                entry = re.match(r"^ {4}(\w+): (.*)$", lines[i])
                if entry:
                    name = entry.group(1)
                    if section == "Attributes:":
                        described[name] = entry.group(2)
                elif name and section == "Attributes:" and lines[i].strip():
                    described[name] += " " + lines[i].strip()
                i += 1
            continue
        intro_lines.append(line)
        i += 1
    paragraphs = [p for p in "\n".join(intro_lines).split("\n\n") if p.strip()]
    intro: list[str] = []
    for paragraph in paragraphs:
        opening = re.match(r"^``(\w+)``: (.*)$", paragraph, re.DOTALL)
        if opening:
            described.setdefault(opening.group(1), opening.group(2))
        else:
            intro.append(paragraph)
    return (
        _plain("\n\n".join(_one_line(p) for p in intro)),
        {k: _plain(_one_line(v)) for k, v in described.items()},
    )


def _comments(cls: type) -> dict[str, str]:
    """The comments written beside each annotated field of ``cls``: the comment lines right
    above it, then the comment at the end of its line. A comment above a run of fields with
    no comments of their own describes the run while they share its type, or while it names
    them (``# eval_every_steps ... eval_every_s ...``)."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    lines = source.splitlines()
    comment_at: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comment_at[token.start[0]] = token.string.lstrip("#").strip()
    tree = ast.parse(source)
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    found: dict[str, str] = {}
    group: tuple[str, str, str] | None = None  # (comment, annotation, first field it is on)
    for node in body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            group = None
            continue
        name = node.target.id
        annotation = ast.unparse(node.annotation)
        above: list[str] = []
        row = node.lineno - 1
        while row >= 1 and lines[row - 1].strip().startswith("#"):
            above.insert(0, comment_at.get(row, ""))
            row -= 1
        inline = [
            comment_at[r]
            for r in range(node.lineno, (node.end_lineno or node.lineno) + 1)
            if r in comment_at and not lines[r - 1].strip().startswith("#")
        ]
        text = " ".join([*above, *inline]).strip()
        if above:
            group = (" ".join(above), annotation, name)
        elif not text and group is not None and (group[1] == annotation or name in group[0]):
            text = f"See `{group[2]}`."
        else:
            group = None
        if text:
            found[name] = _one_line(text)
    return found


def _class_text(cls: type) -> _ClassText:
    intro, described = _docstring_attributes(cls.__doc__ or "")
    for name, text in _comments(cls).items():
        described.setdefault(name, _plain(text))
    return _ClassText(intro, described)


def _message(node: ast.expr) -> str | None:
    """The text of a ValueError's message: a string, or an f-string with its values as …"""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            else:
                parts.append("…")
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _message(node.left), _message(node.right)
        return None if left is None or right is None else left + right
    return None


def _raised_messages(func: Callable[..., Any]) -> list[str]:
    """The messages of the ``raise ValueError(...)`` statements in ``func``'s source."""
    func = getattr(func, "__func__", func)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError):
        return []
    messages = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Raise)
            and isinstance(node.exc, ast.Call)
            and isinstance(node.exc.func, ast.Name)
            and node.exc.func.id == "ValueError"
            and node.exc.args
        ):
            text = _message(node.exc.args[0])
            if text:
                messages.append(_one_line(text))
    return messages


def _field_rules(model: type[BaseModel]) -> dict[str, list[str]]:
    """Each field's rules from its validators (``@field_validator``): their messages."""
    rules: dict[str, list[str]] = {}
    for decorator in model.__pydantic_decorators__.field_validators.values():
        messages = _raised_messages(decorator.func)
        for name in decorator.info.fields:
            rules.setdefault(name, []).extend(messages)
    return rules


def _model_rules(model: type[BaseModel]) -> list[str]:
    """The rules a model checks across its fields (``@model_validator``): their messages."""
    rules: list[str] = []
    for decorator in model.__pydantic_decorators__.model_validators.values():
        for message in _raised_messages(decorator.func):
            if message not in rules:
                rules.append(message)
    return rules


# --------------------------------------------------------------------------------------------
# Types, defaults and constraints as words

_KNOB_FORMS = "a value, a list, `{choices: [...]}` or `{low, high, step, log}`"


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _knob_classes() -> tuple[type[BaseModel], ...]:
    from autotune.core.config import CategoricalParam, FloatParam, IntParam

    return (IntParam, FloatParam, CategoricalParam)


def _is_knob(tp: Any) -> bool:
    return _is_model(tp) and issubclass(tp, _knob_classes())


def _strip_annotated(tp: Any) -> Any:
    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    return tp


def _union_args(tp: Any) -> tuple[Any, ...] | None:
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        return typing.get_args(tp)
    return None


def _type_words(tp: Any) -> str:
    """A field's type in words: `fp32`, `bf16`, ...; integer; a list of ...; or null."""
    tp = _strip_annotated(tp)
    parts = _union_args(tp)
    if parts is not None:
        nullable = type(None) in parts
        words = [_type_words(p) for p in parts if p is not type(None)]
        text = " or ".join(dict.fromkeys(words))
        return f"{text} or `null`" if nullable else text
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return ", ".join(f"`{v}`" for v in typing.get_args(tp))
    if origin in (list, tuple, set, frozenset):
        args = typing.get_args(tp)
        return f"list of {_type_words(args[0])}" if args else "list"
    if origin is dict or tp is dict:
        return "mapping"
    if tp is ByteSize:
        return "bytes: an integer or a size (`8GiB`, `512MB`)"
    if _is_knob(tp):
        from autotune.core.config import FloatParam, IntParam

        if issubclass(tp, IntParam):
            return "knob of integers"
        if issubclass(tp, FloatParam):
            return "knob of reals"
        choices = tp.model_fields["choices"].annotation
        values = typing.get_args(_strip_annotated(choices))
        inner = _strip_annotated(values[0]) if values else Any
        if typing.get_origin(inner) is typing.Literal:
            return "knob of " + ", ".join(f"`{v}`" for v in typing.get_args(inner))
        if inner is Any or len(_union_args(inner) or ()) > 2:
            return "knob of scalars"
        return f"knob of {_type_words(inner)}"
    if _is_model(tp):
        return "group (below)"
    names = {int: "integer", float: "number", bool: "`true` or `false`", str: "string"}
    if tp in names:
        return names[tp]
    if tp is Any:
        return "any"
    return f"`{getattr(tp, '__name__', str(tp))}`"


def _scalar(value: Any) -> str:
    """One value as YAML writes it: `true`, `null`, `0.001`, `fp32`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _value_words(value: Any) -> str:
    """A default as a space file writes it."""
    if isinstance(value, BaseModel):
        if isinstance(value, _knob_classes()):
            dumped = value.model_dump(mode="json")
            if dumped.get("choices") is not None:
                return f"`[{', '.join(_scalar(c) for c in dumped['choices'])}]`"
            return f"`{{low: {dumped['low']}, high: {dumped['high']}}}`"
        return "(group)"
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, (list, tuple)):
        return f"`[{', '.join(_scalar(v) for v in value)}]`"
    if isinstance(value, dict):
        return "`{}`" if not value else f"`{value}`"
    if value == "":
        return '`""`'
    return f"`{value}`"


def _default_words(info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    if info.default_factory is not None:
        return _value_words(info.default_factory())  # type: ignore[call-arg]
    return _value_words(info.default)


def _constraint_words(info: FieldInfo) -> list[str]:
    """The rules pydantic checks on one field: bounds, lengths, finiteness."""
    words: list[str] = []
    metadata = list(info.metadata)
    for item in metadata:
        if isinstance(item, annotated_types.Ge):
            words.append(f">= {item.ge}")
        elif isinstance(item, annotated_types.Gt):
            words.append(f"> {item.gt}")
        elif isinstance(item, annotated_types.Le):
            words.append(f"<= {item.le}")
        elif isinstance(item, annotated_types.Lt):
            words.append(f"< {item.lt}")
        elif isinstance(item, annotated_types.MinLen):
            words.append(f"at least {item.min_length} character{'s' * (item.min_length != 1)}")
        elif isinstance(item, annotated_types.MaxLen):
            words.append(f"at most {item.max_length} characters")
        elif getattr(item, "allow_inf_nan", None) is False:
            words.append("finite")
    return words


def _nested_model(tp: Any) -> type[BaseModel] | None:
    """The settings group a field holds (a model that is not a knob), or None."""
    tp = _strip_annotated(tp)
    parts = _union_args(tp)
    candidates = [p for p in parts if p is not type(None)] if parts is not None else [tp]
    models = [p for p in candidates if _is_model(p) and not _is_knob(p)]
    return models[0] if len(models) == 1 and len(candidates) == 1 else None


# --------------------------------------------------------------------------------------------
# The options: every key a run accepts


@dataclass
class Option:
    """One key of a run as ``key=value`` sets it."""

    path: str
    type: str
    default: str
    rules: list[str]
    description: str


@dataclass
class Group:
    """A table of options: the run's or the space's own keys, or one settings group."""

    title: str
    prefix: str  # "" for top-level keys, else "train." and so on
    intro: str
    options: list[Option]
    checks: list[str]
    anchor: str


#: Descriptions of the keys whose model has no word on them (no ``Field(description=...)``, no
#: docstring entry, no comment beside the field). A field that gains its own description in
#: the code takes that instead; ``tests/test_docs.py`` fails on an entry that names no key.
MORE: dict[str, str] = {
    "device": "Where trials run: `cpu` and `cuda` train for real and measure; `mock` is a "
    "simulation (an analytic cost model) for tests and demos; `auto` is `cuda` where a GPU is "
    "visible, else `cpu`.",
    "name": "The space's name; the study's name unless `study=` says otherwise. A file "
    "without it takes its file name.",
    "description": "Free text, shown nowhere but the file.",
    "workload": "Your model, data, loss and metric: `FILE.py:NAME` (relative to the space "
    "file) or `package.module:NAME`, an object with `build_model(**knobs)` and `datasets()`.",
    "workload_args": "Keyword arguments for the door's NAME when it is a class or factory "
    "(for `loop:`, `hf_trainer:` and `lightning:`, passed after the trial handle).",
    "batch_size": "Per-rank batch size; the global batch is `batch_size x gpu_count` (or "
    "`train.global_batch_size`).",
    "precision": "`fp32`, `tf32` (fp32 with TF32 matmuls and convolutions), `fp16` or "
    "`bf16` (autocast).",
    "memory_format": "`contiguous` or `channels_last` (the model's 4-D weights and inputs).",
    "compile_mode": "`torch.compile` mode; `none` runs eager.",
    "train.optimizer": "The optimizer of autotune's own loop (the workload door).",
    "train.weight_decay": "The optimizer's weight decay.",
    "data.name": "The built-in workloads' data set: `digits` (scikit-learn's 8x8 digits), "
    "`mnist` (the shipped MNIST test set, or `data.root`'s IDX files), `fashion_mnist` "
    "(needs `data.root`), `synthetic` (random tensors; throughput only).",
    "advanced.mock.fault": "Make the trials in `advanced.mock.fault_trials` fail on purpose: "
    "`oom`, `error`, `crash` or `hang`.",
    "advanced.mock.fault_trials": "Trial numbers `advanced.mock.fault` applies to; empty: "
    "every trial.",
    "constraints.max_memory_bytes": "Peak memory limit; a trial above it is infeasible.",
    "constraints.min_accuracy": "Lowest acceptable validation accuracy, 0 to 1 (accuracy "
    "metrics only); a trial below it is infeasible.",
}


#: Keys :func:`autotune.core.config.load_run_config` fills in itself, and what it fills in.
def _loader_defaults() -> dict[str, str]:
    from autotune.core.config import load_run_config

    space = inspect.signature(load_run_config).parameters["default_space"].default
    return {
        "space": f"`{space}`",
        "study": "the space's `name`",
    }


#: RunConfig fields that no ``key=value`` sets (the loader fills them from ``space=``).
_NOT_KEYS = {"space_source"}


def _space_key_option(described: str) -> Option:
    # The repository's shipped spaces (the wheel ships this folder as autotune.search_spaces;
    # an editable install elsewhere may map that name to another checkout's folder).
    shipped = ", ".join(f"`{p.stem}`" for p in sorted((REPO / "search_spaces").glob("*.yaml")))
    return Option(
        path="space",
        type=f"a shipped space's name ({shipped}) or the path of a YAML file",
        default=_loader_defaults()["space"],
        rules=["a shipped name, or an existing `.yaml` file"],
        description=described
        or "The search space: its knobs and fixed settings (the space's keys, below).",
    )


def _constant_words(value: Any) -> str:
    """A module constant a comment names, as the page reads it: a dict of metrics as
    ``door: name (direction)``, a tuple or list of names as `name`s."""
    if isinstance(value, dict):
        return ", ".join(
            f"{key}: `{getattr(v, 'name', v)}`"
            + (f" ({v.direction})" if getattr(v, "direction", None) else "")
            for key, v in value.items()
        )
    if isinstance(value, tuple | list | frozenset):
        return ", ".join(f"`{v}`" for v in value)
    return f"`{value}`"


def _expand_constants(text: str) -> str:
    """A constant's name in a comment (``DEFAULT_DOOR_METRICS``, ``GUIDE_KNOBS``) replaced by
    its value: a reader of the page cannot look the name up."""
    import autotune.core.config as config_package
    import autotune.core.config._settings as settings_module
    import autotune.core.config._space as space_module

    def value_of(match: re.Match[str]) -> str:
        name = match.group(1)
        for module in (config_package, space_module, settings_module):
            if hasattr(module, name):
                return _constant_words(getattr(module, name))
        return match.group(0)

    # "NAME's rule (what it holds)": the sentence says what it holds already.
    text = re.sub(r"`?\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b`?'s\b", "the default", text)
    return re.sub(r"`?\b([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)\b`?", value_of, text)


def _words(text: str, prefix: str) -> str:
    """A description as a page reads it: ``None`` is ``null``; a constant's name is its value;
    a pointer to another field of the same model gets the model's prefix."""
    text = _expand_constants(text)
    text = re.sub(r"\bNone\b", "`null`", text).replace("``null``", "`null`")
    text = text.replace("(see the class docstring)", "(see above)")
    return re.sub(r"^See `(\w+)`\.$", lambda m: f"See `{prefix}{m.group(1)}`.", text)


def _model_knobs_option(prefix: str) -> Option:
    """ModelSpace's ``knobs``: written one per key under ``model:`` (``model.width=16``)."""
    return Option(
        path=f"{prefix}<knob>",
        type=f"knob: {_KNOB_FORMS}",
        default="",
        rules=["a Python identifier that is not one of autotune's keys"],
        description="One per knob of your model, any name (`model.width`, `model.dropout`), "
        "passed as `build_model(**knobs)`, in the order written; the built-in `cnn` and `mlp` "
        "take `depth` and `width`.",
    )


def _meaningful(message: str) -> bool:
    """A validator's message that still says something once its values are left out."""
    return len(re.findall(r"[A-Za-z]{3,}", message.replace("…", " "))) >= 3


def _groups_of(
    model: type[BaseModel],
    prefix: str,
    title: str,
    anchor: str,
    *,
    inline: dict[str, type[BaseModel]] | None = None,
) -> list[Group]:
    """The option tables of ``model``: its own keys first, then one table per settings group
    (recursively). ``inline`` names fields whose model's keys sit at this level instead
    (RunConfig's ``space``: the space's keys are written without a prefix)."""
    from autotune.core.config import ModelSpace

    inline = inline or {}
    text = _class_text(model)
    field_rules = _field_rules(model)
    loader = _loader_defaults() if model.__name__ == "RunConfig" else {}
    own: list[Option] = []
    nested: list[Group] = []
    for name, info in model.model_fields.items():
        if name in _NOT_KEYS and model.__name__ == "RunConfig":
            continue
        path = prefix + name
        description = _plain(info.description or "") or text.described.get(name, "")
        description = _words(description or MORE.get(path, ""), prefix)
        if name in inline:
            own.append(_space_key_option(description))
            continue
        if model is ModelSpace and name == "knobs":
            own.append(_model_knobs_option(prefix))
            continue
        group = _nested_model(info.annotation)
        if group is not None:
            child = _groups_of(group, path + ".", f"`{path}.*`", _anchor(path))
            nested.extend(child)
            own.append(
                Option(
                    path=path,
                    type=f"settings group: [`{path}.*`](#{_anchor(path)})",
                    default=_default_words(info) if info.default is None else "",
                    rules=[],
                    description=description or _class_text(group).intro.split("\n\n")[0],
                )
            )
            continue
        default = loader.get(name) or _default_words(info)
        own.append(
            Option(
                path=path,
                type=_type_words(info.annotation),
                default=default,
                rules=[*_constraint_words(info), *filter(_meaningful, field_rules.get(name, []))],
                description=description,
            )
        )
    groups = [
        Group(
            title=title,
            prefix=prefix,
            intro=text.intro,
            options=own,
            checks=[m for m in _model_rules(model) if _meaningful(m)],
            anchor=anchor,
        ),
        *nested,
    ]
    for inner in inline.values():
        groups.extend(_groups_of(inner, prefix, "The space's keys", "space-keys"))
    return groups


def _anchor(path: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-")


def option_groups() -> list[Group]:
    """Every option of ``autotune run``, grouped: the run's keys (RunConfig), then the
    space's (SearchSpace), each settings group in a table of its own."""
    from autotune.core.config import RunConfig, SearchSpace

    groups = _groups_of(RunConfig, "", "The run's keys", "run-keys", inline={"space": SearchSpace})
    return [g for g in groups if g.options]


def option_paths() -> list[str]:
    """Every key path the options reference lists (``device``, ``train.epochs``, ...)."""
    return [o.path for g in option_groups() for o in g.options]


def _cell(text: str) -> str:
    """Text for one table cell: one line, pipes escaped outside code spans."""
    pieces = re.split(r"(`[^`]*`)", _one_line(text))
    return "".join(p if p.startswith("`") else p.replace("|", "\\|") for p in pieces)


#: The prefix of the research knobs (``SearchSpace.advanced``), listed apart on the page.
ADVANCED = "advanced."


def is_advanced(path: str) -> bool:
    """A key of the ``advanced.*`` namespace (or the ``advanced`` group itself)."""
    return path == ADVANCED.rstrip(".") or path.startswith(ADVANCED)


def main_option_paths() -> list[str]:
    """The main options: every key the reference lists but the settings groups, the knobs a
    space searches (its system knobs and ``model.<knob>``) and the ``advanced.*`` keys."""
    from autotune.core.config import SYSTEM_KNOBS

    return [
        o.path
        for g in option_groups()
        for o in g.options
        if not o.type.startswith("settings group")
        and not o.type.startswith("knob")
        and o.path not in SYSTEM_KNOBS
        and not is_advanced(o.path)
    ]


def _group_markdown(group: Group, level: str) -> list[str]:
    out = [f"{level} {group.title} {{#{group.anchor}}}\n"]
    if group.intro:
        out.append(group.intro + "\n")
    out.append("| key | type | default | rules | description |")
    out.append("| --- | --- | --- | --- | --- |")
    for option in group.options:
        rules = "; ".join(option.rules)
        out.append(
            f"| `{option.path}` | {_cell(option.type)} | {_cell(option.default)} | "
            f"{_cell(rules)} | {_cell(option.description)} |"
        )
    out.append("")
    if group.checks:
        out.append("Checked together (the message when one fails):\n")
        out.extend(f"- {_cell(check)}" for check in group.checks)
        out.append("")
    return out


def options_markdown() -> str:
    """The options page's tables: the main options, then the research knobs under one
    "Advanced" heading (``advanced.*``), each group of them in a table of its own."""
    out: list[str] = []
    groups = option_groups()
    for group in groups:
        if not is_advanced(group.prefix):
            out.extend(_group_markdown(group, "##"))
    [advanced] = [g for g in groups if g.prefix == ADVANCED]
    out.append(f"## Advanced {{#{advanced.anchor}}}\n")
    if advanced.intro:
        out.append(advanced.intro + "\n")
    for group in groups:
        if is_advanced(group.prefix) and group is not advanced:
            out.extend(_group_markdown(group, "###"))
    return "\n".join(out)


# --------------------------------------------------------------------------------------------
# The space file: its top-level keys and the knob forms


def space_markdown() -> str:
    """The space page's tables: every top-level key of a space file, and each knob form."""
    from autotune.core.config import (
        ChoiceParam,
        CompileModeParam,
        FloatParam,
        IntParam,
        MemoryFormatParam,
        PrecisionParam,
    )

    out = ["## Top-level keys {#top-level-keys}\n"]
    [keys] = [g for g in option_groups() if g.anchor == "space-keys"]
    out.append("| key | type | default | description |")
    out.append("| --- | --- | --- | --- |")
    for option in keys.options:
        kind = option.type.replace("](#", "](options.md#")
        if option.path == "model":
            kind = "the model's knobs: [`model:`](#model)"
        elif option.path == "metric":
            kind = "`{name, direction}` or `null`: [`metric:`](#metric)"
        out.append(
            f"| `{option.path}` | {_cell(kind)} | {_cell(option.default)} | "
            f"{_cell(option.description)} |"
        )
    out.append("")
    sections = {g.anchor: g for g in option_groups()}
    for title, anchor in (("`model:`", "model"), ("`metric:`", "metric")):
        group = sections[anchor]
        out.append(f"## {title} {{#{anchor}}}\n")
        out.append(group.intro + "\n")
        out.append("| key | type | default | description |")
        out.append("| --- | --- | --- | --- |")
        for option in group.options:
            out.append(
                f"| `{option.path}` | {_cell(option.type)} | {_cell(option.default)} | "
                f"{_cell(option.description)} |"
            )
        out.append("")
    out.append("## Knob forms {#knob-forms}\n")
    out.append(
        f"Each knob is written as {_KNOB_FORMS}. The forms, as the models that read them "
        "define them:\n"
    )
    for model in (
        IntParam,
        FloatParam,
        ChoiceParam,
        PrecisionParam,
        MemoryFormatParam,
        CompileModeParam,
    ):
        model_text = _class_text(model)
        out.append(f"### {model.__name__} {{#{_anchor(model.__name__)}}}\n")
        out.append(model_text.intro + "\n")
        out.append("| key | type | default | rules |")
        out.append("| --- | --- | --- | --- |")
        field_rules = _field_rules(model)
        for name, info in model.model_fields.items():
            rules = "; ".join([*_constraint_words(info), *field_rules.get(name, [])])
            out.append(
                f"| `{name}` | {_cell(_type_words(info.annotation))} | "
                f"{_cell(_default_words(info))} | {_cell(rules)} |"
            )
        checks = _model_rules(model)
        if checks:
            out.append("\nChecked together:\n")
            out.extend(f"- {_cell(check)}" for check in checks)
        out.append("")
    return "\n".join(out)


# --------------------------------------------------------------------------------------------
# The CLI


def _click_command() -> Any:
    import typer

    from autotune.cli import app

    return typer.main.get_command(app)


def cli_commands() -> list[str]:
    """The commands the CLI lists (hidden, deprecated ones left out)."""
    group = _click_command()
    return [name for name, cmd in group.commands.items() if not cmd.hidden]


def cli_markdown() -> str:
    """The CLI page: the root options, then every command with its usage, arguments and
    options, from the Typer app itself."""
    import typer

    group = _click_command()
    root = typer.Context(group, info_name="autotune")
    out = [f"```\n{group.get_usage(root)}\n```\n", _plain(_one_line(group.help or "")) + "\n"]
    out.extend(_params_table(group))
    if group.epilog:
        out.append(_plain(_one_line(group.epilog)) + "\n")
    for name, cmd in group.commands.items():
        if cmd.hidden:
            continue
        ctx = typer.Context(cmd, info_name=name, parent=root)
        out.append(f"## autotune {name} {{#{_anchor(name)}}}\n")
        out.append(f"```\n{cmd.get_usage(ctx)}\n```\n")
        out.append(_plain(cmd.help or "").strip() + "\n")
        out.extend(_params_table(cmd))
    return "\n".join(out)


def _params_table(cmd: Any) -> Iterator[str]:
    rows = []
    for param in cmd.params:
        if param.param_type_name == "argument":
            name = f"`{param.metavar or param.name.upper()}`"
            default = "required" if param.required else ""
        else:
            if getattr(param, "hidden", False):
                continue
            name = ", ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
            if param.metavar:
                name += f" `{param.metavar}`"
            kind = getattr(param, "type_descriptor", None) or getattr(param, "type", None)
            choices = getattr(kind, "choices", None)
            if choices and not param.metavar:  # a Literal's or an Enum's values, as typed
                name += " " + r"\|".join(f"`{getattr(c, 'value', c)}`" for c in choices)
            flag = getattr(param, "is_flag", False)
            default = "" if flag or param.default in (None, False) else f"`{param.default}`"
            if param.required:
                default = "required"
        help_text = getattr(param, "help", "") or ""
        rows.append(f"| {name} | {_cell(default)} | {_cell(_plain(help_text))} |")
    if not rows:
        return
    yield "| argument or option | default | meaning |"
    yield "| --- | --- | --- |"
    yield from rows
    yield ""


# --------------------------------------------------------------------------------------------
# The storage schema


def _readme_meanings() -> dict[str, dict[str, str]]:
    """Each table's column meanings as storage/README.md gives them (``### `table```
    headings, then rows ``| `col`, `col2` | meaning |``); a column it leaves out has the comment
    written beside it in its model (storage/models.py), so a new column needs no line there."""
    meanings: dict[str, dict[str, str]] = {}
    table: str | None = None
    for line in STORAGE_README.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^###\s+`(\w+)`", line)
        if heading:
            table = heading.group(1)
            meanings[table] = {}
            continue
        if line.startswith("## "):
            table = None
        row = re.match(r"^\|\s*((?:`\w+`(?:,\s*)?)+)\s*\|\s*(.*?)\s*\|\s*$", line)
        if table is not None and row:
            for column in re.findall(r"`(\w+)`", row.group(1)):
                meanings[table][column] = row.group(2)
    from autotune.study.storage._rows import MAPPINGS
    from autotune.study.storage.models import Base

    for mapper in Base.registry.mappers:
        table_name = mapper.class_.__tablename__
        for column, text in _comments(mapper.class_).items():
            meanings.setdefault(table_name, {}).setdefault(column, _plain(text))
    # The columns a record's fields declare (storage.models.record_columns): the field's
    # entry in the record's docstring, or in its bases' (MeasuredRun's).
    for mapping in MAPPINGS:
        table_name = mapping.model.__tablename__
        described: dict[str, str] = {}
        for cls in reversed(mapping.record.__mro__):
            if dataclasses.is_dataclass(cls):
                described.update(_docstring_attributes(cls.__doc__ or "")[1])
        for name, column in mapping.pairs():
            if name in described:
                meanings.setdefault(table_name, {}).setdefault(column, described[name])
    return meanings


def _readme_intros() -> dict[str, str]:
    """The line under each table's heading in storage/README.md (``one row per ...``)."""
    intros: dict[str, str] = {}
    for match in re.finditer(r"^###\s+`(\w+)`: (.*)$", STORAGE_README.read_text("utf-8"), re.M):
        intros[match.group(1)] = match.group(2)
    return intros


def storage_tables() -> dict[str, list[str]]:
    """Every table of autotune's results schema and its columns, from the models."""
    from autotune.study.storage.models import Base

    return {name: [c.name for c in table.columns] for name, table in Base.metadata.tables.items()}


def undocumented_columns() -> list[str]:
    """``table.column`` for each column that storage/README.md gives no meaning."""
    meanings = _readme_meanings()
    return [
        f"{table}.{column}"
        for table, columns in storage_tables().items()
        for column in columns
        if column not in meanings.get(table, {})
    ]


def storage_markdown() -> str:
    """One table per results table: every column with its SQL type, NULL, keys and meaning."""
    from sqlalchemy import UniqueConstraint

    from autotune.study.storage.models import Base

    meanings = _readme_meanings()
    intros = _readme_intros()
    docs = {m.class_.__tablename__: m.class_.__doc__ or "" for m in Base.registry.mappers}
    out: list[str] = []
    for name, table in Base.metadata.tables.items():
        out.append(f"### `{name}` {{#{_anchor(name)}}}\n")
        intro = intros.get(name) or _plain(_one_line(inspect.cleandoc(docs.get(name, ""))))
        out.append(_plain(intro) + "\n")
        uniques = [
            ", ".join(f"`{c.name}`" for c in constraint.columns)
            for constraint in table.constraints
            if isinstance(constraint, UniqueConstraint) and len(constraint.columns) > 1
        ]
        out.append("| column | SQL type | NULL | key | meaning |")
        out.append("| --- | --- | --- | --- | --- |")
        for column in table.columns:
            keys = []
            if column.primary_key:
                keys.append("primary key")
            if column.unique:
                keys.append("unique")
            keys.extend(f"references `{fk.target_fullname}`" for fk in column.foreign_keys)
            if column.index:
                keys.append("indexed")
            if column.server_default is not None:
                keys.append(f"default `{getattr(column.server_default, 'arg', '')}`")
            meaning = meanings.get(name, {}).get(column.name, "**not in storage/README.md**")
            null = "yes" if column.nullable and not column.primary_key else "no"
            out.append(
                f"| `{column.name}` | `{column.type}` | {null} | {_cell(', '.join(keys))} | "
                f"{_cell(meaning)} |"
            )
        if uniques:
            out.append("")
            out.append("Unique together: " + "; ".join(f"({u})" for u in uniques) + ".")
        out.append("")
    return "\n".join(out)


def storage_queries_markdown() -> str:
    """storage/README.md's example queries, as written there."""
    text = STORAGE_README.read_text(encoding="utf-8")
    _, sep, queries = text.partition("## Two example queries")
    return queries.strip() + "\n" if sep else ""


def search_space_file(name: str) -> str:
    """A shipped space file, verbatim, as a YAML block."""
    text = (REPO / "search_spaces" / f"{name}.yaml").read_text(encoding="utf-8")
    return f"```yaml\n{text.rstrip()}\n```\n"


# --------------------------------------------------------------------------------------------
# The hook

GENERATORS: dict[str, Callable[[], str]] = {
    "options": options_markdown,
    "space": space_markdown,
    "cli": cli_markdown,
    "storage": storage_markdown,
    "storage-queries": storage_queries_markdown,
    "space-cnn_small": lambda: search_space_file("cnn_small"),
}
#: A generated block: ``<!-- autotune:NAME -->``, the text, ``<!-- /autotune:NAME -->``.
_BLOCK = re.compile(r"<!-- autotune:([\w-]+) -->\n.*?<!-- /autotune:\1 -->", re.DOTALL)
DOCS = Path(__file__).resolve().parent


def render(markdown: str) -> str:
    """``markdown`` with every generated block written afresh from the code.

    Raises:
        KeyError: a block names no generator.
    """

    def fresh(match: re.Match[str]) -> str:
        name = match.group(1)
        body = GENERATORS[name]().strip("\n")
        return f"<!-- autotune:{name} -->\n{body}\n<!-- /autotune:{name} -->"

    return _BLOCK.sub(fresh, markdown)


def generated_pages() -> list[Path]:
    """The pages under docs/ that hold a generated block."""
    return sorted(p for p in DOCS.rglob("*.md") if _BLOCK.search(p.read_text(encoding="utf-8")))


def stale_pages() -> list[Path]:
    """The pages whose committed blocks differ from what the code generates now."""
    return [p for p in generated_pages() if render(p.read_text("utf-8")) != p.read_text("utf-8")]


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """MkDocs hook: the site shows the blocks generated now, from the code being built. A
    committed page whose blocks differ is stale for those who read the file itself: that is a
    warning, which fails ``mkdocs build --strict``."""
    del config, files
    fresh = render(markdown)
    if fresh != markdown:
        logging.getLogger("mkdocs.hooks.gen_reference").warning(
            "docs/%s: its generated tables differ from the code; run "
            "python docs/gen_reference.py --write",
            page.file.src_uri,
        )
    return fresh


def main(argv: list[str]) -> int:
    """``--write``: bring the committed pages up to date; ``--check``: exit 1 if one is stale;
    a generator's name: print its text."""
    if argv in (["--write"], ["--check"]):
        stale = stale_pages()
        for page in stale:
            if argv == ["--write"]:
                page.write_text(render(page.read_text("utf-8")), encoding="utf-8")
            print(f"{'wrote' if argv == ['--write'] else 'stale'}: {page.relative_to(REPO)}")
        return 1 if stale and argv == ["--check"] else 0
    for name in argv or list(GENERATORS):
        print(GENERATORS[name]())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
