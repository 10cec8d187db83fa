"""Run one trial in child processes, with a wall-clock timeout, and classify its failure.

Each trial runs in fresh processes (one per DDP rank) forked from a forkserver that has
already imported torch, so a trial pays no import cost, never shares the study's process,
and returns every byte of memory (and any CUDA context) when it exits. The study process
never initializes CUDA.

Nothing a trial starts outlives the study, even after ``kill -9``: the forkserver exits with
the study process, the ranks with the forkserver, their DataLoader workers with them
(:mod:`autotune.trial.lifetime` says how). When a trial ends (a result, a failure, its timeout),
whatever it started is killed with it: each rank leads a process group of its own, which its
DataLoader workers and the user's subprocesses join, and the launcher kills the groups.

A failure comes back as :class:`~autotune.core.exceptions.TrialError` with ``failure`` set to
``oom``, ``error``, ``crash`` or ``timeout`` and the last lines of the trial's output; the
last line is the reason (an exception; a rank's exit status or signal; the time limit).

The ranks' CUDA environment is set by the launcher, in each rank before CUDA initializes
(:func:`trial_environment`): ``CUDA_VISIBLE_DEVICES`` as the study process has it when the
trial starts (not as the forkserver inherited it when it started: a worker that owns part of
the GPUs sets it later, :func:`trial_devices`), narrowed to the trial's own ``gpu_count``
devices on ``cuda`` (:func:`trial_visible_devices`), and ``CUDA_DEVICE_ORDER=PCI_BUS_ID``; and
where torch.compile keeps its caches (``TORCHINDUCTOR_CACHE_DIR``, ``TRITON_CACHE_DIR``), as
``advanced.measure.compile_cache`` asks: the study's own directory (:func:`study_compile_cache`), an
empty one per trial, or the environment's.
"""

from __future__ import annotations

import contextlib
import contextvars
import getpass
import hashlib
import multiprocessing
import multiprocessing.connection
import os
import re
import signal
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from autotune.core.config import CompileCache, TrialConfig, display_url
from autotune.core.exceptions import TrialError
from autotune.core.hardware import STUDY_PID_VARIABLE, STUDY_WORKERS_VARIABLE
from autotune.study.search._interrupts import sigint_deferred
from autotune.study.storage import sqlite_path
from autotune.trial.measure import Measurement
from autotune.trial.training._child import rank_entry

__all__ = [
    "COMPILE_CACHE_VARIABLES",
    "compile_cache_environment",
    "run_trial",
    "study_compile_cache",
    "study_compile_cache_dir",
    "study_processes",
    "trial_devices",
    "trial_environment",
    "trial_visible_devices",
]

_TAIL_LINES = 20
#: Longest uninterrupted wait for a rank, in seconds (see :func:`_wait`).
_WAKE_S = 1.0


#: Modules the forkserver imports once, so that no trial pays for them: torch and our trial
#: code; torch._dynamo, which optimizers import lazily (2.6 s and ~80 MB of Python objects
#: that would otherwise count as the trial's time and peak memory); scikit-learn's datasets.
_PRELOAD = ["autotune.trial.training", "torch._dynamo", "sklearn.datasets"]


def _context() -> Any:
    """A forkserver context whose server preloads :data:`_PRELOAD` (``spawn`` elsewhere).

    Preloading is a speed-up only: the preload list is fixed when the server first starts.
    """
    if "forkserver" not in multiprocessing.get_all_start_methods():  # pragma: no cover
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(_PRELOAD)
    return ctx


#: The variables that place torch.compile's on-disk caches: Inductor's (generated code,
#: the FX graph and AOTAutograd caches, Dynamo's profiles; default /tmp/torchinductor_$USER)
#: and Triton's (compiled GPU kernels; default under Inductor's).
COMPILE_CACHE_VARIABLES = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")

#: The study whose trials this process runs now: its compile cache directory (None: none).
_STUDY_CACHE_DIR: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "autotune_study_compile_cache", default=None
)


