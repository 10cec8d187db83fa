"""The measuring core (autotune/trial/training/_meter.py): how a door's meter builds its
throughput floor (the floor's rule itself: tests/trial/measure/test_floor.py)."""

from __future__ import annotations

from autotune.testing import make_trial_config
from autotune.trial.devices.cpu import CpuBackend
from autotune.trial.training._door import DoorKnobs


def test_a_doors_meter_leaves_its_flop_step_out_of_the_floors_evidence() -> None:
    config = make_trial_config(min_throughput_sps=100.0, train={"epochs": 4})
    meter = DoorKnobs(config, CpuBackend(), 0, 1).meter(steps_per_epoch=22)

    assert meter.floor is not None and meter.flops_step is not None
    assert meter.floor.excluded_step == meter.flops_step
    assert meter.floor.evidence_start_step == 1
