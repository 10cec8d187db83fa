"""Terminal output of ``autotune run`` and ``autotune verify``: the header, live progress, the
Pareto table (:func:`autotune.study.report.pareto_table`, shared with ``autotune best``), the
verification table and the one-line verdict; and the tables of ``autotune best`` and
``autotune ls`` (export's results, rendered)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from optuna.trial import FrozenTrial
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from autotune.core.config import SearchSpace, display_url, format_knob_value
from autotune.core.flops import flops_text
from autotune.study.baseline import baseline_params
from autotune.study.cost import KEEP_MODEL_SHARE
from autotune.study.objectives import Objective
from autotune.study.report import (
    SIMULATED_TEXT,
    busy_text,
    mib_text,
    pareto_row,
    pareto_table,
    plain,
    seconds_text,
    study_command,
    trial_mode,
    verification_columns,
    verify_command,
)
from autotune.study.trial_result import TrialResult
from autotune.study.verification import ACCURACY, VerificationSummary
from autotune.trial.measure import spread_warning

if TYPE_CHECKING:  # annotations only: `autotune best` and `ls` need not import torch (api does)
    from autotune.core.hardware import DeviceCapabilities
    from autotune.study.api import PreparedRun, StudyProgress, StudyResult, VerificationProgress
    from autotune.study.export import BestConfigs, StudySummary

__all__ = [
    "ProgressDisplay",
    "best_table",
    "describe_peaks",
    "print_header",
    "print_result",
    "print_verdict",
    "studies_table",
    "verification_line",
    "verification_table",
]


def _metric_text(metric: Objective, value: float | None, digits: int = 1) -> str:
    """``acc 98.1%`` for accuracy; ``val_loss 1.234`` for another metric."""
    name = "acc" if metric.is_accuracy else metric.name
    return f"{name} {metric.format(value or 0.0, digits)}"


def _fmt_best(
    best: dict[str, float], metric: Objective = ACCURACY, target: float | None = None
) -> str:
    """The best feasible value so far of each objective (keyed by objective name); in a
    time-to-accuracy study (a ``time_to_accuracy_s`` key, or a ``target``) the shortest time
    to the target and the least memory of the trials that reached it."""
    if "time_to_accuracy_s" in best or target is not None:
        if "time_to_accuracy_s" not in best:
            return "best: no trial reached the target yet"
        to = f" to {metric.format(target, 1)}" if target is not None else " to target"
        return (
            f"best: {seconds_text(best['time_to_accuracy_s'])} s{to} · "
            f"mem {mib_text(best.get('peak_memory_bytes', 0))} MiB"
        )
    if not best:
        return "best: no feasible trial yet"
    return (
        f"best: {best.get('throughput_sps', 0):,.0f} samples/s · "
        f"{_metric_text(metric, best.get(metric.name))} · "
        f"mem {mib_text(best.get('peak_memory_bytes', 0))} MiB"
    )


def _target(trial: FrozenTrial) -> float | None:
    """A time-to-accuracy trial's target value (its ``target`` attribute), else None."""
    return TrialResult.from_trial(trial).target


def _to_target_line(trial: TrialResult, metric: Objective) -> str:
    """A measured time-to-accuracy trial: ``trial 3: reached 95.2% in 12.4 s (compile 3.1 s
    cold), 8.3 MiB`` or ``trial 3: missed 95.0% (94.1% after 30.0 s), 8.3 MiB``."""
    memory = f"{mib_text(trial.peak_memory_bytes or 0)} MiB"
    name = "" if metric.is_accuracy else f"{metric.name} "
    reached = metric.format(trial.val_metric, 1)
    time_s = trial.time_to_accuracy_s
    if trial.target_reached and time_s is not None:
        compile_s, cache = trial.compile_s, trial.compile_cache
        compile_text = (
            f" (compile {seconds_text(compile_s)} s{f' {cache}' if cache is not None else ''})"
            if compile_s is not None and compile_s > 0
            else ""
        )
        return (
            f"trial {trial.number}: reached {name}{reached} in {seconds_text(time_s)} s"
            f"{compile_text}, {memory}"
        )
    trained_s = float(trial.values[0]) if trial.values else trial.train_s
    after = f" after {seconds_text(trained_s)} s" if trained_s is not None else ""
    return (
        f"trial {trial.number}: missed {name}{metric.format(trial.target, 1)} "
        f"({reached}{after}), {memory}"
    )


