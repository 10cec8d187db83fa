"""`autotune best`, `export` and `ls`: ranking, the YAML + PyTorch snippet of the verified
recommendation, CSV, the study list. (tests/report/test_verdicts.py checks that `best` and
`best --export` agree with the report and the dashboard.)"""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

import optuna
import pytest
import torch
import yaml
from torch.nn import functional as F
from torch.utils.data import TensorDataset

from autotune.cli import main
from autotune.exceptions import ConfigError, VerificationError
from autotune.export import (
    best_configurations,
    export_best_yaml,
    export_choice,
    export_csv,
    list_studies,
    pytorch_settings,
    pytorch_snippet,
    sort_pareto,
    trial_records,
)
from autotune.storage import ResultsStore, StudyNotFoundError, TrialRecord
from autotune.verification import load_verification
from tests.storage.studies import DemoStudy, make_trial, shared_demo_study, sqlite_url

PARAMS = {
    "depth": 1,
    "width": 8,
    "batch_size": 16,
    "precision": "fp32",
    "memory_format": "contiguous",
    "compile_mode": "none",
    "num_workers": 0,
    "gpu_count": 1,
}


@pytest.fixture(scope="module")
def demo_study(tmp_path_factory: pytest.TempPathFactory) -> DemoStudy:
    return shared_demo_study(tmp_path_factory)


def test_pytorch_settings_map_every_knob() -> None:
    settings = pytorch_settings(
        {**PARAMS, "precision": "bf16", "memory_format": "channels_last",
         "compile_mode": "max-autotune", "num_workers": 2, "gpu_count": 4, "batch_size": 128}
    )  # fmt: skip
    assert settings == {
        "autocast_dtype": "torch.bfloat16",
        "tf32": False,
        "grad_scaler": False,
        "channels_last": True,
        "compile_mode": "max-autotune",
        "dataloader": {
            "batch_size": 128,
            "num_workers": 2,
            "pin_memory": "True on CUDA",
            "persistent_workers": True,
            "drop_last": True,
        },
        "ddp_world_size": 4,
    }
    fp32 = pytorch_settings(PARAMS)
    assert fp32["autocast_dtype"] is None and fp32["compile_mode"] is None
    assert pytorch_settings({**PARAMS, "precision": "tf32"})["tf32"] is True
    assert pytorch_settings({**PARAMS, "precision": "fp16"})["grad_scaler"] is True


