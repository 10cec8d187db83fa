"""A configuration's knobs for the export tests."""

from __future__ import annotations

from typing import Any

PARAMS: dict[str, Any] = {
    "depth": 1,
    "width": 8,
    "batch_size": 16,
    "precision": "fp32",
    "memory_format": "contiguous",
    "compile_mode": "none",
    "num_workers": 0,
    "gpu_count": 1,
}
