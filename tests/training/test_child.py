"""A rank's child-process body (autotune/training/_child.py): how its failure is classified."""

from __future__ import annotations

import pytest
import torch

from autotune.training._child import failure_kind

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
