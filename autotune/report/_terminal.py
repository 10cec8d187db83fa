"""Terminal tables (rich): the Pareto table of ``autotune run`` and ``autotune best``, and the
study list of ``autotune ls``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.table import Table

from autotune.objectives import Objective
from autotune.report._points import ParetoRow
from autotune.report._text import metric_column, model_text
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
) -> Table:
    """The Pareto table of ``autotune run`` and ``autotune best``: one line per configuration,
    in the order given, with its single-trial figures and knobs (the model as its knobs,
    ``depth=2 width=16``).

    Args:
        rows: the configurations, in display order.
        title: the table's title.
        metric: the study's validation metric (its column header and format).
        speedup: show the ``x baseline`` column and mark the baseline's row.
        compile_s: show the ``compile s`` column (seconds ``torch.compile`` added).
        recommended: the verified recommendation's trial number, marked when it is a row.
    """
    table = Table(title=title, title_justify="left")
    numeric = [
        ("trial", True),
        ("samples/s", True),
        ("x baseline", speedup),
        (metric_column(metric), True),
        ("peak MiB", True),
        ("step ms", True),
        ("compile s", compile_s),
    ]
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
        cells = [trial, f"{row.throughput_sps:,.0f}"]
        if speedup:
            cells.append("n/a" if row.speedup is None else f"{row.speedup:.2f}x")
        cells += [
            metric.format(row.val_metric, 1),
            f"{row.peak_memory_bytes / _MIB:,.1f}",
            "n/a" if row.step_time_s is None else f"{1e3 * row.step_time_s:.3f}",
        ]
        if compile_s:
            cells.append("n/a" if row.compile_s is None else f"{row.compile_s:.1f}")
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
    return table


def best_table(best: BestConfigs) -> Table:
    """The Pareto-optimal configurations of ``autotune best``, best first by the chosen
    objective: single-trial figures of the search (the verified recommendation, when it is one
    of them, is marked); :func:`pareto_table` with a title that says so."""
    title = (
        f"Pareto-optimal configurations of study {best.study_name} on {best.device_name}, "
        f"by {best.objective}: single-trial figures, not verified"
        + (" [SIMULATED]" if best.simulated else "")
    )
    return pareto_table(best.rows, title, best.metric, recommended=best.recommended_trial)


def studies_table(studies: Sequence[StudySummary], storage: str) -> Table:
    """One line per study: trials, hardware, best single-trial throughput, and the verified
    speedup of its recommendation (or why there is none)."""
    table = Table(title=f"Studies in {storage}", title_justify="left")
    for name, justify in (
        ("study", "left"),
        ("space", "left"),
        ("hardware", "left"),
        ("metric", "left"),
        ("finished", "right"),
        ("all trials", "right"),
        ("feasible", "right"),
        ("Pareto", "right"),
        ("best samples/s (1 trial)", "right"),
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
            "n/a" if s.best_throughput_sps is None else f"{s.best_throughput_sps:,.0f}",
            (
                f"{s.verified_speedup:.2f}x (trial {s.recommended_trial})"
                if s.verified_speedup is not None
                else s.verification
            ),
            "" if s.created is None else s.created.strftime("%Y-%m-%d %H:%M"),
        )
    return table