def study_compile_cache_dir(storage: str, study_name: str) -> Path:
    """The directory of a study's compile caches: under the system's temporary directory,
    per user, named by the study and a hash of its storage URL (as every output shows it,
    the password masked; a relative SQLite path made absolute, :func:`_absolute_sqlite`) and
    name, so that two studies never share one and a resumed study, or another worker of it
    on this machine, finds its own.

    ``<tmp>/autotune-<user>/compile-cache/<study>-<12 hex digits>``; nothing is created.
    """
    url = display_url(_absolute_sqlite(storage))
    key = hashlib.sha256(f"{url}\0{study_name}".encode()).hexdigest()[:12]
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", study_name)[:48] or "study"
    return Path(tempfile.gettempdir()) / f"autotune-{_user()}" / "compile-cache" / f"{slug}-{key}"


def _absolute_sqlite(storage: str) -> str:
    """``storage`` with a relative SQLite database path made absolute against the working
    directory (``sqlite:///storage/autotune.db`` -> ``sqlite:////work/storage/autotune.db``),
    so that the default URL in two checkouts names two databases, and two caches; any other
    URL (a server, an in-memory or ``file:`` database, an absolute path, by
    :func:`autotune.study.storage.sqlite_path`), or one SQLAlchemy cannot read, as given."""
    try:
        path = sqlite_path(storage)
    except (ArgumentError, ValueError):
        return storage
    if path is None or path.is_absolute() or path.as_posix().startswith("file:"):
        return storage
    absolute = make_url(storage).set(database=os.path.abspath(path))
    return absolute.render_as_string(hide_password=False)


def _user() -> str:
    try:
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", getpass.getuser())
    except (KeyError, OSError):  # no name for this uid (a container)
        return str(os.getuid())


@contextmanager
def study_compile_cache(storage: str, study_name: str) -> Iterator[Path]:
    """Inside the block, trials started by :func:`run_trial` in this process whose
    ``advanced.measure.compile_cache`` is ``study`` keep their compile caches in
    :func:`study_compile_cache_dir` (yielded). Outside any such block (a trial run on its
    own), ``study`` leaves the caches where the environment puts them."""
    directory = study_compile_cache_dir(storage, study_name)
    token = _STUDY_CACHE_DIR.set(str(directory))
    try:
        yield directory
    finally:
        _STUDY_CACHE_DIR.reset(token)


def compile_cache_environment(
    environ: Mapping[str, str], mode: CompileCache, trial_dir: Path, study_dir: str | None
) -> dict[str, str | None]:
    """``TORCHINDUCTOR_CACHE_DIR`` and ``TRITON_CACHE_DIR`` of a trial's ranks (None: unset).

    Inductor's and Triton's caches persist on disk (by default under
    /tmp/torchinductor_$USER): a trial whose graphs some earlier process compiled, in this
    study or any other, compiles warm, in a fraction of the seconds, so that compile time
    (and a time to accuracy, which includes it) depended on what ran on the machine before.

    Args:
        environ: the study process's environment.
        mode: ``advanced.measure.compile_cache``: ``study`` puts both in ``study_dir`` (the
            environment's when None: no study around the trial); ``trial`` in
            ``trial_dir``, which exists for this trial alone and starts empty; ``shared``
            keeps the environment's.
        trial_dir: a directory of this trial's (its runner's temporary directory).
        study_dir: the study's cache directory (:func:`study_compile_cache`), or None.
    """
    root = {"study": study_dir, "trial": str(trial_dir), "shared": None}[mode]
    if root is None:
        return {name: environ.get(name) for name in COMPILE_CACHE_VARIABLES}
    return {"TORCHINDUCTOR_CACHE_DIR": root, "TRITON_CACHE_DIR": str(Path(root) / "triton")}


