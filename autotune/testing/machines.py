"""The simulated machines tests name: the GPUs of the ``mock`` device's profiles
(:data:`autotune.core.hardware.simulated.PROFILES`, where the datasheet sources are), so tests and
the simulation see the same hardware, each read through a
:class:`~autotune.core.hardware.simulated.SimulatedNvml`.

:class:`~autotune.core.hardware.simulated.SimulatedNvml` answers the calls autotune makes of
``pynvml`` (nvidia-ml-py), with the same names, arguments, units and errors (memory in bytes,
power in milliwatts, energy in millijoules since the driver loaded, utilization in percent). A
test passes it where autotune would import ``pynvml``. Its load is set by the test
(:meth:`~autotune.core.hardware.simulated.SimulatedNvml.set_load`); its energy counter integrates
power over an injectable clock.

Machines (:data:`SIMULATED_MACHINES`):

- ``h100x8``: 8 x "NVIDIA H100 80GB HBM3" (SXM5), 81,559 MiB, compute capability 9.0, 700 W.
- ``a100x4``: 4 x "NVIDIA A100-SXM4-80GB", 81,920 MiB, compute capability 8.0, 400 W.
- ``v100x1``: 1 x "Tesla V100-SXM2-32GB", 32,768 MiB, compute capability 7.0, 300 W.
- ``t4``: 1 x "Tesla T4", 15,360 MiB, compute capability 7.5, 70 W.
- ``none``: no NVIDIA driver: ``nvmlInit`` raises ``NVMLError_DriverNotLoaded``.
"""

from __future__ import annotations

from typing import Any

from autotune.core.hardware.simulated import PROFILES, SimulatedGpu, SimulatedNvml

__all__ = ["SIMULATED_MACHINES", "simulated_machine"]


def _gpus_of(profile: str) -> tuple[SimulatedGpu, ...]:
    gpus = PROFILES[profile].nvml().gpus
    assert gpus, profile
    return gpus


#: The simulated machines tests use, by name: the GPUs of each (an empty tuple: no NVIDIA driver).
SIMULATED_MACHINES: dict[str, tuple[SimulatedGpu, ...]] = {
    "h100x8": _gpus_of("h100"),
    "a100x4": _gpus_of("a100"),
    "v100x1": _gpus_of("v100"),
    "t4": _gpus_of("t4"),
    "none": (),
}


def simulated_machine(name: str, **kwargs: Any) -> SimulatedNvml:
    """The NVML of one of :data:`SIMULATED_MACHINES` (``h100x8``, ``a100x4``, ...).

    Args:
        name: the machine.
        **kwargs: :class:`SimulatedNvml`'s keyword arguments (``clock=``, ``unsupported=``, ...).

    Raises:
        KeyError: for an unknown machine name.
    """
    return SimulatedNvml(SIMULATED_MACHINES[name], **kwargs)
