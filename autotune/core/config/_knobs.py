"""Knob parameter types: the values a knob may take, and how Optuna is asked for one.

A knob is written as a single value (fixed), a list or ``{choices: [...]}`` (categorical), or
``{low, high}`` with optional ``step`` and ``log`` (a range). :func:`parse_model_knob` reads a
model knob by its form; the tuner's knobs have their own vocabularies (precision, memory
format, compile mode).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, Generic, Literal, Self, TypeVar

from pydantic import Field, ValidationError, field_validator, model_validator

from autotune.core.config._base import Strict

Precision = Literal["fp32", "tf32", "fp16", "bf16"]
MemoryFormat = Literal["contiguous", "channels_last"]
CompileMode = Literal["none", "default", "reduce-overhead", "max-autotune"]
#: The optimizer's implementation (PyTorch docs, torch.optim, "Algorithms": for-loop, foreach,
#: fused); ``default`` is PyTorch's choice when neither ``foreach`` nor ``fused`` is given:
#: foreach where every parameter is on CUDA, the for-loop elsewhere.
OptimizerImpl = Literal["default", "for_loop", "foreach", "fused"]
#: How several ranks hold the model: DDP (a full replica each) or FSDP2's ``fully_shard``
#: (parameters, gradients and optimizer state sharded: ZeRO stage 3).
DataParallel = Literal["ddp", "fsdp"]

#: The choices of the tuner's precision, memory format and compile mode knobs, in order (the
#: values of :data:`Precision`, :data:`MemoryFormat` and :data:`CompileMode`).
PRECISIONS: tuple[str, ...] = ("fp32", "tf32", "fp16", "bf16")
MEMORY_FORMATS: tuple[str, ...] = ("contiguous", "channels_last")
COMPILE_MODES: tuple[str, ...] = ("none", "default", "reduce-overhead", "max-autotune")
OPTIMIZER_IMPLS: tuple[str, ...] = ("default", "for_loop", "foreach", "fused")
DATA_PARALLELS: tuple[str, ...] = ("ddp", "fsdp")

#: The tuner's own knobs (Optuna parameter names), which apply to every workload.
TUNER_KNOBS: tuple[str, ...] = (
    "batch_size",
    "precision",
    "memory_format",
    "compile_mode",
    "num_workers",
    "gpu_count",
)
#: The knobs of PyTorch's Performance Tuning Guide beyond the first six: searched only where a
#: space gives them more than one value (a space that leaves them out trains at PyTorch's
#: defaults, :data:`GUIDE_KNOB_DEFAULTS`, and its studies are the same as before they
#: existed). Each changes speed and memory, not what a trial learns (outside the math key).
GUIDE_KNOBS: tuple[str, ...] = (
    "optimizer_impl",
    "activation_checkpointing",
    "cpu_threads",
    "cudnn_benchmark",
    "cuda_expandable_segments",
    "data_parallel",
)
#: Every knob that is not the model's: the tuner's and the guide's (a change of these alone
#: keeps the model: the same-model answer).
SYSTEM_KNOBS: tuple[str, ...] = (*TUNER_KNOBS, *GUIDE_KNOBS)
#: PyTorch's default of each guide knob (``cpu_threads=0``: PyTorch's own thread count, which
#: a trial shares among its ranks and DataLoader workers).
GUIDE_KNOB_DEFAULTS: dict[str, Any] = {
    "optimizer_impl": "default",
    "activation_checkpointing": False,
    "cpu_threads": 0,
    "cudnn_benchmark": False,
    "cuda_expandable_segments": False,
    "data_parallel": "ddp",
}

T = TypeVar("T")


def _as_param_dict(value: Any) -> Any:
    """Normalize a knob written as a scalar or a list into ``{"choices": [...]}``."""
    if isinstance(value, dict):
        return value
    if isinstance(value, (list, tuple)):
        return {"choices": list(value)}
    return {"choices": [value]}


class IntParam(Strict):
    """An integer knob: ``choices`` or the range ``[low, high]`` (both ends included).

    Raises:
        pydantic.ValidationError: when both or neither form is given, ``choices`` is empty or
            has duplicates, ``low > high``, ``step < 1``, or ``log`` is combined with ``step``.
    """

    choices: list[int] | None = None
    low: int | None = None
    high: int | None = None
    step: int = 1
    log: bool = False

    @model_validator(mode="before")
    @classmethod
    def _normalize(cls, value: Any) -> Any:
        return _as_param_dict(value)

    @model_validator(mode="after")
    def _check(self) -> IntParam:
        if self.choices is not None:
            if self.low is not None or self.high is not None:
                raise ValueError("give either `choices` or `low`/`high`, not both")
            _check_choices(self.choices)
            return self
        if self.low is None or self.high is None:
            raise ValueError("give `choices` or both `low` and `high`")
        if self.low > self.high:
            raise ValueError(f"`low <= high` must hold, but got low={self.low}, high={self.high}")
        if self.step < 1:
            raise ValueError(f"`step >= 1` must hold, but got step={self.step}")
        if self.log and (self.step != 1 or self.low < 1):
            raise ValueError("`log: true` needs step=1 and low >= 1")
        return self

    def values(self) -> list[int]:
        """All values the knob can take, in order."""
        if self.choices is not None:
            return list(self.choices)
        assert self.low is not None and self.high is not None
        return list(range(self.low, self.high + 1, self.step))

    def suggest(self, trial: Any, name: str) -> int:
        """Ask an Optuna trial for this knob's value under ``name``."""
        if self.choices is not None:
            return int(trial.suggest_categorical(name, self.choices))
        return int(trial.suggest_int(name, self.low, self.high, step=self.step, log=self.log))

    def restricted(self, allowed: Iterable[int]) -> IntParam:
        """This knob keeping only the values in ``allowed`` (always as ``choices``)."""
        keep = set(allowed)
        return IntParam(choices=[v for v in self.values() if v in keep])

    def contains(self, value: Any) -> bool:
        """Whether ``value`` is one of the knob's values."""
        return value in self.values()

    def including(self, value: Any) -> IntParam:
        """This knob with ``value`` among its values (itself when it is one already): a
        range in steps of 1 widens to reach it, else ``value`` joins the choices (sorted).

        Raises:
            ValueError: ``value`` is not an integer.
        """
        if not _is_int(value):
            raise ValueError(f"must be an integer, but got {value!r}")
        if self.contains(value):
            return self
        if self.choices is None and self.step == 1 and (not self.log or value >= 1):
            assert self.low is not None and self.high is not None
            return IntParam(low=min(self.low, value), high=max(self.high, value), log=self.log)
        return IntParam(choices=sorted([*self.values(), value]))

    def smallest(self) -> int:
        """The least value (the model's smallest size, when this is a size knob)."""
        return min(self.values())

    def largest(self) -> int:
        """The greatest value."""
        return max(self.values())


