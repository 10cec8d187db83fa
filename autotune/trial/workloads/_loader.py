"""Resolve a workload reference in this process, give it autotune's defaults, and check it
against a space before a study opens.

A reference travels to the trial process as a string (``/abs/file.py:NAME`` or
``package.module:NAME``, the form entry points and ``uvicorn module:app`` use), never as a
pickled object, and is imported again there.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import inspect
import sys
import traceback
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

from autotune.core.config import ModelSpace, WorkloadSpec
from autotune.core.exceptions import AutotuneError, WorkloadError

__all__ = [
    "LoadedWorkload",
    "check_workload",
    "default_evaluate",
    "load_workload",
    "smallest_knobs",
]

_DIRECTIONS = ("maximize", "minimize")


def _import_file(path: Path, key: str = "workload") -> Any:
    """Import ``path`` as a module of its own name plus a hash of its path; its directory
    goes first on ``sys.path``, so that it can import the modules beside it. ``sys.argv`` is
    ``[path]`` while it runs (restored after): a script that parses its command line at
    import (``argparse`` at module level) reads its own defaults, not autotune's arguments.
    ``key`` is the space key that names the file, for messages."""
    if not path.is_file():
        raise WorkloadError(f"{key}: no such file {path}")
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:8]
    module_name = f"autotune_workload_{path.stem}_{digest}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    directory = str(path.parent)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:  # pragma: no cover (a .py file always has one)
        raise WorkloadError(f"workload: {path} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # before exec: dataclasses and pickling look it up
    argv = sys.argv
    sys.argv = [str(path)]
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        del sys.modules[module_name]
        raise WorkloadError(f"{key}: importing {path} failed: {_last_line(e)}") from e
    except SystemExit as e:  # argparse's exit on a command line it refuses, or sys.exit()
        del sys.modules[module_name]
        raise WorkloadError(
            f"{key}: importing {path} failed: it called sys.exit({e.code!r}) at import (put "
            'the script\'s own command-line code under `if __name__ == "__main__":`)'
        ) from e
    finally:
        sys.argv = argv
    return module


def _last_line(error: BaseException) -> str:
    """The one line of an exception (``ValueError: ...``); a ``SyntaxError`` (its
    subclasses too) keeps its place, ``FILE:LINE: SyntaxError: ...``."""
    if isinstance(error, SyntaxError) and error.filename and error.lineno:
        return f"{error.filename}:{error.lineno}: {type(error).__name__}: {error.msg}"
    return "".join(traceback.format_exception_only(error)).strip().splitlines()[-1]


def resolve_reference(ref: str, key: str = "workload") -> Any:
    """The object ``FILE.py:NAME`` or ``package.module:NAME`` names.

    Args:
        ref: the reference.
        key: the space key that gave it (``workload``, ``loop``, ``hf_trainer``,
            ``lightning``): every message starts with it.

    Raises:
        WorkloadError: the file or module cannot be imported, or has no NAME.
    """
    target, _, name = ref.rpartition(":")
    if target.endswith(".py"):
        module = _import_file(Path(target), key)
        where = target
    else:
        try:
            module = importlib.import_module(target)
        except Exception as e:
            raise WorkloadError(f"{key}: cannot import {target}: {_last_line(e)}") from e
        where = f"module {target}"
    try:
        return getattr(module, name)
    except AttributeError:
        raise WorkloadError(f"{key}: {where} has no attribute {name!r}") from None


def _is_workload(obj: Any) -> bool:
    return callable(getattr(obj, "build_model", None)) and callable(getattr(obj, "datasets", None))


def _instantiate(obj: Any, spec: WorkloadSpec) -> Any:
    """``obj`` itself when it is a workload (an instance or a module-level object), else
    ``obj(**spec.args)`` (a class or factory)."""
    if _is_workload(obj) and not inspect.isclass(obj):
        if spec.args:
            raise WorkloadError(
                f"workload_args: {spec.label} is already a workload object, not a class or "
                "factory to call with arguments; remove workload_args"
            )
        return obj
    if not callable(obj):
        raise WorkloadError(
            f"workload: {spec.label} is a {type(obj).__name__}, not a workload (an object "
            "with build_model(**knobs) and datasets()) nor a class or factory returning one"
        )
    try:
        inspect.signature(obj).bind(**spec.args)
    except TypeError as e:
        raise WorkloadError(f"workload_args: {spec.label}() does not accept them: {e}") from None
    except ValueError:  # no signature to read (a builtin): let the call decide
        pass
    try:
        made = obj(**spec.args)
    except WorkloadError:
        raise
    except Exception as e:
        raise WorkloadError(f"workload: {spec.label}(...) raised {_last_line(e)}") from e
    if not _is_workload(made):
        raise WorkloadError(
            f"workload: {spec.label}(...) returned a {type(made).__name__}, which has no "
            "build_model(**knobs) and datasets() methods"
        )
    return made


def default_evaluate(
    model: torch.nn.Module,
    loader: Iterable[Any],
    device: torch.device,
    memory_format: torch.memory_format = torch.contiguous_format,
) -> float:
    """Top-1 accuracy in [0, 1]: the share of samples whose largest output is the target.

    Args:
        model: the model, in eval mode; called under the caller's ``no_grad`` and autocast.
        loader: batches ``(x, y)``: x ``(B, ...)``, y ``(B,)`` class indices.
        device: where the model is.
        memory_format: applied to 4-D inputs (channels_last models).
    """
    correct, total = 0, 0
    for x, y in loader:
        x = x.to(device, memory_format=memory_format) if x.dim() == 4 else x.to(device)
        y = y.to(device)
        correct += int((model(x).argmax(dim=1) == y).sum())
        total += len(y)
    return correct / max(1, total)


@dataclass
class LoadedWorkload:
    """A resolved workload with autotune's defaults filled in.

    Attributes:
        spec: the reference it was loaded from.
        obj: the user's workload object; for the ``loop``, ``hf_trainer`` and ``lightning``
            doors, the user's function (the metric is the space's ``metric:``).
        metric_name: the validation metric's name (``accuracy`` by default).
        metric_direction: ``maximize`` or ``minimize``.
    """

    spec: WorkloadSpec
    obj: Any
    metric_name: str
    metric_direction: str
    _datasets: tuple[Dataset[Any], Dataset[Any]] | None = field(default=None, repr=False)

    @property
    def has_own_evaluate(self) -> bool:
        """True when the workload brings ``evaluate``; else top-1 accuracy is used."""
        return callable(getattr(self.obj, "evaluate", None))

    def build_model(self, knobs: Mapping[str, Any]) -> torch.nn.Module:
        """``obj.build_model(**knobs)``, checked to be a module.

        Raises:
            TypeError: the result is not a ``torch.nn.Module``.
        """
        model = self.obj.build_model(**knobs)
        if not isinstance(model, torch.nn.Module):
            raise TypeError(
                f"{self.spec.label}: build_model() returned a {type(model).__name__}, "
                "not a torch.nn.Module"
            )
        return model

    def datasets(self) -> tuple[Dataset[Any], Dataset[Any]]:
        """``(train, validation)``, loaded once per process.

        Raises:
            TypeError: ``datasets()`` did not return two datasets.
        """
        if self._datasets is None:
            pair = self.obj.datasets()
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise TypeError(
                    f"{self.spec.label}: datasets() must return (train, validation), "
                    f"got a {type(pair).__name__}"
                )
            self._datasets = (pair[0], pair[1])
        return self._datasets

    def loss(self, output: Any, target: Any) -> torch.Tensor:
        """The workload's ``loss(output, target)``, or cross-entropy."""
        own = getattr(self.obj, "loss", None)
        if callable(own):
            result: torch.Tensor = own(output, target)
            return result
        return F.cross_entropy(output, target)

    def evaluate(
        self,
        model: torch.nn.Module,
        loader: DataLoader[Any],
        device: torch.device,
        memory_format: torch.memory_format = torch.contiguous_format,
    ) -> float:
        """The validation metric: the workload's ``evaluate(model, loader, device)``, or top-1
        accuracy (:func:`default_evaluate`). The caller sets eval mode, no_grad and autocast.

        Raises:
            TypeError: the metric is not a real number.
        """
        if self.has_own_evaluate:
            value = self.obj.evaluate(model, loader, device)
        else:
            value = default_evaluate(model, loader, device, memory_format)
        try:
            return float(value)
        except (TypeError, ValueError):
            raise TypeError(
                f"{self.spec.label}: evaluate() returned {value!r}, not a number"
            ) from None


