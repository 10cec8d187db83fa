"""The verdicts (autotune/study/verification/_summary.py): changed knobs, each configuration's
verdict and the recommendation, on hand-built rows."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from autotune.study.storage import VerificationPlan, VerificationRecord, VerificationRun
from autotune.study.verification import (
    summarize_verification,
)
from autotune.study.verification._verdict import (
    changed_knobs,
)
from tests.study.verification.metrics import F1, VAL_LOSS


def test_changed_knobs_lists_only_differences_in_order() -> None:
    changed = changed_knobs(
        {"batch_size": 256, "precision": "bf16", "num_workers": 0},
        {"batch_size": 64, "precision": "fp32", "num_workers": 0},
    )

    assert changed == (("batch_size", 64, 256), ("precision", "fp32", "bf16"))


def _row(
    round_index: int,
    trial_number: int,
    throughput_sps: float | None,
    val_metric: float | None = 0.95,
    *,
    baseline: bool = False,
    failure: str | None = None,
) -> VerificationRecord:
    return VerificationRecord(
        round_index=round_index,
        seed=1000 + round_index,
        trial_number=trial_number,
        is_baseline=baseline,
        simulated=False,
        failure=failure,
        failure_detail="MemoryError" if failure else None,
        throughput_sps=throughput_sps,
        throughput_iqr_sps=1.0 if throughput_sps else None,
        step_time_s=0.01 if throughput_sps else None,
        val_metric=val_metric if failure is None else None,
        peak_memory_bytes=(1 << 20) * (1 + trial_number) if failure is None else None,
        train_s=1.0,
        config_json="{}",
    )


def _run(
    candidates: Sequence[int],
    rows: Sequence[VerificationRecord],
    *,
    complete: bool = True,
    rounds: int = 3,
) -> VerificationRun:
    return VerificationRun(
        study_name="s",
        number=1,
        plan=VerificationPlan(0, tuple(candidates), tuple(1000 + r for r in range(rounds)), 0.5),
        rows=tuple(rows),
        started_at=dt.datetime(2026, 11, 22),
        completed_at=dt.datetime(2026, 11, 22) if complete else None,
    )


PARAMS: Mapping[int, Mapping[str, Any]] = {
    0: {"batch_size": 64, "precision": "fp32"},
    1: {"batch_size": 256, "precision": "fp32"},
    2: {"batch_size": 64, "precision": "bf16"},
    3: {"batch_size": 128, "precision": "bf16"},
}


def _baseline_rows(
    throughputs: Sequence[float] = (1000.0, 1100.0, 900.0),
) -> list[VerificationRecord]:
    return [_row(r, 0, tp, 0.950, baseline=True) for r, tp in enumerate(throughputs)]


def test_recommendation_is_the_fastest_qualifying_candidate() -> None:
    rows = _baseline_rows()
    for r, base in enumerate((1000.0, 1100.0, 900.0)):
        rows += [
            _row(r, 1, base * 3.0, 0.940),  # fastest, but 1 pt less accurate
            _row(r, 2, base * (2.0 + 0.01 * r), 0.949),  # qualifies
            _row(r, 3, base * 1.5, 0.951),  # qualifies, slower
        ]

    summary = summarize_verification(_run([1, 2, 3], rows), PARAMS, simulated=False)

    assert summary.complete and summary.runs_done == summary.runs_planned == 12
    assert summary.recommended is not None and summary.recommended.trial_number == 2
    by_trial = {c.trial_number: c for c in summary.candidates}
    assert by_trial[1].verdict == (
        "a trade-off: verified faster, accuracy not shown non-inferior (the difference's 95 % "
        "CI reaches -1.00 pt, past the 0.5 pt tolerance, over 3 rounds)"
    )
    assert by_trial[1].metric_diff_mean == pytest.approx(-0.010)
    assert by_trial[1].trade_off and not by_trial[1].qualifies
    assert by_trial[3].qualifies and by_trial[3].speedup == pytest.approx(1.5)
    rec = summary.recommended
    assert rec.speedup == pytest.approx((2.0 * 2.01 * 2.02) ** (1 / 3))
    assert rec.speedup_ci95 is not None and 1.0 < rec.speedup_ci95[0] < 2.0 < rec.speedup_ci95[1]
    assert rec.val_metric_mean == pytest.approx(0.949)
    assert rec.changed == (("precision", "fp32", "bf16"),)
    assert summary.baseline.val_metric_mean == pytest.approx(0.950)
    line = summary.headline()
    assert line.startswith("2.01x faster than PyTorch's defaults (95 % CI ")
    assert (
        ", verified over 3 rounds) at the same accuracy (non-inferior within 0.5 pt): 94.90 % vs "
        "95.00 % (difference " in line
    )
    assert "same model, trial 2, precision fp32->bf16" in line
    assert line.endswith(
        "; trade-off, not recommended: a system change (batch_size 64->256): 3.00x (3.00-3.00x) "
        "at -1.00 pt (-1.00 to -1.00 pt), trial 1"
    )
    assert summary.ending == "recommended"
    assert "SIMULATED" not in line


def test_a_candidate_failing_in_one_round_is_not_recommended() -> None:
    rows = _baseline_rows()
    rows += [_row(r, 2, 3000.0) for r in (0, 1)] + [_row(2, 2, None, failure="oom")]

    summary = summarize_verification(_run([2], rows), PARAMS, simulated=False)

    assert summary.recommended is None
    assert summary.candidates[0].verdict == "failed (round 3: oom)"
    assert summary.ending == "not_faster"
    assert summary.headline().startswith(
        "verified: not faster than PyTorch's defaults at the same accuracy (verified over 3 rounds: "
        "trial 2 failed (round 3: oom))"
    )


def test_an_interval_reaching_one_is_not_verified() -> None:
    rows = _baseline_rows((1000.0, 1000.0, 1000.0))
    rows += [_row(0, 2, 1300.0), _row(1, 2, 900.0), _row(2, 2, 1100.0)]

    summary = summarize_verification(_run([2], rows), PARAMS, simulated=True)

    candidate = summary.candidates[0]
    assert candidate.speedup is not None and candidate.speedup > 1.0
    assert candidate.speedup_ci95 is not None and candidate.speedup_ci95[0] < 1.0
    assert candidate.verdict.startswith("not verifiably faster")
    assert summary.headline() == (
        "SIMULATED (mock device): verified: not faster than PyTorch's defaults at the same accuracy "
        "(verified over 3 rounds: trial 2 not verifiably faster (95 % CI reaches 1.0x))"
    )


def test_an_incomplete_verification_recommends_nothing_and_says_how_to_finish() -> None:
    rows = [*_baseline_rows()[:2], _row(0, 2, 3000.0)]

    summary = summarize_verification(_run([2], rows, complete=False), PARAMS, simulated=False)

    assert not summary.complete and (summary.runs_done, summary.runs_planned) == (3, 6)
    assert summary.recommended is None
    assert "incomplete (3 of 6 runs)" in summary.headline()
    assert "autotune verify study=s" in summary.headline()


def test_without_finalists_the_headline_says_nothing_was_faster() -> None:
    summary = summarize_verification(_run([], []), PARAMS, simulated=False)

    assert summary.complete and summary.recommended is None and summary.runs_planned == 0
    assert summary.ending == "nothing_to_verify"
    assert summary.headline().startswith(
        "nothing to verify: no trial of the search was faster than PyTorch's defaults with its "
        "accuracy within 0.5 pt + 1.645 standard errors of theirs"
    )


def test_a_minimized_metric_recommends_the_fastest_within_the_tolerance_above() -> None:
    rows = [_row(r, 0, tp, 2.0, baseline=True) for r, tp in enumerate((1000.0, 1100.0, 900.0))]
    for r, base in enumerate((1000.0, 1100.0, 900.0)):
        rows += [
            _row(r, 1, base * 3.0, 2.02),  # fastest, but a 1 % higher loss
            _row(r, 2, base * (2.0 + 0.01 * r), 2.005),  # qualifies
            _row(r, 3, base * 1.5, 1.9),  # qualifies, slower
        ]

    summary = summarize_verification(
        _run([1, 2, 3], rows), PARAMS, simulated=False, metric=VAL_LOSS
    )

    assert summary.metric == VAL_LOSS
    assert summary.recommended is not None and summary.recommended.trial_number == 2
    by_trial = {c.trial_number: c for c in summary.candidates}
    # For a loss, non-inferior is the interval's upper end at most +0.5 % of 2.0 = +0.01.
    assert by_trial[1].verdict == (
        "a trade-off: verified faster, val_loss not shown non-inferior (the difference's 95 % "
        "CI reaches +0.02, past the 0.5 % of the baseline's val_loss tolerance, over 3 rounds)"
    )
    assert by_trial[3].verdict == "verified faster at the same val_loss (non-inferior)"
    line = summary.headline()
    assert (
        " at the same val_loss (non-inferior within 0.5 % of the baseline's val_loss): 2.005 vs "
        "2.000 (difference +0.005, 95 % CI "
    ) in line
    assert "accuracy" not in line
    assert summary.tolerance_text() == "0.5 % of the baseline's val_loss"


def test_a_maximized_metric_other_than_accuracy_is_not_shown_as_a_percentage() -> None:
    rows = [_row(r, 0, 1000.0, 0.80, baseline=True) for r in range(3)]
    rows += [_row(r, 2, 2000.0 + r, 0.799) for r in range(3)]

    summary = summarize_verification(_run([2], rows), PARAMS, simulated=False, metric=F1)

    assert summary.recommended is not None
    assert (
        " at the same f1 (non-inferior within 0.5 % of the baseline's f1): 0.799 vs 0.800 "
        "(difference -0.001, 95 % CI "
    ) in summary.headline()


def test_nothing_to_verify_names_the_metric() -> None:
    summary = summarize_verification(_run([], []), PARAMS, simulated=False, metric=VAL_LOSS)
    assert summary.headline() == (
        "nothing to verify: no trial of the search was faster than PyTorch's defaults with its "
        "val_loss within 0.5 % of the baseline's val_loss + 1.645 standard errors of theirs"
    )
