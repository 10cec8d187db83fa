"""HTML of the report and the dashboard: escaped fragments, the offline report page, and the
dashboard's page shell.

Every user-provided string (study name, space name, parameter values, failure reasons,
hardware names) goes through :func:`~autotune.study.report._text.esc` here; JSON embedded in a
``<script>`` has its ``<`` written as ``\\u003c`` so no string can close the script element.
The tables render the column model of :mod:`autotune.study.report._columns`, as the terminal does.

One module of about 440 lines on purpose: the escaping rule above holds in one place for every
fragment and both page shells, much of it the HTML and CSS text itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import plotly.io as pio
from plotly.offline import get_plotlyjs

from autotune.study.objectives import ObjectiveMode
from autotune.study.report._columns import (
    Column,
    busy_notes,
    is_recommended,
    pareto_columns,
    verification_columns,
)
from autotune.study.report._data import ReportData
from autotune.study.report._figures import FIGURE_IDS, TTA_PROJECTIONS, build_figures
from autotune.study.report._points import FAILED, FEASIBLE, INFEASIBLE
from autotune.study.report._text import SIMULATED_TEXT, esc
from autotune.study.verification import CandidateVerdict, VerificationSummary

__all__ = [
    "PLOTLY_CONFIG",
    "dashboard_page",
    "figures_json",
    "fragments",
    "render_report",
    "script_json",
    "write_report",
]

RowT = TypeVar("RowT")
#: Plotly's per-plot options: no logo, no link to the online editor.
PLOTLY_CONFIG: dict[str, Any] = {"displaylogo": False, "responsive": True, "showLink": False}

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
.verdict { font-size: 16px; font-weight: 700; padding: 8px 12px; border-radius: 4px;
           border: 1px solid #ccc; background: #fff; }
.verdict.recommended { color: #0b6e4f; border-color: #0b6e4f; }
.verdict.nothing, .verdict.unverified { color: #6b4e00; border-color: #d39e00; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(520px, 1fr)); gap: 12px; }
.card { background: #fff; border: 1px solid #e3e3e3; border-radius: 6px; padding: 4px; min-height: 200px; }
table { border-collapse: collapse; font-size: 12.5px; background: #fff; }
th, td { border-bottom: 1px solid #e6e6e6; padding: 4px 8px; text-align: right; white-space: nowrap; }
th { background: #f0f0f0; position: sticky; top: 0; }
td.text, th.text { text-align: left; }
tr.baseline td { font-weight: 600; background: #f6f6ff; }
tr.recommended td { font-weight: 600; background: #eaf7f1; }
.notes { font-size: 12px; color: #666; }
nav { font-size: 13px; margin: 6px 0; }
nav a { margin-right: 10px; }
nav a.current { font-weight: 700; }
#live-status { font-size: 12px; color: #666; }
footer { font-size: 11px; color: #888; padding-bottom: 24px; }
"""


def script_json(value: Any) -> str:
    """JSON safe to place inside ``<script>``: every ``<`` is written ``\\u003c``."""
    return json.dumps(value).replace("<", "\\u003c")


def _summary(data: ReportData) -> str:
    """The verdict (the one claim: :meth:`ReportData.verdict_line`), then the trial counts."""
    summary = data.verification
    if summary is None:
        kind = "unverified"
    elif summary.recommended is not None:
        kind = "recommended"
    else:
        kind = "nothing"  # verified: not faster, nothing to verify, or incomplete
    parts = [f'<p id="verdict" class="verdict {kind}">{esc(data.verdict_line())}</p>']
    counts = (
        f"<b>{data.finished}</b> finished trials: {data.count(FEASIBLE)} feasible, "
        f"{data.count(INFEASIBLE)} infeasible, {data.count(FAILED)} failed; "
        f"<b>{len(data.pareto)}</b> Pareto-optimal"
    )
    if data.time_to_accuracy:
        missed = sum(p.target_reached is False for p in data.points)
        counts += f"; {missed} missed the target (infeasible)"
    if data.running:
        counts += f"; {data.running} running now"
    if data.time_to_accuracy:
        parts.append(f"<p>{_target_words(data)}</p>")
    parts.append(f"<p>{counts}.</p>")
    if summary is not None:
        race = (
            f"the baseline (trial {summary.baseline.trial_number}) and "
            f"{len(summary.finalists)} finalists raced over {len(summary.race_seeds)} rounds "
            f"(seeds {', '.join(map(str, summary.race_seeds))}) to pick one survivor per answer and evidence (trained, or inherited with its check); then "
            if summary.race_seeds
            else ""
        )
        parts.append(
            f"<p>Verification {summary.number}: {esc(race)}the baseline and "
            f"{len(summary.candidates)} configuration(s) re-run in {summary.rounds} interleaved, "
            "rotated rounds of fresh processes, seeds "
            f"{esc(', '.join(map(str, summary.seeds)))}, which alone make the claim; a "
            f"recommendation {esc(_tolerance_words(summary))} and its speedup's 95 % interval "
            "lies above 1.0x. The plots and the Pareto table below are single-trial figures from the "
            "search: they ranked the finalists and are not a claim.</p>"
        )
    else:
        parts.append(
            "<p>The plots and the Pareto table below are single-trial figures from the search: "
            "they rank candidates and are not a claim.</p>"
        )
    base = data.baseline
    if base is not None and base.throughput_sps is None:
        parts.append(f"<p>Baseline: trial {base.number} ({esc(base.reason or base.status)}).</p>")
    return "\n".join(parts)