def trial_environment(environ: Mapping[str, str]) -> dict[str, str | None]:
    """The CUDA environment of a trial's ranks, given the study process's (None: unset).

    ``CUDA_DEVICE_ORDER=PCI_BUS_ID``: CUDA numbers devices fastest first by default
    (``FASTEST_FIRST``; CUDA C Programming Guide, "CUDA Environment Variables"), while NVML
    numbers them in PCI bus order (NVML API reference, ``nvmlDeviceGetHandleByIndex``;
    ``nvidia-smi`` shows the same order). On a machine with unlike GPUs the two orders differ,
    and the rank on ``cuda:i`` would read another GPU's power, energy and UUID from NVML index
    ``i`` (:func:`autotune.core.nvml.visible_nvml_indices`, :class:`autotune.core.nvml.GpuWindowMeter`).
    PCI bus order makes CUDA's indices NVML's, before and after ``CUDA_VISIBLE_DEVICES``
    (which is applied to that order). It is set for the trials whatever the user set: the
    telemetry's mapping depends on it.

    ``CUDA_VISIBLE_DEVICES``: the study process's value now, which a worker owning part of the
    machine's GPUs set (:func:`trial_devices`).

    :data:`~autotune.core.hardware.STUDY_PID_VARIABLE` and
    :data:`~autotune.core.hardware.STUDY_WORKERS_VARIABLE`: the study's own processes and its
    worker count, as :func:`autotune.study.api.run_study` set them (the forkserver's environment
    predates them).

    Args:
        environ: the study process's environment (``os.environ``).
    """
    return {
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "CUDA_VISIBLE_DEVICES": environ.get("CUDA_VISIBLE_DEVICES"),
        STUDY_PID_VARIABLE: environ.get(STUDY_PID_VARIABLE),
        STUDY_WORKERS_VARIABLE: environ.get(STUDY_WORKERS_VARIABLE),
    }


def trial_visible_devices(cuda_visible_devices: str | None, gpu_count: int) -> str:
    """``CUDA_VISIBLE_DEVICES`` of a ``cuda`` trial's ranks: the first ``gpu_count`` devices of
    those the study process sees (``cuda_visible_devices``; every GPU when None, numbered
    ``0 .. gpu_count-1`` in PCI bus order, :func:`trial_environment`).

    Every rank sees the trial's devices and no others, so rank ``r`` still trains on
    ``cuda:r`` and NVML still maps CUDA's indices ``0 .. gpu_count-1``; a framework that
    counts the GPUs itself counts the trial's. transformers' ``TrainingArguments`` without a
    launcher takes ``n_gpu = torch.cuda.device_count()`` and wraps the model in
    ``nn.DataParallel`` when it is above 1 (``training_args.py``, ``_setup_devices``;
    ``trainer.py``, ``_wrap_model``): a ``gpu_count=1`` trial on a four-GPU worker trained on
    four GPUs. Entries are kept as written (indices, ``GPU-`` UUIDs, ``MIG-`` names); a list
    shorter than ``gpu_count`` is kept whole (the feasibility rules refuse such a trial first).

    Args:
        cuda_visible_devices: the study process's ``CUDA_VISIBLE_DEVICES`` (None: unset).
        gpu_count: the trial's DDP ranks, one GPU each.
    """
    if cuda_visible_devices is None:
        return ",".join(str(index) for index in range(gpu_count))
    entries = [entry.strip() for entry in cuda_visible_devices.split(",")]
    return ",".join(entries[:gpu_count])


#: The CUDA caching allocator's configuration variable (PyTorch docs, "CUDA semantics",
#: Optimizing memory usage with ``PYTORCH_CUDA_ALLOC_CONF``), read once, when CUDA starts.
ALLOC_CONF_VARIABLE = "PYTORCH_CUDA_ALLOC_CONF"


def allocator_environment(
    environ: Mapping[str, str], expandable_segments: bool
) -> dict[str, str | None]:
    """The allocator setting of a trial's ranks (``cuda_expandable_segments``): the trial's
    ``expandable_segments:True`` or ``:False`` joins what the study process's
    ``PYTORCH_CUDA_ALLOC_CONF`` already says, its own ``expandable_segments`` replaced (so
    a trial without the setting runs without it even where the user's environment turns it
    on); without a setting of the user's and without the trial's, the variable as the study
    process has it. It reaches the rank before anything initializes CUDA (the forkserver
    never does).

    Args:
        environ: the study process's environment.
        expandable_segments: the trial's ``cuda_expandable_segments``.
    """
    current = environ.get(ALLOC_CONF_VARIABLE)
    parts = [part for part in (current or "").split(",") if part.strip()]
    kept = [part for part in parts if not part.strip().startswith("expandable_segments")]
    if not expandable_segments and len(kept) == len(parts):
        return {ALLOC_CONF_VARIABLE: current}
    setting = f"expandable_segments:{expandable_segments}"
    return {ALLOC_CONF_VARIABLE: ",".join([*kept, setting])}


