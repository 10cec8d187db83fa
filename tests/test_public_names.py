"""The face of every package of autotune: ``__all__`` lists every public name, once; each name
resolves and is documented (a docstring, or a ``#:`` comment above a constant).

The packages are found with pkgutil, so a new one is checked without a change here. A module
that is not a package but declares ``__all__`` is held to the same rules, except that it may
hold public names it does not export (its imports)."""

from __future__ import annotations
import __future__

import ast
import importlib
import inspect
import pkgutil
import re
import types
from functools import cache
from pathlib import Path

import pytest

import autotune


def _walk_error(name: str) -> None:
    # pkgutil.walk_packages skips a package that fails to import unless told otherwise.
    raise ImportError(f"{name} could not be imported")


_MODULES = ["autotune"] + [
    info.name for info in pkgutil.walk_packages(autotune.__path__, "autotune.", _walk_error)
]
#: Every package of autotune, the top one first.
PACKAGES = [name for name in _MODULES if hasattr(importlib.import_module(name), "__path__")]
#: Every module of autotune that is not a package and declares ``__all__``.
MODULES_WITH_ALL = [
    name
    for name in _MODULES
    if name not in PACKAGES and hasattr(importlib.import_module(name), "__all__")
]


def _public_names(module: types.ModuleType) -> set[str]:
    """The module's public attributes: submodules and ``from __future__`` features left out."""
    return {
        name
        for name in dir(module)
        if not name.startswith("_")
        and not isinstance(getattr(module, name), types.ModuleType | __future__._Feature)
    }


#: A one-line module-level assignment (``NAME = ...`` or ``NAME: type = ...``).
_ONE_LINE_ASSIGNMENT = re.compile(r"[A-Za-z_]\w*(\s*:[^=]*)?\s*=[^=].*[^(\[{,]$")


def _comment_above(lines: list[str], lineno: int) -> bool:
    """Whether a ``#:`` comment documents the assignment on line ``lineno`` (1-based): on the
    line above, or above the group of one-line assignments it belongs to."""
    index = lineno - 2
    while index >= 0 and _ONE_LINE_ASSIGNMENT.match(lines[index]):
        index -= 1
    return index >= 0 and lines[index].startswith("#:")


@cache
def _documented_constants() -> dict[str, bool]:
    """Each module-level name assigned in autotune's sources: whether any of its assignments is
    documented, by a ``#:`` comment above it (:func:`_comment_above`) or a string right after
    it."""
    documented: dict[str, bool] = {}
    for path in Path(autotune.__file__).parent.rglob("*.py"):
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        body = ast.parse(source).body
        for statement, following in zip(body, [*body[1:], None], strict=True):
            if isinstance(statement, ast.Assign):
                targets = statement.targets
            elif isinstance(statement, ast.AnnAssign):
                targets = [statement.target]
            else:
                continue
            docstring = (
                isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            )
            commented = _comment_above(lines, statement.lineno)
            for target in targets:
                if isinstance(target, ast.Name):
                    documented[target.id] = documented.get(target.id, False) or (
                        commented or docstring
                    )
    return documented


def _undocumented(module: types.ModuleType, name: str) -> str | None:
    """Why ``module.name`` is not documented, or None when it is."""
    value = getattr(module, name)
    if inspect.isclass(value):
        doc = vars(value).get("__doc__")
        # dataclasses and named tuples make up a docstring from the signature when none is given
        if not doc or doc.startswith(f"{value.__name__}("):
            return "a class without a docstring"
        return None
    if inspect.isroutine(value):
        return None if inspect.getdoc(value) else "a function without a docstring"
    if not _documented_constants().get(name, False):
        return "a constant without a #: comment above its assignment"
    return None


def test_every_package_is_found() -> None:
    assert PACKAGES[0] == "autotune"
    for name in ("autotune.core.config", "autotune.study.storage.records", "autotune.testing"):
        assert name in PACKAGES


@pytest.mark.parametrize("name", PACKAGES)
def test_all_lists_every_public_name(name: str) -> None:
    package = importlib.import_module(name)
    exported = [n for n in package.__all__ if not n.startswith("__")]  # autotune's __version__

    assert set(exported) == _public_names(package)
    assert len(exported) == len(set(exported))


@pytest.mark.parametrize("name", PACKAGES + MODULES_WITH_ALL)
def test_every_exported_name_resolves_once_and_is_documented(name: str) -> None:
    module = importlib.import_module(name)
    assert (module.__doc__ or "").strip(), f"{name} has no docstring"
    assert len(module.__all__) == len(set(module.__all__)), f"{name}.__all__ repeats a name"
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names what it does not have: {missing}"
    undocumented = {
        n: why
        for n in module.__all__
        if not n.startswith("__") and (why := _undocumented(module, n))
    }
    assert not undocumented, f"{name}: {undocumented}"