#: What each framework door imports, and the extra that installs it.
_DOOR_PACKAGES = {
    "hf_trainer": (("transformers", "accelerate"), "hf"),
    "lightning": (("lightning",), "lightning"),
}


def _door_function(spec: WorkloadSpec) -> Any:
    """The function a ``loop``, ``hf_trainer`` or ``lightning`` door names, checked to be
    callable with a trial handle and ``spec.args``.

    Raises:
        WorkloadError: its framework is not installed, the reference does not resolve, it is
            not callable, or it cannot take the handle and ``workload_args``.
    """
    packages, extra = _DOOR_PACKAGES.get(spec.door, ((), ""))
    for package in packages:
        if importlib.util.find_spec(package) is None:
            raise WorkloadError(
                f"{spec.door}: {spec.label} needs {package}, which is not installed: "
                f"pip install 'autotune[{extra}]'"
            )
    fn = resolve_reference(spec.ref, spec.door)
    if not callable(fn):
        raise WorkloadError(
            f"{spec.door}: {spec.label} is a {type(fn).__name__}, not a function to call with "
            "a trial handle"
        )
    try:
        signature = inspect.signature(fn)
        # workload_args.argv is the script's command line (sys.argv while it runs), unless
        # the function takes an argv of its own (autotune.trial.training._door.script_argv).
        args = {k: v for k, v in spec.args.items() if k != "argv" or "argv" in signature.parameters}
        signature.bind(object(), **args)
    except TypeError as e:
        raise WorkloadError(
            f"{spec.door}: {spec.label}(trial{', **workload_args' if spec.args else ''}) does "
            f"not fit its signature: {e}"
        ) from None
    except ValueError:  # no signature to read (a builtin): let the call decide
        pass
    return fn


