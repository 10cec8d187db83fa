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
"""

from __future__ import annotations

from autotune.report._columns import (
    Column,
    busy_notes,
    figure_columns,
    is_recommended,
    pareto_columns,
    verification_columns,
)
from autotune.report._dashboard import DashboardApp, DashboardServer
from autotune.report._data import ReportData, gather_from_trials, gather_report
from autotune.report._figures import FIGURE_IDS, PROJECTIONS, build_figures
from autotune.report._html import fragments, render_report, write_report
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
    pareto_numbers,
    pareto_row,
    times_sooner,
    trial_mode,
)
from autotune.report._study import default_report_path, report_study
from autotune.report._terminal import pareto_table
from autotune.report._text import (
    MISSING,
    NOT_VERIFIED,
    SIMULATED_TEXT,
    busy_runs_text,
    busy_text,
    ci_text,
    compile_text,
    cpu_share_text,
    esc,
    metric_column,
    metric_difference,
    metric_spread,
    mib_text,
    model_knobs,
    model_text,
    not_verified_line,
    ratio_text,
    seconds_text,
    sps_text,
    step_ms_text,
    study_command,
    time_spread_text,
    verify_command,
)

__all__ = [
    "FAILED",
    "FEASIBLE",
    "FIGURE_IDS",
    "INFEASIBLE",
    "MISSING",
    "NOT_VERIFIED",
    "PROJECTIONS",
    "SIMULATED_TEXT",
    "Baseline",
    "Column",
    "DashboardApp",
    "DashboardServer",
    "HypervolumePoint",
    "ParetoRow",
    "ReportData",
    "TrialPoint",
    "build_figures",
    "busy_notes",
    "busy_runs_text",
    "busy_text",
    "ci_text",
    "classify",
    "compile_text",
    "cpu_share_text",
    "default_report_path",
    "esc",
    "figure_columns",
    "fragments",
    "gather_from_trials",
    "gather_report",
    "hypervolume_history",
    "is_recommended",
    "metric_column",
    "metric_difference",
    "metric_spread",
    "mib_text",
    "model_knobs",
    "model_text",
    "not_verified_line",
    "param_importances",
    "pareto_columns",
    "pareto_numbers",
    "pareto_row",
    "pareto_table",
    "ratio_text",
    "render_report",
    "report_study",
    "seconds_text",
    "sps_text",
    "step_ms_text",
    "study_command",
    "time_spread_text",
    "times_sooner",
    "trial_mode",
    "verification_columns",
    "verify_command",
    "write_report",
]
