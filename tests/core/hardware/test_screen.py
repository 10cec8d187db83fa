"""The precision screen (autotune/core/hardware/_screen.py): a precision whose peak is a small
share of fp32's is left out of a new study; a stored screen is kept on resume."""

from __future__ import annotations

from typing import Any

import pytest

from autotune.core.config import load_space
from autotune.core.exceptions import ConfigError
from autotune.core.hardware import (
    PrecisionScreen,
    detect_capabilities,
    detect_fingerprint,
    screen_precisions,
    study_precision_screen,
)
from autotune.core.hardware._capabilities import (
    capabilities_from_fingerprint,
)
from autotune.core.hardware.simulated import PROFILE_NAMES, SimulatedGpu, SimulatedNvml
from autotune.study.feasibility import restrict_space
from autotune.testing import make_capabilities, simulated_machine

_G = 1e9

#: A CPU whose fp16 matmul peak is 1/100 of fp32's (no native fp16), bf16 at half of fp32's.
SLOW_FP16_CPU = make_capabilities(
    "cpu", peak_flops_per_s={"fp32": 300 * _G, "fp16": 3 * _G, "bf16": 150 * _G}
)
#: The same CPU where fp16 is as fast as fp32.
FAST_FP16_CPU = make_capabilities(
    "cpu", peak_flops_per_s={"fp32": 300 * _G, "fp16": 300 * _G, "bf16": 150 * _G}
)
#: A GPU without fast fp16 (fp16 at 1/100 of fp32), as fake capabilities.
SLOW_FP16_GPU = make_capabilities(
    "cuda",
    name="fake GPU without fast fp16",
    peak_flops_per_s={"fp32": 10e12, "tf32": 20e12, "fp16": 0.1e12, "bf16": 20e12},
)
FP16_LINE = "matmul peak 3 GFLOP/s is 1/100 of fp32's 300 GFLOP/s (below advanced.hardware.min_peak_ratio=0.1)"


def _space(*overrides: str) -> Any:
    return load_space("cnn_small", overrides)


# --------------------------------------------------------------------------------------------
# screen_precisions


def test_a_cpu_whose_fp16_peak_is_a_hundredth_of_fp32s_loses_fp16() -> None:
    screen = screen_precisions(_space(), SLOW_FP16_CPU, 0.1)

    assert screen.considered == ("fp32", "fp16", "bf16")  # tf32: not on a CPU
    assert screen.screened == ("fp16",)
    assert screen.kept_below == ()
    assert screen.reasons() == {"fp16": FP16_LINE}
    assert screen.notes() == []


def test_restrict_space_removes_the_screened_precision_with_its_line() -> None:
    space = _space()
    screen = screen_precisions(space, SLOW_FP16_CPU, 0.1)

    restricted, removed = restrict_space(space, SLOW_FP16_CPU, screen.reasons())

    assert restricted.precision.values() == ["fp32", "bf16"]
    assert removed[:2] == [
        "precision=tf32: tf32 is a CUDA tensor-core mode; the CPU has no TF32",
        f"precision=fp16: {FP16_LINE}",
    ]


def test_min_peak_ratio_0_keeps_every_precision() -> None:
    screen = screen_precisions(_space(), SLOW_FP16_CPU, 0.0)

    assert screen.screened == ()
    assert screen.reasons() == {}
    restricted, _ = restrict_space(_space(), SLOW_FP16_CPU, screen.reasons())
    assert restricted.precision.values() == ["fp32", "fp16", "bf16"]


def test_a_precision_at_or_above_the_ratio_stays() -> None:
    # bf16 at 1/2 of fp32: kept at 0.5 (not below), screened at 0.6; fp32 never.
    assert screen_precisions(_space(), SLOW_FP16_CPU, 0.5).screened == ("fp16",)
    assert screen_precisions(_space(), SLOW_FP16_CPU, 0.6).screened == ("fp16", "bf16")
    assert screen_precisions(_space(), SLOW_FP16_CPU, 1.0).screened == ("fp16", "bf16")


