"""FLOP counting, peaks and MFU (autotune/flops.py)."""

from __future__ import annotations

import time

import pytest
import torch

from autotune.flops import (
    PUBLISHED_PEAKS,
    count_training_flops,
    describe_peaks,
    measure_matmul_peak,
    mfu_figures,
    profile_model,
    published_peak,
    trial_extras,
    with_mfu,
)
from autotune.models import build_model, count_parameters
from autotune.testing import make_capabilities, make_measurement, make_trial_config

# --------------------------------------------------------------------------------------------
# Counting


def _cnn_flops_per_sample(width: int, h: int = 8, w: int = 8) -> int:
    """One conv block (1 -> width channels, 3x3, pad 1, then a 2x2 max-pool) and a linear
    head on the flattened pooled map, by hand.

    Forward: conv 2*H*W*Cin*Cout*9, linear 2*(width*H/2*W/2)*10. Backward: the conv's weight
    gradient only (the input needs none), the linear's weight and input gradients.
    """
    conv = 2 * h * w * 1 * width * 9
    linear = 2 * width * (h // 2) * (w // 2) * 10
    return conv + linear + conv + 2 * linear


@pytest.mark.parametrize("width", [8, 16])
def test_counts_a_cnn_block_exactly(width: int) -> None:
    model = build_model("cnn", 1, width, (1, 8, 8), 10)
    x, y = torch.randn(4, 1, 8, 8), torch.zeros(4, dtype=torch.long)

    flops = count_training_flops(model, x, y)

    assert flops == 4 * _cnn_flops_per_sample(width)


def test_flops_grow_linearly_with_the_batch() -> None:
    model = build_model("cnn", 2, 8, (1, 8, 8), 10)

    small = count_training_flops(model, torch.randn(2, 1, 8, 8), torch.zeros(2, dtype=torch.long))
    large = count_training_flops(model, torch.randn(6, 1, 8, 8), torch.zeros(6, dtype=torch.long))

    assert large == 3 * small


def test_autocast_and_channels_last_count_the_same_flops() -> None:
    model = build_model("cnn", 2, 8, (1, 8, 8), 10)
    x, y = torch.randn(4, 1, 8, 8), torch.zeros(4, dtype=torch.long)

    fp32 = count_training_flops(model, x, y)
    bf16 = count_training_flops(
        model.to(memory_format=torch.channels_last),
        x.to(memory_format=torch.channels_last),
        y,
        autocast_dtype=torch.bfloat16,
    )

    assert bf16 == fp32


def test_counting_leaves_the_model_as_it_was() -> None:
    model = build_model("cnn", 1, 8, (1, 8, 8), 10)
    model.eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}

    count_training_flops(model, torch.randn(4, 1, 8, 8) + 3.0, torch.zeros(4, dtype=torch.long))

    assert model.training is False
    assert all(p.grad is None for p in model.parameters())
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # BatchNorm stats too


def test_a_workloads_loss_is_counted() -> None:
    model = build_model("mlp", 1, 8, (1, 8, 8), 10)
    x, y = torch.randn(4, 1, 8, 8), torch.zeros(4, dtype=torch.long)
    called: list[tuple[int, ...]] = []

    def loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        called.append(tuple(output.shape))
        return (output @ output.T).sum()  # a 4x10 @ 10x4 matmul the default loss does not do

    default = count_training_flops(model, x, y)
    own = count_training_flops(model, x, y, loss_fn=loss)

    assert called == [(4, 10)]
    assert own > default


