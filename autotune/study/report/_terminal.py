"""The terminal Pareto table (rich) of ``autotune run`` and ``autotune best``: the columns of
:func:`~autotune.study.report.pareto_columns`, the same as the HTML report's."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table
from rich.text import Text

from autotune.study.objectives import Objective
from autotune.study.report._columns import GUIDE_KNOB_HEADERS, busy_notes, pareto_columns
from autotune.study.report._points import ParetoRow
from autotune.study.verification import ACCURACY

__all__ = ["pareto_table", "plain"]


def plain(text: str, style: str = "") -> Text:
    """``text`` as rich shows it: as written, never read as markup (a user's ``[/x]`` would
    raise ``MarkupError``) nor for emoji codes (``train.py:train:`` is no 🚆). Table titles,
    headers, cells and captions are strings rich reads as markup; every table of ours gives
    them through this."""
    return Text(text, style=style)


def pareto_table(
    rows: Sequence[ParetoRow],
    title: str,
    metric: Objective = ACCURACY,
    *,
    speedup: bool = True,
    recommended: int | None = None,
    time_to_accuracy: bool | None = None,
) -> Table:
    """The Pareto table of ``autotune run`` and ``autotune best``: one line per configuration,
    in the order given, with its single-trial figures and knobs (the columns of
    :func:`~autotune.study.report.pareto_columns`); the caption names the trials measured on a busy
    machine (``BUSY`` in their ``other CPU`` cell).

    Args:
        rows: the configurations, in display order.
        title: the table's title.
        metric: the study's validation metric (its column header and format).
        speedup: show the ``x baseline`` (``x sooner``) column and mark the baseline's row.
        recommended: the verified recommendation's trial number, marked when it is a row.
        time_to_accuracy: the rows are a time-to-accuracy study's; None: when any row has a
            time to target (:attr:`ParetoRow.time_to_accuracy`).
    """
    if time_to_accuracy is None:
        time_to_accuracy = any(row.time_to_accuracy for row in rows)
    guide = [name for name in GUIDE_KNOB_HEADERS if any(name in row.params for row in rows)]
    columns = pareto_columns(
        metric,
        time_to_accuracy=time_to_accuracy,
        speedup=speedup,
        recommended=recommended,
        guide_knobs=guide,
        rows=rows,
    )
    table = Table(title=plain(title, "table.title"), title_justify="left")
    for column in columns:
        table.add_column(plain(column.header), justify="left" if column.text else "right")
    for row in rows:
        table.add_row(*(plain(column.cell(row)) for column in columns))
    notes = busy_notes(rows)
    if notes:
        table.caption = plain("BUSY: " + "; ".join(notes), "table.caption")
        table.caption_justify = "left"
    return table
