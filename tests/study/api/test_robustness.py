"""Failure as data, constraints, many workers, and resume after ``kill -9`` (issue 3).

The fault tests run through the real child-process runner with the mock device told to fail;
the worker tests share one study between processes on SQLite and on PostgreSQL; the resume
test trains for real on the CPU and kills ``autotune run`` with SIGKILL mid-trial.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from autotune.core.config import load_run_config
from autotune.study.api import run_study


def _sqlite(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'studies.db'}"


def _states(study: optuna.Study) -> Counter[str]:
    return Counter(t.state.name for t in study.trials)


def _mock_run(storage: str, *extra: str) -> list[str]:
    """A mock run of the search alone (verification has its own tests: tests/study/api/test_verify.py)."""
    return [
        "space=cnn_small",  # on its default data, the shipped MNIST
        "device=mock",
        f"storage={storage}",
        "study=s",
        "verify.rounds=0",
        *extra,
    ]


@pytest.mark.parametrize(
    ("fault", "failure"),
    [("oom", "oom"), ("error", "error"), ("crash", "crash"), ("hang", "timeout")],
)
def test_faulty_trial_is_recorded_and_the_study_goes_on(
    tmp_path: Path, fault: str, failure: str
) -> None:
    storage = _sqlite(tmp_path)
    # A roomy simulated GPU (a100): the start-up design covers width 64, which the default
    # profile's 64 MiB cannot hold on MNIST; the only failure must be the injected one.
    config = load_run_config(
        _mock_run(
            storage,
            f"advanced.mock.fault={fault}",
            "advanced.mock.fault_trials=[1]",
            "trial.timeout_s=3",
            "mock.profile=a100",
        )
    )

    result = run_study(config, 4)

    study = optuna.load_study(study_name="s", storage=storage)
    assert result.finished == 4
    failed = study.trials[1]
    assert failed.state == TrialState.COMPLETE
    assert failed.user_attrs["failure"] == failure
    assert failed.user_attrs["failure_detail"]
    assert failed.constraints["failed"] == 1.0
    assert failed.number not in {t.number for t in result.pareto_trials}
    others = [t for t in study.trials if t.number != 1]
    assert all("failure" not in t.user_attrs for t in others)
    # Errors and crashes get one more try before they are recorded; oom and timeouts do not.
    assert ("retried_after" in failed.user_attrs) == (failure in ("error", "crash"))


def test_crash_detail_names_the_signal(tmp_path: Path) -> None:
    storage = _sqlite(tmp_path)
    run_study(
        load_run_config(
            _mock_run(storage, "advanced.mock.fault=crash", "advanced.mock.fault_trials=[0]")
        ),
        1,
    )
    trial = optuna.load_study(study_name="s", storage=storage).trials[0]
    assert "SIGSEGV" in trial.user_attrs["failure_detail"]


def test_oom_trials_are_infeasible_for_the_sampler_and_the_study_finishes(tmp_path: Path) -> None:
    # Done-when 2 of issue 3: the small mock GPU runs out of memory on some cnn_small configs.
    # NSGA-II explores widely; the default GP sampler (with the pre-launch memory estimate)
    # learns to avoid the boundary so fast that seed 0 records no OOM at all.
    storage = _sqlite(tmp_path)
    result = run_study(load_run_config(_mock_run(storage, "sampler=nsga2")), 40)
    study = optuna.load_study(study_name="s", storage=storage)
    failures = Counter(t.user_attrs.get("failure") for t in study.trials)
    assert result.finished == 40
    assert failures["oom"] >= 1
    assert all(t.constraints.get("failed") == 0.0 for t in result.pareto_trials)


def test_user_constraints_keep_trials_off_the_front(tmp_path: Path) -> None:
    storage = _sqlite(tmp_path)
    config = load_run_config(
        _mock_run(
            storage,
            "data=digits",  # 8x8 inputs: some trials under 5 MiB
            "constraints.max_memory_bytes=5MiB",
            "constraints.min_accuracy=0.9",
        )
    )
    result = run_study(config, 20)
    study = optuna.load_study(study_name="s", storage=storage)
    measured = [t for t in study.trials if "peak_memory_bytes" in t.user_attrs]
    violating = [
        t
        for t in measured
        if t.user_attrs["peak_memory_bytes"] > 5 * 2**20 or t.user_attrs["val_metric"] < 0.9
    ]
    assert violating, "the limits should exclude some trials of this space"
    assert result.pareto_trials
    for t in result.pareto_trials:
        assert t.user_attrs["peak_memory_bytes"] <= 5 * 2**20
        assert t.user_attrs["val_metric"] >= 0.9


def test_rerun_with_the_same_target_runs_nothing(tmp_path: Path) -> None:
    storage = _sqlite(tmp_path)
    run_study(load_run_config(_mock_run(storage)), 5)
    again = run_study(load_run_config(_mock_run(storage)), 5)
    assert (again.finished, again.ran) == (5, 0)


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_four_workers_share_one_study_exactly(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    # PostgreSQL: a schema of its own (tests/conftest.py's postgres_url), dropped afterwards.
    storage = _sqlite(tmp_path) if backend == "sqlite" else request.getfixturevalue("postgres_url")
    study_name = f"workers-{uuid.uuid4().hex[:8]}"
    config = load_run_config(
        [
            "space=cnn_small",
            "device=mock",
            "data=digits",
            f"storage={storage}",
            f"study={study_name}",
            "workers=4",
            "verify.rounds=0",
        ]
    )
    started = time.monotonic()
    try:
        # 12 trials: the start-up design's rows and the GP's proposals, taken by 4 workers.
        result = run_study(config, 12)
        wall_s = time.monotonic() - started
        study = optuna.load_study(study_name=study_name, storage=storage)
        numbers = [t.number for t in study.trials]
        finished = [t for t in study.trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
        print(
            f"{backend}: 4 workers, {len(finished)} finished of {len(numbers)} trials, {wall_s:.1f} s"
        )
        assert result.finished == 12
        assert len(finished) == 12
        assert len(set(numbers)) == len(numbers)
        # Only surplus trials (asked while the last slots were taken) may be left as FAIL.
        assert all(
            t.user_attrs.get("failure") == "surplus"
            for t in study.trials
            if t.state == TrialState.FAIL
        )
    finally:
        if backend == "postgres":
            optuna.delete_study(study_name=study_name, storage=storage)


def _process_tree(pid: int) -> dict[int, int]:
    """Every live descendant of ``pid`` with its depth (1: a child), read from ``/proc``."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # it exited meanwhile
            continue
        state, ppid = text[text.rindex(")") + 2 :].split()[:2]
        if state != "Z":
            children.setdefault(int(ppid), []).append(int(stat.parent.name))
    tree: dict[int, int] = {}
    todo = [(pid, 0)]
    while todo:
        parent, depth = todo.pop()
        for child in children.get(parent, []):
            tree[child] = depth + 1
            todo.append((child, depth + 1))
    return tree


