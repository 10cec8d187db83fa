"""What the terminal shows, as plain text: for the tests of the tables and lines rich prints."""

from __future__ import annotations

import io

from rich.console import Console


def rendered_text(renderable: object, width: int = 250) -> str:
    """``renderable`` (a rich table, a string...) as a ``width``-column terminal prints it,
    without colours."""
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()
