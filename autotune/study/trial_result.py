"""One finished trial's figures, typed: :class:`TrialResult`, the one reader of a trial's
Optuna user attributes; and its study's counterpart, :class:`StudyAttributes`, the one reader
of a study's.

A trial's figures are written once, as Optuna user attributes, by the study process
(``study.TrialObjective``: :meth:`autotune.trial.measure.Measurement.as_user_attrs`, plus the
study's own marks: ``failure``, ``baseline``, ``busy_machine``, ``metric_from_trial``, ...).
Every reader (the results tables' rows, the report, the CSV, the console, the verification
screen, the API) reads them through :meth:`TrialResult.from_trial`, never from
``trial.user_attrs``: a figure's name, its unit and what a missing or malformed value reads as
are decided here, once.

Each field is the user attribute of the same name (``failure_kind`` is ``failure``), with its
unit in its name (``_sps`` samples/s, ``_s`` seconds, ``_bytes`` bytes). A field typed
``float | None``, ``int | None``, ``str | None`` or ``bool | None`` is read by its type
(:func:`_read`): a value of another type (a bool for a number, a number for a text) reads as
None, like an absent one. So a new figure is one annotated line here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from optuna.trial import TrialState

from autotune.core.config import ReusedMetric
from autotune.trial.measure import BUSY_ATTR

if TYPE_CHECKING:
    from optuna.trial import FrozenTrial

__all__ = [
    "BASELINE_ATTR",
    "FAILURE_ATTR",
    "FIGURE_COLUMNS",
    "MATH_KEY_ATTR",
    "METRIC_FROM_TRIAL_ATTR",
    "STUDY_RECORD_ATTR",
    "TRIAL_CONFIG_ATTR",
    "WARM_START_ATTR",
    "FigureColumn",
    "StudyAttributes",
    "TrialResult",
]

#: The trial user attribute that marks the baseline (:mod:`autotune.study.baseline`).
BASELINE_ATTR = "baseline"
#: The trial user attribute of a trial that produced no measurement: its kind (``oom``,
#: ``error``, ``crash``, ``timeout``, ``infeasible``, ``too_slow``, ``surplus``).
FAILURE_ATTR = "failure"
#: The trial user attribute holding its configuration's math key (:func:`autotune.core.config.math_key`).
MATH_KEY_ATTR = "math_key"
#: The trial user attribute naming the trial whose metric a trial reused (its number).
METRIC_FROM_TRIAL_ATTR = "metric_from_trial"
#: The trial user attribute holding the configuration it ran, as JSON
#: (``TrialConfig.model_dump(mode="json")``), set by the objective before the run: the
#: knobs, the study's settings and the evaluation cadence it took from the baseline, without
#: the search's own stops (the throughput floor, a time-to-accuracy time limit, a reused
#: metric), which no verification run has. The results tables store it as it is.
TRIAL_CONFIG_ATTR = "trial_config"
#: The user attribute of a trial queued from another study's Pareto front (``warm_start=``).
WARM_START_ATTR = "warm_start_from"
#: The study user attribute holding autotune's record of the study (its space, device,
#: objectives, precision screen, target), written once when the study is created
#: (:func:`autotune.study.search.open_study`).
STUDY_RECORD_ATTR = "autotune"


def _float(value: object) -> float | None:
    """A stored number as a float; None when absent or not a number (a bool is not)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _int(value: object) -> int | None:
    """A stored count as an int (a float truncated, as the results rows always read it);
    None when absent, not a number (a bool is not) or not finite."""
    number = _float(value)
    return int(number) if number is not None and math.isfinite(number) else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _bool(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


#: How a field of each annotated type reads its user attribute.
_READERS: dict[str, Callable[[object], Any]] = {
    "float | None": _float,
    "int | None": _int,
    "str | None": _str,
    "bool | None": _bool,
}
#: Fields stored under another user attribute's name.
_ATTR_NAMES = {"failure_kind": FAILURE_ATTR, "busy_machine": BUSY_ATTR}


def _curve(value: object) -> tuple[tuple[float, int, float], ...]:
    """``metric_curve``'s evaluations, ``(wall_s, step, metric)`` each; malformed points are
    left out, a value that is no list reads as none."""
    if not isinstance(value, list):
        return ()
    points: list[tuple[float, int, float]] = []
    for point in value:
        if isinstance(point, (list, tuple)) and len(point) == 3:
            wall_s, step, metric = point
            if all(isinstance(v, (int, float)) for v in (wall_s, step, metric)):
                points.append((float(wall_s), int(step), float(metric)))
    return tuple(points)


def _shares(value: object) -> tuple[float, ...]:
    """A list of numbers (``busy_run_shares``, ``check_losses``), in order (none for
    anything else)."""
    if not isinstance(value, list):
        return ()
    return tuple(share for share in map(_float, value) if share is not None)


def _config(value: object) -> dict[str, Any] | None:
    """A stored configuration (a JSON object), or None for anything else."""
    return dict(value) if isinstance(value, dict) else None


@dataclass(frozen=True)
class TrialResult:
    """What one trial recorded, typed (None: not recorded, or not a value of its type).

    Attributes:
        number: Optuna's trial number.
        state: Optuna's state of the trial.
        values: its objective values (None while it has none).
        params: its knobs, by Optuna parameter name.
        constraints: its Optuna constraints (a value above 0 is broken).
        failure_kind: why it produced no measurement (``oom``, ``error``, ``crash``,
            ``timeout``, ``infeasible``, ``too_slow``, ``surplus``); None when measured.
        failure_detail: the end of the error output, or the broken rule.
        baseline: the study's baseline trial.
        simulated: the mock device produced it.
        throughput_sps: global training samples/s (median of the timed windows).
        throughput_iqr_sps: interquartile range of the window throughputs.
        step_time_s: median seconds per optimizer step.
        step_time_p90_s: 90th percentile seconds per optimizer step.
        compile_s: seconds torch.compile added before the first timed step.
        val_metric: the workload's validation metric (``val_accuracy`` in studies written
            before workloads).
        train_loss: mean training loss over the last epoch.
        train_s: wall seconds of the training loop.
        flops_per_sample: model FLOPs per training sample.
        mfu: model FLOP/s utilization, in [0, 1].
        energy_j_per_sample: joules per training sample.
        time_to_accuracy_s: wall seconds to the target (time-to-accuracy trials that met it).
        eval_s: seconds spent evaluating, inside ``time_to_accuracy_s``.
        eval_every_s: the evaluation cadence the baseline trial of a time-to-accuracy study
            derived.
        target: a time-to-accuracy trial's quality target.
        other_cpu_share: the share of the trial's CPUs other processes used while timed.
        load_avg_1m: the machine's 1-minute load average at the end of the timed windows.
        lr_scale: a door's learning-rate factor.
        min_throughput_sps: the throughput floor the trial ran under.
        peak_memory_bytes: peak memory (see ``memory_kind``).
        warmup_peak_memory_bytes: CUDA: the warm-up's allocator peak, kept apart from
            ``peak_memory_bytes``.
        process_memory_bytes: CUDA: NVML's memory of the trial's processes, summed over
            ranks.
        parameters: trainable parameters.
        samples_per_step: global batch.
        steps: optimizer steps taken.
        timed_steps: steps inside the timed windows.
        val_samples: validation samples ``val_metric`` was computed on.
        metric_from_trial: the trial whose metric this one reused (the same math key).
        busy_remeasures: how many times a busy trial was timed again.
        busy_remeasure_s: the wall seconds of those re-runs (part of ``run_s``).
        memory_kind: what ``peak_memory_bytes`` is.
        math_key: the trial's math key (:func:`autotune.core.config.math_key`): trials with equal
            keys learn the same, so one may reuse the other's metric.
        warm_start_from: ``study#trial`` of a trial queued by ``warm_start=``; None otherwise.
        compile_cache: ``cold``, ``warm`` or ``partly warm``.
        target_reached: time-to-accuracy trials: whether the metric met the target; None in
            a throughput trial.
        busy_machine: measured on a busy machine (the ``busy_machine`` attribute); None when
            not judged.
        metric_curve: time-to-accuracy trials: ``(wall_s, step, metric)`` per evaluation.
        busy_run_shares: the other processes' CPU share of each run of a trial timed again
            (the first, busy, run first).
        evidence_class: what it changes against the baseline, by measured evidence
            (:data:`autotune.study.evidence.EVIDENCE_CLASSES`: ``baseline``, ``identical``,
            ``same_computation``, ``numerics``, ``dynamics``, ``model``).
        accuracy_source: ``measured``, ``inherited`` (with a passed check) or
            ``inherited_unchecked`` (:data:`autotune.study.evidence.ACCURACY_SOURCES`).
        evidence_detail: the check's line (what was compared, against which bound), or why
            a trial fell to another class.
        check_steps: the steps its paired check compared.
        check_first_divergence: the check's relative divergence at the first step.
        check_max_divergence: the check's largest relative divergence over its steps.
        check_floor_first: the baseline's floor at the first step (its float64 twin's
            divergence); the baseline trial only.
        check_floor_max: the floor over the checked steps; the baseline trial only.
        check_floor_source: ``float64 twin``, or why the float32 epsilon stands in.
        run_s: wall seconds of every run the trial made (process start, training,
            evaluation; the baseline's discarded twin, retries and re-timings included).
        full_run_s: the baseline trial only: wall seconds of its measured run, one full
            run: the unit of a study's cost.
        budget_steps: a run stopped at a share of the budget (short evidence,
            :attr:`autotune.core.config.BudgetSettings.short_evidence`): the budget's optimizer
            steps, of which it trained ``steps`` and was evaluated there; None: it trained the
            budget (or was timed).
        full_run_projected: the baseline trial only: ``full_run_s`` is projected from its
            short-evidence run (:func:`autotune.study.cost.projected_full_run_s`), not measured.
        gradient_noise_scale: the baseline trial only: B_simple in samples, the gradient noise
            scale its run measured (:class:`autotune.core.goodput.NoiseScaleEma`); None where not
            probed or not resolved.
        statistical_efficiency: a trial whose global batch differs from the baseline's:
            E(B) against the baseline's batch and noise scale
            (:func:`autotune.core.goodput.statistical_efficiency`); None otherwise.
        goodput_sps: with ``statistical_efficiency``: throughput x E(B), in samples/s of the
            baseline's batch (:func:`autotune.core.goodput.goodput_sps`).
        check_losses: its first K steps' training losses (the paired check's record).
        twin_check_losses: the baseline trial only: its float64 twin's losses.
        trial_config: the configuration it ran, as JSON (:data:`TRIAL_CONFIG_ATTR`); None for
            a trial that never reached the objective (or one written without it).
    """

    number: int
    state: TrialState
    values: tuple[float, ...] | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    constraints: Mapping[str, float] = field(default_factory=dict)
    failure_kind: str | None = None
    failure_detail: str | None = None
    baseline: bool = False
    simulated: bool = False
    throughput_sps: float | None = None
    throughput_iqr_sps: float | None = None
    step_time_s: float | None = None
    step_time_p90_s: float | None = None
    compile_s: float | None = None
    val_metric: float | None = None
    train_loss: float | None = None
    train_s: float | None = None
    flops_per_sample: float | None = None
    mfu: float | None = None
    energy_j_per_sample: float | None = None
    time_to_accuracy_s: float | None = None
    eval_s: float | None = None
    eval_every_s: float | None = None
    target: float | None = None
    other_cpu_share: float | None = None
    load_avg_1m: float | None = None
    lr_scale: float | None = None
    min_throughput_sps: float | None = None
    peak_memory_bytes: int | None = None
    process_memory_bytes: int | None = None
    warmup_peak_memory_bytes: int | None = None
    parameters: int | None = None
    samples_per_step: int | None = None
    steps: int | None = None
    timed_steps: int | None = None
    val_samples: int | None = None
    metric_from_trial: int | None = None
    busy_remeasures: int | None = None
    busy_remeasure_s: float | None = None
    memory_kind: str | None = None
    math_key: str | None = None
    warm_start_from: str | None = None
    compile_cache: str | None = None
    target_reached: bool | None = None
    busy_machine: bool | None = None
    metric_curve: tuple[tuple[float, int, float], ...] = ()
    busy_run_shares: tuple[float, ...] = ()
    evidence_class: str | None = None
    accuracy_source: str | None = None
    evidence_detail: str | None = None
    check_steps: int | None = None
    check_first_divergence: float | None = None
    check_max_divergence: float | None = None
    check_floor_first: float | None = None
    check_floor_max: float | None = None
    check_floor_source: str | None = None
    run_s: float | None = None
    full_run_s: float | None = None
    budget_steps: int | None = None
    full_run_projected: bool | None = None
    gradient_noise_scale: float | None = None
    statistical_efficiency: float | None = None
    goodput_sps: float | None = None
    check_losses: tuple[float, ...] = ()
    twin_check_losses: tuple[float, ...] = ()
    trial_config: Mapping[str, Any] | None = None

    @classmethod
    def from_trial(cls, trial: FrozenTrial) -> TrialResult:
        """The result of ``trial`` (any state), read from its user attributes."""
        attrs = trial.user_attrs
        figures: dict[str, Any] = {
            name: read(attrs.get(attr)) for name, attr, read in _FIGURE_READERS
        }
        failure, detail = attrs.get(FAILURE_ATTR), attrs.get("failure_detail")
        # Any failure a trial recorded counts, whatever its type.
        figures["failure_kind"] = None if failure is None else str(failure)
        figures["failure_detail"] = None if detail is None else str(detail)
        shares = attrs.get("busy_run_shares")
        return cls(
            number=trial.number,
            state=trial.state,
            values=tuple(trial.values) if trial.values is not None else None,
            params=dict(trial.params),
            constraints=dict(trial.constraints),
            **figures,
            baseline=bool(attrs.get(BASELINE_ATTR)),
            simulated=bool(attrs.get("simulated")),
            metric_curve=_curve(attrs.get("metric_curve")),
            busy_run_shares=_shares(shares),
            check_losses=_shares(attrs.get("check_losses")),
            twin_check_losses=_shares(attrs.get("twin_check_losses")),
            trial_config=_config(attrs.get(TRIAL_CONFIG_ATTR)),
        )

    def reused_metric(self, tta: bool = False) -> ReusedMetric:
        """What a timed run of another configuration with this trial's math takes from it
        instead of training: its validation metric, training loss and steps, and in a
        time-to-accuracy study (``tta``) its evaluations up to the target.

        Raises:
            ValueError: this trial has no ``val_metric`` or ``steps`` (nothing measured to
                take).
        """
        if self.val_metric is None or self.steps is None:
            raise ValueError(
                f"TrialResult.reused_metric: trial {self.number} has no val_metric or steps"
            )
        return ReusedMetric(
            from_trial=self.number,
            val_metric=self.val_metric,
            train_loss=self.train_loss if self.train_loss is not None else float("nan"),
            steps=self.steps,
            evaluations=len(self.metric_curve) if tta else 0,
        )

    @property
    def inherits_accuracy(self) -> bool:
        """Its accuracy is another trial's (the same math key), not its own evaluation."""
        return self.accuracy_source in ("inherited", "inherited_unchecked")

    @property
    def evidence_steps_text(self) -> str:
        """Where a short-evidence run stopped: ``after 30 of the budget's 600 steps``; ``""``
        for a run that trained the budget."""
        if self.budget_steps is None or self.steps is None:
            return ""
        return f"after {self.steps:,} of the budget's {self.budget_steps:,} steps"

    @property
    def failed(self) -> bool:
        """Produced no measurement: it carries a ``failure`` kind (a never-launched
        infeasible trial, a ``too_slow`` one and a ``surplus`` one included)."""
        return self.failure_kind is not None

    @property
    def measured(self) -> bool:
        """COMPLETE without a failure: its figures and objective values are a measurement."""
        return self.state == TrialState.COMPLETE and not self.failed

    @property
    def feasible(self) -> bool:
        """Measured and within every Optuna constraint (all <= 0)."""
        return self.measured and all(v <= 0 for v in self.constraints.values())

    @property
    def time_to_accuracy(self) -> bool:
        """A trial of a time-to-accuracy study that trained (it says whether it met the
        target)."""
        return self.target_reached is not None

    @property
    def busy(self) -> bool:
        """Flagged as measured on a busy machine."""
        return self.busy_machine is True

    @property
    def last_failure_line(self) -> str:
        """The last line of ``failure_detail``, stripped (``""`` when none)."""
        lines = (self.failure_detail or "").strip().splitlines()
        return lines[-1] if lines else ""

    @property
    def seconds_trained_to_target(self) -> float | None:
        """A time-to-accuracy trial's seconds to beat: its time to accuracy, or where it
        missed the target, the seconds it trained (a lower bound)."""
        return self.time_to_accuracy_s if self.time_to_accuracy_s is not None else self.train_s


#: ``(field, attribute, reader)`` for each typed figure of :class:`TrialResult`, worked out
#: once: the samplers read every trial at every proposal.
_FIGURE_READERS: tuple[tuple[str, str, Callable[[object], Any]], ...] = tuple(
    (f.name, _ATTR_NAMES.get(f.name, f.name), _READERS[str(f.type)])
    for f in dataclasses.fields(TrialResult)
    if str(f.type) in _READERS
)


@dataclass(frozen=True)
class FigureColumn:
    """A further figure of a trial as an output column.

    Attributes:
        figure: the :class:`TrialResult` field it shows; the results row
            (:class:`~autotune.study.storage.TrialRecord`) stores the field of the same name, so
            ``trials --csv`` writes it too. Its unit, from its name (``_bytes``, ``_sps``,
            ``_s``), picks the cell's format.
        header: the column's header in the Pareto tables (terminal and HTML).
    """

    figure: str
    header: str


#: The column registry: a trial's further figures, each shown by the terminal's and the HTML's
#: Pareto tables after the objective mode's own figures, wherever a row has it
#: (:func:`autotune.study.report.figure_columns`). A new output column is a :class:`TrialResult`
#: field and an entry here (docs/architecture.md, "Where does a change go").
FIGURE_COLUMNS: tuple[FigureColumn, ...] = (
    FigureColumn("warmup_peak_memory_bytes", "warm-up peak MiB"),
    FigureColumn("statistical_efficiency", "E(B)"),
    FigureColumn("goodput_sps", "goodput samples/s"),
)


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


@dataclass(frozen=True)
class StudyAttributes:
    """A study's Optuna user attributes, typed: the one reader of them, as
    :class:`TrialResult` is of a trial's.

    The study process writes them when it opens the study: autotune's record
    (:data:`STUDY_RECORD_ATTR`, by :func:`autotune.study.search.open_study`) and the machine
    (``hardware``, ``hardware_changes``, by :func:`autotune.core.hardware.check_study_hardware`).
    Every other module reads them here, never from ``study.user_attrs``.

    Attributes:
        record: autotune's record as stored (empty for a study autotune did not make).
        space: the recorded search space (``model_dump(mode="json", exclude_defaults=True)``;
            empty without a record).
        device_kind: ``cpu``, ``cuda`` or ``mock``; None without a record.
        device_name: the device's name as detected; None without a record.
        simulated: the mock device ran it; None without a record.
        objective: ``throughput`` or ``time_to_accuracy``.
        target: a time-to-accuracy study's target (``metric``, ``direction``, ``value``);
            empty otherwise.
        precision_screen: the precision screen's record (:mod:`autotune.core.hardware`), None for
            a study made before the screen.
        hardware: the first machine's fingerprint (a mapping), None when not recorded.
        hardware_changes: each move to another machine, ``{"from_trial": N, "hardware":
            {...}}``, in order.
    """

    record: Mapping[str, Any] = field(default_factory=dict)
    space: Mapping[str, Any] = field(default_factory=dict)
    device_kind: str | None = None
    device_name: str | None = None
    simulated: bool | None = None
    objective: str = "throughput"
    target: Mapping[str, Any] = field(default_factory=dict)
    precision_screen: Mapping[str, Any] | None = None
    hardware: Mapping[str, Any] | None = None
    hardware_changes: tuple[Mapping[str, Any], ...] = ()

    @classmethod
    def from_attrs(cls, attrs: Mapping[str, Any]) -> StudyAttributes:
        """The attributes of a study from its ``user_attrs`` mapping (any missing or
        malformed entry reads as absent)."""
        record = _mapping(attrs.get(STUDY_RECORD_ATTR))
        screen = record.get("precision_screen")
        hardware = attrs.get("hardware")
        changes = attrs.get("hardware_changes")
        return cls(
            record=dict(record),
            space=dict(_mapping(record.get("space"))) if record else {},
            device_kind=_str(record.get("device_kind")),
            device_name=_str(record.get("device_name")),
            simulated=_bool(record.get("simulated")),
            objective=_str(record.get("objective")) or "throughput",
            target=dict(_mapping(record.get("target"))),
            precision_screen=screen if isinstance(screen, Mapping) else None,
            hardware=hardware if isinstance(hardware, Mapping) else None,
            hardware_changes=tuple(
                c for c in (changes if isinstance(changes, list) else []) if isinstance(c, Mapping)
            ),
        )

    @classmethod
    def from_study(cls, study: Any) -> StudyAttributes:
        """The attributes of ``study`` (an ``optuna.Study`` or a frozen one)."""
        return cls.from_attrs(study.user_attrs)

    @property
    def latest_hardware(self) -> Mapping[str, Any] | None:
        """The fingerprint of the machine the study measures on now: the newest change's,
        else the first; None when none was recorded."""
        if self.hardware_changes:
            found = self.hardware_changes[-1].get("hardware")
            return found if isinstance(found, Mapping) else None
        return self.hardware

    @property
    def names_baseline(self) -> bool:
        """The recorded space names the user's own baseline (``baseline:``)."""
        return bool(self.space.get("baseline"))

    @property
    def constraints(self) -> Mapping[str, Any]:
        """The recorded space's ``constraints`` (empty: none)."""
        return _mapping(self.space.get("constraints"))