def _busy_flag(trial: FrozenTrial | TrialResult) -> str:
    """``, WARNING: measured on a busy machine (other processes used 48 % of the CPUs)`` for
    a trial flagged busy (its ``busy_machine`` attribute), else ``""``."""
    result = trial if isinstance(trial, TrialResult) else TrialResult.from_trial(trial)
    share = result.other_cpu_share
    if not result.busy or share is None:
        return _remeasured_flag(result)
    reruns = result.busy_remeasures
    timed = f", the least busy of {reruns + 1} runs" if reruns is not None else ""
    return f", WARNING: {busy_text(share)}{timed}"


def _remeasured_flag(trial: TrialResult) -> str:
    """``, timed again: the first run was measured on a busy machine (other processes used
    48 % of the CPUs)`` for a trial whose busy run was followed by a quiet one (its
    ``busy_run_shares`` attribute, the full run first), else ``""``."""
    shares = trial.busy_run_shares
    return f", timed again: the first run was {busy_text(shares[0])}" if shares else ""


def _spread_flag(trial: TrialResult) -> str:
    """``, WARNING: the timed windows' interquartile range is 14.2 % of their median: this
    could indicate system fluctuation`` for a measured trial whose windows spread as
    torch.utils.benchmark warns of (:func:`autotune.trial.measure.spread_warning`), else ``""``."""
    warning = (
        None if trial.failed else spread_warning(trial.throughput_iqr_sps, trial.throughput_sps)
    )
    return f", WARNING: {warning}" if warning is not None else ""


def _reused_flag(trial: TrialResult) -> str:
    """``, metric from trial 3`` for a trial that reused that trial's metric (the same math
    key; its ``metric_from_trial`` attribute), else ``""``."""
    source = trial.metric_from_trial
    return f", metric from trial {source}" if source is not None else ""


def _trial_line(trial: FrozenTrial, metric: Objective = ACCURACY) -> str:
    result = TrialResult.from_trial(trial)
    knobs = " ".join(f"{k}={v}" for k, v in result.params.items())
    if result.failed:
        # A too_slow trial measured its first windows: a busy machine may be why.
        return (
            f"trial {result.number}: {result.failure_kind} ({result.last_failure_line})"
            f"{_busy_flag(result)} {knobs}"
        )
    if result.time_to_accuracy:
        return (
            f"{_to_target_line(result, metric)}{_reused_flag(result)}{_busy_flag(result)}  {knobs}"
        )
    return (
        f"trial {result.number}: {result.throughput_sps or 0:,.0f} samples/s, "
        f"{_metric_text(metric, result.val_metric)}, "
        f"{mib_text(result.peak_memory_bytes or 0)} MiB{_reused_flag(result)}"
        f"{_busy_flag(result)}{_spread_flag(result)}  {knobs}"
    )


def print_header(console: Console, prepared: PreparedRun, n_trials: int) -> None:
    """Say what is about to run: study, storage, device, sampler, removed choices (the
    precision screen's among them) and precisions kept below the screen's ratio."""
    config, caps = prepared.config, prepared.capabilities
    if caps.simulated:
        console.print(f"[bold yellow]{SIMULATED_TEXT}[/]")
    # The study's name, paths and knob values are the user's: text, never markup or emoji.
    console.print(
        plain("study ")
        + plain(config.study, "bold")
        + plain(
            f" · space {config.space_source} · device {caps.kind} ({caps.name}) · sampler "
            f"{config.sampler} · seed {config.seed} · target {n_trials} trials"
        )
    )
    console.print(plain(f"storage {display_url(config.storage)}"))
    console.print(plain(baseline_line(prepared.space)))
    for line in prepared.space.baseline_notes():
        console.print(plain(line))
    for line in prepared.removed_choices:
        console.print(plain(f"skipped {line}", "dim"))
    for line in prepared.screen.notes() if prepared.screen is not None else []:
        console.print(plain(line, "dim"))
    console.print(plain(budget_line(prepared.space, n_trials)))


