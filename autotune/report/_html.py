"""HTML of the report and the dashboard: escaped fragments, the offline report page, and the
dashboard's page shell.

Every user-provided string (study name, space name, parameter values, failure reasons,
hardware names) goes through :func:`html.escape` here; JSON embedded in a ``<script>`` has its
``<`` written as ``\\u003c`` so no string can close the script element.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import plotly.io as pio
from plotly.offline import get_plotlyjs

from autotune.report._data import (
    FAILED,
    FEASIBLE,
    HEADLINE_MAX_ACCURACY_DROP,
    INFEASIBLE,
    ReportData,
)
from autotune.report._figures import FIGURE_IDS, build_figures

__all__ = [
    "PLOTLY_CONFIG",
    "SIMULATED_TEXT",
    "dashboard_page",
    "figures_json",
    "fragments",
    "render_report",
    "script_json",
    "write_report",
]

SIMULATED_TEXT = (
    "SIMULATED: these trials ran on device=mock, an analytic cost model. No training happened "
    "and no figure here is a measurement."
)
#: Plotly's per-plot options: no logo, no link to the online editor.
PLOTLY_CONFIG: dict[str, Any] = {"displaylogo": False, "responsive": True, "showLink": False}
_MIB = float(1 << 20)

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #222;
       background: #fafafa; }
header, main, footer { max-width: 1400px; margin: 0 auto; padding: 0 24px; }
header { padding-top: 18px; }
h1 { font-size: 22px; margin: 0 0 6px 0; }
h2 { font-size: 16px; margin: 26px 0 8px 0; }
code { background: #eee; padding: 1px 4px; border-radius: 3px; }
.simulated { background: #fff3cd; border: 2px solid #d39e00; color: #6b4e00; font-weight: 600;
             padding: 8px 12px; margin: 10px 0; border-radius: 4px; }
.summary { font-size: 14px; line-height: 1.5; }
.speedup { font-size: 18px; font-weight: 700; color: #0b6e4f; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(520px, 1fr)); gap: 12px; }
.card { background: #fff; border: 1px solid #e3e3e3; border-radius: 6px; padding: 4px; min-height: 200px; }
table { border-collapse: collapse; font-size: 12.5px; background: #fff; }
th, td { border-bottom: 1px solid #e6e6e6; padding: 4px 8px; text-align: right; white-space: nowrap; }
th { background: #f0f0f0; position: sticky; top: 0; }
td.text, th.text { text-align: left; }
tr.baseline td { font-weight: 600; background: #f6f6ff; }
.notes { font-size: 12px; color: #666; }
nav { font-size: 13px; margin: 6px 0; }
nav a { margin-right: 10px; }
nav a.current { font-weight: 700; }
#live-status { font-size: 12px; color: #666; }
footer { font-size: 11px; color: #888; padding-bottom: 24px; }
"""


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def script_json(value: Any) -> str:
    """JSON safe to place inside ``<script>``: every ``<`` is written ``\\u003c``."""
    return json.dumps(value).replace("<", "\\u003c")


