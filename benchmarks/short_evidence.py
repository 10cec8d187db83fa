"""Planted controls for short evidence (learning evidence over the first share of the
budget's steps, :attr:`autotune.core.config.BudgetSettings.short_evidence`), judged against full
runs.

For every seed, the main job's baseline (benchmarks/_main_job.py) and each control that
changes the math run twice in fresh trial processes (:func:`autotune.study.search.run_trial`): once
stopped at ``--share`` of the budget's steps and evaluated there (short evidence: the budget's
schedule, equal samples seen across batch sizes), once over the whole budget. The short
verdict is the verification's non-inferiority test on the paired accuracy differences over
the seeds (:func:`autotune.study.verification.is_non_inferior`: the 95 % interval's lower end within
``--tolerance-pt``); the truth is the full runs' mean paired difference within it. A control
whose full runs lose accuracy and whose short verdict says non-inferior is a miss.

Usage::

    python benchmarks/short_evidence.py                       # 3 seeds, 5 % of 3 epochs
    python benchmarks/short_evidence.py --seeds 5 --share 0.1 --epochs 3

Accuracy is not timing: other processes on the machine do not change these figures, only how
long the script takes.
"""

from __future__ import annotations

import argparse
import platform
import time
from typing import Any

from _main_job import main_job_trial
from evidence import CONTROLS, _config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=3, help="the budget of a full run")
    parser.add_argument("--share", type=float, default=0.05, help="the short runs' share")
    parser.add_argument("--tolerance-pt", type=float, default=0.5)
    parser.add_argument(
        "--controls", nargs="+", help="labels to run (default: those that change the math)"
    )
    args = parser.parse_args()

    from autotune.study.objectives import METRIC_INDEX, OBJECTIVES
    from autotune.study.search import run_trial
    from autotune.study.verification import is_non_inferior, mean_difference_ci95

    accuracy = OBJECTIVES[METRIC_INDEX]
    base = main_job_trial(args.epochs)
    controls = [
        (label, change)
        for label, change, keeps_math in CONTROLS
        if (label in args.controls if args.controls else not keeps_math)
    ]

    def short(config: Any) -> Any:
        return config.model_copy(
            update={"train": config.train.model_copy(update={"evidence_share": args.share})}
        )

    print(
        f"{platform.processor() or platform.machine()}; {args.seeds} seeds; {args.epochs} "
        f"epochs; short runs stop at {args.share:.0%} of the budget's steps"
    )
    started = time.perf_counter()
    short_diffs: dict[str, list[float]] = {label: [] for label, _ in controls}
    full_diffs: dict[str, list[float]] = {label: [] for label, _ in controls}
    base_short: list[float] = []
    steps: dict[str, int] = {}
    for seed in range(args.seeds):
        config = _config(base, {}, seed)
        b_short, b_full = (
            run_trial(short(config).model_copy(update={"timeout_s": 1800})),
            run_trial(config.model_copy(update={"timeout_s": 1800})),
        )
        base_short.append(b_short.val_metric)
        steps["baseline"] = b_short.steps
        print(
            f"seed {seed}: baseline {100 * b_short.val_metric:.2f} % after {b_short.steps} "
            f"steps, {100 * b_full.val_metric:.2f} % after {b_full.steps}"
        )
        for label, change in controls:
            config = _config(base, change, seed)
            m_short, m_full = (
                run_trial(short(config).model_copy(update={"timeout_s": 1800})),
                run_trial(config.model_copy(update={"timeout_s": 1800})),
            )
            steps[label] = m_short.steps
            short_diffs[label].append(100 * (m_short.val_metric - b_short.val_metric))
            full_diffs[label].append(100 * (m_full.val_metric - b_full.val_metric))
            print(
                f"  {label}: short {100 * m_short.val_metric:.2f} % ({short_diffs[label][-1]:+.2f}"
                f" pt, {m_short.steps} steps), full {100 * m_full.val_metric:.2f} % "
                f"({full_diffs[label][-1]:+.2f} pt)"
            )
    print()
    print(
        "| control | short steps | short difference, pt (mean, 95 % CI) | short verdict "
        "| full-run difference, pt (mean, 95 % CI) | full runs | agree |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    agree = misses = needless = 0
    baseline_short = sum(base_short) / len(base_short)
    for label, _ in controls:
        s_mean, s_ci = mean_difference_ci95(short_diffs[label])
        f_mean, f_ci = mean_difference_ci95(full_diffs[label])
        ci = (s_ci[0] / 100, s_ci[1] / 100) if s_ci is not None else None
        short_ok = is_non_inferior(accuracy, ci, baseline_short, args.tolerance_pt)
        full_ok = f_mean >= -args.tolerance_pt
        agree += short_ok == full_ok
        misses += short_ok and not full_ok
        needless += full_ok and not short_ok

        def text(mean: float, ci95: tuple[float, float] | None) -> str:
            return f"{mean:+.2f} ({ci95[0]:+.2f} to {ci95[1]:+.2f})" if ci95 else f"{mean:+.2f}"

        print(
            f"| {label} | {steps[label]} | {text(s_mean, s_ci)} | "
            f"{'non-inferior' if short_ok else 'not shown'} | {text(f_mean, f_ci)} | "
            f"{'the same accuracy' if full_ok else 'lower accuracy'} | "
            f"{'yes' if short_ok == full_ok else 'NO'} |"
        )
    print()
    print(
        f"{agree} of {len(controls)} agree with the full runs; {misses} would pass a change "
        f"that loses accuracy over the budget (a miss), {needless} would turn down a change "
        f"that keeps it; {time.perf_counter() - started:.0f} s"
    )


if __name__ == "__main__":
    main()
