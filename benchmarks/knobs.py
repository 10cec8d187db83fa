"""What each of the Tuning Guide's knobs does on this machine: each value against PyTorch's
default, on the built-in CNN (cnn_small's baseline) and on examples/char_gpt, in paired,
interleaved rounds of fresh processes.

Every round runs the default and each variant once (the order rotating round by round), with
that round's seed, in fresh trial processes (:func:`autotune.study.search.run_trial`), and takes each
variant's throughput and peak memory over the default's of the same round; the 95 % interval
of each ratio is Student's t on the log ratios (:func:`autotune.study.verification.speedup_ci95`).
FSDP is compared with DDP at two ranks. CUDA-only knobs (cuDNN's autotuning, the allocator's
expandable segments) are not run on a CPU.

Usage::

    python benchmarks/knobs.py                      # 5 rounds, both workloads
    python benchmarks/knobs.py --rounds 3 --workloads cnn

Run it with the machine to itself; each run's other-CPU share is printed.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
GPT = REPO / "examples" / "char_gpt" / "gpt.py"

#: (label, the variant's fields, the default's fields): one comparison each.
COMPARISONS: tuple[tuple[str, dict[str, Any], dict[str, Any]], ...] = (
    ("optimizer_impl=foreach", {"optimizer_impl": "foreach"}, {}),
    ("optimizer_impl=fused", {"optimizer_impl": "fused"}, {}),
    ("activation_checkpointing=true", {"activation_checkpointing": True}, {}),
    ("cpu_threads=1", {"cpu_threads": 1}, {}),
    ("data_parallel=fsdp (2 ranks)", {"gpu_count": 2, "data_parallel": "fsdp"}, {"gpu_count": 2}),
)


def _workloads(epochs: int) -> dict[str, dict[str, Any]]:
    from autotune.core.config import BUILTIN_WORKLOAD_REF, DataSettings

    return {
        "cnn": {
            "workload": {
                "ref": BUILTIN_WORKLOAD_REF,
                "args": {"family": "cnn", "data": DataSettings(name="mnist").model_dump()},
            },
            "model": {"depth": 3, "width": 16},
            "batch_size": 64,
            "train": {"epochs": epochs, "lr": 3.0e-3, "warmup_steps": 5},
        },
        "char_gpt": {
            "workload": {"ref": f"{GPT}:CharGPTWorkload", "args": {"max_bytes": 262_144}},
            "model": {"n_layer": 2, "n_head": 2, "n_embd": 64, "block_size": 64, "dropout": 0.0},
            "batch_size": 64,
            "train": {"epochs": epochs, "lr": 3.0e-3, "warmup_steps": 5},
            "blocks": ("Block",),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="paired rounds (>= 2)")
    parser.add_argument("--epochs", type=int, default=1, help="the budget per run")
    parser.add_argument("--workloads", nargs="+", default=["cnn", "char_gpt"])
    args = parser.parse_args()

    from autotune.core.config import TrialConfig
    from autotune.study.search import run_trial
    from autotune.study.verification import speedup_ci95

    workloads = _workloads(args.epochs)
    print(
        f"{platform.processor() or platform.machine()}; {args.rounds} rounds; {args.epochs} epoch(s)"
    )
    started = time.perf_counter()
    lines = [
        "| workload | knob | throughput vs default (95 % CI) | peak memory vs default (95 % CI) "
        "| accuracy/loss difference | other CPU (max) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name in args.workloads:
        base = workloads[name]
        # The runs of one round: each distinct configuration once.
        configs: dict[str, dict[str, Any]] = {}
        for label, variant, default in COMPARISONS:
            configs[f"default|{sorted(default.items())}"] = default
            configs[label] = variant
        keys = list(configs)
        results: dict[str, list[Any]] = {key: [] for key in keys}
        for r in range(args.rounds):
            order = keys[r % len(keys) :] + keys[: r % len(keys)]
            for key in order:
                fields = {
                    "device": "cpu",
                    "precision": "fp32",
                    "memory_format": "contiguous",
                    "compile_mode": "none",
                    "num_workers": 0,
                    "gpu_count": 1,
                    "seed": 1000 + r,
                    **base,
                    **configs[key],
                }
                m = run_trial(
                    TrialConfig.model_validate(fields).model_copy(update={"timeout_s": 1800})
                )
                results[key].append(m)
                print(
                    f"{name} round {r + 1} {key}: {m.throughput_sps:,.0f} samples/s, "
                    f"{m.peak_memory_bytes / 2**20:.1f} MiB, metric {m.val_metric:.4f}, "
                    f"other CPU {_share(m)}",
                    flush=True,
                )
        for label, _, default in COMPARISONS:
            ref = results[f"default|{sorted(default.items())}"]
            runs = results[label]
            speed, speed_ci = speedup_ci95(
                [v.throughput_sps / d.throughput_sps for v, d in zip(runs, ref, strict=True)]
            )
            memory, memory_ci = speedup_ci95(
                [v.peak_memory_bytes / d.peak_memory_bytes for v, d in zip(runs, ref, strict=True)]
            )
            gap = statistics.fmean(
                v.val_metric - d.val_metric for v, d in zip(runs, ref, strict=True)
            )
            busiest = max((m.other_cpu_share or 0.0) for m in [*runs, *ref])
            lines.append(
                f"| {name} | {label} | {speed:.3f}x ({_ci(speed_ci)}) | {memory:.3f}x "
                f"({_ci(memory_ci)}) | {gap:+.4f} | {100 * busiest:.0f} % |"
            )
    print("\n".join(lines))
    print(f"{time.perf_counter() - started:.0f} s")


def _ci(ci: tuple[float, float] | None) -> str:
    return "n/a" if ci is None else f"{ci[0]:.3f}-{ci[1]:.3f}"


def _share(m: Any) -> str:
    share = getattr(m, "other_cpu_share", None)
    return "n/a" if share is None else f"{100 * share:.0f} %"


if __name__ == "__main__":
    main()
