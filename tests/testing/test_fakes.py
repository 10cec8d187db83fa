"""The test helpers themselves (autotune/testing/)."""

from __future__ import annotations

import types

import pytest
from pydantic import ValidationError

import autotune.testing
from autotune.core.exceptions import TrialError
from autotune.core.hardware import detect_capabilities
from autotune.testing import (
    FakeClock,
    FakeRunTrial,
    make_capabilities,
    make_measurement,
    make_trial_config,
    simulate_trial,
)
from autotune.trial.devices.mock import simulate


def test_all_is_the_sorted_public_names() -> None:
    public = sorted(
        name
        for name, value in vars(autotune.testing).items()
        if not name.startswith("_")
        and name != "annotations"
        and not isinstance(value, types.ModuleType)  # submodules (machines) are not names
    )
    assert autotune.testing.__all__ == public


def test_fake_run_trial_plays_outcomes_then_simulates() -> None:
    canned = make_measurement(throughput_sps=1.0)
    failure = TrialError("oom", "MemoryError")
    fake = FakeRunTrial([canned, failure])
    config = make_trial_config(device="mock")

    assert fake(config) is canned
    with pytest.raises(TrialError) as err:
        fake(config)
    assert err.value is failure
    assert fake(config) == simulate(config)
    assert fake.configs == [config] * 3


def test_fake_run_trial_then() -> None:
    fake = FakeRunTrial(then=lambda config: make_measurement(steps=int(config.model["depth"])))
    assert fake(make_trial_config(depth=3)).steps == 3


def test_simulate_trial_reports_oom_like_the_runner() -> None:
    with pytest.raises(TrialError) as err:
        simulate_trial(make_trial_config(depth=3, width=64, batch_size=4096))

    assert err.value.failure == "oom"
    assert "simulated CUDA out of memory" in err.value.detail


def test_make_trial_config_merges_groups() -> None:
    config = make_trial_config(train={"lr": 0.01}, data={"val_fraction": 0.5}, precision="bf16")

    assert config.train.epochs == 1
    assert config.train.lr == 0.01
    data = config.workload.args["data"]  # the built-in workload's data settings
    assert data["name"] == "digits"
    assert data["val_fraction"] == 0.5
    assert config.precision == "bf16"


def test_make_trial_config_builds_the_builtin_workload_or_another() -> None:
    builtin = make_trial_config(family="mlp", depth=2, width=16)
    other = make_trial_config(workload={"ref": "pkg.mod:Net"}, model={"layers": 3})

    assert builtin.workload.is_builtin
    assert builtin.workload.args["family"] == "mlp"
    assert builtin.model == {"depth": 2, "width": 16}
    assert other.workload.ref == "pkg.mod:Net"
    assert other.model == {"layers": 3}


def test_make_trial_config_validates() -> None:
    with pytest.raises(ValidationError):
        make_trial_config(precision="fp8")


def test_make_measurement_overrides() -> None:
    m = make_measurement(val_metric=0.5)
    assert (m.val_metric, m.simulated) == (0.5, True)


def test_make_capabilities_per_kind() -> None:
    assert make_capabilities("cpu").compute_capability is None
    assert make_capabilities("cuda", compute_capability=(7, 0)).compute_capability == (7, 0)
    assert make_capabilities("mock") == detect_capabilities("mock")
    with pytest.raises(ValueError, match="unknown device kind 'tpu'"):
        make_capabilities("tpu")


def test_fake_clock_advances_by_the_script() -> None:
    fake = FakeClock([1.0, 2.0])

    assert [fake.clock(), fake.clock(), fake.clock(), fake.clock()] == [0.0, 1.0, 3.0, 3.0]
    fake.sync()
    assert (fake.reads, fake.syncs) == (4, 1)
