"""Trials in child processes: results, timeouts and failure classification
(autotune/study/search/_launcher.py).

Failures are provoked through the mock device's ``mock_fault`` (an exception, a MemoryError,
death by SIGSEGV, a hang) and through real CPU trials that cannot run.
"""

from __future__ import annotations

import multiprocessing
import os
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from autotune.core.config import MetricSpec, WorkloadSpec
from autotune.core.exceptions import TrialError
from autotune.core.hardware import STUDY_PID_VARIABLE, STUDY_WORKERS_VARIABLE
from autotune.study.search import (
    run_trial,
    study_compile_cache,
    study_processes,
    trial_devices,
    trial_environment,
)
from autotune.study.search._launcher import (
    compile_cache_environment,
    study_compile_cache_dir,
    trial_visible_devices,
)
from autotune.testing import make_trial_config
from autotune.trial.devices.mock import simulate
from autotune.trial.training._child import apply_environment


def _trial_children() -> list[str]:
    return [
        p.name for p in multiprocessing.active_children() if p.name.startswith("autotune-trial")
    ]


# --------------------------------------------------------------------------------------------
# run_trial on the mock device (a child process; the simulation itself takes milliseconds)


@pytest.mark.slow
def test_mock_trial_returns_the_childs_measurement() -> None:
    config = make_trial_config(device="mock", width=16)

    measurement = run_trial(config.model_copy(update={"timeout_s": 60}))

    assert measurement == simulate(config)
    assert measurement.simulated is True
    assert _trial_children() == []


@pytest.mark.slow
def test_exception_in_a_rank_is_an_error_with_its_traceback() -> None:
    with pytest.raises(TrialError) as err:
        run_trial(make_trial_config(device="mock", mock_fault="error", timeout_s=60))

    assert err.value.failure == "error"
    assert err.value.detail.startswith("Traceback (most recent call last):")
    assert "RuntimeError: simulated error (advanced.mock.fault=error)" in err.value.detail
    assert str(err.value) == "error: RuntimeError: simulated error (advanced.mock.fault=error)"


@pytest.mark.slow
def test_memory_error_in_a_rank_is_oom() -> None:
    with pytest.raises(TrialError) as err:
        run_trial(make_trial_config(device="mock", mock_fault="oom", timeout_s=60))

    assert err.value.failure == "oom"
    assert "MemoryError" in err.value.detail


@pytest.mark.slow
def test_modelled_out_of_memory_is_oom() -> None:
    config = make_trial_config(device="mock", depth=3, width=64, batch_size=4096)

    with pytest.raises(TrialError) as err:
        run_trial(config.model_copy(update={"timeout_s": 60}))

    assert err.value.failure == "oom"
    assert "simulated CUDA out of memory" in err.value.detail


@pytest.mark.slow
def test_rank_killed_by_a_signal_is_a_crash() -> None:
    with pytest.raises(TrialError) as err:
        run_trial(make_trial_config(device="mock", mock_fault="crash", timeout_s=60))

    assert err.value.failure == "crash"
    assert err.value.detail.endswith("rank 0 killed by signal SIGSEGV without a result")
    assert str(err.value) == "crash: rank 0 killed by signal SIGSEGV without a result"


@pytest.mark.slow
def test_hanging_rank_times_out_and_is_killed() -> None:
    started = time.monotonic()

    with pytest.raises(TrialError) as err:
        run_trial(make_trial_config(device="mock", mock_fault="hang", timeout_s=1.0))

    assert err.value.failure == "timeout"
    assert err.value.detail.endswith("no result after the 1 s limit (trial.timeout_s)")
    assert time.monotonic() - started < 20
    assert _trial_children() == []


# --------------------------------------------------------------------------------------------
# run_trial on the CPU: trials that cannot run


