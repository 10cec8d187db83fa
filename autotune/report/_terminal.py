"""Terminal tables of ``autotune best`` and ``autotune ls`` (rich)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.table import Table

from autotune.report._text import metric_column, model_text

if TYPE_CHECKING:  # export imports report; the tables only need its types
    from autotune.export import BestConfigs, StudySummary

__all__ = ["SIMULATED_LINE", "best_table", "studies_table"]

_MIB = float(1 << 20)
SIMULATED_LINE = (
    "SIMULATED: these figures come from device=mock, an analytic cost model; no training "
    "happened and no figure is a measurement."
)


def best_table(best: BestConfigs) -> Table:
    """The Pareto-optimal configurations, best first by the chosen objective: single-trial
    figures of the search (the verified recommendation, when it is one of them, is marked)."""
    title = (
        f"Pareto-optimal configurations of study {best.study_name} on {best.device_name}, "
        f"by {best.objective}: single-trial figures, not verified"
        + (" [SIMULATED]" if best.simulated else "")
    )
    table = Table(title=title, title_justify="left")
    right = (
        "trial",
        "samples/s",
        "x baseline",
        metric_column(best.metric),
        "peak MiB",
        "step ms",
        "batch",
        "workers",
        "gpus",
    )
    for name in (
        *right[:6],
        "model",
        "batch",
        "precision",
        "memory format",
        "compile",
        "workers",
        "gpus",
    ):
        table.add_column(name, justify="right" if name in right else "left")
    recommended = best.recommended_trial
    for row in best.rows:
        p = row.params
        table.add_row(
            f"{row.number}"
            + (" (baseline)" if row.baseline else "")
            + (" (recommended)" if row.number == recommended else ""),
            f"{row.throughput_sps:,.0f}",
            "n/a" if row.speedup is None else f"{row.speedup:.2f}x",
            best.metric.format(row.val_metric, 1),
            f"{row.peak_memory_bytes / _MIB:,.1f}",
            "n/a" if row.step_time_s is None else f"{1e3 * row.step_time_s:.3f}",
            model_text(p),
            str(p.get("batch_size", "")),
            str(p.get("precision", "")),
            str(p.get("memory_format", "")),
            str(p.get("compile_mode", "")),
            str(p.get("num_workers", "")),
            str(p.get("gpu_count", "")),
        )
    return table


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