def test_profile_model_counts_what_backward_keeps() -> None:
    spec = make_trial_config(family="cnn").workload  # the built-in cnn on digits (1x8x8)
    knobs = {"depth": 3, "width": 64}
    fp32 = profile_model(spec, knobs, "fp32")
    bf16 = profile_model(spec, knobs, "bf16")

    assert fp32.parameters == count_parameters(build_model("cnn", 3, 64, (1, 8, 8), 10))
    # Block 1 alone saves its conv output and BatchNorm/ReLU output (2 x 64 x 8 x 8 fp32).
    assert fp32.activation_bytes_per_sample > 2 * 64 * 8 * 8 * 4
    assert bf16.activation_bytes_per_sample < 0.75 * fp32.activation_bytes_per_sample
    assert bf16.activation_fixed_bytes > fp32.activation_fixed_bytes  # autocast weight casts
    assert fp32.input_bytes_per_sample == 4 * 64 + 8
    assert profile_model(spec, knobs, "tf32") == fp32


# --------------------------------------------------------------------------------------------
# Peaks


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


def test_measured_cpu_peak_is_cheap_and_cached() -> None:
    started = time.perf_counter()
    peaks = {p: measure_matmul_peak(p, budget_s=0.1) for p in ("fp32", "bf16", "fp16")}
    first_s = time.perf_counter() - started
    started = time.perf_counter()
    again = {p: measure_matmul_peak(p, budget_s=0.1) for p in ("fp32", "bf16", "fp16")}
    cached_s = time.perf_counter() - started

    assert all(v > 1e8 for v in peaks.values())  # more than 0.1 GFLOP/s on any CPU
    assert again == peaks
    assert first_s < 2.0  # about 0.4 s on an idle machine; allow for a busy one
    assert cached_s < 0.01


# --------------------------------------------------------------------------------------------
# MFU


def test_mfu_is_achieved_over_peak() -> None:
    figures = mfu_figures(
        flops_per_sample=1e9, throughput_sps=1000.0, peak_flops_per_s=4e12, devices=2
    )

    assert figures == {
        "achieved_flops_per_s": 1e12,
        "peak_flops_per_s": 8e12,
        "mfu": 0.125,
    }


@pytest.mark.parametrize(("peak", "devices"), [(0.0, 1), (1e12, 0)])
def test_mfu_refuses_a_peak_or_device_count_that_is_not_positive(peak: float, devices: int) -> None:
    with pytest.raises(ValueError, match=r"peak_flops_per_s > 0 and devices >= 1 must hold"):
        mfu_figures(1e9, 1000.0, peak, devices)


def _runner_returning(extra: dict[str, object]):
    def run(config, timeout_s):
        return make_measurement(throughput_sps=2000.0, extra=dict(extra))

    return run


def test_with_mfu_uses_the_device_peak_for_the_precision_and_gpu_count() -> None:
    caps = make_capabilities(
        "cuda", count=4, peak_flops_per_s={"bf16": 1e12, "fp32": 1e11}, peak_flops_source="table"
    )
    run = with_mfu(_runner_returning({"flops_per_sample": 5e6}), caps)

    m = run(make_trial_config(device="cuda", precision="bf16", gpu_count=2), 60.0)

    assert m.extra["achieved_flops_per_s"] == pytest.approx(1e10)
    assert m.extra["peak_flops_per_s"] == pytest.approx(2e12)
    assert m.extra["mfu"] == pytest.approx(0.005)
    assert m.extra["peak_flops_source"] == "table"
    assert m.as_user_attrs()["mfu"] == pytest.approx(0.005)


def test_with_mfu_on_cpu_does_not_multiply_the_peak_by_ranks() -> None:
    caps = make_capabilities("cpu", peak_flops_per_s={"fp32": 1e11}, peak_flops_source="measured")
    run = with_mfu(_runner_returning({"flops_per_sample": 5e6}), caps)

    m = run(make_trial_config(gpu_count=2), 60.0)

    assert m.extra["peak_flops_per_s"] == 1e11
    assert m.extra["mfu"] == pytest.approx(0.1)


def test_with_mfu_takes_a_peak_the_trial_measured_on_an_unknown_gpu() -> None:
    caps = make_capabilities("cuda")  # no published peak
    run = with_mfu(
        _runner_returning({"flops_per_sample": 5e6, "measured_peak_flops_per_s": 1e12}), caps
    )

    m = run(make_trial_config(device="cuda"), 60.0)

    assert m.extra["mfu"] == pytest.approx(0.01)
    assert m.extra["peak_flops_source"].startswith("measured matmul peak in the trial")


