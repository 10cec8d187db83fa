"""The HTML report: self-contained, escaped, every trial drawn; opens in Chromium offline."""

from __future__ import annotations

import html
from pathlib import Path

import optuna
import plotly
import pytest
from optuna.distributions import CategoricalDistribution

from autotune.cli import main
from autotune.study.report import (
    SIMULATED_TEXT,
    build_figures,
    gather_report,
    render_report,
    report_study,
)
from autotune.study.report._data import gather_from_trials
from autotune.study.report._figures import FIGURE_IDS, PROJECTIONS
from autotune.study.storage import ResultsStore, StudyNotFoundError
from tests.studies.mock import DemoStudy, make_trial
from tests.study.report.browser import chromium_page, count_points

EVIL_NAME = "<img src=x onerror=alert(1)>"
EVIL_VALUE = "</script><script>alert(2)</script>"


def _evil_trials() -> list[optuna.trial.FrozenTrial]:
    trials = [make_trial(0, (1000.0, 0.9, 5e6), baseline=True)]
    evil = optuna.trial.create_trial(
        values=[2000.0, 0.8, 4e6],
        params={"optimizer_note": EVIL_VALUE, "batch_size": 64},
        distributions={
            "optimizer_note": CategoricalDistribution((EVIL_VALUE, "plain")),
            "batch_size": CategoricalDistribution((32, 64)),
        },
        user_attrs={"throughput_sps": 2000.0, "simulated": True},
        constraints={"failed": 0.0},
    )
    evil.number = 1
    return [*trials, evil]


def test_report_is_self_contained_and_says_simulated(demo_study: DemoStudy) -> None:
    study = optuna.load_study(study_name=demo_study.name, storage=demo_study.url)
    with ResultsStore.open(demo_study.url, create=False) as results:
        data = gather_report(study, results, importances=False)
    text = render_report(data)
    bundle = plotly.offline.get_plotlyjs()
    assert text.count(bundle) == 1  # Plotly's JavaScript, inlined once
    page = text.replace(bundle, "")  # (bool(...) keeps pytest from diffing megabytes)
    assert not any(s in page for s in ("<script src", "<link", "https://", "http://"))
    assert SIMULATED_TEXT in page and "[SIMULATED]" in page
    assert all(f'id="{fid}"' in page for fid in FIGURE_IDS)
    # The headline is the verification's, word for word; the tables of single trials say so.
    assert data.recommended is not None
    assert html.escape(data.verdict_line()) in page and "over 8 rounds" in page
    assert 'id="verification-table-rows"' in page and ">RECOMMENDED<" in page
    assert "single-trial figures" in page and "<th>x baseline</th>" in page


def test_without_a_verification_the_report_claims_nothing(demo_study: DemoStudy) -> None:
    study = optuna.load_study(study_name=demo_study.name, storage=demo_study.url)
    page = render_report(gather_report(study, importances=False))  # no results: not verified
    verdict = page.split('id="verdict"', 1)[1].split("</p>", 1)[0]
    assert "not verified: run `autotune verify study=demo`" in verdict
    assert "faster than PyTorch's defaults" not in page


def test_figures_mark_the_recommendation_and_call_the_rest_single_trials(
    demo_study: DemoStudy,
) -> None:
    study = optuna.load_study(study_name=demo_study.name, storage=demo_study.url)
    with ResultsStore.open(demo_study.url, create=False) as results:
        data = gather_report(study, results, importances=False)
    assert data.recommended is not None
    figure = build_figures(data)["pareto-throughput-accuracy"]
    [recommended] = [t for t in figure.data if t.name.startswith("recommended (verified)")]
    assert list(recommended.customdata) == [data.recommended.trial_number]
    assert "RECOMMENDED" in recommended.text[0] and "over 8 rounds" in recommended.text[0]
    assert "(single trials)" in figure.layout.title.text


def test_real_measurements_are_not_labelled_simulated() -> None:
    trials = [make_trial(0, (1000.0, 0.9, 5e6), baseline=True, simulated=False)]
    text = render_report(gather_from_trials("real", trials, importances=False))
    assert not (SIMULATED_TEXT in text or "[SIMULATED]" in text)


