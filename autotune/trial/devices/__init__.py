"""Devices: ``cpu`` and ``cuda`` train for real; ``mock`` is a simulation for tests and demos."""

from __future__ import annotations

from autotune.trial.devices.base import Backend

__all__ = ["Backend", "make_backend"]


def make_backend(kind: str) -> Backend:
    """The backend of a real device kind (``cpu`` or ``cuda``).

    Raises:
        ValueError: for ``mock`` (it has no training backend; see :mod:`autotune.trial.devices.mock`)
            or an unknown kind.
    """
    if kind == "cpu":
        from autotune.trial.devices.cpu import CpuBackend

        return CpuBackend()
    if kind == "cuda":
        from autotune.trial.devices.cuda import CudaBackend

        return CudaBackend()
    raise ValueError(f"no training backend for device kind {kind!r} (real kinds: cpu, cuda)")
