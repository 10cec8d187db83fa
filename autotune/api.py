"""``run_study`` and ``verify_study``: the entry points the CLI and Python users share."""

from __future__ import annotations

import json
import multiprocessing
import multiprocessing.process
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import optuna
from optuna.study import MaxTrialsCallback
from optuna.trial import FrozenTrial, TrialState

from autotune.baseline import enqueue_baseline
from autotune.config import DEFAULT_STORAGE_URL, RunConfig, SearchSpace, TrialConfig, VerifySettings
from autotune.exceptions import (
    AutotuneError,
    ConfigError,
    TrialError,
    VerificationError,
    WorkloadError,
)
from autotune.flops import with_mfu
from autotune.hardware import (
    DeviceCapabilities,
    check_study_hardware,
    detect_capabilities,
    resolve_device,
    restrict_space,
)
from autotune.interrupts import sigint_allowed, sigint_deferred
from autotune.objectives import Objective, objectives_of_study, study_objectives
from autotune.runner import run_trial
from autotune.storage import (
    FINISHED_STATES,
    ResultsStore,
    VerificationPlan,
    VerificationRecord,
    VerificationRun,
    load_existing_study,
    open_results_for_run,
)
from autotune.study import (
    RunTrialFn,
    SurplusTrial,
    TrialObjective,
    check_storage_reachable,
    check_warm_start,
    count_finished,
    open_storage,
    open_study,
)
from autotune.verification import (
    VerificationSummary,
    round_seeds,
    select_finalists,
    study_metric,
    summarize_for_study,
)
from autotune.workloads import check_workload

