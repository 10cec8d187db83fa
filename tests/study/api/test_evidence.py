"""Evidence follows the math, through run_study on the mock device (SIMULATED): the classes
each trial records, the paired check's fall-back to a trained run, the verification of an
inherited answer by timing and the check, the cost in full runs, and the cost cap."""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import json
from pathlib import Path

import optuna
from rich.console import Console

from autotune.cli import main
from autotune.core.config import RunConfig, TrialConfig, VerifySettings
from autotune.study.api import run_study, verify_study
from autotune.study.console import cost_text
from autotune.study.report import pareto_row, pareto_table
from autotune.study.storage import ResultsStore
from autotune.study.trial_result import TrialResult
from autotune.study.verification import ACCURACY
from autotune.testing import FakeRunTrial
from autotune.testing._run_trial import simulate_trial
from autotune.trial.measure import Measurement
from tests.studies.runs import load_study, mock_run_config

#: The baseline's math everywhere (depth 3, width 16, batch 64, fp32): every trial but the
#: baseline changes only the memory format, compile mode or DataLoader workers.
SAME_MATH = (
    "model.depth=[3]",
    "model.width=[16]",
    "batch_size=[64]",
    "precision=[fp32]",
    "gpu_count=[1]",
    "compile_mode=[none]",
)


def _results(config_storage: str, name: str = "cnn_small") -> list[TrialResult]:
    study = optuna.load_study(study_name=name, storage=config_storage)
    return [TrialResult.from_trial(t) for t in study.trials]


def test_trials_that_keep_the_math_inherit_the_accuracy_with_their_check(sqlite_url: str) -> None:
    config = mock_run_config(sqlite_url, *SAME_MATH)
    fake = FakeRunTrial()

    run_study(config, 5, run_trial_fn=fake)

    results = _results(sqlite_url)
    base = results[0]
    assert (base.evidence_class, base.accuracy_source) == ("baseline", "measured")
    assert base.check_floor_first is not None and base.check_floor_source == "float64 twin"
    assert base.full_run_s and base.run_s and base.run_s > base.full_run_s  # the twin's too
    assert fake.configs[0].twin == "float64"  # the discarded warm-up run is the twin
    for r in results[1:]:
        assert r.accuracy_source == "inherited"
        assert r.metric_from_trial == 0
        assert r.evidence_class in ("identical", "same_computation")
        assert r.evidence_detail is not None and r.evidence_detail.startswith("against trial 0")
        assert r.steps is not None and base.steps is not None and r.steps < base.steps
    # ... and so do the results rows (trials --csv writes them).
    with ResultsStore.open(sqlite_url) as store:
        rows = {row.trial_number: row for row in store.trials("cnn_small")}
    assert rows[1].accuracy_source == "inherited"
    assert rows[1].evidence_class == results[1].evidence_class
    assert rows[0].run_s == base.run_s


def _diverging_channels_last(config: TrialConfig) -> Measurement:
    """The mock, with a channels_last whose losses leave the floor (an op that mishandles
    the layout)."""
    m = simulate_trial(config)
    if config.memory_format != "channels_last" or "check_losses" not in m.extra:
        return m
    losses = [v * 1.05 for v in m.extra["check_losses"]]
    return dataclasses.replace(m, extra={**m.extra, "check_losses": losses})


def test_a_trial_whose_check_diverged_trains_the_budget(sqlite_url: str) -> None:
    config = mock_run_config(
        sqlite_url, *SAME_MATH, "memory_format=[contiguous,channels_last]", "num_workers=[0]"
    )
    fake = FakeRunTrial(then=_diverging_channels_last)

    run_study(config, 4, run_trial_fn=fake)

    study = load_study(config)
    trial = next(
        TrialResult.from_trial(t)
        for t in study.trials
        if t.params["memory_format"] == "channels_last"
    )
    assert trial.evidence_class == "numerics"
    assert trial.accuracy_source == "measured"
    assert trial.metric_from_trial is None
    assert trial.evidence_detail is not None
    assert trial.evidence_detail.startswith("fell from the same computation")
    # Its runs: the timed one (reuse set), then the trained one (reuse off).
    runs = [c for c in fake.configs if c.memory_format == "channels_last"]
    assert [c.reuse is not None for c in runs][:2] == [True, False]


