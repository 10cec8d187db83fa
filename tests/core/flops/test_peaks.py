"""NVIDIA's published peaks (autotune/core/flops/_peaks.py)."""

from __future__ import annotations

import pytest

from autotune.core.flops import PUBLISHED_PEAKS, published_peak


@pytest.mark.parametrize(
    ("name", "label", "bf16_tflops"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM5", 989.5),
        ("NVIDIA H100 PCIe", "H100 PCIe", 756),
        ("NVIDIA H200", "H200 SXM", 989.5),
        ("NVIDIA A100-SXM4-80GB", "A100 (SXM4 or PCIe)", 312),
        ("NVIDIA A100-PCIE-40GB", "A100 (SXM4 or PCIe)", 312),
        ("NVIDIA L4", "L4", 121),
        ("NVIDIA L40S", "L40S", 362),
        ("NVIDIA A10", "A10", 125),
    ],
)
def test_published_peaks_of_known_gpus(name: str, label: str, bf16_tflops: float) -> None:
    peak = published_peak(name)

    assert peak is not None
    assert peak.label == label
    assert peak.flops_per_s["bf16"] == pytest.approx(bf16_tflops * 1e12)
    assert "datasheet" in peak.source


@pytest.mark.parametrize(
    ("name", "fp32_tflops", "fp16_tflops"),
    [
        ("Tesla V100-SXM2-32GB", 15.7, 125),
        ("Tesla V100-PCIE-16GB", 14, 112),
        ("Tesla V100S-PCIE-32GB", 16.4, 130),
        ("Tesla T4", 8.1, 65),
    ],
)
def test_pre_ampere_gpus_have_no_bf16_or_tf32_peak(
    name: str, fp32_tflops: float, fp16_tflops: float
) -> None:
    peak = published_peak(name)

    assert peak is not None
    assert peak.flops_per_s == {"fp32": fp32_tflops * 1e12, "fp16": fp16_tflops * 1e12}


@pytest.mark.parametrize("name", ["NVIDIA A10G", "NVIDIA GeForce RTX 4090", "NVIDIA H100 NVL", ""])
def test_unknown_gpus_have_no_published_peak(name: str) -> None:
    assert published_peak(name) is None


def test_dense_tensor_peaks_are_above_fp32() -> None:
    for entry in PUBLISHED_PEAKS:
        assert entry.flops_per_s["fp16"] > entry.flops_per_s["fp32"], entry.label
