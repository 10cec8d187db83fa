"""Running a study: workers, resume, progress, then the verification of its finalists."""

from __future__ import annotations

import multiprocessing
import multiprocessing.process
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import optuna
from optuna.study import MaxTrialsCallback
from optuna.trial import FrozenTrial, TrialState

from autotune.core.config import BudgetSettings, RunConfig
from autotune.core.exceptions import AutotuneError, ConfigError, VerificationError
from autotune.core.hardware import DeviceCapabilities
from autotune.study.api._mfu import with_mfu
from autotune.study.api._prepare import PreparedRun, prepare_run
from autotune.study.api._verify import VerificationProgress, verify_open_study
from autotune.study.baseline import (
    enqueue_baseline,
    enqueue_eager_exploration,
    enqueue_same_model,
    enqueue_same_model_batch,
    failed_baseline,
    space_tried,
)
from autotune.study.cost import BudgetStage, SearchCost, budget_stage, search_cost
from autotune.study.objectives import objectives_of_study
from autotune.study.search import (
    RunTrialFn,
    SurplusTrial,
    TrialObjective,
    count_finished,
    open_study,
    run_trial,
    sigint_allowed,
    sigint_deferred,
    study_compile_cache,
    study_processes,
    trial_devices,
)
from autotune.study.storage import FINISHED_STATES, open_results_for_run, open_storage
from autotune.study.trial_result import TrialResult
from autotune.study.verification import VerificationSummary


@dataclass(frozen=True)
class StudyProgress:
    """A snapshot after each finished trial, for progress displays.

    Attributes:
        finished: trials counting towards the target (complete or infeasible).
        target: the ``--trials`` target.
        elapsed_s: seconds since this run started.
        best: best feasible value so far per objective name (max throughput, max accuracy,
            min memory), absent before the first feasible trial.
        last: the trial that just finished.
        cost: the search's cost so far, in full runs of the baseline (:mod:`autotune.study.cost`).
        note: a line to show once, e.g. that the cost cap now keeps the baseline's model.
    """

    finished: int
    target: int
    elapsed_s: float
    best: dict[str, float]
    last: FrozenTrial
    cost: SearchCost | None = None
    note: str | None = None


@dataclass(frozen=True)
class StudyResult:
    """What a run leaves behind.

    Attributes:
        study_name: the Optuna study name.
        storage: the storage URL.
        finished: trials counting towards the target after this run.
        ran: trials this run started.
        wall_s: seconds this run took.
        pareto_trials: the Pareto-optimal feasible trials (Optuna's ``best_trials``).
        capabilities: the device the trials ran on.
        removed_choices: choices dropped because the device can never run them, with reasons.
        verification: the verified verdict (None with ``verify.rounds=0``, in a worker
            process other than the first, or when the study cannot be verified).
        verification_note: why there is no verification, when the study cannot be verified
            (e.g. its baseline trial failed); None otherwise.
        search_cost: what the study's trials cost, in full runs of the baseline.
        baseline_failure: why the study stopped at its failed baseline trial
            (:func:`~autotune.study.baseline.failed_baseline`), one line; None otherwise.
    """

    study_name: str
    storage: str
    finished: int
    ran: int
    wall_s: float
    pareto_trials: list[FrozenTrial]
    capabilities: DeviceCapabilities
    removed_choices: list[str] = field(default_factory=list)
    verification: VerificationSummary | None = None
    verification_note: str | None = None
    search_cost: SearchCost | None = None
    baseline_failure: str | None = None


def _best_so_far(study: optuna.Study) -> dict[str, float]:
    feasible = [
        t
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if all(v <= 0 for v in t.constraints.values())
    ]
    best: dict[str, float] = {}
    for i, objective in enumerate(objectives_of_study(study)):
        values = [t.values[i] for t in feasible]
        if values:
            best[objective.name] = max(values, key=objective.gain)
    return best


#: Sampler seeds of the workers of one study differ by this much, so they propose different
#: configurations.
_WORKER_SEED_STRIDE = 100_003


def _worker_main(config: RunConfig, n_trials: int, worker_index: int) -> None:
    """Body of an extra worker process: the same study loop, without a display."""
    run_study(config, n_trials, worker_index=worker_index)


