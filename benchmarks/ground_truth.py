"""Ground truth for a verified answer: the baseline and the recommendation trained over the
full budget, seed by seed, interleaved, each a fresh trial process
(:func:`autotune.study.search.run_trial`), evaluation and data loading included.

It reports the realised end-to-end speedup of whole runs (the baseline's wall seconds over the
candidate's, the geometric mean over seeds with Student's t 95 % interval on the log ratios:
:func:`autotune.study.verification.speedup_ci95`), beside the speedup a verification predicted from
timed windows, and the paired full-run accuracy difference against the tolerance. The main
job's baseline is the built-in CNN (depth 3, width 16, batch 64, fp32, AdamW at 3e-3) on the
shipped MNIST, 3 epochs.

With ``--study``, the baseline and the recommendation are a stored study's: its baseline
trial's and its verified answer's configurations as they ran (the trial's stored
``config_json``), over the whole budget (a short-evidence share dropped), each seed's runs
otherwise as the trials ran them; the predicted speedup is its verification's (steady state
and whole run). That is how a space of your own (the long run's,
``examples/resnet_mnist/long.yaml``) gets its ground truth.

Usage::

    python benchmarks/ground_truth.py memory_format=channels_last --seeds 5
    python benchmarks/ground_truth.py compile_mode=max-autotune --seeds 5 --predicted 1.39
    python benchmarks/ground_truth.py --study resnet_mnist_long --seeds 5

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


def _study_arms(study_name: str, storage: str) -> tuple[Any, Any, str]:
    """The baseline's and the verified answer's configurations of a stored study (whole
    budget, the study's seed left for the caller to set) and the verification's prediction,
    in words.

    Raises:
        SystemExit: the study has no finished verification, or it recommended nothing.
    """

    import optuna

    from autotune.study.storage import ResultsStore
    from autotune.study.verification import load_verification

    study = optuna.load_study(study_name=study_name, storage=storage)
    results = ResultsStore.open(storage, create=False)
    try:
        summary = load_verification(study, results)
        rows = {r.trial_number: r for r in results.trials(study_name)}
    finally:
        results.close()
    if summary is None or summary.recommended is None or summary.baseline is None:
        raise SystemExit(f"study={study_name}: no verified answer to check")
    answer = summary.recommended

    def whole_budget(number: int) -> Any:
        config = rows[number].trial_config()
        if config is None:
            raise SystemExit(f"study={study_name}: trial {number} stored no configuration")
        train = config.train.model_copy(update={"evidence_share": None})
        return config.model_copy(update={"train": train, "timeout_s": 4 * 3600.0})

    def interval(value: float | None, ci: tuple[float, float] | None) -> str:
        if value is None:
            return "n/a"
        return f"{value:.2f}x" + (f" ({ci[0]:.2f}-{ci[1]:.2f}x)" if ci is not None else "")

    predicted = (
        f"{interval(answer.speedup, answer.speedup_ci95)} a step, "
        f"{interval(answer.end_to_end_speedup, answer.end_to_end_ci95)} a whole run"
    )
    return whole_budget(summary.baseline.trial_number), whole_budget(answer.trial_number), predicted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "change", nargs="*", help="the recommendation's knobs, KEY=VALUE (not with --study)"
    )
    parser.add_argument("--study", default="", help="a stored study whose answer to check")
    parser.add_argument("--storage", default="sqlite:///storage/autotune.db")
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
        "--warmup-steps",
        type=int,
        default=0,
        help="the discarded runs stop after this many optimizer steps (0: the whole budget)",
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

    if args.study and args.change:
        parser.error("give the change's knobs or --study, not both")
    if args.study:
        base_config, answer_config, args.predicted = _study_arms(args.study, args.storage)
        base = base_config.model_dump(mode="json")
        answer = answer_config.model_dump(mode="json")
        change = {k: v for k, v in answer.items() if base.get(k) != v}
        args.change = [f"{k}={v}" for k, v in change.items()]
    else:
        if not args.change:
            parser.error("give the change's knobs (KEY=VALUE) or --study")
        base = main_job_trial(args.epochs)
        change = _knobs(args.change)
    print(f"{platform.processor() or platform.machine()}; {args.seeds} seeds; {args.change}")
    print(f"predicted: {args.predicted or 'n/a'}")
    ratios: list[float] = []
    diffs: list[float] = []
    busiest = 0.0
    started = time.perf_counter()
    timeout_s = max(1800.0, float(base.get("timeout_s", 0)))
    for _ in range(args.warmup):
        warmup = TrialConfig.model_validate({**base, "seed": 99, "timeout_s": timeout_s})
        if args.warmup_steps:
            train = warmup.train.model_copy(update={"max_steps": args.warmup_steps})
            warmup = warmup.model_copy(update={"train": train})
        run_trial(warmup)
    for seed in range(args.seeds):
        for attempt in range(3):
            walls: dict[str, float] = {}
            metrics: dict[str, float] = {}
            shares: list[float] = []
            order = ("baseline", "candidate") if seed % 2 == 0 else ("candidate", "baseline")
            for who in order:
                fields = {
                    **base,
                    **(change if who == "candidate" else {}),
                    "seed": 100 + seed,
                    "timeout_s": timeout_s,
                }
                t0 = time.perf_counter()
                m = run_trial(TrialConfig.model_validate(fields))
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
