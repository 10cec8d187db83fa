"""Issue 49: a compiled door trial is timed compiled, in every door. The doors count FLOPs on
the last warm-up step under ``FlopCounterMode``, which can make Dynamo mark the frame skipped
for good; here each door's ``torch.compile`` is given a backend that counts the calls of its
compiled graphs, and the steps after the counted one (the timed windows) must all call them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from autotune.core.config import MetricSpec, WorkloadSpec
from autotune.trial.devices.cpu import CpuBackend
from autotune.trial.training._hf import run_hf_trainer
from autotune.trial.training._lightning import run_lightning
from autotune.trial.training._loop import run_loop
from tests.trial.training import door_code
from tests.trial.training.test_hf import hf_config
from tests.trial.training.test_lightning import lightning_config
from tests.trial.training.test_loop import loop_config


def pure_lightning(trial: Any) -> Any:
    """:func:`door_code.lightning_module` whose ``training_step`` has no side effect: the
    tests' own records (``SEEN`` growing each step) change Dynamo's guards every step and hit
    its recompile limit after 8 steps, which is the test code's doing, not the door's."""
    import torch.nn.functional as F

    module, data = door_code.lightning_module(trial)

    def training_step(batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        return F.cross_entropy(module.net(batch["image"]), batch["label"])

    module.training_step = training_step
    return module, data


@pytest.fixture
def compiled_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """``torch.compile`` with a backend that counts its compiled graphs' calls (``[n]``)."""
    calls = [0]
    compile_ = torch.compile

    def backend(gm: Any, example_inputs: Any, **_: Any) -> Callable[..., Any]:
        def compiled(*args: Any) -> Any:
            calls[0] += 1
            return gm.forward(*args)

        return compiled

    def counting_compile(model: Any = None, **kwargs: Any) -> Any:
        kwargs.pop("mode", None)
        kwargs.pop("options", None)
        kwargs["backend"] = backend
        return compile_(model, **kwargs) if model is not None else compile_(**kwargs)

    monkeypatch.setattr(torch, "compile", counting_compile)
    return calls


@pytest.mark.parametrize("door", ["loop", "hf_trainer", "lightning"])
def test_the_timed_steps_after_the_flop_counted_step_run_compiled(
    door: str, compiled_calls: list[int]
) -> None:
    if door == "loop":
        m = run_loop(loop_config(compile_mode="default"), CpuBackend(), 0, 1, ())
    elif door == "hf_trainer":
        m = run_hf_trainer(hf_config(compile_mode="default"), CpuBackend(), 0, 1, ())
    else:
        spec = WorkloadSpec(
            ref=f"{__name__}:pure_lightning",
            door="lightning",
            metric=MetricSpec(name="val_acc", direction="maximize"),
        )
        config = lightning_config(compile_mode="default", workload=spec)
        m = run_lightning(config, CpuBackend(), 0, 1, ())
    assert m.extra["flops_per_sample"] > 0  # the counted step counted
    # One compiled call at least per step, except the FLOP-counted one (run eager): had
    # Dynamo skipped the frame after the count, only the warm-up steps before it would call.
    assert compiled_calls[0] >= m.steps - 1, (compiled_calls[0], m.steps)