def _alive(pid: int) -> bool:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return text[text.rindex(")") + 2] != "Z"  # a zombie has exited


def _running_with_all_knobs(study: optuna.Study) -> bool:
    """A trial is running with every knob its finished trials have (the sampler is done with
    it; a trial killed while still suggesting would hold only some of them)."""
    complete = [t for t in study.trials if t.state == TrialState.COMPLETE]
    running = [t for t in study.trials if t.state == TrialState.RUNNING]
    return bool(complete) and any(set(t.params) == set(complete[0].params) for t in running)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads the process tree in /proc")
def test_kill_9_mid_trial_then_resume_finishes_exactly(tmp_path: Path) -> None:
    storage = _sqlite(tmp_path)
    command = [
        sys.executable,
        "-m",
        "autotune.cli",
        "run",
        "--trials",
        "3",
        "space=cnn_small",
        "device=mock",
        "data=digits",
        f"storage={storage}",
        "study=killed",
        "advanced.trial.heartbeat_s=1",
        "verify.rounds=0",  # the search alone; verification has its own tests
    ]
    # Trial 1 hangs on purpose (the mock device's `hang` fault), so the kill is sure to land
    # while a trial runs, however slow a loaded machine is; the rerun has no fault.
    hanging = [*command, "advanced.mock.fault=hang", "advanced.mock.fault_trials=[1]"]
    first = subprocess.Popen(
        hanging, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    # Kill only once a trial is truly under way: all its parameters recorded and its rank
    # process started (the forkserver's child, a grandchild of `autotune run`).
    deadline = time.monotonic() + 300  # generous: a loaded 2-core machine is slow to start trials
    tree: dict[int, int] = {}
    while time.monotonic() < deadline and first.poll() is None:
        time.sleep(0.25)
        try:
            study = optuna.load_study(study_name="killed", storage=storage)
        except KeyError:
            continue
        if _running_with_all_knobs(study):
            tree = _process_tree(first.pid)
            if max(tree.values(), default=0) >= 2:
                break
    else:
        first.kill()
        pytest.fail(f"the first run never got a rank of its second trial going ({first.poll()})")
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    killed = optuna.load_study(study_name="killed", storage=storage)
    stale_before = [t for t in killed.trials if t.state == TrialState.RUNNING]
    completed_before = {t.number: t.values for t in killed.trials if t.state == TrialState.COMPLETE}
    assert len(stale_before) == 1
    # Its processes die with it: the forkserver sees the study process gone, its ranks die
    # with the forkserver (PR_SET_PDEATHSIG), the resource tracker follows.
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in tree) and time.monotonic() < deadline:
        time.sleep(0.25)
    assert [pid for pid in tree if _alive(pid)] == []

    second = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)

    assert second.returncode == 0, second.stderr
    study = optuna.load_study(study_name="killed", storage=storage)
    states = _states(study)
    assert states["COMPLETE"] == 3
    stale = study.trials[stale_before[0].number]
    assert stale.state == TrialState.FAIL
    assert stale.params == stale_before[0].params
    retried = [t for t in study.trials if t.system_attrs.get("failed_trial") == stale.number]
    assert len(retried) == 1 and retried[0].state == TrialState.COMPLETE
    assert retried[0].params == stale.params  # the stale trial's configuration, run again
    for number, values in completed_before.items():  # kept, not redone
        assert study.trials[number].values == values


