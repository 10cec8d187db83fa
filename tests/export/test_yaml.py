"""`best --export`: the YAML of the verified recommendation (or a trial asked for)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from autotune.exceptions import VerificationError
from autotune.export import (
    best_configurations,
    export_best_yaml,
    export_choice,
    pytorch_settings,
    sort_pareto,
)
from tests.studies.mock import DemoStudy


def test_export_best_yaml_holds_the_recommendation_config_figures_and_snippet(
    demo_study: DemoStudy, tmp_path: Path
) -> None:
    best = best_configurations(demo_study.name, demo_study.url, "accuracy")
    assert best.verification is not None and best.recommended_trial is not None
    path = tmp_path / "out" / "best.yaml"
    export_best_yaml(best, path)
    text = path.read_text()
    assert text.startswith(
        f"# autotune: study 'demo', trial {best.recommended_trial}, the verified recommendation"
    )
    assert "SIMULATED" in text.split("study:")[0]  # said in the header comment
    doc = yaml.safe_load(text)
    # --objective orders the table; the export is the verified recommendation all the same.
    row = best.configurations[best.recommended_trial]
    assert doc["trial"] == row.number and doc["selected_by"] == "verification" and doc["simulated"]
    assert doc["verification"]["rounds"] == best.verification.rounds
    assert doc["verification"]["verdict"] == best.verdict
    figures = doc["single_trial_figures"]
    assert isinstance(figures["throughput_sps"], float)
    assert figures["val_metric"] == row.val_metric
    assert figures["peak_memory_bytes"] == int(row.peak_memory_bytes)
    assert doc["config"]["batch_size"] == row.params["batch_size"]
    assert doc["config"]["train"]["lr"] == pytest.approx(3.0e-3)
    assert doc["pytorch"] == pytorch_settings(row.params)
    assert "def autotuned_training(" in doc["pytorch_snippet"]
    assert "pytorch_snippet: |" in text  # a block the reader can copy


def test_export_choice_is_the_recommendation_or_the_trial_asked_for(demo_study: DemoStudy) -> None:
    best = best_configurations(demo_study.name, demo_study.url)
    assert export_choice(best).number == best.recommended_trial
    top = sort_pareto(best.rows, "memory")[0]
    assert export_choice(best, top.number) == top
    unverified = dataclasses.replace(best, verification=None)
    with pytest.raises(VerificationError, match="study=demo: not verified, so there is no"):
        export_choice(unverified)
    assert export_choice(unverified, top.number) == top
