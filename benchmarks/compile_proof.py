"""Compiled door trials are timed compiled (issue 49): in each door (loop, HF Trainer,
Lightning), a model that ``torch.compile`` speeds up several-fold standalone (a linear layer and
a long chain of pointwise ops), trained eager and compiled in this process, with the standalone
ratio measured in the same run.

The compiled trials use Inductor through a counting backend: Dynamo hands it each graph, it
compiles the graph with ``torch.compile`` (Inductor, the trial's mode) and counts the calls of
the result, so ``compiled_calls`` against ``steps`` says whether the timed windows ran the
compiled frame (one call or more a step; the FLOP-counted warm-up step runs eager).

Usage::

    python benchmarks/compile_proof.py                 # all three doors, mode default
    python benchmarks/compile_proof.py --doors loop --mode reduce-overhead

Prints one JSON line per door. The figures need the machine to itself: say whether it was.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

WIDTH, CHAIN, N_TRAIN, BATCH = 256, 40, 512, 64
CALLS = [0]


class Chain(torch.nn.Module):
    """``Linear(WIDTH, WIDTH)`` then ``CHAIN`` pointwise steps (sin, scale, shift), 10 classes."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = torch.nn.Linear(WIDTH, WIDTH)
        self.head = torch.nn.Linear(WIDTH, 10)

    def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> Any:
        y = self.inner(x)
        for _ in range(CHAIN):
            y = torch.sin(y) * 1.01 + 0.1
        logits = self.head(y)
        if labels is None:
            return logits
        return {"loss": F.cross_entropy(logits, labels), "logits": logits}


class Rows(Dataset):
    """``N_TRAIN`` dict rows ``{"x": (WIDTH,), "labels": ()}`` of a fixed seed."""

    def __init__(self) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(N_TRAIN, WIDTH, generator=g)
        self.y = torch.randint(0, 10, (N_TRAIN,), generator=g)

    def __len__(self) -> int:
        return N_TRAIN

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"x": self.x[i], "labels": self.y[i]}


def loop_door(trial: Any) -> None:
    """The loop door's function: SGD over ``Rows``; reports the last loss' negative."""
    model = Chain()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Rows(), batch_size=BATCH, shuffle=True)
    model, optimizer, loader = trial.prepare(model, optimizer, loader)
    loss = torch.zeros(())
    for batch in trial.steps(loader):
        optimizer.zero_grad()
        with trial.autocast():
            loss = F.cross_entropy(model(batch["x"]), batch["labels"])
        trial.backward(loss)
        optimizer.step()
    trial.report(0.5, samples=N_TRAIN)


def hf_door(trial: Any) -> Any:
    """The HF door's function: a Trainer of ``Chain`` on ``Rows`` (its own AdamW), evaluated
    on ``Rows``."""
    from transformers import Trainer, TrainingArguments

    args = TrainingArguments(
        output_dir="unused-by-a-trial",
        per_device_train_batch_size=BATCH,
        report_to="none",
        use_cpu=not torch.cuda.is_available(),
        save_strategy="no",
    )
    return Trainer(
        model=Chain(), args=trial.training_args(args), train_dataset=Rows(), eval_dataset=Rows()
    )


