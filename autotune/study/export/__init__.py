"""Getting results out: the Pareto-optimal configurations (``autotune best``), the verified
recommendation as YAML with a ready-to-paste PyTorch snippet (``best --export``) or as the
lines that change from the baseline (``best --diff``), every trial
as CSV (``autotune trials``), and the list of studies in a database (``autotune ls``).

::

    _best      best_configurations, sort_pareto: the verdict and the ranked Pareto rows
    _snippet   pytorch_settings, pytorch_snippet: a configuration in PyTorch terms
    _yaml      export_choice, export_best_yaml: the recommendation (or --trial N) as YAML
    _diff      diff_lines, export_diff: what changes from the baseline, as lines to paste
               (best --diff --style torch|lightning|hf)
    _csv       trial_records, export_csv: one row per finished trial (trials --csv)
    _listing   list_studies: one line per study (ls)

What ``best``, ``best --export`` and ``ls`` claim is the newest finished verification's
recommendation, the same one the report and the dashboard show
(:attr:`autotune.study.report.ReportData.verification`); the Pareto table is single-trial figures.

Every function checks its input before it writes anything: an unknown study raises
:class:`~autotune.core.exceptions.StudyNotFoundError`, a study without a recommendation raises
:class:`~autotune.core.exceptions.VerificationError`, and no file is created.
"""

from __future__ import annotations

from autotune.study.export._best import (
    BestConfigs,
    best_configurations,
)
from autotune.study.export._csv import export_csv
from autotune.study.export._diff import DIFF_STYLES, export_diff
from autotune.study.export._listing import StudySummary, list_studies
from autotune.study.export._snippet import pytorch_snippet
from autotune.study.export._yaml import export_best_yaml, export_choice

__all__ = [
    "DIFF_STYLES",
    "BestConfigs",
    "StudySummary",
    "best_configurations",
    "export_best_yaml",
    "export_choice",
    "export_csv",
    "export_diff",
    "list_studies",
    "pytorch_snippet",
]
