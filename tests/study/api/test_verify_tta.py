"""The verification of a time-to-accuracy study (autotune/study/api/_verify.py), end to end on the
mock device (SIMULATED) with SQLite in tmp_path: every round trains to the study's target,
each row keeps its time to accuracy, and the verdict compares times to the target."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import optuna
import pytest

from autotune.cli import main
from autotune.core.config import RunConfig, TrialConfig, VerifySettings, load_run_config
from autotune.study.api import run_study, verify_study
from autotune.study.storage import ResultsStore, VerificationPlan
from autotune.study.verification import load_verification, model_change_finalists, round_seeds
from autotune.testing import make_measurement, simulate_trial
from autotune.trial.measure import Measurement

#: Trials of the study (the baseline is trial 0). With the random sampler and seed 3 this
#: mock study has two finalists: trials that reached 95 % sooner than the defaults.
N_TRIALS = 8
TARGET = 0.95


def _config(sqlite_url: str, *args: str) -> RunConfig:
    return load_run_config(
        [
            "space=cnn_small",
            "device=mock",
            "data=digits",
            # The budget these tests' figures were set with: at cnn_small's 3 epochs the
            # simulated digits trials reach 95 % late or not at all.
            "train.epochs=5",
            f"storage={sqlite_url}",
            "sampler=random",
            "seed=3",
            "objective=time_to_accuracy",
            f"train.target_accuracy={TARGET}",
            *args,
        ]
    )


def _query(sqlite_url: str, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(sqlite_url.removeprefix("sqlite:///")) as conn:
        return conn.execute(sql).fetchall()


class Recorder:
    """A run_trial that simulates, and remembers every configuration it ran."""

    def __init__(self) -> None:
        self.configs: list[TrialConfig] = []

    def __call__(self, config: TrialConfig) -> Measurement:
        self.configs.append(config)
        return simulate_trial(config)


def test_a_time_to_accuracy_run_ends_with_a_verification_of_times_to_the_target(
    sqlite_url: str,
) -> None:
    config = _config(sqlite_url, "verify.rounds=3", "advanced.verify.candidates=2")
    runner = Recorder()

    summary = run_study(config, N_TRIALS, run_trial_fn=runner).verification

    assert summary is not None and summary.complete and summary.simulated
    assert summary.is_time_to_accuracy and summary.target == TARGET
    assert summary.rounds == 3 and summary.finalists
    # Every verification run trained to the study's target, with its round's seed, in the
    # plan's order (a race when there are several finalists; rounds rotated).
    study = optuna.load_study(study_name=config.study, storage=config.storage)
    params = {t.number: t.params for t in study.trials}
    plan = VerificationPlan(
        summary.baseline.trial_number,
        summary.finalists,
        summary.seeds,
        0.5,
        race_seeds=summary.race_seeds,
        model_changes=model_change_finalists(
            summary.finalists, params, summary.baseline.trial_number
        ),
    )
    schedule = plan.schedule(summary.survivors)
    order = [number for _, number in schedule]
    runs = runner.configs[-len(order) :]
    assert {c.objective for c in runs} == {"time_to_accuracy"}
    assert {c.train.target_accuracy for c in runs} == {TARGET}
    assert [c.seed for c in runs] == [plan.seed(r) for r, _ in schedule]
    assert set(plan.seeds) == set(
        round_seeds(config.seed, 1, len(summary.race_seeds) + 3)[len(summary.race_seeds) :]
    )
    # The baseline trial derived the evaluation cadence (10 % of its time to the target),
    # and the verification runs use it too.
    cadence = {c.train.eval_every_s for c in runs}
    assert len(cadence) == 1 and next(iter(cadence)) is not None
    # Each row keeps its time to accuracy, whether it reached the target, and its curve.
    rows = _query(
        sqlite_url,
        "SELECT trial_number, time_to_accuracy_s, target_reached, metric_curve_json"
        " FROM autotune_verifications ORDER BY id",
    )
    assert [number for number, *_ in rows] == order
    for _, seconds, reached, curve_json in rows:
        curve = json.loads(curve_json)
        assert reached in (0, 1) and (seconds is not None) == bool(reached)
        assert curve and all(len(point) == 3 for point in curve)
        if reached:  # the time is the wall clock of the evaluation that met the target
            assert curve[-1][0] == pytest.approx(seconds) and curve[-1][2] >= TARGET
    # The verdict: the aggregate times, and "times sooner" paired by round.
    assert summary.baseline.time_to_accuracy_s is not None
    for verdict in summary.candidates:
        assert verdict.time_to_accuracy_s is not None and verdict.speedup is not None
        assert verdict.time_to_accuracy_spread_s is not None
        assert verdict.targets_missed == 0
    rec = summary.recommended
    assert rec is not None and rec.speedup is not None and rec.speedup > 1.0
    headline = summary.headline()
    assert headline.startswith("SIMULATED (mock device): reaches 95.0 % in ")
    assert "sooner than PyTorch's defaults (" in headline
    assert summary.stages_text() in headline


def test_a_time_to_accuracy_study_stores_its_objective_target_and_trial_times(
    sqlite_url: str,
) -> None:
    config = _config(sqlite_url, "verify.rounds=0")

    run_study(config, N_TRIALS, run_trial_fn=simulate_trial)

    assert _query(sqlite_url, "SELECT objective, target FROM autotune_studies") == [
        ("time_to_accuracy", TARGET)
    ]
    rows = _query(
        sqlite_url,
        "SELECT time_to_accuracy_s, target_reached, eval_s, metric_curve_json, config_json"
        " FROM autotune_trial_results WHERE failure IS NULL",
    )
    assert rows and any(reached for _, reached, *_ in rows)
    for seconds, reached, eval_s, curve_json, config_json in rows:
        assert (seconds is not None) == bool(reached) and eval_s is not None
        assert json.loads(curve_json)
        stored = json.loads(config_json)  # what a verification re-runs
        assert stored["objective"] == "time_to_accuracy"
        assert stored["train"]["target_accuracy"] == TARGET
        # As the trial ran: the baseline's evaluation cadence in it, the search's stops not.
        assert stored["train"]["eval_every_s"] is not None
        assert stored["reuse"] is None and stored["min_throughput_sps"] is None


def _scripted(candidate_s: float | None, baseline_s: float = 30.0):
    """A run_trial where the defaults reach the target in ``baseline_s`` (plus 0.1 s per
    seed) and every other configuration in ``candidate_s`` (None: it misses the target in the
    second round)."""
    baseline_knobs: dict[str, object] = {}
    rounds: list[int] = []

    def run(config: TrialConfig) -> Measurement:
        knobs = config.knobs()
        if not baseline_knobs:
            baseline_knobs.update(knobs)  # the warm-up run is the baseline's
        if config.seed not in rounds:
            rounds.append(config.seed)
        if knobs == baseline_knobs:
            seconds: float | None = baseline_s + 0.1 * (config.seed % 3)
        elif candidate_s is None and rounds.index(config.seed) == 1:
            seconds = None
        else:
            seconds = (candidate_s or 0.0) + 0.05 * (config.seed % 2)
        return make_measurement(
            val_metric=0.951 if seconds is not None else 0.93,
            train_s=seconds if seconds is not None else 60.0,
            time_to_accuracy_s=seconds,
            target_reached=seconds is not None,
            eval_s=0.5,
            metric_curve=((1.0, 10, 0.5), (seconds or 60.0, 100, 0.951 if seconds else 0.93)),
        )

    return run


def _study(sqlite_url: str) -> RunConfig:
    config = _config(sqlite_url, "verify.rounds=0")
    run_study(config, N_TRIALS, run_trial_fn=simulate_trial)
    return config


def test_verify_recommends_what_reaches_the_target_three_times_sooner(sqlite_url: str) -> None:
    config = _study(sqlite_url)

    summary = verify_study(
        config.study,
        config.storage,
        settings=VerifySettings(rounds=3, candidates=2),
        run_trial_fn=_scripted(candidate_s=10.0),
    )

    assert all(c.qualifies for c in summary.candidates)
    rec = summary.recommended
    assert rec is not None and rec.speedup == pytest.approx(3.0, rel=0.02)
    assert rec.time_to_accuracy_s == pytest.approx(10.0, abs=0.06)
    assert summary.baseline.time_to_accuracy_s == pytest.approx(30.0, abs=0.25)
    assert "x sooner than PyTorch's defaults" in summary.headline()
    # Every output reads the same verdict back from the store.
    study = optuna.load_study(study_name=config.study, storage=config.storage)
    with ResultsStore.open(config.storage, create=False) as results:
        assert load_verification(study, results) == summary


def test_verify_does_not_recommend_what_missed_the_target_in_a_round(sqlite_url: str) -> None:
    config = _study(sqlite_url)

    summary = verify_study(
        config.study,
        config.storage,
        # One finalist, confirmed without a race: the scripted runs take the first run of
        # the verification for the baseline's, which a race's rotated order breaks.
        settings=VerifySettings(rounds=3, candidates=1),
        run_trial_fn=_scripted(candidate_s=None),
    )

    assert summary.recommended is None
    assert summary.race_seeds == ()  # a single finalist: confirmed without a race
    assert [c.verdict for c in summary.candidates] == [
        "missed the target in 1 of 3 rounds (round 2; counted at the seconds it trained)"
    ] * len(summary.candidates)
    assert [c.targets_missed for c in summary.candidates] == [1] * len(summary.candidates)
    assert summary.headline().startswith(
        "SIMULATED (mock device): verified: not sooner than PyTorch's defaults to 95.0 % (the "
        f"baseline: {summary.baseline.time_to_accuracy_s:.1f} s; verified over 3 rounds: "
    )
    missed = _query(
        sqlite_url,
        "SELECT time_to_accuracy_s, target_reached FROM autotune_verifications"
        " WHERE round_index = 1 AND is_baseline = 0",
    )
    assert missed and set(missed) == {(None, 0)}


def test_autotune_verify_prints_the_time_to_accuracy_headline(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _study(sqlite_url)

    code = main(["verify", f"study={config.study}", f"storage={config.storage}", "verify.rounds=3"])

    out = capsys.readouterr().out.splitlines()
    assert code == 0
    # Each run's line keeps its "[verify N/M]" prefix (printed without rich markup).
    assert any(line.startswith("[verify 1/") for line in out), out[:5]
    verdict = next(line for line in out if line.startswith("SIMULATED (mock device): "))
    assert (
        "reaches 95.0 % in" in verdict or "not sooner than PyTorch's defaults to 95.0 %" in verdict
    )
