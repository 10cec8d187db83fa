"""Device capabilities and device resolution (autotune/core/hardware/_capabilities.py)."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pynvml
import pytest
import torch

from autotune.core.exceptions import ConfigError, DeviceUnavailableError
from autotune.core.hardware import (
    cpu_model_name,
    detect_capabilities,
    detect_fingerprint,
    resolve_device,
)
from autotune.core.hardware._capabilities import (
    capabilities_from_fingerprint,
)
from autotune.core.units import MIB
from autotune.testing.machines import simulated_machine

# --------------------------------------------------------------------------------------------
# Capabilities from a fingerprint


def test_capabilities_of_a_fake_v100_come_from_nvml_and_the_peak_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    caps = capabilities_from_fingerprint(
        detect_fingerprint("cuda", nvml=simulated_machine("v100x1"))
    )

    assert caps.kind == "cuda"
    assert caps.name == "Tesla V100-SXM2-32GB"
    assert caps.count == 1
    assert caps.memory_bytes == 32768 * MIB
    assert caps.compute_capability == (7, 0)
    assert caps.peak_flops_per_s == {"fp32": 15.7e12, "fp16": 125e12}
    assert "V100" in caps.peak_flops_source and "datasheet" in caps.peak_flops_source


def test_cpu_capabilities_carry_a_measured_peak_and_the_fingerprint() -> None:
    caps = detect_capabilities("cpu")

    assert set(caps.peak_flops_per_s) == {"fp32", "fp16", "bf16"}
    assert caps.peak_flops_source.startswith("measured square-matmul peak on this CPU")
    assert caps.fingerprint is not None and caps.fingerprint.device_kind == "cpu"


def test_a_mock_profile_is_refused_for_a_real_device() -> None:
    with pytest.raises(ConfigError, match=r"^mock.profile=h100: only for device=mock"):
        detect_capabilities("cpu", mock_profile="h100")


# --------------------------------------------------------------------------------------------
# Devices of this machine


@pytest.mark.parametrize("name", ["cpu", "mock"])
def test_resolve_explicit_devices(name: str) -> None:
    assert resolve_device(name) == name


def test_resolve_unknown_device() -> None:
    with pytest.raises(ConfigError, match=r"^device=tpu: unknown device"):
        resolve_device("tpu")


def test_resolve_auto() -> None:
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
def test_resolve_cuda_without_a_gpu() -> None:
    with pytest.raises(DeviceUnavailableError, match=r"^device=cuda: torch sees no CUDA GPU"):
        resolve_device("cuda")


def test_detect_cpu() -> None:
    caps = detect_capabilities("cpu")

    assert caps.kind == "cpu"
    assert caps.count == os.cpu_count()
    assert caps.memory_bytes is not None and caps.memory_bytes > 0
    assert caps.compute_capability is None
    assert caps.simulated is False
    assert caps.is_gpu is False
    assert caps.name == cpu_model_name() != ""


def test_detect_mock_is_simulated() -> None:
    caps = detect_capabilities("mock")

    assert caps.kind == "mock"
    assert caps.simulated is True
    assert caps.is_gpu is True
    assert "simulated" in caps.name


@pytest.mark.gpu
def test_detect_cuda() -> None:
    caps = detect_capabilities("cuda")

    assert caps.kind == "cuda"
    assert caps.count == torch.cuda.device_count()
    assert caps.compute_capability == torch.cuda.get_device_capability(0)
    assert caps.memory_bytes is not None and caps.memory_bytes > 0


def test_a_gpu_torch_names_without_nvml_gets_its_published_peak(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # NVML missing (a container without the library): torch names the GPU (issue 38, item 7).
    props = SimpleNamespace(
        name="NVIDIA A100-SXM4-80GB", total_memory=80 * 1024 * MIB, major=8, minor=0
    )
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: props)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    no_nvml = simulated_machine("a100x4", failing={"nvmlInit": pynvml.NVML_ERROR_DRIVER_NOT_LOADED})

    caps = detect_capabilities("cuda", nvml=no_nvml)

    assert caps.count == 2 and caps.name == "NVIDIA A100-SXM4-80GB"
    assert caps.peak_flops_per_s["tf32"] == 156e12  # the A100's published dense peak
    assert caps.peak_flops_source.startswith("published dense peak of A100")