@pytest.mark.parametrize(
    ("precision", "memory_format"),
    [("fp32", "contiguous"), ("bf16", "channels_last"), ("fp16", "contiguous")],
)
def test_the_snippet_trains_a_model_on_cpu(precision: str, memory_format: str) -> None:
    source = pytorch_snippet({**PARAMS, "precision": precision, "memory_format": memory_format})
    namespace: dict[str, object] = {}
    exec(compile(source, "<snippet>", "exec"), namespace)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
        torch.nn.Linear(4 * 8 * 8, 10),
    )  # fmt: skip
    before = [p.detach().clone() for p in model.parameters()]
    data = TensorDataset(torch.randn(64, 1, 8, 8), torch.randint(0, 10, (64,)))  # (B, C, H, W)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    trained = namespace["autotuned_training"](model, data, F.cross_entropy, optimizer, epochs=2)  # type: ignore[operator]
    assert trained is model
    assert all(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    if memory_format == "channels_last":
        assert model[0].weight.is_contiguous(memory_format=torch.channels_last)


def test_the_snippet_for_ddp_and_compile_says_how_to_launch() -> None:
    source = pytorch_snippet(
        {**PARAMS, "gpu_count": 2, "compile_mode": "reduce-overhead"}, header=["my header"]
    )
    compile(source, "<snippet>", "exec")
    assert source.startswith("# my header\n# Launch with: torchrun --nproc_per_node=2")
    assert 'COMPILE_MODE = "reduce-overhead"' in source and "WORLD_SIZE = 2" in source
    assert "DistributedDataParallel(model)" in source and "DistributedSampler" in source


def test_best_ranks_the_pareto_front_by_each_objective(demo_study: DemoStudy) -> None:
    study = optuna.load_study(study_name=demo_study.name, storage=demo_study.url)
    best = best_configurations(demo_study.name, demo_study.url, "throughput")
    assert {r.number for r in best.rows} == {t.number for t in study.best_trials}
    assert [r.throughput_sps for r in best.rows] == sorted(
        (r.throughput_sps for r in best.rows), reverse=True
    )
    memory = sort_pareto(best.rows, "memory")
    assert [r.peak_memory_bytes for r in memory] == sorted(r.peak_memory_bytes for r in best.rows)
    accuracy = sort_pareto(best.rows, "accuracy")
    assert accuracy[0].val_metric == max(r.val_metric for r in best.rows)
    assert best.simulated and best.baseline is not None
    assert all(best.configs[r.number]["train"]["optimizer"] == "adamw" for r in best.rows)
    with pytest.raises(ConfigError, match="--objective speed: unknown objective"):
        best_configurations(demo_study.name, demo_study.url, "speed")


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


def test_best_command_prints_and_exports(
    demo_study: DemoStudy, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "best.yaml"
    args = ["best", demo_study.name, f"storage={demo_study.url}", "--export", str(out)]
    assert main([*args, "--objective", "memory"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("SIMULATED:") and "[SIMULATED]" in printed
    assert "autotuned_training" in printed and out.is_file()


@pytest.mark.parametrize(
    "args",
    [
        ["best", "nope"],
        ["best", "demo", "--objective", "speed"],
        ["best", "demo", "storage"],
    ],
)
def test_best_with_bad_input_exits_2_and_writes_nothing(
    demo_study: DemoStudy, tmp_path: Path, args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "best.yaml"
    storage = [] if "storage" in args else [f"storage={demo_study.url}"]
    assert main([*args, *storage, "--export", str(out)]) == 2
    assert not out.exists()
    assert capsys.readouterr().err.startswith("autotune: error: ")


def test_export_csv_writes_one_row_per_finished_trial(
    demo_study: DemoStudy, tmp_path: Path
) -> None:
    path = tmp_path / "trials.csv"
    assert main(["export", demo_study.name, f"storage={demo_study.url}", "--csv", str(path)]) == 0
    with path.open() as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    assert reader.fieldnames == [f.name for f in dataclasses.fields(TrialRecord)]
    assert [int(r["trial_number"]) for r in rows] == list(range(demo_study.n_trials))
    assert rows[0]["is_baseline"] == "True" and rows[0]["precision"] == "fp32"
    assert float(rows[0]["throughput_sps"]) > 0


def test_export_of_an_unknown_study_writes_no_file(demo_study: DemoStudy, tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    with pytest.raises(StudyNotFoundError):
        export_csv("nope", demo_study.url, path)
    assert not path.exists()
    assert main(["export", "nope", f"storage={demo_study.url}", "--csv", str(path)]) == 2
    assert main(["export", demo_study.name, f"storage={demo_study.url}"]) == 2  # --csv missing
    assert not path.exists()


def test_rows_are_rebuilt_for_a_study_made_without_our_tables(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    study = optuna.create_study(study_name="old", storage=url, directions=["maximize"] * 3)
    study.add_trials([make_trial(0, (100.0, 0.5, 1e6)), make_trial(1, None, failure="oom")])
    records = trial_records("old", url)
    assert [(r.trial_number, r.failure) for r in records] == [(0, None), (1, "oom")]
    assert records[0].throughput_sps == 100.0
    [summary] = list_studies(url)
    assert summary.hardware == "unknown" and summary.verification == "not verified"


def test_a_study_that_is_not_autotunes_is_refused_by_report_and_marked_by_ls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = sqlite_url(tmp_path)
    other = optuna.create_study(study_name="other", storage=url)
    other.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    out = tmp_path / "r.html"
    assert main(["report", "other", f"storage={url}", "--out", str(out)]) == 2
    assert "not an autotune study (it has 1 objectives" in capsys.readouterr().err
    assert not out.exists()
    [summary] = list_studies(url)
    assert summary.space_name == "(not an autotune study)" and summary.total == 2


def test_ls_lists_studies_with_counts_and_hardware(
    demo_study: DemoStudy, capsys: pytest.CaptureFixture[str]
) -> None:
    [summary] = list_studies(demo_study.url)
    assert summary.study_name == demo_study.name and summary.space_name == "cnn_small"
    assert summary.finished == summary.total == demo_study.n_trials
    assert summary.simulated and "simulated" in summary.hardware
    assert 0 < summary.pareto <= summary.feasible < summary.finished
    # The speedup shown is the verified recommendation's, never a single trial's.
    study = optuna.load_study(study_name=demo_study.name, storage=demo_study.url)
    with ResultsStore.open(demo_study.url, create=False) as results:
        verification = load_verification(study, results)
    assert verification is not None and verification.recommended is not None
    assert summary.verification == "recommended"
    assert summary.recommended_trial == verification.recommended.trial_number
    assert summary.verified_speedup == verification.recommended.speedup
    assert main(["ls", f"storage={demo_study.url}"]) == 0
    out = capsys.readouterr().out
    assert demo_study.name in out and "[SIMULATED]" in out
    assert f"{summary.verified_speedup:.2f}x (trial {summary.recommended_trial})" in out


def test_ls_of_a_missing_database_exits_2_without_creating_it(tmp_path: Path) -> None:
    assert main(["ls", f"storage={sqlite_url(tmp_path / 'none')}"]) == 2
    assert not (tmp_path / "none").exists()


def test_configurations_stored_before_workloads_are_exported_in_the_current_form() -> None:
    from autotune.export import _current_form

    legacy = {
        "device": "mock",
        "family": "cnn",
        "depth": 2,
        "width": 16,
        "data": {"name": "digits"},
        **{k: v for k, v in PARAMS.items() if k not in ("depth", "width")},
        "train": {"epochs": 1},
    }

    current = _current_form(legacy)

    assert current["model"] == {"depth": 2, "width": 16}
    assert current["workload"]["ref"] == "autotune.workloads.builtin:ImageClassifier"
    assert current["workload"]["args"]["family"] == "cnn"
    assert current["workload"]["args"]["data"]["name"] == "digits"
    assert "family" not in current and "depth" not in current
    assert _current_form({"not": "a configuration", "family": "cnn"}) == {
        "not": "a configuration",
        "family": "cnn",
    }
