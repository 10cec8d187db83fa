"""NVIDIA's published dense peak FLOP/s per GPU and precision: :data:`PUBLISHED_PEAKS`."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["PUBLISHED_PEAKS", "PublishedPeak", "published_peak"]

_T = 1e12


@dataclass(frozen=True)
class PublishedPeak:
    """A GPU's published dense peak throughput per precision (no structured sparsity).

    Attributes:
        label: the GPU variant the figures are for.
        pattern: a regular expression matched (case-insensitive) against NVML's GPU name.
        flops_per_s: peak FLOP/s per precision (``fp32`` on CUDA cores, ``tf32``, ``fp16``,
            ``bf16`` on tensor cores); a precision the GPU lacks is absent.
        source: the datasheet the figures come from.
    """

    label: str
    pattern: str
    flops_per_s: dict[str, float]
    source: str


#: NVIDIA's published dense peaks. Datasheets print tensor-core figures "with sparsity"; the
#: dense figure, used here, is half of it. Order matters: the first matching pattern wins.
PUBLISHED_PEAKS: tuple[PublishedPeak, ...] = (
    PublishedPeak(
        "H100 PCIe",
        r"H100.*PCIE",
        {"fp32": 51 * _T, "tf32": 378 * _T, "fp16": 756 * _T, "bf16": 756 * _T},
        "NVIDIA H100 Tensor Core GPU datasheet (H100 PCIe: FP32 51, TF32 756*, BF16/FP16 1,513* "
        "TFLOPS; * with sparsity)",
    ),
    PublishedPeak(
        "H100 SXM5",
        r"H100.*(SXM|HBM3)",
        {"fp32": 67 * _T, "tf32": 494.5 * _T, "fp16": 989.5 * _T, "bf16": 989.5 * _T},
        "NVIDIA H100 Tensor Core GPU datasheet (H100 SXM: FP32 67, TF32 989*, BF16/FP16 1,979* "
        "TFLOPS; * with sparsity)",
    ),
    PublishedPeak(
        "H200 SXM",
        r"H200(?!.*NVL)",
        {"fp32": 67 * _T, "tf32": 494.5 * _T, "fp16": 989.5 * _T, "bf16": 989.5 * _T},
        "NVIDIA H200 Tensor Core GPU datasheet (H200 SXM: FP32 67, TF32 989*, BF16/FP16 1,979* "
        "TFLOPS; * with sparsity)",
    ),
    PublishedPeak(
        "A100 (SXM4 or PCIe)",
        r"A100",
        {"fp32": 19.5 * _T, "tf32": 156 * _T, "fp16": 312 * _T, "bf16": 312 * _T},
        "NVIDIA A100 Tensor Core GPU datasheet (FP32 19.5, TF32 156, BF16/FP16 312 TFLOPS dense)",
    ),
    PublishedPeak(
        "L40S",
        r"\bL40S\b",
        {"fp32": 91.6 * _T, "tf32": 183 * _T, "fp16": 362 * _T, "bf16": 362 * _T},
        "NVIDIA L40S datasheet (FP32 91.6, TF32 366*, BF16/FP16 733* TFLOPS; * with sparsity)",
    ),
    PublishedPeak(
        "L4",
        r"\bL4\b",
        {"fp32": 30.3 * _T, "tf32": 60 * _T, "fp16": 121 * _T, "bf16": 121 * _T},
        "NVIDIA L4 datasheet (FP32 30.3, TF32 120*, BF16/FP16 242* TFLOPS; * with sparsity)",
    ),
    PublishedPeak(
        "A10",
        r"\bA10\b",
        {"fp32": 31.2 * _T, "tf32": 62.5 * _T, "fp16": 125 * _T, "bf16": 125 * _T},
        "NVIDIA A10 datasheet (FP32 31.2, TF32 62.5, BF16/FP16 125 TFLOPS dense)",
    ),
    PublishedPeak(
        "V100S PCIe",
        r"V100S",
        {"fp32": 16.4 * _T, "fp16": 130 * _T},
        "NVIDIA V100S datasheet (FP32 16.4, tensor FP16 130 TFLOPS; no TF32 or BF16)",
    ),
    PublishedPeak(
        "V100 PCIe",
        r"V100.*PCIE",
        {"fp32": 14 * _T, "fp16": 112 * _T},
        "NVIDIA V100 Tensor Core GPU datasheet (PCIe: FP32 14, tensor FP16 112 TFLOPS)",
    ),
    PublishedPeak(
        "V100 SXM2",
        r"V100.*SXM2",
        {"fp32": 15.7 * _T, "fp16": 125 * _T},
        "NVIDIA V100 Tensor Core GPU datasheet (SXM2: FP32 15.7, tensor FP16 125 TFLOPS)",
    ),
    PublishedPeak(
        "T4",
        r"\bT4\b",
        {"fp32": 8.1 * _T, "fp16": 65 * _T},
        "NVIDIA T4 datasheet (FP32 8.1, mixed-precision FP16 65 TFLOPS)",
    ),
)


def published_peak(gpu_name: str) -> PublishedPeak | None:
    """The table entry for a GPU named as NVML names it, or None for an unknown GPU."""
    for entry in PUBLISHED_PEAKS:
        if re.search(entry.pattern, gpu_name, flags=re.IGNORECASE):
            return entry
    return None
