"""The live dashboard: its JSON API, read-only HTTP, escaping, and a real headless browser."""

from __future__ import annotations

import json
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autotune.core.exceptions import ConfigError, StorageError
from autotune.study.api import verify_study
from autotune.study.report import DashboardApp, DashboardServer
from autotune.study.storage import StudyNotFoundError
from autotune.testing import simulate_trial
from tests.studies.mock import DemoStudy, run_mock_study, sqlite_url
from tests.study.report.browser import chromium_page, count_points

EVIL_STUDY = "<img src=x onerror=alert(1)>"


@pytest.fixture
def server(demo_study: DemoStudy, tmp_path: Path) -> Iterator[DashboardServer]:
    """A dashboard on a copy of the demo study, on a free port of 127.0.0.1."""
    db = tmp_path / "autotune.db"
    shutil.copy(demo_study.url.removeprefix("sqlite:///"), db)
    srv = DashboardServer(DashboardApp(sqlite_url(tmp_path), importances=False), port=0)
    srv.start_in_thread()
    yield srv
    srv.shutdown()


def _get(url: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def test_study_payload_has_every_figure_and_a_version(demo_study: DemoStudy) -> None:
    app = DashboardApp(demo_study.url, importances=False)
    try:
        payload = app.study_payload(demo_study.name)
        assert payload["finished"] == demo_study.n_trials and payload["simulated"] is True
        assert set(payload["figures"]) >= {"pareto-throughput-accuracy", "pareto-3d"}
        assert "SIMULATED" in payload["fragments"]["simulated"]
        assert "over 8 rounds" in payload["verdict"]
        assert payload["recommended_trial"] is not None
        assert ">RECOMMENDED<" in payload["fragments"]["verification"]
        again = app.study_payload(demo_study.name, since=payload["version"])
        assert again == {
            "unchanged": True,
            "version": payload["version"],
            "finished": demo_study.n_trials,
        }
        with pytest.raises(StudyNotFoundError):
            app.study_payload("nope")
        assert app.names() == [demo_study.name]
    finally:
        app.close()


def test_the_payload_changes_when_a_trial_finishes(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    run_mock_study(url, 3, constrained=False)
    app = DashboardApp(url, importances=False)
    try:
        first = app.study_payload("demo")
        run_mock_study(url, 4, constrained=False)
        second = app.study_payload("demo", since=first["version"])
        assert not second["unchanged"] and second["finished"] == 4
        assert second["version"] != first["version"]
    finally:
        app.close()


def test_the_payload_changes_when_a_verification_finishes(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    run_mock_study(url, 4, constrained=False, extra=["verify.rounds=0"])
    app = DashboardApp(url, importances=False)
    try:
        first = app.study_payload("demo")
        assert first["verdict"].startswith("not verified: run `autotune verify study=demo storage=")
        verify_study("demo", url, run_trial_fn=simulate_trial)  # no trial changes
        second = app.study_payload("demo", since=first["version"])
        assert not second["unchanged"] and second["version"] != first["version"]
        assert not second["verdict"].startswith("not verified")
    finally:
        app.close()


def test_a_missing_database_is_refused_and_not_created(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="no database file"):
        DashboardApp(sqlite_url(tmp_path / "none"))
    assert not (tmp_path / "none").exists()


def test_http_endpoints_are_read_only_and_bound_to_loopback(
    server: DashboardServer, demo_study: DemoStudy
) -> None:
    assert server.url.startswith("http://127.0.0.1:") and server.is_loopback
    status, headers, body = _get(server.url)
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert "nosniff" in headers["X-Content-Type-Options"]
    assert b'<script src="/static/plotly.min.js">' in body
    status, _, body = _get(server.url + "api/studies")
    assert status == 200 and json.loads(body)["studies"][0]["name"] == demo_study.name
    status, _, body = _get(server.url + f"api/study?name={demo_study.name}")
    assert status == 200 and json.loads(body)["finished"] == demo_study.n_trials
    status, _, body = _get(server.url + "api/study?name=nope")
    assert status == 404 and "no such study" in json.loads(body)["error"]
    status, _, js = _get(server.url + "static/plotly.min.js")
    assert status == 200 and len(js) > 1_000_000
    assert _get(server.url + "etc/passwd")[0] == 404
    status, _, body = _get(server.url + "?study=%3Cb%3Enope")
    assert status == 404 and b"no such study" in body and b"<b>nope" not in body
    for method in ("POST", "PUT", "DELETE"):
        assert _get(server.url + "api/studies", method)[0] == 501


def test_a_busy_port_is_one_clear_error(server: DashboardServer) -> None:
    port = server.httpd.server_address[1]
    with pytest.raises(ConfigError, match=rf"--port {port}: cannot listen there"):
        DashboardServer(server.app, port=port)


def test_study_names_are_escaped_in_the_page(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    run_mock_study(url, 2, study=EVIL_STUDY, constrained=False)
    app = DashboardApp(url, importances=False)
    try:
        page = app.page(None)
        assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
        payload = json.dumps(app.study_payload(EVIL_STUDY))
        assert "<img src=x" not in payload
        assert "<img" not in app.studies()["nav_html"]
    finally:
        app.close()


def _points_when(page: Any, figure_id: str, expected: int, timeout_s: float = 60.0) -> int:
    """Wait until the figure draws ``expected`` points (the page polls); return the count."""
    deadline = time.monotonic() + timeout_s
    count = -1
    while time.monotonic() < deadline:
        count = count_points(page, figure_id)
        if count == expected:
            return count
        page.wait_for_timeout(250)
    return count


@pytest.mark.browser
def test_dashboard_in_chromium_draws_every_finished_trial_and_updates_live(
    demo_study: DemoStudy, tmp_path: Path
) -> None:
    shutil.copy(demo_study.url.removeprefix("sqlite:///"), tmp_path / "autotune.db")
    url = sqlite_url(tmp_path)
    n = demo_study.n_trials
    server = DashboardServer(DashboardApp(url, poll_s=0.5, importances=False), port=0)
    server.start_in_thread()
    try:
        with chromium_page() as page:
            page.goto(server.url + "?study=demo")
            page.wait_for_selector(
                "#pareto-throughput-accuracy .scatterlayer .point", timeout=30_000
            )
            assert _points_when(page, "pareto-throughput-accuracy", n) == n
            assert "SIMULATED" in page.inner_text("#simulated")
            assert f"{n} finished trials" in page.inner_text("#live-status")

            run_mock_study(url, n + 2)  # two more trials finish while the page is open
            assert _points_when(page, "pareto-throughput-accuracy", n + 2) == n + 2
            assert page.get_attribute("body", "data-finished") == str(n + 2)
            assert page.errors == []
    finally:
        server.shutdown()


@pytest.mark.browser
def test_dashboard_in_chromium_runs_no_injected_script(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    run_mock_study(url, 2, study=EVIL_STUDY, constrained=False)
    server = DashboardServer(DashboardApp(url, poll_s=0.5, importances=False), port=0)
    server.start_in_thread()
    try:
        with chromium_page() as page:
            dialogs: list[str] = []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(server.url)
            page.wait_for_selector(
                "#pareto-throughput-accuracy .scatterlayer .point", timeout=30_000
            )
            assert EVIL_STUDY in page.inner_text("#title")  # shown as text, not run
            assert page.locator("img").count() == 0
            assert dialogs == [] and page.errors == []
    finally:
        server.shutdown()