def _start_workers(config: RunConfig, n_trials: int) -> list[multiprocessing.process.BaseProcess]:
    """Start ``config.workers - 1`` extra worker processes (spawned: a clean interpreter)."""
    ctx = multiprocessing.get_context("spawn")
    procs: list[multiprocessing.process.BaseProcess] = []
    for index in range(1, config.workers):
        proc = ctx.Process(
            target=_worker_main, args=(config, n_trials, index), name=f"autotune-worker{index}"
        )
        proc.start()
        procs.append(proc)
    return procs


def _join_workers(procs: list[multiprocessing.process.BaseProcess]) -> None:
    for proc in procs:
        proc.join()
        if proc.exitcode != 0:
            raise AutotuneError(f"worker {proc.name} exited with code {proc.exitcode}")


def _wait_for_claimed_slots(study: optuna.Study, heartbeat_s: int) -> None:
    """If the target is not reached, wait while its remaining slots are held elsewhere.

    Slots are held by trials running in other workers, or by the trial of a killed run whose
    heartbeat has not yet gone stale (then Optuna marks it failed and queues it again).
    """
    with warnings.catch_warnings():  # "experimental" since Optuna 2.9
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)
    if study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        with sigint_allowed():
            time.sleep(min(heartbeat_s, 5))


#: The stages at which the search stops before ``--trials``: the cost cap's share is spent,
#: every configuration at the baseline's model and batch was tried or none fits the rest
#: (:func:`autotune.study.baseline.enqueue_same_model_batch`), every configuration of the
#: space was tried (:func:`autotune.study.baseline.space_tried`).
_STOPPED = ("stop", "tried_all", "over_budget", "space_tried")


def budget_note(
    stage: BudgetStage | Literal["tried_all", "over_budget", "space_tried"],
    cost: SearchCost,
    budget: BudgetSettings,
    finished: int,
    n_trials: int,
) -> str:
    """The line a run shows once when the cost cap moves the search to ``stage``, or when
    every configuration of the space has been tried (``space_tried``)."""
    if stage == "space_tried":
        return (
            f"every configuration of the space has been tried, so the search stops at "
            f"{finished} of {n_trials} trials (another trial would only measure one again; "
            "the verification re-measures the finalists in fresh processes)"
        )
    share = budget.search_share * (budget.full_runs or 0.0)
    spent = f"the search has spent {cost.full_runs or 0.0:.1f} of its {share:g} full runs"
    if stage == "tried_all":
        return (
            f"cost cap (budget.full_runs={budget.full_runs:g}): {spent}; every configuration "
            f"that keeps the baseline's model and global batch has been tried, and the fastest "
            f"of them at the batch sizes next to the baseline's, so the search "
            f"stops at {finished} "
            f"of {n_trials} trials (raise budget.full_runs to explore the model and batch further)"
        )
    if stage == "over_budget":
        return (
            f"cost cap (budget.full_runs={budget.full_runs:g}): {spent}; no configuration "
            "left that keeps the baseline's model and global batch fits the rest (a compiled "
            "one costs what the dearest compiled trial did; another precision, a trained "
            f"run), so the search stops at {finished} of {n_trials} trials (raise "
            "budget.full_runs to search further)"
        )
    if stage == "keep_model":
        return (
            f"cost cap (budget.full_runs={budget.full_runs:g}): {spent}; from now on every "
            "trial keeps the baseline's model and global batch: a change of how it runs is "
            "timed with the paired check (seconds) instead of trained, and each other "
            "precision trains its evidence once"
        )
    return (
        f"cost cap (budget.full_runs={budget.full_runs:g}): {spent}; the search stops at "
        f"{finished} of {n_trials} trials (raise budget.full_runs to search further)"
    )


def _budget_left(full_runs: float | None, study: optuna.Study) -> float | None:
    """What the cost cap (``budget.full_runs``) leaves the verification, in full runs: the
    cap less the search's cost (0 at least); None without a cap or before the baseline
    ran."""
    if full_runs is None:
        return None
    spent = search_cost(study.get_trials(deepcopy=False)).full_runs
    return None if spent is None else max(0.0, full_runs - spent)


