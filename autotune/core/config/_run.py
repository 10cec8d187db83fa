"""What a run and each of its trials are given: :class:`RunConfig` (``autotune run``),
:class:`VerifyRequest` (``autotune verify``) and the frozen :class:`TrialConfig`."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, StrictBool, StrictFloat, StrictInt, StrictStr

from autotune.core.config._base import Strict
from autotune.core.config._knobs import (
    GUIDE_KNOB_DEFAULTS,
    GUIDE_KNOBS,
    TUNER_KNOBS,
    CompileMode,
    DataParallel,
    MemoryFormat,
    OptimizerImpl,
    Precision,
)
from autotune.core.config._settings import (
    AdvancedSettings,
    AdvancedVerifySettings,
    MeasureSettings,
    MockFault,
    MockOptions,
    MockProfileName,
    ObjectiveMode,
    TrainSettings,
    TrialSettings,
    VerifyOptions,
    VerifySettings,
)
from autotune.core.config._space import SearchSpace, WorkloadSpec

DeviceName = Literal["auto", "cpu", "cuda", "mock"]
SamplerName = Literal["nsga2", "tpe", "gp", "random"]

#: Where studies live unless ``storage=`` says otherwise (relative to the working directory).
DEFAULT_STORAGE_URL = "sqlite:///storage/autotune.db"


class RunConfig(Strict):
    """Everything one ``autotune run`` needs: the space plus where and how to run it."""

    space: SearchSpace
    space_source: str  # the file the space came from, for messages and the study record
    device: DeviceName = "auto"
    study: str = Field(min_length=1)  # Optuna study name; defaults to the space name
    storage: str = Field(DEFAULT_STORAGE_URL, min_length=1)  # any SQLAlchemy URL
    # GP: the best hypervolume after 25 and 50 trials in docs/benchmarks (search efficiency).
    sampler: SamplerName = "gp"
    # throughput (default; three objectives: samples/s, validation metric, peak memory) or
    # time_to_accuracy (two: seconds to train.target_accuracy / train.target_metric, memory).
    objective: ObjectiveMode = "throughput"
    seed: int = Field(0, ge=0, lt=2**31)  # sampler seed; every trial trains with it
    trial: TrialSettings = TrialSettings()
    workers: int = Field(1, ge=1)  # worker processes sharing the study on this machine
    mock: MockOptions = MockOptions()  # the mock device's simulated machine (mock.profile)
    # Enqueue this study's Pareto-optimal configurations first (same storage).
    warm_start: str | None = None
    # Run an existing study on a machine with another hardware fingerprint.
    allow_hardware_change: bool = False
    verify: VerifyOptions = VerifyOptions()

    @property
    def advanced(self) -> AdvancedSettings:
        """The research knobs (``advanced.*``): the space's ``advanced:``, with the
        ``advanced.*`` keys of the command line."""
        return self.space.advanced

    @property
    def verify_settings(self) -> VerifySettings:
        """What the run's verification is given: ``verify.*`` and ``advanced.verify.*``."""
        return VerifySettings.model_validate(
            {**self.verify.model_dump(), **self.space.advanced.verify.model_dump()}
        )


#: A model knob's value in a trial (strict: an int stays an int, a bool a bool).
KnobValue = StrictBool | StrictInt | StrictFloat | StrictStr


class ReusedMetric(Strict):
    """What a trial takes from an earlier measured trial with the same math key
    (:func:`math_key`) instead of training for it (``advanced.search.reuse_metric``).

    Set by the study on a trial's configuration just before it runs; never stored with the
    configuration's knobs, so a verification run (rebuilt from the stored knobs) never
    carries it and always trains in full.
    """

    from_trial: int = Field(ge=0)  # the source trial's number (user attribute metric_from_trial)
    val_metric: float  # the source's validation metric
    train_loss: float  # the source's mean training loss over its last epoch
    # Optimizer steps the source took: the budget's, or in a time-to-accuracy study the steps
    # to its first evaluation that met the target.
    steps: int = Field(ge=1)
    # Time-to-accuracy only: the source's evaluations up to and including the one that met
    # the target (0 in a throughput study).
    evaluations: int = Field(0, ge=0)
    # A door's timed-only run that still runs the user's code after the loop (its evaluation
    # and trial.report(), checked and then discarded): the baseline's discarded warm-up run
    # of a door study, so a fault there shows in seconds rather than after the budget.
    check_evaluation: bool = False

    @classmethod
    def placeholder(cls, from_trial: int) -> ReusedMetric:
        """A run that is timed only and evaluates nothing (the float64 twin): its metric is
        never read, so its figures are zeros and one step."""
        return cls(from_trial=from_trial, val_metric=0.0, train_loss=0.0, steps=1)

    @classmethod
    def warm_up(cls, from_trial: int) -> ReusedMetric:
        """A door's discarded warm-up run: timed only, like :meth:`placeholder`, but the
        user's evaluation after the loop runs and its metric is checked (a door's
        :class:`~autotune.core.exceptions.DoorUsageError` otherwise), then discarded."""
        return cls.placeholder(from_trial).model_copy(update={"check_evaluation": True})


