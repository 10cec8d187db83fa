"""A busy machine, noticed (issue 22): trials and verification runs during whose timed windows
other processes used more than ``advanced.measure.max_other_cpu_share`` of the CPUs are flagged in the
study's records and outputs; verification measures a busy run again, a bounded number of
times, and its verdict says when busy runs remain. Fake measurements on the mock device, in
this process (the share of a real busy loop is too flaky for a test)."""

from __future__ import annotations

import dataclasses
import io
import sqlite3
from collections.abc import Collection

import pytest
from rich.console import Console

from autotune.core.config import RunConfig, TrialConfig, VerifySettings, load_run_config
from autotune.core.exceptions import TrialError
from autotune.study.api import StudyProgress, VerificationProgress, run_study, verify_study
from autotune.study.console import ProgressDisplay, print_verdict, verification_line
from autotune.study.storage import ResultsStore
from autotune.testing import simulate_trial
from autotune.trial.measure import Measurement

#: The share a busy run reports (a busy loop on one of two cores).
BUSY_SHARE = 0.48


class BusyOn:
    """A run_trial that simulates, reporting a busy machine on the calls numbered ``busy``
    (1-based) and a quiet one (3 %) on the others."""

    def __init__(self, busy: Collection[int] = (), interrupt_on: int | None = None) -> None:
        self.calls = 0
        self._busy = set(busy)
        self._interrupt_on = interrupt_on

    def __call__(self, config: TrialConfig) -> Measurement:
        self.calls += 1
        if self.calls == self._interrupt_on:
            raise KeyboardInterrupt
        share = BUSY_SHARE if self.calls in self._busy else 0.03
        measured = simulate_trial(config)
        return dataclasses.replace(measured, other_cpu_share=share, load_avg_1m=1.5)


def _config(sqlite_url: str, *args: str) -> RunConfig:
    # As tests/study/api/test_verify.py: the 14-trial random study with seed 4 has two finalists.
    return load_run_config(
        [
            "space=cnn_small",
            "device=mock",
            f"storage={sqlite_url}",
            "sampler=random",
            "seed=4",
            "verify.rounds=0",
            *args,
        ]
    )


def _attempts(sqlite_url: str) -> list[tuple[int, int, int, bool | None]]:
    """(round, trial, attempt, busy_machine) of every verification row, in run order."""
    with sqlite3.connect(sqlite_url.removeprefix("sqlite:///")) as conn:
        rows = conn.execute(
            "SELECT round_index, trial_number, attempt, busy_machine FROM autotune_verifications "
            "ORDER BY id"
        ).fetchall()
    return [(r, t, a, None if b is None else bool(b)) for r, t, a, b in rows]


def test_a_busy_trial_is_flagged_in_its_attributes_results_row_and_line(sqlite_url: str) -> None:
    config = _config(sqlite_url, "advanced.trial.busy_retimes=0")
    lines: list[StudyProgress] = []
    # Call 1 is the baseline's discarded warm-up run; trial 1 (call 3) runs on a busy machine.
    run_study(config, 3, run_trial_fn=BusyOn(busy={3}), on_trial=lines.append)

    attrs = [p.last.user_attrs for p in lines]
    assert [a["busy_machine"] for a in attrs] == [False, True, False]
    assert attrs[1]["other_cpu_share"] == BUSY_SHARE and attrs[1]["load_avg_1m"] == 1.5
    with ResultsStore.open(config.storage, create=False) as results:
        rows = results.trials(config.study)
    assert [(r.busy_machine, r.other_cpu_share) for r in rows] == [
        (False, 0.03),
        (True, BUSY_SHARE),
        (False, 0.03),
    ]
    console = Console(width=300, record=True, file=io.StringIO())
    with ProgressDisplay(console, 3, 0) as display:  # not a terminal: one line per trial
        for progress in lines:
            display.update(progress)
    printed = console.export_text().splitlines()
    flag = "WARNING: measured on a busy machine (other processes used 48 % of the CPUs)"
    assert [flag in line for line in printed] == [False, True, False]


class Recording(BusyOn):
    """A :class:`BusyOn` that keeps each call's configuration and measurement; the calls
    numbered in ``fail`` raise ``error``, those in ``shares`` report that share of other
    processes, and those in ``too_slow`` stop after their first window."""

    def __init__(
        self,
        busy: Collection[int] = (),
        fail: Collection[int] = (),
        shares: dict[int, float] | None = None,
        too_slow: Collection[int] = (),
    ) -> None:
        super().__init__(busy)
        self.configs: list[TrialConfig] = []
        self.measured: list[Measurement] = []
        self._fail, self._shares, self._too_slow = set(fail), shares or {}, set(too_slow)

    def __call__(self, config: TrialConfig) -> Measurement:
        self.configs.append(config)
        if self.calls + 1 in self._fail:
            self.calls += 1
            raise TrialError("error", "the re-run failed on purpose")
        measured = super().__call__(config)
        if self.calls in self._shares:
            measured = dataclasses.replace(measured, other_cpu_share=self._shares[self.calls])
        if self.calls in self._too_slow:
            measured = dataclasses.replace(measured, too_slow=True)
        self.measured.append(measured)
        return measured