def budget_line(space: SearchSpace, n_trials: int) -> str:
    """The header's projected cost, in full runs of the baseline (:mod:`autotune.study.cost`):
    what the cap allows (``budget.full_runs``), or what the search may cost without one."""
    budget = space.budget_settings
    if budget.full_runs is not None:
        search = budget.search_share * budget.full_runs
        return (
            f"cost cap: budget.full_runs={budget.full_runs:g} full runs of the baseline; the "
            f"search may spend {search:g} (past {KEEP_MODEL_SHARE * search:g}, every trial keeps "
            "the baseline's model and global batch: its changes of how it runs are timed, "
            "seconds, and each other precision trains once); the verification gets what is left"
            + (
                f"; short evidence (the cap is below advanced.budget.trained_evidence_full_runs="
                f"{budget.trained_evidence_full_runs:g}): no run trains the budget, the baseline "
                "and every numerics, batch or model change stop after "
                f"{budget.evidence_share:.0%} of its steps and are evaluated there"
                if space.train_settings().evidence_share is not None
                else ""
            )
        )
    return (
        f"projected cost: up to {n_trials} full runs of the baseline for the search (a trial "
        "that keeps the baseline's math is timed, seconds, not the budget), then the "
        "verification's; no cap (budget.full_runs)"
    )


def baseline_line(space: SearchSpace) -> str:
    """The header's baseline line: ``baseline (yours, from baseline:): depth=3 width=16
    batch_size=64 precision=fp32 ... lr=0.001``, or ``baseline (PyTorch's defaults): ...``
    (``lr`` only for a workload: the other doors keep the user's own rate)."""
    params, _ = baseline_params(space)
    knobs = " ".join(f"{k}={format_knob_value(v)}" for k, v in params.items())
    # The other doors train at the user's own learning rate (at the baseline's batch).
    lr = f" lr={format_knob_value(space.train.lr)}" if space.door == "workload" else ""
    whose = "yours, from baseline:" if space.baseline else "PyTorch's defaults"
    return f"baseline ({whose}): {knobs}{lr}"


def describe_peaks(caps: DeviceCapabilities, precisions: Sequence[str]) -> str:
    """One line for the run header: the peak FLOP/s MFU is measured against, and its source."""
    shown = [
        f"{p} {flops_text(caps.peak_flops_per_s[p])}"
        for p in precisions
        if p in caps.peak_flops_per_s
    ]
    if not shown:
        return f"MFU peak: {caps.peak_flops_source or 'unknown'}"
    per = " per GPU" if caps.is_gpu else ""
    return f"MFU peak{per}: {', '.join(shown)} ({caps.peak_flops_source})"


