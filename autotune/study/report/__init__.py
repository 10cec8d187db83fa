"""Reports of a study: pure data gathering, Plotly figures drawn from it, the self-contained
HTML report, and the live dashboard server.

::

    optuna.Study ──gather_report──► ReportData ──build_figures──► Plotly figures
    ResultsStore ──┘ (record,           │                              │
                     verification)      └────── render_report / DashboardApp (HTML, JSON)

The Pareto and verification tables are one column model each (:func:`pareto_columns`,
:func:`verification_columns`), rendered by the terminal and the HTML alike; every figure's
format and the SIMULATED warning are in one place (``_text``).

The one claim every page makes is :meth:`ReportData.verdict_line`: the newest finished
verification's recommendation, or that nothing qualifies, or that the study is not verified.

This package exports what users and autotune's other layers use; the figures' parts, the
text formats and the classification constants stay in the private modules, which tests
import directly.
"""

from __future__ import annotations

from autotune.study.report._columns import verification_columns
from autotune.study.report._dashboard import DashboardApp, DashboardServer
from autotune.study.report._data import ReportData, gather_report
from autotune.study.report._figures import build_figures
from autotune.study.report._html import render_report
from autotune.study.report._points import (
    FEASIBLE,
    Baseline,
    ParetoRow,
    pareto_row,
    trial_mode,
)
from autotune.study.report._study import report_study
from autotune.study.report._terminal import pareto_table, plain
from autotune.study.report._text import (
    NOT_VERIFIED,
    SIMULATED_TEXT,
    busy_text,
    cpu_share_text,
    mib_text,
    model_knobs,
    model_text,
    ratio_text,
    seconds_text,
    study_command,
    verify_command,
)

__all__ = [
    "FEASIBLE",
    "NOT_VERIFIED",
    "SIMULATED_TEXT",
    "Baseline",
    "DashboardApp",
    "DashboardServer",
    "ParetoRow",
    "ReportData",
    "build_figures",
    "busy_text",
    "cpu_share_text",
    "gather_report",
    "mib_text",
    "model_knobs",
    "model_text",
    "pareto_row",
    "pareto_table",
    "plain",
    "ratio_text",
    "render_report",
    "report_study",
    "seconds_text",
    "study_command",
    "trial_mode",
    "verification_columns",
    "verify_command",
]
