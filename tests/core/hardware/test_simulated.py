"""Mock profiles: simulated H100/A100/V100/T4 machines and a CPU, seen through their simulated
NVML (autotune/core/hardware/simulated.py, autotune/core/hardware.py, autotune/trial/devices/mock.py)."""

from __future__ import annotations

import collections
import itertools
import typing
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from autotune.cli import main
from autotune.core.config import load_run_config, load_space
from autotune.core.config._settings import MockProfileName
from autotune.core.exceptions import ConfigError
from autotune.core.flops import published_peak
from autotune.core.hardware import detect_capabilities
from autotune.core.hardware.simulated import DEFAULT_PROFILE, PROFILE_NAMES, get_profile
from autotune.core.nvml import read_nvml
from autotune.core.units import MIB
from autotune.study.api import run_study
from autotune.study.feasibility import restrict_space, trial_infeasibility_reason
from autotune.testing import make_trial_config, simulate_trial
from autotune.testing.machines import SIMULATED_MACHINES
from autotune.trial.devices.mock import simulate


def _mock(profile: str, **overrides: object):
    return make_trial_config(device="mock", mock_profile=profile, **overrides)


def test_profile_names_match_the_config_choices() -> None:
    assert typing.get_args(MockProfileName) == PROFILE_NAMES


@pytest.mark.parametrize(
    ("profile", "machine"),
    [("h100", "h100x8"), ("a100", "a100x4"), ("v100", "v100x1"), ("t4", "t4")],
)
def test_gpu_profiles_are_the_simulated_machines(profile: str, machine: str) -> None:
    caps = detect_capabilities("mock", mock_profile=profile)
    gpus = SIMULATED_MACHINES[machine]

    assert caps.kind == "mock"
    assert caps.simulated is True
    assert "simulated" in caps.name
    assert caps.is_gpu is True
    assert caps.count == len(gpus)
    assert caps.memory_bytes == gpus[0].memory_bytes
    assert caps.compute_capability == gpus[0].compute_capability
    peak = published_peak(gpus[0].name)
    assert peak is not None and caps.peak_flops_per_s == peak.flops_per_s
    assert caps.peak_flops_source.startswith("SIMULATED profile rates: NVIDIA")


def test_profiles_are_read_through_their_simulated_nvml() -> None:
    info = read_nvml(get_profile("h100").nvml())

    assert info is not None
    assert [g.name for g in info.gpus] == ["NVIDIA H100 80GB HBM3"] * 8
    assert info.gpus[0].memory_bytes == 81559 * MIB


def test_cpu_profile_has_no_gpu() -> None:
    caps = detect_capabilities("mock", mock_profile="cpu")

    assert read_nvml(get_profile("cpu").nvml()) is None
    assert caps.is_gpu is False
    assert caps.compute_capability is None
    assert caps.count == 16
    assert caps.memory_bytes == 64 << 30
    assert "tf32" not in caps.peak_flops_per_s
    assert caps.fingerprint is not None and caps.fingerprint.gpus == ()


def test_default_profile_is_a_small_gpu() -> None:
    assert get_profile("default") is DEFAULT_PROFILE
    assert DEFAULT_PROFILE.memory_bytes == 64 * MIB
    assert detect_capabilities("mock").fingerprint.mock_profile == "default"  # type: ignore[union-attr]


def test_unknown_profile_is_one_line_config_error() -> None:
    with pytest.raises(ConfigError, match=r"^mock.profile=tpu: unknown profile \(known: default"):
        get_profile("tpu")
    with pytest.raises(ConfigError) as err:
        load_run_config(["device=mock", "mock.profile=tpu"])
    assert str(err.value).startswith("override mock.profile=tpu: mock.profile: Input should be")


def test_unknown_profile_on_the_command_line_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    storage = f"sqlite:///{tmp_path / 'db' / 'a.db'}"

    assert main(["run", "device=mock", "mock.profile=tpu", f"storage={storage}"]) == 2

    err = capsys.readouterr().err
    assert err.startswith("autotune: error: override mock.profile=tpu: mock.profile:")
    assert err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------------------------
# Feasibility on the profiles


def test_v100_space_loses_bf16_tf32_and_the_second_gpu() -> None:
    space, removed = restrict_space(
        load_space("cnn_small"), detect_capabilities("mock", mock_profile="v100")
    )

    assert space.precision.values() == ["fp32", "fp16"]
    assert space.gpu_count.values() == [1]
    assert [line.split(":")[0] for line in removed] == [
        "precision=tf32",
        "precision=bf16",
        "gpu_count=2",
    ]
    assert "needs CUDA compute capability >= 8.0, but 1 x Tesla V100-SXM2-32GB" in removed[0]


def test_t4_has_compute_capability_7_5() -> None:
    reason = trial_infeasibility_reason(
        _mock("t4", precision="bf16"), detect_capabilities("mock", mock_profile="t4")
    )

    assert reason is not None and "has 7.5" in reason


def test_cpu_profile_follows_the_cpu_rules() -> None:
    caps = detect_capabilities("mock", mock_profile="cpu")

    assert trial_infeasibility_reason(_mock("cpu", precision="tf32"), caps) == (
        "tf32 is a CUDA tensor-core mode; the CPU has no TF32"
    )
    assert trial_infeasibility_reason(_mock("cpu", compile_mode="reduce-overhead"), caps) == (
        "compile mode reduce-overhead uses CUDA graphs and needs a CUDA device"
    )
    assert trial_infeasibility_reason(_mock("cpu", gpu_count=17), caps) == (
        "gpu_count=17 exceeds the 16 CPU cores of 16-core AVX-512 CPU, 64 GiB (simulated)"
    )
    assert trial_infeasibility_reason(_mock("cpu", precision="bf16", gpu_count=16), caps) is None