class ProgressDisplay:
    """A rich progress bar on a terminal; one plain line per trial otherwise (logs, CI).

    Args:
        console: where to print.
        target: the ``--trials`` target.
        already: trials finished before this run.
        metric: the study's validation metric (:attr:`autotune.study.api.PreparedRun.objectives`).
    """

    def __init__(
        self, console: Console, target: int, already: int, metric: Objective = ACCURACY
    ) -> None:
        self._console = console
        self._metric = metric
        self._target: float | None = None  # a time-to-accuracy study's, from its trials
        self._progress: Progress | None = None
        if console.is_terminal:
            self._progress = Progress(
                TextColumn("trials"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                TextColumn("{task.fields[best]}"),
                console=console,
            )
            self._task = self._progress.add_task("trials", total=target, completed=already, best="")

    def __enter__(self) -> ProgressDisplay:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._progress is not None:
            self._progress.stop()

    def update(self, progress: StudyProgress) -> None:
        """Show one finished trial."""
        target = _target(progress.last)
        if target is not None:
            self._target = target
        best = _fmt_best(progress.best, self._metric, self._target)
        cost = progress.cost.full_runs if progress.cost is not None else None
        if cost is not None:
            best += f" · cost {cost:,.1f} full runs"
        if progress.note is not None:
            out = self._progress.console if self._progress is not None else self._console
            out.print(plain(progress.note), soft_wrap=True)
        if self._progress is not None:
            self._progress.update(self._task, completed=progress.finished, best=best)
            # Failed, busy and spread trials get their line above the bar (the others only
            # count).
            last = TrialResult.from_trial(progress.last)
            if (
                last.failed
                or _busy_flag(last)
                or (not last.time_to_accuracy and _spread_flag(last))
            ):
                # A failure's reason and the knobs are the user's text (plain).
                self._progress.console.print(plain(_trial_line(progress.last, self._metric), "dim"))
        else:
            self._console.print(
                plain(
                    f"[{progress.finished}/{progress.target} {progress.elapsed_s:.0f}s] "
                    f"{_trial_line(progress.last, self._metric)} | {best}"
                ),
                soft_wrap=True,
            )


def verification_line(progress: VerificationProgress, metric: Objective = ACCURACY) -> str:
    """One verification run as a line: round, trial, and its figures or failure (the
    metric as ``acc 98.42%`` or ``val_loss 1.2340``); a run measured on a busy machine says
    so, and whether it is measured again (:func:`_busy_rerun_text`); a timed run whose windows
    spread by 10 % of their median or more says that (:func:`autotune.trial.measure.spread_warning`)."""
    r = progress.record
    who = "baseline" if r.is_baseline else f"trial {r.trial_number}"
    stage = "race" if progress.race else "confirm"
    again = f" (again, attempt {r.attempt + 1})" if r.attempt else ""
    head = (
        f"[verify {progress.done}/{progress.planned}] {stage} round {r.round_index + 1} "
        f"{who}{again}"
    )
    if r.failure is not None:
        last = (r.failure_detail or "").strip().splitlines()[-1:] or [""]
        return f"{head}: {r.failure} ({last[0]})"
    memory = f"{mib_text(r.peak_memory_bytes or 0)} MiB (seed {r.seed})"
    busy = _busy_rerun_text(progress)
    if r.target_reached is not None:  # a time-to-accuracy run
        reached = metric.format(r.val_metric, 1)
        if r.target_reached and r.time_to_accuracy_s is not None:
            return (
                f"{head}: reached {reached} in {seconds_text(r.time_to_accuracy_s)} s, "
                f"{memory}{busy}"
            )
        return f"{head}: missed the target ({reached} at the end), {memory}{busy}"
    # A timed run (its accuracy inherited) records its check's losses, not a metric.
    figure = (
        _metric_text(metric, r.val_metric, 2)
        if r.val_metric is not None
        else f"timed only, {len(r.check_losses)}-step check recorded"
    )
    spread = spread_warning(r.throughput_iqr_sps, r.throughput_sps)
    return (
        f"{head}: {r.throughput_sps or 0:,.0f} samples/s, {figure}, "
        f"{mib_text(r.peak_memory_bytes or 0)} MiB (seed {r.seed}){busy}"
        + (f"; WARNING: {spread}" if spread is not None else "")
    )


def _busy_rerun_text(progress: VerificationProgress) -> str:
    """``; WARNING: measured on a busy machine (other processes used 48 % of the CPUs):
    measuring it again (re-run 1 of 2)``, or ``...: no re-run left (2 of 2 spent)``, for a
    busy run; ``""`` otherwise."""
    r = progress.record
    if not r.busy or r.other_cpu_share is None:
        return ""
    if progress.rerun_next:
        then = f"measuring it again (re-run {progress.reruns_used} of {progress.reruns_allowed})"
    else:
        then = f"no re-run left ({progress.reruns_used} of {progress.reruns_allowed} spent)"
    return f"; WARNING: {busy_text(r.other_cpu_share)}: {then}"


def verification_table(summary: VerificationSummary, stage: str = "confirm") -> Table:
    """One stage's table: the baseline and every configuration of the stage with their
    verified figures and verdicts (``stage="race"``: the race of the finalists;
    ``"confirm"``: the confirmation, whose rounds alone make the claim), in the columns of
    :func:`~autotune.study.report.verification_columns`, the same as the HTML report's."""
    race = stage == "race"
    verdicts = summary.race if race else (summary.baseline, *summary.candidates)
    seeds = summary.race_seeds if race else summary.seeds
    what = (
        "race (stage A: picks one survivor per answer and evidence, claims nothing)"
        if race
        else ("confirmation (stage B: the claim)" if summary.race_seeds else "rounds")
    )
    title = (
        f"Verification {summary.number} of study {summary.study_name}, {what}: {len(seeds)} "
        f"rounds of fresh processes, seeds {', '.join(map(str, seeds))}"
        + (" [SIMULATED]" if summary.simulated else "")
    )
    table = Table(title=plain(title, "table.title"), title_justify="left")
    columns = verification_columns(summary)
    for column in columns:
        table.add_column(plain(column.header), justify="left" if column.text else "right")
    for v in verdicts:
        table.add_row(*(plain(column.cell(v)) for column in columns))
    return table


def print_verdict_block(console: Console, summary: VerificationSummary) -> None:
    """The verdict block (:meth:`~autotune.study.verification.VerificationSummary.verdict_block`):
    its first line bold (green for a recommendation), the others indented; unwrapped, and
    printed as text (a knob's value is never read as markup)."""
    style = "bold green" if summary.recommended is not None else "bold"
    first, *rest = summary.verdict_block()
    console.print(plain(first, style), soft_wrap=True)
    for line in rest:
        console.print(plain(f"  {line}"), soft_wrap=True)


def print_verdict(console: Console, summary: VerificationSummary, storage: str) -> None:
    """The resume notes, the race's and the confirmation's tables, then the verdict block
    (:meth:`~autotune.study.verification.VerificationSummary.verdict_block`) and the commands that
    use it."""
    for note in summary.notes:
        console.print(plain(f"note: {note}"), soft_wrap=True)
    if summary.race:
        console.print(verification_table(summary, "race"))
    if summary.candidates:
        console.print(verification_table(summary, "confirm"))
    print_verdict_block(console, summary)
    name = summary.study_name
    if summary.recommended is not None:
        diff = study_command("best", name, storage, "--diff")
        console.print(plain(f"the change: {diff}"))
        export = study_command("best", name, storage, "--export", f"{name}-best.yaml")
        console.print(plain(f"export it:  {export}"))
    console.print(plain(f"report:    {study_command('report', name, storage)}"))


def _to_target_table(result: StudyResult, metric: Objective, simulated: str) -> Table:
    """The Pareto table of a time-to-accuracy study, soonest to the target first; the ``x
    sooner`` column when the baseline is on the front (its time is then at hand)."""
    base = next((t for t in result.pareto_trials if TrialResult.from_trial(t).baseline), None)
    base_time_s = float(base.values[0]) if base is not None and base.values else None
    rows = sorted(
        (pareto_row(t, baseline_time_s=base_time_s) for t in result.pareto_trials),
        key=lambda r: (r.time_to_accuracy_s or 0.0, r.number),
    )
    target = next((v for t in result.pareto_trials if (v := _target(t)) is not None), None)
    to = f" to reach {metric.format(target, 1)}" if target is not None else ""
    title = (
        f"Pareto-optimal trials of study {result.study_name} on {result.capabilities.name}"
        f"{to} (time to target, peak memory){simulated}"
    )
    return pareto_table(rows, title, metric, speedup=base is not None, time_to_accuracy=True)


def print_result(console: Console, result: StudyResult, metric: Objective | None = None) -> None:
    """The Pareto table, a one-line summary, and the verified verdict last.

    Args:
        console: where to print.
        result: what the run left behind.
        metric: the study's validation metric (default: the verification's, else accuracy).
    """
    if metric is None:
        metric = result.verification.metric if result.verification is not None else ACCURACY
    caps = result.capabilities
    simulated = " [SIMULATED]" if caps.simulated else ""
    tta = any(trial_mode(t) == "time_to_accuracy" for t in result.pareto_trials)
    if tta:
        console.print(_to_target_table(result, metric, simulated))
    else:
        title = f"Pareto-optimal trials of study {result.study_name} on {caps.name}{simulated}"
        rows = sorted(
            (pareto_row(t) for t in result.pareto_trials), key=lambda r: -r.throughput_sps
        )
        console.print(pareto_table(rows, title, metric, speedup=False))
    console.print(
        plain(
            f"{result.finished} finished trials ({result.ran} run now, {result.wall_s:.1f} s); "
            f"{len(result.pareto_trials)} on the Pareto front. Resume or extend with the same "
            "command."
        )
    )
    if caps.simulated:
        console.print(f"[bold yellow]{SIMULATED_TEXT}[/]")
    cost = cost_text(result)
    if result.verification is not None:
        print_verdict(console, result.verification, result.storage)
    elif result.verification_note is not None:
        console.print(
            plain(f"not verified: {result.verification_note}; no figure above is a verified claim")
        )
    else:
        console.print(
            plain(
                "not verified (verify.rounds=0): no figure above is a verified claim; "
                f"`{verify_command(result.study_name, result.storage)}` verifies the finalists"
            )
        )
    if cost is not None:
        console.print(plain(cost), soft_wrap=True)


def cost_text(result: StudyResult) -> str | None:
    """What the study cost, by stage, in full runs of the baseline (:mod:`autotune.study.cost`):
    ``cost: 6.3 full runs of the baseline (1 full run = 8.7 s): search 4.1 (...),
    verification 2.2 (24 runs)``; None when nothing was measured."""
    search = result.search_cost
    if search is None or not search.full_run_s:
        return None
    verification = result.verification
    verify_s = verification.run_s if verification is not None else 0.0
    total = (search.spent_s + verify_s) / search.full_run_s
    simulated = " (simulated seconds)" if result.capabilities.simulated else ""
    parts = [f"search {search.full_runs or 0.0:,.1f} ({search.counts_text()})"]
    if verification is not None:
        parts.append(f"verification {verify_s / search.full_run_s:,.1f} ({verification.runs} runs)")
    unit = (
        f"1 full run ~ {search.full_run_s:,.1f} s, projected from the baseline's short run"
        if search.projected
        else f"1 full run = {search.full_run_s:,.1f} s, its measured run"
    )
    return f"cost: {total:,.1f} full runs of the baseline{simulated} ({unit}): {', '.join(parts)}"


def best_table(best: BestConfigs) -> Table:
    """The Pareto-optimal configurations of ``autotune best``, best first by the chosen
    objective: single-trial figures of the search (the verified recommendation, when it is one
    of them, is marked); :func:`~autotune.study.report.pareto_table` with a title that says so."""
    tta = best.objective_mode == "time_to_accuracy"
    target = f" to reach {best.metric.format(best.target, 1)}" if tta and best.target else ""
    objective = "time to target" if best.objective == "time" else best.objective
    title = (
        f"Pareto-optimal configurations of study {best.study_name} on {best.device_name}"
        f"{target}, by {objective}: single-trial figures, not verified"
        + (" [SIMULATED]" if best.simulated else "")
    )
    return pareto_table(
        best.rows,
        title,
        best.metric,
        recommended=best.recommended_trial,
        time_to_accuracy=tta,
    )


def studies_table(studies: Sequence[StudySummary], storage: str) -> Table:
    """One line per study: trials, hardware, best single-trial throughput (a time-to-accuracy
    study's: its shortest single-trial time to target, ``12.4 s to 95.0%``), and the verified
    speedup of its recommendation (or why there is none)."""
    mixed = any(s.objective == "time_to_accuracy" for s in studies)
    table = Table(
        title=plain(f"Studies in {display_url(storage)}", "table.title"), title_justify="left"
    )
    for name, justify in (
        ("study", "left"),
        ("space", "left"),
        ("hardware", "left"),
        ("metric", "left"),
        ("finished", "right"),
        ("all trials", "right"),
        ("feasible", "right"),
        ("Pareto", "right"),
        ("best (1 trial)" if mixed else "best samples/s (1 trial)", "right"),
        ("verified speedup", "right"),
        ("created (UTC)", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for s in studies:
        table.add_row(
            plain(s.study_name),
            plain(s.space_name),
            plain(s.hardware + (" [SIMULATED]" if s.simulated else "")),
            plain(s.metric),
            str(s.finished),
            str(s.total),
            str(s.feasible),
            str(s.pareto),
            _best_cell(s, mixed),
            (
                f"{s.verified_speedup:.2f}x"
                + (" sooner" if s.objective == "time_to_accuracy" else "")
                + f" (trial {s.recommended_trial})"
                + (f" at {s.accuracy}" if s.accuracy else "")
                if s.verified_speedup is not None
                else s.verification
            ),
            "" if s.created is None else s.created.strftime("%Y-%m-%d %H:%M"),
        )
    return table


def _best_cell(study: StudySummary, mixed: bool) -> str:
    """``1,234`` (``1,234 samples/s`` beside time-to-accuracy studies) or ``12.4 s to 95.0%``."""
    if study.objective == "time_to_accuracy":
        if study.best_time_to_accuracy_s is None:
            return "target not reached"
        target = f" to {study.target}" if study.target else " to target"
        return f"{seconds_text(study.best_time_to_accuracy_s)} s{target}"
    if study.best_throughput_sps is None:
        return "n/a"
    return f"{study.best_throughput_sps:,.0f}" + (" samples/s" if mixed else "")
