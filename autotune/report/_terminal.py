"""Terminal tables (rich): the Pareto table of ``autotune run`` and ``autotune best``, and the
study list of ``autotune ls``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.table import Table

from autotune.config import display_url
from autotune.measure import busy_text
from autotune.objectives import Objective
from autotune.report._points import ParetoRow
from autotune.report._text import metric_column, model_text, ratio_text, seconds_text
from autotune.verification import ACCURACY

if TYPE_CHECKING:  # export imports report; the tables only need its types
    from autotune.export import BestConfigs, StudySummary

__all__ = ["SIMULATED_LINE", "best_table", "pareto_table", "studies_table"]

_MIB = float(1 << 20)
SIMULATED_LINE = (
    "SIMULATED: these figures come from device=mock, an analytic cost model; no training "
    "happened and no figure is a measurement."
)


def pareto_table(
    rows: Sequence[ParetoRow],
    title: str,
    metric: Objective = ACCURACY,
    *,
    speedup: bool = True,
    compile_s: bool = False,
    recommended: int | None = None,
    time_to_accuracy: bool | None = None,
) -> Table:
    """The Pareto table of ``autotune run`` and ``autotune best``: one line per configuration,
    in the order given, with its single-trial figures and knobs (the model as its knobs,
    ``depth=2 width=16``).

    A throughput study's columns: trial, samples/s, x baseline, the metric, peak MiB, step ms,
    compile s, other CPU, knobs. A time-to-accuracy study's: trial, time to target (s), x
    sooner (than the baseline's trial), the metric reached, peak MiB, compile s (always: the
    time to target includes it), other CPU, knobs. ``other CPU`` is the share of the CPUs
    other processes used while the trial was timed, ``BUSY`` when it was measured on a busy
    machine (the caption says so).

    Args:
        rows: the configurations, in display order.
        title: the table's title.
        metric: the study's validation metric (its column header and format).
        speedup: show the ``x baseline`` (``x sooner``) column and mark the baseline's row.
        compile_s: show the ``compile s`` column (seconds ``torch.compile`` added).
        recommended: the verified recommendation's trial number, marked when it is a row.
        time_to_accuracy: the rows are a time-to-accuracy study's; None: when any row has a
            time to target (:attr:`ParetoRow.time_to_accuracy`).
    """
    if time_to_accuracy is None:
        time_to_accuracy = any(row.time_to_accuracy for row in rows)
    table = Table(title=title, title_justify="left")
    if time_to_accuracy:
        numeric = [
            ("trial", True),
            ("time to target s", True),
            ("x sooner", speedup),
            (f"{metric_column(metric)} reached", True),
            ("peak MiB", True),
            ("compile s", True),
        ]
    else:
        numeric = [
            ("trial", True),
            ("samples/s", True),
            ("x baseline", speedup),
            (metric_column(metric), True),
            ("peak MiB", True),
            ("step ms", True),
            ("compile s", compile_s),
        ]
    numeric.append(("other CPU", True))
    for name, shown in numeric:
        if shown:
            table.add_column(name, justify="right")
    for name in ("model", "batch", "precision", "memory format", "compile", "workers", "gpus"):
        table.add_column(name, justify="right" if name in ("batch", "workers", "gpus") else "left")
    for row in rows:
        p = row.params
        trial = f"{row.number}"
        if speedup and row.baseline:
            trial += " (baseline)"
        if row.number == recommended:
            trial += " (recommended)"
        if time_to_accuracy:
            cells = [trial, seconds_text(row.time_to_accuracy_s)]
        else:
            cells = [trial, f"{row.throughput_sps:,.0f}"]
        if speedup and time_to_accuracy:
            cells.append(ratio_text(row.speedup))
        elif speedup:
            cells.append("n/a" if row.speedup is None else f"{row.speedup:.2f}x")
        cells += [
            metric.format(row.val_metric, 1),
            f"{row.peak_memory_bytes / _MIB:,.1f}",
        ]
        if not time_to_accuracy:
            cells.append("n/a" if row.step_time_s is None else f"{1e3 * row.step_time_s:.3f}")
        if compile_s or time_to_accuracy:
            cells.append(row.compile_text)
        cells.append(row.cpu_text)
        cells += [
            model_text(p),
            *(
                str(p.get(name, ""))
                for name in (
                    "batch_size",
                    "precision",
                    "memory_format",
                    "compile_mode",
                    "num_workers",
                    "gpu_count",
                )
            ),
        ]
        table.add_row(*cells)
    busy = [row for row in rows if row.busy and row.other_cpu_share is not None]
    if busy:
        table.caption = "BUSY: " + "; ".join(
            f"trial {row.number} {busy_text(row.other_cpu_share or 0.0)}" for row in busy
        )
        table.caption_justify = "left"
    return table


def best_table(best: BestConfigs) -> Table:
    """The Pareto-optimal configurations of ``autotune best``, best first by the chosen
    objective: single-trial figures of the search (the verified recommendation, when it is one
    of them, is marked); :func:`pareto_table` with a title that says so."""
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
    table = Table(title=f"Studies in {display_url(storage)}", title_justify="left")
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
            s.study_name,
            s.space_name,
            s.hardware + (" [SIMULATED]" if s.simulated else ""),
            s.metric,
            str(s.finished),
            str(s.total),
            str(s.feasible),
            str(s.pareto),
            _best_cell(s, mixed),
            (
                f"{s.verified_speedup:.2f}x"
                + (" sooner" if s.objective == "time_to_accuracy" else "")
                + f" (trial {s.recommended_trial})"
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
