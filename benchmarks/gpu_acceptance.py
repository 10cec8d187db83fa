"""The GPU acceptance run (issue 49): one GPU, staged, within 9 minutes, one JSON line a stage.

Stages, in order (each line has ``stage``, ``status`` = ``ok`` / ``failed`` / ``skipped`` with
its ``reason``, ``seconds``, and the figure that proves it):

1. ``env``: torch, CUDA, the device's name;
2. ``compile_probe``: a compiled step, FLOP-counted by the doors' ``StepFlopCounter``, then
   more steps: ``compiled_calls_after`` must equal the steps after the count;
3. ``pytest_gpu``: ``pytest -m gpu`` (CUDA only);
4. ``workload_*``: the workload door over fp32, bf16, fp16 with the fused optimizer, compile
   default, reduce-overhead, activation checkpointing, expandable segments with
   cudnn.benchmark (CUDA only): memory kind, graph pool, compile seconds, energy source and
   watts, MFU peak source; ``reduce_overhead_vs_eager`` > 1;
5. ``door_*``: the loop, HF and Lightning doors with compile (default) and bf16 (CUDA only),
   on ``benchmarks/compile_proof.py``'s pointwise chain, in this process through its counting
   backend: throughput, memory kind, compile seconds, and ``compiled_calls`` against the
   trial's ``steps`` (``compiled_ok``: at least one compiled call a step but the eager
   FLOP-counted one).

On a machine without CUDA every CUDA stage is skipped, each saying so in its line.

Usage::

    python benchmarks/gpu_acceptance.py                # on the GPU machine
    python benchmarks/gpu_acceptance.py --tiny         # a quick rehearsal (the CPU test)
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
#: The run's wall-clock ceiling (seconds): 9 minutes.
BUDGET_S = 540.0
WORKLOAD_STAGES: dict[str, dict[str, Any]] = {
    "fp32": {"precision": "fp32"},
    "bf16": {"precision": "bf16"},
    "fp16_fused": {"precision": "fp16", "optimizer_impl": "fused"},
    "compile_default": {"precision": "bf16", "compile_mode": "default"},
    "reduce_overhead": {"precision": "bf16", "compile_mode": "reduce-overhead"},
    "checkpointing": {"precision": "bf16", "activation_checkpointing": True},
    "expandable_cudnn": {
        "precision": "bf16",
        "cuda_expandable_segments": True,
        "cudnn_benchmark": True,
    },
}


def emit(out: Any, row: dict[str, Any]) -> None:
    """Writes ``row`` as one JSON line to stdout and to ``out`` (None: stdout only)."""
    line = json.dumps(row, default=str)
    print(line, flush=True)
    if out is not None:
        out.write(line + "\n")
        out.flush()


def stage(name: str, body: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Runs ``body`` as stage ``name``: its figures, or its error as ``failed``."""
    start = time.perf_counter()
    try:
        row = {"stage": name, "status": "ok", **body()}
    except Exception as error:  # a stage that fails is written down; the next goes on
        row = {"stage": name, "status": "failed", "reason": f"{type(error).__name__}: {error}"}
    row["seconds"] = round(time.perf_counter() - start, 2)
    return row


def env() -> dict[str, Any]:
    """The environment: Python, torch, CUDA and the device."""
    import torch

    cuda = torch.cuda.is_available()
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cuda_available": cuda,
        "device": torch.cuda.get_device_name(0) if cuda else platform.processor() or "cpu",
        "set_stance": hasattr(torch.compiler, "set_stance"),
    }


def compile_probe(steps_after: int) -> dict[str, Any]:
    """A compiled step (a counting backend), then one counted by ``StepFlopCounter``, then
    ``steps_after``: how many of those ran the compiled graph (all, when the count left
    Dynamo's frame alone)."""
    import torch

    from autotune.core.flops import StepFlopCounter

    calls = [0]

    def backend(gm: Any, example_inputs: Any) -> Any:
        def run(*args: Any) -> Any:
            calls[0] += 1
            return gm.forward(*args)

        return run

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = torch.nn.Linear(64, 64).to(device)
    step = torch.compile(lambda x: torch.sin(model(x)).sum(), backend=backend)
    x = torch.randn(8, 64, device=device)
    for _ in range(2):
        step(x).backward()
    counter = StepFlopCounter()
    counter.open()
    step(x).backward()
    counter.close()
    before = calls[0]
    for _ in range(steps_after):
        step(x).backward()
    after = calls[0] - before
    if after != steps_after:
        raise AssertionError(f"{after} of {steps_after} steps after the count ran compiled")
    flops = counter.flops.total if counter.flops is not None else None
    return {"compiled_calls_after": after, "steps_after": steps_after, "counted_flops": flops}


