"""The exhaustive check within a space: every configuration that keeps the baseline's model,
timed with short windows in fresh processes, against the study's same-model answer measured
in the same run.

Issue 48 asks that the study's same-model answer reach at least 95 % of the best same-model
configuration's throughput. This script enumerates the space as the study's device restricts
it (``prepare_run``: the precision screen and the device's rules included), with every model
knob at the baseline's value and every other knob over its values (batch size, precision,
memory format, compile mode, DataLoader workers, GPU count, the guide's knobs the space
searches). Each configuration runs timing only (its warm-up, compile included, and
``advanced.measure.timing_steps`` timed steps: :func:`autotune.trial.measure.plan_reused_windows`),
in a fresh trial process (:func:`autotune.study.search.run_trial`), ``--rounds`` times in rotating
order; its throughput is the median over the rounds. The answer is named with ``--answer``
(the knobs the main job's verdict changed, ``key=value`` each) and is one of the configurations
timed; the ratio it reports is the answer's median over the best median.

Usage::

    python benchmarks/exhaustive.py --answer memory_format=channels_last
    python benchmarks/exhaustive.py --rounds 1 --recheck 8 --answer memory_format=channels_last
    python benchmarks/exhaustive.py --answer compile_mode=max-autotune --only compile_mode=none,max-autotune

``--only key=v1,v2`` keeps those values of a knob (the table says how many configurations were
left out: then the check is not exhaustive, and the script says so). ``--recheck N`` times
the N fastest and the answer twice more after the rounds (one round's noise reorders near
neighbours), for a whole space in one round. Run it with the machine
to itself; every run's other-CPU share is printed.
"""

from __future__ import annotations

import argparse
import itertools
import platform
import statistics
import time
from typing import Any


def _pairs(items: list[str], flag: str) -> dict[str, str]:
    """``["k=v", ...]`` as a dict.

    Raises:
        SystemExit: an item without ``=`` (argparse's exit code 2).
    """
    pairs: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"exhaustive.py: {flag} {item!r}: write key=value")
        pairs[key] = value
    return pairs