@contextmanager
def trial_devices(cuda_visible_devices: str | None) -> Iterator[None]:
    """Inside the block, trials started by :func:`run_trial` see only these CUDA devices
    (``CUDA_VISIBLE_DEVICES``); None changes nothing. The study process's variable is
    restored after the block (the study process itself never initializes CUDA)."""
    if cuda_visible_devices is None:
        yield
        return
    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = cuda_visible_devices
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = before


@contextmanager
def study_processes(workers: int) -> Iterator[None]:
    """Inside the block, the trials of this study process, and of the worker processes it
    starts there (they inherit the environment), count the study's processes as their own
    and split the host's threads among ``workers`` (:func:`trial_environment` passes both on).

    The study's processes are this process's tree, set by the first worker only: a worker it
    started keeps the first worker's id, from which every worker and trial descends. Both
    variables are restored after the block.

    Args:
        workers: the study's worker processes on this machine (``workers``).
    """
    names = (STUDY_PID_VARIABLE, STUDY_WORKERS_VARIABLE)
    before = {name: os.environ.get(name) for name in names}
    if before[STUDY_PID_VARIABLE] is None:
        os.environ[STUDY_PID_VARIABLE] = str(os.getpid())
    os.environ[STUDY_WORKERS_VARIABLE] = str(workers)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-_TAIL_LINES:])


def _detail(reason: str, log: Path) -> str:
    """A failure's detail without a traceback: the end of the rank's log, then ``reason``
    (the exit status, the signal or the limit) as its last line, the line every output shows
    as the failure's one-line reason (a traceback's last line is its exception); the user's
    last printed line is never taken for the reason."""
    tail = _tail(log).rstrip()
    return f"{tail}\n{reason}" if tail else reason


def _stop(procs: list[Any], grace_s: float) -> None:
    """Let ranks that already reported exit on their own (their DataLoader workers and
    semaphores are cleaned up that way), then kill whatever is left of the trial: each
    rank's process group, with everything the rank started (:func:`_end_trial_processes`)."""
    deadline = time.monotonic() + grace_s
    pending = [proc.sentinel for proc in procs if proc.pid is not None]
    while pending and (remaining := deadline - time.monotonic()) > 0:
        ready = multiprocessing.connection.wait(pending, timeout=min(remaining, _WAKE_S))
        pending = [sentinel for sentinel in pending if sentinel not in ready]
    _end_trial_processes(procs)
    for proc in procs:
        proc.join(timeout=10)


def _end_trial_processes(procs: list[Any]) -> None:
    """SIGKILL every process the trial started: each rank's process group (a rank makes its
    own at start, :func:`autotune.trial.training._child.rank_entry`, and every process it starts
    joins it: its DataLoader workers' forkserver and workers, torch.compile's workers, a
    subprocess of the user's code, which would otherwise outlive a timed-out or crashed
    trial), each rank, and the descendants of a rank still alive that left its group (a
    user's ``start_new_session=True``).

    A rank that exited before it made its group leaves no group of its id (``ESRCH``); a
    rank's id names its group for as long as any process of the group lives (Linux frees no
    process id still in use as a group's).
    """
    strays: list[psutil.Process] = []
    for proc in procs:
        if proc.pid is None:
            continue
        with contextlib.suppress(psutil.Error):
            strays.extend(psutil.Process(proc.pid).children(recursive=True))
    for proc in procs:
        if proc.pid is None:
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        if proc.is_alive():
            proc.kill()
    for stray in strays:
        with contextlib.suppress(psutil.Error):
            stray.kill()  # psutil checks it is still the process it found (its start time)


