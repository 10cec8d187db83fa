"""One column model per table (autotune/study/report/_columns.py): the terminal and the HTML report
render the Pareto table and the verification table with the same headers and the same cells,
in each objective mode."""

from __future__ import annotations

import html
import re

import pytest
from rich.table import Table

from autotune.core.units import MIB
from autotune.study.console import verification_table
from autotune.study.objectives import study_objectives
from autotune.study.report import ReportData, pareto_table, render_report
from autotune.study.report._data import gather_from_trials
from autotune.study.report._html import fragments
from autotune.study.report._text import MISSING
from tests.rendered import rendered_text
from tests.studies.mock import make_trial
from tests.studies.summaries import verification_summary
from tests.studies.tta import TARGET, hand_trials

TTA = study_objectives(mode="time_to_accuracy")


def _data(tta: bool) -> ReportData:
    if tta:
        return gather_from_trials(
            "columns",
            hand_trials(),
            objectives=TTA,
            target=TARGET,
            importances=False,
            verification=verification_summary(tta=tta, study_name="columns"),
        )
    trials = [
        make_trial(0, (1000.0, 0.97, 8 * MIB), baseline=True),
        make_trial(1, (4000.0, 0.85, 4 * MIB), precision="bf16", batch_size=128),
        make_trial(2, (2500.0, 0.95, 2 * MIB), memory_format="channels_last"),
    ]
    return gather_from_trials(
        "columns",
        trials,
        importances=False,
        verification=verification_summary(tta=tta, study_name="columns"),
    )


def _html_table(fragment: str) -> tuple[list[str], list[list[str]]]:
    """The headers and the rows of cells of an HTML table, unescaped."""
    assert fragment.count("<table") == 1, fragment
    headers = [html.unescape(h) for h in re.findall(r"<th[^>]*>(.*?)</th>", fragment)]
    rows = [
        [html.unescape(td) for td in re.findall(r"<td[^>]*>(.*?)</td>", tr)]
        for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", fragment)
        if "<td" in tr
    ]
    return headers, rows


def _rich_table(table: Table) -> tuple[list[str], list[list[str]]]:
    """The headers and the rows of cells of a rich table."""
    headers = [str(column.header) for column in table.columns]
    columns = [[str(cell) for cell in column.cells] for column in table.columns]
    return headers, [list(row) for row in zip(*columns, strict=True)]


#: The terminal's folded knob columns (the HTML has one column per knob instead).
FOLDED_KNOBS = ["model", "batch", "precision", "memory format", "compile", "workers", "gpus"]


@pytest.mark.parametrize("tta", [False, True], ids=["throughput", "time_to_accuracy"])
def test_the_terminal_and_the_html_pareto_tables_agree(tta: bool) -> None:
    data = _data(tta)
    recommended = data.recommended.trial_number if data.recommended is not None else None
    terminal = pareto_table(
        list(data.pareto), "front", data.metric, recommended=recommended, time_to_accuracy=tta
    )

    headers, rows = _rich_table(terminal)
    page_headers, page_rows = _html_table(fragments(data)["pareto-table"])

    # The same figure columns, headers and cells; then the knobs, folded in the terminal.
    n = len(headers) - len(FOLDED_KNOBS)
    assert headers[n:] == FOLDED_KNOBS and page_headers[n:] == list(data.knob_names)
    assert page_headers[:n] == headers[:n]
    assert [row[:n] for row in page_rows] == [row[:n] for row in rows]
    ratio = "x sooner" if tta else "x baseline"
    assert ratio in headers and "compile s" in headers and ("eval s" in headers) == tta
    assert any(row[0] == "1 (recommended)" for row in rows)
    # The knob values agree too: trial 1 is the bf16 trial in both studies.
    assert rows[[r[0] for r in rows].index("1 (recommended)")][headers.index("precision")] == "bf16"
    page_row = page_rows[[r[0] for r in page_rows].index("1 (recommended)")]
    assert page_row[page_headers.index("precision")] == "bf16"


@pytest.mark.parametrize("tta", [False, True], ids=["throughput", "time_to_accuracy"])
def test_the_terminal_and_the_html_verification_tables_agree(tta: bool) -> None:
    data = _data(tta)
    assert data.verification is not None

    headers, rows = _rich_table(verification_table(data.verification))

    assert (headers, rows) == _html_table(fragments(data)["verification"])
    assert headers[1] == ("x sooner" if tta else "speedup")
    baseline, recommended, slower = rows
    assert baseline[:3] == ["0 (baseline)", "1.00x", MISSING]
    assert recommended[1:3] == ["2.50x", "2.30-2.70x"] and "RECOMMENDED" in recommended
    # One placeholder for a missing figure in both forms: no speedup, no peak memory.
    assert slower[1:3] == [MISSING, MISSING] and slower[headers.index("peak MiB")] == MISSING


def test_a_reused_metric_is_marked_in_both_pareto_tables() -> None:
    trials = [
        make_trial(0, (1000.0, 0.97, 8 * MIB), baseline=True),
        make_trial(1, (4000.0, 0.97, 2 * MIB), memory_format="channels_last"),
        make_trial(
            2,
            (5000.0, 0.97, 3 * MIB),
            compile_mode="default",
            extra_attrs={"metric_from_trial": 1},
        ),
    ]
    data = gather_from_trials("reuse", trials, importances=False)

    headers, rows = _rich_table(pareto_table(list(data.pareto), "front", data.metric))
    page_headers, page_rows = _html_table(fragments(data)["pareto-table"])

    metric_at = headers.index(next(h for h in headers if h.startswith("val")))
    by_trial = {row[0]: row[metric_at] for row in rows}
    assert by_trial["2"].endswith("(from trial 1)")
    assert not by_trial["1"].endswith(")")
    page_by_trial = {row[0]: row[page_headers.index(headers[metric_at])] for row in page_rows}
    assert page_by_trial["2"] == by_trial["2"]


def test_a_time_to_accuracy_verification_in_the_tables() -> None:
    summary = verification_summary(tta=True, study_name="tta")
    text = rendered_text(verification_table(summary))
    for header in ("x sooner", "time to target s", "fastest-slowest s", "val acc mean"):
        assert header in text
    assert "2.50x" in text and "2.30-2.70x" in text and "3.50-4.50" in text
    assert "RECOMMENDED" in text and "median samples/s" not in text
    page = render_report(
        gather_from_trials(
            "tta", hand_trials(), objectives=TTA, target=TARGET, importances=False,
            verification=summary,
        )
    )  # fmt: skip
    assert "fastest-slowest s" in page and "reached 95.0 % in every round" in page
    assert html.escape(summary.headline()) in page
