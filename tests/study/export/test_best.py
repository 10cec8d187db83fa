"""`autotune best`: the Pareto front ranked by each objective, and bad input.
(tests/outputs/test_verdicts.py checks that `best` and `best --export`
agree with the report and the dashboard.)"""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from autotune.cli import main
from autotune.core.exceptions import ConfigError
from autotune.study.export import (
    best_configurations,
)
from autotune.study.export._best import (
    sort_pareto,
)
from tests.studies.mock import DemoStudy


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


def test_best_command_prints_and_exports(
    demo_study: DemoStudy, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "best.yaml"
    args = ["best", f"study={demo_study.name}", f"storage={demo_study.url}", "--export", str(out)]
    assert main([*args, "--objective", "memory"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("SIMULATED:") and "[SIMULATED]" in printed
    assert "autotuned_training" in printed and out.is_file()


@pytest.mark.parametrize(
    "args",
    [
        ["best", "study=nope"],
        ["best", "study=demo", "--objective", "speed"],
        ["best", "study=demo", "storage"],
        ["best"],
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
