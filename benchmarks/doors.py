"""What the doors' hooks cost: the built-in CNN trained through the workload door and the same
model written as a loop-door example (examples/loop_cnn), on the same knobs, interleaved in
paired rounds of fresh processes, as the verification runs its rounds.

Each round runs both doors (the order alternating round by round) with that round's seed, in
fresh trial processes (:func:`autotune.study.search.run_trial`, the launcher every study and
verification uses), and takes the loop's throughput over the workload's: the ratio's 95 %
interval is Student's t on the log ratios (:func:`autotune.study.verification.speedup_ci95`). The
hooks cost nothing measurable when that interval holds 1.0 or lies within +-5 %.

Usage::

    python benchmarks/doors.py                     # 5 rounds of the cnn_small baseline
    python benchmarks/doors.py --rounds 3 --epochs 1 --batch-size 128

Run it with the machine to itself: the figures it prints say whether other processes used the
CPUs meanwhile (each run's other-CPU share).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOOP_EXAMPLE = REPO / "examples" / "loop_cnn" / "train.py"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="paired rounds (>= 2)")
    parser.add_argument("--epochs", type=int, default=3, help="the budget: passes over MNIST")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--depth", type=int, default=3)
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--memory-format", default="contiguous")
    parser.add_argument("--num-workers", type=int, default=0)
    args = parser.parse_args()
    if args.rounds < 2:
        parser.error("--rounds: at least 2 for an interval")

    from autotune.core.config import (
        DataSettings,
        MetricSpec,
        TrialConfig,
        WorkloadSpec,
    )
    from autotune.core.config._space import BUILTIN_WORKLOAD_REF
    from autotune.study.search import run_trial
    from autotune.study.verification import speedup_ci95

    knobs = {
        "batch_size": args.batch_size,
        "precision": args.precision,
        "memory_format": args.memory_format,
        "compile_mode": "none",
        "num_workers": args.num_workers,
        "gpu_count": 1,
    }
    train = {"epochs": args.epochs, "warmup_steps": 5, "reference_batch_size": args.batch_size}
    doors = {
        "workload": WorkloadSpec(
            ref=BUILTIN_WORKLOAD_REF,
            args={"family": "cnn", "data": DataSettings(name="mnist").model_dump()},
        ),
        "loop": WorkloadSpec(
            ref=f"{LOOP_EXAMPLE}:train",
            door="loop",
            metric=MetricSpec(name="accuracy", direction="maximize"),
        ),
    }
    train_settings = {"optimizer": "adamw", "lr": 3.0e-3, **train}
    print(
        f"{platform.processor() or platform.machine()}; knobs {knobs}, depth={args.depth} "
        f"width={args.width}, {args.epochs} epochs; {args.rounds} paired rounds"
    )
    rows = []
    started = time.perf_counter()
    for r in range(args.rounds):
        seed = 1000 + r
        order = ["workload", "loop"] if r % 2 == 0 else ["loop", "workload"]
        measured = {}
        for door in order:
            config = TrialConfig.model_validate(
                {
                    "device": "cpu",
                    "workload": doors[door],
                    "model": {"depth": args.depth, "width": args.width},
                    "train": train_settings if door == "workload" else train,
                    "seed": seed,
                    **knobs,
                }
            )
            measured[door] = run_trial(config.model_copy(update={"timeout_s": 1800}))
        w, lp = measured["workload"], measured["loop"]
        ratio = lp.throughput_sps / w.throughput_sps
        rows.append((r, seed, w, lp, ratio))
        print(
            f"round {r + 1} (seed {seed}, {order[0]} first): workload {w.throughput_sps:,.0f} "
            f"samples/s (acc {w.val_metric:.4f}, other CPU {_share(w)}), loop "
            f"{lp.throughput_sps:,.0f} samples/s (acc {lp.val_metric:.4f}, other CPU "
            f"{_share(lp)}), ratio {ratio:.4f}",
            flush=True,
        )
    point, ci = speedup_ci95([row[4] for row in rows])
    assert ci is not None
    verdict = (
        "nothing measurable: the interval holds 1.0"
        if ci[0] <= 1.0 <= ci[1]
        else "within +-5 %"
        if ci[0] >= 0.95 and ci[1] <= 1.05
        else "MEASURABLE: the interval excludes 1.0 and reaches past +-5 %"
    )
    accuracy_gap = statistics.fmean(row[3].val_metric - row[2].val_metric for row in rows)
    print(
        f"loop / workload throughput: {point:.4f} (95 % CI {ci[0]:.4f}-{ci[1]:.4f}) over "
        f"{len(rows)} rounds: {verdict}; mean accuracy difference (loop - workload) "
        f"{100 * accuracy_gap:+.2f} pt; {time.perf_counter() - started:.0f} s"
    )


def _share(m: object) -> str:
    share = getattr(m, "other_cpu_share", None)
    return "n/a" if share is None else f"{100 * share:.0f} %"


if __name__ == "__main__":
    main()
