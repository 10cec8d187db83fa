"""verify_study and the verification at the end of run_study (autotune/study/api/_verify.py), on
SQLite in tmp_path, with trials and verification runs played in this process (mock device)."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
import pytest

from autotune.cli import main
from autotune.core.config import (
    ReusedMetric,
    RunConfig,
    TrialConfig,
    VerifySettings,
    load_run_config,
)
from autotune.core.exceptions import ConfigError, TrialError, VerificationError
from autotune.study.api import VerificationProgress, run_study, verify_study
from autotune.study.api._verify import _RoundPolicy, _run_verification
from autotune.study.storage import (
    LANES,
    Lane,
    ResultsStore,
    VerificationPlan,
    VerificationRecord,
    VerificationRun,
)
from autotune.study.verification import (
    round_seeds,
)
from autotune.study.verification._finalists import (
    changes_model,
)
from autotune.testing import FakeRunTrial, make_measurement, make_trial_config, simulate_trial
from autotune.trial.measure import Measurement
from tests.studies import loss as loss_study
from tests.studies.loss import loss_config

#: Trials of the study each test verifies (the baseline is trial 0).
N_TRIALS = 14


def _config(sqlite_url: str, *args: str) -> RunConfig:
    # The random sampler: these tests are about verification, and their studies must hold
    # the same finalists whatever the default sampler learns to propose. With seed 5 the
    # 14-trial study has a finalist of each answer (seeds 7 and 11 too, of 3-11; since the
    # simulated GPU refuses CUDA graphs under DDP, seed 4 no longer has a same-model one).
    return load_run_config(
        [
            "space=cnn_small",
            "device=mock",
            "data=digits",
            f"storage={sqlite_url}",
            "sampler=random",
            "seed=5",
            *args,
        ]
    )


def _study(sqlite_url: str) -> RunConfig:
    """A finished mock study, not yet verified."""
    config = _config(sqlite_url, "verify.rounds=0")
    result = run_study(config, N_TRIALS, run_trial_fn=simulate_trial)
    assert result.verification is None
    return config


class Recorder:
    """A run_trial that simulates, and remembers every configuration it ran."""

    def __init__(self, fail_on_call: int | None = None, exc: BaseException | None = None) -> None:
        self.configs: list[TrialConfig] = []
        self._fail_on_call = fail_on_call
        self._exc = exc

    def __call__(self, config: TrialConfig) -> Measurement:
        self.configs.append(config)
        if self._fail_on_call is not None and len(self.configs) == self._fail_on_call:
            assert self._exc is not None
            raise self._exc
        return simulate_trial(config)


def _rows(sqlite_url: str) -> list[tuple[int, int, int, int]]:
    """(verification number, round, trial, seed) of every stored verification row."""
    path = sqlite_url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as conn:
        return conn.execute(
            "SELECT r.number, v.round_index, v.trial_number, v.seed FROM autotune_verifications v "
            "JOIN autotune_verification_runs r ON r.id = v.run_id ORDER BY v.id"
        ).fetchall()


def test_run_study_ends_with_an_interleaved_verification(sqlite_url: str) -> None:
    config = _config(sqlite_url, "verify.rounds=3", "advanced.verify.candidates=2")
    runner = Recorder()
    progress: list[VerificationProgress] = []

    result = run_study(config, N_TRIALS, run_trial_fn=runner, on_verify=progress.append)

    summary = result.verification
    assert summary is not None and summary.complete and summary.simulated
    # The race: the baseline and the finalists (up to 2 per answer) over 2 rounds; the
    # confirmation: the baseline and each answer's survivor over 3 rounds of fresh seeds.
    assert len(summary.race_seeds) == 2 and summary.rounds == 3
    params = {c.trial_number: c.params for c in summary.race}
    base = summary.baseline.trial_number
    same = [n for n in summary.finalists if not changes_model(params[n], params[base])]
    assert list(summary.finalists[: len(same)]) == same  # the same-model answer's first
    assert 1 <= len(same) <= 2 and len(summary.finalists) - len(same) <= 2
    survivors = tuple(summary.survivors[lane] for lane in LANES if lane in summary.survivors)
    assert survivors and [c.trial_number for c in summary.candidates] == list(survivors)
    assert {c.answer for c in summary.candidates} == {answer for answer, _ in summary.survivors}
    order, confirmed = (base, *summary.finalists), (base, *survivors)
    race = [*order, *order[1:], base]  # round 2 starts at position 1 (rotated)
    confirm = [n for r in range(3) for n in (*confirmed[r:], *confirmed[:r])]
    stored = _rows(sqlite_url)
    assert [trial for _, _, trial, _ in stored] == race + confirm
    seeds = round_seeds(config.seed, 1, 5)
    expected_seeds = [seeds[0]] * len(order) + [seeds[1]] * len(order)
    expected_seeds += [x for x in seeds[2:] for _ in confirmed]
    assert [seed for _, _, _, seed in stored] == expected_seeds
    total = len(race) + len(confirm)
    assert summary.runs_planned == summary.runs_done == total
    assert [c.seed for c in runner.configs[-total:]] == expected_seeds
    assert [p.done for p in progress] == list(range(1, total + 1))
    assert [p.race for p in progress] == [True] * len(race) + [False] * len(confirm)
    assert summary.headline().startswith("SIMULATED (mock device): ")
    # A throughput study: no time-to-accuracy figures anywhere.
    assert summary.objective == "throughput" and summary.target is None
    with sqlite3.connect(sqlite_url.removeprefix("sqlite:///")) as conn:
        tta = conn.execute(
            "SELECT DISTINCT time_to_accuracy_s, target_reached, metric_curve_json"
            " FROM autotune_verifications"
        ).fetchall()
        study = conn.execute("SELECT objective, target FROM autotune_studies").fetchall()
    assert tta == [(None, None, None)] and study == [("throughput", None)]


def test_every_search_trial_trains_with_the_study_seed_and_verification_with_others(
    sqlite_url: str,
) -> None:
    config = _config(sqlite_url, "seed=5", "verify.rounds=3")
    runner = Recorder()

    summary = run_study(config, N_TRIALS, run_trial_fn=runner).verification

    assert summary is not None and summary.runs_planned > 0
    # Never-launched trials make no call; verification makes a warm-up run, then its runs.
    search = runner.configs[: -(summary.runs_planned + 1)]
    assert len(search) >= 2 and {c.seed for c in search} == {5}
    verification_seeds = {c.seed for c in runner.configs[-summary.runs_planned :]}
    assert verification_seeds == set(summary.seeds) | set(summary.race_seeds)
    assert 5 not in summary.seeds


def test_an_interrupted_verification_resumes_without_redoing_runs(sqlite_url: str) -> None:
    config = _study(sqlite_url)
    settings = VerifySettings(rounds=3, candidates=2)
    interrupted = Recorder(fail_on_call=5, exc=KeyboardInterrupt())

    with pytest.raises(KeyboardInterrupt):
        verify_study(config.study, config.storage, settings=settings, run_trial_fn=interrupted)

    assert len(_rows(sqlite_url)) == 3  # call 1 was the discarded warm-up run
    with ResultsStore.open(config.storage, create=False) as results:
        latest = results.latest_verification(config.study)
        assert latest is not None and not latest.complete
    resumed = Recorder()
    summary = verify_study(config.study, config.storage, settings=settings, run_trial_fn=resumed)

    # A warm-up run, then the missing runs: the race's and the confirmation's, less 3.
    total = summary.runs_planned
    assert len(resumed.configs) == 1 + total - 3
    assert summary.complete and summary.number == 1 and summary.runs_done == total
    assert len(_rows(sqlite_url)) == total
    # The resumed runs are exactly the ones the interruption left out, in schedule order.
    rows = _rows(sqlite_url)
    assert [c.seed for c in resumed.configs[1:]] == [rows[i][3] for i in range(3, total)]
    assert summary.notes == ()  # the same settings as the stored plan's


def test_a_resumed_verification_keeps_its_plan_and_says_where_the_settings_differ(
    sqlite_url: str,
) -> None:
    config = _study(sqlite_url)
    interrupted = Recorder(fail_on_call=3, exc=KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        verify_study(
            config.study,
            config.storage,
            settings=VerifySettings(rounds=3, candidates=2),
            run_trial_fn=interrupted,
        )

    summary = verify_study(
        config.study,
        config.storage,
        settings=VerifySettings(rounds=4, candidates=1, accuracy_tolerance_pt=1.0),
        run_trial_fn=Recorder(),
    )

    assert summary.rounds == 3 and len(summary.finalists) == 3  # the stored plan's
    (note,) = summary.notes
    assert note.startswith("resumed with its stored plan; these settings differ from it")
    assert "verify.rounds=4 (stored 3)" in note
    assert "verify.accuracy_tolerance_pt=1 (stored 0.5)" in note
    assert "advanced.verify.candidates=1 (stored plan: 2 finalists in an answer)" in note


def test_run_reuses_a_finished_verification_and_verify_repeats_it_with_new_seeds(
    sqlite_url: str,
) -> None:
    config = _config(sqlite_url, "verify.rounds=3", "advanced.verify.candidates=2")
    first = run_study(config, N_TRIALS, run_trial_fn=simulate_trial).verification
    again = Recorder()

    rerun = run_study(config, N_TRIALS, run_trial_fn=again).verification

    assert again.configs == []  # nothing to top up, nothing to re-verify
    assert first is not None and rerun is not None and rerun.number == first.number == 1
    repeated = verify_study(
        config.study, config.storage, settings=config.verify_settings, run_trial_fn=simulate_trial
    )
    assert repeated.number == 2
    assert not set(repeated.seeds) & set(first.seeds)
    assert {n for n, *_ in _rows(sqlite_url)} == {1, 2}


def _scripted(speedup: float, accuracy_drop: float = 0.0, fail_trial: int | None = None):
    """A run_trial where the baseline (trial 0's knobs) runs at 1,000 samples/s and every
    other configuration at ``speedup`` times that, ``accuracy_drop`` less accurate."""
    baseline_knobs: dict[str, object] = {}

    def run(config: TrialConfig) -> Measurement:
        knobs = config.knobs()
        if not baseline_knobs:
            baseline_knobs.update(knobs)  # the first run of a round is the baseline
        if knobs == baseline_knobs:
            return make_measurement(throughput_sps=1000.0 + config.seed % 7, val_metric=0.95)
        if fail_trial is not None and knobs["batch_size"] == fail_trial:
            raise TrialError("oom", "MemoryError: scripted")
        return make_measurement(
            throughput_sps=speedup * (1000.0 + config.seed % 5), val_metric=0.95 - accuracy_drop
        )

    return run


def test_nothing_faster_is_said_plainly(sqlite_url: str) -> None:
    config = _study(sqlite_url)

    summary = verify_study(
        config.study,
        config.storage,
        settings=VerifySettings(rounds=3, candidates=2),
        run_trial_fn=_scripted(speedup=1.0),
    )

    assert summary.recommended is None and not summary.survivors
    assert summary.ending == "not_faster" and summary.candidates == ()
    racers = [v for v in summary.race if not v.is_baseline]
    assert racers and all(
        v.verdict.startswith("not faster than the baseline in the race") for v in racers
    )
    assert summary.headline().startswith(
        "SIMULATED (mock device): verified: not faster than PyTorch's defaults at the same accuracy "
        f"(no finalist of {len(summary.finalists)} survived a 2-round race"
    )


def test_a_faster_configuration_that_loses_accuracy_is_not_recommended(sqlite_url: str) -> None:
    config = _study(sqlite_url)

    summary = verify_study(
        config.study,
        config.storage,
        settings=VerifySettings(rounds=3, candidates=2),
        run_trial_fn=_scripted(speedup=3.0, accuracy_drop=0.01),
    )

    assert summary.recommended is None and not summary.survivors
    racers = [v for v in summary.race if not v.is_baseline]
    assert racers and all(v.speedup == pytest.approx(3.0, rel=0.01) for v in racers)
    assert all("pooled accuracy failed the screen" in v.verdict for v in racers)


def test_a_verified_faster_configuration_is_recommended(sqlite_url: str) -> None:
    config = _study(sqlite_url)

    summary = verify_study(
        config.study,
        config.storage,
        settings=VerifySettings(rounds=3, candidates=2),
        run_trial_fn=_scripted(speedup=2.0),
    )

    rec = summary.recommended
    assert rec is not None and rec.qualifies and rec.speedup_ci95 is not None
    assert 1.0 < rec.speedup_ci95[0] <= rec.speedup <= rec.speedup_ci95[1]
    assert rec.speedup == pytest.approx(2.0, rel=0.01)


def test_verify_checks_before_writing(sqlite_url: str, tmp_path: Path) -> None:
    config = _study(sqlite_url)

    with pytest.raises(ConfigError, match=r"verify\.rounds=0"):
        verify_study(config.study, config.storage, settings=VerifySettings(rounds=0))
    missing = f"sqlite:///{tmp_path / 'none.db'}"
    with pytest.raises(Exception, match="no database file"):
        verify_study(config.study, missing)
    assert not (tmp_path / "none.db").exists()
    assert _rows(sqlite_url) == []


def test_a_study_whose_baseline_failed_cannot_be_verified(sqlite_url: str) -> None:
    config = _config(sqlite_url, "verify.rounds=0")
    oom = TrialError("oom", "MemoryError: scripted")
    run_study(config, 3, run_trial_fn=FakeRunTrial([oom, oom]))  # the warm-up, then the trial

    with pytest.raises(VerificationError, match="baseline trial 0 produced no measurement"):
        verify_study(config.study, config.storage, run_trial_fn=simulate_trial)
    with ResultsStore.open(config.storage, create=False) as results:
        assert results.latest_verification(config.study) is None


def test_cli_verify_prints_the_verdict_last_and_refuses_bad_input(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _study(sqlite_url)
    storage = f"storage={config.storage}"

    code = main(
        [
            "verify",
            f"study={config.study}",
            storage,
            "verify.rounds=3",
            "advanced.verify.candidates=1",
        ]
    )

    out = capsys.readouterr().out.strip().splitlines()
    assert code == 0
    assert out[-1].startswith(f"report:    autotune report study={config.study} {storage}")
    # The verdict block: its first line says the ending, the speed line how it was measured.
    at = next(i for i, line in enumerate(out) if line.startswith("SIMULATED (mock device): "))
    block = "\n".join(out[at:])
    assert (
        out[at].startswith("SIMULATED (mock device): verified: ")
        and "verified over 3 rounds" in block
    ) or "verified: not faster" in out[at]
    assert main(["verify", "study=nosuch", storage]) == 2
    assert main(["verify", f"study={config.study}", storage, "verify.rounds=1"]) == 2
    err = capsys.readouterr().err
    assert "no such study" in err and "must be 0 (off) or >= 3" in err
    assert json.loads(json.dumps(optuna.get_all_study_names(config.storage))) == [config.study]


def test_verify_study_follows_a_minimized_metric(tmp_path: Path) -> None:
    config = loss_config(tmp_path, "verify.rounds=0")
    run_study(config, loss_study.N_TRIALS, run_trial_fn=loss_study.scripted_loss)
    study = optuna.load_study(study_name=config.study, storage=config.storage)
    search_loss = {t.number: t.values[1] for t in study.trials if t.values is not None}

    summary = verify_study(
        config.study,
        config.storage,
        settings=VerifySettings(rounds=3, candidates=4),
        run_trial_fn=loss_study.scripted_loss,
    )

    assert summary.metric.name == "val_loss" and summary.metric.direction == "minimize"
    finalists = set(summary.finalists)
    # The screen for a metric that is not a proportion: 3 x the 0.5 % tolerance above the
    # baseline's search loss.
    base_loss = search_loss[summary.baseline.trial_number]
    assert finalists and all(search_loss[n] <= base_loss * 1.015 for n in finalists)
    # The batch-128 trial of the baseline's model (2x the baseline's samples/s at a val_loss
    # 0.8 % above the baseline's) passes the screen (3 x 0.5 %) and is the same-model answer's
    # only finalist, so its survivor; the model-change answer's race sends its fastest
    # finalist within the 0.5 % tolerance, not the faster n_embd-16 batch-128 one outside it.
    racers = {v.trial_number: v for v in summary.race if not v.is_baseline}
    fast = [n for n in racers if study.trials[n].params["batch_size"] == 128]
    assert fast
    same = summary.survivors[("same_model", "trained")]
    assert same in fast and racers[same].verdict == "survivor (same model): the fastest in the race"
    changed = summary.survivors[("model_change", "trained")]
    assert changed not in fast
    for number in set(fast) - {same}:
        assert racers[number].answer == "model_change"
        assert racers[number].verdict.startswith(
            "passed the screen; not the survivor: its accuracy is outside the 0.5 % of the "
            "baseline's val_loss tolerance"
        )
    assert racers[changed].verdict == (
        "survivor (model change): the fastest in the race within the 0.5 % of the baseline's "
        "val_loss tolerance"
    )
    # Confirmed: the same-model survivor is faster but its loss is not shown non-inferior (a
    # trade-off); the model change is, and it is the headline.
    by_answer = {c.answer: c for c in summary.candidates}
    assert by_answer["same_model"].trade_off and not by_answer["same_model"].qualifies
    assert summary.recommended is by_answer["model_change"]
    assert summary.ending == "recommended"
    assert summary.trade_offs == (by_answer["same_model"],)
    assert (
        " at the same val_loss (non-inferior within 0.5 % of the baseline's val_loss): 0.999 vs "
        "1.000 (difference "
    ) in summary.headline()
    assert "; trade-off, not recommended: a system change (batch_size 64->128): 2.00x" in (
        summary.headline()
    )


def test_verification_never_reuses_an_unchecked_metric(sqlite_url: str) -> None:
    # One math key: the baseline trains in full, every later search trial reuses its metric;
    # without the paired check (check_steps=0) nothing inherits the baseline's accuracy with
    # evidence, so the verification runs the same configurations in full
    # (tests/study/api/test_evidence.py: with the check, they are timed).
    config = _config(
        sqlite_url,
        "advanced.measure.check_steps=0",
        "model.depth=2",
        "model.width=16",
        "batch_size=64",
        "precision=fp32",
        "memory_format=[contiguous,channels_last]",
        "compile_mode=none",
        "num_workers=[0,1,2]",
        "gpu_count=1",
        "verify.rounds=3",
    )
    runner = Recorder()

    summary = run_study(config, 8, run_trial_fn=runner).verification

    assert summary is not None and summary.runs_planned > 0
    search = runner.configs[: -(summary.runs_planned + 1)]
    warmup, *verification = runner.configs[-(summary.runs_planned + 1) :]
    assert sum(c.reuse is not None for c in search) >= 6
    assert all(c.reuse is None for c in verification)
    assert warmup.reuse is not None  # the discarded warm-up run is timed only: seconds


#: The reused metric of the timed runs below (the baseline's, from trial 0).
TIMED_REUSE = ReusedMetric(from_trial=0, val_metric=0.9, train_loss=0.1, steps=10)


def _two_lanes() -> dict[int, TrialConfig]:
    """The baseline (trial 0), a trained batch change (trial 1) and a timed channels_last
    (trial 2, its accuracy inherited)."""
    return {
        0: make_trial_config(),
        1: make_trial_config(batch_size=128),
        2: make_trial_config(memory_format="channels_last", reuse=TIMED_REUSE),
    }


class _DiscardingStore:
    """A results store for ``_run_verification`` that keeps nothing and hands back ``run``."""

    def __init__(self, run: VerificationRun) -> None:
        self._run = run

    def record_verification(self, study_name: str, number: int, record: object) -> None:
        pass

    def complete_verification(self, study_name: str, number: int) -> VerificationRun:
        return self._run


def _verify_in_memory(
    plan: VerificationPlan,
    configs: dict[int, TrialConfig],
    run_fn: Callable[[TrialConfig], Measurement],
    survivors: dict[Lane, int],
    stops_of: Callable[..., dict[int, tuple[int, str]]] | None = None,
) -> None:
    """``_run_verification`` of a new run of ``plan`` into a store that keeps nothing: the
    race's survivors are ``survivors``, the timed baseline reuses :data:`TIMED_REUSE`."""
    run = VerificationRun("s", 1, plan, (), dt.datetime(2026, 11, 29), None)
    policy = _RoundPolicy(
        survivors_of=lambda rows: survivors,
        stops_of=stops_of,
        timed_baseline=configs[0].model_copy(update={"reuse": TIMED_REUSE}),
    )
    store: Any = _DiscardingStore(run)  # keeps nothing: a stand-in for the ResultsStore
    _run_verification(run, store, configs, run_fn, None, policy)


def test_the_baseline_is_timed_in_a_confirmation_of_timed_survivors_alone() -> None:
    """A race whose trained survivor is not confirmed (futile) leaves a timed one alone: the
    baseline's confirmation runs are then timed too (no trained metric is compared), where
    its race runs trained beside the trained finalist."""
    plan = VerificationPlan(0, (1, 2), (30, 31, 32), 0.5, race_seeds=(20, 21), inherited=(2,))
    configs = _two_lanes()
    calls: list[tuple[int, bool]] = []  # every baseline run: (seed, timed)

    def run_fn(config: TrialConfig) -> Measurement:
        if config.batch_size == 64 and config.memory_format == "contiguous":
            calls.append((config.seed, config.reuse is not None))
        return make_measurement()

    # The trained survivor was futile: only the timed one goes on.
    _verify_in_memory(plan, configs, run_fn, {("same_model", "inherited"): 2})

    warmup, *runs = calls  # the discarded warm-up run is timed
    assert warmup == (20, True)
    assert runs == [(20, False), (21, False), (30, True), (31, True), (32, True)]


def test_a_verification_run_keeps_the_limit_its_trial_stored(sqlite_url: str) -> None:
    """``trial.timeout_s`` travels in each stored configuration: a later ``verify_study``
    runs every configuration under the study's limit, not a default; a caller's
    ``timeout_s`` replaces it."""
    config = _config(sqlite_url, "verify.rounds=0", "trial.timeout_s=42")
    run_study(config, 6, run_trial_fn=simulate_trial)
    stored = Recorder()

    verify_study(config.study, sqlite_url, settings=VerifySettings(rounds=3), run_trial_fn=stored)

    assert stored.configs and {c.timeout_s for c in stored.configs} == {42.0}
    given = Recorder()
    verify_study(
        config.study,
        sqlite_url,
        settings=VerifySettings(rounds=3),
        run_trial_fn=given,
        timeout_s=7.0,
    )
    assert given.configs and {c.timeout_s for c in given.configs} == {7.0}


def test_a_survivor_stopped_for_futility_runs_no_more_rounds_and_the_baseline_turns_timed() -> None:
    """The confirmation asks ``stops_of`` before each round: once the trained survivor is
    stopped (here after its first confirmation round), its remaining rounds are not run, and
    with only the timed survivor going the baseline's runs are timed."""
    plan = VerificationPlan(0, (1, 2), (30, 31, 32, 33), 0.5, race_seeds=(20, 21), inherited=(2,))
    configs = _two_lanes()
    calls: list[tuple[int, str]] = []  # (seed, which)

    def run_fn(config: TrialConfig) -> Measurement:
        which = (
            "trained 1"
            if config.batch_size == 128
            else "timed 2"
            if config.memory_format == "channels_last"
            else ("timed base" if config.reuse is not None else "trained base")
        )
        calls.append((config.seed, which))
        return make_measurement()

    survivors = {("same_model", "trained"): 1, ("same_model", "inherited"): 2}

    def stops_of(rows: list[VerificationRecord], kept: object) -> dict[int, tuple[int, str]]:
        confirmed_1 = [r for r in rows if r.trial_number == 1 and r.round_index >= 2]
        return {1: (1, "futile")} if confirmed_1 else {}

    _verify_in_memory(plan, configs, run_fn, survivors, stops_of)

    confirmation = [c for c in calls[1:] if c[0] >= 30]  # after the warm-up and the race
    assert [c for c in confirmation if c[0] == 30] == [
        (30, "trained base"),
        (30, "trained 1"),
        (30, "timed 2"),
    ]
    later = sorted(c for c in confirmation if c[0] > 30)
    assert later == sorted(
        [(s, "timed base") for s in (31, 32, 33)] + [(s, "timed 2") for s in (31, 32, 33)]
    )


def test_a_run_of_a_trial_timed_again_while_busy_is_priced_without_its_re_runs() -> None:
    """``run_s`` counts a busy trial's re-runs; one verification run of it is one run (the
    main job on a Xeon priced a timed trial timed twice at 0.93 full runs a run)."""
    from optuna.distributions import CategoricalDistribution
    from optuna.trial import create_trial

    from autotune.study.api._verify import _run_costs
    from autotune.study.baseline import BASELINE_ATTR

    def trial(number: int, **attrs: object) -> optuna.trial.FrozenTrial:
        made = create_trial(
            values=[1000.0, 0.9, 2**20],
            params={"num_workers": number},
            distributions={"num_workers": CategoricalDistribution([0, 1, 2])},
            user_attrs=attrs,
        )
        made.number = number
        return made

    trials = [
        trial(0, **{BASELINE_ATTR: True, "full_run_s": 10.0, "run_s": 20.0}),
        trial(1, run_s=6.0, busy_remeasures=1, busy_remeasure_s=3.0),
        trial(2, run_s=4.0),
    ]

    assert _run_costs(trials, 0) == {0: 1.0, 1: pytest.approx(0.3), 2: pytest.approx(0.4)}


def test_a_cold_compiled_trial_is_priced_at_the_studys_warm_compiles() -> None:
    """A verification run compiles into the study's cache, warm where the search compiled the
    same graphs: a trial that compiled cold in the search (12 s) is priced at the median warm
    compile (3 s), not at its cold run (the long run's fp32 + compile finalist was left out of a
    capped verification at 0.045 full runs a run, 0.019 warm)."""
    from optuna.distributions import CategoricalDistribution
    from optuna.trial import create_trial

    from autotune.study.api._verify import _run_costs
    from autotune.study.baseline import BASELINE_ATTR

    def trial(number: int, **attrs: object) -> optuna.trial.FrozenTrial:
        made = create_trial(
            values=[1000.0, 0.9, 2**20],
            params={"num_workers": number},
            distributions={"num_workers": CategoricalDistribution([0, 1, 2, 3, 4])},
            user_attrs=attrs,
        )
        made.number = number
        return made

    trials = [
        trial(0, **{BASELINE_ATTR: True, "full_run_s": 100.0, "run_s": 100.0}),
        trial(1, run_s=15.0, compile_s=12.0, compile_cache="cold"),
        trial(2, run_s=6.0, compile_s=3.0, compile_cache="warm"),
        trial(3, run_s=5.0, compile_s=2.0, compile_cache="warm"),
        trial(4, run_s=7.0, compile_s=4.0, compile_cache="warm"),
    ]

    costs = _run_costs(trials, 0)

    assert costs[1] == pytest.approx((15.0 - (12.0 - 3.0)) / 100.0)  # cold 12 s priced at 3 s
    assert costs[2] == pytest.approx(0.06)  # warm trials as they ran
    # Without a warm compile in the study, the cold one is priced as it ran.
    assert _run_costs(trials[:2], 0)[1] == pytest.approx(0.15)
