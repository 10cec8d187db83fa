"""The search space: the model's knobs (:class:`ModelSpace`), the workload by reference
(:class:`WorkloadSpec`), and :class:`SearchSpace`, which holds them with the tuner's knobs and
the fixed settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from autotune.core.config._base import Strict
from autotune.core.config._knobs import (
    GUIDE_KNOBS,
    TUNER_KNOBS,
    CategoricalParam,
    ChoiceParam,
    CompileModeParam,
    DataParallelParam,
    FloatParam,
    IntParam,
    MemoryFormatParam,
    ModelKnob,
    OptimizerImplParam,
    PrecisionParam,
    SwitchParam,
    parse_model_knob,
)
from autotune.core.config._settings import (
    AdvancedSettings,
    BudgetOptions,
    BudgetSettings,
    Constraints,
    DataOptions,
    DataSettings,
    TrainOptions,
    TrainSettings,
    global_batch_reason,
)

#: Names a model knob may not take: the tuner's knobs, and the keys of a trial configuration.
_RESERVED_KNOB_NAMES = (
    frozenset(TUNER_KNOBS)
    | frozenset(GUIDE_KNOBS)
    | {"family", "model", "workload", "seed", "device"}
)
#: The built-in workloads (``model.family``). Their knobs: depth (cnn: conv blocks; mlp: hidden
#: layers) and width (cnn: base channels; mlp: hidden units).
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


#: The built-in models' repeated blocks (module class names in
#: :mod:`autotune.trial.workloads.builtin.networks`): what activation checkpointing wraps and FSDP
#: shards one by one.
BUILTIN_BLOCKS: tuple[str, ...] = ("ConvBlock", "HiddenLayer")
#: The import reference of the built-in workloads (``model.family: cnn | mlp``).
BUILTIN_WORKLOAD_REF = "autotune.trial.workloads.builtin:ImageClassifier"

#: The ways autotune reaches a user's code, each named by a space key of its own:
#: ``workload:`` (the workload protocol: ``build_model`` and ``datasets``), ``loop:`` (the
#: user's training function, given a :class:`autotune.LoopTrial`), ``hf_trainer:`` (a function
#: that builds a ``transformers.Trainer``) and ``lightning:`` (a function that returns a
#: ``LightningModule`` and a ``LightningDataModule``).
DoorName = Literal["workload", "loop", "hf_trainer", "lightning"]
DOORS: tuple[DoorName, ...] = ("workload", "loop", "hf_trainer", "lightning")
#: The doors whose function reports its own metric, named in the space's ``metric:`` block.
_METRIC_DOORS: tuple[DoorName, ...] = ("loop", "hf_trainer", "lightning")


class MetricSpec(Strict):
    """The validation metric a ``loop:``, ``hf_trainer:`` or ``lightning:`` door reports, as the
    space's ``metric:`` block names it (a workload names its own: ``metric_name``,
    ``metric_direction``).

    Attributes:
        name: an identifier: ``accuracy`` (top-1, in [0, 1]), or the key the door reads
            (``eval_loss`` from ``Trainer.evaluate()``, ``val_loss`` from Lightning's
            ``callback_metrics``, anything a loop reports).
        direction: ``maximize`` or ``minimize``.
    """

    name: str = Field(min_length=1)
    direction: Literal["maximize", "minimize"]

    @field_validator("name")
    @classmethod
    def _identifier(cls, name: str) -> str:
        if not name.isidentifier():
            raise ValueError(f"{name!r} must be an identifier such as val_loss")
        return name


#: Each door's metric when the space's ``metric:`` block is left out: a loop reports top-1
#: accuracy (as a workload's default ``evaluate``); a Trainer's ``evaluate()`` returns
#: ``eval_loss``; a LightningModule logs ``val_loss`` by the usual convention.
DEFAULT_DOOR_METRICS: dict[str, MetricSpec] = {
    "loop": MetricSpec(name="accuracy", direction="maximize"),
    "hf_trainer": MetricSpec(name="eval_loss", direction="minimize"),
    "lightning": MetricSpec(name="val_loss", direction="minimize"),
}
#: Training settings only autotune's own loop (the workload door) applies: the other doors
#: train with the user's optimizer and learning-rate schedule.
_WORKLOAD_DOOR_TRAIN_SETTINGS = (
    "optimizer",
    "lr",
    "weight_decay",
    "momentum",
    "lr_schedule",
)
#: ``advanced.train`` settings only autotune's own loop applies (as above).
_WORKLOAD_DOOR_ADVANCED_TRAIN_SETTINGS = ("lr_warmup_fraction",)
#: ``advanced.*`` groups that configure a run, not the space a study searches: a resumed
#: study may change them (:meth:`SearchSpace.study_record` leaves them out).
RUN_ADVANCED_GROUPS = ("trial", "verify", "hardware", "mock")
#: The least value of the tuner's integer knobs (the space's values and a baseline's), and why.
_KNOB_FLOORS: dict[str, tuple[int, str]] = {
    "batch_size": (1, ""),
    "num_workers": (0, ""),
    "gpu_count": (1, ""),
    "cpu_threads": (0, " (0: PyTorch's own count)"),
}
#: Keys only the built-in workloads read; a space with its own ``workload:`` may not set them.
_BUILTIN_ONLY_KEYS = ("data",)


class WorkloadSpec(Strict):
    """The user's code by reference, as a trial process resolves it (:mod:`autotune.trial.workloads`),
    and the door autotune reaches it through.

    Attributes:
        ref: ``/absolute/path/file.py:NAME`` or ``package.module:NAME``.
        args: keyword arguments for NAME when it is a class or factory (JSON values); for the
            ``loop``, ``hf_trainer`` and ``lightning`` doors, passed to the function after its
            trial handle.
        door: how autotune reaches the code (:data:`DoorName`).
        metric: the metric the door reports (None for a workload, which names its own).
    """

    ref: str = Field(min_length=3)
    args: dict[str, Any] = Field(default_factory=dict)
    door: DoorName = "workload"
    metric: MetricSpec | None = None

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

    def key_fields(self) -> dict[str, Any]:
        """The reference as the math key and stored configurations see it: the door and its
        metric only where they are not a workload's (so the keys of studies made before
        doors stay what they were)."""
        extra = self.model_dump(mode="json", exclude_defaults=True, exclude={"ref", "args"})
        return {"ref": self.ref, "args": self.model_dump(mode="json")["args"], **extra}


class SearchSpace(Strict):
    """One combined search space: the model's knobs, batch, precision, memory format, compile
    mode, DataLoader workers and GPU count, plus the fixed training settings.

    The model is a built-in workload (``model.family: cnn | mlp`` on ``data:``) or the
    space's own ``workload: FILE.py:NAME | package.module:NAME`` (a relative FILE is relative
    to the space file; :func:`load_space` makes it absolute), with ``workload_args`` for NAME
    when it is a class or factory. Load it with :func:`load_space`; the file format is
    documented in docs/reference/space.md.

    ``baseline:`` names what the user trains with today: any knob (the model's included) and
    ``lr``, the learning rate at the baseline's global batch. The baseline trial runs exactly
    that, and every figure compares with it; knobs it leaves out take PyTorch's defaults
    (:mod:`autotune.study.baseline`). A value outside its knob's choices is added to them
    (:meth:`baseline_notes` says which); ``lr`` replaces ``train.lr`` and makes the baseline's
    global batch the one it holds at (``advanced.train.reference_batch_size``).

    ``advanced:`` holds the research knobs (:class:`AdvancedSettings`), the space's and the
    run's, so that one file can keep them all.
    """

    name: str = Field(min_length=1)
    description: str = ""
    workload: str | None = None
    # The other doors to the user's code (one door per space): a training function given a
    # LoopTrial; a function that builds a transformers.Trainer; one that returns a
    # LightningModule and a LightningDataModule.
    loop: str | None = None
    hf_trainer: str | None = None
    lightning: str | None = None
    workload_args: dict[str, Any] = Field(default_factory=dict)
    # The metric a loop, hf_trainer or lightning door reports (default: DEFAULT_DOOR_METRICS).
    metric: MetricSpec | None = None
    model: ModelSpace = ModelSpace()
    batch_size: IntParam
    precision: PrecisionParam = PrecisionParam(choices=["fp32"])
    memory_format: MemoryFormatParam = MemoryFormatParam(choices=["contiguous"])
    compile_mode: CompileModeParam = CompileModeParam(choices=["none"])
    num_workers: IntParam = IntParam(choices=[0])  # DataLoader workers
    gpu_count: IntParam = IntParam(choices=[1])  # DDP world size
    # The rest of PyTorch's Performance Tuning Guide (GUIDE_KNOBS), searched where given more
    # than one value; PyTorch's defaults otherwise.
    optimizer_impl: OptimizerImplParam = OptimizerImplParam(choices=["default"])
    activation_checkpointing: SwitchParam = SwitchParam(choices=[False])  # per block
    cpu_threads: IntParam = IntParam(choices=[0])  # intra-op threads per rank; 0: PyTorch's
    cudnn_benchmark: SwitchParam = SwitchParam(choices=[False])  # CUDA only
    cuda_expandable_segments: SwitchParam = SwitchParam(choices=[False])  # CUDA only
    data_parallel: DataParallelParam = DataParallelParam(choices=["ddp"])  # ddp | fsdp
    # The model's repeated blocks, by module class name: what activation checkpointing wraps
    # and FSDP shards one by one (the built-in models name theirs).
    blocks: list[str] | None = None
    train: TrainOptions = TrainOptions()
    data: DataOptions = DataOptions()  # the built-in workloads' data set
    constraints: Constraints = Constraints()
    # What the study may spend, in full runs of the baseline (BudgetOptions).
    budget: BudgetOptions = BudgetOptions()
    # What the user trains with today: knob -> value, and lr (see the class docstring).
    baseline: dict[str, Any] = Field(default_factory=dict)
    advanced: AdvancedSettings = AdvancedSettings()
    _baseline_added: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="wrap")
    @classmethod
    def _baseline_in_space(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        """Check each ``baseline:`` value against its knob's type, and add it to the knob's
        values where the space lacks it (a ``lr`` becomes ``train.lr``)."""
        space = handler(data)
        return space._with_baseline_values() if space.baseline else space

    def _with_baseline_values(self) -> SearchSpace:
        knobs = {**self.knobs(), **{name: getattr(self, name) for name in GUIDE_KNOBS}}
        update: dict[str, Any] = {}
        model_knobs = dict(self.model.knobs)
        added: list[str] = []
        for key, value in self.baseline.items():
            if key == "lr" and self.door != "workload":
                raise ValueError(
                    f"baseline.lr: the {self.door} door trains at your own optimizer's learning "
                    "rate, which holds at the baseline's batch; remove it"
                )
            if key == "lr":
                if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                    raise ValueError(f"baseline.lr: must be a number > 0, but got {value!r}")
                # Your rate at your batch: the reference batch becomes the baseline's.
                update["train"] = self.train.model_copy(update={"lr": float(value)})
                advanced_train = self.advanced.train.model_copy(
                    update={"reference_batch_size": None}
                )
                update["advanced"] = self.advanced.model_copy(update={"train": advanced_train})
                continue
            knob = knobs.get(key)
            if knob is None:
                raise ValueError(
                    f"baseline.{key}: not a knob of this space (its knobs: "
                    f"{', '.join([*knobs, 'lr'])})"
                )
            floor, why = _KNOB_FLOORS.get(key, (None, ""))
            if self.model.family is not None and key in ("depth", "width"):
                floor, why = 1, f" (family {self.model.family}'s {key})"
            if floor is not None and isinstance(value, (int, float)) and value < floor:
                raise ValueError(f"baseline.{key}: must be >= {floor}{why}, but got {value!r}")
            try:
                widened = knob.including(value)
            except ValueError as e:
                raise ValueError(f"baseline.{key}: {e}") from None
            if widened is knob:
                continue
            added.append(f"baseline: {key}={value} is not among the space's values; added to them")
            if key in model_knobs:
                model_knobs[key] = widened
            else:
                update[key] = widened
        if model_knobs != self.model.knobs:
            update["model"] = self.model.model_copy(update={"knobs": model_knobs})
        space = self.model_copy(update=update)
        space._baseline_added = (*self._baseline_added, *added)
        return space

    def baseline_notes(self) -> list[str]:
        """One line per ``baseline:`` value the space's knobs lacked and now hold."""
        return list(self._baseline_added)

    @model_validator(mode="after")
    def _ranges(self) -> SearchSpace:
        # The same floors as _KNOB_FLOORS (a baseline's), spelled out: the reference pages
        # list these messages from the source (docs/gen_reference.py).
        if min(self.batch_size.values()) < 1:
            raise ValueError("batch_size: every value must be >= 1")
        if min(self.num_workers.values()) < 0:
            raise ValueError("num_workers: every value must be >= 0")
        if min(self.gpu_count.values()) < 1:
            raise ValueError("gpu_count: every value must be >= 1")
        if min(self.cpu_threads.values()) < 0:
            raise ValueError("cpu_threads: every value must be >= 0 (0: PyTorch's own count)")
        if self.blocks is not None and not all(b.isidentifier() for b in self.blocks):
            raise ValueError("blocks: every entry must be a module class name (an identifier)")
        return self

    @model_validator(mode="after")
    def _global_batch_divides(self) -> SearchSpace:
        """With ``train.global_batch_size``, every batch size must make it up (a whole number
        of micro-batches) with some GPU count, and every GPU count with some batch size; the
        combinations that do not are refused trial by trial (infeasible)."""
        total = self.train.global_batch_size
        if total is None:
            return self
        batches, counts = self.batch_size.values(), self.gpu_count.values()

        def never_fits(knob: str, value: int, others: list[int]) -> ValueError:
            other = "gpu_count" if knob == "batch_size" else "batch_size"
            return ValueError(
                f"train.global_batch_size: {total} is not a multiple of batch_size x gpu_count "
                f"for {knob}={value} with any {other} ({', '.join(map(str, others))})"
            )

        for batch in batches:
            if all(global_batch_reason(total, batch, count) for count in counts):
                raise never_fits("batch_size", batch, counts)
        for count in counts:
            if all(global_batch_reason(total, batch, count) for batch in batches):
                raise never_fits("gpu_count", count, batches)
        return self

    @property
    def door(self) -> DoorName:
        """The door to the user's code: the one door key the space sets (``workload`` for a
        built-in family too)."""
        for door in _METRIC_DOORS:
            if getattr(self, door) is not None:
                return door
        return "workload"

    def _door_ref(self) -> str | None:
        """The reference the space's door key holds (None: a built-in family)."""
        return getattr(self, self.door)

    @model_validator(mode="after")
    def _one_workload(self) -> SearchSpace:
        given = [door for door in DOORS if getattr(self, door) is not None]
        if len(given) > 1:
            raise ValueError(
                f"{given[1]}: one door per space, but it also names `{given[0]}:`; keep one of "
                f"{', '.join(f'{d}:' for d in DOORS)}"
            )
        ref = given[0] if given else None
        if self.metric is not None and ref not in _METRIC_DOORS:
            raise ValueError(
                "metric: only with a loop:, hf_trainer: or lightning: door (a workload names its "
                "metric with its metric_name and metric_direction attributes)"
            )
        if ref is None:
            if self.model.family is None:
                raise ValueError(
                    "model.family: give a built-in family (cnn, mlp), or name your own code "
                    "with `workload: FILE.py:NAME` (or `loop:`, `hf_trainer:`, `lightning:`)"
                )
            if self.workload_args:
                raise ValueError(
                    "workload_args: only with `workload:` or another door to your own code "
                    "(loop:, hf_trainer:, lightning:)"
                )
            self.model.check_builtin_sizes()
            return self
        reference = getattr(self, ref)
        if ref in _METRIC_DOORS:
            for key in _WORKLOAD_DOOR_TRAIN_SETTINGS:
                if key in self.train.model_fields_set:
                    raise ValueError(
                        f"train.{key}: the {ref} door trains with your own optimizer and "
                        "schedule; remove it (train.lr_scaling says how your learning rate "
                        "follows the batch)"
                    )
            for key in _WORKLOAD_DOOR_ADVANCED_TRAIN_SETTINGS:
                if key in self.advanced.train.model_fields_set:
                    raise ValueError(
                        f"advanced.train.{key}: the {ref} door trains with your own optimizer "
                        "and schedule; remove it"
                    )
        if self.model.family is not None:
            raise ValueError(
                f"model.family: a built-in family cannot be combined with "
                f"`{ref}: {reference}`; remove one of them"
            )
        for key in _BUILTIN_ONLY_KEYS:
            if key in self.model_fields_set or key in self.advanced.model_fields_set:
                where = key if key in self.model_fields_set else f"advanced.{key}"
                raise ValueError(
                    f"{where}: applies to the built-in workloads (model.family) only; "
                    f"`{ref}: {reference}` brings its own data"
                )
        try:
            WorkloadSpec(ref=reference)  # the reference's form
        except ValidationError as e:
            rule = e.errors()[0]["msg"].removeprefix("Value error, ")
            raise ValueError(f"{ref}: {rule}") from None
        return self

    def workload_spec(self) -> WorkloadSpec:
        """The user's code (or the built-in workload) every trial of this space trains, with
        its door and, for a door that reports its own metric, that metric."""
        ref = self._door_ref()
        if ref is None:
            return WorkloadSpec(
                ref=BUILTIN_WORKLOAD_REF,
                args={"family": self.model.family, "data": self.data_settings().model_dump()},
            )
        door = self.door
        metric = self.metric or DEFAULT_DOOR_METRICS.get(door)
        return WorkloadSpec(ref=ref, args=dict(self.workload_args), door=door, metric=metric)

    def knobs(self) -> dict[str, ModelKnob | CategoricalParam[Any]]:
        """The searchable knobs by Optuna parameter name: the model's, in the order written,
        then the tuner's (:data:`TUNER_KNOBS`), then the guide's knobs the space searches
        (:data:`GUIDE_KNOBS` with more than one value; one value is a fixed setting,
        :meth:`guide_settings`)."""
        return {
            **self.model.knobs,
            "batch_size": self.batch_size,
            "precision": self.precision,
            "memory_format": self.memory_format,
            "compile_mode": self.compile_mode,
            "num_workers": self.num_workers,
            "gpu_count": self.gpu_count,
            **{
                name: getattr(self, name)
                for name in GUIDE_KNOBS
                if len(getattr(self, name).values()) > 1
            },
        }

    def guide_settings(self) -> dict[str, Any]:
        """The guide's knobs the space fixes (one value each), by name: every trial's."""
        return {
            name: getattr(self, name).values()[0]
            for name in GUIDE_KNOBS
            if len(getattr(self, name).values()) == 1
        }

    @property
    def budget_settings(self) -> BudgetSettings:
        """The cost cap as a run applies it: ``budget.*`` and ``advanced.budget.*``."""
        return BudgetSettings.model_validate(
            {**self.budget.model_dump(), **self.advanced.budget.model_dump()}
        )

    def train_settings(self) -> TrainSettings:
        """The training settings every trial of this space is given: ``train:`` and
        ``advanced.train:`` in one."""
        budget = self.budget_settings
        # Short evidence is autotune's own loop's: the other doors train their own budget.
        share = budget.evidence_share if budget.short_evidence and self.door == "workload" else None
        return TrainSettings.model_validate(
            {
                **self.train.model_dump(),
                **self.advanced.train.model_dump(),
                "evidence_share": share,
            }
        )

    def data_settings(self) -> DataSettings:
        """The data set a built-in workload is given: ``data:`` and ``advanced.data:`` in
        one."""
        return DataSettings.model_validate(
            {**self.data.model_dump(), **self.advanced.data.model_dump()}
        )

    def study_record(self) -> dict[str, Any]:
        """The space as a study stores it and a resumed study compares it: the values that
        are not the defaults (a key added in a later release keeps old studies resumable),
        without the run's ``advanced`` groups (:data:`RUN_ADVANCED_GROUPS`), which a resumed
        run may change as it may change ``trial.*`` or ``verify.*``."""
        record = self.model_dump(
            mode="json", exclude_defaults=True, exclude={"advanced": set(RUN_ADVANCED_GROUPS)}
        )
        # Only the run's groups changed (or none): no "advanced" key, as before advanced.*.
        if not any(record.get("advanced", {}).values()):
            record.pop("advanced", None)
        return record
