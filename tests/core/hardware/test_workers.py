"""The GPUs each worker of a study owns (autotune/core/hardware/_workers.py), on fake machines."""

from __future__ import annotations

import pytest

from autotune.core.exceptions import ConfigError
from autotune.core.hardware import (
    DeviceCapabilities,
    detect_fingerprint,
    worker_share,
)
from autotune.core.hardware._capabilities import (
    capabilities_from_fingerprint,
)
from autotune.testing import make_capabilities
from autotune.testing.machines import simulated_machine


@pytest.fixture
def a100x4(monkeypatch: pytest.MonkeyPatch) -> DeviceCapabilities:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return capabilities_from_fingerprint(
        detect_fingerprint("cuda", nvml=simulated_machine("a100x4"))
    )


def test_workers_own_disjoint_gpus_named_by_uuid(a100x4: DeviceCapabilities) -> None:
    assert a100x4.fingerprint is not None
    uuids = [g.uuid for g in a100x4.fingerprint.gpus]

    shares = [worker_share(a100x4, 2, i) for i in range(2)]

    assert [s.count for s in shares] == [2, 2]
    assert [s.cuda_visible_devices for s in shares] == [",".join(uuids[:2]), ",".join(uuids[2:])]
    assert [[g.uuid for g in s.fingerprint.gpus] for s in shares if s.fingerprint] == [
        uuids[:2],
        uuids[2:],
    ]
    # Every worker has the same comparable hardware (4 GPUs alike: 2 x A100 each).
    assert shares[0].fingerprint is not None and shares[1].fingerprint is not None
    assert shares[0].fingerprint.comparable() == shares[1].fingerprint.comparable()


def test_a_remainder_gpu_stays_idle(a100x4: DeviceCapabilities) -> None:
    shares = [worker_share(a100x4, 3, i) for i in range(3)]

    assert [s.count for s in shares] == [1, 1, 1]
    assert len({s.cuda_visible_devices for s in shares}) == 3  # GPU 3 is no one's


def test_without_nvml_the_gpus_are_named_as_cuda_sees_them() -> None:
    caps = make_capabilities("cuda", count=4)  # no fingerprint: torch counted them

    assert worker_share(caps, 2, 1, environ={}).cuda_visible_devices == "2,3"
    listed = {"CUDA_VISIBLE_DEVICES": "7,5,3,1"}
    assert worker_share(caps, 2, 1, environ=listed).cuda_visible_devices == "3,1"


def test_fewer_gpus_than_workers_is_refused() -> None:
    caps = make_capabilities("cuda", count=2)

    with pytest.raises(ConfigError) as err:
        worker_share(caps, 3, 0)

    assert str(err.value) == (
        "workers=3: device=cuda sees 2 GPUs, and each worker trains on GPUs of its own; "
        "use workers=2 or fewer"
    )


@pytest.mark.parametrize(
    ("caps", "workers"),
    [(make_capabilities("cuda", count=4), 1), (make_capabilities("cpu"), 2)],
)
def test_one_worker_or_the_cpu_keeps_everything(caps: DeviceCapabilities, workers: int) -> None:
    assert worker_share(caps, workers, 0) is caps