def _start_time(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot), or None once it has exited: with the
    pid, it names one process (a pid may be reused)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return None if fields[0] == "Z" else int(fields[19])  # a zombie has exited


def _kind(pid: int) -> str:
    """What a process of a study is: its command name, or the multiprocessing role its
    command line names (every process of a study is ``python``)."""
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return "gone"
    if comm != "python" and comm != Path(sys.executable).name:
        return comm  # pt_data_worker: torch names its DataLoader workers
    for role in ("resource_tracker", "forkserver"):
        if f"multiprocessing.{role} import main" in cmdline:
            return role
    return comm


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads the process tree in /proc")
def test_kill_9_mid_trial_leaves_no_process_of_the_study(tmp_path: Path) -> None:
    """``kill -9`` of ``autotune run`` on the CPU while a trial trains with two DataLoader
    workers: within 10 s nothing of the study is left (its forkserver, the rank, the rank's
    forkserver and its workers, the resource tracker)."""
    storage = _sqlite(tmp_path)
    command = [
        sys.executable,
        "-m",
        "autotune.cli",
        "run",
        "--trials",
        "2",
        "space=cnn_small",
        "device=cpu",
        "data=digits",
        f"storage={storage}",
        "study=killed",
        "verify.rounds=0",
        # One small configuration, trained far longer than the test waits.
        *(
            "model.depth=2",
            "model.width=8",
            "batch_size=64",
            "precision=fp32",
            "memory_format=contiguous",
        ),
        *("compile_mode=none", "gpu_count=1", "num_workers=2", "train.epochs=5000"),
    ]
    # This checkout's autotune, wherever the test runs from (not an installed copy).
    path = [str(Path(__file__).resolve().parents[3]), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, path))}
    study = subprocess.Popen(
        command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    processes: dict[int, tuple[int, str]] = {}  # pid: (start time, kind)
    try:
        deadline = time.monotonic() + 300  # generous: a loaded 2-core machine starts slowly
        while time.monotonic() < deadline and study.poll() is None:
            time.sleep(0.5)
            tree = _process_tree(study.pid)
            kinds = Counter(_kind(pid) for pid in tree)
            if kinds["pt_data_worker"] == 2:
                break
        else:
            pytest.fail(f"no trial of the study got its DataLoader workers going ({study.poll()})")
        for pid, depth in tree.items():
            start = _start_time(pid)
            if start is not None:
                # A rank is forked from the study's forkserver: it shows the same command line.
                kind = _kind(pid)
                processes[pid] = (start, "rank" if (kind, depth) == ("forkserver", 2) else kind)
        # The study's resource tracker and forkserver; the rank; the forkserver the rank
        # started and its two DataLoader workers.
        assert sorted(kind for _, kind in processes.values()) == [
            "forkserver",
            "forkserver",
            "pt_data_worker",
            "pt_data_worker",
            "rank",
            "resource_tracker",
        ], processes

        study.send_signal(signal.SIGKILL)
        study.wait(timeout=30)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            left = {p: k for p, (s, k) in processes.items() if _start_time(p) == s}
            if not left:
                break
            time.sleep(0.25)
        assert left == {}
    finally:
        if study.poll() is None:
            study.kill()
            study.wait(timeout=30)
        for pid, (start, _) in processes.items():
            if _start_time(pid) == start:  # still the process the study started
                os.kill(pid, signal.SIGKILL)
