"""The study's record of its machine (autotune/study/search/_machine.py): the first run records the
fingerprint, another machine is refused in one line unless allowed, and an allowed change
becomes the reference."""

from __future__ import annotations

import dataclasses
from typing import Any

import optuna
import pytest

from autotune.core.exceptions import ConfigError
from autotune.core.hardware import MachineFingerprint, detect_fingerprint
from autotune.study.search import check_study_hardware
from autotune.study.trial_result import StudyAttributes
from autotune.testing.machines import simulated_machine


def _cuda(machine: str = "h100x8", **changes: Any) -> MachineFingerprint:
    fp = detect_fingerprint("cuda", nvml=simulated_machine(machine))
    return dataclasses.replace(fp, **changes)


def _study() -> optuna.Study:
    return optuna.create_study(study_name="s", directions=["maximize"])


def test_first_run_records_the_fingerprint() -> None:
    study = _study()

    check_study_hardware(study, _cuda(), allow_change=False)

    assert study.user_attrs["hardware"] == _cuda().to_dict()


def test_same_hardware_runs_again() -> None:
    study = _study()
    check_study_hardware(study, _cuda(), allow_change=False)

    check_study_hardware(study, _cuda(), allow_change=False)

    assert "hardware_changes" not in study.user_attrs


def test_other_hardware_is_refused_with_a_clear_line() -> None:
    study = _study()
    check_study_hardware(study, _cuda("h100x8"), allow_change=False)

    with pytest.raises(ConfigError) as err:
        check_study_hardware(study, _cuda("a100x4"), allow_change=False)

    message = str(err.value)
    assert message.startswith("study=s: it was measured on other hardware (gpus: 8 x NVIDIA H100")
    assert "throughputs from two machines are not comparable" in message
    assert message.endswith("or pass --allow-hardware-change")
    assert "\n" not in message


def test_allowed_change_is_recorded_and_becomes_the_reference() -> None:
    study = _study()
    check_study_hardware(study, _cuda("h100x8"), allow_change=False)
    study.optimize(lambda t: 1.0, n_trials=2)

    check_study_hardware(study, _cuda("a100x4"), allow_change=True)
    check_study_hardware(study, _cuda("a100x4"), allow_change=False)  # now the reference

    assert study.user_attrs["hardware"] == _cuda("h100x8").to_dict()  # the original stays
    assert study.user_attrs["hardware_changes"] == [
        {"from_trial": 2, "hardware": _cuda("a100x4").to_dict()}
    ]
    with pytest.raises(ConfigError):
        check_study_hardware(study, _cuda("h100x8"), allow_change=False)


def test_no_fingerprint_records_nothing() -> None:
    study = _study()

    check_study_hardware(study, None, allow_change=False)

    assert "hardware" not in study.user_attrs


def test_the_study_attributes_read_the_newest_machine_after_a_change() -> None:
    study = _study()
    check_study_hardware(study, _cuda("h100x8"), allow_change=False)
    check_study_hardware(study, _cuda("a100x4"), allow_change=True)

    attrs = StudyAttributes.from_study(study)

    assert attrs.hardware == _cuda("h100x8").to_dict()
    assert attrs.latest_hardware == _cuda("a100x4").to_dict()