@functools.cache
def _load_cached(spec_json: str) -> LoadedWorkload:
    spec = WorkloadSpec.model_validate_json(spec_json)
    if spec.door != "workload":
        assert spec.metric is not None, "a door that reports its own metric names it"
        return LoadedWorkload(spec, _door_function(spec), spec.metric.name, spec.metric.direction)
    obj = _instantiate(resolve_reference(spec.ref), spec)
    metric_name = getattr(obj, "metric_name", "accuracy")
    direction = getattr(obj, "metric_direction", "maximize")
    if not isinstance(metric_name, str) or not metric_name.isidentifier():
        raise WorkloadError(
            f"workload: {spec.label}.metric_name must be an identifier such as val_loss, "
            f"got {metric_name!r}"
        )
    if direction not in _DIRECTIONS:
        raise WorkloadError(
            f"workload: {spec.label}.metric_direction must be maximize or minimize, "
            f"got {direction!r}"
        )
    return LoadedWorkload(spec, obj, metric_name, str(direction))


def load_workload(spec: WorkloadSpec) -> LoadedWorkload:
    """Import and set up the workload ``spec`` names (once per process).

    Raises:
        WorkloadError: the reference does not resolve, the object is not a workload, its
            class rejects ``spec.args``, or its metric attributes are invalid.
    """
    return _load_cached(spec.model_dump_json())