def run_study(
    config: RunConfig,
    n_trials: int,
    *,
    on_trial: Callable[[StudyProgress], None] | None = None,
    run_trial_fn: RunTrialFn = run_trial,
    prepared: PreparedRun | None = None,
    worker_index: int = 0,
    on_verify: Callable[[VerificationProgress], None] | None = None,
) -> StudyResult:
    """Run (or resume) a study until it holds ``n_trials`` finished trials, then verify it.

    Running the same call again after an interruption tops the study up to ``n_trials``;
    completed trials are kept, never redone. Interrupted trials are recorded as FAIL and
    do not count. Once the study holds its trials, the first worker verifies the finalists
    (:func:`~autotune.study.api.verify_study`'s steps on the open study and results store,
    ``config.verify_settings``); a verification that already covers the same
    finalists is reused, an interrupted one resumed.

    Args:
        config: the validated run configuration.
        n_trials: the number of finished trials the study should hold (>= 1).
        on_trial: called after every trial with a :class:`StudyProgress`.
        run_trial_fn: runs one trial (default: in child processes; tests inject fakes).
        prepared: the result of :func:`prepare_run`, if the caller already has it.
        worker_index: 0 in the process the user started; it starts ``config.workers - 1``
            more worker processes on the same study (1, 2, ... there).
        on_verify: called after every verification run with a :class:`VerificationProgress`.

    Raises:
        ConfigError: bad input (also ``n_trials < 1``), or a study made with another space.
        StorageError, DataError, DeviceUnavailableError: as their names say.
        KeyboardInterrupt: on Ctrl-C, after the running trial is stopped and marked FAIL.
    """
    if n_trials < 1:
        raise ConfigError(f"--trials: must be >= 1, but got {n_trials}")
    prepared = prepared or prepare_run(config, worker_index=worker_index)
    space = prepared.space
    caps = prepared.capabilities
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # we report trials ourselves
    storage = open_storage(config.storage, config.advanced.trial.heartbeat_s)
    study = open_study(
        config,
        space,
        caps,
        storage,
        seed_offset=_WORKER_SEED_STRIDE * worker_index,
        objectives=prepared.objectives,
        metric=prepared.metric,
        screen=prepared.screen,
    )
    objective = TrialObjective(
        config, space, caps, with_mfu(run_trial_fn, caps), n_trials, prepared.objectives
    )
    # Our results tables (autotune_*, beside Optuna's): one row per finished trial, written by
    # this callback in this process; the trial processes never touch the database.
    results = open_results_for_run(config, caps, study)

    started = time.monotonic()
    before = len(study.trials)
    # The cost cap's stage (autotune.study.cost.budget_stage), and the stages already said.
    cap: dict[str, Any] = {"stage": "explore", "said": set()}
    budget = space.budget_settings
    capped = budget.full_runs is not None

    def follow_budget(study: optuna.Study, _: FrozenTrial | None) -> None:
        """Under ``budget.full_runs``: past half the search's share every later trial keeps
        the baseline's model and global batch; past its share the search stops."""
        if budget.full_runs is None or count_finished(study) >= n_trials:
            return
        spent = search_cost(study.get_trials(deepcopy=False)).full_runs
        cap["stage"] = budget_stage(spent, budget)
        if cap["stage"] == "keep_model":
            left = budget.search_share * budget.full_runs - (spent or 0.0)
            queued = enqueue_same_model_batch(study, space, left)
            if queued in ("tried_all", "over_budget"):
                cap["stage"] = queued
        if cap["stage"] in _STOPPED:
            study.stop()

    def stop_when_space_tried(study: optuna.Study, _: FrozenTrial | None) -> None:
        """Every configuration of a finite space tried: stop (with or without a cap)."""
        if (
            count_finished(study) < n_trials
            and cap["stage"] not in _STOPPED
            and space_tried(space, study.get_trials(deepcopy=False)) is not None
        ):
            cap["stage"] = "space_tried"
            study.stop()

    def report(study: optuna.Study, trial: FrozenTrial) -> None:
        if on_trial is not None and TrialResult.from_trial(trial).failure_kind != "surplus":
            cost = search_cost(study.get_trials(deepcopy=False))
            note = None
            if cap["stage"] != "explore" and cap["stage"] not in cap["said"]:
                cap["said"].add(cap["stage"])
                note = budget_note(cap["stage"], cost, budget, count_finished(study), n_trials)
            on_trial(
                StudyProgress(
                    count_finished(study),
                    n_trials,
                    time.monotonic() - started,
                    _best_so_far(study),
                    trial,
                    cost,
                    note,
                )
            )

    def stop_at_failed_baseline(study: optuna.Study, _: FrozenTrial) -> None:
        """Every figure compares with the baseline: once it failed, stop (a rerun retries it)."""
        if failed_baseline(study.get_trials(deepcopy=False)) is not None:
            study.stop()

    def interruptible(trial: optuna.Trial) -> tuple[float, ...]:
        with sigint_allowed():
            return objective(trial)

    def queue_next(study: optuna.Study, _: FrozenTrial) -> None:
        """Some trials keep the baseline's model (the same-model answer); under a cost cap an
        exploring trial runs eager (compile is tried on the baseline's model later); none is
        queued past the study's target, nor once the search stopped."""
        if count_finished(study) >= n_trials or cap["stage"] in _STOPPED:
            return
        if enqueue_same_model(study, space):
            return
        if cap["stage"] == "explore" and capped:
            enqueue_eager_exploration(study, space, config.seed)

    if worker_index == 0 and count_finished(study) < n_trials:
        enqueue_baseline(study, space)  # PyTorch defaults, measured once per study
    follow_budget(study, None)  # a resumed study may have spent its share already
    stop_when_space_tried(study, None)  # or tried every configuration
    helpers: list[multiprocessing.process.BaseProcess] = []
    # Ctrl-C raises only inside the objective (or while waiting); elsewhere it is held back
    # until the next such point. Raised anywhere in Optuna's loop, it could land between the
    # start of a trial's heartbeat thread (not a daemon) and the block that stops it: the
    # thread would beat forever and interpreter exit would wait for it (see study/_interrupts.py).
    # The trials of every worker count the study's processes as their own (several workers
    # on one host flagged each other busy) and split the host's threads among the workers.
    with sigint_deferred(), study_processes(config.workers):
        try:
            if worker_index == 0:
                # Started with the environment the user gave: each takes its own GPUs.
                helpers.extend(_start_workers(config, n_trials))
            # This worker's trials train on its own GPUs alone, where it owns part of the
            # machine's (workers > 1 on cuda: autotune.core.hardware.worker_share), and compile
            # into the study's own cache (advanced.measure.compile_cache=study).
            with (
                trial_devices(caps.cuda_visible_devices),
                study_compile_cache(config.storage, study.study_name),
            ):
                while (
                    count_finished(study) < n_trials
                    and cap["stage"] not in _STOPPED
                    and failed_baseline(study.get_trials(deepcopy=False)) is None
                ):
                    study.optimize(
                        interruptible,
                        n_trials=None,
                        callbacks=[
                            MaxTrialsCallback(n_trials, states=FINISHED_STATES),
                            results,
                            follow_budget,
                            stop_when_space_tried,
                            report,
                            queue_next,
                            stop_at_failed_baseline,
                        ],
                        catch=(SurplusTrial,),
                        gc_after_trial=False,
                    )
                    _wait_for_claimed_slots(study, config.advanced.trial.heartbeat_s)
            with sigint_allowed():
                _join_workers(helpers)
        finally:
            for proc in helpers:
                if proc.is_alive():
                    proc.terminate()
    verification, note = None, None
    baseline_failure = failed_baseline(study.get_trials(deepcopy=False))
    if baseline_failure is not None and config.verify.rounds > 0:
        note = "the baseline trial failed, and every figure compares with it"
    if worker_index == 0 and config.verify.rounds > 0 and baseline_failure is None:
        try:
            with trial_devices(caps.cuda_visible_devices):
                # The study and the results store the search wrote to, handed over as open.
                verification = verify_open_study(
                    study,
                    results.store,
                    settings=config.verify_settings,
                    run_trial_fn=run_trial_fn,
                    on_run=on_verify,
                    reuse=True,
                    capabilities=caps,
                    budget_left_full_runs=_budget_left(space.budget.full_runs, study),
                    hardware_checked=True,  # open_study checked this machine
                )
        except VerificationError as e:  # the study is fine; it only cannot make a claim
            note = str(e)
    return StudyResult(
        study_name=study.study_name,
        storage=config.storage,
        finished=count_finished(study),
        ran=len(study.trials) - before,
        wall_s=time.monotonic() - started,
        pareto_trials=study.best_trials,
        capabilities=caps,
        removed_choices=prepared.removed_choices,
        verification=verification,
        verification_note=note,
        search_cost=search_cost(study.get_trials(deepcopy=False)),
        baseline_failure=baseline_failure,
    )
