"""Builders of valid value objects with small defaults; a test overrides only what it checks."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from autotune.core.config import BUILTIN_WORKLOAD_REF, DataSettings, TrialConfig
from autotune.core.hardware import DeviceCapabilities, detect_capabilities
from autotune.core.units import MIB
from autotune.trial.measure import Measurement

__all__ = ["make_capabilities", "make_measurement", "make_trial_config"]

_GIB = 1 << 30

#: The smallest useful trial: one conv block of 8 channels, one epoch of digits (22 steps of 64).
_TRIAL_DEFAULTS: dict[str, Any] = {
    "device": "cpu",
    "family": "cnn",
    "depth": 1,
    "width": 8,
    "batch_size": 64,
    "precision": "fp32",
    "memory_format": "contiguous",
    "compile_mode": "none",
    "num_workers": 0,
    "gpu_count": 1,
    "seed": 0,
    "train": {"epochs": 1},  # seconds on a CPU, not minutes
    "data": {"name": "digits"},
    "measure": {},
}
_GROUPS = ("train", "data", "measure")


def make_trial_config(**overrides: Any) -> TrialConfig:
    """A valid :class:`TrialConfig`: a 1-block, width-8 CNN, one epoch of digits, batch 64,
    fp32, contiguous, eager, no workers, one process, on ``cpu``.

    Args:
        **overrides: any ``TrialConfig`` field. ``train``, ``data`` and ``measure`` may be
            mappings; they are merged onto the defaults (``train={"lr": 0.01}`` keeps
            ``epochs=1``). The built-in model is set with ``family``, ``depth``, ``width``
            and ``data`` (the built-in workload's arguments and model knobs); ``workload``
            and ``model`` set another workload instead.

    Raises:
        pydantic.ValidationError: an override breaks a field's rule.
    """
    fields = {k: dict(v) if isinstance(v, dict) else v for k, v in _TRIAL_DEFAULTS.items()}
    for key, value in overrides.items():
        if key in _GROUPS and isinstance(value, Mapping):
            fields[key] = {**fields[key], **value}
        else:
            fields[key] = value
    family, data = fields.pop("family"), fields.pop("data", {})
    depth, width = fields.pop("depth"), fields.pop("width")
    if "workload" not in overrides:  # the built-in workload, its model knobs by name
        fields["model"] = {"depth": depth, "width": width}
        fields["workload"] = {
            "ref": BUILTIN_WORKLOAD_REF,
            "args": {"family": family, "data": DataSettings.model_validate(data).model_dump()},
        }
    return TrialConfig.model_validate(fields)


def make_measurement(**overrides: Any) -> Measurement:
    """A plausible :class:`Measurement` (1,000 samples/s, 90 % accuracy, 8 MiB peak).

    It is marked ``simulated=True`` unless overridden: no training produced it.

    Args:
        **overrides: any ``Measurement`` field.
    """
    fields: dict[str, Any] = {
        "throughput_sps": 1000.0,
        "throughput_iqr_sps": 10.0,
        "step_time_s": 0.064,
        "step_time_p90_s": 0.07,
        "compile_s": 0.0,
        "peak_memory_bytes": 8 * MIB,
        "val_metric": 0.9,
        "train_loss": 0.3,
        "train_s": 1.5,
        "steps": 22,
        "timed_steps": 15,
        "samples_per_step": 64,
        "parameters": 1000,
        "memory_kind": "simulated",
        "simulated": True,
        "window_throughputs_sps": (1000.0,) * 5,
    }
    fields.update(overrides)
    return Measurement(**fields)


def make_capabilities(kind: str = "cuda", **overrides: Any) -> DeviceCapabilities:
    """Capabilities of a fake device, for feasibility rules without the hardware.

    Defaults per kind: ``cuda`` is one 16 GiB GPU of compute capability 8.0; ``cpu`` is two
    cores with 8 GiB; ``mock`` is the mock device's default profile.

    Args:
        kind: ``cuda``, ``cpu`` or ``mock``.
        **overrides: any ``DeviceCapabilities`` field (``compute_capability=(7, 0)``,
            ``count=4``, ``memory_bytes=None``, ...).

    Raises:
        ValueError: an unknown kind.
    """
    if kind == "mock":
        return dataclasses.replace(detect_capabilities("mock"), **overrides)
    if kind == "cuda":
        base = DeviceCapabilities("cuda", "fake GPU", 1, 16 * _GIB, (8, 0))
    elif kind == "cpu":
        base = DeviceCapabilities("cpu", "fake CPU", 2, 8 * _GIB, None)
    else:
        raise ValueError(f"unknown device kind {kind!r} (known: cpu, cuda, mock)")
    return dataclasses.replace(base, **overrides)