def _target_words(data: ReportData) -> str:
    """What a time-to-accuracy study optimizes, in one sentence (escaped)."""
    metric = data.metric
    better = "at least" if metric.maximized else "at most"
    target = metric.format(data.target, 1) if data.target is not None else "its target"
    return esc(
        f"Time to accuracy: each trial trains until its validation {metric.name} is {better} "
        f"{target}; the objectives are the wall seconds to that target (compilation and "
        "evaluations included) and peak memory. A trial that misses the target is infeasible."
    )


def _tolerance_words(summary: VerificationSummary) -> str:
    """What a recommendation keeps of the baseline's metric, in words (in a time-to-accuracy
    verification: that it reached the target in every round)."""
    if summary.is_time_to_accuracy:
        return f"reached {summary.target_text()} in every round"
    metric, tolerance = summary.metric, summary.accuracy_tolerance_pt
    if metric.is_accuracy:
        return f"keeps the baseline's mean accuracy within {tolerance:g} pt"
    side = "below" if metric.maximized else "above"
    return f"has a mean {metric.name} at most {tolerance:g} % {side} the baseline's"


def _verification_table(data: ReportData) -> str:
    """The race's table (stage A), then the confirmation's (stage B, the claim), or the
    verdict line when the study is not verified (:func:`_stage_table`)."""
    summary = data.verification
    if summary is None:
        return f'<p class="notes">{esc(data.verdict_line())}.</p>'
    tables = []
    if summary.race:
        tables.append(
            "<h3>Race (stage A: picks one survivor per answer and evidence, claims nothing)</h3>"
        )
        tables.append(_stage_table(summary, summary.race, "race-table-rows"))
    if summary.race_seeds:
        tables.append("<h3>Confirmation (stage B: the claim)</h3>")
    tables.append(
        _stage_table(summary, (summary.baseline, *summary.candidates), "verification-table-rows")
    )
    return "\n".join(tables)


def _stage_table(
    summary: VerificationSummary, verdicts: Sequence[CandidateVerdict], table_id: str
) -> str:
    """One stage's configurations with their verified figures and verdicts: the columns of
    :func:`~autotune.study.report.verification_columns`, the same as the terminal's."""
    columns = verification_columns(summary)
    rows = []
    for v in verdicts:
        recommended = is_recommended(summary, v)
        css = " class=recommended" if recommended else (" class=baseline" if v.is_baseline else "")
        rows.append(f"<tr{css}>{_cells(columns, v)}</tr>")
    return f'<table id="{table_id}">{_head(columns)}{"".join(rows)}</table>'


def _head(columns: Sequence[Column[Any]]) -> str:
    """A table's header row, text columns left-aligned."""
    ths = "".join(f"<th{' class=text' if c.text else ''}>{esc(c.header)}</th>" for c in columns)
    return f"<tr>{ths}</tr>"


def _cells(columns: Sequence[Column[RowT]], row: RowT) -> str:
    """A row's cells, escaped, text columns left-aligned."""
    return "".join(f"<td{' class=text' if c.text else ''}>{esc(c.cell(row))}</td>" for c in columns)


def _pareto_table(data: ReportData) -> str:
    if not data.pareto:
        if data.time_to_accuracy:
            return '<p class="notes">No trial has reached the target yet.</p>'
        return '<p class="notes">No feasible trial yet.</p>'
    recommended = data.recommended.trial_number if data.recommended is not None else None
    columns = pareto_columns(
        data.metric,
        time_to_accuracy=data.time_to_accuracy,
        recommended=recommended,
        knob_names=data.knob_names,
        rows=data.pareto,
    )
    rows = "".join(
        f"<tr{' class=baseline' if row.baseline else ''}>{_cells(columns, row)}</tr>"
        for row in data.pareto
    )
    busy = "".join(
        f'<p class="notes busy">BUSY: {esc(note)}.</p>' for note in busy_notes(data.pareto)
    )
    return f'<table id="pareto-table-rows">{_head(columns)}{rows}</table>{busy}'


