"""Ground truth for a verified answer: the baseline and the recommendation trained over the
full budget, seed by seed, interleaved, each a fresh trial process
(:func:`autotune.study.search.run_trial`), evaluation and data loading included.

It reports the realised end-to-end speedup of whole runs (the baseline's wall seconds over the
candidate's, the geometric mean over seeds with Student's t 95 % interval on the log ratios:
:func:`autotune.study.verification.speedup_ci95`), beside the speedup a verification predicted from
timed windows, and the paired full-run accuracy difference against the tolerance. The main
job's baseline is the built-in CNN (depth 3, width 16, batch 64, fp32, AdamW at 3e-3) on the
shipped MNIST, 3 epochs.

Usage::

    python benchmarks/ground_truth.py memory_format=channels_last --seeds 5
    python benchmarks/ground_truth.py compile_mode=max-autotune --seeds 5 --predicted 1.39

Run it with the machine to itself.
"""

from __future__ import annotations

import argparse
import math
import platform
import time
from typing import Any

from _main_job import main_job_trial


def _knobs(pairs: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs as trial fields (integers where they parse)."""
    fields: dict[str, Any] = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        fields[key] = int(value) if value.isdigit() else value
    return fields


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("change", nargs="+", help="the recommendation's knobs, KEY=VALUE")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--predicted", default="", help="the verified speedup, for the table")
    parser.add_argument("--tolerance-pt", type=float, default=0.5)
    parser.add_argument(
        "--warmup",
        type=int,
        default=1,
        help="discarded baseline runs first (the first process after a start is slower)",
    )
    parser.add_argument(
        "--max-other-cpu",
        type=float,
        default=0.10,
        help="a pair with a run above this other-CPU share is run again (at most twice)",
    )
    args = parser.parse_args()

    from autotune.core.config import TrialConfig
    from autotune.study.search import run_trial
    from autotune.study.verification import mean_difference_ci95, speedup_ci95

    base = main_job_trial(args.epochs)
    change = _knobs(args.change)
    print(f"{platform.processor() or platform.machine()}; {args.seeds} seeds; {args.change}")
    ratios: list[float] = []
    diffs: list[float] = []
    busiest = 0.0
    started = time.perf_counter()
    for _ in range(args.warmup):
        run_trial(
            TrialConfig.model_validate({**base, "seed": 99}).model_copy(update={"timeout_s": 1800})
        )
    for seed in range(args.seeds):
        for attempt in range(3):
            walls: dict[str, float] = {}
            metrics: dict[str, float] = {}
            shares: list[float] = []
            order = ("baseline", "candidate") if seed % 2 == 0 else ("candidate", "baseline")
            for who in order:
                fields = {**base, **(change if who == "candidate" else {}), "seed": 100 + seed}
                t0 = time.perf_counter()
                m = run_trial(
                    TrialConfig.model_validate(fields).model_copy(update={"timeout_s": 1800})
                )
                walls[who] = time.perf_counter() - t0
                metrics[who] = m.val_metric
                shares.append(m.other_cpu_share or 0.0)
            if max(shares) <= args.max_other_cpu or attempt == 2:
                break
            print(f"seed {100 + seed}: other CPU {100 * max(shares):.0f} %: run again")
        busiest = max(busiest, *shares)
        ratios.append(walls["baseline"] / walls["candidate"])
        diffs.append(100 * (metrics["candidate"] - metrics["baseline"]))
        print(
            f"seed {100 + seed}: baseline {walls['baseline']:.1f} s {100 * metrics['baseline']:.2f} %, "
            f"candidate {walls['candidate']:.1f} s {100 * metrics['candidate']:.2f} %"
        )
    speedup, ci = speedup_ci95(ratios)
    diff, diff_ci = mean_difference_ci95(diffs)
    ci_text = f"{ci[0]:.2f}-{ci[1]:.2f}x" if ci is not None else "n/a"
    diff_text = f"{diff_ci[0]:+.2f} to {diff_ci[1]:+.2f}" if diff_ci is not None else "n/a"
    same = diff_ci is not None and diff_ci[0] > -args.tolerance_pt
    print()
    print(
        "| change | predicted (verified) | realised end-to-end speedup (95 % CI) "
        "| full-run accuracy difference, pt (95 % CI) | non-inferior within the tolerance |"
    )
    print("| --- | --- | --- | --- | --- |")
    print(
        f"| {' '.join(args.change)} | {args.predicted or 'n/a'} | {speedup:.2f}x ({ci_text}) "
        f"| {diff:+.2f} ({diff_text}) | {'yes' if same else 'no'} (n={len(diffs)} seeds) |"
    )
    if not math.isfinite(speedup):
        raise SystemExit("no finite speedup")
    print(f"{time.perf_counter() - started:.0f} s; busiest run: other CPU {100 * busiest:.0f} %")


if __name__ == "__main__":
    main()