@pytest.mark.slow
@pytest.mark.parametrize("gpu_count", [1, 2])
def test_batch_larger_than_the_data_is_an_error(gpu_count: int) -> None:
    config = make_trial_config(batch_size=2048, gpu_count=gpu_count)

    with pytest.raises(TrialError) as err:
        run_trial(config.model_copy(update={"timeout_s": 120}))

    assert err.value.failure == "error"
    assert str(err.value) == (
        f"error: ValueError: batch_size=2048 x gpu_count={gpu_count} is larger than the "
        "1438 training samples"
    )
    assert "Traceback" in err.value.detail
    assert _trial_children() == []


@pytest.mark.slow
def test_missing_data_in_the_child_is_an_error(tmp_path: object) -> None:
    config = make_trial_config(data={"name": "mnist", "root": f"{tmp_path}/nowhere"})

    with pytest.raises(TrialError) as err:
        run_trial(config.model_copy(update={"timeout_s": 120}))

    assert err.value.failure == "error"
    assert "DataError" in err.value.detail
    assert f"data.root={tmp_path}/nowhere: no such directory" in str(err.value)


# --------------------------------------------------------------------------------------------
# Faults in the user's own code (loop-door scripts written into tmp_path): data, never a
# process left behind


def _loop_trial(tmp_path: Path, body: str) -> Any:
    """A loop-door trial of ``train(trial)`` with ``body`` (a 4-space-indented block)."""
    script = tmp_path / "train.py"
    script.write_text(
        "import os, subprocess, sys, time\n\n\ndef train(trial):\n" + textwrap.indent(body, "    ")
    )
    spec = WorkloadSpec(
        ref=f"{script}:train", door="loop", metric=MetricSpec(name="accuracy", direction="maximize")
    )
    return make_trial_config(workload=spec, model={})


def _ended(pid: int) -> bool:
    """Whether process ``pid`` has ended (gone, or a zombie its new parent has yet to reap);
    waits up to 10 s for a SIGKILL to land."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


_STARTS_A_SLEEP = """\
child = subprocess.Popen(["sleep", "300"])
with open(os.path.join(os.path.dirname(__file__), "child.pid"), "w") as f:
    f.write(str(child.pid))