class TrialConfig(Strict):
    """One complete, frozen trial configuration: the knobs a sampler chose plus fixed settings.

    This is what a trial process receives; it never sees the study. The model is built by
    ``workload`` (resolved by reference in the trial process) with the ``model`` knobs as
    keyword arguments.
    """

    device: Literal["cpu", "cuda", "mock"]
    workload: WorkloadSpec
    model: dict[str, KnobValue] = Field(default_factory=dict)  # build_model(**model)
    # Per rank; the global batch is batch_size * gpu_count, or train.global_batch_size when
    # set (batch_size is then the micro-batch of gradient accumulation).
    batch_size: int = Field(ge=1)
    precision: Precision
    memory_format: MemoryFormat
    compile_mode: CompileMode
    num_workers: int = Field(ge=0)
    gpu_count: int = Field(ge=1)  # DDP world size
    # PyTorch's Performance Tuning Guide's knobs (GUIDE_KNOBS), at PyTorch's defaults unless
    # the space searches or fixes them.
    optimizer_impl: OptimizerImpl = "default"
    activation_checkpointing: bool = False  # checkpoint each of `blocks`
    cpu_threads: int = Field(0, ge=0)  # intra-op threads per rank; 0: PyTorch's count, shared
    cudnn_benchmark: bool = False  # torch.backends.cudnn.benchmark (CUDA)
    cuda_expandable_segments: bool = False  # PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
    data_parallel: DataParallel = "ddp"  # with gpu_count > 1: DDP or FSDP2's fully_shard
    # The model's blocks by module class name (checkpointing and FSDP's units); None: the
    # built-in model's own, or none.
    blocks: tuple[str, ...] | None = None
    seed: int = 0  # training seed (initialization, data order); a study gives all trials its own
    # Wall-clock limit of the trial's processes, compile included (trial.timeout_s): stored
    # with the configuration, so a verification run of it has the limit its trial had.
    timeout_s: float = Field(TrialSettings.model_fields["timeout_s"].default, gt=0)
    train: TrainSettings = TrainSettings()
    measure: MeasureSettings = MeasureSettings()
    # throughput: train the fixed budget and time it; time_to_accuracy: train until the
    # validation metric meets train.target_accuracy / train.target_metric.
    objective: ObjectiveMode = "throughput"
    # A throughput trial whose first two timed windows run below this many samples/s stops
    # there (Measurement.too_slow; autotune.trial.measure.ThroughputFloor); set by the study from advanced.trial.min_throughput_vs_baseline,
    # never stored with the configuration's knobs, so verification re-runs have no floor.
    min_throughput_sps: float | None = Field(None, gt=0)
    # Set by the study when an earlier trial with the same math key (math_key) was measured:
    # the trial runs its warm-up and timed windows only and reports this metric. Like
    # min_throughput_sps, never stored with the configuration's knobs.
    reuse: ReusedMetric | None = None
    # The baseline's float64 twin (autotune.study.evidence): the model, its optimizer state and the
    # inputs in float64 under the trial's own autocast, for the paired check's floor; set by
    # the study on the discarded warm-up run of the baseline, never stored.
    twin: Literal["none", "float64"] = "none"
    mock_fault: MockFault = "none"  # mock device only: fail this trial on purpose
    mock_profile: MockProfileName = "default"  # mock device only: the simulated machine

    def knobs(self) -> dict[str, Any]:
        """The knobs by Optuna parameter name: the model's, then the tuner's, then the guide's
        that are not at PyTorch's default (:data:`GUIDE_KNOBS`; a knob at its default is
        left out, as a study that does not search it records it)."""
        return {
            **self.model,
            **{name: getattr(self, name) for name in TUNER_KNOBS},
            **{
                name: getattr(self, name)
                for name in GUIDE_KNOBS
                if getattr(self, name) != GUIDE_KNOB_DEFAULTS[name]
            },
        }

    @classmethod
    def from_stored(cls, stored: dict[str, Any]) -> TrialConfig:
        """A configuration as the results tables and a trial's ``trial_config`` attribute
        store it (``model_dump(mode="json")``).

        Raises:
            pydantic.ValidationError: the stored configuration is not valid.
        """
        return cls.model_validate(stored)

    @classmethod
    def from_knobs(cls, knobs: Mapping[str, Any], space: SearchSpace, **fixed: Any) -> TrialConfig:
        """The configuration of ``space`` whose knobs (model and tuner, by Optuna parameter
        name) are ``knobs``; ``fixed`` gives the other fields (``device``, ``seed``, ...) and
        may replace ``train`` and ``measure``.

        Raises:
            pydantic.ValidationError: a value of the wrong type or out of range.
        """
        model = {name: knobs[name] for name in space.model.knobs if name in knobs}
        tuner = {name: knobs[name] for name in (*TUNER_KNOBS, *GUIDE_KNOBS) if name in knobs}
        return cls.model_validate(
            {
                "workload": space.workload_spec(),
                "model": model,
                "train": space.train_settings(),
                "measure": space.advanced.measure,
                "blocks": tuple(space.blocks) if space.blocks is not None else None,
                **space.guide_settings(),
                **fixed,
                **tuner,
            }
        )