def test_a_busy_trial_is_timed_again_reusing_its_own_metric(sqlite_url: str) -> None:
    config = _config(sqlite_url)  # advanced.trial.busy_retimes=1 by default
    lines: list[StudyProgress] = []
    runs = Recording(busy={3})  # call 1: the baseline's warm-up; call 3: trial 1, busy
    run_study(config, 3, run_trial_fn=runs, on_trial=lines.append)

    assert runs.calls == 5  # warm-up, trials 0-2, and trial 1 once more
    busy_run, again = runs.configs[2], runs.configs[3]
    assert busy_run.reuse is None
    assert again.reuse is not None and again.reuse.from_trial == 1
    assert again.model_copy(update={"reuse": None}) == busy_run  # the same configuration
    full = runs.measured[2]
    assert (again.reuse.val_metric, again.reuse.steps) == (full.val_metric, full.steps)
    attrs = [p.last.user_attrs for p in lines]
    assert [a["busy_machine"] for a in attrs] == [False, False, False]
    assert attrs[1]["busy_remeasures"] == 1
    assert attrs[1]["busy_run_shares"] == [BUSY_SHARE, 0.03]
    # The re-run's seconds (the mock's simulated ones, as run_s counts them).
    assert attrs[1]["busy_remeasure_s"] == pytest.approx(runs.measured[3].train_s)
    assert attrs[1]["busy_remeasure_s"] < full.train_s
    assert attrs[1]["other_cpu_share"] == 0.03  # the quiet run's figures
    assert attrs[1]["throughput_sps"] == runs.measured[3].throughput_sps
    # The full training's own figures stay, so a later trial can reuse this one.
    assert (
        attrs[1]["val_metric"],
        attrs[1]["steps"],
        attrs[1]["train_s"],
        attrs[1]["peak_memory_bytes"],
    ) == (full.val_metric, full.steps, full.train_s, full.peak_memory_bytes)
    assert "metric_from_trial" not in attrs[1]
    assert "busy_remeasures" not in attrs[0] and "busy_remeasures" not in attrs[2]
    console = Console(width=300, record=True, file=io.StringIO())
    with ProgressDisplay(console, 3, 0) as display:
        for progress in lines:
            display.update(progress)
    printed = console.export_text().splitlines()
    note = "timed again: the first run was measured on a busy machine (other processes used 48 %"
    assert [note in line for line in printed] == [False, True, False]
    assert not any("WARNING" in line for line in printed)


def test_a_trial_busy_on_every_run_stays_flagged_after_its_remeasures(sqlite_url: str) -> None:
    config = _config(sqlite_url, "advanced.trial.busy_retimes=2")
    lines: list[StudyProgress] = []
    runs = Recording(busy={3, 4, 5})
    run_study(config, 2, run_trial_fn=runs, on_trial=lines.append)

    assert runs.calls == 5  # warm-up, trial 0, trial 1 and its two re-runs
    attrs = lines[1].last.user_attrs
    assert attrs["busy_machine"] is True
    assert attrs["busy_remeasures"] == 2
    assert attrs["busy_run_shares"] == [BUSY_SHARE, BUSY_SHARE, BUSY_SHARE]
    flag = "measured on a busy machine (other processes used 48 % of the CPUs), the least busy of 3"
    assert flag in printed_trial_line(lines[1])


def printed_trial_line(progress: StudyProgress) -> str:
    """The trial's line as the study prints it (not a terminal: one line per trial)."""
    console = Console(width=400, record=True, file=io.StringIO())
    with ProgressDisplay(console, 1, 0) as display:
        display.update(progress)
    return console.export_text()


def test_the_least_busy_run_counts_and_a_too_slow_re_run_never_does(sqlite_url: str) -> None:
    config = _config(sqlite_url, "advanced.trial.busy_retimes=3")
    lines: list[StudyProgress] = []
    # Trial 1 (call 3) at 48 %; its re-runs at 60 % (busier), 20 % (stopped as too slow)
    # and 30 %: the 30 % run counts, still flagged busy.
    runs = Recording(shares={3: BUSY_SHARE, 4: 0.6, 5: 0.2, 6: 0.3}, too_slow={5})
    run_study(config, 2, run_trial_fn=runs, on_trial=lines.append)

    attrs = lines[1].last.user_attrs
    assert runs.calls == 6
    assert attrs["busy_run_shares"] == [BUSY_SHARE, 0.6, 0.2, 0.3]
    assert attrs["other_cpu_share"] == 0.3 and attrs["busy_machine"] is True
    assert attrs["throughput_sps"] == runs.measured[5].throughput_sps
    assert "failure" not in attrs


def test_a_failed_remeasure_keeps_the_busy_run_flagged(sqlite_url: str) -> None:
    config = _config(sqlite_url)
    lines: list[StudyProgress] = []
    runs = Recording(busy={3}, fail={4})
    run_study(config, 2, run_trial_fn=runs, on_trial=lines.append)

    attrs = lines[1].last.user_attrs
    assert "failure" not in attrs  # the trial stands, on its busy run
    assert attrs["busy_machine"] is True and attrs["other_cpu_share"] == BUSY_SHARE
    assert attrs["busy_remeasure_failure"] == "error: the re-run failed on purpose"
    assert "busy_remeasures" not in attrs


