"""Headless Chromium for the browser tests: Debian's ``/usr/bin/chromium`` driven by Playwright.

Playwright's own browser download cannot work here (no network), so the tests launch the
system Chromium, with a fresh profile directory per launch. They are skipped, saying why,
where Chromium or the Playwright package is missing (``.ci/run`` installs both).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def require_browser() -> Any:
    """The ``playwright.sync_api`` module, or a skip that says what is missing."""
    if not CHROMIUM.is_file():
        pytest.skip(f"{CHROMIUM} not found: install Debian's chromium (apt-get install chromium)")
    return pytest.importorskip(
        "playwright.sync_api",
        reason="the playwright package is not installed (pip install playwright)",
    )


@contextmanager
def chromium_page(viewport: tuple[int, int] = (1400, 1000)) -> Iterator[Any]:
    """A page in a fresh headless Chromium (closed afterwards).

    Yields:
        A Playwright ``Page``; its ``errors`` attribute collects uncaught page errors.
    """
    sync_api = require_browser()
    profile = tempfile.mkdtemp(prefix="autotune-chromium-")
    try:
        with sync_api.sync_playwright() as p:
            context = p.chromium.launch_persistent_context(
                profile,
                executable_path=str(CHROMIUM),
                headless=True,
                args=CHROMIUM_ARGS,
                viewport={"width": viewport[0], "height": viewport[1]},
            )
            try:
                page = context.new_page()
                page.errors = []  # type: ignore[attr-defined]
                page.on("pageerror", lambda e: page.errors.append(str(e)))  # type: ignore[attr-defined]
                yield page
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def count_points(page: Any, figure_id: str) -> int:
    """Drawn markers in a 2-D Plotly scatter (each point is one SVG path)."""
    return int(page.eval_on_selector_all(f"#{figure_id} .scatterlayer .point", "els => els.length"))
