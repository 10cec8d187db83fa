"""Real-device backends (autotune/trial/devices/{cpu,cuda}.py, autotune/trial/devices/__init__.py)."""

from __future__ import annotations

import pytest
import torch

from autotune.core.hardware import STUDY_WORKERS_VARIABLE
from autotune.testing import make_trial_config
from autotune.trial.devices import make_backend
from autotune.trial.devices.cpu import CpuBackend
from autotune.trial.devices.cuda import CudaBackend, rank_threads


def test_make_backend_cpu() -> None:
    backend = make_backend("cpu")

    assert isinstance(backend, CpuBackend)
    assert backend.ddp_backend == "gloo"
    assert backend.pin_memory is False
    assert backend.torch_device() == torch.device("cpu")


@pytest.mark.parametrize("kind", ["mock", "tpu"])
def test_make_backend_refuses_non_training_kinds(kind: str) -> None:
    with pytest.raises(ValueError, match=f"no training backend for device kind '{kind}'"):
        make_backend(kind)


def test_cpu_backend_splits_cores_between_ranks() -> None:
    import os

    threads = torch.get_num_threads()
    try:
        CpuBackend().setup(rank=0, world_size=2, precision="fp32")
        assert torch.get_num_threads() == max(1, (os.cpu_count() or 1) // 2)
    finally:
        torch.set_num_threads(threads)


def test_cpu_backend_peak_memory_grows_with_allocations() -> None:
    backend = CpuBackend()
    backend.reset_peak_memory()
    # 64 MiB, every page written. Above glibc's largest mmap threshold (32 MiB), so the block
    # gets fresh pages from the kernel: a smaller one may reuse pages an earlier test freed
    # but the allocator kept resident, and the peak would not grow (seen in a full run).
    block = torch.ones(64 << 20, dtype=torch.uint8)

    assert backend.peak_memory_bytes() >= 32 << 20
    del block


def _torch_flags() -> dict[str, object]:
    flags: dict[str, object] = {
        "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
        "cudnn.benchmark": torch.backends.cudnn.benchmark,
        "cudnn.deterministic": torch.backends.cudnn.deterministic,
        "threads": torch.get_num_threads(),
    }
    if hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        flags["matmul.fp32_precision"] = torch.backends.cuda.matmul.fp32_precision
        flags["conv.fp32_precision"] = torch.backends.cudnn.conv.fp32_precision
    else:
        flags["matmul.allow_tf32"] = torch.backends.cuda.matmul.allow_tf32
    return flags


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch):
    """CudaBackend.setup without a GPU (set_device does nothing); every torch flag it may
    change is put back afterwards."""
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: None)
    before = _torch_flags()
    matmul, conv = torch.backends.cuda.matmul, torch.backends.cudnn.conv
    cpu_matmul = torch.backends.mkldnn.matmul
    saved = (
        getattr(matmul, "fp32_precision", None),
        getattr(conv, "fp32_precision", None),
        matmul.allow_tf32,
        getattr(cpu_matmul, "fp32_precision", None),
    )
    yield before
    torch.backends.cuda.matmul.allow_tf32 = saved[2]
    if saved[0] is not None:  # the new API's own state ("none": set by neither API)
        matmul.fp32_precision, conv.fp32_precision = saved[0], saved[1]
        cpu_matmul.fp32_precision = saved[3]
    torch.backends.cudnn.allow_tf32 = bool(before["cudnn.allow_tf32"])
    torch.backends.cudnn.benchmark = bool(before["cudnn.benchmark"])
    torch.set_num_threads(int(before["threads"]))  # type: ignore[call-overload]


@pytest.mark.parametrize("precision", ["fp32", "fp16", "bf16"])
def test_the_cuda_backend_leaves_every_torch_flag_at_pytorchs_default(
    fake_cuda: dict[str, object], precision: str
) -> None:
    CudaBackend().setup(rank=0, world_size=1, precision=precision, num_workers=0)

    assert _torch_flags() == fake_cuda  # the baseline is "PyTorch's defaults"
    assert torch.backends.cudnn.benchmark is False and torch.backends.cudnn.allow_tf32 is True


def test_the_cuda_backend_turns_tf32_on_in_a_state_both_apis_read(
    fake_cuda: dict[str, object],
) -> None:
    CudaBackend().setup(rank=0, world_size=1, precision="tf32")

    # The legacy readers, which Inductor still calls (torch 2.13's autotuning cache key reads
    # get_float32_matmul_precision): set through the new API alone, each raised "mix of the
    # legacy and new APIs" and every compiled tf32 trial failed (issue 38, item 1).
    assert torch.get_float32_matmul_precision() == "high"
    assert torch.backends.cuda.matmul.allow_tf32 is True
    assert torch.backends.cudnn.allow_tf32 is True
    if hasattr(torch.backends.cuda.matmul, "fp32_precision"):  # torch >= 2.9: the new API
        assert torch.backends.cuda.matmul.fp32_precision == "tf32"
        assert torch.backends.cudnn.conv.fp32_precision == "tf32"