def run_trial(config: TrialConfig) -> Measurement:
    """Run one trial in ``config.gpu_count`` child processes and wait for its measurement,
    at most ``config.timeout_s`` seconds (the whole trial, compile included).

    Args:
        config: the trial to run.

    Returns:
        The measurement rank 0 returned.

    Raises:
        TrialError: ``oom`` / ``error`` (an exception in a rank; detail is its traceback),
            ``crash`` (a rank died, e.g. by a signal, without reporting), or ``timeout``.
        KeyboardInterrupt: re-raised after the children are killed.
    """
    ctx = _context()
    world_size = config.gpu_count if config.device != "mock" else 1
    with tempfile.TemporaryDirectory(prefix="autotune-trial-") as tmp:
        logs = [Path(tmp) / f"rank{rank}.log" for rank in range(world_size)]
        procs: list[Any] = []
        readers: list[Any] = []
        # Ctrl-C while a rank starts would leave a child no one kills (and interpreter exit
        # would wait for it): hold it back until every rank is tracked, then raise it.
        grace_s = 0.0
        try:
            with sigint_deferred():
                _start_ranks(ctx, config, world_size, Path(tmp), logs, procs, readers)
            result = _wait(procs, readers, logs, config.timeout_s)
            grace_s = 10.0
            return result
        finally:
            _stop(procs, grace_s)


def _start_ranks(
    ctx: Any,
    config: TrialConfig,
    world_size: int,
    tmp: Path,
    logs: list[Path],
    procs: list[Any],
    readers: list[Any],
) -> None:
    """Start one process per rank, appending each to ``procs`` and its pipe to ``readers``."""
    env = {
        **trial_environment(os.environ),
        **allocator_environment(os.environ, config.cuda_expandable_segments),
        **compile_cache_environment(
            os.environ,
            config.measure.compile_cache,
            tmp / "compile-cache",
            _STUDY_CACHE_DIR.get(),
        ),
    }
    if config.device == "cuda":
        env["CUDA_VISIBLE_DEVICES"] = trial_visible_devices(
            env["CUDA_VISIBLE_DEVICES"], config.gpu_count
        )
    for rank in range(world_size):
        reader, writer = ctx.Pipe(duplex=False)
        proc = ctx.Process(
            target=rank_entry,
            args=(
                config,
                rank,
                world_size,
                str(tmp / "dist_init"),
                str(logs[rank]),
                writer,
                env,
            ),
            name=f"autotune-trial-rank{rank}",
        )
        proc.start()
        writer.close()
        procs.append(proc)
        readers.append(reader)


def _wait(procs: list[Any], readers: list[Any], logs: list[Path], timeout_s: float) -> Measurement:
    """Wait for every rank's outcome, a death, or the deadline; the first failure wins."""
    deadline = time.monotonic() + timeout_s
    outcomes: dict[int, tuple[str, Any]] = {}
    pending = dict(enumerate(readers))
    while pending:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TrialError(
                "timeout",
                _detail(f"no result after the {timeout_s:g} s limit (trial.timeout_s)", logs[0]),
            )
        # Wake at least once a second: a SIGINT the kernel handed to another thread (Optuna's
        # heartbeat, the progress display) does not interrupt this wait, and its Python
        # handler (KeyboardInterrupt) runs only when this, the main thread, runs again.
        ready = multiprocessing.connection.wait(
            list(pending.values()) + [procs[r].sentinel for r in pending],
            timeout=min(remaining, _WAKE_S),
        )
        for rank, reader in list(pending.items()):
            if reader in ready or procs[rank].sentinel in ready:
                try:
                    outcomes[rank] = reader.recv()
                except (EOFError, OSError):
                    procs[rank].join(timeout=5)
                    code = procs[rank].exitcode
                    how = (
                        f"killed by signal {signal.Signals(-code).name}"
                        if code is not None and code < 0
                        else f"exited with code {code}"
                    )
                    outcomes[rank] = (
                        "crash",
                        _detail(f"rank {rank} {how} without a result", logs[rank]),
                    )
                del pending[rank]
                status, payload = outcomes[rank]
                if status != "ok":
                    raise TrialError(status, payload)
    result = outcomes[0][1]
    assert isinstance(result, Measurement)
    return result
