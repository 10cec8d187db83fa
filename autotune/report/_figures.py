"""Plotly figures drawn from a :class:`~autotune.report.ReportData` (and nothing else).

Every user-provided string that reaches a figure (study name, space name, parameter values,
failure reasons) goes through :func:`html.escape`: Plotly renders titles, hover text and tick
labels as a subset of HTML, so unescaped text could inject markup. Plotly shows the escaped
entities as the original characters.

Only SVG traces (``Scatter``, not ``Scattergl``) are used, so each drawn point is an element in
the page (the browser test counts them).

A time-to-accuracy study (two objectives: time to target, peak memory) gets one 2-D Pareto
figure instead of three projections and a 3-D view, and the figure of its learning curves:
the metric against wall time of the baseline and every Pareto-optimal trial, with the target.

One module of about 650 lines on purpose: its one job is drawing the report's figures, and they
share the axes, the escaping, the point classes and the hover text defined at the top.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import moocore
import numpy as np
import plotly.graph_objects as go

from autotune.objectives import Objective, ObjectiveMode
from autotune.report._data import ReportData
from autotune.report._points import FAILED, FEASIBLE, INFEASIBLE, TrialPoint
from autotune.report._text import ratio_text, seconds_text

__all__ = [
    "FIGURE_IDS",
    "PROJECTIONS",
    "TTA_FIGURE_IDS",
    "TTA_PROJECTIONS",
    "Curve",
    "build_figures",
    "curves_figure",
    "figure_ids",
    "hypervolume_figure",
    "importances_figure",
    "learning_curves",
    "parallel_coordinates_figure",
    "pareto_2d_figure",
    "pareto_3d_figure",
]

_MIB = float(1 << 20)
#: The objectives' fields of a :class:`TrialPoint`, in the objectives' order.
_FIELDS = ("throughput_sps", "val_metric", "peak_memory_bytes")
#: The same in a time-to-accuracy study.
_TTA_FIELDS = ("time_to_accuracy_s", "peak_memory_bytes")


class _Axis(NamedTuple):
    """How one objective is drawn: its label, the scale from the stored unit to the display
    unit, and its direction (``maximize`` or ``minimize``)."""

    label: str
    scale: float
    direction: str


def _metric_label(metric: Objective) -> str:
    """``validation accuracy (%)`` for accuracy; ``val_loss (validation, lower is better)``."""
    if metric.is_accuracy:
        return "validation accuracy (%)"
    better = "higher" if metric.direction == "maximize" else "lower"
    return f"{metric.name} (validation, {better} is better)"


def _axes(data: ReportData) -> dict[str, _Axis]:
    """Display axis per objective field of :class:`TrialPoint`, for this study's objectives
    (in their order)."""
    if data.time_to_accuracy:
        time, memory = data.objectives
        return {
            "time_to_accuracy_s": _Axis("time to target (s)", 1.0, time.direction),
            "peak_memory_bytes": _Axis("peak memory (MiB)", 1.0 / _MIB, memory.direction),
        }
    throughput, metric, memory = data.objectives
    return {
        "throughput_sps": _Axis("throughput (samples/s)", 1.0, throughput.direction),
        "val_metric": _Axis(
            _metric_label(metric), 100.0 if metric.is_accuracy else 1.0, metric.direction
        ),
        "peak_memory_bytes": _Axis("peak memory (MiB)", 1.0 / _MIB, memory.direction),
    }


def _short(label: str) -> str:
    """An axis label without its parenthesis: ``validation accuracy``, ``val_loss``."""
    return label.split(" (")[0]


#: The three 2-D projections: (figure id, x objective, y objective).
PROJECTIONS: tuple[tuple[str, str, str], ...] = (
    ("pareto-throughput-accuracy", "throughput_sps", "val_metric"),
    ("pareto-throughput-memory", "throughput_sps", "peak_memory_bytes"),
    ("pareto-accuracy-memory", "val_metric", "peak_memory_bytes"),
)
#: Every figure a page shows, in page order.
FIGURE_IDS: tuple[str, ...] = (
    *(p[0] for p in PROJECTIONS),
    "pareto-3d",
    "parallel-coordinates",
    "importances",
    "hypervolume",
)
#: A time-to-accuracy study's one 2-D Pareto figure: (figure id, x objective, y objective).
TTA_PROJECTIONS: tuple[tuple[str, str, str], ...] = (
    ("pareto-time-memory", "time_to_accuracy_s", "peak_memory_bytes"),
)
#: Every figure a time-to-accuracy study's page shows, in page order.
TTA_FIGURE_IDS: tuple[str, ...] = (
    "metric-vs-time",
    *(p[0] for p in TTA_PROJECTIONS),
    "parallel-coordinates",
    "importances",
    "hypervolume",
)


def figure_ids(mode: ObjectiveMode) -> tuple[str, ...]:
    """The figures of a study's page, in page order: :data:`FIGURE_IDS` in a throughput study,
    :data:`TTA_FIGURE_IDS` in a time-to-accuracy study."""
    return TTA_FIGURE_IDS if mode == "time_to_accuracy" else FIGURE_IDS


#: Point classes, each drawn as its own trace: (key, legend label, marker).
_CLASSES: tuple[tuple[str, str, dict[str, Any]], ...] = (
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
        "infeasible, never launched (no measurement)",
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
_LAYOUT: dict[str, Any] = {
    "template": "plotly_white",
    "margin": {"l": 60, "r": 20, "t": 50, "b": 50},
    "legend": {"font": {"size": 10}, "orientation": "h", "yanchor": "top", "y": -0.18, "x": 0},
    "hoverlabel": {"align": "left"},
}


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _title(data: ReportData, what: str) -> str:
    suffix = " [SIMULATED]" if data.simulated else ""
    return f"{what}: study {_esc(data.study_name)}{suffix}"


def _point_class(point: TrialPoint, recommended: int | None = None) -> str:
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


def _recommended(data: ReportData) -> int | None:
    return data.recommended.trial_number if data.recommended is not None else None


def _class_label(key: str, label: str, data: ReportData) -> str:
    """A point class's legend label; a time-to-accuracy study's infeasible trials are mostly
    those that missed the target."""
    if key == "infeasible" and data.time_to_accuracy:
        return "infeasible (missed the target, or breaks a constraint)"
    return label


def _to_target_words(point: TrialPoint, data: ReportData) -> list[str]:
    """Hover lines of a measured trial of a time-to-accuracy study."""
    metric = data.metric
    name = "" if metric.is_accuracy else _esc(metric.name) + " "
    memory = f"{(point.peak_memory_bytes or 0) / _MIB:,.1f} MiB"
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


def _hover(point: TrialPoint, data: ReportData) -> str:
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
            f"{shown if metric.is_accuracy else _esc(metric.name) + ' ' + shown} · "
            f"{(point.peak_memory_bytes or 0) / _MIB:,.1f} MiB"
        )
        if point.speedup is not None:
            lines.append(f"{point.speedup:.2f}x the baseline's throughput (single trials)")
    if point.reason:
        lines.append(_esc(point.reason[:160]))
    knobs = [f"{_esc(k)}={_esc(v)}" for k, v in point.params.items()]
    for i in range(0, len(knobs), 4):
        lines.append(" ".join(knobs[i : i + 4]))
    return "<br>".join(lines)


def _value(point: TrialPoint, axis: str, axes: Mapping[str, _Axis]) -> float | None:
    raw = getattr(point, axis)
    return None if raw is None else float(raw) * axes[axis].scale


def _floors(
    points: Sequence[TrialPoint], objective: str, axes: Mapping[str, _Axis]
) -> tuple[float, float]:
    """Where unmeasured trials sit on this axis: just past the worst measured value.

    Returns:
        ``(floor, span)`` in display units.
    """
    values = [v for p in points if p.measured and (v := _value(p, objective, axes)) is not None]
    if not values:
        return 0.0, 1.0
    low, high = min(values), max(values)
    span = (high - low) or (abs(high) * 0.1) or 1.0
    worst_is_low = axes[objective].direction == "maximize"
    return (low - 0.08 * span if worst_is_low else high + 0.08 * span), span


def _positions(
    points: Sequence[TrialPoint], objectives: Sequence[str], axes: Mapping[str, _Axis]
) -> dict[int, tuple[float, ...]]:
    """Display coordinates of every point; unmeasured ones past the worst corner, spread a
    little (deterministically) so each can be hovered. A measured trial without a value on
    an axis (a time-to-accuracy trial that missed the target has no time to target) sits past
    the worst end of that axis only."""
    floors = {o: _floors(points, o, axes) for o in objectives}
    out: dict[int, tuple[float, ...]] = {}
    unmeasured = 0
    for point in points:
        values = [_value(point, o, axes) for o in objectives]
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


def _front_line(data: ReportData, x: str, y: str) -> tuple[list[float], list[float]]:
    """The 2-D non-dominated staircase of the feasible points in this projection
    (``moocore.is_nondominated``), best ``x`` first."""
    axes = _axes(data)
    sx = 1 if axes[x].direction == "maximize" else -1
    sy = 1 if axes[y].direction == "maximize" else -1
    pts = sorted(
        {
            (_value(p, x, axes) or 0.0, _value(p, y, axes) or 0.0)
            for p in data.points
            if p.status == FEASIBLE
            and p.measured
            and _value(p, x, axes) is not None
            and _value(p, y, axes) is not None
        }
    )
    keep = moocore.is_nondominated(np.asarray(pts), maximise=[sx > 0, sy > 0]) if pts else []
    front = sorted(
        (pt for pt, kept in zip(pts, keep, strict=True) if kept), key=lambda v: -sx * v[0]
    )
    xs: list[float] = []
    ys: list[float] = []
    for i, (px, py) in enumerate(front):
        if i:
            xs.append(px)
            ys.append(front[i - 1][1])
        xs.append(px)
        ys.append(py)
    return xs, ys


def pareto_2d_figure(data: ReportData, x: str, y: str) -> go.Figure:
    """One 2-D projection of the objectives: every finished trial exactly once.

    These are single-trial figures of the search. Feasible trials are split into
    Pareto-optimal (of all the study's objectives) and dominated; the verified recommendation,
    infeasible, never-launched and failed trials are drawn apart. Trials without a
    measurement sit just past the worst corner of the axes. The dashed line is the 2-D front
    of this projection.
    """
    axes = _axes(data)
    pos = _positions(data.points, (x, y), axes)
    fig = go.Figure()
    fx, fy = _front_line(data, x, y)
    if fx:
        fig.add_trace(
            go.Scatter(
                x=fx,
                y=fy,
                mode="lines",
                name="2-D front",
                hoverinfo="skip",
                line={"color": "#d95f02", "width": 1, "dash": "dot"},
            )
        )
    recommended = _recommended(data)
    for key, label, marker in _CLASSES:
        members = [p for p in data.points if _point_class(p, recommended) == key]
        if not members:
            continue
        fig.add_trace(
            go.Scatter(
                x=[pos[p.number][0] for p in members],
                y=[pos[p.number][1] for p in members],
                mode="markers",
                name=f"{_class_label(key, label, data)} ({len(members)})",
                marker=marker,
                text=[_hover(p, data) for p in members],
                hovertemplate="%{text}<extra></extra>",
                customdata=[p.number for p in members],
            )
        )
    fig.update_layout(
        **_LAYOUT,
        title={
            "text": _title(
                data,
                f"{_esc(_short(axes[y].label))} vs {_esc(_short(axes[x].label))} (single trials)",
            ),
            "font": {"size": 13},
        },
        xaxis_title=_esc(axes[x].label),
        yaxis_title=_esc(axes[y].label),
        height=480,
    )
    fig.update_layout(margin={"l": 60, "r": 20, "t": 50, "b": 130})
    return fig


def pareto_3d_figure(data: ReportData) -> go.Figure:
    """All three objectives in 3-D, with the same point classes as the 2-D projections."""
    objectives = _FIELDS
    axes = _axes(data)
    pos = _positions(data.points, objectives, axes)
    fig = go.Figure()
    recommended = _recommended(data)
    for key, label, marker in _CLASSES:
        members = [p for p in data.points if _point_class(p, recommended) == key]
        if not members:
            continue
        marker3d = {k: v for k, v in marker.items() if k in ("color", "opacity", "line")}
        marker3d["size"] = max(3, int(marker.get("size", 7)) // 2)
        symbol = marker.get("symbol", "circle")
        marker3d["symbol"] = (
            symbol if symbol in ("circle", "diamond-open", "square-open", "x") else "diamond"
        )
        fig.add_trace(
            go.Scatter3d(
                x=[pos[p.number][0] for p in members],
                y=[pos[p.number][1] for p in members],
                z=[pos[p.number][2] for p in members],
                mode="markers",
                name=f"{label} ({len(members)})",
                marker=marker3d,
                text=[_hover(p, data) for p in members],
                hovertemplate="%{text}<extra></extra>",
            )
        )
    fig.update_layout(
        **_LAYOUT,
        title={"text": _title(data, "All three objectives (single trials)"), "font": {"size": 13}},
        scene={
            "xaxis_title": _esc(axes[objectives[0]].label),
            "yaxis_title": _esc(axes[objectives[1]].label),
            "zaxis_title": _esc(axes[objectives[2]].label),
        },
        height=480,
    )
    fig.update_layout(margin={"l": 0, "r": 0, "t": 50, "b": 100}, legend={"y": 0})
    return fig


def _dimension(label: str, values: Sequence[Any]) -> dict[str, Any]:
    """A parallel-coordinates axis; categorical values become indices with their labels."""
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return {"label": _esc(label), "values": list(values)}
    categories = sorted({str(v) for v in values})
    index = {c: i for i, c in enumerate(categories)}
    return {
        "label": _esc(label),
        "values": [index[str(v)] for v in values],
        "tickvals": list(range(len(categories))),
        "ticktext": [_esc(c) for c in categories],
    }


def parallel_coordinates_figure(data: ReportData) -> go.Figure:
    """Knobs against objectives for every measured trial, coloured by throughput (in a
    time-to-accuracy study: every trial that reached the target, coloured by its time to
    target)."""
    axes = _axes(data)
    measured = [
        p for p in data.points if p.measured and all(_value(p, o, axes) is not None for o in axes)
    ]
    fig = go.Figure()
    if measured:
        dims = [_dimension(k, [p.params.get(k, "—") for p in measured]) for k in data.knob_names]
        dims += [
            _dimension(axis.label, [_value(p, o, axes) or 0.0 for p in measured])
            for o, axis in axes.items()
        ]
        if data.time_to_accuracy:
            colour = [p.time_to_accuracy_s or 0.0 for p in measured]
            scale, colour_title = "Viridis_r", "s to target"
        else:
            colour = [p.throughput_sps or 0.0 for p in measured]
            scale, colour_title = "Viridis", "samples/s"
        fig.add_trace(
            go.Parcoords(
                line={
                    "color": colour,
                    "colorscale": scale,
                    "showscale": True,
                    "colorbar": {"title": {"text": colour_title}},
                },
                dimensions=dims,
            )
        )
    unmeasured = len(data.points) - len(measured)
    without = "without a time to target" if data.time_to_accuracy else "without a measurement"
    fig.update_layout(
        **_LAYOUT,
        title={
            "text": _title(
                data,
                f"Knobs against objectives ({len(measured)} measured trials"
                + (f"; {unmeasured} {without} not drawn" if unmeasured else "")
                + ")",
            ),
            "font": {"size": 13},
        },
        height=440,
    )
    fig.update_layout(margin={"l": 60, "r": 60, "t": 90, "b": 30})
    return fig


def importances_figure(data: ReportData) -> go.Figure:
    """Parameter importances (fANOVA) per objective, as grouped horizontal bars."""
    fig = go.Figure()
    params = list(data.knob_names)
    for objective, axis in zip(data.objectives, _axes(data).values(), strict=True):
        values: Mapping[str, float] = data.importances.get(objective.name, {})
        if not values:
            continue
        fig.add_trace(
            go.Bar(
                y=[_esc(p) for p in params],
                x=[values.get(p, 0.0) for p in params],
                orientation="h",
                name=_esc(axis.label),
                hovertemplate="%{y}: %{x:.2f}<extra>" + _esc(objective.name) + "</extra>",
            )
        )
    fig.update_layout(
        **_LAYOUT,
        title={
            "text": _title(data, "Parameter importance per objective (fANOVA)"),
            "font": {"size": 13},
        },
        barmode="group",
        xaxis_title="importance (share of the objective's variance)",
        height=460,
    )
    fig.update_layout(margin={"l": 110, "r": 20, "t": 50, "b": 110})
    fig.update_yaxes(autorange="reversed")
    if not data.importances:
        fig.add_annotation(
            text="not enough feasible trials yet",
            showarrow=False,
            x=0.5,
            y=0.5,
            xref="paper",
            yref="paper",
        )
    return fig


def hypervolume_figure(data: ReportData) -> go.Figure:
    """Hypervolume of the feasible trials after each finished trial."""
    fig = go.Figure()
    if data.hypervolume:
        fig.add_trace(
            go.Scatter(
                x=[h.number for h in data.hypervolume],
                y=[h.hypervolume for h in data.hypervolume],
                mode="lines+markers",
                line={"shape": "hv", "color": "#1b9e77"},
                marker={"size": 4},
                name="hypervolume",
                hovertemplate="after trial %{x}: %{y:.4f}<extra></extra>",
            )
        )
    what = " (time to target, peak memory)" if data.time_to_accuracy else ""
    fig.update_layout(
        **_LAYOUT,
        title={"text": _title(data, f"Hypervolume history{what}"), "font": {"size": 13}},
        xaxis_title="trial number",
        yaxis_title="hypervolume (normalized, 0-1)",
        height=460,
        showlegend=False,
    )
    return fig


class Curve(NamedTuple):
    """One trial's learning curve as :func:`curves_figure` draws it.

    Attributes:
        number: the trial number.
        name: its legend label (``baseline (trial 0)``, ``trial 4 (Pareto-optimal)``).
        wall_s: wall seconds since its first training step, per evaluation.
        metric: the metric at each evaluation, in display units (accuracy in %).
    """

    number: int
    name: str
    wall_s: tuple[float, ...]
    metric: tuple[float, ...]


def learning_curves(data: ReportData) -> tuple[Curve, ...]:
    """The curves of :func:`curves_figure`: the baseline's, then every Pareto-optimal trial's
    (soonest to the target first); trials without a recorded curve are left out."""
    scale = 100.0 if data.metric.is_accuracy else 1.0
    by_number = {p.number: p for p in data.points}
    chosen = [p for p in data.points if p.baseline]
    chosen += [by_number[r.number] for r in data.pareto if not by_number[r.number].baseline]
    curves = []
    for point in chosen:
        if not point.curve:
            continue
        name = (
            f"baseline (trial {point.number})"
            if point.baseline
            else f"trial {point.number} (Pareto-optimal)"
        )
        curves.append(
            Curve(
                point.number,
                name,
                tuple(c[0] for c in point.curve),
                tuple(scale * c[2] for c in point.curve),
            )
        )
    return tuple(curves)


def curves_figure(data: ReportData) -> go.Figure:
    """A time-to-accuracy study's key picture: the validation metric against wall seconds
    for the baseline and every Pareto-optimal trial (one line each, a marker per
    evaluation; :func:`learning_curves`), and the target as a dashed horizontal line.

    Wall seconds count from each trial's first training step, compilation and evaluations
    included, as the time to target does: a curve crosses the target line at its trial's
    time to target.
    """
    fig = go.Figure()
    curves = learning_curves(data)
    for curve in curves:
        fig.add_trace(
            go.Scatter(
                x=list(curve.wall_s),
                y=list(curve.metric),
                mode="lines+markers",
                name=_esc(curve.name),
                marker={"size": 5},
                line={"width": 3 if curve.name.startswith("baseline") else 1.5},
                hovertemplate=_esc(curve.name) + ": %{y:.4g} after %{x:.4g} s<extra></extra>",
                customdata=[curve.number] * len(curve.wall_s),
            )
        )
    scale = 100.0 if data.metric.is_accuracy else 1.0
    if data.target is not None:
        end = max((max(c.wall_s) for c in curves if c.wall_s), default=1.0)
        fig.add_trace(
            go.Scatter(
                x=[0.0, end],
                y=[scale * data.target] * 2,
                mode="lines",
                name=f"target {_esc(data.metric.format(data.target, 1))}",
                hoverinfo="skip",
                line={"color": "#d62728", "width": 1.5, "dash": "dash"},
            )
        )
    fig.update_layout(
        **_LAYOUT,
        title={
            "text": _title(
                data,
                f"{_esc(_short(_metric_label(data.metric)))} vs wall time: the baseline and "
                "the Pareto-optimal trials (single trials)",
            ),
            "font": {"size": 13},
        },
        xaxis_title="wall time since the first training step (s)",
        yaxis_title=_esc(_metric_label(data.metric)),
        height=480,
    )
    fig.update_layout(margin={"l": 60, "r": 20, "t": 50, "b": 130})
    if not curves:
        fig.add_annotation(
            text="no learning curve recorded yet",
            showarrow=False,
            x=0.5,
            y=0.5,
            xref="paper",
            yref="paper",
        )
    return fig


def build_figures(data: ReportData) -> dict[str, go.Figure]:
    """Every figure of a report page, by :func:`figure_ids` (:data:`FIGURE_IDS`, or
    :data:`TTA_FIGURE_IDS` for a time-to-accuracy study)."""
    if data.time_to_accuracy:
        figures = {"metric-vs-time": curves_figure(data)}
        figures.update({fid: pareto_2d_figure(data, x, y) for fid, x, y in TTA_PROJECTIONS})
        figures["parallel-coordinates"] = parallel_coordinates_figure(data)
        figures["importances"] = importances_figure(data)
        figures["hypervolume"] = hypervolume_figure(data)
        assert tuple(figures) == TTA_FIGURE_IDS
        return figures
    figures = {fid: pareto_2d_figure(data, x, y) for fid, x, y in PROJECTIONS}
    figures["pareto-3d"] = pareto_3d_figure(data)
    figures["parallel-coordinates"] = parallel_coordinates_figure(data)
    figures["importances"] = importances_figure(data)
    figures["hypervolume"] = hypervolume_figure(data)
    assert tuple(figures) == FIGURE_IDS
    return figures