def pytest_gpu(timeout_s: float) -> dict[str, Any]:
    """``pytest -m gpu`` in a child: its exit code and last line."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    last = (proc.stdout.strip().splitlines() or [""])[-1]
    if proc.returncode not in (0, 5):
        raise RuntimeError(f"pytest -m gpu exited {proc.returncode}: {last}")
    return {"returncode": proc.returncode, "summary": last}


def workload_trial(knobs: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """One workload-door trial on CUDA of the defaults' model with ``knobs``: its figures."""
    from autotune.study.search import run_trial
    from autotune.testing import make_trial_config

    config = make_trial_config(device="cuda", **knobs)
    m = run_trial(config.model_copy(update={"timeout_s": timeout_s}))
    extra = m.extra
    return {
        "throughput_sps": m.throughput_sps,
        "memory_kind": m.memory_kind,
        "graph_pool_bytes": extra.get("cuda_graph_pool_bytes"),
        "compile_s": m.compile_s,
        "energy_source": extra.get("energy_source"),
        "watts": extra.get("gpu_power_w"),
        "energy_note": extra.get("energy_note"),
        "mfu_peak_source": extra.get("peak_flops_source"),
    }


def door_trial(door: str, device: str, epochs: int) -> dict[str, Any]:
    """One trial of ``door`` (``loop``, ``hf_trainer``, ``lightning``) on ``device`` with
    compile default, bf16 on CUDA (fp32 on the CPU), in this process: its figures, and
    whether its steps ran the compiled frame (``benchmarks/compile_proof.py``'s counting
    backend; ``torch.compile`` stays patched in this process after it)."""
    from benchmarks import compile_proof

    compile_proof._counting_compile()
    compile_proof.CALLS[0] = 0
    precision = "bf16" if device == "cuda" else "fp32"
    m = compile_proof.run_door(door, "default", epochs, device=device, precision=precision)
    calls = compile_proof.CALLS[0]
    return {
        "device": device,
        "precision": precision,
        "throughput_sps": m.throughput_sps,
        "steps": m.steps,
        "compiled_calls": calls,
        "compiled_ok": calls >= (m.steps or 0) - 1 > 0,
        "compile_s": m.compile_s,
        "memory_kind": m.memory_kind,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="the smallest budget (a rehearsal)")
    parser.add_argument("--out", type=Path, help="also write the JSON lines here")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    start = time.perf_counter()
    out = args.out.open("w", encoding="utf-8") if args.out else None
    environment = stage("env", env)
    emit(out, environment)
    emit(out, stage("compile_probe", lambda: compile_probe(2 if args.tiny else 10)))
    cuda = bool(environment.get("cuda_available"))
    skip = {"status": "skipped", "reason": "no CUDA device", "seconds": 0.0}

    def left() -> float:
        return BUDGET_S - (time.perf_counter() - start)

    if cuda:
        emit(out, stage("pytest_gpu", lambda: pytest_gpu(min(120.0, left()))))
    else:
        emit(out, {"stage": "pytest_gpu", **skip})
    throughput: dict[str, float] = {}
    for name, knobs in WORKLOAD_STAGES.items():
        if not cuda:
            emit(out, {"stage": f"workload_{name}", **skip})
            continue
        if left() < 60:
            emit(out, {"stage": f"workload_{name}", "status": "skipped", "reason": "budget"})
            continue
        row = stage(f"workload_{name}", partial(workload_trial, knobs, min(60.0, left())))
        if row["status"] == "ok":
            throughput[name] = row["throughput_sps"]
            pool = row.get("graph_pool_bytes") or 0
            row["graph_pool_ok"] = (pool > 0) == (name == "reduce_overhead")
            row["compile_s_ok"] = (row["compile_s"] > 0) == ("compile_mode" in knobs)
        emit(out, row)
    if "reduce_overhead" in throughput and "bf16" in throughput:
        ratio = throughput["reduce_overhead"] / throughput["bf16"]
        emit(out, {"stage": "reduce_overhead_vs_eager", "status": "ok", "ratio": ratio})
    for door in ("loop", "hf_trainer", "lightning"):
        if not cuda:
            emit(out, {"stage": f"door_{door}", **skip})
        elif left() < 60:
            emit(out, {"stage": f"door_{door}", "status": "skipped", "reason": "budget"})
        else:
            emit(
                out, stage(f"door_{door}", partial(door_trial, door, "cuda", 1 if args.tiny else 2))
            )
    emit(out, {"stage": "end", "status": "ok", "wall_s": round(time.perf_counter() - start, 1)})
    if out is not None:
        out.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