def test_every_user_string_is_escaped() -> None:
    data = gather_from_trials(EVIL_NAME, _evil_trials(), space_name=EVIL_NAME, importances=False)
    text = render_report(data)
    assert not any(s in text for s in ("<img src=x", EVIL_VALUE, "<script>alert(2)"))
    assert "&lt;img src=x onerror=alert(1)&gt;" in text


def test_a_study_without_finished_trials_still_renders() -> None:
    data = gather_from_trials("empty", [], importances=True)
    assert data.finished == 0 and data.pareto == () and data.hypervolume == ()
    text = render_report(data)
    assert "No feasible trial yet." in text and "2 or more feasible trials" in text


def test_each_2d_projection_draws_every_finished_trial_once(demo_study: DemoStudy) -> None:
    study = optuna.load_study(study_name=demo_study.name, storage=demo_study.url)
    data = gather_report(study, importances=False)
    figures = build_figures(data)
    for fid, _, _ in PROJECTIONS:
        markers = [t for t in figures[fid].data if t.mode == "markers"]
        assert all(t.type == "scatter" for t in figures[fid].data)  # SVG, not WebGL
        numbers = [n for t in markers for n in t.customdata]
        assert sorted(numbers) == [p.number for p in data.points]
    names = [t.name for t in figures["pareto-throughput-accuracy"].data]
    assert any(n.startswith("failed") for n in names)
    assert any(n.startswith("infeasible (breaks") for n in names)
    assert any(n.startswith("baseline") for n in names)
    assert len(figures["pareto-3d"].data) >= 4
    assert figures["parallel-coordinates"].data[0].type == "parcoords"


def test_report_command_writes_the_file_and_prints_the_verdict(
    demo_study: DemoStudy, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r" / "demo.html"
    study, storage = f"study={demo_study.name}", f"storage={demo_study.url}"
    assert main(["report", study, storage, "--out", str(out)]) == 0
    assert out.is_file() and out.stat().st_size > 3_000_000
    printed = capsys.readouterr().out.splitlines()
    data, _ = report_study(demo_study.name, demo_study.url, tmp_path / "again.html")
    assert printed[1] == data.verdict_line() and "over 8 rounds" in printed[1]


def test_report_of_an_unknown_study_exits_2_and_writes_nothing(
    demo_study: DemoStudy, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "nope.html"
    assert main(["report", "study=nope", f"storage={demo_study.url}", "--out", str(out)]) == 2
    assert not out.exists()
    err = capsys.readouterr().err
    assert err.startswith("autotune: error: study=nope: no such study") and err.count("\n") == 1
    with pytest.raises(StudyNotFoundError):
        report_study("nope", demo_study.url, out)


def test_report_command_refuses_a_bad_argument(demo_study: DemoStudy, tmp_path: Path) -> None:
    out = tmp_path / "a.html"
    assert main(["report", f"study={demo_study.name}", "store=x", "--out", str(out)]) == 2
    assert not (tmp_path / "a.html").exists()


@pytest.mark.browser
def test_report_opens_offline_in_chromium(demo_study: DemoStudy, tmp_path: Path) -> None:
    path = tmp_path / "offline.html"
    data, _ = report_study(demo_study.name, demo_study.url, path)
    requests: list[str] = []
    with chromium_page() as page:

        def block_network(route: object) -> None:
            url = route.request.url  # type: ignore[attr-defined]
            requests.append(url)
            if url.startswith("file://"):
                route.continue_()  # type: ignore[attr-defined]
            else:
                route.abort()  # type: ignore[attr-defined]

        page.route("**/*", block_network)
        page.goto(path.as_uri())
        page.wait_for_selector("#pareto-throughput-accuracy .scatterlayer .point", timeout=30_000)
        assert count_points(page, "pareto-throughput-accuracy") == data.finished
        assert count_points(page, "pareto-accuracy-memory") == data.finished
        page.wait_for_selector("#parallel-coordinates .parcoords", timeout=10_000)
        page.wait_for_selector("#pareto-3d .gl-container canvas", state="attached", timeout=10_000)
        assert page.errors == []
    assert requests and all(u.startswith("file://") for u in requests), requests
