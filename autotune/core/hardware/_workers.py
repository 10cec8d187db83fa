"""Which GPUs each worker process of a study owns (``workers=N`` on ``cuda``).

Every trial of a worker trains on CUDA devices ``0 .. gpu_count-1`` of its processes. Left
alone, N workers on one machine all train on ``cuda:0`` at once: their trials share a GPU, and
each measures the others' load. So the visible GPUs are partitioned: worker ``i`` of ``N``
owns GPUs ``[i*k, (i+1)*k)`` with ``k = visible // N`` (any remainder is left idle), and its
trials run under ``CUDA_VISIBLE_DEVICES`` naming those alone (CUDA C Programming Guide, "CUDA
Environment Variables": the devices listed are the only ones visible, enumerated in the order
listed). Its capabilities are those of its ``k`` GPUs, so the space's ``gpu_count`` choices
above ``k`` are removed for it with their reason (:func:`autotune.study.feasibility.restrict_space`);
fewer GPUs than workers is refused. The GPUs are named by UUID where NVML gave them, which
no ordering of CUDA's (``CUDA_DEVICE_ORDER``) can change.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping

from autotune.core.exceptions import ConfigError
from autotune.core.hardware._capabilities import DeviceCapabilities

__all__ = [
    "STUDY_PID_VARIABLE",
    "STUDY_WORKERS_VARIABLE",
    "study_root_pid",
    "study_workers",
    "worker_share",
]

#: The environment variable naming the study's first worker process (the one the user
#: started; every other worker, its forkserver and its trials descend from it): a trial's
#: meter of other processes' CPU share counts that whole tree as the study's own.
STUDY_PID_VARIABLE = "AUTOTUNE_STUDY_PID"
#: The environment variable giving the study's worker processes on this machine: a trial's
#: ranks split the host's threads with the other workers' (``workers``).
STUDY_WORKERS_VARIABLE = "AUTOTUNE_STUDY_WORKERS"


def study_root_pid(environ: Mapping[str, str | None]) -> int | None:
    """The study's first worker process (:data:`STUDY_PID_VARIABLE`), None outside a study."""
    value = environ.get(STUDY_PID_VARIABLE)
    return int(value) if value else None


def study_workers(environ: Mapping[str, str | None]) -> int:
    """The study's worker processes on this machine (:data:`STUDY_WORKERS_VARIABLE`; 1 when
    unset)."""
    value = environ.get(STUDY_WORKERS_VARIABLE)
    return max(1, int(value)) if value else 1


def worker_share(
    caps: DeviceCapabilities,
    workers: int,
    worker_index: int,
    environ: Mapping[str, str] | None = None,
) -> DeviceCapabilities:
    """The capabilities of worker ``worker_index``'s own GPUs (the module docstring says how
    they are chosen), with ``cuda_visible_devices`` naming them; ``caps`` unchanged for one
    worker or a device other than ``cuda``.

    Args:
        caps: the device as this process sees it (every visible GPU).
        workers: worker processes of the study on this machine (``workers``).
        worker_index: this worker (0: the process the user started).
        environ: the environment whose ``CUDA_VISIBLE_DEVICES`` names the GPUs when NVML gave
            no UUIDs; ``os.environ`` when None.

    Raises:
        ConfigError: fewer visible GPUs than workers.
    """
    if caps.kind != "cuda" or workers <= 1:
        return caps
    share = caps.count // workers
    if share < 1:
        raise ConfigError(
            f"workers={workers}: device=cuda sees {caps.count} GPU"
            f"{'' if caps.count == 1 else 's'}, and each worker trains on GPUs of its own; "
            f"use workers={caps.count} or fewer"
        )
    mine = slice(worker_index * share, (worker_index + 1) * share)
    fp = caps.fingerprint
    if fp is not None and len(fp.gpus) == caps.count:
        names = [g.uuid for g in fp.gpus]
        fp = dataclasses.replace(fp, gpus=fp.gpus[mine])
    else:  # no NVML: the indices CUDA sees now, as CUDA_VISIBLE_DEVICES names them
        env = os.environ if environ is None else environ
        listed = env.get("CUDA_VISIBLE_DEVICES")
        names = (
            [e.strip() for e in listed.split(",")][: caps.count]
            if listed is not None
            else [str(i) for i in range(caps.count)]
        )
    return dataclasses.replace(
        caps,
        count=share,
        fingerprint=fp,
        cuda_visible_devices=",".join(names[mine]),
    )
