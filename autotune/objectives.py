"""From a :class:`~autotune.measure.Measurement` to objective and constraint values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from autotune.measure import Measurement

__all__ = ["OBJECTIVES", "Objective", "failed_values", "objective_values"]


@dataclass(frozen=True)
class Objective:
    """One objective: the user attribute it reads, Optuna's direction, and a display unit."""

    name: str
    direction: Literal["maximize", "minimize"]
    label: str


#: The three objectives, in the order Optuna stores values.
OBJECTIVES: tuple[Objective, ...] = (
    Objective("throughput_sps", "maximize", "throughput (samples/s)"),
    Objective("val_accuracy", "maximize", "validation accuracy"),
    Objective("peak_memory_bytes", "minimize", "peak memory (bytes)"),
)


def objective_values(measurement: Measurement) -> tuple[float, float, float]:
    """``(throughput_sps, val_accuracy, peak_memory_bytes)`` in :data:`OBJECTIVES` order."""
    return (
        measurement.throughput_sps,
        measurement.val_accuracy,
        float(measurement.peak_memory_bytes),
    )


def failed_values(memory_limit_bytes: int | None) -> tuple[float, float, float]:
    """Values for a trial that produced no measurement (out of memory, error, crash, timeout).

    The trial is also marked infeasible, so it never reaches the Pareto front; these values
    only need to be the worst of their kind: zero throughput, zero accuracy, and the device's
    memory (or 0 when unknown) as the memory it would have needed at least.
    """
    return 0.0, 0.0, float(memory_limit_bytes or 0)