def same_model_configurations(
    space: Any, only: dict[str, list[str]]
) -> tuple[list[dict[str, Any]], int]:
    """Every knob combination of ``space`` with the model knobs at the baseline's values,
    kept to ``only``'s values where given.

    Returns:
        ``(configurations, left_out)``: the knob dicts (by Optuna parameter name) and how many
        combinations ``only`` left out.

    Raises:
        SystemExit: ``only`` names a knob the space does not search.
    """
    from autotune.study.baseline import baseline_params

    base, _ = baseline_params(space)
    knobs = space.knobs()
    unknown = sorted(set(only) - set(knobs))
    if unknown:
        raise SystemExit(f"exhaustive.py: --only {unknown[0]}: the space has no such knob")
    free: dict[str, list[Any]] = {}
    for name, knob in knobs.items():
        if name in space.model.knobs:
            continue
        if not hasattr(knob, "values"):
            raise SystemExit(f"exhaustive.py: {name} is real-valued; it cannot be enumerated")
        free[name] = list(knob.values())
    every = list(itertools.product(*free.values()))
    kept = [
        values
        for values in every
        if all(str(v) in only.get(name, [str(v)]) for name, v in zip(free, values, strict=True))
    ]
    model = {name: base[name] for name in space.model.knobs if name in base}
    configurations = [{**model, **dict(zip(free, values, strict=True))} for values in kept]
    return configurations, len(every) - len(kept)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--space", default="cnn_small")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--answer", nargs="*", default=[], metavar="KNOB=VALUE")
    parser.add_argument("--only", nargs="*", default=[], metavar="KNOB=V1,V2")
    parser.add_argument("--timeout-s", type=float, default=600.0)
    parser.add_argument(
        "--recheck",
        type=int,
        default=0,
        metavar="N",
        help="after the rounds, time the N fastest and the answer twice more each",
    )
    args = parser.parse_args()

    from autotune.core.config import ReusedMetric, load_run_config
    from autotune.core.exceptions import TrialError
    from autotune.study.api import prepare_run
    from autotune.study.baseline import baseline_params
    from autotune.study.search import run_trial
    from autotune.study.search._opening import knob_trial_config

    config = load_run_config([f"space={args.space}", "device=cpu", "storage=sqlite:///:memory:"])
    prepared = prepare_run(config)
    space = prepared.space
    only = {k: v.split(",") for k, v in _pairs(args.only, "--only").items()}
    configurations, left_out = same_model_configurations(space, only)
    base, _ = baseline_params(space)
    answer = {**{k: str(v) for k, v in base.items()}, **_pairs(args.answer, "--answer")}
    answer_key = tuple(sorted((k, answer[k]) for k in configurations[0]))
    timed = [
        knob_trial_config(config, space, prepared.capabilities, knobs).model_copy(
            update={"reuse": ReusedMetric(from_trial=0, val_metric=0.0, train_loss=0.0, steps=1)}
        )
        for knobs in configurations
    ]
    print(
        f"{platform.processor() or platform.machine()}, {len(configurations)} same-model "
        f"configurations of {args.space} (left out by --only: {left_out}), {args.rounds} rounds"
    )
    throughputs: dict[int, list[float]] = {i: [] for i in range(len(timed))}
    failures: dict[int, str] = {}
    started = time.perf_counter()
    for round_index in range(args.rounds):
        shift = round_index * len(timed) // max(1, args.rounds)
        for i in [*range(shift, len(timed)), *range(shift)]:
            if i in failures:
                continue
            try:
                m = run_trial(timed[i].model_copy(update={"timeout_s": args.timeout_s}))
            except TrialError as e:
                failures[i] = e.failure
                continue
            throughputs[i].append(m.throughput_sps)
            share = f"{m.other_cpu_share:.0%}" if m.other_cpu_share is not None else "n/a"
            print(
                f"round {round_index} [{i + 1}/{len(timed)}] {m.throughput_sps:9,.0f} samples/s "
                f"other CPU {share}: {configurations[i]}",
                flush=True,
            )
    medians = {i: statistics.median(v) for i, v in throughputs.items() if v}
    if args.recheck:
        # One round's noise can reorder near neighbours: the N fastest and the answer run
        # twice more each (interleaved), and their medians take every run.
        leaders = sorted(medians, key=medians.__getitem__, reverse=True)[: args.recheck]
        keys = {
            i: tuple(sorted((k, str(v)) for k, v in c.items()))
            for i, c in enumerate(configurations)
        }
        leaders += [i for i in medians if keys[i] == answer_key and i not in leaders]
        for again in range(2):
            for i in leaders:
                m = run_trial(timed[i].model_copy(update={"timeout_s": args.timeout_s}))
                throughputs[i].append(m.throughput_sps)
                print(
                    f"recheck {again} {m.throughput_sps:9,.0f} samples/s: {configurations[i]}",
                    flush=True,
                )
        medians = {i: statistics.median(v) for i, v in throughputs.items() if v}
    ranked = sorted(medians, key=medians.__getitem__, reverse=True)
    best = medians[ranked[0]]
    print(f"\n{time.perf_counter() - started:,.0f} s; failed: {len(failures)}")
    print("| rank | samples/s | runs | vs best | configuration |\n| --- | --- | --- | --- | --- |")
    answer_index = None
    for rank, i in enumerate(ranked, 1):
        key = tuple(sorted((k, str(v)) for k, v in configurations[i].items()))
        mark = " **(the study's answer)**" if key == answer_key else ""
        if mark:
            answer_index = i
        changed = {k: v for k, v in configurations[i].items() if base.get(k) != v}
        print(
            f"| {rank} | {medians[i]:,.0f} | {len(throughputs[i])} | {medians[i] / best:.2f} "
            f"| {changed or 'baseline'}{mark} |"
        )
    if answer_index is None:
        print("the answer was not among the configurations timed (check --answer and --only)")
        return
    ratio = medians[answer_index] / best
    verdict = "holds" if ratio >= 0.95 else "fails"
    scope = "" if not left_out else f" (not exhaustive: {left_out} left out by --only)"
    print(
        f"\nthe answer reaches {ratio:.1%} of the best same-model throughput: the 95 % bar {verdict}{scope}"
    )


if __name__ == "__main__":
    main()
