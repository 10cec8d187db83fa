"""The live dashboard: a small read-only HTTP server over a study database.

Why the standard library's ``ThreadingHTTPServer`` and not a web framework: the dashboard
serves one page, one static file and two JSON endpoints, all GET; a thread per request is
plenty for the one or two people watching a study, and it keeps autotune's dependencies as
they are. It is read-only (no handler changes anything; other methods are refused), binds to
127.0.0.1 unless told otherwise, and every user string it puts into HTML is escaped.

The page polls ``/api/study?name=NAME&since=VERSION`` every couple of seconds; the server
re-reads the trials, and only when they changed (a trial finished or started) does it gather
the data and draw the figures again.
"""

from __future__ import annotations

import hashlib
import html
import json
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import optuna
from plotly.offline import get_plotlyjs

from autotune.core.exceptions import AutotuneError, ConfigError
from autotune.study.objectives import ObjectiveMode, objective_mode, objectives_of_study
from autotune.study.report._data import gather_report
from autotune.study.report._html import dashboard_page, figures_json, fragments, study_nav
from autotune.study.storage import (
    ResultsStore,
    StudyNotFoundError,
    load_existing_study,
    open_existing_storage,
    storage_location,
    study_names,
)

__all__ = ["DashboardApp", "DashboardServer"]

_LOOPBACK = ("127.0.0.1", "localhost", "::1")


class DashboardApp:
    """What the dashboard serves, without HTTP: the page, the study list and study payloads.

    Args:
        storage_url: the study database (opened read-only; nothing is created or changed).
        poll_s: how often the page asks for updates (seconds).
        importances: compute parameter importances (the slowest part of a payload).

    Raises:
        StorageError: the database does not exist or cannot be read.
    """

    def __init__(self, storage_url: str, *, poll_s: float = 2.0, importances: bool = True) -> None:
        self.storage_url = storage_url
        self.poll_s = poll_s
        self._importances = importances
        self._storage = open_existing_storage(storage_url)
        self._results = ResultsStore.open(storage_url, create=False)
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[str, dict[str, Any]]] = {}
        self._plotly_js: bytes | None = None

    def close(self) -> None:
        """Release database connections."""
        self._results.close()
        self._storage.remove_session()

    def names(self) -> list[str]:
        """Every study's name, oldest first."""
        return study_names(self._storage)

    def page(self, study: str | None) -> str:
        """The page for ``study`` (default: the newest study; None when there is none).

        Raises:
            StudyNotFoundError: ``study`` is not in the database.
        """
        names = self.names()
        if study is not None and study not in names:
            raise StudyNotFoundError(
                f"study={study}: no such study in {storage_location(self.storage_url)}"
            )
        if study is None and names:
            study = names[-1]
        mode: ObjectiveMode = "throughput"
        if study is not None:
            loaded = load_existing_study(study, self.storage_url, self._storage)
            mode = objective_mode(objectives_of_study(loaded))
        return dashboard_page(study, names, self.poll_s, mode)

    def plotly_js(self) -> bytes:
        """Plotly's JavaScript bundle, from the installed plotly package (no network)."""
        if self._plotly_js is None:
            self._plotly_js = get_plotlyjs().encode()
        return self._plotly_js

    def studies(self) -> dict[str, Any]:
        """``{"studies": [{"name", "trials"}], "nav_html": ...}`` for the study list."""
        summaries = optuna.get_all_study_summaries(self._storage, include_best_trial=False)
        names = [s.study_name for s in summaries]
        return {
            "studies": [{"name": s.study_name, "trials": s.n_trials} for s in summaries],
            "nav_html": study_nav(names, None),
        }

    def study_payload(self, name: str, since: str | None = None) -> dict[str, Any]:
        """Figures and fragments of study ``name``, or ``{"unchanged": true}`` when its trials
        and its newest finished verification are as they were at version ``since``.

        The fragments carry the same verdict as ``autotune report`` and ``autotune best``
        (:meth:`ReportData.verdict_line`).

        Raises:
            StudyNotFoundError: no such study.
        """
        study = load_existing_study(name, self.storage_url, self._storage)
        trials = study.get_trials(deepcopy=False)
        # A verification that finishes changes the page too, though no trial changed.
        verified = self._results.latest_verification(name, complete=True)
        states = ",".join(f"{t.number}:{t.state.name}" for t in trials)
        states += f";verification:{verified.number if verified is not None else 0}"
        version = hashlib.sha1(states.encode()).hexdigest()[:16]
        if since is not None and since == version:
            return {"unchanged": True, "version": version, "finished": self._finished(trials)}
        with self._lock:
            cached = self._cache.get(name)
            if cached is not None and cached[0] == version:
                return cached[1]
        data = gather_report(study, self._results, trials=trials, importances=self._importances)
        payload = {
            "unchanged": False,
            "version": version,
            "finished": data.finished,
            "simulated": data.simulated,
            "verdict": data.verdict_line(),
            "metric": {"name": data.metric.name, "direction": data.metric.direction},
            "objective": data.objective_mode,
            "target": data.target,
            "recommended_trial": (
                data.recommended.trial_number if data.recommended is not None else None
            ),
            "fragments": fragments(data),
            "figures": figures_json(data),
        }
        with self._lock:
            self._cache[name] = (version, payload)
        return payload

    @staticmethod
    def _finished(trials: list[optuna.trial.FrozenTrial]) -> int:
        return sum(t.state.name in ("COMPLETE", "PRUNED") for t in trials)