def test_a_space_of_screened_precisions_alone_keeps_them_and_says_so() -> None:
    space = _space("precision=fp16")

    screen = screen_precisions(space, SLOW_FP16_CPU, 0.1)
    restricted, removed = restrict_space(space, SLOW_FP16_CPU, screen.reasons())

    assert screen.screened == ()
    assert screen.kept_below == ("fp16",)
    assert restricted.precision.values() == ["fp16"]
    assert not any(line.startswith("precision=") for line in removed)
    assert screen.notes() == [
        "kept precision=fp16: matmul peak 3 GFLOP/s is 1/100 of fp32's 300 GFLOP/s, below "
        "advanced.hardware.min_peak_ratio=0.1, but the space has no faster precision the device can run "
        "(advanced.hardware.min_peak_ratio=0 silences this)"
    ]


def test_a_space_without_fp32_screens_against_the_devices_fp32_peak() -> None:
    screen = screen_precisions(_space("precision=[fp16,bf16]"), SLOW_FP16_CPU, 0.1)

    assert screen.screened == ("fp16",)


def test_a_device_without_an_fp32_peak_is_not_screened() -> None:
    caps = make_capabilities("cpu", peak_flops_per_s={"fp16": 1.0})

    assert screen_precisions(_space(), caps, 0.1).screened == ()
    assert screen_precisions(_space(), make_capabilities("cpu"), 0.1).screened == ()


@pytest.mark.parametrize(
    ("peak", "text"),
    [(3.0, "1/100"), (300 / 1234, "1/1,234"), (300 / 12.34, "1/12.3"), (180.0, "1/1.67")],
)
def test_the_ratio_is_written_as_a_fraction(peak: float, text: str) -> None:
    caps = make_capabilities("cpu", peak_flops_per_s={"fp32": 300 * _G, "fp16": peak * _G})

    reason = screen_precisions(_space(), caps, 1.0).reasons()["fp16"]

    assert f" is {text} of fp32's 300 GFLOP/s" in reason


# --------------------------------------------------------------------------------------------
# CUDA (fake capabilities and fake NVML) and the mock profiles


def test_a_gpu_without_fast_fp16_loses_fp16() -> None:
    space = _space()

    screen = screen_precisions(space, SLOW_FP16_GPU, 0.1)
    restricted, removed = restrict_space(space, SLOW_FP16_GPU, screen.reasons())

    assert screen.screened == ("fp16",)
    assert restricted.precision.values() == ["fp32", "tf32", "bf16"]
    assert (
        "precision=fp16: dense peak 100 GFLOP/s is 1/100 of fp32's 10 TFLOP/s "
        "(below advanced.hardware.min_peak_ratio=0.1)"
    ) in removed