__all__ = [
    "PreparedRun",
    "StudyProgress",
    "StudyResult",
    "VerificationProgress",
    "prepare_run",
    "run_study",
    "verify_study",
]


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
    """

    finished: int
    target: int
    elapsed_s: float
    best: dict[str, float]
    last: FrozenTrial


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


@dataclass(frozen=True)
class PreparedRun:
    """A validated run, before anything is written: device, restricted space, removed choices."""

    config: RunConfig
    capabilities: DeviceCapabilities
    space: SearchSpace
    removed_choices: list[str]
    objectives: tuple[Objective, ...]


def prepare_run(config: RunConfig) -> PreparedRun:
    """Validate everything that can be validated without writing anything.

    Resolves the device, checks the workload (it imports, takes the space's knobs, builds
    its smallest model on the meta device, and its datasets load: so a missing or corrupt
    ``data.root`` fails here), removes choices the device can never run, checks the storage
    URL (its driver is installed, a database server answers), and checks that the
    ``warm_start`` study exists (reading the database, never creating it).

    Raises:
        ConfigError, WorkloadError, DeviceUnavailableError, DataError, StorageError: with
            one-line messages.
    """
    kind = resolve_device(config.device)
    spec = config.space.workload_spec()
    try:
        workload = check_workload(spec, config.space.model)
    except WorkloadError as e:
        raise WorkloadError(f"{config.space_source}: {e}") from e.__cause__
    objectives = study_objectives(workload.metric_name, workload.metric_direction)
    if config.space.constraints.min_accuracy is not None and not objectives[1].is_accuracy:
        raise ConfigError(
            f"{config.space_source}: constraints.min_accuracy: the workload's metric is "
            f"{workload.metric_name}, not accuracy; remove the constraint"
        )
    if kind == "mock" and not spec.is_builtin:
        raise ConfigError(
            f"device=mock: the mock device simulates the built-in workloads (cnn, mlp) only; "
            f"it has no model of {spec.label}'s accuracy. Run it with device=cpu or device=cuda"
        )
    caps = detect_capabilities(kind, mock_profile=config.mock.profile)
    space, removed = restrict_space(config.space, caps)
    check_storage_reachable(config.storage)
    check_warm_start(config)
    return PreparedRun(
        config=config,
        capabilities=caps,
        space=space,
        removed_choices=removed,
        objectives=objectives,
    )


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
            best[objective.name] = max(values) if objective.direction == "maximize" else min(values)
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
    (:func:`verify_study`, ``config.verify``); a verification that already covers the same
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
    prepared = prepared or prepare_run(config)
    space = prepared.space
    caps = prepared.capabilities
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # we report trials ourselves
    storage = open_storage(config.storage, config.trial.heartbeat_s)
    study = open_study(
        config,
        space,
        caps,
        storage,
        seed_offset=_WORKER_SEED_STRIDE * worker_index,
        objectives=prepared.objectives,
    )
    objective = TrialObjective(
        config, space, caps, with_mfu(run_trial_fn, caps), n_trials, prepared.objectives
    )
    # Our results tables (autotune_*, beside Optuna's): one row per finished trial, written by
    # this callback in this process; the trial processes never touch the database.
    results = open_results_for_run(config, caps, study, objective.trial_config)

    started = time.monotonic()
    before = len(study.trials)

    def report(study: optuna.Study, trial: FrozenTrial) -> None:
        if on_trial is not None and trial.user_attrs.get("failure") != "surplus":
            on_trial(
                StudyProgress(
                    count_finished(study),
                    n_trials,
                    time.monotonic() - started,
                    _best_so_far(study),
                    trial,
                )
            )

    def interruptible(trial: optuna.Trial) -> tuple[float, float, float]:
        with sigint_allowed():
            return objective(trial)

    if worker_index == 0 and count_finished(study) < n_trials:
        enqueue_baseline(study, space)  # PyTorch defaults, measured once per study
    helpers: list[multiprocessing.process.BaseProcess] = []
    # Ctrl-C raises only inside the objective (or while waiting); elsewhere it is held back
    # until the next such point. Raised anywhere in Optuna's loop, it could land between the
    # start of a trial's heartbeat thread (not a daemon) and the block that stops it: the
    # thread would beat forever and interpreter exit would wait for it (see interrupts.py).
    with sigint_deferred():
        try:
            if worker_index == 0:
                helpers.extend(_start_workers(config, n_trials))
            while count_finished(study) < n_trials:
                study.optimize(
                    interruptible,
                    n_trials=None,
                    callbacks=[
                        MaxTrialsCallback(n_trials, states=FINISHED_STATES),
                        results,
                        report,
                    ],
                    catch=(SurplusTrial,),
                    gc_after_trial=False,
                )
                _wait_for_claimed_slots(study, config.trial.heartbeat_s)
            with sigint_allowed():
                _join_workers(helpers)
        finally:
            for proc in helpers:
                if proc.is_alive():
                    proc.terminate()
    verification, note = None, None
    if worker_index == 0 and config.verify.rounds > 0:
        try:
            verification = verify_study(
                study.study_name,
                config.storage,
                settings=config.verify,
                run_trial_fn=run_trial_fn,
                timeout_s=config.trial.timeout_s,
                on_run=on_verify,
                reuse=True,
                capabilities=caps,
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
    )


# --------------------------------------------------------------------------------------------
# Verification


@dataclass(frozen=True)
class VerificationProgress:
    """A snapshot after each verification run, for progress displays.

    Attributes:
        done: runs with a row (this one included).
        planned: runs planned: (1 + candidates) x rounds.
        rounds: rounds planned.
        record: what this run measured (or why it failed).
    """

    done: int
    planned: int
    rounds: int
    record: VerificationRecord


def _study_seed(study: optuna.Study, results: ResultsStore) -> int:
    record = results.study(study.study_name)
    return record.seed if record is not None else 0


def _trial_configs(
    study_name: str, results: ResultsStore, numbers: set[int]
) -> dict[int, TrialConfig]:
    """The full configuration each trial ran, from its results row.

    Raises:
        VerificationError: a trial has no row, or its row holds only its knobs (a study
            written before full configurations were stored).
    """
    configs: dict[int, TrialConfig] = {}
    rows = {r.trial_number: r for r in results.trials(study_name)}
    for number in sorted(numbers):
        row = rows.get(number)
        stored = json.loads(row.config_json) if row is not None else {}
        if "train" not in stored:
            raise VerificationError(
                f"study={study_name}: trial {number} has no stored configuration in the "
                "results tables; it cannot be re-run"
            )
        configs[number] = TrialConfig.from_stored(stored)
    return configs


def _plan_matches(run: VerificationRun, plan: VerificationPlan) -> bool:
    """The stored verification re-measured the same configurations the same way."""
    return (
        run.plan.baseline_trial == plan.baseline_trial
        and run.plan.candidates == plan.candidates
        and run.plan.rounds == plan.rounds
        and run.plan.accuracy_tolerance_pt == plan.accuracy_tolerance_pt
    )


def _check_verify_hardware(study: optuna.Study, capabilities: DeviceCapabilities | None) -> None:
    """Refuse to verify on another machine than the study's (throughputs would not compare).

    Raises:
        ConfigError, DeviceUnavailableError: another machine, or the device is missing here.
    """
    kind = (study.user_attrs.get("autotune") or {}).get("device_kind", "cpu")
    if kind == "mock":
        return  # a simulation: nothing to compare
    caps = capabilities or detect_capabilities(kind)
    check_study_hardware(study, caps.fingerprint, allow_change=False)


def verify_study(
    study_name: str,
    storage: str = DEFAULT_STORAGE_URL,
    *,
    settings: VerifySettings | None = None,
    run_trial_fn: RunTrialFn = run_trial,
    timeout_s: float = 600.0,
    on_run: Callable[[VerificationProgress], None] | None = None,
    reuse: bool = False,
    capabilities: DeviceCapabilities | None = None,
) -> VerificationSummary:
    """Re-run a study's baseline and finalists in interleaved rounds of fresh processes.

    An interrupted verification (its last one, rounds missing) is resumed: runs already
    recorded are kept, never redone. Otherwise a new verification is planned: the finalists
    (:func:`autotune.verification.select_finalists`) and one new training seed per round
    (:func:`autotune.verification.round_seeds`); each run is stored in
    ``autotune_verifications`` as soon as it ends. With ``reuse``, a finished verification
    of the same finalists, rounds and tolerance is returned as it is (``autotune run`` on a
    study that is already verified); without it (``autotune verify``) a finished one is
    repeated with new seeds.

    Args:
        study_name: the Optuna study.
        storage: its storage URL.
        settings: rounds, candidates and accuracy tolerance (default ``VerifySettings()``).
        run_trial_fn: runs one configuration (default: child processes; tests inject fakes).
        timeout_s: wall-clock limit of one run, in seconds.
        on_run: called after every run with a :class:`VerificationProgress`.
        reuse: return a finished verification of the same plan instead of repeating it.
        capabilities: the device, when the caller already detected it.

    Returns:
        The summary of the (now finished) verification, with its recommendation.

    Raises:
        ConfigError: ``rounds`` is 0, or the study was measured on other hardware.
        StudyNotFoundError, StorageError: no such study, or the database failed.
        VerificationError: no measured baseline, or a finalist without a stored configuration.
        KeyboardInterrupt: on Ctrl-C; the runs recorded so far are kept for a resume.
    """
    settings = settings or VerifySettings()
    if settings.rounds == 0:
        raise ConfigError("verify.rounds=0: verification is off; ask for 2 rounds or more")
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = load_existing_study(study_name, storage)
    _check_verify_hardware(study, capabilities)
    trials = study.get_trials(deepcopy=False, states=FINISHED_STATES)
    baseline, finalists = select_finalists(
        trials,
        {t.number for t in study.best_trials},
        settings.candidates,
        settings.accuracy_tolerance_pt,
        study_metric(study),
    )
    with ResultsStore.open(storage, create=True) as results:
        # Validate before writing: every configuration to run must be stored.
        configs = _trial_configs(study_name, results, {baseline, *finalists})
        latest = results.latest_verification(study_name)
        if latest is not None and not latest.complete:
            run = latest  # resume it, with its own plan
            configs.update(
                _trial_configs(study_name, results, {run.plan.baseline_trial, *run.plan.candidates})
            )
        else:
            number = (latest.number if latest is not None else 0) + 1
            plan = VerificationPlan(
                baseline_trial=baseline,
                candidates=finalists,
                seeds=round_seeds(_study_seed(study, results), number, settings.rounds),
                accuracy_tolerance_pt=settings.accuracy_tolerance_pt,
            )
            if reuse and latest is not None and _plan_matches(latest, plan):
                return summarize_for_study(study, latest)
            run = results.start_verification(study_name, plan)
        run = _run_verification(run, results, configs, run_trial_fn, timeout_s, on_run)
    return summarize_for_study(study, run)


def _run_verification(
    run: VerificationRun,
    results: ResultsStore,
    configs: Mapping[int, TrialConfig],
    run_trial_fn: RunTrialFn,
    timeout_s: float,
    on_run: Callable[[VerificationProgress], None] | None,
) -> VerificationRun:
    """Run every planned (round, configuration) without a row, after one discarded warm-up
    run, store each, then finish."""
    plan = run.plan
    schedule = plan.schedule()
    done = run.done()
    pending = [item for item in schedule if item not in done]
    if pending:
        # One discarded run first, as benchmark harnesses throw away warm-up: the first trial
        # process after a start paid for cold caches (the forkserver's, the page cache's, the
        # CPU's clock) and read up to a third slower than the same configuration later.
        round_index, number = pending[0]
        warmup = _round_config(configs[number], plan, round_index)
        _verification_record(round_index, number, plan, warmup, run_trial_fn, timeout_s)
    for round_index, number in pending:
        config = _round_config(configs[number], plan, round_index)
        record = _verification_record(round_index, number, plan, config, run_trial_fn, timeout_s)
        results.record_verification(run.study_name, run.number, record)
        done.add((round_index, number))
        if on_run is not None:
            on_run(VerificationProgress(len(done), len(schedule), plan.rounds, record))
    return results.complete_verification(run.study_name, run.number)


def _round_config(config: TrialConfig, plan: VerificationPlan, round_index: int) -> TrialConfig:
    """A study trial's configuration as a verification round runs it: the round's seed, and
    none of the mock device's deliberate faults (they belong to the search's trials)."""
    return config.model_copy(update={"seed": plan.seeds[round_index], "mock_fault": "none"})


def _verification_record(
    round_index: int,
    number: int,
    plan: VerificationPlan,
    config: TrialConfig,
    run_trial_fn: RunTrialFn,
    timeout_s: float,
) -> VerificationRecord:
    """Run one configuration once; a failure is a row too (it disqualifies the candidate)."""
    unmeasured = VerificationRecord(
        round_index=round_index,
        seed=config.seed,
        trial_number=number,
        is_baseline=number == plan.baseline_trial,
        simulated=config.device == "mock",
        config_json=config.model_dump_json(),
        failure=None,
        failure_detail=None,
        throughput_sps=None,
        throughput_iqr_sps=None,
        step_time_s=None,
        val_metric=None,
        peak_memory_bytes=None,
        train_s=None,
    )
    try:
        m = run_trial_fn(config, timeout_s)
    except TrialError as e:
        return replace(unmeasured, failure=e.failure, failure_detail=e.detail[-2000:])
    return replace(
        unmeasured,
        throughput_sps=m.throughput_sps,
        throughput_iqr_sps=m.throughput_iqr_sps,
        step_time_s=m.step_time_s,
        val_metric=m.val_metric,
        peak_memory_bytes=m.peak_memory_bytes,
        train_s=m.train_s,
    )