def test_h100_runs_all_of_cnn_small() -> None:
    space = load_space("cnn_small")

    restricted, removed = restrict_space(space, detect_capabilities("mock", mock_profile="h100"))

    assert removed == []
    assert restricted == space


def test_default_profile_stays_out_of_memory_prone() -> None:
    """Over a slice of cnn_small on its default data (the shipped MNIST), the memory rule
    prunes the hopeless configurations and leaves some that still run out of memory (the
    demo needs both)."""
    caps = detect_capabilities("mock")
    outcomes: collections.Counter[str] = collections.Counter()
    for depth, width, batch, precision in itertools.product(
        (1, 2, 3), (8, 16, 32, 64), (16, 32, 64, 128, 256), ("fp32", "bf16")
    ):
        config = _mock(
            "default",
            depth=depth,
            width=width,
            batch_size=batch,
            precision=precision,
            data={"name": "mnist"},
        )
        if trial_infeasibility_reason(config, caps) is not None:
            outcomes["pruned"] += 1
            continue
        try:
            simulate(config)
            outcomes["ok"] += 1
        except MemoryError:
            outcomes["oom"] += 1

    assert outcomes["ok"] > outcomes["oom"] > 0
    assert outcomes["pruned"] > 0


# --------------------------------------------------------------------------------------------
# What the simulation reports


def test_simulation_uses_the_profile_the_config_names() -> None:
    config = _mock("h100", depth=3, width=64, batch_size=256)

    with pytest.raises(MemoryError, match=r"simulated CUDA out of memory"):
        simulate(config.model_copy(update={"mock_profile": "default"}))
    h100 = simulate(config)
    t4 = simulate(config.model_copy(update={"mock_profile": "t4"}))

    assert h100.throughput_sps > t4.throughput_sps


def test_simulation_reports_flops_power_and_energy_marked_simulated() -> None:
    m = simulate(_mock("a100", width=32, batch_size=128, gpu_count=2))

    assert m.simulated is True
    assert m.extra["simulated_figures"] is True
    assert m.extra["flops_per_sample"] > 0
    assert 0 < m.extra["gpu_utilization_pct"] <= 100
    assert 2 * 55.0 <= m.extra["gpu_power_w"] <= 2 * 400.0  # two GPUs, idle .. power limit
    assert m.extra["energy_j_per_sample"] == pytest.approx(
        m.extra["gpu_power_w"] / m.throughput_sps
    )


def test_cpu_profile_reports_no_gpu_figures() -> None:
    m = simulate(_mock("cpu", precision="bf16"))

    assert "flops_per_sample" in m.extra
    assert "gpu_power_w" not in m.extra and "energy_j_per_sample" not in m.extra


def test_a_precision_the_device_lacks_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"^precision bf16 is not supported by 1 x Tesla V100"):
        simulate(_mock("v100", precision="bf16"))


# --------------------------------------------------------------------------------------------
# Done-criterion 1: `autotune run space=cnn_small --trials 30 device=mock mock.profile=v100`


def test_v100_study_completes_no_bf16_or_tf32_trial(sqlite_url: str) -> None:
    config = load_run_config(
        ["space=cnn_small", "device=mock", "mock.profile=v100", f"storage={sqlite_url}"]
    )
    result = run_study(config, 12, run_trial_fn=simulate_trial)

    assert result.finished == 12
    assert any(
        line.startswith("precision=bf16: bf16 needs CUDA compute capability >= 8.0")
        for line in result.removed_choices
    )
    assert any(
        line.startswith("precision=tf32: tf32 needs CUDA compute capability >= 8.0")
        for line in result.removed_choices
    )
    trials = optuna.load_study(study_name="cnn_small", storage=sqlite_url).trials
    assert all(t.params["precision"] in ("fp32", "fp16") for t in trials)
    assert all(t.state == TrialState.COMPLETE for t in trials)
    for t in trials:
        if t.user_attrs.get("failure") == "infeasible":
            assert t.user_attrs["failure_detail"]
            assert t.constraints["failed"] == 1.0


@pytest.mark.slow
def test_v100_run_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    storage = f"sqlite:///{tmp_path / 'a.db'}"

    code = main(
        [
            "run",
            "space=cnn_small",
            "--trials",
            "30",
            "device=mock",
            "mock.profile=v100",
            f"storage={storage}",
        ]
    )

    assert code == 0
    out = capsys.readouterr().out
    assert "skipped precision=bf16: bf16 needs CUDA compute capability >= 8.0" in out
    assert "skipped precision=tf32: tf32 needs CUDA compute capability >= 8.0" in out
    assert "MFU peak per GPU: fp32 15.7 TFLOP/s, fp16 125 TFLOP/s" in out
    study = optuna.load_study(study_name="cnn_small", storage=storage)
    assert len(study.trials) == 30
    assert all(t.state == TrialState.COMPLETE for t in study.trials)
    assert all(t.params["precision"] in ("fp32", "fp16") for t in study.trials)
