"""The classes of change and the paired K-step check (autotune/study/evidence.py): pure."""

from __future__ import annotations

import math

import pytest

from autotune.study.evidence import (
    FLOAT32_EPS,
    CheckFloor,
    check_equivalence,
    check_floor,
    class_by_knobs,
    evidence_text,
    relative_divergence,
    source_floor,
)

BASE = [2.30, 2.10, 1.90, 1.70, 1.50]
#: A float64 twin 3e-7 off at the first step, 1e-5 at the last.
TWIN = [v * (1 + d) for v, d in zip(BASE, (3e-7, 1e-6, 3e-6, 6e-6, 1e-5), strict=True)]
FLOOR = check_floor(BASE, TWIN)


def test_relative_divergence_per_step() -> None:
    assert relative_divergence([1.0, 2.2, 0.5], [1.0, 2.0]) == pytest.approx([0.0, 0.1])
    assert relative_divergence([0.1], [0.0]) == [0.1]  # a zero reference: absolute
    assert relative_divergence([math.nan], [math.nan]) == [0.0]
    assert relative_divergence([math.inf], [1.0]) == [math.inf]


def test_the_floor_is_the_twins_divergence_at_least_float32_epsilon() -> None:
    assert FLOOR.first == pytest.approx(3e-7)
    assert FLOOR.trajectory == pytest.approx(1e-5)
    assert FLOOR.source == "float64 twin"
    exact = check_floor(BASE, BASE)
    assert exact.first == exact.trajectory == FLOAT32_EPS
    missing = check_floor(BASE, None, "error: float64 is not supported")
    assert missing.first == FLOAT32_EPS
    assert "float64 is not supported" in missing.source


def test_the_same_losses_bit_for_bit_are_identical() -> None:
    check = check_equivalence(list(BASE), BASE, FLOOR, 100.0)
    assert check.verdict == "identical"
    assert check.passed
    assert check.detail == "the same losses bit for bit over 5 steps"


def test_a_reordering_within_the_floor_is_the_same_computation() -> None:
    reordered = [v * (1 + d) for v, d in zip(BASE, (2e-6, 1e-5, 1e-4, 3e-4, 5e-4), strict=True)]
    check = check_equivalence(reordered, BASE, FLOOR, 100.0)
    assert check.verdict == "same_computation"
    assert check.first_divergence == pytest.approx(2e-6)
    assert check.max_divergence == pytest.approx(5e-4)
    assert "100x the float64 twin" in check.detail


@pytest.mark.parametrize(
    ("first", "last"),
    [
        (2e-4, 1e-4),  # bf16: the first step's forward already 2,000x the twin's
        (1e-7, 0.3),  # a learning rate x10: the trajectory leaves the twin's envelope
    ],
)
def test_beyond_the_margin_it_diverged(first: float, last: float) -> None:
    candidate = [BASE[0] * (1 + first), *BASE[1:4], BASE[4] * (1 + last)]
    check = check_equivalence(candidate, BASE, FLOOR, 100.0)
    assert check.verdict == "diverged"
    assert not check.passed
    assert check.detail.startswith("diverged: first-step divergence")


def _off(by: tuple[float, ...], losses: list[float] = BASE) -> list[float]:
    return [v * (1 + d) for v, d in zip(losses, by, strict=True)]


#: A bf16 source: 2e-4 from the twin at the first step (the shipped CNN's), 1e-3 at the last.
BF16 = _off((2e-4, 4e-5, 4e-4, 4e-5, 1e-3))


def test_against_a_bf16_source_the_bound_is_twice_its_distance_from_the_twin() -> None:
    floor = source_floor(FLOOR, 100.0, BF16, TWIN, "trial 17 (bf16)")

    assert floor.margin == 2.0 and floor.source == (
        "distance of trial 17 (bf16) from the float64 twin"
    )
    # Its compiled variant, another fusion of the same bf16 computation: 2.3e-4 from it at
    # the first step (the long run's study), 12x fp32's bound of 3e-5, within 2 x 2e-4.
    compiled = _off((2.3e-4, 1e-4, 5e-4, 3e-4, 1.5e-3), BF16)
    assert check_equivalence(compiled, BF16, FLOOR, 100.0).verdict == "diverged"
    check = check_equivalence(compiled, BF16, floor, 100.0)
    assert check.verdict == "same_computation"
    assert "2x the distance of trial 17 (bf16) from the float64 twin" in check.detail
    # A change of the math is not let through by 100x bf16's distance (2e-2): BatchNorm over
    # micro-batches of 4 parts by 8.7e-4 at the first step.
    batchnorm = _off((8.7e-4, 1e-3, 2e-3, 3e-3, 4e-3), BF16)
    assert check_equivalence(batchnorm, BF16, floor, 100.0).verdict == "diverged"


def test_a_source_no_further_from_exact_than_fp32_keeps_the_studys_floor() -> None:
    assert source_floor(FLOOR, 100.0, BASE, TWIN, "trial 3 (tf32)") is FLOOR
    assert source_floor(FLOOR, 100.0, [], TWIN, "trial 3 (bf16)") is FLOOR  # no losses
    # The wider of the two bounds, each: the source's first step, fp32's trajectory.
    first_only = _off((2e-4, 0.0, 0.0, 0.0, 0.0))
    floor = source_floor(FLOOR, 100.0, first_only, TWIN, "trial 3 (bf16)")
    assert 2 * floor.first == pytest.approx(4e-4, rel=1e-2)  # measured from the twin
    assert 2 * floor.trajectory == pytest.approx(100 * FLOOR.trajectory)


def test_the_check_compares_the_steps_both_recorded() -> None:
    assert check_equivalence(BASE[:3], BASE, FLOOR, 100.0).steps == 3


def test_a_misused_check_names_the_call() -> None:
    with pytest.raises(ValueError, match="check_equivalence: both runs"):
        check_equivalence([], BASE, FLOOR, 100.0)
    with pytest.raises(ValueError, match="margin > 1 must hold, but got 1"):
        check_equivalence(BASE, BASE, CheckFloor(1e-7, 1e-7, "x"), 1.0)


BASELINE = {"depth": 3, "batch_size": 64, "gpu_count": 1, "precision": "fp32", "num_workers": 0}


@pytest.mark.parametrize(
    ("change", "fixed_global_batch", "expected"),
    [
        ({"depth": 4, "precision": "bf16"}, False, "model"),
        ({"batch_size": 128}, False, "dynamics"),
        ({"gpu_count": 2}, False, "dynamics"),
        ({"batch_size": 16, "gpu_count": 2}, True, "same_computation"),  # micro-batches, ranks
        ({"precision": "bf16"}, False, "numerics"),
        ({"num_workers": 2}, False, "same_computation"),
    ],
)
def test_the_class_by_the_knobs(
    change: dict[str, object], fixed_global_batch: bool, expected: str
) -> None:
    knobs = {**BASELINE, **change}
    assert class_by_knobs(knobs, BASELINE, ["depth"], fixed_global_batch) == expected


def test_the_classes_in_words() -> None:
    assert evidence_text("same_computation", 20) == "the same computation (checked over 20 steps)"
    assert evidence_text("identical") == "identical computation"
    assert evidence_text("model", 20) == "a model change"
    assert evidence_text(None) == "unknown"
