"""The main job's baseline as trial fields, for the benchmarks that train it in full
(evidence.py, ground_truth.py): the built-in CNN (depth 3, width 16, batch 64, fp32,
contiguous, eager, no workers, one process, AdamW at 3e-3) on the shipped MNIST test set."""

from __future__ import annotations

from typing import Any


def main_job_trial(epochs: int) -> dict[str, Any]:
    """The baseline's fields over ``epochs`` passes (the main job: 3)."""
    from autotune.core.config import BUILTIN_WORKLOAD_REF, DataSettings

    return {
        "device": "cpu",
        "workload": {
            "ref": BUILTIN_WORKLOAD_REF,
            "args": {"family": "cnn", "data": DataSettings(name="mnist").model_dump()},
        },
        "model": {"depth": 3, "width": 16},
        "batch_size": 64,
        "precision": "fp32",
        "memory_format": "contiguous",
        "compile_mode": "none",
        "num_workers": 0,
        "gpu_count": 1,
        "train": {"epochs": epochs, "lr": 3.0e-3, "warmup_steps": 5},
    }