@pytest.mark.parametrize(
    ("set_by_transformers", "precision", "matmul"),
    [("tf32", "fp32", "highest"), ("ieee", "tf32", "high"), ("tf32", "bf16", "highest")],
)
def test_reset_tf32_gives_the_trials_precision_over_the_new_apis_global_flag(
    fake_cuda: dict[str, object], set_by_transformers: str, precision: str, matmul: str
) -> None:
    from autotune.trial.devices.cuda import reset_tf32

    if not hasattr(torch.backends, "fp32_precision"):
        pytest.skip("torch < 2.9 has no new TF32 API")
    torch.backends.fp32_precision = set_by_transformers  # TrainingArguments(tf32=...)

    reset_tf32(precision)

    # Every legacy reader answers (each raised "mix of the legacy and new APIs" before).
    assert torch.get_float32_matmul_precision() == matmul
    assert torch.backends.cuda.matmul.allow_tf32 is (precision == "tf32")
    assert torch.backends.cudnn.allow_tf32 is True  # PyTorch's default for convolutions
    assert torch.backends.fp32_precision == "none"


def test_cuda_ranks_share_the_host_threads(fake_cuda: dict[str, object]) -> None:
    default = torch.get_num_threads()
    CudaBackend().setup(rank=1, world_size=2, precision="fp32", num_workers=0)

    assert torch.get_num_threads() == max(1, default // 2)


@pytest.mark.parametrize(
    ("default", "world_size", "workers", "threads"),
    [(16, 1, 0, None), (16, 2, 0, 8), (16, 2, 2, 6), (16, 8, 2, 1), (2, 1, 2, 1)],
)
def test_rank_threads(default: int, world_size: int, workers: int, threads: int | None) -> None:
    assert rank_threads(default, world_size, workers) == threads


@pytest.mark.parametrize(
    ("world_size", "workers", "study_workers", "threads"),
    [(1, 0, 2, 8), (2, 0, 2, 4), (2, 2, 2, 2), (1, 0, 4, 4), (1, 0, 32, 1)],
)
def test_rank_threads_split_the_host_between_the_studys_workers(
    world_size: int, workers: int, study_workers: int, threads: int
) -> None:
    # Each study worker runs its own trials on its own GPUs beside this one (issue 38, 11).
    assert rank_threads(16, world_size, workers, study_workers) == threads


def test_cuda_ranks_share_the_host_threads_with_the_other_workers_trials(
    fake_cuda: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(STUDY_WORKERS_VARIABLE, "2")  # as run_study's study_processes sets it
    default = torch.get_num_threads()

    CudaBackend().setup(rank=0, world_size=1, precision="fp32", num_workers=0)

    assert torch.get_num_threads() == max(1, default // 2)


def test_a_loader_pins_memory_only_with_workers() -> None:
    from autotune.trial.training._setup import make_loader

    data = torch.utils.data.TensorDataset(torch.zeros(8, 1, 4, 4), torch.zeros(8))
    backend = CudaBackend()  # pin_memory: with workers
    loaders = {
        workers: make_loader(
            make_trial_config(num_workers=workers, batch_size=4), data, backend, 0, 1
        )
        for workers in (0, 1)
    }

    assert loaders[0].pin_memory is False and loaders[1].pin_memory is True


@pytest.mark.gpu
def test_cuda_backend_tf32_flags() -> None:
    backend = make_backend("cuda")
    before = _torch_flags()
    backend.setup(rank=0, world_size=1, precision="fp32")
    assert _torch_flags() == before
    backend.setup(rank=0, world_size=1, precision="tf32")
    assert torch.backends.cuda.matmul.fp32_precision == "tf32"


def test_the_cuda_peak_window_restarts_after_the_warm_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append("sync"))
    monkeypatch.setattr(
        torch.cuda, "max_memory_allocated", lambda device=None: calls.append("read") or 7 << 20
    )
    monkeypatch.setattr(
        torch.cuda, "reset_peak_memory_stats", lambda device=None: calls.append("reset")
    )

    warmup_peak = CudaBackend().restart_peak_memory()

    assert warmup_peak == 7 << 20
    assert calls == ["sync", "read", "reset"]  # the warm-up's peak read before the reset
    assert CpuBackend().restart_peak_memory() is None  # one window: RSS growth since the start