def _precision_and_layout(sqlite_url: str, batch_sizes: str) -> RunConfig:
    """The baseline's model searched over fp32/bf16 and both memory formats, eager, one
    worker count, at ``batch_sizes`` (``batch_size=[...]``)."""
    return mock_run_config(
        sqlite_url,
        "model.depth=[3]",
        "model.width=[16]",
        batch_sizes,
        "precision=[fp32,bf16]",
        "gpu_count=[1]",
        "compile_mode=[none]",
        "memory_format=[contiguous,channels_last]",
        "num_workers=[0]",
    )


def test_a_bf16_variant_inherits_from_its_bf16_source_within_bf16s_own_floor(
    sqlite_url: str,
) -> None:
    # The mock parts a channels_last bf16 run from a contiguous one by bf16's own rounding
    # (2e-4 at the first step, SIMULATED), beyond fp32's bound (100x the twin's 8e-8): each
    # bf16 variant is judged against twice its bf16 source's distance from the twin.
    config = _precision_and_layout(sqlite_url, "batch_size=[64]")

    run_study(config, 6, run_trial_fn=FakeRunTrial())

    results = _results(sqlite_url)
    bf16 = [r for r in results if r.params["precision"] == "bf16"]
    sources = {r.number for r in bf16 if r.accuracy_source == "measured"}
    variants = [r for r in bf16 if r.accuracy_source == "inherited" and r.params != bf16[0].params]
    assert len(sources) == 1 and variants  # one bf16 run trained; its other layout did not
    for r in variants:
        assert r.evidence_class == "numerics" and r.metric_from_trial in sources
        assert r.check_first_divergence is not None and r.check_first_divergence > 1e-4
        assert r.evidence_detail is not None
        assert f"2x the distance of trial {r.metric_from_trial} (bf16) from the float64 twin" in (
            r.evidence_detail
        )


def test_a_bf16_variant_at_another_batch_is_judged_by_bf16s_floor_at_the_baselines(
    sqlite_url: str,
) -> None:
    # A bf16 trial at batch 128 (a dynamics change) is its variants' source, but the twin does
    # not take its steps: bf16's distance from exact is the one measured on the baseline's
    # batch, by a bf16 trial there.
    config = _precision_and_layout(sqlite_url, "batch_size=[64,128]")

    run_study(config, 10, run_trial_fn=FakeRunTrial())

    results = _results(sqlite_url)
    wide = [
        r
        for r in results
        if r.params["precision"] == "bf16"
        and r.params["batch_size"] == 128
        and r.accuracy_source == "inherited"
    ]
    assert wide, [(r.number, r.params, r.evidence_detail) for r in results]
    for r in wide:
        assert r.evidence_class == "dynamics"
        assert r.evidence_detail is not None
        assert "(bf16, at the baseline's global batch) from the float64 twin" in r.evidence_detail
    assert not any(
        (r.evidence_detail or "").startswith("fell from the same computation") for r in results
    )


def test_an_inherited_answer_is_verified_by_timing_and_the_check(sqlite_url: str) -> None:
    config = mock_run_config(sqlite_url, *SAME_MATH).model_copy(
        update={"verify": mock_run_config(sqlite_url, "verify.rounds=3").verify}
    )
    fake = FakeRunTrial()

    result = run_study(config, 8, run_trial_fn=fake)

    summary = result.verification
    assert summary is not None
    rec = summary.recommended
    assert rec is not None and rec.inherits_accuracy
    assert summary.rounds == 10  # advanced.verify.timing_rounds: every finalist is timed
    block = "\n".join(summary.verdict_block())
    assert "accuracy  inherited, not re-trained: " in block
    assert "held in each of 10 rounds" in block or "bit for bit" in block
    # No run of the verification trained the budget: all were timed, with their check.
    verify_runs = [c for c in fake.configs[-(summary.runs + 1) :]]
    assert all(c.reuse is not None for c in verify_runs)
    with ResultsStore.open(sqlite_url) as store:
        run = store.latest_verification("cnn_small")
    assert run is not None and run.plan.timing_only
    assert all(r.val_metric is None and r.check_losses for r in run.rows)
    assert json.loads(run.plan.check_floor_json or "{}")["margin"] == 100.0
    text = cost_text(result)
    assert text is not None and text.startswith("cost: ")
    assert "search " in text and "verification " in text and "(simulated seconds)" in text


