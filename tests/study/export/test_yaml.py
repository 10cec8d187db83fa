"""`best --export`: the YAML of the verified recommendation (or a trial asked for)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from autotune.core.exceptions import VerificationError
from autotune.study.export import (
    best_configurations,
    export_best_yaml,
    export_choice,
)
from autotune.study.export._best import (
    sort_pareto,
)
from autotune.study.export._snippet import (
    pytorch_settings,
)
from autotune.study.export._yaml import (
    EXPORTED_CONFIG_KEYS,
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
    # train.lr at the baseline's global batch (64), sqrt-scaled to the trial's.
    global_batch = row.params["batch_size"] * row.params["gpu_count"]
    peak_lr = 3.0e-3 * (global_batch / 64) ** 0.5
    assert doc["pytorch"] == pytorch_settings(row.params) | {"peak_lr": pytest.approx(peak_lr)}
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


def test_the_export_holds_a_curated_set_of_keys(demo_study: DemoStudy, tmp_path: Path) -> None:
    """No field of autotune's own (the mock device's fault and profile, metric reuse, the
    measurement settings, the search's throughput floor) leaks into the file."""
    best = best_configurations(demo_study.name, demo_study.url)
    assert best.configs[11]["mock_profile"] == "default"  # stored, but not exported
    doc = export_best_yaml(best, tmp_path / "best.yaml")
    assert list(doc) == [
        "study",
        "storage",
        "trial",
        "selected_by",
        "simulated",
        "device",
        "exported_at",
        "verification",
        "single_trial_figures",
        "workload",
        "model",
        "config",
        "pytorch",
        "hardware",
        "pytorch_snippet",
    ]
    assert list(doc["config"]) == [
        "device",
        "model",
        "batch_size",
        "precision",
        "memory_format",
        "compile_mode",
        "num_workers",
        "gpu_count",
        "seed",
        "objective",
        "train",
    ]
    assert list(doc["config"]) == list(EXPORTED_CONFIG_KEYS)
    train = doc["config"]["train"]
    assert "warmup_steps" not in train and "max_time_vs_baseline" not in train
    assert train["lr_warmup_fraction"] == 0.05 and train["reference_batch_size"] == 64
    # The learning rate the recommended trial (10) trained at: 3e-3 at batch 64, sqrt-scaled to its batch 32.
    row = best.configurations[best.recommended_trial]
    global_batch = row.params["batch_size"] * row.params["gpu_count"]
    assert doc["pytorch"]["peak_lr"] == pytest.approx(3.0e-3 * (global_batch / 64) ** 0.5)
    text = (tmp_path / "best.yaml").read_text()
    for internal in ("mock_fault", "mock_profile", "reuse", "min_throughput_sps", "measure:"):
        assert internal not in text
    unverified = export_best_yaml(best, tmp_path / "t0.yaml", trial=0)
    assert list(unverified) == [*list(doc)[:8], "note", *list(doc)[8:]]


def test_a_relative_sqlite_storage_is_exported_with_its_absolute_path(
    demo_study: DemoStudy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = Path(demo_study.url.removeprefix("sqlite:///"))
    monkeypatch.chdir(database.parent)
    best = best_configurations(demo_study.name, f"sqlite:///{database.name}")
    doc = export_best_yaml(best, tmp_path / "best.yaml")
    assert doc["storage"] == f"sqlite:///{database}"