Scalar = bool | int | float | str


class FloatParam(Strict):
    """A real-valued model knob: the range ``[low, high]``, optionally on a log scale or in
    steps of ``step`` (Optuna's ``suggest_float``).

    Raises:
        pydantic.ValidationError: ``low > high``, ``log`` with ``low <= 0``, or ``log`` with
            ``step``.
    """

    low: float
    high: float
    step: float | None = Field(None, gt=0)
    log: bool = False

    @model_validator(mode="after")
    def _check(self) -> FloatParam:
        if self.low > self.high:
            raise ValueError(f"`low <= high` must hold, but got low={self.low}, high={self.high}")
        if self.log and (self.low <= 0 or self.step is not None):
            raise ValueError("`log: true` needs low > 0 and no step")
        return self

    def suggest(self, trial: Any, name: str) -> float:
        """Ask an Optuna trial for this knob's value under ``name``."""
        return float(trial.suggest_float(name, self.low, self.high, step=self.step, log=self.log))

    def contains(self, value: Any) -> bool:
        """Whether ``value`` lies in the range."""
        return isinstance(value, (int, float)) and self.low <= value <= self.high

    def including(self, value: Any) -> FloatParam:
        """This range widened to reach ``value`` (itself when it holds it already).

        Raises:
            ValueError: ``value`` is not a number, or not above 0 on a log scale.
        """
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise ValueError(f"must be a number, but got {value!r}")
        if self.contains(value):
            return self
        if self.log and value <= 0:
            raise ValueError(f"must be > 0 on this log-scale knob, but got {value!r}")
        return self.model_copy(
            update={"low": min(self.low, float(value)), "high": max(self.high, float(value))}
        )

    def smallest(self) -> float:
        """The least value."""
        return self.low

    def largest(self) -> float:
        """The greatest value."""
        return self.high

    def middle(self) -> float:
        """The middle of the range: the geometric mean on a log scale, else the midpoint."""
        if self.log:
            return math.sqrt(self.low * self.high)
        return (self.low + self.high) / 2


