"""Plotly figures drawn from a :class:`~autotune.study.report.ReportData` (and nothing else), and
:func:`build_figures`, every figure of a report page.

The pieces every figure shares (axes, escaping, point classes, hover text) are in
:mod:`._figure_parts`; the figures only a time-to-accuracy study has (its learning curves and
its time-vs-memory projection) in :mod:`._curves`. Every user-provided string that reaches a
figure goes through :func:`~autotune.study.report._figure_parts.esc` (Plotly renders a subset of
HTML).

Only SVG traces (``Scatter``, not ``Scattergl``) are used, so each drawn point is an element in
the page (the browser test counts them).

A time-to-accuracy study (two objectives: time to target, peak memory) gets one 2-D Pareto
figure instead of three projections and a 3-D view, and the figure of its learning curves:
the metric against wall time of the baseline and every Pareto-optimal trial, with the target.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import moocore
import numpy as np
import plotly.graph_objects as go

from autotune.study.objectives import ObjectiveMode
from autotune.study.report._curves import TTA_PROJECTIONS, Curve, curves_figure, learning_curves
from autotune.study.report._data import ReportData
from autotune.study.report._figure_parts import (
    LAYOUT,
    POINT_CLASSES,
    axis_value,
    class_label,
    figure_title,
    hover_text,
    note_empty,
    objective_axes,
    point_class,
    positions,
    recommended_number,
    short_label,
)
from autotune.study.report._points import FEASIBLE
from autotune.study.report._text import esc

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

#: The objectives' fields of a :class:`~autotune.study.report._points.TrialPoint`, in the objectives' order.
_FIELDS = ("throughput_sps", "val_metric", "peak_memory_bytes")

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


def _front_line(data: ReportData, x: str, y: str) -> tuple[list[float], list[float]]:
    """The 2-D non-dominated staircase of the feasible points in this projection
    (``moocore.is_nondominated``), best ``x`` first."""
    axes = objective_axes(data)
    sx, sy = axes[x].objective.sign, axes[y].objective.sign
    pts = sorted(
        {
            (axis_value(p, x, axes) or 0.0, axis_value(p, y, axes) or 0.0)
            for p in data.points
            if p.status == FEASIBLE
            and p.measured
            and axis_value(p, x, axes) is not None
            and axis_value(p, y, axes) is not None
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
    axes = objective_axes(data)
    pos = positions(data.points, (x, y), axes)
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
    recommended = recommended_number(data)
    for key, label, marker in POINT_CLASSES:
        members = [p for p in data.points if point_class(p, recommended) == key]
        if not members:
            continue
        fig.add_trace(
            go.Scatter(
                x=[pos[p.number][0] for p in members],
                y=[pos[p.number][1] for p in members],
                mode="markers",
                name=f"{class_label(key, label, data)} ({len(members)})",
                marker=marker,
                text=[hover_text(p, data) for p in members],
                hovertemplate="%{text}<extra></extra>",
                customdata=[p.number for p in members],
            )
        )
    fig.update_layout(
        **LAYOUT,
        title={
            "text": figure_title(
                data,
                f"{esc(short_label(axes[y].label))} vs {esc(short_label(axes[x].label))} (single trials)",
            ),
            "font": {"size": 13},
        },
        xaxis_title=esc(axes[x].label),
        yaxis_title=esc(axes[y].label),
        height=480,
    )
    fig.update_layout(margin={"l": 60, "r": 20, "t": 50, "b": 130})
    return fig


def pareto_3d_figure(data: ReportData) -> go.Figure:
    """All three objectives in 3-D, with the same point classes as the 2-D projections."""
    objectives = _FIELDS
    axes = objective_axes(data)
    pos = positions(data.points, objectives, axes)
    fig = go.Figure()
    recommended = recommended_number(data)
    for key, label, marker in POINT_CLASSES:
        members = [p for p in data.points if point_class(p, recommended) == key]
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
                text=[hover_text(p, data) for p in members],
                hovertemplate="%{text}<extra></extra>",
            )
        )
    fig.update_layout(
        **LAYOUT,
        title={
            "text": figure_title(data, "All three objectives (single trials)"),
            "font": {"size": 13},
        },
        scene={
            "xaxis_title": esc(axes[objectives[0]].label),
            "yaxis_title": esc(axes[objectives[1]].label),
            "zaxis_title": esc(axes[objectives[2]].label),
        },
        height=480,
    )
    fig.update_layout(margin={"l": 0, "r": 0, "t": 50, "b": 100}, legend={"y": 0})
    return fig


def _dimension(label: str, values: Sequence[Any]) -> dict[str, Any]:
    """A parallel-coordinates axis; categorical values become indices with their labels."""
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return {"label": esc(label), "values": list(values)}
    categories = sorted({str(v) for v in values})
    index = {c: i for i, c in enumerate(categories)}
    return {
        "label": esc(label),
        "values": [index[str(v)] for v in values],
        "tickvals": list(range(len(categories))),
        "ticktext": [esc(c) for c in categories],
    }


def parallel_coordinates_figure(data: ReportData) -> go.Figure:
    """Knobs against objectives for every measured trial, coloured by throughput (in a
    time-to-accuracy study: every trial that reached the target, coloured by its time to
    target)."""
    axes = objective_axes(data)
    measured = [
        p
        for p in data.points
        if p.measured and all(axis_value(p, o, axes) is not None for o in axes)
    ]
    fig = go.Figure()
    if measured:
        dims = [_dimension(k, [p.params.get(k, "—") for p in measured]) for k in data.knob_names]
        dims += [
            _dimension(axis.label, [axis_value(p, o, axes) or 0.0 for p in measured])
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
        **LAYOUT,
        title={
            "text": figure_title(
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
    for objective, axis in zip(data.objectives, objective_axes(data).values(), strict=True):
        values: Mapping[str, float] = data.importances.get(objective.name, {})
        if not values:
            continue
        fig.add_trace(
            go.Bar(
                y=[esc(p) for p in params],
                x=[values.get(p, 0.0) for p in params],
                orientation="h",
                name=esc(axis.label),
                hovertemplate="%{y}: %{x:.2f}<extra>" + esc(objective.name) + "</extra>",
            )
        )
    fig.update_layout(
        **LAYOUT,
        title={
            "text": figure_title(data, "Parameter importance per objective (fANOVA)"),
            "font": {"size": 13},
        },
        barmode="group",
        xaxis_title="importance (share of the objective's variance)",
        height=460,
    )
    fig.update_layout(margin={"l": 110, "r": 20, "t": 50, "b": 110})
    fig.update_yaxes(autorange="reversed")
    if not data.importances:
        note_empty(fig, "not enough feasible trials yet")
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
        **LAYOUT,
        title={"text": figure_title(data, f"Hypervolume history{what}"), "font": {"size": 13}},
        xaxis_title="trial number",
        yaxis_title="hypervolume (normalized, 0-1)",
        height=460,
        showlegend=False,
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
