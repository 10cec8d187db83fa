"""The two example queries of storage/README.md give the right answers on a real study."""

from __future__ import annotations

import json
import re
from pathlib import Path

import optuna
import sqlalchemy as sa

from autotune.study.report import FEASIBLE
from autotune.study.report._points import classify
from autotune.study.storage import create_results_engine
from tests.studies.mock import DemoStudy

README = Path(__file__).resolve().parents[3] / "storage" / "README.md"


def _queries() -> list[str]:
    return re.findall(r"```sql\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def _feasible(demo_study: DemoStudy) -> list[optuna.trial.FrozenTrial]:
    study = optuna.load_study(study_name=demo_study.name, storage=demo_study.url)
    return [t for t in study.get_trials() if t.state.is_finished() and classify(t)[0] == FEASIBLE]


def test_the_readme_has_two_queries() -> None:
    assert len(_queries()) == 2


def test_best_throughput_per_gpu_model(demo_study: DemoStudy) -> None:
    feasible = _feasible(demo_study)
    with create_results_engine(demo_study.url).connect() as conn:
        rows = conn.execute(sa.text(_queries()[0])).mappings().all()
    assert len(rows) == 1
    assert "simulated" in rows[0]["gpu_model"] and rows[0]["simulated"]
    assert rows[0]["best_throughput_sps"] == max(t.values[0] for t in feasible)
    assert rows[0]["feasible_trials"] == len(feasible)


def test_configs_within_one_point_of_the_best_accuracy(demo_study: DemoStudy) -> None:
    feasible = _feasible(demo_study)
    best = max(t.values[1] for t in feasible)
    expected = sorted(
        (t for t in feasible if t.values[1] >= best - 0.01), key=lambda t: -t.values[0]
    )
    query = _queries()[1].replace("'cnn_small'", f"'{demo_study.name}'")
    with create_results_engine(demo_study.url).connect() as conn:
        rows = conn.execute(sa.text(query)).mappings().all()
    assert [r["trial_number"] for r in rows] == [t.number for t in expected]
    assert rows and all(r["val_metric"] >= best - 0.01 for r in rows)
    assert {"precision", "batch_size", "compile_mode"} <= set(rows[0])
    by_number = {t.number: t for t in expected}
    for r in rows:  # the model knobs as JSON, the workload by its short name
        params = by_number[r["trial_number"]].params
        assert json.loads(r["model_knobs_json"]) == {k: params[k] for k in ("depth", "width")}
        assert r["workload"] == "cnn"