def smallest_knobs(model: ModelSpace) -> dict[str, Any]:
    """Every model knob at its least value (the first choice, for choices without order)."""
    return {name: knob.smallest() for name, knob in model.knobs.items()}


def _check_signature(workload: LoadedWorkload, model: ModelSpace) -> None:
    """The space's knobs are what ``build_model`` takes: none unknown, none missing."""
    try:
        signature = inspect.signature(workload.obj.build_model)
    except ValueError:  # no signature to read: the build decides
        return
    params = signature.parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    named = [
        n
        for n, p in params.items()
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    ]
    if not takes_any:
        for name in model.knobs:
            if name not in named:
                takes = ", ".join(named) or "no knobs"
                raise WorkloadError(
                    f"model.{name}: build_model() of {workload.spec.label} has no such "
                    f"argument (it takes: {takes})"
                )
    for name in named:
        if params[name].default is inspect.Parameter.empty and name not in model.knobs:
            raise WorkloadError(
                f"model: build_model() of {workload.spec.label} needs the knob {name}, which "
                "the space does not give (add it under model:)"
            )


def _build_smallest(workload: LoadedWorkload, knobs: dict[str, Any]) -> None:
    """Build the model with ``knobs`` on the meta device (no memory, no compute); a model
    that cannot be built there (its constructor reads tensor values) is built on the CPU."""
    shown = ", ".join(f"{k}={v!r}" for k, v in knobs.items())
    try:
        with torch.device("meta"):
            workload.build_model(knobs)
        return
    except Exception:  # retried on the CPU, whose error is the one reported
        pass
    try:
        workload.build_model(knobs)
    except AutotuneError:
        raise  # a built-in's data error says what is wrong on its own
    except Exception as e:
        raise WorkloadError(
            f"model: build_model({shown}) of {workload.spec.label} failed with the smallest "
            f"knobs: {_last_line(e)}"
        ) from e


def _check_datasets(workload: LoadedWorkload) -> None:
    """``datasets()`` returns two non-empty datasets whose items are ``(input, target)``."""
    label = workload.spec.label
    try:
        train, validation = workload.datasets()
        sizes = [len(train), len(validation)]  # type: ignore[arg-type]
        if min(sizes) < 1:
            raise WorkloadError(
                f"workload: datasets() of {label} gave {sizes[0]} training and {sizes[1]} "
                "validation items; both need at least one"
            )
        item = train[0]  # after the sizes: an empty set has no item 0
    except AutotuneError:
        raise
    except Exception as e:
        raise WorkloadError(f"workload: datasets() of {label} failed: {_last_line(e)}") from e
    if not isinstance(item, (tuple, list)) or len(item) != 2:
        raise WorkloadError(
            f"workload: datasets() of {label}: an item must be an (input, target) pair, "
            f"got a {type(item).__name__}"
        )


def check_workload(spec: WorkloadSpec, model: ModelSpace) -> LoadedWorkload:
    """Check a space's workload before its study opens, without training: the reference
    resolves to a workload, ``build_model`` takes exactly the space's knobs, the model
    builds with the smallest knobs (:func:`smallest_knobs`), and ``datasets()`` gives two
    non-empty datasets of ``(input, target)`` items. For the ``loop``, ``hf_trainer`` and
    ``lightning`` doors: the framework is installed, and the reference resolves to a function
    that takes a trial handle and ``workload_args`` (its model and data exist only inside it).

    Returns:
        The loaded workload (its metric name and direction set the study's objectives).

    Raises:
        WorkloadError: which of these fails, naming the key (``workload``, ``model.KNOB``).
        DataError: a built-in workload's data set is missing or corrupt.
    """
    workload = load_workload(spec)
    if spec.door != "workload":
        return workload  # its model and data exist only inside the user's function
    _check_signature(workload, model)
    _check_datasets(workload)
    _build_smallest(workload, smallest_knobs(model))
    return workload
