"""Planted controls for the paired K-step check (autotune/study/evidence.py), judged against full
runs: the main job's baseline (the built-in CNN, depth 3, width 16, batch 64, fp32, AdamW at
3e-3, on the shipped MNIST test set, 3 epochs) and a set of changes, each run as a real trial
in fresh processes (:func:`autotune.study.search.run_trial`), seed by seed.

For every seed, the baseline, its float64 twin and each control run with that seed; a
control's check compares its first K losses with the same seed's baseline, against the twin's
floor (:func:`autotune.study.evidence.check_equivalence`). Its full run's validation accuracy is
compared with the same seed's baseline: the ground truth of "the same accuracy" is the mean
paired difference within the 0.5 pt tolerance. Positive controls keep the math (their check
should pass); negative controls change it or break it (their check should fail).

Usage::

    python benchmarks/evidence.py                  # 3 seeds, every control
    python benchmarks/evidence.py --seeds 5 --controls channels_last "lr x10"
    python benchmarks/evidence.py --source bf16    # each control at bf16, against bf16's floor

With ``--source bf16`` every control runs at bf16 and is checked against the baseline at bf16
(the search's reuse source for a bf16 variant), judged by that source's own distance from the
float64 twin, twice (:func:`autotune.study.evidence.source_floor`); its accuracy is compared
with that source's.

Run it with the machine to itself; each run's other-CPU share is printed beside its row.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from typing import Any

from _main_job import main_job_trial

#: (label, the control's fields, expected: the check passes)
CONTROLS: tuple[tuple[str, dict[str, Any], bool], ...] = (
    ("DataLoader workers 2", {"num_workers": 2}, True),
    ("channels_last", {"memory_format": "channels_last"}, True),
    ("compile default", {"compile_mode": "default"}, True),
    ("fused AdamW", {"optimizer_impl": "fused"}, True),
    ("lr x10", {"train": {"lr": 3.0e-2}}, False),
    ("global batch x8 (lr unscaled)", {"batch_size": 512}, False),
    (
        "BatchNorm over micro-batches of 4",
        {"batch_size": 4, "train": {"global_batch_size": 64}},
        False,
    ),
    ("another initial seed", {"seed_offset": 7}, False),
    ("bf16 (numerics)", {"precision": "bf16"}, False),
)


def _config(base: dict[str, Any], change: dict[str, Any], seed: int) -> Any:
    from autotune.core.config import TrialConfig

    fields = {**base, **{k: v for k, v in change.items() if k not in ("train", "seed_offset")}}
    fields["train"] = {**base["train"], **change.get("train", {})}
    fields["seed"] = seed + int(change.get("seed_offset", 0))
    return TrialConfig.model_validate(fields)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3, help="seeds, one full run each")
    parser.add_argument("--epochs", type=int, default=3, help="the budget per full run")
    parser.add_argument("--controls", nargs="+", help="labels to run (default: all)")
    parser.add_argument("--tolerance-pt", type=float, default=0.5)
    parser.add_argument(
        "--source",
        choices=("bf16", "fp16"),
        help="run the controls at this precision and check them against the baseline at it",
    )
    args = parser.parse_args()

    from autotune.study.evidence import check_equivalence, check_floor, source_floor
    from autotune.study.search import run_trial
    from autotune.study.verification import mean_difference_ci95

    base = main_job_trial(args.epochs)
    controls = [c for c in CONTROLS if not args.controls or c[0] in args.controls]
    at = {"precision": args.source} if args.source else {}
    if args.source:  # a change of the precision is no control against a source at it
        controls = [c for c in controls if "precision" not in c[1]]
    print(
        f"{platform.processor() or platform.machine()}; {args.seeds} seeds; {args.epochs} epochs"
        f"{f'; every run at {args.source}, checked against the baseline at it' if at else ''}"
    )
    started = time.perf_counter()
    verdicts: dict[str, list[str]] = {label: [] for label, _, _ in controls}
    diffs: dict[str, list[float]] = {label: [] for label, _, _ in controls}
    firsts: dict[str, list[float]] = {label: [] for label, _, _ in controls}
    busiest = 0.0
    for seed in range(args.seeds):
        baseline = run_trial(_config(base, {}, seed).model_copy(update={"timeout_s": 1800}))
        twin = run_trial(
            _config(base, {}, seed).model_copy(update={"twin": "float64", "timeout_s": 1800})
        )
        floor = check_floor(baseline.extra["check_losses"], twin.extra["check_losses"])
        if at:
            baseline = run_trial(_config(base, at, seed).model_copy(update={"timeout_s": 1800}))
            floor = source_floor(
                floor,
                100.0,
                baseline.extra["check_losses"],
                twin.extra["check_losses"],
                f"the {args.source} baseline",
            )
        print(f"seed {seed}: baseline {100 * baseline.val_metric:.2f} %, floor {floor}")
        for label, change, _ in controls:
            config = _config(base, {**at, **change}, seed)
            m = run_trial(config.model_copy(update={"timeout_s": 1800}))
            check = check_equivalence(
                m.extra["check_losses"], baseline.extra["check_losses"], floor, 100.0
            )
            verdicts[label].append(check.verdict)
            firsts[label].append(check.first_divergence)
            diffs[label].append(100 * (m.val_metric - baseline.val_metric))
            busiest = max(busiest, m.other_cpu_share or 0.0)
            print(
                f"  {label}: {check.verdict} (first {check.first_divergence:.1e}, max "
                f"{check.max_divergence:.1e}); accuracy {100 * m.val_metric:.2f} % "
                f"({diffs[label][-1]:+.2f} pt); other CPU {100 * (m.other_cpu_share or 0):.0f} %"
            )
    print()
    print(
        "| control | expected | the check (per seed) | first-step divergence (median) "
        "| full-run accuracy difference, pt (mean, 95 % CI) | full runs agree |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    true_pos = false_neg = true_neg = false_pos = 0
    for label, _, expected in controls:
        passed = [v != "diverged" for v in verdicts[label]]
        mean, ci = mean_difference_ci95(diffs[label])
        same_accuracy = mean >= -args.tolerance_pt
        for p in passed:
            if expected:
                true_pos += p
                false_neg += not p
            else:
                true_neg += not p
                false_pos += p
        ci_text = f"{ci[0]:+.2f} to {ci[1]:+.2f}" if ci is not None else "n/a"
        print(
            f"| {label} | {'pass' if expected else 'fail'} | {', '.join(verdicts[label])} "
            f"| {statistics.median(firsts[label]):.1e} | {mean:+.2f} ({ci_text}) "
            f"| {'the same accuracy' if same_accuracy else 'lower accuracy'} |"
        )
    sensitivity = true_pos / max(1, true_pos + false_neg)
    specificity = true_neg / max(1, true_neg + false_pos)
    print()
    print(
        f"sensitivity {true_pos}/{true_pos + false_neg} = {sensitivity:.2f}; specificity "
        f"{true_neg}/{true_neg + false_pos} = {specificity:.2f} (per seed); "
        f"{time.perf_counter() - started:.0f} s; busiest run: other CPU {100 * busiest:.0f} %"
    )


if __name__ == "__main__":
    main()