"""


@pytest.mark.slow
def test_a_timed_out_trial_leaves_none_of_the_processes_it_started(tmp_path: Path) -> None:
    config = _loop_trial(tmp_path, _STARTS_A_SLEEP + "time.sleep(300)\n")

    with pytest.raises(TrialError) as err:
        run_trial(config.model_copy(update={"timeout_s": 10}))

    assert err.value.failure == "timeout"
    child = int((tmp_path / "child.pid").read_text())
    assert _ended(child)
    assert _trial_children() == []


@pytest.mark.slow
def test_a_crashed_trial_leaves_none_of_the_processes_it_started(tmp_path: Path) -> None:
    config = _loop_trial(tmp_path, _STARTS_A_SLEEP + "os._exit(1)\n")

    with pytest.raises(TrialError) as err:
        run_trial(config.model_copy(update={"timeout_s": 120}))

    assert err.value.failure == "crash"
    assert _ended(int((tmp_path / "child.pid").read_text()))


@pytest.mark.slow
def test_a_crash_is_told_by_its_exit_status_not_the_users_last_line(tmp_path: Path) -> None:
    config = _loop_trial(tmp_path, 'print("epoch 0, step 1, loss 0.69", flush=True)\nos._exit(1)\n')

    with pytest.raises(TrialError) as err:
        run_trial(config.model_copy(update={"timeout_s": 120}))

    assert err.value.failure == "crash"
    assert str(err.value) == "crash: rank 0 exited with code 1 without a result"
    assert err.value.detail == (
        "epoch 0, step 1, loss 0.69\nrank 0 exited with code 1 without a result"
    )


@pytest.mark.slow
def test_a_loop_reporting_nan_is_an_error_with_one_line() -> None:
    spec = WorkloadSpec(
        ref="tests.trial.training.door_code:reports_nan",
        door="loop",
        metric=MetricSpec(name="accuracy", direction="maximize"),
    )
    config = make_trial_config(
        workload=spec, model={"width": 4}, batch_size=8, train={"reference_batch_size": 8}
    )

    with pytest.raises(TrialError) as err:
        run_trial(config.model_copy(update={"timeout_s": 120}))

    assert err.value.failure == "error"
    assert str(err.value) == (
        "error: autotune.core.exceptions.DoorUsageError: trial.report(metric): the accuracy is nan, "
        "not a finite number (did the training diverge?)"
    )


# --------------------------------------------------------------------------------------------
# The ranks' CUDA environment


def test_trials_number_cuda_devices_in_pci_bus_order_as_nvml_does() -> None:
    # CUDA's default order is FASTEST_FIRST, NVML's the PCI bus: the rank on cuda:i must read
    # NVML index i, whatever the user's environment says.
    env = trial_environment({"CUDA_DEVICE_ORDER": "FASTEST_FIRST"})

    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert env["CUDA_VISIBLE_DEVICES"] is None  # unset in the study process: unset in the ranks


def test_trials_see_the_devices_the_study_process_names_when_they_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")

    with trial_devices("GPU-b,GPU-c"):
        inside = trial_environment(os.environ)
    with trial_devices(None):
        unchanged = trial_environment(os.environ)

    assert inside["CUDA_VISIBLE_DEVICES"] == "GPU-b,GPU-c"
    assert unchanged["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"


def test_a_rank_applies_the_trial_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")  # as the forkserver inherited it
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)

    apply_environment(trial_environment({}))  # the study process has none set now

    assert "CUDA_VISIBLE_DEVICES" not in os.environ
    assert os.environ["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"


def test_a_cuda_trial_sees_only_its_own_gpu_count_of_the_workers_devices() -> None:
    # transformers counts torch.cuda.device_count() and runs nn.DataParallel over every GPU
    # it sees: a gpu_count=1 trial must see one.
    assert trial_visible_devices("0,1,2,3", 1) == "0"
    assert trial_visible_devices("GPU-b, GPU-c,GPU-d", 2) == "GPU-b,GPU-c"
    assert trial_visible_devices(None, 2) == "0,1"  # unset: the first in PCI bus order
    assert trial_visible_devices("3", 2) == "3"  # fewer than asked: kept whole


class _FakeContext:
    """A multiprocessing context that records the processes it is asked to start."""

    def __init__(self) -> None:
        self.started: list[tuple[Any, ...]] = []

    def Pipe(self, duplex: bool) -> tuple[Any, Any]:
        return object(), _Closable()

    def Process(self, target: Any, args: tuple[Any, ...], name: str) -> Any:
        context = self

        class _Process:
            def start(self) -> None:
                context.started.append(args)

        return _Process()


class _Closable:
    def close(self) -> None:
        pass


@pytest.mark.parametrize(("gpu_count", "visible"), [(1, "2"), (2, "2,3")])
def test_every_rank_of_a_cuda_trial_is_started_with_the_trials_devices(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, gpu_count: int, visible: str
) -> None:
    from autotune.study.search._launcher import _start_ranks

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3,4,5")  # the worker's share
    config = make_trial_config(device="cuda", gpu_count=gpu_count)
    ctx = _FakeContext()

    _start_ranks(ctx, config, gpu_count, tmp_path, [tmp_path / "log"] * gpu_count, [], [])

    assert [args[6]["CUDA_VISIBLE_DEVICES"] for args in ctx.started] == [visible] * gpu_count


def test_a_cpu_trial_leaves_the_visible_devices_as_they_are(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from autotune.study.search._launcher import _start_ranks

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3,4,5")
    ctx = _FakeContext()

    _start_ranks(ctx, make_trial_config(), 1, tmp_path, [tmp_path / "log"], [], [])

    assert ctx.started[0][6]["CUDA_VISIBLE_DEVICES"] == "2,3,4,5"


# --------------------------------------------------------------------------------------------
# Where torch.compile's caches live (advanced.measure.compile_cache)

_USER_CACHE = {"TORCHINDUCTOR_CACHE_DIR": "/home/me/inductor"}  # the study process's


def test_a_study_scoped_cache_is_the_studys_own_directory() -> None:
    env = compile_cache_environment(_USER_CACHE, "study", Path("/t/trial"), "/t/study-dir")

    assert env == {
        "TORCHINDUCTOR_CACHE_DIR": "/t/study-dir",
        "TRITON_CACHE_DIR": "/t/study-dir/triton",
    }


def test_a_trial_scoped_cache_is_the_trials_own_directory() -> None:
    env = compile_cache_environment(_USER_CACHE, "trial", Path("/t/trial"), "/t/study-dir")

    assert env == {"TORCHINDUCTOR_CACHE_DIR": "/t/trial", "TRITON_CACHE_DIR": "/t/trial/triton"}


@pytest.mark.parametrize(("mode", "study_dir"), [("shared", "/t/study-dir"), ("study", None)])
def test_a_shared_cache_or_no_study_keeps_the_environments(
    mode: str, study_dir: str | None
) -> None:
    env = compile_cache_environment(_USER_CACHE, mode, Path("/t/trial"), study_dir)  # type: ignore[arg-type]

    # As the study process has them now (unset: unset in the ranks, Inductor's default).
    assert env == {"TORCHINDUCTOR_CACHE_DIR": "/home/me/inductor", "TRITON_CACHE_DIR": None}


def test_each_study_has_its_own_cache_directory() -> None:
    url = "postgresql+psycopg://me:secret@db/autotune"
    one = study_compile_cache_dir(url, "cnn_small")

    assert one == study_compile_cache_dir(url, "cnn_small")  # a resumed study finds its own
    assert one.parent.parent == Path(tempfile.gettempdir()) / one.parent.parent.name
    assert one.parent.parent.name.startswith("autotune-")
    assert one.name.startswith("cnn_small-")
    assert one != study_compile_cache_dir(url, "cnn_small_2")
    assert one != study_compile_cache_dir("sqlite:///storage/autotune.db", "cnn_small")
    assert "secret" not in str(one)
    assert study_compile_cache_dir(url, "a/../b c").name.startswith("a_.._b_c-")


def test_the_default_sqlite_url_in_two_checkouts_names_two_caches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    relative = "sqlite:///storage/autotune.db"  # the default storage, under the working directory
    caches = []
    for checkout in ("one", "two"):
        (tmp_path / checkout).mkdir()
        monkeypatch.chdir(tmp_path / checkout)
        caches.append(study_compile_cache_dir(relative, "cnn_small"))
        absolute = f"sqlite:///{tmp_path / checkout / 'storage' / 'autotune.db'}"
        assert caches[-1] == study_compile_cache_dir(absolute, "cnn_small")  # the same database

    assert caches[0] != caches[1]
    from autotune.study.search._launcher import _absolute_sqlite

    for url in ("sqlite://", "sqlite:///:memory:", "postgresql+psycopg://db/x", "not a url"):
        assert _absolute_sqlite(url) == url  # not a relative SQLite path: as given


def test_the_study_cache_reaches_the_trials_started_inside_its_block() -> None:
    from autotune.study.search._launcher import _STUDY_CACHE_DIR

    assert _STUDY_CACHE_DIR.get() is None
    with study_compile_cache("sqlite:///x.db", "s") as directory:
        assert _STUDY_CACHE_DIR.get() == str(directory)
    assert _STUDY_CACHE_DIR.get() is None


def test_a_studys_trials_know_its_processes_and_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(STUDY_PID_VARIABLE, raising=False)
    monkeypatch.delenv(STUDY_WORKERS_VARIABLE, raising=False)

    with study_processes(3):
        inside = trial_environment(os.environ)
        monkeypatch.setenv(STUDY_PID_VARIABLE, "1")  # as a worker started here inherits it
        with study_processes(3):  # that worker's own loop: the first worker stays the root
            in_worker = trial_environment(os.environ)

    assert inside[STUDY_PID_VARIABLE] == str(os.getpid())
    assert inside[STUDY_WORKERS_VARIABLE] == "3"
    assert in_worker[STUDY_PID_VARIABLE] == "1"
    assert trial_environment(os.environ)[STUDY_WORKERS_VARIABLE] is None  # restored
