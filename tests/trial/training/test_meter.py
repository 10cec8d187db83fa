"""The measuring core's throughput floor (autotune/trial/training/_meter.py): which steps are
evidence of a trial too slow to finish. A fake host clock; nothing is timed."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from autotune.testing import make_trial_config
from autotune.trial.devices.cpu import CpuBackend
from autotune.trial.measure import plan_windows
from autotune.trial.training._door import DoorKnobs
from autotune.trial.training._meter import ThroughputFloor


def _driven(floor: ThroughputFloor, now: list[float]) -> Callable[[int, float], bool]:
    def after(step: int, seconds: float) -> bool:
        now[0] += seconds
        return floor.crossed_early(step)

    return after


def test_the_cuda_graph_recording_step_is_no_evidence_of_a_slow_trial() -> None:
    # reduce-overhead on CUDA: step 1 compiles, step 2 records the graphs (seconds), then
    # steps of 10 ms, far above 100 samples/s at 64 samples a step.
    plan = plan_windows(88, warmup_steps=5, windows=5, compiled=True, compile_steps=2)
    now = [0.0]
    floor = ThroughputFloor(100.0, plan, 64, world_size=1, clock=lambda: now[0])
    after = _driven(floor, now)

    assert floor.evidence_start_step == 2
    assert not after(1, 30.0)  # compilation
    assert not after(2, 5.0)  # the recording: 5 s, which step 1's clock would have judged
    assert not any(after(step, 0.01) for step in range(3, 21))
    assert floor.evidence() == (18, pytest.approx(0.18))


def test_a_doors_flop_counted_step_is_no_evidence_of_a_slow_trial() -> None:
    plan = plan_windows(88, warmup_steps=5, windows=5)
    now = [0.0]
    floor = ThroughputFloor(100.0, plan, 64, world_size=1, clock=lambda: now[0], excluded_step=5)
    after = _driven(floor, now)

    assert not after(1, 1.0)
    assert not any(after(step, 0.01) for step in (2, 3, 4))
    assert not after(5, 3.0)  # counted under FlopCounterMode: slow, and left out
    assert not any(after(step, 0.01) for step in range(6, 21))
    assert floor.evidence() == (18, pytest.approx(0.18))
    # A trial truly below the floor still stops, its FLOP step left out of the evidence.
    now = [0.0]
    floor = ThroughputFloor(200.0, plan, 64, world_size=1, clock=lambda: now[0], excluded_step=5)
    after = _driven(floor, now)
    assert not after(1, 1.0)
    assert not any(after(step, 0.5) for step in (2, 3, 4))  # 1.5 s: under 2 s
    assert not after(5, 3.0)  # the FLOP step alone does not decide
    assert after(6, 0.5)  # 4 steady steps in 2 s: 128 samples/s < 200
    assert floor.evidence() == (4, pytest.approx(2.0))


def test_a_doors_meter_leaves_its_flop_step_out_of_the_floors_evidence() -> None:
    config = make_trial_config(min_throughput_sps=100.0, train={"epochs": 4})
    meter = DoorKnobs(config, CpuBackend(), 0, 1).meter(steps_per_epoch=22)

    assert meter.floor is not None and meter.flops_step is not None
    assert meter.floor.excluded_step == meter.flops_step
    assert meter.floor.evidence_start_step == 1
