"""Hardware fingerprints, the per-study record and its mismatch check, warm start, and the
``autotune hardware`` command (autotune/core/hardware/_fingerprint.py, autotune/study/search/_opening.py,
autotune/cli.py)."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import optuna
import pynvml
import pytest
import torch

from autotune.cli import main
from autotune.core.config import RunConfig, load_run_config
from autotune.core.exceptions import ConfigError, DeviceUnavailableError
from autotune.core.hardware import (
    MachineFingerprint,
    detect_fingerprint,
    fingerprint_mismatch,
    physical_cpu_cores,
)
from autotune.study.api import run_study
from autotune.testing import simulate_trial
from autotune.testing.machines import simulated_machine


def _cuda(machine: str = "h100x8", **changes: Any) -> MachineFingerprint:
    fp = detect_fingerprint("cuda", nvml=simulated_machine(machine))
    return dataclasses.replace(fp, **changes)


# --------------------------------------------------------------------------------------------
# detect_fingerprint


def test_fingerprint_of_a_fake_h100_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    fp = _cuda("h100x8")

    assert fp.device_kind == "cuda"
    assert fp.simulated is False
    assert len(fp.gpus) == 8
    assert {g.name for g in fp.gpus} == {"NVIDIA H100 80GB HBM3"}
    assert fp.gpus[0].compute_capability == (9, 0)
    assert fp.gpus[0].power_limit_w == 700.0
    assert fp.driver_version == "550.54.15"
    assert fp.torch_version == str(torch.__version__)
    assert fp.cuda_version == torch.version.cuda
    assert fp.logical_cores == os.cpu_count()
    assert 1 <= fp.physical_cores <= fp.logical_cores
    assert fp.ram_bytes is not None and fp.ram_bytes > 0


def test_fingerprint_lists_only_the_gpus_cuda_sees(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "6,2")

    fp = _cuda("h100x8")

    assert [g.index for g in fp.gpus] == [6, 2]


def test_without_nvml_the_fingerprint_has_only_the_cpu() -> None:
    fp = detect_fingerprint("auto", nvml=simulated_machine("none"))

    assert fp.device_kind == "cpu"
    assert fp.gpus == ()
    assert fp.driver_version is None
    assert fp.cpu_model != ""


@pytest.mark.parametrize("kind", ["auto", "cuda"])
def test_a_gpu_nvml_cannot_read_stops_a_gpu_study_with_one_line(kind: str) -> None:
    lost = simulated_machine("t4", failing={"nvmlDeviceGetName": pynvml.NVML_ERROR_GPU_IS_LOST})

    with pytest.raises(DeviceUnavailableError, match="nvmlDeviceGetName failed for GPU 0"):
        detect_fingerprint(kind, nvml=lost)


def test_a_cpu_study_reads_a_gpu_nvml_cannot_read_as_no_gpu() -> None:
    lost = simulated_machine("t4", failing={"nvmlDeviceGetName": pynvml.NVML_ERROR_GPU_IS_LOST})

    fp = detect_fingerprint("cpu", nvml=lost)

    assert fp.device_kind == "cpu" and fp.gpus == () and fp.driver_version is None


def test_auto_is_cuda_when_nvml_lists_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    assert detect_fingerprint("auto", nvml=simulated_machine("t4")).device_kind == "cuda"


def test_fingerprint_round_trips_through_json() -> None:
    fp = _cuda("a100x4")

    assert MachineFingerprint.from_dict(json.loads(json.dumps(fp.to_dict()))) == fp


def test_rows_show_every_gpu_and_the_cpu() -> None:
    rows = dict(_cuda("v100x1").rows())

    assert rows["GPU 0"].startswith("Tesla V100-SXM2-32GB · GPU-")
    assert "compute capability 7.0" in rows["GPU 0"]
    assert "power limit 300 W" in rows["GPU 0"]
    assert rows["CPU cores"].endswith("logical")


def test_physical_cores_from_the_topology(tmp_path: Path) -> None:
    for cpu, (package, core) in enumerate([(0, 0), (0, 0), (0, 1), (1, 0)]):  # 1 SMT pair
        topology = tmp_path / f"cpu{cpu}" / "topology"
        topology.mkdir(parents=True)
        (topology / "physical_package_id").write_text(f"{package}\n")
        (topology / "core_id").write_text(f"{core}\n")

    assert physical_cpu_cores(tmp_path) == 3


# --------------------------------------------------------------------------------------------
# fingerprint_mismatch


def test_same_machine_matches() -> None:
    assert fingerprint_mismatch(_cuda().to_dict(), _cuda().to_dict()) is None


def test_uuids_power_limits_and_ram_do_not_matter() -> None:
    a = _cuda()
    b = dataclasses.replace(
        a,
        gpus=tuple(dataclasses.replace(g, uuid="GPU-other", power_limit_w=500.0) for g in a.gpus),
        ram_bytes=1,
    )

    assert fingerprint_mismatch(a.to_dict(), b.to_dict()) is None


def test_other_gpus_mismatch() -> None:
    diff = fingerprint_mismatch(_cuda("h100x8").to_dict(), _cuda("a100x4").to_dict())

    assert diff == "gpus: 8 x NVIDIA H100 80GB HBM3 -> 4 x NVIDIA A100-SXM4-80GB"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("driver_version", "535.0"),
        ("cudnn_version", "90100"),
        ("torch_version", "2.99.0"),
        ("cpu_model", "Other CPU"),
        ("logical_cores", 999),
    ],
)
def test_software_and_host_changes_mismatch_on_cuda(field: str, value: Any) -> None:
    diff = fingerprint_mismatch(_cuda().to_dict(), _cuda(**{field: value}).to_dict())

    assert diff is not None and diff.startswith(f"{field}: ")


def test_a_cpu_study_ignores_the_gpus_and_driver() -> None:
    cpu = dataclasses.replace(_cuda(), device_kind="cpu")
    other_gpus = dataclasses.replace(_cuda("t4"), device_kind="cpu", driver_version="1.0")

    assert fingerprint_mismatch(cpu.to_dict(), other_gpus.to_dict()) is None


def test_mock_profiles_mismatch_by_profile_only() -> None:
    h100 = detect_fingerprint("mock", mock_profile="h100")
    h100_elsewhere = dataclasses.replace(h100, torch_version="0.0", cpu_model="x")
    a100 = detect_fingerprint("mock", mock_profile="a100")

    assert fingerprint_mismatch(h100.to_dict(), h100_elsewhere.to_dict()) is None
    diff = fingerprint_mismatch(h100.to_dict(), a100.to_dict())
    assert diff is not None and "mock_profile: h100 -> a100" in diff


# --------------------------------------------------------------------------------------------
# Through run_study (mock profiles: a different simulated machine per profile)


def _mock_run(sqlite_url: str, *args: str) -> RunConfig:
    return load_run_config(["device=mock", f"storage={sqlite_url}", "study=s", *args])


def test_study_records_its_hardware(sqlite_url: str) -> None:
    run_study(_mock_run(sqlite_url, "mock.profile=h100"), 2, run_trial_fn=simulate_trial)

    study = optuna.load_study(study_name="s", storage=sqlite_url)
    hardware = study.user_attrs["hardware"]
    assert hardware["simulated"] is True
    assert hardware["mock_profile"] == "h100"
    assert len(hardware["gpus"]) == 8


def test_resuming_on_other_hardware_is_refused_unless_allowed(sqlite_url: str) -> None:
    run_study(_mock_run(sqlite_url, "mock.profile=h100"), 2, run_trial_fn=simulate_trial)

    with pytest.raises(ConfigError, match=r"^study=s: it was measured on other hardware"):
        run_study(_mock_run(sqlite_url, "mock.profile=a100"), 4, run_trial_fn=simulate_trial)
    assert len(optuna.load_study(study_name="s", storage=sqlite_url).trials) == 2

    result = run_study(
        _mock_run(sqlite_url, "mock.profile=a100", "allow_hardware_change=true"),
        4,
        run_trial_fn=simulate_trial,
    )

    assert result.finished == 4
    changes = optuna.load_study(study_name="s", storage=sqlite_url).user_attrs["hardware_changes"]
    assert [c["from_trial"] for c in changes] == [2]
    assert changes[0]["hardware"]["mock_profile"] == "a100"


# --------------------------------------------------------------------------------------------
# Warm start


def test_warm_start_enqueues_the_other_studys_pareto_front_first(sqlite_url: str) -> None:
    run_study(
        _mock_run(sqlite_url, "mock.profile=h100", "study=h100"),
        12,
        run_trial_fn=simulate_trial,
    )
    source = optuna.load_study(study_name="h100", storage=sqlite_url)
    front = sorted(source.best_trials, key=lambda t: t.number)
    assert front

    run_study(
        _mock_run(sqlite_url, "mock.profile=v100", "study=v100", "warm_start=h100"),
        len(front) + 2,
        run_trial_fn=simulate_trial,
    )

    study = optuna.load_study(study_name="v100", storage=sqlite_url)
    warm = [t for t in study.trials if "warm_start_from" in t.user_attrs]
    assert [t.user_attrs["warm_start_from"] for t in warm] == [f"h100#{t.number}" for t in front][
        : len(warm)
    ]
    assert [t.number for t in warm] == list(range(len(warm)))  # they run first
    for trial, origin in zip(warm, front, strict=False):
        # What the V100 cannot run (bf16, tf32, 2 GPUs) is left to the sampler.
        for knob, value in origin.params.items():
            if knob == "precision" and value in ("bf16", "tf32"):
                assert trial.params[knob] in ("fp32", "fp16")
            elif knob == "gpu_count":
                assert trial.params[knob] == 1
            else:
                assert trial.params[knob] == value


def test_warm_start_from_a_missing_study_writes_nothing(tmp_path: Path, sqlite_url: str) -> None:
    with pytest.raises(ConfigError, match=r"^warm_start=nope: no such study in storage="):
        run_study(_mock_run(sqlite_url, "warm_start=nope"), 2, run_trial_fn=simulate_trial)

    assert list(tmp_path.iterdir()) == []  # no database file, not even its directory


def test_warm_start_from_itself_is_refused(sqlite_url: str) -> None:
    with pytest.raises(ConfigError, match=r"^warm_start=s: must name another study"):
        run_study(_mock_run(sqlite_url, "warm_start=s"), 2, run_trial_fn=simulate_trial)


# --------------------------------------------------------------------------------------------
# autotune hardware


def test_hardware_command_prints_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hardware", "--json"]) == 0

    fp = json.loads(capsys.readouterr().out)
    assert fp["cpu_model"] != ""
    assert fp["logical_cores"] == os.cpu_count()
    assert fp["device_kind"] == ("cuda" if fp["gpus"] else "cpu")


def test_hardware_command_prints_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hardware"]) == 0

    out = capsys.readouterr().out
    assert "Hardware fingerprint" in out
    assert "CPU cores" in out and "RAM" in out


def test_hardware_command_shows_a_mock_profile(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hardware", "--json", "--mock-profile", "v100"]) == 0

    fp = json.loads(capsys.readouterr().out)
    assert fp["simulated"] is True
    assert [g["name"] for g in fp["gpus"]] == ["Tesla V100-SXM2-32GB"]


def test_hardware_command_refuses_an_unknown_profile(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hardware", "--mock-profile", "tpu"]) == 2

    err = capsys.readouterr().err
    assert err == (
        "autotune: error: mock.profile=tpu: unknown profile "
        "(known: default, h100, a100, v100, t4, cpu)\n"
    )


def test_run_refuses_other_hardware_and_takes_the_flag(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run_study(_mock_run(sqlite_url, "mock.profile=h100"), 2, run_trial_fn=simulate_trial)
    args = ["run", "device=mock", "mock.profile=a100", f"storage={sqlite_url}", "study=s"]

    assert main([*args, "--trials", "2"]) == 2
    assert "it was measured on other hardware" in capsys.readouterr().err

    # The study already holds 2 trials: nothing runs, only the change is recorded.
    assert main([*args, "--trials", "2", "--allow-hardware-change"]) == 0
    study = optuna.load_study(study_name="s", storage=sqlite_url)
    assert study.user_attrs["hardware_changes"][0]["hardware"]["mock_profile"] == "a100"


def test_the_verification_of_a_run_does_not_check_the_machine_again(sqlite_url: str) -> None:
    """``run_study`` checked the machine when it opened the study (``open_study``), so the
    verification it hands the study to does not check it a second time; ``autotune verify``
    (no such hand-over) does."""
    from autotune.core.exceptions import VerificationError
    from autotune.study.api._verify import verify_open_study
    from autotune.study.search import check_study_hardware
    from autotune.study.storage import ResultsStore, open_storage
    from autotune.testing import make_capabilities

    study = optuna.create_study(
        storage=open_storage(sqlite_url),  # creates the database's directory
        study_name="hw",
        directions=["maximize", "maximize", "minimize"],
    )
    study.set_user_attr("autotune", {"device_kind": "cuda"})
    check_study_hardware(study, _cuda("h100x8"), allow_change=False)  # measured on an H100
    here = dataclasses.replace(make_capabilities("cuda"), fingerprint=_cuda("a100x4"))
    settings = load_run_config(["device=mock"]).verify_settings

    with ResultsStore.open(sqlite_url) as results:
        with pytest.raises(ConfigError, match="other hardware"):
            verify_open_study(study, results, settings=settings, capabilities=here)
        # Past the machine's check: the study has no trials to verify.
        with pytest.raises(VerificationError):
            verify_open_study(
                study, results, settings=settings, capabilities=here, hardware_checked=True
            )
