"""A busy machine, noticed (issue 22): trials and verification runs during whose timed windows
other processes used more than ``measure.max_other_cpu_share`` of the CPUs are flagged in the
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

from autotune.api import StudyProgress, VerificationProgress, run_study, verify_study
from autotune.config import RunConfig, TrialConfig, VerifySettings, load_run_config
from autotune.console import ProgressDisplay, print_verdict, verification_line
from autotune.measure import Measurement
from autotune.storage import ResultsStore
from autotune.testing import simulate_trial

#: The share a busy run reports (a busy loop on one of two cores).
BUSY_SHARE = 0.48


class BusyOn:
    """A run_trial that simulates, reporting a busy machine on the calls numbered ``busy``
    (1-based) and a quiet one (3 %) on the others."""

    def __init__(self, busy: Collection[int] = (), interrupt_on: int | None = None) -> None:
        self.calls = 0
        self._busy = set(busy)
        self._interrupt_on = interrupt_on

    def __call__(self, config: TrialConfig, timeout_s: float) -> Measurement:
        self.calls += 1
        if self.calls == self._interrupt_on:
            raise KeyboardInterrupt
        share = BUSY_SHARE if self.calls in self._busy else 0.03
        measured = simulate_trial(config, timeout_s)
        return dataclasses.replace(measured, other_cpu_share=share, load_avg_1m=1.5)


def _config(sqlite_url: str, *args: str) -> RunConfig:
    # As tests/api/test_verify.py: the 14-trial random study with seed 4 has two finalists.
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
    config = _config(sqlite_url)
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


def test_a_higher_threshold_does_not_flag_the_same_share(sqlite_url: str) -> None:
    config = _config(sqlite_url, "measure.max_other_cpu_share=0.5")
    lines: list[StudyProgress] = []
    run_study(config, 2, run_trial_fn=BusyOn(busy={2, 3}), on_trial=lines.append)
    assert [p.last.user_attrs["busy_machine"] for p in lines] == [False, False]


def test_verification_measures_a_busy_run_again_within_its_bound(sqlite_url: str) -> None:
    config = _config(sqlite_url)
    run_study(config, 14, run_trial_fn=simulate_trial)
    settings = VerifySettings(rounds=3, candidates=2, busy_reruns=2)
    lines: list[VerificationProgress] = []
    # Call 1 is the discarded warm-up run. Call 2 (the race's first run) is busy and measured
    # again (call 3, quiet); call 5 is busy, its re-run (call 6) too: the bound is spent,
    # and call 8 is busy with no re-run left.
    runner = BusyOn(busy={2, 5, 6, 8})

    summary = verify_study(
        config.study, config.storage, settings=settings, run_trial_fn=runner, on_run=lines.append
    )

    assert runner.calls == 1 + 12 + 2  # the warm-up, the 12 planned runs, 2 re-runs
    attempts = _attempts(sqlite_url)
    assert len(attempts) == 14
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
    assert summary.complete and summary.runs_done == 12
    assert (summary.busy_runs, summary.busy_reruns, summary.busiest_share) == (2, 2, BUSY_SHARE)
    assert summary.headline().endswith(
        "; WARNING: 2 of 12 runs were measured on a busy machine (other processes used up to "
        "48 % of the CPUs; 2 re-runs spent): the figures may be unreliable"
    )
    console = Console(width=300, record=True, file=io.StringIO())
    print_verdict(console, summary, config.storage)
    text = console.export_text()
    assert "busy runs" in text and "2 of 2" in text  # calls 6 and 8: trial 2 in the race


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
    settings = VerifySettings(rounds=3, candidates=2, busy_reruns=1)
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
    assert resumed.calls == 1 + 12  # the warm-up, the busy run again, the 11 others
    assert summary.complete and summary.busy_runs == 0 and summary.busy_reruns == 1