def format_knob_value(value: Any) -> str:
    """A knob's value for display: a real number to 3 significant digits (``0.163``), any
    other value as written."""
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_model_knob(value: Any) -> ModelKnob:
    """Read one knob under ``model:`` by its form.

    - ``{low, high, ...}``: a real range (:class:`FloatParam`) when ``low``, ``high`` or
      ``step`` is written as a float (``0.0``, ``1.0e-4``), else an integer range.
    - a list, ``{choices: [...]}`` or a single value: integer choices (:class:`IntParam`) when
      every value is an integer, else :class:`ChoiceParam`.

    Raises:
        pydantic.ValidationError: the form's rules (see each class).
    """
    if isinstance(value, dict) and ("low" in value or "high" in value):
        bounds = [value.get(k) for k in ("low", "high", "step")]
        if any(isinstance(b, float) for b in bounds):
            return FloatParam.model_validate(value)
        return IntParam.model_validate(value)
    normalized = _as_param_dict(value)
    choices = normalized.get("choices") if isinstance(normalized, dict) else None
    if isinstance(choices, list) and choices and all(_is_int(c) for c in choices):
        return IntParam.model_validate(normalized)
    return ChoiceParam.model_validate(normalized)


class CategoricalParam(Strict, Generic[T]):
    """A categorical knob over a fixed vocabulary (precision, memory format, compile mode).

    Raises:
        pydantic.ValidationError: when ``choices`` is empty, has duplicates, or holds a value
            outside the vocabulary.
    """

    choices: list[T]

    @model_validator(mode="before")
    @classmethod
    def _normalize(cls, value: Any) -> Any:
        return _as_param_dict(value)

    @field_validator("choices")
    @classmethod
    def _check(cls, choices: list[T]) -> list[T]:
        _check_choices(choices)
        return choices

    def values(self) -> list[T]:
        """All values the knob can take, in order."""
        return list(self.choices)

    def suggest(self, trial: Any, name: str) -> T:
        """Ask an Optuna trial for this knob's value under ``name``."""
        return trial.suggest_categorical(name, self.choices)

    def contains(self, value: Any) -> bool:
        """Whether ``value`` is one of the choices."""
        return value in self.choices

    def including(self, value: Any) -> Self:
        """This knob with ``value`` appended to its choices (itself when it is one already).

        Raises:
            ValueError: ``value`` is outside the knob's vocabulary (say precision ``fp8``);
                the message lists the vocabulary.
        """
        if self.contains(value):
            return self
        try:
            return type(self).model_validate({"choices": [*self.choices, value]})
        except ValidationError as e:
            raise ValueError(e.errors()[0]["msg"].removeprefix("Value error, ")) from None

    def restricted(self, allowed: Iterable[T]) -> CategoricalParam[T]:
        """This knob keeping only the values in ``allowed``."""
        keep = set(allowed)
        return self.model_copy(update={"choices": [v for v in self.choices if v in keep]})


class ChoiceParam(CategoricalParam[Scalar]):
    """A model knob over a list of values of any scalar type (strings, booleans, floats, or
    integers mixed with them): ``activation: [relu, gelu]``, ``bias: [true, false]``.

    Raises:
        pydantic.ValidationError: when ``choices`` is empty or has duplicates.
    """

    def smallest(self) -> Scalar:
        """The first choice (choices have no order autotune could know)."""
        return self.choices[0]

    def largest(self) -> Scalar:
        """The last choice."""
        return self.choices[-1]


#: A model knob: an integer (range or choices), a real range, or choices of any scalars.
ModelKnob = IntParam | FloatParam | ChoiceParam


class PrecisionParam(CategoricalParam[Precision]):
    """Precision knob: ``fp32``, ``tf32``, ``fp16``, ``bf16`` (a named class, so it pickles)."""


class MemoryFormatParam(CategoricalParam[MemoryFormat]):
    """Memory format knob: ``contiguous``, ``channels_last``."""


class CompileModeParam(CategoricalParam[CompileMode]):
    """torch.compile mode knob: ``none``, ``default``, ``reduce-overhead``, ``max-autotune``."""


class OptimizerImplParam(CategoricalParam[OptimizerImpl]):
    """The optimizer's implementation: ``default``, ``for_loop``, ``foreach``, ``fused``."""


class DataParallelParam(CategoricalParam[DataParallel]):
    """How several ranks hold the model: ``ddp``, ``fsdp``."""


class SwitchParam(CategoricalParam[bool]):
    """An on/off knob: ``[false, true]`` (activation checkpointing, cuDNN autotuning, the CUDA
    allocator's expandable segments)."""


def _check_choices(choices: Sequence[Any]) -> None:
    if not choices:
        raise ValueError("`choices` must not be empty")
    # Typed: 1 and true are two choices (1 == True in Python).
    if len({(type(c), c) for c in choices}) != len(choices):
        raise ValueError(f"`choices` must be unique, but got {list(choices)}")