def lightning_door(trial: Any) -> Any:
    """The Lightning door's function: a LightningModule of ``Chain`` and its loader."""
    import lightning.pytorch as pl

    class Lit(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = Chain()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.net(x)

        def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
            return F.cross_entropy(self(batch["x"]), batch["labels"])

        def train_dataloader(self) -> DataLoader:
            return DataLoader(Rows(), batch_size=BATCH, shuffle=True)

        def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
            self.log("val_loss", F.cross_entropy(self(batch["x"]), batch["labels"]))

        def val_dataloader(self) -> DataLoader:
            return DataLoader(Rows(), batch_size=BATCH)

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    return Lit()


def _counting_compile() -> None:
    """``torch.compile`` given a backend that compiles each graph with Inductor (the caller's
    mode) and counts the calls of the result in ``CALLS`` (once a process: a second call
    changes nothing).

    Each graph goes to Inductor's own entry point, ``torch._inductor.compile`` (what the
    ``inductor`` backend runs: AOTAutograd and Inductor's code generation), with the mode's
    options (``torch._inductor.list_mode_options``), so every counted call is a call of
    Inductor's code. Not a nested ``torch.compile`` of the graph: Dynamo would trace that
    through one shared wrapper frame (``torch._dynamo.external_utils.wrap_inline``) for every
    graph, guard it on each graph's type and the grad mode, and after 8 recompilations
    (``torch._dynamo.config.recompile_limit``) run the rest eagerly, still counted: a
    Lightning module, whose ``self.log`` and validation add graphs, read 0.91x eager that way
    (2026-11-29, an AMD EPYC)."""
    compile_ = torch.compile
    if getattr(compile_, "counting", False):
        return
    import torch._inductor as inductor  # Inductor's entry point: a benchmark, not the package

    def counting(model: Any = None, **kwargs: Any) -> Any:
        mode = kwargs.pop("mode", None)
        kwargs.pop("backend", None)
        options = inductor.list_mode_options(mode) if mode else {}

        def backend(gm: Any, example_inputs: Any) -> Any:
            inner = inductor.compile(gm, example_inputs, options=options)

            def run(*args: Any) -> Any:
                CALLS[0] += 1
                return inner(*args)

            return run

        return compile_(model, backend=backend, **kwargs)

    counting.counting = True  # type: ignore[attr-defined]
    torch.compile = counting  # type: ignore[assignment]


def standalone_ratio(mode: str, steps: int = 10) -> dict[str, float]:
    """Seconds a training step of ``Chain`` takes eager and compiled, outside any door."""
    x, y = torch.randn(BATCH, WIDTH), torch.randint(0, 10, (BATCH,))
    out: dict[str, float] = {}
    for name in ("eager", "compiled"):
        model = Chain()
        step = model if name == "eager" else torch.compile(Chain(), mode=mode)
        for _ in range(3):
            F.cross_entropy(step(x), y).backward()
        start = time.perf_counter()
        for _ in range(steps):
            F.cross_entropy(step(x), y).backward()
        out[f"{name}_step_s"] = (time.perf_counter() - start) / steps
    out["ratio"] = out["eager_step_s"] / out["compiled_step_s"]
    return out


def run_door(
    door: str, compile_mode: str, epochs: int, device: str = "cpu", precision: str = "fp32"
) -> Any:
    """One trial of ``door`` in this process (rank 0 of 1) on ``device`` (``cpu`` or
    ``cuda``) at ``precision``; its Measurement."""
    from autotune.core.config import MetricSpec, WorkloadSpec
    from autotune.testing import make_trial_config
    from autotune.trial.devices.cpu import CpuBackend
    from autotune.trial.devices.cuda import CudaBackend
    from autotune.trial.training._hf import run_hf_trainer
    from autotune.trial.training._lightning import run_lightning
    from autotune.trial.training._loop import run_loop

    ref, metric, runner = {
        "loop": ("loop_door", ("accuracy", "maximize"), run_loop),
        "hf_trainer": ("hf_door", ("eval_loss", "minimize"), run_hf_trainer),
        "lightning": ("lightning_door", ("val_loss", "minimize"), run_lightning),
    }[door]
    spec = WorkloadSpec(
        ref=f"benchmarks.compile_proof:{ref}",
        door=door,  # type: ignore[arg-type]
        metric=MetricSpec(name=metric[0], direction=metric[1]),  # type: ignore[arg-type]
    )
    config = make_trial_config(
        workload=spec,
        batch_size=BATCH,
        compile_mode=compile_mode,
        device=device,
        precision=precision,
        train={"epochs": epochs, "warmup_steps": 3, "reference_batch_size": BATCH},
        measure={"windows": 3},
    )
    backend = CpuBackend() if device == "cpu" else CudaBackend()
    backend.setup(0, 1, precision)
    return runner(config, backend, 0, 1, ())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--doors", nargs="+", default=["loop", "hf_trainer", "lightning"])
    parser.add_argument("--mode", default="default", help="compile mode of the compiled trials")
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the doors import this file
    torch.manual_seed(0)
    _counting_compile()
    for door in args.doors:
        row: dict[str, Any] = {"door": door, "mode": args.mode}
        row["standalone"] = standalone_ratio(args.mode)
        for name, mode in (("eager", "none"), ("compiled", args.mode)):
            CALLS[0] = 0
            try:
                m = run_door(door, mode, args.epochs)
            except Exception as error:  # a door that cannot run here: said, not hidden
                row[name] = {"error": f"{type(error).__name__}: {error}"[:300]}
                continue
            row[name] = {
                "throughput_sps": round(m.throughput_sps, 1),
                "steps": m.steps,
                "compiled_calls": CALLS[0],
                "compile_s": round(m.compile_s, 2),
            }
        eager, compiled = row.get("eager", {}), row.get("compiled", {})
        if "throughput_sps" in eager and "throughput_sps" in compiled:
            row["door_ratio"] = round(compiled["throughput_sps"] / eager["throughput_sps"], 2)
        row["standalone"] = {k: round(v, 4) for k, v in row["standalone"].items()}
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
