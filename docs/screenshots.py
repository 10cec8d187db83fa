"""Take the README's screenshots of the report and the live dashboard with headless Chromium.

Run from the repository root after a mock study exists in ./storage/autotune.db:

    autotune run space=cnn_small --trials 25 device=mock
    python docs/screenshots.py cnn_small

It writes docs/report.png and docs/dashboard.png. It needs Debian's Chromium
(/usr/bin/chromium) and the playwright package (``pip install -e ".[test]"``).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from autotune.core.config import DEFAULT_STORAGE_URL
from autotune.study.report import DashboardApp, DashboardServer, report_study

ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
POINTS = "#pareto-throughput-accuracy .scatterlayer .point"


def main() -> None:
    """Write docs/report.png and docs/dashboard.png for one study."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study")
    parser.add_argument("--storage", default=DEFAULT_STORAGE_URL)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.html"
        report_study(args.study, args.storage, report)
        server = DashboardServer(DashboardApp(args.storage), port=0)
        server.start_in_thread()
        try:
            with sync_playwright() as p:
                context = p.chromium.launch_persistent_context(
                    str(Path(tmp) / "profile"),
                    executable_path="/usr/bin/chromium",
                    headless=True,
                    args=ARGS,
                    viewport={"width": 1400, "height": 1100},
                )
                page = context.new_page()
                page.goto(report.as_uri())
                page.wait_for_selector(POINTS)
                page.wait_for_timeout(1000)
                page.screenshot(path=str(args.out / "report.png"), full_page=True)
                page.goto(f"{server.url}?study={args.study}")
                page.wait_for_selector(POINTS, timeout=60_000)
                page.wait_for_timeout(2000)
                page.screenshot(path=str(args.out / "dashboard.png"))
                context.close()
        finally:
            server.shutdown()


if __name__ == "__main__":
    main()
