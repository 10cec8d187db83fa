"""The objective: the function Optuna calls per trial (:class:`TrialObjective`), and the
policies it applies, each a small function of its own.

The objective turns the sampler's parameters into a frozen :class:`TrialConfig`, checks it
against the device's feasibility rules, runs it in a child process, and stores every figure
as a trial user attribute (units in the names). A trial that fails (out of memory, error,
crash, timeout) is still a data point: it completes with the worst objective values, its
``failure`` attribute says why, and it is marked infeasible through Optuna's constraints so
samplers learn the boundary and it never reaches the Pareto front. A configuration the
device cannot run at all is never launched, but it is reported to the sampler the same way
(``failure=infeasible``): a pruned trial teaches the sampler nothing, and it would propose
the configuration again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from autotune.core.config import (
    Constraints,
    MockFault,
    MockSettings,
    ReusedMetric,
    RunConfig,
    SearchSpace,
    TrainSettings,
    TrialConfig,
    math_key,
)
from autotune.core.exceptions import SurplusTrial, TrialError
from autotune.core.goodput import goodput_sps, statistical_efficiency
from autotune.core.hardware import DeviceCapabilities
from autotune.study.baseline import BASELINE_ATTR, baseline_params, baseline_trial
from autotune.study.cost import floor_vs_baseline, projected_full_run_s
from autotune.study.evidence import (
    CheckFloor,
    EvidenceClass,
    check_equivalence,
    check_floor,
    class_by_knobs,
    source_floor,
)
from autotune.study.feasibility import trial_infeasibility_reason
from autotune.study.objectives import (
    OBJECTIVES,
    Objective,
    ObjectiveMode,
    failed_values,
    metric_objective,
    objective_mode,
    objective_values,
)
from autotune.study.search._opening import knob_trial_config
from autotune.study.search._samplers import OneThreadSampler
from autotune.study.trial_result import (
    MATH_KEY_ATTR,
    METRIC_FROM_TRIAL_ATTR,
    TRIAL_CONFIG_ATTR,
    TrialResult,
)
from autotune.trial.measure import BUSY_ATTR, Measurement

__all__ = [
    "EVAL_EVERY_SHARE",
    "MATH_KEY_ATTR",
    "METRIC_FROM_TRIAL_ATTR",
    "RunTrialFn",
    "SurplusTrial",
    "TrialObjective",
    "eval_every_s",
    "fastest_same_computation",
    "goodput_attrs",
    "has_check",
    "is_surplus",
    "mock_fault",
    "reuse_source",
    "throughput_floor",
    "time_limit_s",
    "trial_constraints",
    "with_full_run",
    "worst_measured",
]

#: States that hold one of the study's ``--trials`` slots: finished, running or queued.
_CLAIMING_STATES = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING, TrialState.WAITING)
#: Failures worth one more try (a flaky crash); out of memory and timeouts would repeat.
_RETRIED_FAILURES = ("error", "crash")
#: How a trial is run: its configuration (its wall-clock limit in it: ``timeout_s``) -> its
#: measurement (:func:`autotune.study.search.run_trial`; tests inject fakes).
RunTrialFn = Callable[[TrialConfig], Measurement]


#: A time-to-accuracy study without a cadence of its own evaluates every this share of the
#: baseline's time to the target (:meth:`TrialObjective._warm_baseline`).
EVAL_EVERY_SHARE = 0.1


# --------------------------------------------------------------------------------------------
# The objective's policies, each a function of what it decides from


def is_surplus(trial_number: int, claimed: Sequence[FrozenTrial], n_trials: int | None) -> bool:
    """True when ``n_trials`` trials numbered below ``trial_number`` are among ``claimed``
    (the study's trials finished or under way: :data:`_CLAIMING_STATES`).

    Trial numbers are handed out atomically by the storage, so this rule lets exactly
    ``n_trials`` trials run however many workers share the study; None: no limit.
    """
    if n_trials is None:
        return False
    return sum(t.number < trial_number for t in claimed) >= n_trials


def mock_fault(caps: DeviceCapabilities, mock: MockSettings, number: int) -> MockFault:
    """The fault the mock device injects into trial ``number`` (``none`` off the mock)."""
    if caps.kind != "mock" or (mock.fault_trials and number not in mock.fault_trials):
        return "none"
    return mock.fault


def throughput_floor(base: FrozenTrial, ratio: float) -> float | None:
    """The throughput (samples/s) below which a throughput trial stops after its first timed
    window: ``ratio`` times the baseline trial's measured throughput. A trial that slow
    takes most of a study's seconds, and one window already teaches the sampler its
    throughput. None without a measured baseline (it failed) or with the ratio 0."""
    result = TrialResult.from_trial(base)
    if not ratio or result.failed or not result.throughput_sps:
        return None
    return ratio * result.throughput_sps


def fastest_same_computation(completed: Sequence[FrozenTrial]) -> TrialResult | None:
    """The fastest of ``completed`` whose accuracy is the baseline's by its paired check: a
    feasible trial of evidence class ``identical`` or ``same_computation`` (the check held
    against the baseline's losses, :mod:`autotune.study.evidence`) that inherited its
    accuracy and was not measured on a busy machine; None without one.

    Under a cost cap it is the bar a trained trial must reach
    (:meth:`TrialObjective._with_throughput_floor`): a change of the math that runs slower
    than a change already known to keep the baseline's accuracy cannot be the faster
    answer, so training it buys no evidence the verdict can use."""
    fastest: TrialResult | None = None
    for trial in completed:
        result = TrialResult.from_trial(trial)
        if (
            result.evidence_class not in ("identical", "same_computation")
            or result.accuracy_source != "inherited"
            or not result.feasible
            or result.busy_machine
            or not result.throughput_sps
        ):
            continue
        if fastest is None or result.throughput_sps > (fastest.throughput_sps or 0.0):
            fastest = result
    return fastest


def time_limit_s(train: TrainSettings, base: FrozenTrial) -> float | None:
    """A time-to-accuracy trial's stop: ``advanced.train.max_time_vs_baseline`` times the baseline
    trial's time to accuracy, or ``train.max_time_s`` if smaller; None when the ratio is not
    set or the baseline has no time to accuracy (the trial keeps ``train.max_time_s``)."""
    base_s = TrialResult.from_trial(base).time_to_accuracy_s
    if train.max_time_vs_baseline is None or not base_s:
        return None
    limit_s = train.max_time_vs_baseline * base_s
    if train.max_time_s is not None:
        limit_s = min(limit_s, train.max_time_s)
    return limit_s


def eval_every_s(train: TrainSettings, cold: Measurement) -> float | None:
    """The evaluation cadence a time-to-accuracy study takes from the baseline's discarded
    run ``cold``: every :data:`EVAL_EVERY_SHARE` of its time to the target, so that the
    clock's resolution is finer than the differences it ranks. None when the space sets a
    cadence or the run missed the target."""
    if train.has_eval_cadence or not cold.target_reached or not cold.time_to_accuracy_s:
        return None
    return EVAL_EVERY_SHARE * cold.time_to_accuracy_s


def reuse_source(
    completed: Sequence[FrozenTrial],
    trial_number: int,
    key: str,
    tta: bool,
    params: Mapping[str, Any] | None = None,
) -> TrialResult | None:
    """The trial whose metric trial ``trial_number`` reuses: among ``completed`` with the
    same math key (``key``) that were measured in full, completed without failure (in a
    time-to-accuracy study, one that reached the target) and did not themselves reuse a
    metric, the one whose knobs differ from ``params`` (the trial's) in the fewest places
    that can reorder the arithmetic (outside :data:`ARITHMETIC_NEUTRAL_KNOBS`), then in the
    fewest places, the earliest among equals; None when there is none. The nearest source keeps the paired
    check sharp: two bf16 trials that differ only in DataLoader workers are identical, while
    a compiled bf16 source differs from an eager one by bf16's rounding of another fusion,
    beyond the float32 floor."""
    candidates: list[TrialResult] = []
    for trial in completed:
        source = TrialResult.from_trial(trial)
        if (
            source.number == trial_number
            or source.math_key != key
            or source.failed
            or source.metric_from_trial is not None
            or source.val_metric is None
            or source.steps is None
            or (tta and source.target_reached is not True)
        ):
            continue
        candidates.append(source)
    if not candidates or params is None:
        return candidates[0] if candidates else None

    def differences(source: TrialResult) -> tuple[int, int]:
        names = set(params) | set(source.params)
        differ = {n for n in names if params.get(n) != source.params.get(n)}
        return len(differ - ARITHMETIC_NEUTRAL_KNOBS), len(differ)

    return min(candidates, key=lambda source: (differences(source), source.number))


#: Knobs that never touch the arithmetic (the same losses bit for bit: DataLoader workers
#: load the same batches; the allocator's segments place the same tensors): a reuse source
#: that differs from a trial only in these is nearer than one that differs in a knob that
#: reorders the arithmetic (memory format, compile mode), where bf16's rounding can part.
ARITHMETIC_NEUTRAL_KNOBS = frozenset({"num_workers", "cuda_expandable_segments"})


def has_check(config: TrialConfig) -> bool:
    """Whether ``config``'s runs record the paired check's losses: a throughput trial of the
    workload door on a device that trains (or simulates) with ``advanced.measure.check_steps``
    above 0 (:mod:`autotune.study.evidence`)."""
    return (
        config.objective == "throughput"
        and config.workload.door == "workload"
        and config.measure.check_steps > 0
    )


def _judged_words(measurement: Measurement) -> str:
    """What a ``too_slow`` stop was judged on, in words: its timed windows' throughputs, or
    the steady steps of its early stretches (:class:`~autotune.trial.measure.ThroughputFloor`)."""
    windows = measurement.window_throughputs_sps
    if len(windows) > 1:
        figures = " and ".join(f"{w:,.0f}" for w in windows)
        return f"its first {len(windows)} timed windows ran {figures} samples/s, each"
    steps = measurement.timed_steps
    return (
        f"{measurement.throughput_sps:,.0f} samples/s over {steps} steady step{'s' * (steps != 1)},"
    )


def _study_floor(completed: Sequence[FrozenTrial]) -> CheckFloor | None:
    """The check's floor the study's baseline trial recorded; None without one."""
    base = baseline_trial(completed)
    if base is None:
        return None
    result = TrialResult.from_trial(base)
    if result.check_floor_first is None or result.check_floor_max is None:
        return None
    return CheckFloor(
        result.check_floor_first, result.check_floor_max, result.check_floor_source or "floor"
    )


def with_full_run(full: Measurement, run: Measurement) -> Measurement:
    """A re-timed ``run``'s timing figures with the full run's training figures and memory
    (``steps``, ``train_s``, ``train_loss``, ``compile_s``, peak memory and its kind,
    ``val_samples``, ``extra``'s compile-cache and memory figures): other processes change
    how fast a run is, not what it trained or the memory it took."""
    full_run_extra = {
        k: v for k, v in full.extra.items() if k.startswith("compile_cache") or "memory" in k
    }
    return replace(
        run,
        steps=full.steps,
        train_s=full.train_s,
        train_loss=full.train_loss,
        compile_s=full.compile_s,
        peak_memory_bytes=full.peak_memory_bytes,
        memory_kind=full.memory_kind,
        val_samples=full.val_samples,
        extra={**run.extra, **full_run_extra},
    )


def goodput_attrs(
    samples_per_step: int, throughput_sps: float, base: TrialResult | None
) -> dict[str, float]:
    """A global-batch change's goodput figures against the baseline trial ``base``:
    ``statistical_efficiency`` (AdaptDL's E(B) = (B_noise + B0) / (B_noise + B), Qiao et al.,
    OSDI '21, eq. 5) and ``goodput_sps`` (throughput x E(B), samples/s of the baseline's
    batch), from the noise scale B_noise the baseline's run measured.

    Args:
        samples_per_step: the trial's global batch B (samples per optimizer step).
        throughput_sps: its measured throughput (samples/s).
        base: the study's baseline trial (None: not finished yet).

    Returns:
        The two user attributes; empty for the baseline's own global batch, or where the
        baseline has no resolved noise scale (not probed, or the noise drowned the signal).
    """
    if base is None or base.samples_per_step is None or samples_per_step == base.samples_per_step:
        return {}
    noise = base.gradient_noise_scale
    if noise is None or not noise > 0 or samples_per_step < 1:
        return {}
    efficiency = statistical_efficiency(samples_per_step, base.samples_per_step, noise)
    return {
        "statistical_efficiency": efficiency,
        "goodput_sps": goodput_sps(throughput_sps, efficiency),
    }


def trial_constraints(
    measurement: Measurement | None, limits: Constraints, tta: bool
) -> dict[str, float]:
    """A trial's feasibility as Optuna constraints (> 0 means violated), in order.

    Every trial of a study gets the same constraint keys (GPSampler requires it):
    ``failed`` always, ``target_not_reached`` in a time-to-accuracy study (``tta``), plus
    one per limit the space sets (``limits``). A failed trial (``measurement`` None) is
    infeasible through ``failed`` alone; its other constraints read 0.
    """
    constraints = {"failed": 0.0 if measurement is not None else 1.0}
    if tta:
        missed = measurement is not None and not measurement.target_reached
        constraints["target_not_reached"] = 1.0 if missed else 0.0
    if limits.max_memory_bytes is not None:
        excess = (
            0.0
            if measurement is None
            else measurement.peak_memory_bytes - int(limits.max_memory_bytes)
        )
        constraints["max_memory_bytes"] = float(excess)
    if limits.min_accuracy is not None:
        shortfall = 0.0 if measurement is None else limits.min_accuracy - measurement.val_metric
        constraints["min_accuracy"] = shortfall
    return constraints


def worst_measured(completed: Sequence[FrozenTrial], index: int) -> float | None:
    """The largest value of objective ``index`` among the measured trials of ``completed``
    (in a time-to-accuracy study, those that reached the target); None when there is none."""
    measured = [
        t.values[index]
        for t in completed
        if t.values is not None
        and not (result := TrialResult.from_trial(t)).failed
        and result.target_reached is not False
    ]
    return max(measured, default=None)


class TrialObjective:
    """The function Optuna calls per trial: sample, check, run in isolation, record.

    Args:
        config: the run (seed, timeout, device).
        space: the space restricted to what the device can run.
        caps: the device's capabilities.
        run_trial: runs a :class:`TrialConfig` within its ``timeout_s`` and returns its measurement
            (``autotune.study.search.run_trial``; tests inject fakes).
        n_trials: the study's target; a trial beyond it (several workers asked at once) is not
            run but stopped as :class:`SurplusTrial`.
        objectives: the study's objectives; their mode is the run's ``objective``.

    Raises:
        ValueError: the objectives' mode is not ``config.objective``.

    Returns (when called):
        ``(throughput_sps, val_metric, peak_memory_bytes)``, or ``(time_to_accuracy_s,
        peak_memory_bytes)`` with ``objective=time_to_accuracy``
        (:func:`autotune.study.objectives.objective_values`).

    A configuration the device's feasibility rules refuse is not launched; it completes with
    the failed values and ``failure=infeasible``, like a trial that ran out of memory.

    Raises (when called):
        SurplusTrial: the study already holds or is running ``n_trials`` trials.
    """

    def __init__(
        self,
        config: RunConfig,
        space: SearchSpace,
        caps: DeviceCapabilities,
        run_trial: RunTrialFn,
        n_trials: int | None = None,
        objectives: tuple[Objective, ...] = OBJECTIVES,
    ) -> None:
        self._objectives = objectives
        # The study's mode, derived once: every trial configuration carries the run's
        # ``objective`` (config.RunConfig), and the objectives follow it.
        self._mode: ObjectiveMode = objective_mode(objectives)
        if self._mode != config.objective:
            raise ValueError(
                f"TrialObjective(config, ..., objectives): the objectives are a {self._mode} "
                f"study's, but config.objective is {config.objective}"
            )
        self._tta = self._mode == "time_to_accuracy"
        self._sampler_s_seen = 0.0  # the sampler's seconds already attributed to a trial
        self._config = config
        self._space = space
        self._caps = caps
        self._run_trial_fn = run_trial
        self._n_trials = n_trials
        self._run_s = 0.0  # wall seconds of the current trial's runs (user attribute run_s)
        baseline, _ = baseline_params(space)
        self._baseline_params: dict[str, Any] = baseline

    def _run_trial(self, config: TrialConfig) -> Measurement:
        """Run ``config`` in child processes; its wall seconds count towards the trial's
        ``run_s`` (its cost, a failed run's included; on the mock device the simulated
        training seconds)."""
        started = time.perf_counter()
        simulated_s = 0.0
        try:
            measurement = self._run_trial_fn(config)
            simulated_s = measurement.train_s
            return measurement
        finally:
            # The mock device costs its simulated seconds, not the wall's (SIMULATED).
            self._run_s += simulated_s if self._caps.simulated else time.perf_counter() - started

    def trial_config(self, trial: optuna.Trial) -> TrialConfig:
        """Ask the sampler for every knob and freeze the complete configuration.

        Every trial trains with the study's seed (common random numbers: the same
        initialization and data order, so that accuracy differences come from the knobs, not
        from luck); only verification rounds use other seeds. The learning rate's reference
        batch is the baseline's global batch unless the space sets one
        (:func:`autotune.study.baseline.trial_train_settings`).
        """
        knobs = {name: param.suggest(trial, name) for name, param in self._space.knobs().items()}
        # Validated here: the sampler's values and the device kind are checked by the model.
        return knob_trial_config(
            self._config, self._space, self._caps, knobs, self._mock_fault(trial.number)
        )

    def _with_study_cadence(self, trial: optuna.Trial, config: TrialConfig) -> TrialConfig:
        """In a time-to-accuracy study whose space sets no evaluation cadence, the cadence
        the baseline trial derived (user attribute ``eval_every_s``, see
        :meth:`_warm_baseline`); else the configuration as it is. Part of the configuration
        a trial stores (:data:`~autotune.study.trial_result.TRIAL_CONFIG_ATTR`): a verification run
        of it evaluates as the trial did."""
        if not self._tta:
            return config
        base = baseline_trial(trial.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
        if base is None or base.number == trial.number:
            return config
        every_s = TrialResult.from_trial(base).eval_every_s
        if not every_s:
            return config
        return config.model_copy(update={"train": config.train.with_default_cadence(every_s)})

    def _with_search_stops(self, trial: optuna.Trial, config: TrialConfig) -> TrialConfig:
        """What a search trial takes from the baseline trial to stop early, never stored with
        its configuration (no verification run has it). In a throughput study: the floor of
        :meth:`_with_throughput_floor`. In a time-to-accuracy study: a stop at
        ``advanced.train.max_time_vs_baseline`` times its time to accuracy (or
        ``train.max_time_s``, the smaller), recorded as the user attribute ``time_limit_s``.
        Without a baseline that reached the target (the baseline itself, or a baseline that
        missed it), the limit is ``train.max_time_s`` alone."""
        completed = trial.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        base = baseline_trial(completed)
        if base is None or base.number == trial.number:
            return config
        if not self._tta:
            return self._with_throughput_floor(trial, config, base, completed)
        limit_s = time_limit_s(config.train, base)
        if limit_s is None:
            return config
        trial.set_user_attr("time_limit_s", limit_s)
        return config.model_copy(
            update={"train": config.train.model_copy(update={"max_time_s": limit_s})}
        )

    def _with_throughput_floor(
        self,
        trial: optuna.Trial,
        config: TrialConfig,
        base: FrozenTrial,
        completed: Sequence[FrozenTrial],
    ) -> TrialConfig:
        """A throughput trial stops after its first two timed windows when both run below
        ``advanced.trial.min_throughput_vs_baseline`` times the baseline trial's measured
        throughput (:class:`~autotune.trial.measure.ThroughputFloor`), or under a cost cap
        (``budget.full_runs``) :data:`~autotune.study.cost.CAPPED_FLOOR_VS_BASELINE` times it
        (``config.min_throughput_sps``, also the user attribute ``min_throughput_sps``;
        :func:`throughput_floor`; ``completed``: the study's complete trials, ``base``
        among them).

        Under a cost cap, a trial that trains (it reuses no metric: a numerics, dynamics or
        model change) has the higher floor of the same share of the fastest trial whose
        accuracy is the baseline's by its paired check (:func:`fastest_same_computation`;
        user attribute ``min_throughput_from_trial``): it could not be a faster answer, and
        its training is the search's dearest evidence. The main job on a 2-core Xeon trained
        two bf16 trials at 0.80x and 0.61x of its timed channels_last trial (2.7 of the
        search's 11.7 full runs), and neither could be the answer."""
        floor_sps = throughput_floor(base, self._floor_ratio)
        if floor_sps is None:
            return config
        if self._space.budget_settings.full_runs is not None and config.reuse is None:
            fastest = fastest_same_computation(completed)
            trained_floor_sps = (
                self._floor_ratio * (fastest.throughput_sps or 0.0) if fastest else 0.0
            )
            if fastest is not None and trained_floor_sps > floor_sps:
                floor_sps = trained_floor_sps
                trial.set_user_attr("min_throughput_from_trial", fastest.number)
        trial.set_user_attr("min_throughput_sps", floor_sps)
        return config.model_copy(update={"min_throughput_sps": floor_sps})

    def _warm_baseline(self, trial: optuna.Trial, config: TrialConfig) -> TrialConfig:
        """Run the baseline trial's configuration once and discard it, so that the figure
        every later trial is compared with is measured warm.

        The study's first trial process pays for cold caches (the forkserver's first fork,
        the page cache, the CPU's clock), and a baseline measured cold makes every
        comparison with it too kind. The discarded run's figures are kept as
        ``cold_throughput_sps`` (and ``cold_time_to_accuracy_s``).

        A throughput study's discarded run is short: the float64 twin (:meth:`_run_twin`) where
        the paired check runs, else the timed windows (:meth:`_run_timed_warm_up`). A
        time-to-accuracy study's trains to its target, and where the space sets no evaluation
        cadence, it also sets it: the measured run and every later trial evaluate every
        :data:`EVAL_EVERY_SHARE` (10 %) of the discarded run's time to the target (user
        attribute ``eval_every_s``, :func:`eval_every_s`). A discarded run that failed or missed
        the target leaves the cadence as it is.

        Raises:
            TrialError: a throughput study's timed warm-up run failed with an error
                (:meth:`_run_timed_warm_up`).
        """
        if not trial.user_attrs.get(BASELINE_ATTR):
            return config
        if has_check(config):
            self._run_twin(trial, config)
            return config
        if not self._tta:
            self._run_timed_warm_up(trial, config)
            return config
        try:
            cold = self._run_trial(config)
        except TrialError:
            return config  # the measured run will fail too, and record why
        trial.set_user_attr("cold_throughput_sps", cold.throughput_sps)
        trial.set_user_attr("cold_time_to_accuracy_s", cold.time_to_accuracy_s)
        every_s = eval_every_s(config.train, cold)
        if every_s is None:
            return config
        trial.set_user_attr("eval_every_s", every_s)
        return config.model_copy(update={"train": config.train.with_default_cadence(every_s)})

    def _run_timed_warm_up(self, trial: optuna.Trial, config: TrialConfig) -> None:
        """The baseline's discarded warm-up run in a throughput study without the paired check
        (a door's study, or ``advanced.measure.check_steps: 0``): its warm-up and timed
        windows only, not the budget, then the user's own code after the loop, whose
        evaluation and ``report`` a door checks and discards
        (:meth:`~autotune.core.config.ReusedMetric.warm_up`). It warms what the first trial
        process pays for (the forkserver's first fork, the page cache, the CPU's clock) for
        seconds rather than a second full run, and a fault of the user's code that a full run
        shows only after the budget (no ``trial.report()``, a metric that is not a number or
        an accuracy in percent, a crash in the evaluation) shows here. User attribute:
        ``cold_throughput_sps``.

        Raises:
            TrialError: the warm-up run failed with an error (an exception in the trial
                process: the user's code, or a door's usage rule): the measured run would fail
                the same way after training the budget, so the baseline fails now, with its
                reason. A crash, an out-of-memory or a timeout is left to the measured run.
        """
        warm_up = config.model_copy(update={"reuse": ReusedMetric.warm_up(trial.number)})
        try:
            cold = self._run_trial(warm_up)
        except TrialError as e:
            if e.failure == "error":
                raise
            return
        trial.set_user_attr("cold_throughput_sps", cold.throughput_sps)

    def _run_twin(self, trial: optuna.Trial, config: TrialConfig) -> None:
        """The baseline's discarded warm-up run, as its float64 twin (:mod:`autotune.study.evidence`):
        its warm-up and short timed windows only, no evaluation. It warms what the first trial
        process pays for (the forkserver's first fork, the page cache, the CPU's clock), and
        its first K losses are the floor of every paired check. User attributes:
        ``cold_throughput_sps`` (float64's: not comparable with fp32's), ``twin_check_losses``,
        or ``twin_failure`` (then the float32 epsilon is the floor)."""
        twin = config.model_copy(
            update={
                "twin": "float64",
                # Timing only: nothing of it is evaluated (the metric is a placeholder).
                "reuse": ReusedMetric.placeholder(trial.number),
            }
        )
        try:
            cold = self._run_trial(twin)
        except TrialError as e:
            trial.set_user_attr("twin_failure", f"{e.failure}: {e.detail.strip()[-300:]}")
            return
        trial.set_user_attr("cold_throughput_sps", cold.throughput_sps)
        losses = cold.extra.get("check_losses")
        if losses:
            trial.set_user_attr("twin_check_losses", list(losses))
        else:
            trial.set_user_attr("twin_failure", "the twin recorded no check losses")

    def _with_evidence(
        self, trial: optuna.Trial, config: TrialConfig, measurement: Measurement
    ) -> tuple[TrialConfig, Measurement]:
        """Name what the trial changes against the baseline, by measured evidence, and the
        source of its accuracy (user attributes ``evidence_class``, ``accuracy_source``,
        ``evidence_detail`` and the check's figures; :mod:`autotune.study.evidence`).

        The baseline records the check's floor (its float64 twin's divergence). A trial
        that ran timing only (``config.reuse``: the same math key as a measured trial) is
        judged by the paired check against that trial's losses: ``identical`` or
        ``same_computation``, and it inherits the accuracy; a check that diverged runs the
        trial again over the full budget, evaluated (``numerics``, ``evidence_detail``
        says why). Any other trial is classed by its knobs (``model``, ``dynamics``,
        ``numerics``), its accuracy measured.

        Returns:
            The configuration that was measured and its measurement (the full run's, where
            the check diverged).

        Raises:
            TrialError: the full run after a diverged check failed.
        """
        losses = list(measurement.extra.get("check_losses") or ())
        if measurement.too_slow:
            return config, measurement
        if trial.user_attrs.get(BASELINE_ATTR):
            twin = trial.user_attrs.get("twin_check_losses")
            own = check_floor(losses, twin, str(trial.user_attrs.get("twin_failure") or ""))
            self._set_evidence(trial, "baseline", "measured", measurement=measurement)
            if losses:
                trial.set_user_attr("check_steps", len(losses))
                trial.set_user_attr("check_floor_first", own.first)
                trial.set_user_attr("check_floor_max", own.trajectory)
                trial.set_user_attr("check_floor_source", own.source)
            return config, measurement
        by_knobs = class_by_knobs(
            trial.params,
            self._baseline_params,
            self._space.model.knobs,
            config.train.global_batch_size is not None,
        )
        if config.reuse is None:
            self._set_evidence(trial, by_knobs, "measured", measurement=measurement)
            return config, measurement
        completed = trial.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        source = next(
            (TrialResult.from_trial(t) for t in completed if t.number == config.reuse.from_trial),
            None,
        )
        floor = _study_floor(completed)
        if floor is not None and source is not None:
            fixed = config.train.global_batch_size is not None
            floor = self._floor_for_source(
                completed, source, floor, config.measure.check_margin, fixed
            )
        if source is None or not source.check_losses or not losses or floor is None:
            self._set_evidence(
                trial,
                by_knobs,
                "inherited_unchecked",
                f"the same math key as trial {config.reuse.from_trial}; no paired check "
                "recorded (advanced.measure.check_steps=0, or a door without one)",
            )
            return config, measurement
        check = check_equivalence(losses, source.check_losses, floor, config.measure.check_margin)
        trial.set_user_attr("check_steps", check.steps)
        trial.set_user_attr("check_first_divergence", check.first_divergence)
        trial.set_user_attr("check_max_divergence", check.max_divergence)
        if check.passed:
            # The same computation as its source: against the baseline, the check's class
            # when the source is the baseline, else the source's (its knobs').
            same: EvidenceClass = (
                "identical" if check.verdict == "identical" else "same_computation"
            )
            evidence_class = same if source.baseline else by_knobs
            detail = f"against trial {source.number}: {check.detail}"
            self._set_evidence(trial, evidence_class, "inherited", detail)
            return config, measurement
        # The check diverged: the knobs outside the math key changed the numerics here (a
        # BatchNorm over smaller micro-batches, an op that mishandles channels_last): train
        # the budget and evaluate.
        full = config.model_copy(update={"reuse": None})
        measured = self._run_with_retry(trial, full)
        self._set_evidence(
            trial,
            "numerics",
            "measured",
            f"fell from the same computation (the paired check against trial "
            f"{source.number} {check.detail}); trained and evaluated",
            measured,
        )
        return full, measured

    def _floor_for_source(
        self,
        completed: Sequence[FrozenTrial],
        source: TrialResult,
        floor: CheckFloor,
        margin: float,
        global_batch_fixed: bool,
    ) -> CheckFloor:
        """The check's floor against ``source``: the study's, or, where the source runs the
        baseline's model at another precision, twice that precision's measured distance from
        the float64 twin (:func:`~autotune.study.evidence.source_floor`).

        The distance is measured on the baseline's model and global batch, where the twin is
        exact arithmetic of the same steps: the source's own when it is such a trial (a
        ``numerics`` change: a bf16 trial whose compiled variant is checked against it), else
        the earliest measured trial at its precision that is (for a bf16 trial at another
        global batch, a ``dynamics`` change, whose own steps the twin does not take; the
        study's floor is carried across batches the same way). A model change keeps the
        study's floor: no twin measures its arithmetic."""
        precision = source.params.get("precision")
        base = baseline_trial(completed)
        if precision is None or precision == self._baseline_params.get("precision") or not base:
            return floor

        def class_of(params: Mapping[str, Any]) -> EvidenceClass:
            return class_by_knobs(
                params, self._baseline_params, self._space.model.knobs, global_batch_fixed
            )

        by_knobs = class_of(source.params)
        if by_knobs not in ("numerics", "dynamics"):
            return floor
        measured = source if by_knobs == "numerics" else None
        for trial in completed if measured is None else ():
            other = TrialResult.from_trial(trial)
            if (
                other.params.get("precision") == precision
                and other.accuracy_source == "measured"
                and other.check_losses
                and class_of(other.params) == "numerics"
            ):
                measured = other
                break
        if measured is None or not measured.check_losses:
            return floor
        baseline = TrialResult.from_trial(base)
        exact = baseline.twin_check_losses or baseline.check_losses
        name = f"trial {measured.number} ({precision}"
        name += ")" if measured is source else ", at the baseline's global batch)"
        return source_floor(floor, margin, measured.check_losses, exact, name)

    @staticmethod
    def _record_full_run(trial: optuna.Trial, run_s: float, measurement: Measurement) -> None:
        """The unit of the study's cost (user attribute ``full_run_s``): the baseline's
        measured run's wall seconds, ``run_s``; under short evidence, where it stopped at a
        share of the budget (:attr:`Measurement.budget_steps`), projected over the whole budget
        (:func:`autotune.study.cost.projected_full_run_s`; ``full_run_projected``)."""
        budget_steps = measurement.budget_steps
        if not budget_steps or measurement.too_slow or measurement.steps >= budget_steps:
            trial.set_user_attr("full_run_s", run_s)
            return
        projected_s = projected_full_run_s(
            run_s, measurement.steps, budget_steps, measurement.step_time_s
        )
        trial.set_user_attr("full_run_s", projected_s)
        trial.set_user_attr("full_run_projected", True)

    @staticmethod
    def _set_evidence(
        trial: optuna.Trial,
        evidence_class: EvidenceClass,
        source: str,
        detail: str = "",
        measurement: Measurement | None = None,
    ) -> None:
        """Record the class, the accuracy's source and the detail; a measured accuracy
        from a short-evidence run (:attr:`Measurement.budget_steps`) says where it
        stopped."""
        trial.set_user_attr("evidence_class", evidence_class)
        trial.set_user_attr("accuracy_source", source)
        budget_steps = measurement.budget_steps if measurement is not None else None
        if source == "measured" and budget_steps and measurement is not None:
            short = (
                f"measured after {measurement.steps:,} of the budget's {budget_steps:,} "
                "steps (short evidence: budget.full_runs is below "
                "advanced.budget.trained_evidence_full_runs)"
            )
            detail = f"{detail}; {short}" if detail else short
        if detail:
            trial.set_user_attr("evidence_detail", detail)

    @staticmethod
    def _set_goodput(trial: optuna.Trial, measurement: Measurement) -> None:
        """Record a global-batch change's E(B) and goodput against the baseline trial
        (:func:`goodput_attrs`); nothing for the baseline's batch."""
        completed = trial.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        found = baseline_trial(completed)
        base = TrialResult.from_trial(found) if found is not None else None
        attrs = goodput_attrs(measurement.samples_per_step, measurement.throughput_sps, base)
        for name, value in attrs.items():
            trial.set_user_attr(name, value)

    def _with_reuse(self, trial: optuna.Trial, config: TrialConfig, key: str) -> TrialConfig:
        """The configuration with ``reuse`` set when ``advanced.search.reuse_metric`` is on and a
        finished trial with the same math key (``key``) was measured in full: the earliest
        such trial that completed without failure (in a time-to-accuracy study, one that
        reached the target) and did not itself reuse a metric. Its validation metric and
        training loss, and its steps and evaluations to the target, go with the trial, which
        then runs only its warm-up and timed windows (:mod:`autotune.trial.training`). The baseline
        trial always trains in full (it is what every speedup is measured against), and so
        does every verification run (its configuration is rebuilt from the stored knobs,
        without ``reuse``)."""
        if not self._space.advanced.search.reuse_metric or trial.user_attrs.get(BASELINE_ATTR):
            return config
        completed = trial.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        source = reuse_source(completed, trial.number, key, self._tta, trial.params)
        if source is None:
            return config
        reuse = source.reused_metric(self._tta)
        return config.model_copy(update={"reuse": reuse})

    def _remeasure_while_busy(
        self, trial: optuna.Trial, config: TrialConfig, measurement: Measurement
    ) -> Measurement:
        """The trial's measurement, timed again while it was taken on a busy machine.

        A run whose timed windows saw other processes above ``advanced.measure.max_other_cpu_share``
        of the CPUs is followed by another, up to ``advanced.trial.busy_retimes`` re-runs, until
        the kept run is not busy. A re-run reuses the trial's own validation metric
        (``reuse``: the math is the same, so it runs only its warm-up and timed windows; in a
        time-to-accuracy study only a run that reached the target is re-timed). The run kept
        is the least busy one (the lowest share of other processes; a re-run stopped as too
        slow, its floor passed by the full run, is never kept): its timing figures count,
        while the training's own figures (``steps``, ``train_s``, ``train_loss``,
        ``compile_s``, ``val_samples``, ``extra``'s compile-cache counts) stay the full
        run's, so a later trial can reuse this one, and so does its memory (peak, kind and
        ``extra``'s memory figures: other processes do not change it, and a run without
        evaluation could read lower than every fully trained trial). User attributes, when a
        re-run was made: ``busy_remeasures`` (re-runs), ``busy_run_shares`` (the other
        processes' share of every run, the full run first), ``busy_remeasure_s`` (the
        re-runs' wall seconds, as ``run_s`` counts them: a verification prices a run of the
        trial without them); ``busy_remeasure_failure`` when a re-run failed (the runs before
        it stand).
        """
        threshold = config.measure.max_other_cpu_share
        tta = self._tta
        first = kept = measurement
        shares = [] if first.other_cpu_share is None else [first.other_cpu_share]
        reruns, spent_s = 0, 0.0
        rerun_config: TrialConfig | None = None  # made at the first re-run
        while (
            reruns < self._config.advanced.trial.busy_retimes
            and kept.other_cpu_share is not None
            and kept.busy(threshold)
            and not kept.too_slow
            and (not tta or kept.target_reached is True)
        ):
            if rerun_config is None:  # the metric the trial reused, or its own
                reuse = config.reuse or ReusedMetric(
                    from_trial=trial.number,
                    val_metric=first.val_metric,
                    train_loss=first.train_loss,
                    steps=first.steps,
                    evaluations=len(first.metric_curve) if tta else 0,
                )
                rerun_config = config.model_copy(update={"reuse": reuse})
            before_s = self._run_s
            try:
                again = self._run_trial(rerun_config)
            except TrialError as e:
                trial.set_user_attr("busy_remeasure_failure", f"{e.failure}: {e.detail[-500:]}")
                break
            reruns += 1
            spent_s += self._run_s - before_s
            if again.other_cpu_share is None:  # not measured: nothing to compare it by
                break
            shares.append(again.other_cpu_share)
            if not again.too_slow and again.other_cpu_share < kept.other_cpu_share:
                kept = with_full_run(first, again)
        if reruns:
            trial.set_user_attr("busy_remeasures", reruns)
            trial.set_user_attr("busy_run_shares", shares)
            trial.set_user_attr("busy_remeasure_s", spent_s)
        return kept

    def _mock_fault(self, number: int) -> MockFault:
        return mock_fault(self._caps, self._config.advanced.mock, number)

    def _is_surplus(self, trial: optuna.Trial) -> bool:
        """True when ``n_trials`` trials numbered below this one are finished or under way
        (:func:`is_surplus`)."""
        if self._n_trials is None:
            return False
        claimed = trial.study.get_trials(deepcopy=False, states=_CLAIMING_STATES)
        return is_surplus(trial.number, claimed, self._n_trials)

    def _run_with_retry(self, trial: optuna.Trial, config: TrialConfig) -> Measurement:
        """Run the trial; an error or crash (not oom or timeout) gets one more try."""
        try:
            return self._run_trial(config)
        except TrialError as first:
            if first.failure not in _RETRIED_FAILURES:
                raise
            trial.set_user_attr("retried_after", f"{first.failure}: {first.detail[-500:]}")
            return self._run_trial(config)

    def _set_constraints(self, trial: optuna.Trial, measurement: Measurement | None) -> None:
        """Record feasibility as Optuna constraints (> 0 means violated;
        :func:`trial_constraints`)."""
        for name, value in trial_constraints(
            measurement, self._space.constraints, self._tta
        ).items():
            trial.set_constraint(name, value)

    def _record_sampler_time(self, trial: optuna.Trial) -> None:
        """Store the seconds the sampler spent proposing this trial's parameters as the user
        attribute ``sampler_s`` (relative and independent sampling; measured by
        :class:`autotune.study.search._samplers.OneThreadSampler`, absent with another sampler)."""
        sampler = trial.study.sampler
        if isinstance(sampler, OneThreadSampler):
            trial.set_user_attr("sampler_s", sampler.sampler_s - self._sampler_s_seen)
            self._sampler_s_seen = sampler.sampler_s

    def _worst_measured(self, trial: optuna.Trial, index: int) -> float | None:
        """The largest value of objective ``index`` among the study's measured trials (in a
        time-to-accuracy study, those that reached the target; :func:`worst_measured`)."""
        completed = trial.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        return worst_measured(completed, index)

    def _record_failure(self, trial: optuna.Trial, failure: str, detail: str) -> tuple[float, ...]:
        """A trial without a measurement (never launched, or failed): why, as constraints,
        and the worst objective values, so the sampler learns from it."""
        trial.set_user_attr("failure", failure)
        trial.set_user_attr("failure_detail", detail[-2000:])
        self._set_constraints(trial, None)
        mode = self._mode
        if mode == "time_to_accuracy":
            worst_s = self._worst_measured(trial, 0)
            return failed_values(self._caps.memory_bytes, mode=mode, worst_time_s=worst_s)
        metric = metric_objective(self._objectives)
        assert metric is not None  # the throughput mode has its metric among the objectives
        worst = None if metric.maximized else self._worst_measured(trial, 1)
        return failed_values(self._caps.memory_bytes, metric.direction, worst)

    @property
    def _floor_ratio(self) -> float:
        """The floor's share of the baseline's throughput (:func:`autotune.study.cost.floor_vs_baseline`)."""
        asked = self._config.advanced.trial.min_throughput_vs_baseline
        return floor_vs_baseline(asked, self._space.budget_settings)

    def _floor_words(self, from_trial: int | None = None) -> str:
        """Where the floor comes from, in words: the baseline's throughput, or
        ``from_trial``'s (:func:`fastest_same_computation`)."""
        asked = self._config.advanced.trial.min_throughput_vs_baseline
        if from_trial is not None:
            return (
                f"{self._floor_ratio:g} x trial {from_trial}'s, the fastest with the "
                "baseline's accuracy by its paired check, under budget.full_runs: a slower "
                "change of the math cannot be a faster answer, and is not trained"
            )
        if self._floor_ratio != asked:
            return (
                f"{self._floor_ratio:g} x the baseline's under budget.full_runs: a slower trial "
                "cannot be a faster answer"
            )
        return f"advanced.trial.min_throughput_vs_baseline={asked:g} x the baseline's"

    def _record_too_slow(self, trial: optuna.Trial, measurement: Measurement) -> tuple[float, ...]:
        """A trial stopped below its floor (:meth:`_with_throughput_floor`): failed
        as ``too_slow`` (infeasible), with its measured throughput and memory as objective
        values, so the sampler learns how slow it was; its metric, never evaluated, is the
        worst (as for any failure)."""
        floor_sps = float(trial.user_attrs.get("min_throughput_sps") or 0.0)
        from_trial = trial.user_attrs.get("min_throughput_from_trial")
        values = self._record_failure(
            trial,
            "too_slow",
            f"{_judged_words(measurement)} below the floor of "
            f"{floor_sps:,.0f} samples/s ({self._floor_words(from_trial)})",
        )
        return (measurement.throughput_sps, values[1], float(measurement.peak_memory_bytes))

    def __call__(self, trial: optuna.Trial) -> tuple[float, ...]:
        if self._is_surplus(trial):
            trial.set_user_attr("failure", "surplus")
            trial.study.stop()
            raise SurplusTrial(f"trial {trial.number}: the study already has its trials")
        config = self._with_study_cadence(trial, self.trial_config(trial))
        trial.set_user_attr(TRIAL_CONFIG_ATTR, config.model_dump(mode="json"))
        trial.set_user_attr("simulated", self._caps.simulated)
        self._record_sampler_time(trial)
        reason = trial_infeasibility_reason(config, self._caps)
        if reason is not None:
            return self._record_failure(trial, "infeasible", reason)
        key = math_key(config)
        trial.set_user_attr(MATH_KEY_ATTR, key)
        config = self._with_reuse(trial, config, key)
        self._run_s = 0.0
        try:
            if trial.user_attrs.get(BASELINE_ATTR):
                config = self._warm_baseline(trial, config)  # it may derive the cadence
                trial.set_user_attr(TRIAL_CONFIG_ATTR, config.model_dump(mode="json"))
            config = self._with_search_stops(trial, config)
            before_s = self._run_s
            measurement = self._run_with_retry(trial, config)
            if trial.user_attrs.get(BASELINE_ATTR):  # one full run: the unit of the cost
                self._record_full_run(trial, self._run_s - before_s, measurement)
            config, measurement = self._with_evidence(trial, config, measurement)
        except TrialError as e:
            trial.set_user_attr("run_s", self._run_s)
            return self._record_failure(trial, e.failure, e.detail)
        measurement = self._remeasure_while_busy(trial, config, measurement)
        trial.set_user_attr("run_s", self._run_s)
        for name, value in measurement.as_user_attrs().items():
            trial.set_user_attr(name, value)
        if config.reuse is not None and not measurement.too_slow:
            trial.set_user_attr(METRIC_FROM_TRIAL_ATTR, config.reuse.from_trial)
        if measurement.other_cpu_share is not None:
            # Flagged under the threshold in force when it was measured (every output reads it).
            busy = measurement.busy(config.measure.max_other_cpu_share)
            trial.set_user_attr(BUSY_ATTR, busy)
        if measurement.too_slow:
            return self._record_too_slow(trial, measurement)
        self._set_constraints(trial, measurement)
        mode = self._mode
        if mode == "throughput":
            self._set_goodput(trial, measurement)
        values = objective_values(measurement, mode)
        if mode == "time_to_accuracy" and not measurement.target_reached:
            # No time to accuracy: at least the seconds it trained, and no better than any
            # trial that reached the target (it is infeasible besides).
            values = (max(values[0], self._worst_measured(trial, 0) or 0.0), values[1])
        return values