def test_a_t4_through_simulated_nvml_keeps_fp16_and_the_rules_drop_bf16_and_tf32(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    caps = capabilities_from_fingerprint(detect_fingerprint("cuda", nvml=simulated_machine("t4")))

    screen = screen_precisions(_space(), caps, 0.1)

    assert screen.considered == ("fp32", "fp16")  # bf16, tf32: compute capability 7.5
    assert screen.screened == ()
    assert screen.ratio("fp16") == pytest.approx(65 / 8.1)  # the published peaks


def test_a_gpu_missing_from_the_published_table_is_not_screened(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    nvml = SimulatedNvml((SimulatedGpu("NVIDIA GeForce GTX 1080", 8192 << 20, (6, 1), 180.0),))
    caps = capabilities_from_fingerprint(detect_fingerprint("cuda", nvml=nvml))

    screen = screen_precisions(_space(), caps, 0.1)

    assert caps.peak_flops_per_s == {}
    assert screen.screened == ()
    assert screen.to_record()["peak_flops_per_s"] == {}


def test_a_mock_profile_without_fast_fp16_loses_fp16() -> None:
    caps = make_capabilities(
        "mock", peak_flops_per_s={"fp32": 19.5e12, "tf32": 156e12, "fp16": 0.195e12}
    )

    screen = screen_precisions(_space(), caps, 0.1)

    assert screen.screened == ("fp16",)
    assert screen.reasons()["fp16"].startswith("dense peak 195 GFLOP/s is 1/100 of fp32's")


@pytest.mark.parametrize("profile", PROFILE_NAMES)
def test_no_shipped_mock_profile_screens_a_precision(profile: str) -> None:
    screen = screen_precisions(_space(), detect_capabilities("mock", mock_profile=profile), 0.1)

    assert screen.considered  # the profile's peaks were read
    assert (screen.screened, screen.kept_below) == ((), ())


# --------------------------------------------------------------------------------------------
# The study's screen: stored, kept on resume


def _record(screen: PrecisionScreen) -> dict[str, Any]:
    return screen.to_record()


def test_a_new_study_gets_a_new_screen() -> None:
    screen = study_precision_screen(_space(), SLOW_FP16_CPU, 0.1, None, "s", new_study=True)

    assert screen is not None and not screen.stored
    assert screen.screened == ("fp16",)


def test_a_resumed_study_keeps_its_stored_screen_whatever_the_device_measures_now() -> None:
    made_slow = _record(screen_precisions(_space(), SLOW_FP16_CPU, 0.1))
    made_fast = _record(screen_precisions(_space(), FAST_FP16_CPU, 0.1))

    kept = study_precision_screen(_space(), FAST_FP16_CPU, 0.1, made_slow, "s", new_study=False)
    not_added = study_precision_screen(
        _space(), SLOW_FP16_CPU, 0.1, made_fast, "s", new_study=False
    )

    assert kept is not None and kept.stored and kept.screened == ("fp16",)
    assert kept.peak_flops_per_s["fp16"] == 3 * _G  # the stored peaks, not today's
    assert kept.reasons()["fp16"] == FP16_LINE.replace("=0.1)", "=0.1; stored with the study)")
    assert not_added is not None and not_added.screened == ()


def test_a_study_made_before_the_screen_screens_nothing() -> None:
    assert study_precision_screen(_space(), SLOW_FP16_CPU, 0.1, None, "s", new_study=False) is None


def test_another_ratio_that_would_change_a_stored_screen_is_refused() -> None:
    record = _record(screen_precisions(_space(), SLOW_FP16_CPU, 0.1))

    with pytest.raises(ConfigError) as err:
        study_precision_screen(_space(), SLOW_FP16_CPU, 0.0, record, "s", new_study=False)

    assert str(err.value) == (
        "advanced.hardware.min_peak_ratio=0: study=s was made with advanced.hardware.min_peak_ratio=0.1, which "
        "screened out fp16, and keeps that screen; choose a new study name (study=NAME) or "
        "advanced.hardware.min_peak_ratio=0.1"
    )


def test_another_ratio_with_the_same_outcome_keeps_the_stored_screen() -> None:
    record = _record(screen_precisions(_space(), SLOW_FP16_CPU, 0.1))

    screen = study_precision_screen(_space(), FAST_FP16_CPU, 0.2, record, "s", new_study=False)

    assert screen is not None and screen.min_peak_ratio == 0.1
    assert screen.screened == ("fp16",)


def test_the_record_round_trips_and_a_broken_one_is_refused() -> None:
    screen = screen_precisions(_space(), SLOW_FP16_CPU, 0.1)

    back = PrecisionScreen.from_record(screen.to_record())

    assert back == PrecisionScreen(**{**screen.__dict__, "stored": True})
    with pytest.raises(ConfigError, match=r"^the study's precision_screen record cannot be read"):
        PrecisionScreen.from_record({"min_peak_ratio": 0.1})
