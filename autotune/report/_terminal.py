"""The terminal Pareto table (rich) of ``autotune run`` and ``autotune best``."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from autotune.measure import busy_text
from autotune.objectives import Objective
from autotune.report._points import ParetoRow
from autotune.report._text import metric_column, model_text, ratio_text, seconds_text
from autotune.units import MIB
from autotune.verification import ACCURACY

__all__ = ["SIMULATED_LINE", "pareto_table"]

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
            f"{row.peak_memory_bytes / MIB:,.1f}",
        ]
        if not time_to_accuracy:
            cells.append("n/a" if row.step_time_s is None else f"{1e3 * row.step_time_s:.3f}")
        if compile_s or time_to_accuracy:
            cells.append("n/a" if row.compile_s is None else f"{row.compile_s:.1f}")
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
