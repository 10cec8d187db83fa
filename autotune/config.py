"""Search spaces, run settings and ``key=value`` overrides, validated with pydantic.

A search space is a YAML file (``search_spaces/cnn_small.yaml``) that lists, for each knob,
the values the study may try, plus the fixed training settings. A knob is written as

- a single value: fixed (``precision: bf16``);
- a list, or ``{choices: [...]}``: categorical (``batch_size: [32, 64, 128]``);
- ``{low: 1, high: 4}`` with optional ``step`` and ``log``: an integer range.

Overrides use Hydra's ``key=value`` form (``train.epochs=2``, ``precision=[fp32,bf16]``);
OmegaConf parses each value. Every error is a :class:`~autotune.exceptions.ConfigError`
whose one-line message names the file or override, the key and the rule.
"""

from __future__ import annotations

import copy
import importlib.resources
import math
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

import yaml
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException
from pydantic import (
    BaseModel,
    ByteSize,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from autotune.exceptions import ConfigError

__all__ = [
    "BUILTIN_FAMILIES",
    "BUILTIN_WORKLOAD_REF",
    "COMPILE_MODES",
    "DEFAULT_LR_SCALING",
    "DEFAULT_STORAGE_URL",
    "LR_SCALING_RULES",
    "MEMORY_FORMATS",
    "PRECISIONS",
    "TUNER_KNOBS",
    "CategoricalParam",
    "ChoiceParam",
    "CompileModeParam",
    "Constraints",
    "DataSettings",
    "FloatParam",
    "IntParam",
    "MeasureSettings",
    "MemoryFormatParam",
    "MockSettings",
    "ModelKnob",
    "ModelSpace",
    "PrecisionParam",
    "RunConfig",
    "SearchSpace",
    "TrainSettings",
    "TrialConfig",
    "TrialSettings",
    "VerifyRequest",
    "VerifySettings",
    "WorkloadSpec",
    "available_spaces",
    "format_knob_value",
    "load_run_config",
    "load_space",
    "load_verify_request",
    "parse_model_knob",
    "scaled_lr",
]

Precision = Literal["fp32", "tf32", "fp16", "bf16"]
MemoryFormat = Literal["contiguous", "channels_last"]
CompileMode = Literal["none", "default", "reduce-overhead", "max-autotune"]
DeviceName = Literal["auto", "cpu", "cuda", "mock"]
SamplerName = Literal["nsga2", "tpe", "gp", "random"]
DataName = Literal["digits", "mnist", "fashion_mnist", "synthetic"]
OptimizerName = Literal["adamw", "sgd"]
LrScaling = Literal["none", "linear", "sqrt"]
LrSchedule = Literal["constant", "cosine"]

PRECISIONS: tuple[str, ...] = ("fp32", "tf32", "fp16", "bf16")
MEMORY_FORMATS: tuple[str, ...] = ("contiguous", "channels_last")
COMPILE_MODES: tuple[str, ...] = ("none", "default", "reduce-overhead", "max-autotune")
LR_SCALING_RULES: tuple[str, ...] = ("none", "linear", "sqrt")
#: The learning-rate scaling rule of each optimizer when ``train.lr_scaling`` is not set (see
#: :func:`scaled_lr` for the sources): linear for SGD, the square root for Adam(W).
DEFAULT_LR_SCALING: dict[str, LrScaling] = {"adamw": "sqrt", "sgd": "linear"}

#: Where studies live unless ``storage=`` says otherwise (relative to the working directory).
DEFAULT_STORAGE_URL = "sqlite:///storage/autotune.db"

#: Keys of a run that are not part of the search space.
_RUN_KEYS = (
    "space",
    "device",
    "study",
    "storage",
    "sampler",
    "seed",
    "trial",
    "workers",
    "mock",
    "warm_start",
    "allow_hardware_change",
    "verify",
)
#: ``key=value`` shorthands: ``data=mnist`` selects the data set by name, as Hydra's groups do.
_ALIASES = {"data": "data.name"}

T = TypeVar("T")


class _Strict(BaseModel):
    """Base for every settings model: unknown keys refused, instances immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def _as_param_dict(value: Any) -> Any:
    """Normalize a knob written as a scalar or a list into ``{"choices": [...]}``."""
    if isinstance(value, dict):
        return value
    if isinstance(value, (list, tuple)):
        return {"choices": list(value)}
    return {"choices": [value]}


class IntParam(_Strict):
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

    def smallest(self) -> int:
        """The least value (the model's smallest size, when this is a size knob)."""
        return min(self.values())

    def largest(self) -> int:
        """The greatest value."""
        return max(self.values())


Scalar = bool | int | float | str


class FloatParam(_Strict):
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


class CategoricalParam(_Strict, Generic[T]):
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


def _check_choices(choices: Sequence[Any]) -> None:
    if not choices:
        raise ValueError("`choices` must not be empty")
    # Typed: 1 and true are two choices (1 == True in Python).
    if len({(type(c), c) for c in choices}) != len(choices):
        raise ValueError(f"`choices` must be unique, but got {list(choices)}")


#: The tuner's own knobs (Optuna parameter names), which apply to every workload.
TUNER_KNOBS: tuple[str, ...] = (
    "batch_size",
    "precision",
    "memory_format",
    "compile_mode",
    "num_workers",
    "gpu_count",
)
#: Names a model knob may not take: the tuner's knobs, and the keys of a trial configuration.
_RESERVED_KNOB_NAMES = frozenset(TUNER_KNOBS) | {"family", "model", "workload", "seed", "device"}
#: The built-in workloads' knobs, by family: blocks (cnn: conv blocks; mlp: hidden layers) and
#: width (cnn: base channels; mlp: hidden units).
BUILTIN_FAMILIES: tuple[str, ...] = ("cnn", "mlp")


class ModelSpace(BaseModel):
    """The knobs of the model, passed to the workload's ``build_model(**knobs)``.

    Written in YAML as a mapping from knob name to knob (:func:`parse_model_knob`); for the
    built-in workloads also ``family: cnn | mlp``, whose knobs are ``depth`` (conv blocks or
    hidden layers) and ``width`` (base channels or hidden units). The knob names are the
    workload's own; they become Optuna parameter names, so they may not repeat a tuner knob
    (``batch_size``, ``precision``, ...).

    Attributes:
        family: the built-in workload (``cnn`` or ``mlp``), or None for a space's own
            ``workload:``.
        knobs: the knobs by name, in the order written.
    """

    model_config = ConfigDict(frozen=True)

    family: Literal["cnn", "mlp"] | None = None
    knobs: dict[str, ModelKnob] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _split(cls, raw: Any) -> Any:
        """``{family: cnn, depth: ..., width: ...}`` -> ``{family, knobs: {depth, width}}``."""
        if not isinstance(raw, dict) or "knobs" in raw:
            return raw
        knobs = {name: value for name, value in raw.items() if name != "family"}
        return {"family": raw.get("family"), "knobs": knobs}

    @field_validator("knobs", mode="before")
    @classmethod
    def _parse_knobs(cls, raw: Any) -> Any:
        if not isinstance(raw, dict):
            return raw
        parsed: dict[str, Any] = {}
        for name, value in raw.items():
            if not isinstance(name, str) or not name.isidentifier():
                raise ValueError(f"knob name {name!r} must be a Python identifier")
            if name in _RESERVED_KNOB_NAMES:
                raise ValueError(
                    f"knob {name!r}: the name is taken by autotune (tuner knobs and trial keys: "
                    f"{', '.join(sorted(_RESERVED_KNOB_NAMES))})"
                )
            if isinstance(value, (IntParam, FloatParam, ChoiceParam)):
                parsed[name] = value
                continue
            try:
                parsed[name] = parse_model_knob(value)
            except ValidationError as e:
                first = e.errors()[0]
                rule = first["msg"].removeprefix("Value error, ")
                where = ".".join(str(p) for p in first["loc"])
                raise ValueError(f"{name}{'.' + where if where else ''}: {rule}") from None
        return parsed

    def check_builtin_sizes(self) -> None:
        """The built-in families' knobs: ``depth`` and ``width``, integers >= 1.

        Raises:
            ValueError: a knob missing or out of range (the message starts with its name).
        """
        for name in ("depth", "width"):
            knob = self.knobs.get(name)
            if knob is None:
                raise ValueError(f"model.{name}: family {self.family} needs this knob")
            if not isinstance(knob, IntParam) or min(knob.values()) < 1:
                raise ValueError(f"model.{name}: every value must be an integer >= 1")

    @model_serializer(mode="wrap")
    def _flat(self, handler: Any) -> dict[str, Any]:
        """Dump as written: ``{family, knob: ...}`` (the form studies record)."""
        dumped = handler(self)
        flat: dict[str, Any] = {} if self.family is None else {"family": self.family}
        flat.update(dumped.get("knobs", {}))
        return flat


def scaled_lr(lr: float, rule: str, global_batch: int, reference_batch: int) -> float:
    """The learning rate for a global batch of ``global_batch`` samples, when ``lr`` is the one
    for ``reference_batch`` samples.

    A fixed budget of epochs gives a larger batch fewer optimizer steps; at the same learning
    rate it then trains less far. The rules:

    - ``linear``: ``lr * global_batch / reference_batch``, the linear scaling rule for SGD
      (Goyal et al., "Accurate, Large Minibatch SGD: Training ImageNet in 1 Hour", 2017,
      arXiv:1706.02677, section 2.1: "When the minibatch size is multiplied by k, multiply the
      learning rate by k"; with a gradual warm-up, section 2.2).
    - ``sqrt``: ``lr * sqrt(global_batch / reference_batch)``, the learning-rate part of the
      square-root scaling rule for Adam and RMSprop (Malladi et al., "On the SDEs and Scaling
      Rules for Adaptive Gradient Algorithms", NeurIPS 2022, arXiv:2205.10287; the rule also
      adjusts the betas and epsilon, which are kept here).
    - ``none``: ``lr``.

    Args:
        lr: the learning rate at the reference batch.
        rule: ``none``, ``linear`` or ``sqrt``.
        global_batch: samples per optimizer step over all ranks (batch size x GPU count).
        reference_batch: the global batch at which ``lr`` holds.

    Raises:
        ValueError: an unknown rule, or a batch below 1.
    """
    if global_batch < 1 or reference_batch < 1:
        raise ValueError(
            f"batches must be >= 1, but got global_batch={global_batch}, "
            f"reference_batch={reference_batch}"
        )
    ratio = global_batch / reference_batch
    if rule == "linear":
        return lr * ratio
    if rule == "sqrt":
        return lr * math.sqrt(ratio)
    if rule == "none":
        return lr
    known = ", ".join(LR_SCALING_RULES)
    raise ValueError(f"unknown learning-rate scaling rule {rule!r} (known: {known})")


class TrainSettings(_Strict):
    """Fixed training settings shared by every trial of a study.

    ``lr`` is the learning rate at the global batch ``reference_batch_size``; a trial with
    another global batch trains at ``lr`` scaled by ``lr_scaling`` (:func:`scaled_lr`), after a
    linear warm-up over ``lr_warmup_fraction`` of its optimizer steps, so that every batch size
    gets a fair share of the fixed epoch budget. ``lr_scaling=none`` trains every trial at
    ``lr`` without warm-up. After the warm-up, ``lr_schedule`` decays the learning rate to 0
    along a cosine (default) or keeps it constant.
    """

    optimizer: OptimizerName = "adamw"
    lr: float = Field(1.0e-3, gt=0)  # learning rate at the reference batch
    weight_decay: float = Field(0.0, ge=0)
    momentum: float = Field(0.9, ge=0, lt=1)  # SGD only
    epochs: int = Field(5, ge=1)  # passes over the training split (the budget)
    max_steps: int | None = Field(None, ge=1)  # optional cap on optimizer steps per trial
    warmup_steps: int = Field(5, ge=0)  # untimed steps before the timed windows
    # How lr follows the global batch: none, linear, sqrt; unset: DEFAULT_LR_SCALING's rule
    # for the optimizer (sqrt for adamw, linear for sgd).
    lr_scaling: LrScaling | None = None
    # The global batch (batch_size x gpu_count) at which `lr` holds; unset: the study's
    # baseline trial's (autotune.baseline), filled in for each trial by the study.
    reference_batch_size: int | None = Field(None, ge=1)
    # Share of a trial's optimizer steps over which the learning rate rises linearly to its
    # peak when scaling (Goyal et al. 2017 warm up for 5 of 90 epochs, 5.6 %).
    lr_warmup_fraction: float = Field(0.05, ge=0, lt=1)
    # After the warm-up: cosine (decay to 0 at the last step) or constant (stay at the peak).
    # The built-in CNN on MNIST: 98.4 % with cosine, 98.05 % constant (5 seeds, README).
    lr_schedule: LrSchedule = "cosine"

    @property
    def lr_scaling_rule(self) -> LrScaling:
        """The scaling rule trials use: ``lr_scaling``, or the optimizer's default."""
        return self.lr_scaling or DEFAULT_LR_SCALING[self.optimizer]

    def peak_lr(self, global_batch: int) -> float:
        """The learning rate after warm-up of a trial whose global batch is ``global_batch``.

        Without a ``reference_batch_size`` (a configuration built outside a study), the trial's
        own global batch is the reference: it trains at ``lr``.
        """
        reference = self.reference_batch_size or global_batch
        return scaled_lr(self.lr, self.lr_scaling_rule, global_batch, reference)

    def lr_warmup_steps(self, total_steps: int) -> int:
        """Optimizer steps of the linear warm-up in a trial of ``total_steps`` steps: the
        ``lr_warmup_fraction`` share rounded up, or 0 when ``lr_scaling`` is ``none``."""
        if self.lr_scaling_rule == "none":
            return 0
        # round() first, so that 0.05 * 60 = 3.0000000000000004 counts as 3, not 4.
        return min(total_steps, math.ceil(round(self.lr_warmup_fraction * total_steps, 9)))


class DataSettings(_Strict):
    """Which data set a study trains on and how it is split."""

    name: DataName = "digits"
    root: str | None = None  # directory holding the IDX files (mnist, fashion_mnist)
    val_fraction: float = Field(0.2, gt=0, lt=1)  # held-out validation share
    synthetic_samples: int = Field(4096, ge=16)  # size of the `synthetic` data set


class Constraints(_Strict):
    """Limits a trial must meet to be feasible (infeasible trials never reach the front).

    ``max_memory_bytes`` accepts an integer or a size such as ``8GiB`` or ``512MB``
    (pydantic's ``ByteSize``); ``min_accuracy`` is a validation accuracy in [0, 1].
    """

    max_memory_bytes: ByteSize | None = None
    min_accuracy: float | None = Field(None, ge=0, le=1)


class MeasureSettings(_Strict):
    """Timing discipline: how the timed steps are cut into windows."""

    windows: int = Field(5, ge=1)  # timed windows; throughput is their median
    min_window_steps: int = Field(2, ge=1)  # fewer windows are used if steps run short
    # The timed windows cover at least this many seconds: when the budget's windows are
    # shorter, timing-only steps after the evaluation make up the rest (accuracy unaffected).
    # Off by default: on the 2-core CPU of docs/benchmarks.md, 2 s did not narrow the spread
    # between fresh processes (it is per process, not per window) and cost 2 s per trial.
    min_timed_s: float = Field(0.0, ge=0)


#: The import reference of the built-in workloads (``model.family: cnn | mlp``).
BUILTIN_WORKLOAD_REF = "autotune.workloads.builtin:ImageClassifier"
#: Keys only the built-in workloads read; a space with its own ``workload:`` may not set them.
_BUILTIN_ONLY_KEYS = ("data",)


class WorkloadSpec(_Strict):
    """A workload by reference, as a trial process resolves it (:mod:`autotune.workloads`).

    Attributes:
        ref: ``/absolute/path/file.py:NAME`` or ``package.module:NAME``.
        args: keyword arguments for NAME when it is a class or factory (JSON values).
    """

    ref: str = Field(min_length=3)
    args: dict[str, Any] = Field(default_factory=dict)

    @field_validator("ref")
    @classmethod
    def _form(cls, ref: str) -> str:
        path, sep, name = ref.rpartition(":")
        if not sep or not path or not name.isidentifier():
            raise ValueError(
                f"{ref!r} must be FILE.py:NAME or package.module:NAME (NAME a Python identifier)"
            )
        return ref

    @property
    def is_builtin(self) -> bool:
        """True for autotune's own cnn/mlp workloads."""
        return self.ref == BUILTIN_WORKLOAD_REF

    @property
    def label(self) -> str:
        """A short name for messages: ``cnn`` for a built-in, else ``file.py:NAME``."""
        if self.is_builtin:
            return str(self.args.get("family", "builtin"))
        path, _, name = self.ref.rpartition(":")
        return f"{Path(path).name if path.endswith('.py') else path}:{name}"


class SearchSpace(_Strict):
    """One combined search space: the model's knobs, batch, precision, memory format, compile
    mode, DataLoader workers and GPU count, plus the fixed training settings.

    The model is a built-in workload (``model.family: cnn | mlp`` on ``data:``) or the
    space's own ``workload: FILE.py:NAME | package.module:NAME`` (a relative FILE is relative
    to the space file; :func:`load_space` makes it absolute), with ``workload_args`` for NAME
    when it is a class or factory. Load it with :func:`load_space`; the file format is
    documented in the README.
    """

    name: str = Field(min_length=1)
    description: str = ""
    workload: str | None = None
    workload_args: dict[str, Any] = Field(default_factory=dict)
    model: ModelSpace = ModelSpace()
    batch_size: IntParam
    precision: PrecisionParam = PrecisionParam(choices=["fp32"])
    memory_format: MemoryFormatParam = MemoryFormatParam(choices=["contiguous"])
    compile_mode: CompileModeParam = CompileModeParam(choices=["none"])
    num_workers: IntParam = IntParam(choices=[0])  # DataLoader workers
    gpu_count: IntParam = IntParam(choices=[1])  # DDP world size
    train: TrainSettings = TrainSettings()
    data: DataSettings = DataSettings()  # the built-in workloads' data set
    measure: MeasureSettings = MeasureSettings()
    constraints: Constraints = Constraints()

    @model_validator(mode="after")
    def _ranges(self) -> SearchSpace:
        if min(self.batch_size.values()) < 1:
            raise ValueError("batch_size: every value must be >= 1")
        if min(self.num_workers.values()) < 0:
            raise ValueError("num_workers: every value must be >= 0")
        if min(self.gpu_count.values()) < 1:
            raise ValueError("gpu_count: every value must be >= 1")
        return self

    @model_validator(mode="after")
    def _one_workload(self) -> SearchSpace:
        if self.workload is None:
            if self.model.family is None:
                raise ValueError(
                    "model.family: give a built-in family (cnn, mlp), or name your own model "
                    "with `workload: FILE.py:NAME` or `workload: package.module:NAME`"
                )
            if self.workload_args:
                raise ValueError("workload_args: only with `workload:` (a space's own model)")
            self.model.check_builtin_sizes()
            return self
        if self.model.family is not None:
            raise ValueError(
                f"model.family: a built-in family cannot be combined with "
                f"`workload: {self.workload}`; remove one of them"
            )
        for key in _BUILTIN_ONLY_KEYS:
            if key in self.model_fields_set:
                raise ValueError(
                    f"{key}: applies to the built-in workloads (model.family) only; "
                    f"the datasets of `workload: {self.workload}` come from its datasets()"
                )
        try:
            WorkloadSpec(ref=self.workload)  # the reference's form
        except ValidationError as e:
            rule = e.errors()[0]["msg"].removeprefix("Value error, ")
            raise ValueError(f"workload: {rule}") from None
        return self

    def workload_spec(self) -> WorkloadSpec:
        """The workload every trial of this space builds its model from."""
        if self.workload is None:
            return WorkloadSpec(
                ref=BUILTIN_WORKLOAD_REF,
                args={"family": self.model.family, "data": self.data.model_dump()},
            )
        return WorkloadSpec(ref=self.workload, args=dict(self.workload_args))

    def knobs(self) -> dict[str, ModelKnob | CategoricalParam[Any]]:
        """The searchable knobs by Optuna parameter name: the model's, in the order written,
        then the tuner's (:data:`TUNER_KNOBS`)."""
        return {
            **self.model.knobs,
            "batch_size": self.batch_size,
            "precision": self.precision,
            "memory_format": self.memory_format,
            "compile_mode": self.compile_mode,
            "num_workers": self.num_workers,
            "gpu_count": self.gpu_count,
        }


class TrialSettings(_Strict):
    """How each trial process is run."""

    timeout_s: float = Field(600.0, gt=0)  # wall-clock limit of one trial, compile included
    # Optuna heartbeat of a running trial; a trial silent for 3 beats (its process was killed)
    # is marked failed and its configuration retried once.
    heartbeat_s: int = Field(10, ge=1)


MockFault = Literal["none", "oom", "error", "crash", "hang"]
#: Simulated machines of the mock device (autotune.simulated.PROFILE_NAMES).
MockProfileName = Literal["default", "h100", "a100", "v100", "t4", "cpu"]


class MockSettings(_Strict):
    """Settings of the simulated ``mock`` device.

    ``fault`` makes the trials numbered in ``fault_trials`` (all trials when empty) fail on
    purpose, to exercise failure handling: ``oom`` (out of memory), ``error`` (an exception),
    ``crash`` (the process dies by SIGSEGV) or ``hang`` (never returns; see trial.timeout_s).
    """

    fault: MockFault = "none"
    fault_trials: list[int] = Field(default_factory=list)
    # The simulated machine: default (a small 16 MiB GPU), h100 (8 GPUs), a100 (4), v100, t4,
    # or cpu (no GPU).
    profile: MockProfileName = "default"


class VerifySettings(_Strict):
    """Verification of the finalists once a study reaches its trials (``verify.*``).

    The baseline and ``candidates`` finalists are re-run in ``rounds`` interleaved rounds of
    fresh processes, each round with its own training seed; only these verified figures make
    a claim to the user (see :mod:`autotune.verification`). ``rounds=0`` turns it off; one
    round is refused, since a confidence interval needs at least two.
    """

    rounds: int = Field(3, ge=0)  # verification rounds (each: baseline + every finalist)
    candidates: int = Field(4, ge=1)  # finalists re-run besides the baseline
    # How far (accuracy points; 0.5 = 0.005) below the baseline's mean a candidate may be.
    accuracy_tolerance_pt: float = Field(0.5, ge=0, le=100)

    @field_validator("rounds")
    @classmethod
    def _not_one(cls, rounds: int) -> int:
        if rounds == 1:
            raise ValueError(
                "must be 0 (off) or >= 2: a 95 % confidence interval needs two rounds at least"
            )
        return rounds


class RunConfig(_Strict):
    """Everything one ``autotune run`` needs: the space plus where and how to run it."""

    space: SearchSpace
    space_source: str  # the file the space came from, for messages and the study record
    device: DeviceName = "auto"
    study: str  # Optuna study name; defaults to the space name
    storage: str = DEFAULT_STORAGE_URL  # any SQLAlchemy URL
    # GP: the best hypervolume after 25 and 50 trials in docs/benchmarks (search efficiency).
    sampler: SamplerName = "gp"
    seed: int = Field(0, ge=0, lt=2**31)  # sampler seed; every trial trains with it
    trial: TrialSettings = TrialSettings()
    workers: int = Field(1, ge=1)  # worker processes sharing the study on this machine
    mock: MockSettings = MockSettings()
    # Enqueue this study's Pareto-optimal configurations first (same storage).
    warm_start: str | None = None
    # Run an existing study on a machine with another hardware fingerprint.
    allow_hardware_change: bool = False
    verify: VerifySettings = VerifySettings()


#: A model knob's value in a trial (strict: an int stays an int, a bool a bool).
KnobValue = StrictBool | StrictInt | StrictFloat | StrictStr


class TrialConfig(_Strict):
    """One complete, frozen trial configuration: the knobs a sampler chose plus fixed settings.

    This is what a trial process receives; it never sees the study. The model is built by
    ``workload`` (resolved by reference in the trial process) with the ``model`` knobs as
    keyword arguments.
    """

    device: Literal["cpu", "cuda", "mock"]
    workload: WorkloadSpec
    model: dict[str, KnobValue] = Field(default_factory=dict)  # build_model(**model)
    batch_size: int = Field(ge=1)  # per rank; the global batch is batch_size * gpu_count
    precision: Precision
    memory_format: MemoryFormat
    compile_mode: CompileMode
    num_workers: int = Field(ge=0)
    gpu_count: int = Field(ge=1)  # DDP world size
    seed: int = 0  # training seed (initialization, data order); a study gives all trials its own
    train: TrainSettings = TrainSettings()
    measure: MeasureSettings = MeasureSettings()
    mock_fault: MockFault = "none"  # mock device only: fail this trial on purpose
    mock_profile: MockProfileName = "default"  # mock device only: the simulated machine

    def knobs(self) -> dict[str, Any]:
        """The searched knobs by Optuna parameter name: the model's, then the tuner's."""
        return {**self.model, **{name: getattr(self, name) for name in TUNER_KNOBS}}

    @classmethod
    def from_stored(cls, stored: dict[str, Any]) -> TrialConfig:
        """A configuration as the results tables store it (``model_dump(mode="json")``),
        also in the form written before workloads (``family``, ``depth``, ``width`` and
        ``data`` at the top level), which it converts.

        Raises:
            pydantic.ValidationError: the stored configuration is not valid.
        """
        if "family" in stored and "workload" not in stored:
            stored = dict(stored)
            family, data = stored.pop("family"), stored.pop("data", {})
            stored["model"] = {"depth": stored.pop("depth"), "width": stored.pop("width")}
            stored["workload"] = {
                "ref": BUILTIN_WORKLOAD_REF,
                "args": {"family": family, "data": DataSettings.model_validate(data).model_dump()},
            }
        return cls.model_validate(stored)

    @classmethod
    def from_knobs(cls, knobs: dict[str, Any], space: SearchSpace, **fixed: Any) -> TrialConfig:
        """The configuration of ``space`` whose knobs (model and tuner, by Optuna parameter
        name) are ``knobs``; ``fixed`` gives the other fields (``device``, ``seed``, ...) and
        may replace ``train`` and ``measure``.

        Raises:
            pydantic.ValidationError: a value of the wrong type or out of range.
        """
        model = {name: knobs[name] for name in space.model.knobs if name in knobs}
        tuner = {name: knobs[name] for name in TUNER_KNOBS if name in knobs}
        return cls.model_validate(
            {
                "workload": space.workload_spec(),
                "model": model,
                "train": space.train,
                "measure": space.measure,
                **fixed,
                **tuner,
            }
        )


# --------------------------------------------------------------------------------------------
# Loading spaces and overrides


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
        rule = "unknown key"
    # A rule of a whole model that names the key it is about ("model.family: ...") moves the
    # key into the location.
    named = re.match(r"([A-Za-z_]\w*(?:\.\w+)*): (.+)", rule)
    if named and first["type"] == "value_error":
        loc, rule = [*loc, *named.group(1).split(".")], named.group(2)
    key = prefix + ".".join(loc) if loc else (prefix.rstrip(".") or "(top level)")
    for set_key, text in overridden.items():
        # The override set this key, a key inside it, or a key a rule on this one reads.
        if key == set_key or key.startswith(set_key + ".") or set_key.startswith(key + "."):
            return f"override {text}: {key}: {rule}"
    return f"{source}: {key}: {rule}"


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
    return _load_space_with_source(space, overrides)[0]


def _space_directory(source: str) -> Path:
    """The directory a space's relative ``workload:`` file is resolved against."""
    if source.startswith("search_spaces/") and not Path(source).is_file():
        return Path(str(importlib.resources.files("autotune.search_spaces")))
    return Path(source).parent


def _absolute_workload(raw: dict[str, Any], source: str) -> None:
    """Make a ``workload: FILE.py:NAME`` reference absolute, FILE relative to the space file."""
    ref = raw.get("workload")
    if not isinstance(ref, str):
        return
    path, sep, name = ref.rpartition(":")
    if sep and path.endswith(".py") and not Path(path).expanduser().is_absolute():
        raw["workload"] = f"{(_space_directory(source) / path).resolve()}:{name}"
    elif sep and path.endswith(".py"):
        raw["workload"] = f"{Path(path).expanduser()}:{name}"


def _load_space_with_source(space: str, overrides: Sequence[str]) -> tuple[SearchSpace, str]:
    raw, source = _read_space_file(space)
    overridden: dict[str, str] = {}
    for key, value, text in _parse_overrides(overrides):
        _set_path(raw, key, value, text)
        overridden[key] = text
    _absolute_workload(raw, source)
    try:
        return SearchSpace.model_validate(raw), source
    except ValidationError as e:
        raise ConfigError(_format_validation_error(e, source, overridden)) from None


def _parse_overrides(overrides: Sequence[str]) -> list[tuple[str, Any, str]]:
    """Split ``key=value`` strings; OmegaConf parses the values (ints, floats, lists, ...)."""
    parsed = []
    for text in overrides:
        key, sep, _ = text.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"override {text!r}: expected key=value (e.g. train.epochs=2)")
        key = _ALIASES.get(key, key)
        try:
            conf = OmegaConf.from_dotlist([f"{key}={text.partition('=')[2]}"])
            value = OmegaConf.to_container(conf, resolve=True)
        except OmegaConfBaseException as e:
            raise ConfigError(f"override {text}: cannot parse: {str(e).splitlines()[0]}") from None
        for part in key.split("."):
            assert isinstance(value, dict)
            value = value[part]
        parsed.append((key, value, text))
    return parsed


def _set_path(raw: dict[str, Any], key: str, value: Any, text: str) -> None:
    """Set ``raw[a][b][c] = value`` for ``key == "a.b.c"``, creating mappings on the way."""
    *parents, leaf = key.split(".")
    node = raw
    for i, part in enumerate(parents):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            fixed = ".".join(parents[: i + 1])
            raise ConfigError(f"override {text}: {fixed} is a single value, not a group of keys")
        node = child
    node[leaf] = value


def load_run_config(args: Sequence[str], *, default_space: str = "cnn_small") -> RunConfig:
    """Build a :class:`RunConfig` from ``key=value`` arguments, as ``autotune run`` gets them.

    Run keys (``space``, ``device``, ``study``, ``storage``, ``sampler``, ``seed``,
    ``trial.*``) configure the run; every other key overrides a field of the space.

    Args:
        args: ``key=value`` strings, e.g. ``["space=cnn_small", "device=cpu", "train.epochs=2"]``.
        default_space: the space used when no ``space=`` is given.

    Raises:
        ConfigError: see :func:`load_space`; also unknown run keys and invalid run values.
    """
    run_raw: dict[str, Any] = {}
    run_texts: dict[str, str] = {}
    space_overrides: list[str] = []
    for key, value, text in _parse_overrides(args):
        if key.split(".")[0] in _RUN_KEYS:
            _set_path(run_raw, key, value, text)
            run_texts[key] = text
        else:
            space_overrides.append(text)
    space_name = run_raw.pop("space", default_space)
    if not isinstance(space_name, str):
        raise ConfigError(f"override {run_texts['space']}: space must be a name or a path")
    space, source = _load_space_with_source(space_name, space_overrides)
    run_raw.setdefault("study", space.name)
    for key in ("study", "storage"):
        if key in run_raw and not isinstance(run_raw[key], str):
            run_raw[key] = str(run_raw[key])
    try:
        return RunConfig.model_validate(
            {**copy.deepcopy(run_raw), "space": space, "space_source": source}
        )
    except ValidationError as e:
        raise ConfigError(_format_validation_error(e, "command line", run_texts)) from None


class VerifyRequest(_Strict):
    """The ``key=value`` arguments of ``autotune verify``: where the study is, and how to
    verify it."""

    storage: str = DEFAULT_STORAGE_URL
    verify: VerifySettings = VerifySettings()
    trial: TrialSettings = TrialSettings()


def load_verify_request(args: Sequence[str]) -> VerifyRequest:
    """Validate ``autotune verify``'s ``key=value`` arguments (``storage=URL``,
    ``verify.rounds=R``, ``verify.candidates=K``, ``verify.accuracy_tolerance_pt=X``,
    ``trial.timeout_s=S``).

    Raises:
        ConfigError: an unknown key or a value that breaks a rule; the message names it.
    """
    raw: dict[str, Any] = {}
    texts: dict[str, str] = {}
    for key, value, text in _parse_overrides(args):
        _set_path(raw, key, value, text)
        texts[key] = text
    if "storage" in raw and not isinstance(raw["storage"], str):
        raw["storage"] = str(raw["storage"])
    try:
        return VerifyRequest.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(_format_validation_error(e, "command line", texts)) from None
