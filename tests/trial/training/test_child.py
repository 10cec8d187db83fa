"""A rank's child-process body (autotune/trial/training/_child.py): how its failure is classified,
and that it is reported before the rank's process group ends."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.distributed as dist

import autotune.trial.training
import autotune.trial.training._rank
from autotune.testing import make_trial_config
from autotune.trial.devices.cpu import CpuBackend
from autotune.trial.training._child import failure_kind, run_and_report

# --------------------------------------------------------------------------------------------
# failure_kind


@pytest.mark.parametrize(
    "exc",
    [
        MemoryError("simulated"),
        torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
        RuntimeError("CUDA out of memory. Tried to allocate 20.00 MiB"),
        RuntimeError(
            "[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory"
        ),
        # The CUDA libraries' own words for it (issue 38, item 9), as torch raises them.
        RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"),
        RuntimeError("cuDNN error: CUDNN_STATUS_ALLOC_FAILED"),
        RuntimeError("cuDNN error: CUDNN_STATUS_NOT_INITIALIZED"),
        RuntimeError(
            "CUDA error: CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)`"
        ),
    ],
)
def test_out_of_memory_kinds(exc: BaseException) -> None:
    assert failure_kind(exc) == "oom"


@pytest.mark.parametrize(
    "exc",
    [
        ValueError("batch too large"),
        RuntimeError("shape mismatch"),
        KeyboardInterrupt(),
        RuntimeError("cuDNN error: CUDNN_STATUS_BAD_PARAM"),  # a cuDNN error, not memory
    ],
)
def test_other_exceptions_are_errors(exc: BaseException) -> None:
    assert failure_kind(exc) == "error"


# --------------------------------------------------------------------------------------------
# run_and_report: the order of the report and the process group's end


class _Conn:
    """A pipe's sending end that records what is sent, beside the events of the fake group."""

    def __init__(self, events: list[str]) -> None:
        self.events = events
        self.sent: list[tuple[str, Any]] = []

    def send(self, outcome: tuple[str, Any]) -> None:
        self.events.append("send")
        self.sent.append(outcome)

    def close(self) -> None:
        self.events.append("close")


@pytest.fixture
def fake_group(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """torch.distributed without a rendezvous: a group that comes up on init and records its
    end; rank 1 of 2 on the CPU, whose training runs out of memory on a GPU."""
    events: list[str] = []
    up = {"group": False}

    def init(*args: object, **kwargs: object) -> None:
        up["group"] = True

    def destroy(*args: object) -> None:
        up["group"] = False
        events.append("destroy")

    monkeypatch.setattr(dist, "init_process_group", init)
    monkeypatch.setattr(dist, "is_initialized", lambda: up["group"])
    monkeypatch.setattr(dist, "destroy_process_group", destroy)
    monkeypatch.setattr(dist, "all_gather_object", lambda out, obj, *a, **k: out.__setitem__(0, 1))
    monkeypatch.setattr(autotune.trial.training._rank, "make_backend", lambda kind: _NoSetupCpu())

    def oom(*args: object) -> None:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(autotune.trial.training._rank, "_train", oom)
    return events


class _NoSetupCpu(CpuBackend):
    def setup(self, rank: int, world_size: int, precision: str, num_workers: int = 0) -> None:
        pass


def test_a_failed_rank_reports_before_its_process_group_ends(fake_group: list[str]) -> None:
    conn = _Conn(fake_group)

    run_and_report(make_trial_config(gpu_count=2), 1, 2, "/nonexistent/init", conn)

    # Destroyed first, an NCCL group can block while rank 0 waits in a collective: the OOM
    # then read as the trial's timeout (issue 38, item 8).
    assert fake_group == ["send", "close", "destroy"]
    assert conn.sent[0][0] == "oom"
    assert "CUDA out of memory" in conn.sent[0][1]
