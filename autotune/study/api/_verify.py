"""Verifying a study: its baseline and finalists re-run in interleaved rounds of fresh
processes, each run stored as it ends, an interrupted verification resumed."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace

import optuna
from optuna.trial import FrozenTrial

from autotune.core.config import (
    DEFAULT_STORAGE_URL,
    Constraints,
    ReusedMetric,
    TrialConfig,
    VerifySettings,
)
from autotune.core.exceptions import ConfigError, TrialError, VerificationError
from autotune.core.hardware import DeviceCapabilities, detect_capabilities
from autotune.study.cost import full_run_seconds
from autotune.study.objectives import ObjectiveMode, objective_mode, objectives_of_study
from autotune.study.search import RunTrialFn, check_study_hardware, run_trial, study_compile_cache
from autotune.study.storage import (
    ANSWERS,
    FINISHED_STATES,
    Lane,
    ResultsStore,
    VerificationPlan,
    VerificationRecord,
    VerificationRun,
    load_existing_study,
)
from autotune.study.trial_result import StudyAttributes, TrialResult
from autotune.study.verification import (
    VerificationSummary,
    confirmation_schedule,
    confirmation_stops,
    fit_budget,
    inherits_accuracy,
    likeliest_finalist,
    model_change_finalists,
    race_survivors,
    round_seeds,
    select_finalists,
    study_metric,
    summarize_for_study,
)


@dataclass(frozen=True)
class VerificationProgress:
    """A snapshot after each verification run, for progress displays.

    Attributes:
        done: runs with a row (this one included).
        planned: runs planned: the race's, then (1 + confirmed) x rounds (while the race runs,
            counted as if it will leave a survivor).
        rounds: confirmation rounds planned.
        record: what this run measured (or why it failed).
        race: the run belongs to the race (stage A).
        rerun_next: the run was measured on a busy machine and will be measured again at
            once (``advanced.verify.busy_rerun_budget`` not yet spent).
        reruns_used: busy runs measured again so far in this verification, this one's re-run
            included.
        reruns_allowed: ``advanced.verify.busy_rerun_budget``.
    """

    done: int
    planned: int
    rounds: int
    record: VerificationRecord
    race: bool = False
    rerun_next: bool = False
    reruns_used: int = 0
    reruns_allowed: int = 0


def _study_seed(study: optuna.Study, results: ResultsStore) -> int:
    record = results.study(study.study_name)
    return record.seed if record is not None else 0


def _trial_configs(
    study_name: str,
    results: ResultsStore,
    numbers: set[int],
    objective: ObjectiveMode = "throughput",
) -> dict[int, TrialConfig]:
    """The configuration each trial ran, from its results row: as the trial stored it
    (:data:`~autotune.study.trial_result.TRIAL_CONFIG_ATTR`: the knobs, the study's settings and
    the evaluation cadence taken from the baseline; never the search's own stops), so a
    verification run changes only its seed (and, for a finalist that inherits its accuracy,
    times without training: :func:`_timing_only`).

    Raises:
        VerificationError: a trial has no row with its configuration, or its configuration
            trains in another mode than the study's ``objective`` (a re-run would not measure
            what the verdict compares).
    """
    configs: dict[int, TrialConfig] = {}
    rows = {r.trial_number: r for r in results.trials(study_name)}
    for number in sorted(numbers):
        row = rows.get(number)
        config = row.trial_config() if row is not None else None
        if config is None:
            raise VerificationError(
                f"study={study_name}: trial {number} has no stored configuration in the "
                "results tables; it cannot be re-run"
            )
        if config.objective != objective:
            raise VerificationError(
                f"study={study_name}: trial {number} was stored with objective="
                f"{config.objective}, but the study's objective is {objective}; it cannot be "
                "re-run for this study's verdict"
            )
        configs[number] = config
    return configs


def _budget_steps(trials: list[FrozenTrial], baseline: int) -> int | None:
    """Optimizer steps of one full run: the baseline trial's (its budget's, where it stopped
    at a share of it under short evidence; None when unknown)."""
    for trial in trials:
        if trial.number == baseline:
            result = TrialResult.from_trial(trial)
            return result.budget_steps or result.steps
    return None


def _rounds_for(
    finalists: tuple[int, ...],
    inherited: tuple[int, ...],
    settings: VerifySettings,
    rounds: int | None = None,
) -> int:
    """Confirmation rounds: ``rounds`` (default ``verify.rounds``), or at least
    ``advanced.verify.timing_rounds`` when every finalist inherits its accuracy (timed
    rounds only, no training to the budget: cheap)."""
    asked = settings.rounds if rounds is None else rounds
    if finalists and set(finalists) <= set(inherited):
        return max(asked, settings.timing_rounds)
    return asked


def _run_costs(
    trials: list[FrozenTrial], baseline: int, trained: Collection[int] = ()
) -> dict[int, float]:
    """Each trial's cost of one verification run, in full runs of the baseline: what it
    cost in the search (``run_s``, less the re-runs of a trial timed again on a busy machine,
    over the baseline's ``full_run_s``; 1 where unknown); the
    baseline's is one full run (:func:`autotune.study.verification.fit_budget` prices a timed
    baseline as its timed finalists), or under short evidence (a projected full run) what its
    trial cost, as every trained run stops at the same share. A finalist in ``trained`` (it
    trains in the verification) whose search trial was timed and reused another trial's
    metric (the same math key) costs at least what that trial cost: it trains as that one
    did.

    A compiled trial that compiled cold in the search (``compile_cache``: ``cold`` or ``partly
    warm``) compiles warm in the verification, whose runs use the study's cache where the
    search compiled the same graphs (:func:`~autotune.study.search.study_compile_cache`): its
    cold compile seconds are priced at the median of the study's warm compiles instead
    (measured: cold 12-28 s, warm 2-3 s on a ResNet of the long run's study, 2-core EPYC),
    where the study has any. Priced cold, a timed compiled finalist cost 2.4x its warm runs
    and was left out of a capped verification that it fitted."""
    full_run_s = full_run_seconds(trials)
    costs: dict[int, float] = {}
    sources: dict[int, int] = {}
    projected = False
    results = [TrialResult.from_trial(trial) for trial in trials]
    warm = sorted(
        r.compile_s for r in results if r.compile_cache == "warm" and r.compile_s is not None
    )
    warm_compile_s = warm[len(warm) // 2] if warm else None
    for result in results:
        own_s = (result.run_s or 0.0) - (result.busy_remeasure_s or 0.0)
        if (
            warm_compile_s is not None
            and result.compile_cache in ("cold", "partly warm")
            and result.compile_s is not None
        ):
            own_s -= max(0.0, result.compile_s - warm_compile_s)
        costs[result.number] = own_s / full_run_s if own_s > 0 and full_run_s else 1.0
        projected = projected or (result.baseline and bool(result.full_run_projected))
        if result.metric_from_trial is not None:
            sources[result.number] = result.metric_from_trial
    for number in trained:
        if number in sources and sources[number] in costs:
            costs[number] = max(costs[number], costs[sources[number]])
    if not projected:  # under short evidence the baseline's runs stop at a share, as its trial
        costs[baseline] = 1.0
    return costs


def _inherited_finalists(
    trials: list[FrozenTrial],
    baseline: int,
    finalists: tuple[int, ...],
    configs: Mapping[int, TrialConfig],
) -> tuple[tuple[int, ...], str | None]:
    """The finalists whose accuracy the search inherited from the baseline with a passed
    paired check (``accuracy_source == "inherited"``, identical or the same computation as
    the baseline), and the check's
    floor and margin as the plan stores them (``check_floor_json``); ``((), None)`` when
    none, or when the baseline recorded no floor."""
    by_number = {t.number: TrialResult.from_trial(t) for t in trials}
    base = by_number.get(baseline)
    if base is None or base.check_floor_first is None or base.check_floor_max is None:
        return (), None
    inherited = tuple(
        n
        for n in finalists
        if (result := by_number.get(n)) is not None and inherits_accuracy(result)
    )
    if not inherited:
        return (), None
    floor = {
        "first": base.check_floor_first,
        "trajectory": base.check_floor_max,
        "source": base.check_floor_source or "floor",
        "margin": configs[baseline].measure.check_margin,
    }
    return inherited, json.dumps(floor, sort_keys=True)


def _timing_only(
    configs: dict[int, TrialConfig], plan: VerificationPlan, study: optuna.Study
) -> tuple[dict[int, TrialConfig], TrialConfig]:
    """The configurations that are timed, not trained to the budget: the inherited
    finalists (``plan.inherited``), and the baseline when every finalist is one
    (``plan.timing_only``). Each runs its warm-up and ``advanced.measure.timing_steps``
    timed steps and records its paired check's losses; the metric it carries
    (``reuse``: the baseline trial's from the search) is never stored with its row.

    Returns:
        ``(configs, timed baseline)``: the configurations to run, and the baseline's timed
        configuration, which the confirmation runs once every survivor it confirms is timed
        (the race may leave only those: a trained survivor whose confirmation is futile).
    """
    base = next(
        (
            TrialResult.from_trial(t)
            for t in study.get_trials(deepcopy=False)
            if t.number == plan.baseline_trial
        ),
        None,
    )
    reuse = (
        base.reused_metric()
        if base is not None and None not in (base.val_metric, base.train_loss) and base.steps
        else ReusedMetric.placeholder(plan.baseline_trial)
    )
    timed = set(plan.inherited) | ({plan.baseline_trial} if plan.timing_only else set())
    timed_configs = {
        number: config.model_copy(update={"reuse": reuse}) if number in timed else config
        for number, config in configs.items()
    }
    baseline = configs[plan.baseline_trial].model_copy(update={"reuse": reuse})
    return timed_configs, baseline


def _plan_matches(run: VerificationRun, plan: VerificationPlan) -> bool:
    """The stored verification re-measured the same configurations the same way."""
    old, new = run.plan, plan
    return (
        old.baseline_trial == new.baseline_trial
        and old.candidates == new.candidates
        and old.rounds == new.rounds
        and old.race_rounds == new.race_rounds
        and old.accuracy_tolerance_pt == new.accuracy_tolerance_pt
        and old.screen_z == new.screen_z
        and old.max_memory_bytes == new.max_memory_bytes
        and old.min_accuracy == new.min_accuracy
        and old.model_changes == new.model_changes
        and old.inherited == new.inherited
    )


def _study_constraints(study: optuna.Study) -> Constraints:
    """The limits the study was created with (its recorded space's ``constraints``)."""
    return Constraints.model_validate(StudyAttributes.from_study(study).constraints)


def _resume_notes(plan: VerificationPlan, settings: VerifySettings) -> tuple[str, ...]:
    """Where the settings asked for now differ from a resumed verification's stored plan
    (the plan wins: its runs so far were measured under it)."""
    pairs: list[tuple[str, float, float]] = [("verify.rounds", settings.rounds, plan.rounds)]
    if plan.race_seeds:
        pairs.append(("advanced.verify.race_rounds", settings.race_rounds, plan.race_rounds))
    pairs.append(
        ("verify.accuracy_tolerance_pt", settings.accuracy_tolerance_pt, plan.accuracy_tolerance_pt)
    )
    if plan.screen_z is not None:
        pairs.append(("advanced.verify.screen_z", settings.screen_z, plan.screen_z))
    differ = [
        f"{key}={asked:g} (stored {stored:g})" for key, asked, stored in pairs if asked != stored
    ]
    most = max(len(plan.answer_candidates(a)) for a in ANSWERS)
    if most > settings.candidates:
        differ.append(
            f"advanced.verify.candidates={settings.candidates} (stored plan: {most} finalists in an answer)"
        )
    if not differ:
        return ()
    return (
        "resumed with its stored plan; these settings differ from it and apply to the next "
        f"verification: {', '.join(differ)}",
    )


def _check_verify_hardware(study: optuna.Study, capabilities: DeviceCapabilities | None) -> None:
    """Refuse to verify on another machine than the study's (throughputs would not compare).

    Raises:
        ConfigError, DeviceUnavailableError: another machine, or the device is missing here.
    """
    kind = StudyAttributes.from_study(study).device_kind or "cpu"
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
    timeout_s: float | None = None,
    on_run: Callable[[VerificationProgress], None] | None = None,
    reuse: bool = False,
    capabilities: DeviceCapabilities | None = None,
    budget_left_full_runs: float | None = None,
) -> VerificationSummary:
    """Re-run a study's baseline and finalists in fresh processes: screen, race, confirm.

    The screen picks the finalists of each answer, same model and model change
    (:func:`autotune.study.verification.select_finalists`); the race re-runs the baseline and every
    finalist over ``settings.race_rounds`` rounds and keeps one survivor per lane
    (an answer, trained or inherited: :func:`autotune.study.verification.race_survivors`; no race
    when no lane has more than one finalist, except under short evidence where a finalist
    trains: the race is then its futility pilot, :func:`autotune.study.verification.fit_budget`);
    the confirmation re-runs the baseline and the survivors over
    ``settings.rounds`` rounds of fresh seeds, and only it makes the claims. Within a round
    the order rotates (round r starts at position r mod (K + 1)).

    An interrupted verification (its last one, runs missing) is resumed from its stored plan
    before anything is selected again: runs already recorded are kept, never redone, and
    where the settings asked for now differ from the plan the summary's ``notes`` say so. In a time-to-accuracy study each run trains to the
    study's target (its stored configuration says so) and its row keeps its time to
    accuracy, whether it reached the target, and its metric curve. Otherwise a new verification is planned: the finalists
    (:func:`autotune.study.verification.select_finalists`) and one new training seed per round
    (:func:`autotune.study.verification.round_seeds`); each run is stored in
    ``autotune_verifications`` as soon as it ends. A run measured on a busy machine (other
    processes used more than the study's ``advanced.measure.max_other_cpu_share`` of the CPUs) is
    measured again at once, as another attempt of its round, until one is not busy or
    ``settings.busy_rerun_budget`` re-runs are spent; the last attempt counts, and the summary says
    how many runs that count were busy. With ``reuse``, a finished verification
    of the same finalists, rounds and tolerance is returned as it is (``autotune run`` on a
    study that is already verified); without it (``autotune verify``) a finished one is
    repeated with new seeds.

    Args:
        study_name: the Optuna study.
        storage: its storage URL.
        settings: rounds, race rounds, candidates, accuracy tolerance, screen z and busy
            re-runs (default ``VerifySettings()``).
        run_trial_fn: runs one configuration (default: child processes; tests inject fakes).
        timeout_s: wall-clock limit of one run, in seconds; None: each configuration's own,
            as its trial stored it (the study's ``trial.timeout_s``).
        on_run: called after every run with a :class:`VerificationProgress`.
        reuse: return a finished verification of the same plan instead of repeating it.
        capabilities: the device, when the caller already detected it.
        budget_left_full_runs: what the study's cost cap leaves, in full runs of the
            baseline (``budget.full_runs`` less the search's cost): a new plan is fitted
            within it (:func:`autotune.study.verification.fit_budget`: the dearest finalists left
            out first, then fewer rounds), and the summary's notes say what it gave up;
            None: no cap.

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
        raise ConfigError("verify.rounds=0: verification is off; ask for 3 rounds or more")
    study = load_existing_study(study_name, storage)
    with ResultsStore.open(storage, create=True) as results:
        return verify_open_study(
            study,
            results,
            settings=settings,
            run_trial_fn=run_trial_fn,
            timeout_s=timeout_s,
            on_run=on_run,
            reuse=reuse,
            capabilities=capabilities,
            budget_left_full_runs=budget_left_full_runs,
        )


def verify_open_study(
    study: optuna.Study,
    results: ResultsStore,
    *,
    settings: VerifySettings,
    run_trial_fn: RunTrialFn = run_trial,
    timeout_s: float | None = None,
    on_run: Callable[[VerificationProgress], None] | None = None,
    reuse: bool = False,
    capabilities: DeviceCapabilities | None = None,
    budget_left_full_runs: float | None = None,
    hardware_checked: bool = False,
) -> VerificationSummary:
    """:func:`verify_study` of a study the caller holds open, with its results store open:
    ``run_study`` hands over the study and the store its search wrote to, so a run opens
    the database once for each; ``verify_study`` is the opener for ``autotune verify``.

    Args:
        study: the open Optuna study.
        results: its results store (open, with the tables created).
        settings: as :func:`verify_study` (``rounds`` at least 1).
        run_trial_fn, timeout_s, on_run, reuse, capabilities, budget_left_full_runs: as
            :func:`verify_study`.
        hardware_checked: the caller checked this machine against the study's when it
            opened it (``run_study``, through :func:`autotune.study.search.open_study`): the
            check is not made twice.

    Raises:
        ValueError: ``settings.rounds`` is 0 (the caller checks the user's setting first).
        ConfigError, StorageError, VerificationError, KeyboardInterrupt: as :func:`verify_study`.
    """
    if settings.rounds == 0:
        raise ValueError("verify_open_study(study, results, settings): settings.rounds is 0")
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study_name = study.study_name
    if not hardware_checked:
        _check_verify_hardware(study, capabilities)
    objective = objective_mode(objectives_of_study(study))
    latest = results.latest_verification(study_name)
    notes: tuple[str, ...] = ()
    if latest is not None and not latest.complete:
        # Resume from the stored plan first: the finalists are not selected again (the
        # study may have changed since, and the runs so far were measured under it).
        run = latest
        notes = _resume_notes(run.plan, settings)
        configs = _trial_configs(
            study_name, results, {run.plan.baseline_trial, *run.plan.candidates}, objective
        )
    else:
        trials = study.get_trials(deepcopy=False, states=FINISHED_STATES)
        baseline, finalists = select_finalists(
            trials,
            {t.number for t in study.best_trials},
            settings.candidates,
            settings.accuracy_tolerance_pt,
            study_metric(study),
            objective,
            settings.screen_z,
        )
        # Validate before writing: every configuration to run must be stored.
        configs = _trial_configs(study_name, results, {baseline, *finalists}, objective)
        number = (latest.number if latest is not None else 0) + 1
        params_now = {t.number: t.params for t in trials}
        model_changes = model_change_finalists(finalists, params_now, baseline)
        inherited, floor_json = _inherited_finalists(trials, baseline, finalists, configs)
        # A race where a lane (an answer, trained or inherited) has several finalists; a
        # lone one is its own survivor, except a trained one under short evidence, whose
        # race is its futility pilot (fit_budget says the same of what it keeps).
        race_rounds = settings.race_rounds
        costs = _run_costs(trials, baseline, set(finalists) - set(inherited))
        fitted = fit_budget(
            costs,
            baseline,
            finalists,
            model_changes,
            frozenset(finalists) - frozenset(inherited),
            _rounds_for(finalists, inherited, settings),
            race_rounds,
            budget_left_full_runs,
            fastest=likeliest_finalist(
                trials, baseline, finalists, settings.accuracy_tolerance_pt, study_metric(study)
            ),
            pilot=configs[baseline].train.evidence_share is not None,
        )
        finalists, race_rounds = fitted.finalists, fitted.race_rounds
        model_changes = tuple(n for n in model_changes if n in finalists)
        inherited = tuple(n for n in inherited if n in finalists)
        timed = _rounds_for(finalists, inherited, settings, fitted.rounds)
        if timed > fitted.rounds and budget_left_full_runs is None:
            fitted = replace(fitted, rounds=timed)  # only timed finalists are left
        elif timed > fitted.rounds:
            # Only timed finalists are left: as many timed rounds as the cap allows.
            refit = fit_budget(
                costs,
                baseline,
                finalists,
                model_changes,
                frozenset(),
                timed,
                race_rounds,
                budget_left_full_runs,
            )
            kept = [
                n
                for n in fitted.notes
                if "confirmation rounds instead" not in n and n not in refit.notes
            ]
            fitted = replace(refit, notes=(*kept, *refit.notes))
        rounds, notes = fitted.rounds, fitted.notes
        seeds = round_seeds(_study_seed(study, results), number, race_rounds + rounds)
        limits = _study_constraints(study)
        plan = VerificationPlan(
            baseline_trial=baseline,
            candidates=finalists,
            seeds=seeds[race_rounds:],
            accuracy_tolerance_pt=settings.accuracy_tolerance_pt,
            race_seeds=seeds[:race_rounds],
            screen_z=settings.screen_z,
            max_memory_bytes=(
                int(limits.max_memory_bytes) if limits.max_memory_bytes is not None else None
            ),
            min_accuracy=limits.min_accuracy,
            model_changes=model_changes,
            inherited=inherited,
            check_floor_json=floor_json,
            budget_steps=_budget_steps(trials, baseline),
        )
        if reuse and latest is not None and _plan_matches(latest, plan):
            return summarize_for_study(study, latest)
        run = results.start_verification(study_name, plan)
    params = {t.number: t.params for t in study.get_trials(deepcopy=False)}
    plan, metric = run.plan, study_metric(study)
    if timeout_s is not None:  # the caller's limit over the one each trial stored
        configs = {n: c.model_copy(update={"timeout_s": timeout_s}) for n, c in configs.items()}
    configs, timed_baseline = _timing_only(configs, plan, study)
    # The runs compile into the study's cache (advanced.measure.compile_cache=study), warm where
    # its search compiled the same graphs.
    with study_compile_cache(results.url, study_name):
        policy = _RoundPolicy(
            survivors_of=lambda rows: race_survivors(plan, rows, params, metric, objective)[1],
            stops_of=lambda rows, survivors: confirmation_stops(
                plan, rows, survivors, metric, objective
            ),
            busy_reruns=settings.busy_rerun_budget,
            timed_baseline=timed_baseline,
        )
        run = _run_verification(run, results, configs, run_trial_fn, on_run, policy)
    summary = summarize_for_study(study, run)
    return replace(summary, notes=(*notes, *summary.notes))


@dataclass(frozen=True)
class _RoundPolicy:
    """How a verification's stages follow from its rows so far (:func:`_run_verification`).

    Attributes:
        survivors_of: the race's survivor per lane, from the rows so far
            (:func:`autotune.study.verification.race_survivors`).
        stops_of: the trained survivors stopped for futility (trial number -> (round, why)),
            from the rows so far and the survivors
            (:func:`autotune.study.verification.confirmation_stops`); None: none stop.
        busy_reruns: re-runs of runs measured on a busy machine this verification may spend
            (``advanced.verify.busy_rerun_budget``).
        timed_baseline: the baseline's configuration when timed only, for a confirmation
            whose every survivor still going is timed; None: it always trains.
    """

    survivors_of: Callable[[list[VerificationRecord]], Mapping[Lane, int]]
    stops_of: (
        Callable[[list[VerificationRecord], Mapping[Lane, int]], Mapping[int, tuple[int, str]]]
        | None
    ) = None
    busy_reruns: int = 0
    timed_baseline: TrialConfig | None = None


def _run_verification(
    run: VerificationRun,
    results: ResultsStore,
    configs: Mapping[int, TrialConfig],
    run_trial_fn: RunTrialFn,
    on_run: Callable[[VerificationProgress], None] | None,
    policy: _RoundPolicy,
) -> VerificationRun:
    """Run every planned (round, configuration) without a row, after one discarded warm-up
    run, store each, then finish: the race first, then the confirmation of the race's
    survivor (``policy.survivors_of`` the rows so far).

    A run measured on a busy machine is measured again at once (attempt 1, 2, ...: the pair
    stays close in time to the round's other runs) while fewer than ``policy.busy_reruns``
    re-runs were spent in this verification (its stored superseded attempts count): a resumed
    verification also measures again a busy last attempt it stopped after.

    The confirmation runs round by round: before each, ``policy.stops_of`` names the trained
    survivors stopped for futility, whose remaining rounds are not run. When every survivor
    still going is timed (its accuracy inherited with the paired check), the baseline's
    confirmation runs are timed too (``policy.timed_baseline``): nothing in them is compared
    on a trained metric."""
    survivors_of, stops_of = policy.survivors_of, policy.stops_of
    busy_reruns, timed_baseline = policy.busy_reruns, policy.timed_baseline
    plan = run.plan
    latest = {(r.round_index, r.trial_number): r for r in run.rows}
    reruns_used = len(run.superseded)
    warmed = False

    def needs_run(item: tuple[int, int]) -> bool:
        row = latest.get(item)
        return row is None or (row.busy and reruns_used < busy_reruns)

    def run_stage(schedule: list[tuple[int, int]], planned: int) -> None:
        nonlocal warmed, reruns_used
        pending = [item for item in schedule if needs_run(item)]
        if pending and not warmed:
            # One discarded run first, as benchmark harnesses throw away warm-up: the first
            # trial process after a start paid for cold caches (the forkserver's, the page
            # cache's, the CPU's clock) and read up to a third slower than the same
            # configuration later. It is timed only (its warm-up and timed windows, as a
            # timed finalist runs): it warms the machine in seconds, not a full run, and its
            # seconds are not in the verification's cost.
            round_index, number = pending[0]
            warmup = _round_config(configs[number], plan, round_index)
            if warmup.reuse is None and warmup.objective == "throughput":
                warmup = warmup.model_copy(update={"reuse": ReusedMetric.placeholder(number)})
            _verification_record(round_index, number, plan, warmup, run_trial_fn)
            warmed = True
        for round_index, number in pending:
            config = _round_config(configs[number], plan, round_index)
            while needs_run((round_index, number)):
                previous = latest.get((round_index, number))
                if previous is not None:  # busy: this is one of the bounded re-runs
                    reruns_used += 1
                record = _verification_record(
                    round_index,
                    number,
                    plan,
                    config,
                    run_trial_fn,
                    attempt=0 if previous is None else previous.attempt + 1,
                )
                results.record_verification(run.study_name, run.number, record)
                latest[(round_index, number)] = record
                if on_run is not None:
                    progress = VerificationProgress(
                        len(latest),
                        planned,
                        plan.rounds,
                        record,
                        plan.is_race_round(round_index),
                        rerun_next=needs_run((round_index, number)),
                        reruns_used=reruns_used + needs_run((round_index, number)),
                        reruns_allowed=busy_reruns,
                    )
                    on_run(progress)

    race = plan.race_schedule()
    run_stage(race, len(plan.provisional_schedule()))
    survivors = survivors_of(list(latest.values()))
    confirm = plan.confirm_schedule(survivors)
    for round_index in sorted({r for r, _ in confirm}):
        stops = stops_of(list(latest.values()), survivors) if stops_of is not None else {}
        going = [n for n in plan.confirmed(survivors) if n not in stops]
        if timed_baseline is not None and going and set(going) <= set(plan.inherited):
            configs = {**configs, plan.baseline_trial: timed_baseline}
        kept = confirmation_schedule(plan, survivors, stops)
        run_stage([item for item in kept if item[0] == round_index], len(race) + len(kept))
    return results.complete_verification(run.study_name, run.number)


def _round_config(config: TrialConfig, plan: VerificationPlan, round_index: int) -> TrialConfig:
    """A study trial's configuration as a verification round runs it: the round's seed, and
    none of the mock device's deliberate faults (they belong to the search's trials)."""
    return config.model_copy(update={"seed": plan.seed(round_index), "mock_fault": "none"})


def _verification_record(
    round_index: int,
    number: int,
    plan: VerificationPlan,
    config: TrialConfig,
    run_trial_fn: RunTrialFn,
    attempt: int = 0,
) -> VerificationRecord:
    """Run one configuration once; a failure is a row too (it disqualifies the candidate).
    ``busy_machine`` is judged by the configuration's ``advanced.measure.max_other_cpu_share`` (the
    study's, as its trial stored it)."""
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
        attempt=attempt,
    )
    started = time.perf_counter()
    try:
        m = run_trial_fn(config)
    except TrialError as e:
        run_s = time.perf_counter() - started
        return replace(unmeasured, failure=e.failure, failure_detail=e.detail[-2000:], run_s=run_s)
    run_s = m.train_s if m.simulated else time.perf_counter() - started
    losses = m.extra.get("check_losses")
    timed_only = config.reuse is not None  # its metric is the search's, not this run's
    return replace(
        unmeasured,
        throughput_sps=m.throughput_sps,
        throughput_iqr_sps=m.throughput_iqr_sps,
        step_time_s=m.step_time_s,
        val_metric=None if timed_only else m.val_metric,
        val_samples=None if timed_only else m.val_samples,
        check_losses_json=json.dumps(list(losses)) if losses else None,
        run_s=run_s,
        compile_s=m.compile_s,
        peak_memory_bytes=m.peak_memory_bytes,
        train_s=m.train_s,
        other_cpu_share=m.other_cpu_share,
        load_avg_1m=m.load_avg_1m,
        busy_machine=(
            m.busy(config.measure.max_other_cpu_share) if m.other_cpu_share is not None else None
        ),
        # Time-to-accuracy runs only (None, and no curve, in a throughput run).
        time_to_accuracy_s=m.time_to_accuracy_s,
        target_reached=m.target_reached,
        metric_curve_json=(
            json.dumps([list(point) for point in m.metric_curve])
            if m.target_reached is not None
            else None
        ),
    )