def test_the_cost_cap_keeps_the_math_then_stops_the_search(sqlite_url: str) -> None:
    config = mock_run_config(
        sqlite_url,
        "compile_mode=[none]",
        # Two trials stop too slow after two windows each; the baseline and a trained one.
        "budget.full_runs=6",
        "advanced.budget.search_share=1.0",
        "advanced.budget.trained_evidence_full_runs=2",  # trained evidence under this cap
    )
    notes: list[str] = []

    result = run_study(
        config,
        40,
        run_trial_fn=FakeRunTrial(),
        on_trial=lambda p: notes.append(p.note) if p.note else None,
    )

    assert result.finished < 40
    # Past half its share (3 of 6) it keeps the model; it stops at its share, or before it
    # where no configuration left fits what remains.
    assert result.search_cost is not None and (result.search_cost.full_runs or 0) >= 3
    assert any("the search has spent" in n for n in notes)
    assert any("every trial keeps the baseline's model" in n for n in notes)
    assert any(f"the search stops at {result.finished} of 40 trials" in n for n in notes)
    study = load_study(config)
    queued = [t for t in study.trials if t.user_attrs.get("same_model_batch")]
    # Each trial stored the configuration it ran, without the search's floor or reuse.
    floored = [t for t in study.trials if t.user_attrs.get("min_throughput_sps")]
    assert floored and all(
        t.user_attrs["trial_config"]["min_throughput_sps"] is None for t in floored
    )
    assert all(t.user_attrs["trial_config"]["reuse"] is None for t in study.trials)
    base = study.trials[0].params
    assert queued and all(
        t.params["depth"] == base["depth"] and t.params["batch_size"] == base["batch_size"]
        for t in queued
    )


def test_the_inherited_accuracy_is_marked_in_the_csv_the_tables_and_best(
    sqlite_url: str, tmp_path: Path
) -> None:
    config = mock_run_config(sqlite_url, *SAME_MATH, "verify.rounds=3")
    run_study(config, 6, run_trial_fn=FakeRunTrial())
    study, storage = "study=cnn_small", f"storage={sqlite_url}"

    path = tmp_path / "trials.csv"
    assert main(["trials", study, storage, "--csv", str(path)]) == 0
    with path.open() as f:
        rows = {int(r["trial_number"]): r for r in csv.DictReader(f)}
    assert rows[0]["evidence_class"] == "baseline" and rows[0]["accuracy_source"] == "measured"
    inherited = [r for n, r in rows.items() if n and r["accuracy_source"] == "inherited"]
    assert inherited and all(r["metric_from_trial"] == "0" for r in inherited)

    result = optuna.load_study(study_name="cnn_small", storage=sqlite_url)
    table_rows = [pareto_row(t) for t in result.trials if t.number in rows]
    table = pareto_table(table_rows, "trials", ACCURACY, speedup=False)
    console = Console(width=400, record=True)
    console.print(table)
    text = console.export_text()
    assert "(inherited from trial 0, checked)" in text

    best = io.StringIO()
    with contextlib.redirect_stdout(best):
        assert main(["best", study, storage]) == 0
    shown = best.getvalue()  # rich wraps the cell: "96.3% (inherited / from trial 0, / checked)"
    assert "(inherited" in shown and "checked)" in shown


