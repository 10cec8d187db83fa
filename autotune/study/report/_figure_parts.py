"""What every figure of the report shares: the objectives' display axes, escaping, titles and
layout, the point classes with their markers and hover text, and where each point is drawn.

Every user-provided string that reaches a figure (study name, space name, parameter values,
failure reasons) goes through :func:`~autotune.study.report._text.esc` (:func:`html.escape`): Plotly
renders titles, hover text and tick labels as a subset of HTML, so unescaped text could inject
markup. Plotly shows the escaped entities as the original characters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import plotly.graph_objects as go

from autotune.core.units import MIB
from autotune.study.objectives import Objective
from autotune.study.report._data import ReportData
from autotune.study.report._points import FAILED, FEASIBLE, INFEASIBLE, TrialPoint
from autotune.study.report._text import esc, mib_text, ratio_text, seconds_text

__all__ = [
    "LAYOUT",
    "POINT_CLASSES",
    "Axis",
    "axis_value",
    "class_label",
    "figure_title",
    "hover_text",
    "metric_label",
    "note_empty",
    "objective_axes",
    "point_class",
    "positions",
    "recommended_number",
    "short_label",
]


class Axis(NamedTuple):
    """How one objective is drawn: its label, the scale from the stored unit to the display
    unit, and the objective (its direction: :attr:`Objective.maximized`, :attr:`Objective.sign`)."""

    label: str
    scale: float
    objective: Objective


def metric_label(metric: Objective) -> str:
    """``validation accuracy (%)`` for accuracy; ``val_loss (validation, lower is better)``."""
    if metric.is_accuracy:
        return "validation accuracy (%)"
    better = "higher" if metric.maximized else "lower"
    return f"{metric.name} (validation, {better} is better)"


def objective_axes(data: ReportData) -> dict[str, Axis]:
    """Display axis per objective field of :class:`TrialPoint`, for this study's objectives
    (in their order)."""
    if data.time_to_accuracy:
        time, memory = data.objectives
        return {
            "time_to_accuracy_s": Axis("time to target (s)", 1.0, time),
            "peak_memory_bytes": Axis("peak memory (MiB)", 1.0 / MIB, memory),
        }
    throughput, metric, memory = data.objectives
    return {
        "throughput_sps": Axis("throughput (samples/s)", 1.0, throughput),
        "val_metric": Axis(metric_label(metric), 100.0 if metric.is_accuracy else 1.0, metric),
        "peak_memory_bytes": Axis("peak memory (MiB)", 1.0 / MIB, memory),
    }


def short_label(label: str) -> str:
    """An axis label without its parenthesis: ``validation accuracy``, ``val_loss``."""
    return label.split(" (")[0]


#: Point classes, each drawn as its own trace: (key, legend label, marker).
POINT_CLASSES: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("pareto", "Pareto-optimal", {"color": "#d95f02", "size": 10, "symbol": "circle"}),
    (
        "dominated",
        "feasible, dominated",
        {"color": "#7570b3", "size": 7, "symbol": "circle", "opacity": 0.55},
    ),
    (
        "infeasible",
        "infeasible (breaks a constraint)",
        {"color": "#9e9e9e", "size": 8, "symbol": "diamond-open"},
    ),
    (
        "not_launched",
        "infeasible, not measured (never launched, or stopped too slow)",
        {"color": "#9e9e9e", "size": 8, "symbol": "square-open"},
    ),
    (
        "failed",
        "failed: oom/error/crash/timeout (no measurement)",
        {"color": "#e7298a", "size": 9, "symbol": "x"},
    ),
    (
        "recommended",
        "recommended (verified)",
        {
            "color": "#0b6e4f",
            "size": 15,
            "symbol": "diamond",
            "line": {"color": "#ffffff", "width": 1},
        },
    ),
    (
        "baseline",
        "baseline (PyTorch defaults)",
        {
            "color": "#111111",
            "size": 15,
            "symbol": "star",
            "line": {"color": "#ffffff", "width": 1},
        },
    ),
)
#: The layout every figure starts from.
LAYOUT: dict[str, Any] = {
    "template": "plotly_white",
    "margin": {"l": 60, "r": 20, "t": 50, "b": 50},
    "legend": {"font": {"size": 10}, "orientation": "h", "yanchor": "top", "y": -0.18, "x": 0},
    "hoverlabel": {"align": "left"},
}


def note_empty(fig: go.Figure, text: str) -> None:
    """Write ``text`` across the middle of a figure that has nothing to draw yet."""
    fig.add_annotation(text=text, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")


def figure_title(data: ReportData, what: str) -> str:
    """A figure's title: ``what: study NAME``, with `` [SIMULATED]`` on the mock device;
    ``what`` is already escaped."""
    suffix = " [SIMULATED]" if data.simulated else ""
    return f"{what}: study {esc(data.study_name)}{suffix}"


def point_class(point: TrialPoint, recommended: int | None = None) -> str:
    """The key in :data:`POINT_CLASSES` of the class a point is drawn in; ``recommended`` is
    the verified recommendation's trial number."""
    if point.baseline:
        return "baseline"
    if point.number == recommended:
        return "recommended"
    if point.status == FEASIBLE:
        return "pareto" if point.pareto else "dominated"
    if point.status == INFEASIBLE:
        return "infeasible" if point.measured else "not_launched"
    assert point.status == FAILED
    return "failed"


