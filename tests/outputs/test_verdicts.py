"""One recommendation everywhere: the report, the dashboard, ``autotune report``, ``best`` and
``best --export`` make the same claim, the study's newest finished verification's, or say
plainly that nothing was verifiably faster or that the study is not verified."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import pytest
import yaml

from autotune.cli import main
from autotune.study.report import DashboardApp, report_study
from tests.studies.verdicts import VerdictStudies, shared_verdict_studies


@pytest.fixture(scope="module")
def studies(tmp_path_factory: pytest.TempPathFactory) -> VerdictStudies:
    return shared_verdict_studies(tmp_path_factory)


def _outputs(
    studies: VerdictStudies, name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> dict[str, Any]:
    """What each output says about study ``name``: the report page, the dashboard payload, the
    lines ``autotune report`` and ``autotune best`` print, and ``best --export``'s exit code,
    stderr and file (None when nothing was written)."""
    storage = f"storage={studies.url}"
    page = tmp_path / f"{name}.html"
    assert main(["report", f"study={name}", storage, "--out", str(page)]) == 0
    report_out = capsys.readouterr().out
    assert main(["best", f"study={name}", storage]) == 0
    best_out = capsys.readouterr().out
    export = tmp_path / f"{name}.yaml"
    code = main(["best", f"study={name}", storage, "--export", str(export)])
    captured = capsys.readouterr()
    app = DashboardApp(studies.url, importances=False)
    try:
        payload = app.study_payload(name)
    finally:
        app.close()
    return {
        "page": page.read_text(encoding="utf-8"),
        "payload": payload,
        "report_lines": report_out.splitlines(),
        "best_lines": best_out.splitlines(),
        "export_code": code,
        "export_err": captured.err,
        "export_out": captured.out,
        "export": yaml.safe_load(export.read_text()) if export.exists() else None,
    }


def test_every_output_recommends_the_same_verified_trial_and_speedup(
    studies: VerdictStudies, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = studies.summary(studies.recommends)
    assert summary is not None and summary.recommended is not None
    rec = summary.recommended
    assert rec.speedup is not None and rec.speedup_ci95 is not None
    line = summary.headline()
    assert (
        f"95 % CI {rec.speedup_ci95[0]:.2f}-{rec.speedup_ci95[1]:.2f}x, {summary.stages_text()})"
        in line
    )
    out = _outputs(studies, studies.recommends, tmp_path, capsys)

    # The report page and the dashboard show the line word for word, and mark the same trial.
    assert html.escape(line) in out["page"]
    assert out["payload"]["verdict"] == line
    assert html.escape(line) in out["payload"]["fragments"]["summary"]
    assert out["payload"]["recommended_trial"] == rec.trial_number
    # `autotune report` prints it under the "wrote" line; `best` above its Pareto table.
    assert out["report_lines"][1] == line
    table_at = next(i for i, s in enumerate(out["best_lines"]) if "Pareto-optimal" in s)
    # `best` prints the verdict block: the same claim, a line per figure.
    block = summary.verdict_block()
    shown_block = [s.strip() for s in out["best_lines"][:table_at]]
    assert all(part in shown_block for part in block)
    assert f"{rec.speedup:.2f}x faster than PyTorch's defaults" in block[2]
    assert "single-trial figures, not verified" in out["best_lines"][table_at]
    # `best --export` writes the recommended trial with the verified figures.
    assert out["export_code"] == 0, out["export_err"]
    doc = out["export"]
    assert doc["trial"] == rec.trial_number and doc["selected_by"] == "verification"
    verification = doc["verification"]
    assert verification["rounds"] == summary.rounds
    assert verification["verification_number"] == summary.number
    assert verification["seeds"] == list(summary.seeds)
    assert verification["speedup"] == pytest.approx(rec.speedup, abs=1e-4)
    assert verification["speedup_ci95"] == pytest.approx(list(rec.speedup_ci95), abs=1e-4)
    assert verification["val_metric_mean"] == pytest.approx(rec.val_metric_mean)
    assert verification["baseline_val_metric_mean"] == pytest.approx(
        summary.baseline.val_metric_mean
    )
    assert verification["verdict"] == line and "note" not in doc
    assert f"trial {rec.trial_number}, the verified recommendation" in out["export_out"]
    # The speedup is the same figure in every output, to the digits each shows.
    shown = f"{rec.speedup:.2f}x faster than PyTorch's defaults"
    assert html.escape(shown) in out["page"]
    assert all(shown in text for text in (out["report_lines"][1], line))


def test_every_output_says_plainly_that_nothing_is_verifiably_faster(
    studies: VerdictStudies, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = studies.summary(studies.nothing)
    assert summary is not None and summary.recommended is None and summary.finalists
    assert summary.ending == "not_faster"
    out = _outputs(studies, studies.nothing, tmp_path, capsys)

    words = "verified: not faster than PyTorch's defaults at the same accuracy"
    assert html.escape(words) in out["page"]
    assert words in out["payload"]["verdict"]
    assert out["payload"]["recommended_trial"] is None
    assert words in out["report_lines"][1]
    assert any(words in s for s in out["best_lines"])
    assert html.escape("faster than PyTorch's defaults (verified") not in out["page"]
    # Nothing to export by default: one line that says why and how to export anyway.
    assert out["export_code"] == 2 and out["export"] is None and out["export_out"] == ""
    [err] = out["export_err"].splitlines()
    assert err.startswith(f"autotune: error: study={studies.nothing}: {summary.headline()}")
    assert "--trial N" in err


def test_every_output_says_an_unverified_study_is_not_verified(
    studies: VerdictStudies, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert studies.summary(studies.unverified) is None
    out = _outputs(studies, studies.unverified, tmp_path, capsys)
    said = f"not verified: run `autotune verify study={studies.unverified} storage={studies.url}`"

    assert html.escape(said) in out["page"]
    assert out["payload"]["verdict"].startswith(said)
    assert out["payload"]["recommended_trial"] is None
    assert out["report_lines"][1].startswith(said)
    assert any(s.startswith(said) for s in out["best_lines"])
    assert html.escape("faster than PyTorch's defaults") not in out["page"]
    assert out["export_code"] == 2 and out["export"] is None and out["export_out"] == ""
    [err] = out["export_err"].splitlines()
    assert err.startswith(f"autotune: error: study={studies.unverified}: not verified")
    assert f"`autotune verify study={studies.unverified} storage={studies.url}` first" in err
    assert "--trial N" in err


@pytest.mark.parametrize("which", ["nothing", "unverified"])
def test_trial_n_exports_a_single_trial_that_says_it_is_not_verified(
    studies: VerdictStudies, tmp_path: Path, which: str, capsys: pytest.CaptureFixture[str]
) -> None:
    name = getattr(studies, which)
    report, _ = report_study(name, studies.url, tmp_path / "r.html")
    row = report.pareto[0]
    out = tmp_path / "trial.yaml"
    args = ["best", f"study={name}", f"storage={studies.url}", "--export", str(out)]
    assert main([*args, "--trial", str(row.number)]) == 0
    assert "NOT VERIFIED: single-trial figures" in capsys.readouterr().out
    text = out.read_text()
    doc = yaml.safe_load(text)
    assert doc["trial"] == row.number and doc["selected_by"] == "--trial"
    assert doc["verification"] is None and "verification: null" in text
    assert doc["note"].startswith(f"NOT VERIFIED: trial {row.number} was chosen with --trial")
    assert "single-trial figures" in doc["note"]
    assert doc["single_trial_figures"]["throughput_sps"] == pytest.approx(row.throughput_sps)
    assert "NOT VERIFIED" in text.split("study:")[0]  # said in the header comment too


def test_trial_n_must_be_a_feasible_measured_trial_and_needs_export(
    studies: VerdictStudies, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "trial.yaml"
    base = ["best", f"study={studies.recommends}", f"storage={studies.url}"]
    assert main([*base, "--export", str(out), "--trial", "999"]) == 2
    assert "--trial 999: study=recommends has no feasible, measured trial 999" in (
        capsys.readouterr().err
    )
    assert main([*base, "--trial", "0"]) == 2
    assert "--trial 0: only with --export FILE" in capsys.readouterr().err
    assert not out.exists()