def test_under_a_cap_of_one_full_run_no_run_trains_the_budget(sqlite_url: str) -> None:
    """Short evidence (budget.full_runs below advanced.budget.trained_evidence_full_runs):
    the baseline and every trained trial stop after 5 % of the budget's steps and are
    evaluated there; one full run is projected from the baseline's run; the verdict says
    where its non-inferiority holds."""
    config = mock_run_config(
        sqlite_url, "compile_mode=[none]", "budget.full_runs=1", "verify.rounds=3"
    )
    fake = FakeRunTrial()

    result = run_study(config, 6, run_trial_fn=fake)

    trained = [c for c in fake.configs if c.reuse is None and c.twin == "none"]
    assert trained and all(c.train.evidence_share == 0.05 for c in trained)
    results = _results(sqlite_url)
    base = results[0]
    assert base.budget_steps is not None and base.steps is not None
    assert base.steps == -(-base.budget_steps * 5 // 100)  # ceil(5 % of the budget)
    assert base.full_run_projected is True
    assert base.evidence_detail is not None and "after" in base.evidence_detail
    assert base.evidence_steps_text == (
        f"after {base.steps:,} of the budget's {base.budget_steps:,} steps"
    )
    # The full run is projected: the run's own seconds (its steps, and on the mock device no
    # process start) plus the steps it did not take at its median step time.
    assert base.full_run_s is not None and base.step_time_s is not None
    assert base.full_run_s > (base.budget_steps - base.steps) * base.step_time_s
    for r in results[1:]:
        if r.accuracy_source == "measured":
            assert r.budget_steps is not None and r.steps is not None
            assert r.steps < r.budget_steps
        elif r.accuracy_source == "inherited":
            assert r.budget_steps is None  # timed, not evaluated
    assert result.search_cost is not None and result.search_cost.projected
    text = cost_text(result)
    assert text is not None and "projected from the baseline's short run" in text
    summary = result.verification
    assert summary is not None and summary.short_evidence == base.evidence_steps_text
    assert summary.tolerance_text().endswith(base.evidence_steps_text)


def test_a_door_and_a_generous_cap_keep_trained_evidence(sqlite_url: str) -> None:
    config = mock_run_config(sqlite_url, "budget.full_runs=7")
    assert config.space.train_settings().evidence_share is None
    config = mock_run_config(sqlite_url, "budget.full_runs=6.9")
    assert config.space.train_settings().evidence_share == 0.05


def test_under_short_evidence_a_lone_trained_finalist_races_as_its_futility_pilot(
    sqlite_url: str,
) -> None:
    """One trained finalist (bf16) and one timed (channels_last, accuracy inherited), a lane
    each: without short evidence they would be confirmed directly. Under short evidence the
    race runs as the trained one's pilot; its metric swings by +/-8 pt with the seed (the
    seeds' luck at a few % of the budget), so its confirmation is futile and not run, and the
    timed survivor is confirmed against a timed baseline."""

    def seeds_luck(config: TrialConfig) -> Measurement:
        m = simulate_trial(config)
        if config.reuse is not None or m.val_metric is None:
            return m  # timed: no metric of its own
        if config.seed < 1000:  # the search: every trained trial at the same accuracy
            return dataclasses.replace(m, val_metric=0.687)
        luck = 0.08 if (config.seed + (config.precision == "bf16")) % 2 else -0.08
        return dataclasses.replace(m, val_metric=0.687 + luck)

    config = mock_run_config(
        sqlite_url,
        *(knob for knob in SAME_MATH if not knob.startswith("precision")),
        "precision=[fp32,bf16]",
        "num_workers=[0]",
        "budget.full_runs=3",
    )
    run_study(config, 3, run_trial_fn=seeds_luck)
    sources = {r.number: r.accuracy_source for r in _results(sqlite_url)}
    verifier = FakeRunTrial(then=seeds_luck)

    summary = verify_study(
        config.study, sqlite_url, settings=VerifySettings(rounds=8), run_trial_fn=verifier
    )

    assert sorted(sources[n] for n in summary.finalists) == ["inherited", "measured"]
    trained = next(n for n in summary.finalists if sources[n] == "measured")
    timed = next(n for n in summary.finalists if sources[n] == "inherited")
    assert len(summary.race_seeds) == 2  # the pilot
    race = {v.trial_number: v for v in summary.race}
    assert race[trained].futile and "it would take at least" in race[trained].verdict
    assert [c.trial_number for c in summary.candidates] == [timed]
    # The confirmation (after the warm-up and the race's 2 x 3 runs) runs the trained
    # finalist never, and the baseline timed.
    confirmation = verifier.configs[1 + 2 * 3 :]
    assert len(confirmation) == 2 * 8
    assert all(c.reuse is not None for c in confirmation)
