"""A finished verification built by hand, in either objective mode, for the tests of the tables
and exports that show one.

Three configurations, three rounds each: the baseline (trial 0), the recommended trial 1
(bf16, 2.5x: 2.30-2.70x; in time-to-accuracy 4.0 s against the baseline's 10.0 s, fastest to
slowest 3.5-4.5 s) and a slower trial 2 with neither a speedup nor a peak memory.
"""

from __future__ import annotations

from autotune.core.units import MIB
from autotune.study.verification import CandidateVerdict, VerificationSummary
from tests.studies.tta import TARGET


def candidate_verdict(number: int, *, tta: bool, speedup: float | None) -> CandidateVerdict:
    """Trial ``number``'s verdict: 0 is the baseline, 1 qualifies, any other is slower (and has
    no peak memory when it is 2).

    Args:
        number: its trial number.
        tta: a time-to-accuracy verdict (seconds to the target, no throughput).
        speedup: its speedup over the baseline (None: none measured).
    """
    return CandidateVerdict(
        trial_number=number,
        is_baseline=number == 0,
        params={},
        changed=() if number == 0 else (("precision", "fp32", "bf16"),),
        rounds_measured=3,
        failures=(),
        throughput_median_sps=None if tta else 1000.0 * (speedup or 1.0),
        speedup=speedup,
        speedup_ci95=None if speedup is None else (speedup - 0.2, speedup + 0.2),
        val_metric_mean=0.96,
        val_metric_min=0.955,
        val_metric_max=0.965,
        peak_memory_max_bytes=None if number == 2 else 8 * MIB,
        qualifies=number == 1,
        verdict="baseline" if number == 0 else ("qualifies" if number == 1 else "slower"),
        time_to_accuracy_s=10.0 / (speedup or 1.0) if tta else None,
        time_to_accuracy_spread_s=(3.5, 4.5) if tta and number == 1 else None,
    )


def verification_summary(*, tta: bool, study_name: str = "hand") -> VerificationSummary:
    """The complete verification of the module docstring, trial 1 recommended.

    Args:
        tta: of a time-to-accuracy study (target :data:`tests.studies.tta.TARGET`).
        study_name: the study's name.
    """
    recommended = candidate_verdict(1, tta=tta, speedup=2.5)
    return VerificationSummary(
        study_name=study_name,
        number=1,
        rounds=3,
        seeds=(0, 1, 2),
        accuracy_tolerance_pt=0.5,
        complete=True,
        runs_done=9,
        runs_planned=9,
        simulated=True,
        baseline=candidate_verdict(0, tta=tta, speedup=None),
        candidates=(recommended, candidate_verdict(2, tta=tta, speedup=None)),
        recommended=recommended,
        objective="time_to_accuracy" if tta else "throughput",
        target=TARGET if tta else None,
    )
