"""Fixed settings: training (with the learning-rate scaling rules), data, constraints,
timing, trial processes, the mock device, the hardware screen, and verification; the
research knobs among them gathered under one :class:`AdvancedSettings` (``advanced.*``)."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import ByteSize, Field, field_validator, model_validator

from autotune.core.config._base import Strict

DataName = Literal["digits", "mnist", "fashion_mnist", "synthetic"]
OptimizerName = Literal["adamw", "sgd"]
LrScaling = Literal["none", "linear", "sqrt"]
LrSchedule = Literal["constant", "cosine"]
#: What a study optimizes: ``throughput`` (samples/s, the validation metric and peak memory
#: after a fixed budget of epochs) or ``time_to_accuracy`` (the wall seconds to reach
#: ``train.target_accuracy`` or ``train.target_metric``, and peak memory).
ObjectiveMode = Literal["throughput", "time_to_accuracy"]
#: Where a trial's torch.compile caches (Inductor's and Triton's) live: ``study``, one
#: directory per study; ``trial``, an empty one per trial; ``shared``, wherever the
#: environment puts them (Inductor's default: /tmp/torchinductor_$USER).
CompileCache = Literal["study", "trial", "shared"]

#: The values of ``train.lr_scaling`` (:data:`LrScaling`), in order.
LR_SCALING_RULES: tuple[str, ...] = ("none", "linear", "sqrt")
#: The learning-rate scaling rule of each optimizer when ``train.lr_scaling`` is not set (see
#: :func:`scaled_lr` for the sources): linear for SGD, the square root for Adam(W).
DEFAULT_LR_SCALING: dict[str, LrScaling] = {"adamw": "sqrt", "sgd": "linear"}


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


def global_batch_reason(global_batch_size: int, batch_size: int, world_size: int) -> str | None:
    """Why a micro-batch of ``batch_size`` on ``world_size`` ranks cannot make up the global
    batch ``global_batch_size`` (it is not a whole number of them), or None when it can."""
    per_step = batch_size * world_size
    if global_batch_size % per_step == 0:
        return None
    return (
        f"train.global_batch_size={global_batch_size} is not a multiple of batch_size x "
        f"gpu_count = {batch_size} x {world_size} = {per_step}"
    )


class TrainOptions(Strict):
    """Fixed training settings shared by every trial of a study (``train:``; the research
    ones are ``advanced.train:``, :class:`AdvancedTrainSettings`).

    ``lr`` is the learning rate at the global batch ``advanced.train.reference_batch_size``
    (the baseline's); a trial with another global batch trains at ``lr`` scaled by
    ``lr_scaling`` (:func:`scaled_lr`), after a linear warm-up over
    ``advanced.train.lr_warmup_fraction`` of its optimizer steps, so that every batch size
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
    # How lr follows the global batch: none, linear, sqrt; unset: DEFAULT_LR_SCALING's rule
    # for the optimizer (sqrt for adamw, linear for sgd).
    lr_scaling: LrScaling | None = None
    # A fixed global batch (samples per optimizer step over all ranks): batch_size is then the
    # per-rank micro-batch, and each optimizer step accumulates the gradients of
    # global_batch_size / (batch_size x gpu_count) micro-batches (DDP's no_sync between them),
    # so batch size and GPU count change speed and memory, not what is learned. Unset: the
    # global batch is batch_size x gpu_count.
    global_batch_size: int | None = Field(None, ge=1)
    # After the warm-up: cosine (decay to 0 at the last step) or constant (stay at the peak).
    # The built-in CNN on MNIST: 98.4 % with cosine, 98.05 % constant (5 seeds, README).
    lr_schedule: LrSchedule = "cosine"
    # objective=time_to_accuracy only: the quality target a trial trains to. target_accuracy
    # for a top-1 accuracy in (0, 1]; target_metric for any other metric (a loss: reached
    # at or below it when the workload minimizes it). At most one of the two.
    target_accuracy: float | None = Field(None, gt=0, le=1)
    target_metric: float | None = None
    # When a time-to-accuracy trial evaluates: every eval_every_steps optimizer steps, or
    # every eval_every_s seconds of training (at most one of the two); neither: once per
    # epoch. The evaluations count in the time to accuracy, as in MLPerf Training.
    eval_every_steps: int | None = Field(None, ge=1)
    eval_every_s: float | None = Field(None, gt=0)
    # A time-to-accuracy trial that has not reached the target after this many seconds
    # stops there (infeasible); unset: it may use the whole schedule (train.epochs).
    max_time_s: float | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _one_target_one_cadence(self) -> TrainOptions:
        if self.target_accuracy is not None and self.target_metric is not None:
            raise ValueError("set train.target_accuracy or train.target_metric, not both")
        if self.eval_every_steps is not None and self.eval_every_s is not None:
            raise ValueError("set train.eval_every_steps or train.eval_every_s, not both")
        return self

    def accumulation_steps(self, batch_size: int, world_size: int) -> int:
        """Micro-batches per optimizer step and rank: ``global_batch_size / (batch_size x
        world_size)``, or 1 without a ``global_batch_size``.

        Raises:
            ValueError: the global batch is not a multiple of ``batch_size x world_size``.
        """
        if self.global_batch_size is None:
            return 1
        reason = global_batch_reason(self.global_batch_size, batch_size, world_size)
        if reason is not None:
            raise ValueError(reason)
        return self.global_batch_size // (batch_size * world_size)

    def global_batch(self, batch_size: int, world_size: int) -> int:
        """Samples per optimizer step over all ranks: ``global_batch_size`` when set, else
        ``batch_size x world_size``."""
        return self.global_batch_size or batch_size * world_size

    @property
    def target(self) -> float | None:
        """The time-to-accuracy target: ``target_accuracy`` or ``target_metric``."""
        return self.target_accuracy if self.target_accuracy is not None else self.target_metric

    @property
    def lr_scaling_rule(self) -> LrScaling:
        """The scaling rule trials use: ``lr_scaling``, or the optimizer's default."""
        return self.lr_scaling or DEFAULT_LR_SCALING[self.optimizer]

    @property
    def has_eval_cadence(self) -> bool:
        """The settings choose when a time-to-accuracy run evaluates (``eval_every_steps``
        or ``eval_every_s``); without, it evaluates once per epoch unless a study derives a
        cadence for it (:meth:`TrainSettings.with_default_cadence`)."""
        return self.eval_every_steps is not None or self.eval_every_s is not None


class AdvancedTrainSettings(Strict):
    """Research knobs of training and its timing (``advanced.train:``)."""

    warmup_steps: int = Field(5, ge=0)  # untimed steps before the timed windows
    # Share of a trial's optimizer steps over which the learning rate rises linearly to its
    # peak when scaling (Goyal et al. 2017 warm up for 5 of 90 epochs, 5.6 %).
    lr_warmup_fraction: float = Field(0.05, ge=0, lt=1)
    # The global batch (batch_size x gpu_count) at which `train.lr` holds; unset: the
    # study's baseline trial's (autotune.study.baseline), filled in for each trial by the study.
    reference_batch_size: int | None = Field(None, ge=1)
    # In a time-to-accuracy study's search, a trial still short of the target after this
    # many times the baseline trial's time to accuracy stops there (infeasible): no
    # configuration that slow is worth finishing. None: no such limit. Verification runs
    # are not limited by it.
    max_time_vs_baseline: float | None = Field(4.0, gt=1)


class TrainSettings(TrainOptions, AdvancedTrainSettings):
    """The training settings a trial is given (:class:`autotune.core.config.TrialConfig`'s
    ``train``): ``train:`` and ``advanced.train:`` in one (a space's
    :meth:`~autotune.core.config.SearchSpace.train_settings`), as trial configurations store them.

    ``evidence_share`` is the study's, not the space's (no YAML key sets it): under a cost
    cap too small for trained evidence (:attr:`BudgetSettings.short_evidence`), every run
    follows the budget's schedule (its learning-rate warm-up and decay over the budget's
    steps) but stops after this share of its optimizer steps and is evaluated there
    (:meth:`evidence_steps`): the learning evidence of a numerics, dynamics or model change
    at equal samples seen, a few % of a full run. None: the run trains the budget.
    """

    evidence_share: float | None = Field(None, gt=0, le=1, allow_inf_nan=False)

    def evidence_steps(self, total_steps: int) -> int:
        """Optimizer steps a run of a budget of ``total_steps`` steps takes: all of them, or
        the first ``ceil(evidence_share x total_steps)`` (at least 1). Every batch size's
        share covers the same samples: equal samples seen."""
        if self.evidence_share is None:
            return total_steps
        return max(1, min(total_steps, math.ceil(round(self.evidence_share * total_steps, 9))))

    def peak_lr(self, global_batch: int) -> float:
        """The learning rate after warm-up of a trial whose global batch is ``global_batch``.

        Without a ``reference_batch_size`` (a configuration built outside a study), the trial's
        own global batch is the reference: it trains at ``lr``.
        """
        reference = self.reference_batch_size or global_batch
        return scaled_lr(self.lr, self.lr_scaling_rule, global_batch, reference)

    def with_default_cadence(self, every_s: float) -> TrainSettings:
        """These settings evaluating every ``every_s`` seconds, unless they set a cadence of
        their own (then they are returned as they are)."""
        if self.has_eval_cadence:
            return self
        return self.model_copy(update={"eval_every_s": every_s})

    def lr_warmup_steps(self, total_steps: int) -> int:
        """Optimizer steps of the linear warm-up in a trial of ``total_steps`` steps: the
        ``lr_warmup_fraction`` share rounded up, or 0 when ``lr_scaling`` is ``none``."""
        if self.lr_scaling_rule == "none":
            return 0
        # round() first, so that 0.05 * 60 = 3.0000000000000004 counts as 3, not 4.
        return min(total_steps, math.ceil(round(self.lr_warmup_fraction * total_steps, 9)))


class DataOptions(Strict):
    """Which data set a study trains on and how it is split (``data:``; the size of the
    synthetic benchmark data is ``advanced.data:``, :class:`AdvancedDataSettings`)."""

    name: DataName = "digits"
    root: str | None = None  # directory holding the IDX files (mnist, fashion_mnist)
    val_fraction: float = Field(0.2, gt=0, lt=1)  # held-out validation share


class AdvancedDataSettings(Strict):
    """The built-in workloads' benchmark data (``advanced.data:``)."""

    # Size of the `synthetic` data set (random tensors, for throughput only): how many
    # samples one epoch of a timing run has, not what a model learns.
    synthetic_samples: int = Field(4096, ge=16)


class DataSettings(AdvancedDataSettings, DataOptions):
    """The data set a built-in workload is given (its ``data`` argument): ``data:`` and
    ``advanced.data:`` in one (:meth:`autotune.core.config.SearchSpace.data_settings`), its fields
    in the order of the release before (``DataOptions``' first)."""


class Constraints(Strict):
    """Limits a trial must meet to be feasible (infeasible trials never reach the front).

    ``max_memory_bytes`` accepts an integer or a size such as ``8GiB`` or ``512MB``
    (pydantic's ``ByteSize``); ``min_accuracy`` is a validation accuracy in [0, 1].
    """

    max_memory_bytes: ByteSize | None = None
    min_accuracy: float | None = Field(None, ge=0, le=1)


class SearchSettings(Strict):
    """How the search models the study and spends its trials (``advanced.search:`` in a
    space file, ``advanced.search.*`` overrides).

    Attributes:
        reuse_metric: a trial whose math key (:func:`autotune.core.config.math_key`: workload,
            model knobs, global batch, precision, training settings, seed) equals a measured
            trial's takes that trial's validation metric (and, in a time-to-accuracy study,
            its steps to the target) instead of training for it, and runs only its warm-up
            and timed windows; its throughput and memory are measured as usual. Memory
            format, compile mode and DataLoader workers are outside the key: on the shipped
            MNIST they moved the validation accuracy of a fixed seed by at most 0.05 points
            (one image of 2,000; two seeds differ by 0.20), docs/benchmarks-notes.md ("Reuse
            where the math is the same"). ``false`` trains every trial in full. Verification
            always trains in full.
    """

    reuse_metric: bool = True


#: ``advanced.measure.min_timed_s`` by device kind when the settings set none (see MeasureSettings).
DEFAULT_MIN_TIMED_S: dict[str, float] = {"cpu": 0.0, "mock": 0.0, "cuda": 2.0}


class MeasureSettings(Strict):
    """Timing discipline: how the timed steps are cut into windows, when a measurement
    counts as taken on a busy machine, and the paired K-step equivalence check
    (``advanced.measure.*``)."""

    # The paired equivalence check (autotune.study.evidence): every workload-door trial records the
    # training losses of its first check_steps optimizer steps (the study's seed: the same
    # initial weights and batches in every trial); 0 turns the check off (then no trial
    # inherits an accuracy: every one trains the budget).
    check_steps: int = Field(20, ge=0)
    # A candidate is "the same computation" when its first-step loss and its K-step
    # trajectory stay within check_margin times the baseline's float64 twin's divergence
    # (the floating-point floor). 100: on the shipped MNIST CNN (fp32, AdamW, 2-core Xeon)
    # channels_last's first-step divergence was 25x the twin's and bf16's 2,500x
    # (docs/research/evidence.md).
    check_margin: float = Field(100.0, gt=1, allow_inf_nan=False)
    # A run that inherits its accuracy (the same math as a measured trial: seconds, not the
    # budget) times this many steps after its warm-up (at most one epoch, at least the
    # windows' minimum): 60 steps of the shipped MNIST CNN are about 1.2 s on a 2-core CPU.
    timing_steps: int = Field(60, ge=1)

    windows: int = Field(5, ge=1)  # timed windows; throughput is their median
    min_window_steps: int = Field(2, ge=1)  # fewer windows are used if steps run short
    # The timed windows cover at least this many seconds: when the budget's windows are
    # shorter, timing-only steps after the evaluation make up the rest (accuracy unaffected).
    # None: the device's default (min_timed_s_on): 0 on a CPU, where on the 2-core CPU of
    # docs/benchmarks.md 2 s did not narrow the spread between fresh processes (it is per
    # process, not per window) and cost 2 s per trial; 2 s on CUDA, where a small model's
    # budget times a few milliseconds per window while the GPU's clocks ramp up.
    min_timed_s: float | None = Field(None, ge=0)
    # A run during whose timed windows other processes used more than this share of the CPUs
    # it may run on is flagged "measured on a busy machine" in every output, a busy study
    # trial is timed again (advanced.trial.busy_retimes) and a busy verification run is run
    # again (advanced.verify.busy_rerun_budget); 1 turns the flag off. 0.10:
    # pyperf calls a benchmark unstable past a comparable bound (a standard deviation above
    # 10 % of the mean); on a 2-core CPU a busy loop on one core (50 %) cut a configuration's
    # 28,594 samples/s to 744.
    max_other_cpu_share: float = Field(0.10, ge=0, le=1)
    # Inductor's and Triton's caches of every trial and verification run (CompileCache):
    # study (a directory of the study's own, so its timings do not depend on what compiled
    # on the machine before; its verification runs compile warm), trial (each run compiles
    # cold: fair, and slow where verification re-runs the same configuration), or shared.
    compile_cache: CompileCache = "study"

    def min_timed_s_on(self, device_kind: str) -> float:
        """The seconds the timed windows cover at least on ``device_kind`` (``cpu``,
        ``cuda``, ``mock``): ``min_timed_s``, or :data:`DEFAULT_MIN_TIMED_S`'s when unset."""
        if self.min_timed_s is not None:
            return self.min_timed_s
        return DEFAULT_MIN_TIMED_S.get(device_kind, 0.0)


class BudgetOptions(Strict):
    """What a study may spend, in full runs of the baseline (``budget.*``): one full run is
    the baseline trial's measured run (its wall seconds, process start and evaluation
    included), the user's own training over ``train.epochs``.

    Attributes:
        full_runs: the cap on the study's cost: every trial's and verification run's wall
            seconds, over the baseline's measured run. The search may spend
            ``advanced.budget.search_share`` of it: its exploring trials run eager (compile
            modes are tried on the baseline's model later); past half of that, every later
            trial keeps
            the baseline's model and global batch: a change of how it runs is timed with the
            paired check (seconds, not the budget), each other precision trains its
            evidence once (its other configurations reuse it), and the fastest of them, once
            it leads, trains at the batch sizes next to the baseline's (a dynamics change:
            :func:`autotune.study.baseline.leader_batch_variants`); at all of it, the search stops before
            ``--trials`` and says so (:func:`autotune.study.cost.budget_stage`); and a search trial
            slower than 0.9x the baseline in its first two windows stops there. The verification
            gets what is left: the dearest finalists left out first (the screen's first whose
            own metric meets the tolerance last), then fewer confirmation rounds (3 at least);
            its notes say what it gave up
            (:func:`autotune.study.verification.fit_budget`). Below
            ``advanced.budget.trained_evidence_full_runs``, no run trains the budget (short
            evidence: :attr:`BudgetSettings.short_evidence`). None: no cap.
    """

    full_runs: float | None = Field(None, gt=0, allow_inf_nan=False)


class AdvancedBudgetSettings(Strict):
    """How the cost cap is split (``advanced.budget.*``).

    Attributes:
        search_share: the search's share of ``budget.full_runs``, in (0, 1]; the
            verification gets the rest. 0.6: the main job's search then times every change
            that keeps the math on a 2-core CPU, and its verification 10 timed rounds
            (docs/research/evidence.md).
    """

    search_share: float = Field(0.6, gt=0, le=1, allow_inf_nan=False)
    # Below this cap (budget.full_runs), the budget cannot hold a trained baseline plus the
    # non-inferiority confirmation of one trained answer (3 rounds of two full runs: 7 full
    # runs), so learning evidence comes from the first evidence_share of the budget's steps.
    trained_evidence_full_runs: float = Field(7.0, gt=0, allow_inf_nan=False)
    # The share of the budget's optimizer steps a learning-evidence run trains under such a
    # cap: "a paired run of K steps (a few % of the budget)", every run at equal samples seen.
    evidence_share: float = Field(0.05, gt=0, le=0.5, allow_inf_nan=False)


class BudgetSettings(BudgetOptions, AdvancedBudgetSettings):
    """The cost cap as a run applies it: ``budget.*`` and ``advanced.budget.*``
    (:attr:`autotune.core.config.SearchSpace.budget_settings`)."""

    @property
    def short_evidence(self) -> bool:
        """Whether learning evidence comes from the first ``evidence_share`` of the budget's
        steps: a cap (``full_runs``) below ``trained_evidence_full_runs``. Then no run
        trains the budget: the baseline and every numerics, dynamics or model change stop
        at that share and are evaluated there (:attr:`TrainSettings.evidence_share`), every
        same-math change is timed and inherits, and one full run's seconds are projected
        from the baseline's run (:mod:`autotune.study.cost`)."""
        return self.full_runs is not None and self.full_runs < self.trained_evidence_full_runs


class TrialSettings(Strict):
    """How each trial process is run (``trial.*``; the research knobs are
    ``advanced.trial.*``)."""

    timeout_s: float = Field(600.0, gt=0)  # wall-clock limit of one trial, compile included


class AdvancedTrialSettings(Strict):
    """How a study runs, stops and re-times its trials (``advanced.trial.*``)."""

    # Optuna heartbeat of a running trial; a trial silent for 3 beats (its process was killed)
    # is marked failed and its configuration retried once.
    heartbeat_s: int = Field(10, ge=1)
    # In a throughput study's search, once the baseline trial is measured, a trial whose first
    # two timed windows run below this share of the baseline's throughput stops there,
    # infeasible (failure=too_slow, its throughput kept): the slower, more accurate end of the front
    # (a few times slower than the baseline) stays measured. 0: no such stop. The throughput
    # counterpart of advanced.train.max_time_vs_baseline; verification runs are not stopped
    # by it.
    min_throughput_vs_baseline: float = Field(0.1, ge=0, lt=1, allow_inf_nan=False)
    # Per study trial: a trial measured on a busy machine (other processes above
    # advanced.measure.max_other_cpu_share of the CPUs) is timed again, up to this many
    # times, until a run is not busy. A re-time keeps the trial's own validation metric (its
    # math is the same) and runs only the warm-up and the timed windows; the least busy run
    # counts, so the sampler models the configuration's speed, not the machine's load. 0:
    # never (the trial stays flagged). (Verification spends advanced.verify.busy_rerun_budget
    # instead.)
    busy_retimes: int = Field(1, ge=0)


#: What ``advanced.mock.fault`` makes the trials it names do on purpose (:class:`MockSettings`).
MockFault = Literal["none", "oom", "error", "crash", "hang"]
#: Simulated machines of the mock device (autotune.core.hardware.simulated.PROFILE_NAMES).
MockProfileName = Literal["default", "h100", "a100", "v100", "t4", "cpu"]


class MockOptions(Strict):
    """The simulated ``mock`` device's machine (``mock.*``; its faults are
    ``advanced.mock.*``, :class:`MockSettings`)."""

    # The simulated machine: default (a small 64 MiB GPU), h100 (8 GPUs), a100 (4), v100, t4,
    # or cpu (no GPU).
    profile: MockProfileName = "default"


class MockSettings(Strict):
    """Faults of the simulated ``mock`` device, on purpose (``advanced.mock.*``).

    ``fault`` makes the trials numbered in ``fault_trials`` (all trials when empty) fail on
    purpose, to exercise failure handling: ``oom`` (out of memory), ``error`` (an exception),
    ``crash`` (the process dies by SIGSEGV) or ``hang`` (never returns; see trial.timeout_s).
    """

    fault: MockFault = "none"
    fault_trials: list[int] = Field(default_factory=list)


class HardwareSettings(Strict):
    """How the device's measured or published figures shape the space
    (``advanced.hardware.*``).

    ``min_peak_ratio``: before a new study opens, a precision whose matmul peak FLOP/s on this
    device is below this share of fp32's (the baseline's precision, never screened) is
    removed from the space and said so (:func:`autotune.core.hardware.screen_precisions`). The
    peaks are the run header's: measured on the CPU, published for a known CUDA GPU, the
    profile's on the mock device. ``0`` keeps every precision. A study stores its screen and
    keeps it when resumed.
    """

    # 0.1: a precision at a tenth of fp32's peak or less cannot make a trial faster than fp32
    # where matmuls and convolutions dominate (2.47 of 304 GFLOP/s fp16 on a 2-core Xeon
    # without native fp16 spent 72 % of a 50-trial study on fp16 trials; README, Hardware).
    min_peak_ratio: float = Field(0.1, ge=0, le=1, allow_inf_nan=False)

    @field_validator("min_peak_ratio", mode="before")
    @classmethod
    def _a_number(cls, value: object) -> object:
        if isinstance(value, bool):
            raise ValueError(f"must be a number from 0 to 1, not {str(value).lower()}")
        return value


class VerifyOptions(Strict):
    """Verification of the finalists once a study reaches its trials (``verify.*``; the
    research knobs are ``advanced.verify.*``).

    Three steps (:mod:`autotune.study.verification`): the *screen* keeps the search trials faster
    than the baseline whose metric is not below the baseline's by more than the tolerance
    plus ``advanced.verify.screen_z`` standard errors of the difference; the *race* re-runs
    the baseline and up to ``advanced.verify.candidates`` of them for each answer (same
    model, model change) over ``advanced.verify.race_rounds`` rounds of fresh processes and
    keeps one survivor per answer and evidence (trained, or inherited with the paired
    check); the *confirmation* re-runs the baseline and the survivors over ``rounds`` rounds with fresh seeds, and only it makes the claims. ``rounds=0`` turns
    verification off.

    ``rounds`` is at least 3: with 2 rounds the 95 % interval's t(0.975, 1) = 12.7 makes any
    claim impossible. The default 8 is what a true 1.3x speedup at equal accuracy needs to be
    recommended in at least 80 % of verifications, at the ~9 % run-to-run throughput spread of
    a 2-core CPU and with its accuracy shown non-inferior (the paired difference's 95 %
    interval above -0.5 pt) on 2,000 validation images: the accuracy, not the speed, sets it
    (a t test alone, accuracy drawn binomially per run: 5 rounds 55 %, 6: 71 %, 7: 81 %,
    8: 88 %; docs/benchmarks.md, "Verification power").
    """

    rounds: int = Field(8, ge=0)  # confirmation rounds (each: baseline + the survivors)
    # How far (accuracy points; 0.5 = 0.005) below the baseline's a candidate may be.
    accuracy_tolerance_pt: float = Field(0.5, ge=0, le=100)

    @field_validator("rounds")
    @classmethod
    def _at_least_three(cls, rounds: int) -> int:
        if rounds in (1, 2):
            raise ValueError(
                "must be 0 (off) or >= 3: with 2 rounds the 95 % interval's t(0.975, 1) = "
                "12.7 makes any claim impossible"
            )
        return rounds


class AdvancedVerifySettings(Strict):
    """The screen, the race and busy runs of verification (``advanced.verify.*``)."""

    race_rounds: int = Field(2, ge=1)  # race rounds (each: baseline + every finalist)
    candidates: int = Field(3, ge=1)  # finalists per answer in the race besides the baseline
    # Standard errors of the accuracy difference the screen adds to the tolerance (one-sided
    # 95 %: 1.645).
    screen_z: float = Field(1.645, ge=0, le=10)
    # Per verification: the re-runs it may spend, all runs together, on runs measured on a
    # busy machine (other processes above advanced.measure.max_other_cpu_share of the CPUs):
    # each busy run is run again in full at once, until one is not busy or the budget is
    # spent; then the verdict says how many of its runs were busy. (A study trial is re-timed
    # per trial instead: advanced.trial.busy_retimes.)
    busy_rerun_budget: int = Field(2, ge=0)
    # Confirmation rounds when every finalist inherits its accuracy (identical or the same
    # computation): timed steps and the paired check, no training to the budget, so at least
    # this many (verify.rounds when larger).
    timing_rounds: int = Field(10, ge=3)


class VerifySettings(VerifyOptions, AdvancedVerifySettings):
    """Everything a verification is given (:func:`autotune.verify_study`): ``verify.*`` and
    ``advanced.verify.*`` in one (:meth:`autotune.core.config.RunConfig.verify_settings`)."""


class AdvancedSettings(Strict):
    """The research knobs, each group named as the main group it refines (``advanced:`` in a
    space file, ``advanced.*`` overrides). Their defaults are the measured ones
    (docs/research/); most studies never set them."""

    search: SearchSettings = SearchSettings()
    budget: AdvancedBudgetSettings = AdvancedBudgetSettings()
    measure: MeasureSettings = MeasureSettings()
    train: AdvancedTrainSettings = AdvancedTrainSettings()
    data: AdvancedDataSettings = AdvancedDataSettings()
    trial: AdvancedTrialSettings = AdvancedTrialSettings()
    verify: AdvancedVerifySettings = AdvancedVerifySettings()
    hardware: HardwareSettings = HardwareSettings()
    mock: MockSettings = MockSettings()