def test_with_mfu_passes_measurements_without_flops_through() -> None:
    caps = make_capabilities("cpu", peak_flops_per_s={"fp32": 1e11})
    run = with_mfu(_runner_returning({}), caps)

    assert "mfu" not in run(make_trial_config(), 60.0).extra


def test_describe_peaks_names_the_peak_and_its_source() -> None:
    caps = make_capabilities(
        "cpu", peak_flops_per_s={"fp32": 1.5e11, "bf16": 3e11}, peak_flops_source="measured here"
    )

    assert describe_peaks(caps, ["fp32", "bf16"]) == (
        "MFU peak: fp32 150 GFLOP/s, bf16 300 GFLOP/s (measured here)"
    )
    assert describe_peaks(make_capabilities("cuda", peak_flops_source="x"), ["fp32"]) == (
        "MFU peak: x"
    )


# --------------------------------------------------------------------------------------------
# In a real CPU trial


@pytest.mark.slow
def test_cpu_study_stores_flops_and_mfu(tmp_path) -> None:
    """Done-criterion 2: a CPU trial stores flops_per_sample and mfu (one short real trial)."""
    import optuna

    from autotune.api import run_study
    from autotune.config import load_run_config

    config = load_run_config(
        [
            "device=cpu",
            f"storage=sqlite:///{tmp_path / 'a.db'}",
            "train.epochs=1",
            "model.depth=1",
            "model.width=8",
            "batch_size=64",
            "precision=fp32",
            "compile_mode=none",
            "num_workers=0",
            "gpu_count=1",
        ]
    )
    run_study(config, 1)

    trial = optuna.load_study(study_name=config.study, storage=config.storage).trials[0]
    attrs = trial.user_attrs
    assert attrs["flops_per_sample"] == _cnn_flops_per_sample(8)
    assert 0 < attrs["mfu"] < 1
    assert attrs["mfu"] == pytest.approx(
        attrs["flops_per_sample"] * attrs["throughput_sps"] / attrs["peak_flops_per_s"]
    )
    assert attrs["peak_flops_source"].startswith("measured square-matmul peak on this CPU")


def test_trial_extras_turn_the_gpu_window_into_energy_per_sample() -> None:
    from autotune.nvml import GpuWindowReading

    model = build_model("cnn", 1, 8, (1, 8, 8), 10)
    reading = GpuWindowReading(
        duration_s=2.0,
        mean_power_w=300.0,
        mean_utilization_pct=90.0,
        energy_j=600.0,
        samples=40,
        energy_source="energy_counter",
    )

    extra = trial_extras(
        model,
        torch.randn(4, 1, 8, 8),
        torch.zeros(4, dtype=torch.long),
        precision="fp32",
        autocast_dtype=None,
        device_kind="cpu",
        gpu_reading=reading,
        samples_per_s=1000.0,
    )

    assert extra == {
        "flops_per_sample": _cnn_flops_per_sample(8),
        "gpu_utilization_pct": 90.0,
        "gpu_power_w": 300.0,
        "gpu_energy_window_s": 2.0,
        "energy_j_per_sample": pytest.approx(0.3),  # 600 J / 2 s / 1000 samples/s
        "energy_source": "energy_counter",
    }


def test_trial_extras_without_nvml_have_flops_only() -> None:
    model = build_model("cnn", 1, 8, (1, 8, 8), 10)

    extra = trial_extras(
        model,
        torch.randn(2, 1, 8, 8),
        torch.zeros(2, dtype=torch.long),
        precision="fp32",
        autocast_dtype=None,
        device_kind="cpu",
        gpu_reading=None,
        samples_per_s=1000.0,
    )

    assert extra == {"flops_per_sample": _cnn_flops_per_sample(8)}
