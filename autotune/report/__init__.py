"""Reports of a study: pure data gathering, Plotly figures drawn from it, the self-contained
HTML report, and the live dashboard server.

::

    optuna.Study ──gather_report──► ReportData ──build_figures──► Plotly figures
    ResultsStore ──┘ (record,           │                              │
                     verification)      └────── render_report / DashboardApp (HTML, JSON)

The one claim every page makes is :meth:`ReportData.verdict_line`: the newest finished
verification's recommendation, or that nothing qualifies, or that the study is not verified.
"""

from __future__ import annotations

from autotune.report._dashboard import DashboardApp, DashboardServer
from autotune.report._data import ReportData, gather_from_trials, gather_report
from autotune.report._figures import FIGURE_IDS, PROJECTIONS, build_figures
from autotune.report._html import SIMULATED_TEXT, fragments, render_report, write_report
from autotune.report._hypervolume import HypervolumePoint, hypervolume_history
from autotune.report._importances import param_importances
from autotune.report._points import (
    FAILED,
    FEASIBLE,
    INFEASIBLE,
    Baseline,
    ParetoRow,
    TrialPoint,
    classify,
    metric_curve,
    pareto_numbers,
    pareto_row,
    times_sooner,
    trial_mode,
)
from autotune.report._study import default_report_path, report_study
from autotune.report._terminal import SIMULATED_LINE, pareto_table
from autotune.report._text import (
    NOT_VERIFIED,
    busy_runs_text,
    metric_column,
    metric_difference,
    metric_spread,
    model_knobs,
    model_text,
    not_verified_line,
    ratio_text,
    seconds_text,
    study_command,
    verify_command,
)

__all__ = [
    "FAILED",
    "FEASIBLE",
    "FIGURE_IDS",
    "INFEASIBLE",
    "NOT_VERIFIED",
    "PROJECTIONS",
    "SIMULATED_LINE",
    "SIMULATED_TEXT",
    "Baseline",
    "DashboardApp",
    "DashboardServer",
    "HypervolumePoint",
    "ParetoRow",
    "ReportData",
    "TrialPoint",
    "build_figures",
    "busy_runs_text",
    "classify",
    "default_report_path",
    "fragments",
    "gather_from_trials",
    "gather_report",
    "hypervolume_history",
    "metric_column",
    "metric_curve",
    "metric_difference",
    "metric_spread",
    "model_knobs",
    "model_text",
    "not_verified_line",
    "param_importances",
    "pareto_numbers",
    "pareto_row",
    "pareto_table",
    "ratio_text",
    "render_report",
    "report_study",
    "seconds_text",
    "study_command",
    "times_sooner",
    "trial_mode",
    "verify_command",
    "write_report",
]
