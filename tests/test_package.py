"""The package face: ``autotune/__init__.py`` exports the public API, and importing it is cheap."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import autotune
import autotune.core.exceptions

#: The directory that holds the ``autotune`` package: a child started there imports this
#: checkout (or this installation), whatever the editable install's finder maps.
_PACKAGE_ROOT = Path(autotune.__file__).resolve().parent.parent


def _public_names() -> set[str]:
    """Public attributes of the package, submodules left out (``autotune.study.api`` and friends)."""
    return {
        name
        for name in dir(autotune)
        if not name.startswith("_") and not isinstance(getattr(autotune, name), types.ModuleType)
    }


def test_all_is_sorted_and_lists_every_public_name() -> None:
    assert autotune.__all__ == sorted(autotune.__all__)
    assert set(autotune.__all__) == _public_names() | {"__version__"}


def test_every_name_resolves_to_the_object_of_its_module() -> None:
    for name in autotune.__all__:
        assert getattr(autotune, name) is not None, name
    assert autotune.run_study is __import__("autotune.study.api").study.api.run_study
    assert autotune.StorageError is autotune.core.exceptions.StorageError


def test_every_exception_is_exported() -> None:
    assert set(autotune.core.exceptions.__all__) <= set(autotune.__all__)


def test_version_is_a_string() -> None:
    assert isinstance(autotune.__version__, str)
    assert autotune.__version__


def test_unknown_names_raise_attribute_error() -> None:
    try:
        autotune.no_such_name  # noqa: B018
    except AttributeError as e:
        assert "no_such_name" in str(e)
    else:
        raise AssertionError("autotune.no_such_name did not raise AttributeError")


def test_import_autotune_imports_neither_torch_nor_optuna() -> None:
    heavy = ("torch", "optuna", "sqlalchemy", "typer")
    code = (
        "import sys, autotune; "
        "assert autotune.__file__, 'autotune imported as a namespace package'; "
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {heavy!r}))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=_PACKAGE_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_every_package_is_listed_for_the_wheel() -> None:
    """setuptools installs only the packages pyproject.toml lists; a package missing there
    works in an editable install and is absent from a wheel."""
    import tomllib

    pyproject = tomllib.loads((_PACKAGE_ROOT / "pyproject.toml").read_text())
    listed = set(pyproject["tool"]["setuptools"]["packages"])
    on_disk = {
        ".".join(init.parent.relative_to(_PACKAGE_ROOT).parts)
        for init in (_PACKAGE_ROOT / "autotune").rglob("__init__.py")
    }
    assert on_disk | {"autotune.search_spaces"} == listed


def test_shipped_data_is_listed_for_the_wheel() -> None:
    """Every file under autotune/trial/workloads/builtin/datasets (the MNIST test set and its
    license) matches a package-data pattern; one that does not works in an editable install
    and is absent from a wheel."""
    import tomllib

    pyproject = tomllib.loads((_PACKAGE_ROOT / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["autotune.trial.workloads.builtin"]
    package = _PACKAGE_ROOT / "autotune" / "trial" / "workloads" / "builtin"
    shipped = [p for p in (package / "datasets").rglob("*") if p.is_file()]
    assert shipped
    for path in shipped:
        relative = path.relative_to(package)
        assert any(relative.match(pattern) for pattern in patterns), relative