def _sps(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


def _speedup(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def _summary(data: ReportData) -> str:
    counts = (
        f"<b>{data.finished}</b> finished trials: {data.count(FEASIBLE)} feasible, "
        f"{data.count(INFEASIBLE)} infeasible, {data.count(FAILED)} failed; "
        f"<b>{len(data.pareto)}</b> Pareto-optimal"
    )
    if data.running:
        counts += f"; {data.running} running now"
    parts = [f"<p>{counts}.</p>"]
    base = data.baseline
    best = data.headline
    if best is not None and best.speedup is not None and base is not None:
        parts.append(
            f'<p><span class="speedup">{best.speedup:.1f}x faster than your defaults</span>: '
            f"the fastest Pareto-optimal configuration within "
            f"{100 * HEADLINE_MAX_ACCURACY_DROP:.1f} pt of the baseline's accuracy (trial "
            f"{best.number}) trains {_sps(best.throughput_sps)} samples/s at "
            f"{100 * best.val_accuracy:.1f}% validation accuracy; the baseline (trial "
            f"{base.number}: fp32, contiguous, no compile, num_workers=0, one device) trains "
            f"{_sps(base.throughput_sps)} samples/s.</p>"
        )
    elif base is not None:
        parts.append(f"<p>Baseline: trial {base.number} ({_esc(base.reason or base.status)}).</p>")
    return "\n".join(parts)


def _pareto_table(data: ReportData) -> str:
    if not data.pareto:
        return '<p class="notes">No feasible trial yet.</p>'
    knobs = list(data.knob_names)
    head = (
        "<tr><th>trial</th><th>samples/s</th><th>x baseline</th><th>val acc</th>"
        "<th>peak MiB</th><th>step ms</th><th>compile s</th>"
        + "".join(f'<th class="text">{_esc(k)}</th>' for k in knobs)
        + "</tr>"
    )
    rows = []
    for row in data.pareto:
        cells = [
            f"{row.number}" + (" (baseline)" if row.baseline else ""),
            _sps(row.throughput_sps),
            _speedup(row.speedup),
            f"{100 * row.val_accuracy:.1f}%",
            f"{row.peak_memory_bytes / _MIB:,.1f}",
            "n/a" if row.step_time_s is None else f"{1e3 * row.step_time_s:.3f}",
            "n/a" if row.compile_s is None else f"{row.compile_s:.1f}",
        ]
        tds = "".join(f"<td>{_esc(c)}</td>" for c in cells) + "".join(
            f'<td class="text">{_esc(row.params.get(k, "—"))}</td>' for k in knobs
        )
        rows.append(f"<tr{' class=baseline' if row.baseline else ''}>{tds}</tr>")
    return f'<table id="pareto-table-rows">{head}{"".join(rows)}</table>'


def _hardware_table(data: ReportData) -> str:
    rows = "".join(
        f'<tr><th class="text">{_esc(label)}</th><td class="text">{_esc(value)}</td></tr>'
        for label, value in data.hardware
    )
    return f"<table>{rows}</table>" if rows else '<p class="notes">Not recorded.</p>'


def _title(data: ReportData) -> str:
    space = f" · space <code>{_esc(data.space_name)}</code>" if data.space_name else ""
    device = f" · {_esc(data.device_name)}" if data.device_name else ""
    return f"study <code>{_esc(data.study_name)}</code>{space}{device}"


def fragments(data: ReportData) -> dict[str, str]:
    """The page's HTML fragments by element id, every user string escaped."""
    notes = "".join(f"<li>{_esc(n)}</li>" for n in data.notes)
    return {
        "title": _title(data),
        "simulated": f'<div class="simulated">{_esc(SIMULATED_TEXT)}</div>'
        if data.simulated
        else "",
        "summary": _summary(data),
        "pareto-table": _pareto_table(data),
        "hardware": _hardware_table(data),
        "notes": f"<ul>{notes}</ul>" if notes else "",
    }


def figures_json(data: ReportData) -> dict[str, Any]:
    """Every figure as Plotly JSON (``{"data": [...], "layout": {...}}``), by id."""
    return {
        fid: json.loads(pio.to_json(fig, validate=False, engine="json"))
        for fid, fig in build_figures(data).items()
    }


def _body(frags: Mapping[str, str], heading: str, extra_nav: str = "") -> str:
    plots_2d = "".join(
        f'<div class="card"><div id="{fid}" class="plot"></div></div>' for fid in FIGURE_IDS[:3]
    )
    return f"""
<header>
  <h1>{heading} <span id="title">{frags.get("title", "")}</span></h1>
  {extra_nav}
  <div id="simulated">{frags.get("simulated", "")}</div>
  <div id="summary" class="summary">{frags.get("summary", "")}</div>
</header>
<main>
  <h2>Pareto front: three 2-D projections</h2>
  <div class="grid">{plots_2d}
    <div class="card"><div id="pareto-3d" class="plot"></div></div>
  </div>
  <h2>Knobs against objectives</h2>
  <div class="card"><div id="parallel-coordinates" class="plot"></div></div>
  <div class="grid">
    <div><h2>Parameter importance</h2><div class="card"><div id="importances" class="plot"></div></div></div>
    <div><h2>Hypervolume history</h2><div class="card"><div id="hypervolume" class="plot"></div></div></div>
  </div>
  <h2>Pareto-optimal configurations (speedup over the baseline)</h2>
  <div id="pareto-table" style="overflow-x:auto">{frags.get("pareto-table", "")}</div>
  <h2>Hardware fingerprint</h2>
  <div id="hardware">{frags.get("hardware", "")}</div>
  <div id="notes" class="notes">{frags.get("notes", "")}</div>
</main>
"""


def render_report(data: ReportData) -> str:
    """The whole self-contained report page: Plotly's JavaScript inlined, no network needed."""
    frags = fragments(data)
    figs = figures_json(data)
    simulated = " [SIMULATED]" if data.simulated else ""
    stamp = data.generated_at.strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>autotune report: {_esc(data.study_name)}{simulated}</title>
<style>{_CSS}</style>
<script type="text/javascript">{get_plotlyjs()}</script>
</head>
<body data-finished="{data.finished}">
{_body(frags, "autotune report:")}
<footer>Generated {stamp} by autotune from the study database. Self-contained: opens offline.</footer>
<script type="text/javascript">
const FIGURES = {script_json(figs)};
const CONFIG = {script_json(PLOTLY_CONFIG)};
for (const [id, fig] of Object.entries(FIGURES)) {{
  Plotly.newPlot(id, fig.data, fig.layout, CONFIG);
}}
</script>
</body>
</html>
"""


def write_report(data: ReportData, path: Path) -> Path:
    """Write :func:`render_report` to ``path`` (parent directories created).

    Returns:
        The path written.
    """
    text = render_report(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def study_nav(names: Sequence[str], current: str | None) -> str:
    """Links to every study's dashboard view (names escaped and URL-quoted)."""
    if not names:
        return "<nav>No studies in this database yet; the page will show one when it starts.</nav>"
    links = "".join(
        f'<a href="/?study={_esc(quote(n, safe=""))}"{" class=current" if n == current else ""}>'
        f"{_esc(n)}</a>"
        for n in names
    )
    return f"<nav>studies: {links}</nav>"


def dashboard_page(study: str | None, names: Sequence[str], poll_s: float) -> str:
    """The dashboard's page shell; its script fills and refreshes it from the JSON API."""
    nav = f'<div id="study-nav">{study_nav(names, study)}</div><div id="live-status">connecting…</div>'
    title = f"autotune dashboard: {_esc(study)}" if study else "autotune dashboard"
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{_CSS}</style>
<script src="/static/plotly.min.js"></script>
</head>
<body data-finished="-1">
{_body({}, "autotune dashboard:", nav)}
<script id="study-name" type="application/json">{script_json(study)}</script>
<script>
const STUDY = JSON.parse(document.getElementById("study-name").textContent);
const CONFIG = {script_json(PLOTLY_CONFIG)};
const POLL_MS = {int(poll_s * 1000)};
let version = null;
function setStatus(text) {{ document.getElementById("live-status").textContent = text; }}
async function pollStudies() {{
  const r = await fetch("/api/studies", {{cache: "no-store"}});
  const p = await r.json();
  document.getElementById("study-nav").innerHTML = p.nav_html;  // escaped by the server
  if (STUDY === null && p.studies.length > 0) {{
    location.search = "?study=" + encodeURIComponent(p.studies[0].name);
  }}
}}
async function poll() {{
  try {{
    if (STUDY === null) {{ await pollStudies(); setStatus("waiting for a study"); return; }}
    let url = "/api/study?name=" + encodeURIComponent(STUDY);
    if (version !== null) url += "&since=" + encodeURIComponent(version);
    const r = await fetch(url, {{cache: "no-store"}});
    const p = await r.json();
    if (!r.ok) {{ setStatus(p.error); return; }}
    if (!p.unchanged) {{
      for (const [id, frag] of Object.entries(p.fragments)) {{
        document.getElementById(id).innerHTML = frag;  // escaped by the server
      }}
      for (const [id, fig] of Object.entries(p.figures)) {{
        await Plotly.react(id, fig.data, fig.layout, CONFIG);
      }}
      version = p.version;
      document.body.dataset.finished = String(p.finished);
      document.title = "autotune dashboard: " + STUDY + (p.simulated ? " [SIMULATED]" : "");
    }}
    setStatus("live: " + p.finished + " finished trials; updated " + new Date().toLocaleTimeString() + "; read-only");
  }} catch (e) {{
    setStatus("cannot reach the dashboard server: " + e);
  }} finally {{
    setTimeout(poll, POLL_MS);
  }}
}}
poll();
setInterval(() => {{ pollStudies().catch(() => {{}}); }}, 10 * POLL_MS);
</script>
</body>
</html>
"""