def recommended_number(data: ReportData) -> int | None:
    """The trial number of the verified recommendation, or None."""
    return data.recommended.trial_number if data.recommended is not None else None


def class_label(key: str, label: str, data: ReportData) -> str:
    """A point class's legend label; a time-to-accuracy study's infeasible trials are mostly
    those that missed the target."""
    if key == "infeasible" and data.time_to_accuracy:
        return "infeasible (missed the target, or breaks a constraint)"
    return label


def _to_target_words(point: TrialPoint, data: ReportData) -> list[str]:
    """Hover lines of a measured trial of a time-to-accuracy study."""
    metric = data.metric
    name = "" if metric.is_accuracy else esc(metric.name) + " "
    memory = f"{mib_text(point.peak_memory_bytes or 0)} MiB"
    if point.time_to_accuracy_s is not None:
        lines = [
            f"single trial: reached {name}{metric.format(point.val_metric, 1)} in "
            f"{seconds_text(point.time_to_accuracy_s)} s · {memory}"
        ]
        if point.speedup is not None:
            lines.append(f"{ratio_text(point.speedup)} sooner than the baseline (single trials)")
    else:
        after = f" after {seconds_text(point.trained_s)} s" if point.trained_s is not None else ""
        lines = [
            f"single trial: missed {name}{metric.format(data.target, 1)} "
            f"({metric.format(point.val_metric, 1)}{after}) · {memory}"
        ]
    if point.throughput_sps is not None:
        lines.append(f"{point.throughput_sps:,.0f} samples/s while training")
    return lines


def hover_text(point: TrialPoint, data: ReportData) -> str:
    """Hover text of one point (escaped: Plotly renders a subset of HTML)."""
    lines = [
        f"<b>trial {point.number}</b> · {point.status}"
        + (" · Pareto-optimal" if point.pareto else "")
    ]
    if point.baseline:
        lines.append("baseline (PyTorch defaults)")
    summary, rec = data.verification, data.recommended
    if summary is not None and rec is not None and point.number == rec.trial_number:
        low, high = rec.speedup_ci95 or (rec.speedup or 0.0, rec.speedup or 0.0)
        lines.append(
            f"RECOMMENDED: {rec.speedup or 0.0:.2f}x verified over {summary.rounds} rounds "
            f"(95 % CI {low:.2f}-{high:.2f}x)"
        )
    if point.measured and data.time_to_accuracy:
        lines.extend(_to_target_words(point, data))
    elif point.measured:
        metric = data.metric
        shown = metric.format(point.val_metric or 0, 1)
        lines.append(
            f"single trial: {point.throughput_sps or 0:,.0f} samples/s · "
            f"{shown if metric.is_accuracy else esc(metric.name) + ' ' + shown} · "
            f"{mib_text(point.peak_memory_bytes or 0)} MiB"
        )
        if point.speedup is not None:
            lines.append(f"{point.speedup:.2f}x the baseline's throughput (single trials)")
    if point.reason:
        lines.append(esc(point.reason[:160]))
    knobs = [f"{esc(k)}={esc(v)}" for k, v in point.params.items()]
    for i in range(0, len(knobs), 4):
        lines.append(" ".join(knobs[i : i + 4]))
    return "<br>".join(lines)


def axis_value(point: TrialPoint, axis: str, axes: Mapping[str, Axis]) -> float | None:
    """A point's value of the objective field ``axis`` in display units; None without one."""
    raw = getattr(point, axis)
    return None if raw is None else float(raw) * axes[axis].scale


def _floors(
    points: Sequence[TrialPoint], objective: str, axes: Mapping[str, Axis]
) -> tuple[float, float]:
    """Where unmeasured trials sit on this axis: just past the worst measured value.

    Returns:
        ``(floor, span)`` in display units.
    """
    values = [v for p in points if p.measured and (v := axis_value(p, objective, axes)) is not None]
    if not values:
        return 0.0, 1.0
    low, high = min(values), max(values)
    span = (high - low) or (abs(high) * 0.1) or 1.0
    worst_is_low = axes[objective].objective.maximized
    return (low - 0.08 * span if worst_is_low else high + 0.08 * span), span


def positions(
    points: Sequence[TrialPoint], objectives: Sequence[str], axes: Mapping[str, Axis]
) -> dict[int, tuple[float, ...]]:
    """Display coordinates of every point; unmeasured ones past the worst corner, spread a
    little (deterministically) so each can be hovered. A measured trial without a value on
    an axis (a time-to-accuracy trial that missed the target has no time to target) sits past
    the worst end of that axis only."""
    floors = {o: _floors(points, o, axes) for o in objectives}
    out: dict[int, tuple[float, ...]] = {}
    unmeasured = 0
    for point in points:
        values = [axis_value(point, o, axes) for o in objectives]
        if point.measured and all(v is not None for v in values):
            out[point.number] = tuple(v or 0.0 for v in values)
            continue
        offsets = ((unmeasured % 7) - 3) / 3.0, ((unmeasured // 7) % 5 - 2) / 2.0, 0.0
        out[point.number] = tuple(
            v
            if point.measured and v is not None
            else floors[o][0] + 0.025 * floors[o][1] * offsets[i]
            for i, (o, v) in enumerate(zip(objectives, values, strict=True))
        )
        unmeasured += 1
    return out