def test_a_higher_threshold_does_not_flag_the_same_share(sqlite_url: str) -> None:
    config = _config(sqlite_url, "advanced.measure.max_other_cpu_share=0.5")
    lines: list[StudyProgress] = []
    run_study(config, 2, run_trial_fn=BusyOn(busy={2, 3}), on_trial=lines.append)
    assert [p.last.user_attrs["busy_machine"] for p in lines] == [False, False]


def test_verification_measures_a_busy_run_again_within_its_bound(sqlite_url: str) -> None:
    config = _config(sqlite_url)
    run_study(config, 14, run_trial_fn=simulate_trial)
    settings = VerifySettings(rounds=6, candidates=2, busy_rerun_budget=2)
    lines: list[VerificationProgress] = []
    # Call 1 is the discarded warm-up run. Call 2 (the race's first run) is busy and measured
    # again (call 3, quiet); call 5 is busy, its re-run (call 6) too: the bound is spent,
    # and call 8 is busy with no re-run left.
    runner = BusyOn(busy={2, 5, 6, 8})

    summary = verify_study(
        config.study, config.storage, settings=settings, run_trial_fn=runner, on_run=lines.append
    )

    planned = summary.runs_planned  # the race's runs, then the survivors' confirmation
    assert summary.candidates  # no survivor is futile at 6 rounds here
    assert planned == len(summary.race) * 2 + 6 * (1 + len(summary.candidates))
    assert runner.calls == 1 + planned + 2  # the warm-up, the planned runs, 2 re-runs
    attempts = _attempts(sqlite_url)
    assert len(attempts) == planned + 2
    first, again = attempts[0], attempts[1]
    assert first[:2] == again[:2] and (first[2:], again[2:]) == ((0, True), (1, False))
    assert [a[2:] for a in attempts[3:6]] == [(0, True), (1, True), (0, False)]
    assert attempts[6][2:] == (0, True)  # call 8: busy, no re-run left
    assert [(p.rerun_next, p.reruns_used) for p in lines if p.record.busy] == [
        (True, 1),
        (True, 2),
        (False, 2),
        (False, 2),
    ]
    assert "measuring it again (re-run 1 of 2)" in verification_line(lines[0])
    assert "no re-run left (2 of 2 spent)" in verification_line(lines[4])
    assert "(again, attempt 2)" in verification_line(lines[1])
    # The last attempt counts: two runs that count were busy (calls 6 and 8).
    assert summary.complete and summary.runs_done == planned
    assert (summary.busy_runs, summary.busy_reruns, summary.busiest_share) == (2, 2, BUSY_SHARE)
    assert summary.headline().endswith(
        f"; WARNING: 2 of {planned} runs were measured on a busy machine (other processes used up to "
        "48 % of the CPUs; 2 re-runs spent): the figures may be unreliable"
    )
    console = Console(width=300, record=True, file=io.StringIO())
    print_verdict(console, summary, config.storage)
    text = console.export_text()
    # Calls 6 and 8 are race runs: the race's table counts them against their trials.
    busy = [v.busy_runs for v in summary.race if v.busy_runs]
    assert sum(busy) == 2 and "busy runs" in text
    assert all(f"{n} of 2" in text for n in busy)


def test_a_verification_on_a_quiet_machine_says_nothing_of_it(sqlite_url: str) -> None:
    config = _config(sqlite_url)
    run_study(config, 14, run_trial_fn=simulate_trial)
    settings = VerifySettings(rounds=3, candidates=2)

    summary = verify_study(config.study, config.storage, settings=settings, run_trial_fn=BusyOn())

    assert summary.busy_runs == 0 and summary.busy_text() is None
    assert "busy" not in summary.headline()
    assert {a[2] for a in _attempts(sqlite_url)} == {0}


def test_a_resumed_verification_measures_again_the_busy_run_it_stopped_after(
    sqlite_url: str,
) -> None:
    config = _config(sqlite_url)
    run_study(config, 14, run_trial_fn=simulate_trial)
    settings = VerifySettings(rounds=3, candidates=2, busy_rerun_budget=1)
    # Call 2 is busy; Ctrl-C on call 3, its re-run: the busy row is stored, the re-run not.
    with pytest.raises(KeyboardInterrupt):
        verify_study(
            config.study,
            config.storage,
            settings=settings,
            run_trial_fn=BusyOn(busy={2}, interrupt_on=3),
        )
    assert [a[2:] for a in _attempts(sqlite_url)] == [(0, True)]

    resumed = BusyOn()
    summary = verify_study(config.study, config.storage, settings=settings, run_trial_fn=resumed)

    attempts = _attempts(sqlite_url)
    assert attempts[1][:3] == (*attempts[0][:2], 1) and attempts[1][3] is False
    # The warm-up, the busy run again, and every other planned run.
    assert resumed.calls == 1 + summary.runs_planned
    assert summary.complete and summary.busy_runs == 0 and summary.busy_reruns == 1