def _handler(app: DashboardApp) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        """Read-only GET (and HEAD) handler; every other method gets 501 from the base class."""

        server_version = "autotune-dashboard"
        sys_version = ""

        def log_message(self, format: str, *args: Any) -> None:  # quiet: no per-request lines
            return

        def _send(self, status: int, body: bytes, content_type: str, cache: bool = False) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "max-age=3600" if cache else "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Referrer-Policy", "no-referrer")
            self.send_header(
                "Content-Security-Policy",
                "default-src 'self'; script-src 'self' 'unsafe-inline' 'unsafe-eval'; "
                "style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
                "connect-src 'self'; frame-ancestors 'none'",
            )
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _json(self, status: int, value: Any) -> None:
            self._send(status, json.dumps(value).encode(), "application/json; charset=utf-8")

        def _route(self) -> None:
            url = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            routes: dict[str, Callable[[], None]] = {
                "/": lambda: self._send(
                    HTTPStatus.OK,
                    app.page(query.get("study")).encode(),
                    "text/html; charset=utf-8",
                ),
                "/static/plotly.min.js": lambda: self._send(
                    HTTPStatus.OK, app.plotly_js(), "text/javascript; charset=utf-8", cache=True
                ),
                "/api/studies": lambda: self._json(HTTPStatus.OK, app.studies()),
                "/favicon.ico": lambda: self._send(HTTPStatus.NO_CONTENT, b"", "image/x-icon"),
                "/api/study": lambda: self._json(
                    HTTPStatus.OK, app.study_payload(query.get("name", ""), query.get("since"))
                ),
            }
            route = routes.get(url.path)
            if route is None:
                self._json(HTTPStatus.NOT_FOUND, {"error": f"no such page: {url.path}"})
                return
            try:
                route()
            except StudyNotFoundError as e:
                if url.path == "/":
                    page = f"<!DOCTYPE html><title>autotune</title><p>{html.escape(str(e))}</p>"
                    page += '<p><a href="/">all studies</a></p>'
                    self._send(HTTPStatus.NOT_FOUND, page.encode(), "text/html; charset=utf-8")
                else:
                    self._json(HTTPStatus.NOT_FOUND, {"error": str(e)})
            except AutotuneError as e:
                self._json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": str(e)})

        def do_GET(self) -> None:
            self._route()

        def do_HEAD(self) -> None:
            self._route()

    return Handler


class DashboardServer:
    """The dashboard's HTTP server (threads per request), bound to ``host:port``.

    Args:
        app: what to serve.
        host: the address to bind; 127.0.0.1 (this machine only) by default.
        port: the TCP port; 0 picks a free one (see :attr:`url`).

    Raises:
        ConfigError: the address cannot be bound (port in use, unknown host).
    """

    def __init__(self, app: DashboardApp, host: str = "127.0.0.1", port: int = 8080) -> None:
        self.app = app
        try:
            self.httpd = ThreadingHTTPServer((host, port), _handler(app))
        except OSError as e:
            raise ConfigError(
                f"--host {host} --port {port}: cannot listen there ({e.strerror or e})"
            ) from None
        self.httpd.daemon_threads = True
        self.host = host

    @property
    def is_loopback(self) -> bool:
        """True when only this machine can connect."""
        return self.host in _LOOPBACK

    @property
    def url(self) -> str:
        """The dashboard's address, e.g. ``http://127.0.0.1:8080/``."""
        address, port = self.httpd.server_address[:2]
        host = address.decode() if isinstance(address, bytes) else str(address)
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/"

    def serve_forever(self) -> None:
        """Serve until :meth:`shutdown` (from another thread) or Ctrl-C."""
        self.httpd.serve_forever(poll_interval=0.2)

    def start_in_thread(self) -> threading.Thread:
        """Serve from a daemon thread (tests, screenshots); returns the thread."""
        thread = threading.Thread(target=self.serve_forever, name="autotune-dashboard", daemon=True)
        thread.start()
        return thread

    def shutdown(self) -> None:
        """Stop serving and close the socket and the database connections."""
        self.httpd.shutdown()
        self.httpd.server_close()
        self.app.close()