#: Training settings that decide when a run is timed, evaluated or stopped, not what it
#: learns: left out of :func:`math_key`. (``eval_every_steps`` stays in: it fixes the steps
#: at which a time-to-accuracy run can meet its target.)
_TIMING_ONLY_TRAIN_SETTINGS = frozenset(
    {"warmup_steps", "eval_every_s", "max_time_s", "max_time_vs_baseline"}
)


def math_key(config: TrialConfig) -> str:
    """The key of what a trial learns: two configurations with the same key train the same
    weights, up to floating-point reordering, so one's validation metric (and steps to a
    target) stands for the other's.

    In the key: the device kind, the workload (reference and arguments, data included), the
    model knobs, the global batch (``train.global_batch_size`` when set: then ``batch_size``
    and ``gpu_count`` only split it into micro-batches and ranks, and stay out; without it,
    ``batch_size`` and ``gpu_count``, which decide the data order per rank and the number of
    steps), the precision, activation checkpointing when on (its recomputed forward passes
    update BatchNorm's running statistics a second time), the training settings (optimizer,
    learning rate and its scaling and schedule, epochs, steps cap, target), the training seed
    and the objective mode. Outside it: memory format, compile mode, DataLoader workers and
    the guide's other knobs (the optimizer's implementation, CPU threads, cuDNN's autotuning,
    the allocator's segments, DDP or FSDP), which change speed and memory, not the
    arithmetic's result beyond reordering (measured on
    the shipped MNIST: docs/benchmarks-notes.md, "Reuse where the math is the same"); the
    timing-only training settings (:data:`_TIMING_ONLY_TRAIN_SETTINGS`); ``measure``; the
    study's throughput floor; and the mock device's fault and profile.

    Args:
        config: a trial configuration.

    Returns:
        A 16-hex-digit digest (SHA-256 of the key's canonical JSON), stored as the trial's
        ``math_key`` user attribute.
    """
    train = config.train.model_dump(mode="json", exclude=set(_TIMING_ONLY_TRAIN_SETTINGS))
    if train.get("evidence_share") is None:  # in the key only when set (short evidence)
        train.pop("evidence_share", None)
    batch: dict[str, int] = (
        {"batch_size": config.batch_size, "gpu_count": config.gpu_count}
        if config.train.global_batch_size is None
        else {}  # train.global_batch_size, in `train`, is the global batch
    )
    fields: dict[str, Any] = {
        "device": config.device,
        "workload": config.workload.key_fields(),
        "model": config.model,
        **batch,
        "precision": config.precision,
        "train": train,
        "seed": config.seed,
        "objective": config.objective,
    }
    if config.activation_checkpointing:  # recomputed forwards update BatchNorm's statistics again
        fields["activation_checkpointing"] = True
    if config.twin != "none":  # another arithmetic
        fields["twin"] = config.twin
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class AdvancedVerifyRequest(Strict):
    """The ``advanced.*`` keys ``autotune verify`` takes: ``advanced.verify.*``."""

    verify: AdvancedVerifySettings = AdvancedVerifySettings()


class VerifyRequest(Strict):
    """The ``key=value`` arguments of ``autotune verify``: where the study is, and how to
    verify it."""

    study: str | None = Field(None, min_length=1)  # Optuna study name; the CLI requires one
    storage: str = Field(DEFAULT_STORAGE_URL, min_length=1)
    verify: VerifyOptions = VerifyOptions()
    trial: TrialSettings = TrialSettings()
    advanced: AdvancedVerifyRequest = AdvancedVerifyRequest()

    @property
    def verify_settings(self) -> VerifySettings:
        """What the verification is given: ``verify.*`` and ``advanced.verify.*``."""
        return VerifySettings.model_validate(
            {**self.verify.model_dump(), **self.advanced.verify.model_dump()}
        )
