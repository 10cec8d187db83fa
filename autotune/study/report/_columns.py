"""One column model per table: what each column of the Pareto table and of the verification
tables is called and what its cells say, by objective mode.

The terminal (rich: :func:`autotune.study.report.pareto_table`,
:func:`autotune.study.console.verification_table`) and the HTML report render the same columns, so
the two forms cannot drift apart: the table is worked out once and printed twice, as
``torch.utils.benchmark``'s ``compare.py`` does. A new output column is one :class:`Column`
here.

Cells are plain text (a renderer escapes them); a missing figure reads :data:`MISSING`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from autotune.study.objectives import Objective
from autotune.study.report._points import ParetoRow
from autotune.study.report._text import (
    MISSING,
    busy_runs_text,
    busy_text,
    ci_text,
    compile_text,
    metric_column,
    metric_difference,
    metric_spread,
    mib_text,
    model_text,
    ratio_text,
    seconds_text,
    sps_text,
    step_ms_text,
    time_spread_text,
)
from autotune.study.trial_result import FIGURE_COLUMNS, FigureColumn
from autotune.study.verification import CandidateVerdict, VerificationSummary

__all__ = [
    "Column",
    "busy_notes",
    "figure_columns",
    "is_recommended",
    "pareto_columns",
    "verification_columns",
]

RowT = TypeVar("RowT")


@dataclass(frozen=True)
class Column(Generic[RowT]):
    """One column of a table.

    Attributes:
        header: the column's header, plain text.
        cell: a row's cell, plain text.
        text: a column of words (knobs, verdicts), left-aligned; figures are right-aligned.
    """

    header: str
    cell: Callable[[RowT], str]
    text: bool = False


def _figure_format(figure: str) -> Callable[[float], str]:
    """A figure's cell format, by the unit its name ends in: MiB for ``_bytes``, samples/s for
    ``_sps``, seconds for ``_s``, four significant figures otherwise."""
    if figure.endswith("_bytes"):
        return mib_text
    if figure.endswith("_sps"):
        return sps_text
    if figure.endswith("_s"):
        return seconds_text
    return lambda value: f"{value:.4g}"


def _figure(row: ParetoRow, figure: str) -> float | None:
    """A row's figure from its trial's result; None when it has none."""
    value = getattr(row.result, figure, None)
    return float(value) if isinstance(value, (int, float)) else None


def figure_columns(rows: Sequence[ParetoRow]) -> list[Column[ParetoRow]]:
    """The columns of the registry's figures (:data:`~autotune.study.trial_result.FIGURE_COLUMNS`)
    that some row has, in the registry's order, each in its unit's format."""

    def column(entry: FigureColumn) -> Column[ParetoRow]:
        text = _figure_format(entry.figure)

        def cell(row: ParetoRow) -> str:
            value = _figure(row, entry.figure)
            return MISSING if value is None else text(value)

        return Column(entry.header, cell)

    return [
        column(entry)
        for entry in FIGURE_COLUMNS
        if any(_figure(row, entry.figure) is not None for row in rows)
    ]


#: The tuner's knobs as the Pareto table names them: (header, parameter name, a text column).
_TUNER_KNOB_COLUMNS = (
    ("batch", "batch_size", False),
    ("precision", "precision", True),
    ("memory format", "memory_format", True),
    ("compile", "compile_mode", True),
    ("workers", "num_workers", False),
    ("gpus", "gpu_count", False),
)


#: The guide's knobs as the folded Pareto table names them, shown where a row has one.
GUIDE_KNOB_HEADERS = {
    "optimizer_impl": "optimizer",
    "activation_checkpointing": "checkpointing",
    "cpu_threads": "threads",
    "cudnn_benchmark": "cudnn bench",
    "cuda_expandable_segments": "expandable seg",
    "data_parallel": "parallel",
}


def _knob_column(header: str, name: str, text: bool, absent: str = "") -> Column[ParetoRow]:
    """The column of one knob: its value as the trial set it (``absent`` when it has none)."""
    return Column(header, lambda row: str(row.params.get(name, absent)), text=text)


def _metric_cell(metric: Objective, row: ParetoRow) -> str:
    """A Pareto row's metric, marked when the trial inherited trial N's instead of training
    in full (the same math key): ``(inherited from trial N, checked)`` with a passed paired
    check, ``(from trial N, unchecked)`` without one (:mod:`autotune.study.evidence`); a metric
    measured at a share of the budget (short evidence) says where: ``(after 30 of the
    budget's 600 steps)``."""
    text = metric.format(row.val_metric, 1)
    if row.metric_from_trial is None and row.result.budget_steps:
        text += f" ({row.result.evidence_steps_text})"
    if row.metric_from_trial is not None:
        source = row.result.accuracy_source
        if source == "inherited":
            text += f" (inherited from trial {row.metric_from_trial}, checked)"
        elif source == "inherited_unchecked":
            text += f" (from trial {row.metric_from_trial}, unchecked)"
        else:
            text += f" (from trial {row.metric_from_trial})"
    return text


def _difference_cell(metric: Objective, verdict: CandidateVerdict) -> str:
    """A verdict's paired metric difference, or for a candidate that inherits the baseline's
    metric, its evidence (``inherited: the same computation``)."""
    if verdict.inherits_accuracy:
        return f"inherited: {verdict.evidence}"
    return metric_difference(metric, verdict) or MISSING


def pareto_columns(
    metric: Objective,
    *,
    time_to_accuracy: bool,
    speedup: bool = True,
    recommended: int | None = None,
    knob_names: Sequence[str] | None = None,
    guide_knobs: Sequence[str] = (),
    rows: Sequence[ParetoRow] = (),
) -> list[Column[ParetoRow]]:
    """The columns of the Pareto table: one line per configuration, its single-trial figures
    and its knobs (the model as its knobs, ``depth=2 width=16``).

    A throughput study's: trial, samples/s, x baseline, the metric, peak MiB,
    step ms, compile s, other CPU, then the knobs. A time-to-accuracy study's: trial, time to
    target s, x sooner (the baseline's time over the trial's), the metric reached,
    peak MiB, compile s and eval s (both inside the time to target), other CPU, then the
    knobs. ``other CPU`` is the share of the CPUs other processes used while the trial was
    timed (:func:`busy_notes` says which rows were measured on a busy machine).

    The knobs come in one of two forms, the only difference between the terminal's table and
    the HTML's: folded to fit a terminal (the model's knobs in one ``model`` column, then the
    tuner's under short names: batch, precision, memory format, compile, workers, gpus), or
    one column per knob under the space's own names (``knob_names``; ``—`` where a trial
    has no value).

    Args:
        metric: the study's validation metric (its header and format).
        time_to_accuracy: the rows are a time-to-accuracy study's.
        speedup: show the ratio to the baseline's trial and mark the baseline's row (off
            where the baseline's figure is not at hand).
        recommended: the verified recommendation's trial number, marked when it is a row.
        knob_names: one column per knob, in this order; None: the folded form.
        guide_knobs: the folded form's columns of the guide's knobs (the ones the rows have;
            :data:`GUIDE_KNOB_HEADERS`), after the tuner's.
        rows: the rows shown: a figure of :data:`FIGURE_COLUMNS` is a column where one of
            them has it (none: no such column).
    """

    def trial(row: ParetoRow) -> str:
        marks = " (baseline)" if speedup and row.baseline else ""
        return f"{row.number}{marks}" + (" (recommended)" if row.number == recommended else "")

    columns: list[Column[ParetoRow]] = [Column("trial", trial)]
    if time_to_accuracy:
        columns.append(Column("time to target s", lambda r: seconds_text(r.time_to_accuracy_s)))
        if speedup:
            columns.append(Column("x sooner", lambda r: ratio_text(r.speedup)))
        columns += [
            Column(f"{metric_column(metric)} reached", lambda r: _metric_cell(metric, r)),
            Column("peak MiB", lambda r: mib_text(r.peak_memory_bytes)),
            Column("compile s", lambda r: compile_text(r.compile_s, r.compile_cache)),
            Column("eval s", lambda r: seconds_text(r.eval_s)),
        ]
    else:
        columns.append(Column("samples/s", lambda r: sps_text(r.throughput_sps)))
        if speedup:
            columns.append(Column("x baseline", lambda r: ratio_text(r.speedup)))
        columns += [
            Column(metric_column(metric), lambda r: _metric_cell(metric, r)),
            Column("peak MiB", lambda r: mib_text(r.peak_memory_bytes)),
            Column("step ms", lambda r: step_ms_text(r.step_time_s)),
            Column("compile s", lambda r: compile_text(r.compile_s, r.compile_cache)),
        ]
    columns += figure_columns(rows)
    columns.append(Column("other CPU", lambda r: r.cpu_text))
    if knob_names is not None:
        return columns + [_knob_column(name, name, True, "—") for name in knob_names]
    return [
        *columns,
        Column("model", lambda r: model_text(r.params), text=True),
        *(_knob_column(header, name, text) for header, name, text in _TUNER_KNOB_COLUMNS),
        *(_knob_column(GUIDE_KNOB_HEADERS[name], name, True) for name in guide_knobs),
    ]


def busy_notes(rows: Sequence[ParetoRow]) -> list[str]:
    """One note per row measured on a busy machine: ``trial 1 measured on a busy machine
    (other processes used 48 % of the CPUs)``; the tables print them under the rows."""
    return [
        f"trial {row.number} {busy_text(row.other_cpu_share)}"
        for row in rows
        if row.busy and row.other_cpu_share is not None
    ]


def is_recommended(summary: VerificationSummary, verdict: CandidateVerdict) -> bool:
    """``verdict`` is the confirmation's verdict of the recommended configuration (the race's
    row of the same trial is not: the race claims nothing)."""
    chosen = summary.recommended
    return (
        chosen is not None
        and not verdict.is_baseline
        and verdict.trial_number == chosen.trial_number
        and verdict.stage == "confirm"
    )


def verification_columns(summary: VerificationSummary) -> list[Column[CandidateVerdict]]:
    """The columns of a verification stage's table (the race's or the confirmation's): each
    configuration with its verified figures and verdict.

    In a throughput study: the speedup over the baseline and its 95 % interval, median
    samples/s and the paired metric difference; in a time-to-accuracy study how many times
    sooner than the baseline (geometric mean over rounds, 95 % interval) and the time to
    target (geometric mean, the same mean as the ratio's; MLPerf's aggregate; fastest-slowest).
    Then the metric's mean and range, validation samples, peak MiB, busy runs, the verdict
    (``RECOMMENDED`` for the recommendation) and the knobs changed from the baseline.
    """
    metric = summary.metric
    figures: list[Column[CandidateVerdict]]
    if summary.is_time_to_accuracy:
        ratio_name = "x sooner"
        figures = [
            Column("time to target s (geo. mean)", lambda v: seconds_text(v.time_to_accuracy_s)),
            Column("MLPerf s", lambda v: seconds_text(v.time_to_accuracy_mlperf_s)),
            Column("fastest-slowest s", time_spread_text),
        ]
    else:
        ratio_name = "speedup"
        figures = [
            Column("median samples/s", lambda v: sps_text(v.throughput_median_sps)),
            Column("metric diff [95 % CI]", lambda v: _difference_cell(metric, v)),
        ]
    return [
        Column("trial", lambda v: f"{v.trial_number}" + (" (baseline)" if v.is_baseline else "")),
        Column(ratio_name, lambda v: "1.00x" if v.is_baseline else ratio_text(v.speedup)),
        Column("95 % CI", lambda v: ci_text(v.speedup_ci95)),
        *figures,
        Column(
            f"{metric_column(metric)} mean [min-max]",
            lambda v: (
                MISSING
                if v.val_metric_mean is None
                else metric_spread(metric, v.val_metric_mean, v.val_metric_min, v.val_metric_max)
            ),
        ),
        Column("n val", lambda v: f"{v.val_samples:,}" if v.val_samples else MISSING),
        Column("peak MiB", lambda v: mib_text(v.peak_memory_max_bytes)),
        Column("busy runs", lambda v: busy_runs_text(v, simulated=summary.simulated)),
        Column(
            "verdict",
            lambda v: "RECOMMENDED" if is_recommended(summary, v) else v.verdict,
            text=True,
        ),
        Column("changed knobs", lambda v: "" if v.is_baseline else v.changes_text(), text=True),
    ]