def _hardware_table(data: ReportData) -> str:
    rows = "".join(
        f'<tr><th class="text">{esc(label)}</th><td class="text">{esc(value)}</td></tr>'
        for label, value in data.hardware
    )
    return f"<table>{rows}</table>" if rows else '<p class="notes">Not recorded.</p>'


def _title(data: ReportData) -> str:
    space = f" · space <code>{esc(data.space_name)}</code>" if data.space_name else ""
    device = f" · {esc(data.device_name)}" if data.device_name else ""
    return f"study <code>{esc(data.study_name)}</code>{space}{device}"


def fragments(data: ReportData) -> dict[str, str]:
    """The page's HTML fragments by element id, every user string escaped."""
    notes = "".join(f"<li>{esc(n)}</li>" for n in data.notes)
    return {
        "title": _title(data),
        "simulated": f'<div class="simulated">{esc(SIMULATED_TEXT)}</div>'
        if data.simulated
        else "",
        "summary": _summary(data),
        "verification": _verification_table(data),
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


def _card(fid: str) -> str:
    return f'<div class="card"><div id="{fid}" class="plot"></div></div>'


def _body(
    frags: Mapping[str, str],
    heading: str,
    extra_nav: str = "",
    mode: ObjectiveMode = "throughput",
) -> str:
    """The page's body: the header, then a place for every figure of ``mode``'s page
    (:func:`autotune.study.report.figure_ids`) and every fragment."""
    if mode == "time_to_accuracy":
        figures = f"""<h2>Metric against wall time: the baseline and the Pareto-optimal trials
  (single trials of the search)</h2>
  <div class="card"><div id="metric-vs-time" class="plot"></div></div>
  <h2>Pareto front: time to target against peak memory (single trials of the search)</h2>
  <div class="grid">{"".join(_card(p[0]) for p in TTA_PROJECTIONS)}</div>"""
        table = "Pareto-optimal configurations (single-trial figures; x sooner: the baseline's time to target over the trial's)"
    else:
        plots_2d = "".join(_card(fid) for fid in FIGURE_IDS[:3])
        figures = f"""<h2>Pareto front: three 2-D projections (single trials of the search)</h2>
  <div class="grid">{plots_2d}
    <div class="card"><div id="pareto-3d" class="plot"></div></div>
  </div>"""
        table = "Pareto-optimal configurations (single-trial figures; speedup over the baseline's trial)"
    return f"""
<header>
  <h1>{heading} <span id="title">{frags.get("title", "")}</span></h1>
  {extra_nav}
  <div id="simulated">{frags.get("simulated", "")}</div>
  <div id="summary" class="summary">{frags.get("summary", "")}</div>
</header>
<main>
  <h2>Verification: the baseline and the finalists, re-measured</h2>
  <div id="verification" style="overflow-x:auto">{frags.get("verification", "")}</div>
  {figures}
  <h2>Knobs against objectives</h2>
  <div class="card"><div id="parallel-coordinates" class="plot"></div></div>
  <div class="grid">
    <div><h2>Parameter importance</h2><div class="card"><div id="importances" class="plot"></div></div></div>
    <div><h2>Hypervolume history</h2><div class="card"><div id="hypervolume" class="plot"></div></div></div>
  </div>
  <h2>{table}</h2>
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
<title>autotune report: {esc(data.study_name)}{simulated}</title>
<style>{_CSS}</style>
<script type="text/javascript">{get_plotlyjs()}</script>
</head>
<body data-finished="{data.finished}">
{_body(frags, "autotune report:", mode=data.objective_mode)}
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
        f'<a href="/?study={esc(quote(n, safe=""))}"{" class=current" if n == current else ""}>'
        f"{esc(n)}</a>"
        for n in names
    )
    return f"<nav>studies: {links}</nav>"


def dashboard_page(
    study: str | None,
    names: Sequence[str],
    poll_s: float,
    mode: ObjectiveMode = "throughput",
) -> str:
    """The dashboard's page shell; its script fills and refreshes it from the JSON API.

    Args:
        study: the study shown (None: none yet).
        names: every study's name, for the navigation.
        poll_s: seconds between the page's polls.
        mode: the study's objective mode: which figures the page has places for.
    """
    nav = f'<div id="study-nav">{study_nav(names, study)}</div><div id="live-status">connecting…</div>'
    title = f"autotune dashboard: {esc(study)}" if study else "autotune dashboard"
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
{_body({}, "autotune dashboard:", nav, mode)}
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
