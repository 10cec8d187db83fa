"""Ctrl-C held back outside the places that can take it (autotune/study/search/_interrupts.py), and
the hang it prevents: a Ctrl-C just after Optuna started a trial's heartbeat thread (not a
daemon) left that thread running, and interpreter exit waited for it forever."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
import optuna.storages._heartbeat as heartbeat
import pytest
from optuna.trial import TrialState

from autotune.core.config import load_run_config
from autotune.study.api import run_study
from autotune.study.search import _launcher, sigint_allowed, sigint_deferred
from autotune.testing import simulate_trial


@pytest.fixture(autouse=True)
def _python_sigint_handler() -> Iterator[None]:
    """Each test starts with Python's own Ctrl-C handler. A test run started in the background
    by a non-interactive shell (`cmd &`, nohup) inherits SIGINT ignored, and autotune rightly
    leaves an ignored SIGINT alone (autotune/study/search/_interrupts.py), which is not what these tests
    are about."""
    before = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def _ctrl_c() -> None:
    os.kill(os.getpid(), signal.SIGINT)


def test_deferred_ctrl_c_is_raised_when_the_block_ends() -> None:
    reached = False
    with pytest.raises(KeyboardInterrupt), sigint_deferred():
        _ctrl_c()
        reached = True
    assert reached
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_allowed_window_raises_at_once_and_a_held_back_one_on_entry() -> None:
    with sigint_deferred():
        with pytest.raises(KeyboardInterrupt), sigint_allowed():
            _ctrl_c()
            pytest.fail("Ctrl-C was not raised inside sigint_allowed()")
        _ctrl_c()  # held back again once the window is closed
        with pytest.raises(KeyboardInterrupt), sigint_allowed():
            pytest.fail("the held-back Ctrl-C was not raised on entry")
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_deferred_inside_an_allowed_window_raises_when_it_ends() -> None:
    with sigint_deferred(), sigint_allowed():
        reached = False
        with pytest.raises(KeyboardInterrupt), sigint_deferred():
            _ctrl_c()
            reached = True
        assert reached


def test_no_op_where_sigint_is_not_pythons_default() -> None:
    seen: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    try:
        with sigint_deferred(), sigint_allowed():
            _ctrl_c()
        assert seen == [signal.SIGINT]
    finally:
        signal.signal(signal.SIGINT, previous)


def test_an_ignored_sigint_stays_ignored() -> None:
    # What a run started with nohup or `&` from a script inherits: Ctrl-C is not for it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    reached = False
    with sigint_deferred():
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        _ctrl_c()
        reached = True
    assert reached
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_ctrl_c_right_after_the_heartbeat_thread_starts_leaves_no_thread_behind(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    start = heartbeat.HeartbeatThread.start
    beats: list[Any] = []

    def start_then_ctrl_c(self: Any) -> None:
        start(self)
        beats.append(self)
        if self._trial_id == 3:  # between Thread.start() and Optuna's `with` block
            _ctrl_c()

    monkeypatch.setattr(heartbeat.HeartbeatThread, "start", start_then_ctrl_c)
    config = load_run_config(["device=mock", "data=digits", f"storage={sqlite_url}"])

    try:
        with pytest.raises(KeyboardInterrupt):
            run_study(config, 6, run_trial_fn=simulate_trial)
        for beat in beats:
            beat._thread.join(timeout=10)
        left = [beat._thread for beat in beats if beat._thread.is_alive()]
    finally:
        for beat in beats:  # without the fix, one is left; stop it so pytest can exit
            beat._stop_event.set()
    assert left == []
    study = optuna.load_study(study_name=config.study, storage=config.storage)
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 2 + [TrialState.FAIL]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


class _SilentRank:
    """A rank process that neither reports nor exits: its sentinel never becomes ready."""

    def __init__(self) -> None:
        self.sentinel, self._keep_open = os.pipe()

    def close(self) -> None:
        os.close(self.sentinel)
        os.close(self._keep_open)


def test_a_ctrl_c_another_thread_took_stops_the_wait_for_a_rank(tmp_path: Path) -> None:
    """The kernel may hand a process's SIGINT to any thread that does not block it (Optuna's
    heartbeat thread, say). CPython's C handler then only notes it; the main thread runs the
    Python handler (KeyboardInterrupt) when it next runs bytecode, and a main thread blocked
    in the wait for a hung rank, not interrupted by the signal, would do so only at the trial
    timeout. _launcher._wait wakes every second for that (_launcher._WAKE_S)."""
    reader, writer = multiprocessing.Pipe(duplex=False)
    rank = _SilentRank()

    def ctrl_c_to_this_thread() -> None:
        time.sleep(0.5)  # the main thread is blocked in the wait by then
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)

    other = threading.Thread(target=ctrl_c_to_this_thread)
    started = time.monotonic()
    other.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            _launcher._wait([rank], [reader], [tmp_path / "rank0.log"], timeout_s=60.0)
        waited_s = time.monotonic() - started
    finally:
        other.join()
        rank.close()
        reader.close()
        writer.close()
    assert waited_s < 5.0  # within a second or so of the Ctrl-C, not at the 60 s timeout
