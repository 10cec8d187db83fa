"""The figures only a time-to-accuracy study has: its learning curves (the validation metric
against wall time of the baseline and every Pareto-optimal trial, with the target:
:func:`curves_figure`) and its one 2-D Pareto projection, time to target against peak memory
(:data:`TTA_PROJECTIONS`, drawn by :func:`autotune.study.report._figures.pareto_2d_figure`).
"""

from __future__ import annotations

from typing import NamedTuple

import plotly.graph_objects as go

from autotune.study.report._data import ReportData
from autotune.study.report._figure_parts import (
    LAYOUT,
    figure_title,
    metric_label,
    note_empty,
    short_label,
)
from autotune.study.report._text import esc

__all__ = ["TTA_PROJECTIONS", "Curve", "curves_figure", "learning_curves"]

#: A time-to-accuracy study's one 2-D Pareto figure: (figure id, x objective, y objective).
TTA_PROJECTIONS: tuple[tuple[str, str, str], ...] = (
    ("pareto-time-memory", "time_to_accuracy_s", "peak_memory_bytes"),
)


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
                name=esc(curve.name),
                marker={"size": 5},
                line={"width": 3 if curve.name.startswith("baseline") else 1.5},
                hovertemplate=esc(curve.name) + ": %{y:.4g} after %{x:.4g} s<extra></extra>",
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
                name=f"target {esc(data.metric.format(data.target, 1))}",
                hoverinfo="skip",
                line={"color": "#d62728", "width": 1.5, "dash": "dash"},
            )
        )
    fig.update_layout(
        **LAYOUT,
        title={
            "text": figure_title(
                data,
                f"{esc(short_label(metric_label(data.metric)))} vs wall time: the baseline and "
                "the Pareto-optimal trials (single trials)",
            ),
            "font": {"size": 13},
        },
        xaxis_title="wall time since the first training step (s)",
        yaxis_title=esc(metric_label(data.metric)),
        height=480,
    )
    fig.update_layout(margin={"l": 60, "r": 20, "t": 50, "b": 130})
    if not curves:
        note_empty(fig, "no learning curve recorded yet")
    return fig
