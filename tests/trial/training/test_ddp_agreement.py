"""Collectives under DDP agree (autotune/trial/training/_throughput.py, _to_target.py): two gloo ranks
on this CPU, each a spawned process that runs the loop as :func:`autotune.trial.training.run_rank`
does, with clocks the test skews. A rank left alone in a collective would hang; each rank
also has a gloo timeout and the test a deadline, so a mismatch fails instead."""

from __future__ import annotations

import datetime
import functools
import multiprocessing
import time
from pathlib import Path
from typing import Any

import pytest

from autotune.core.config import TrialConfig
from autotune.testing import make_trial_config

pytestmark = pytest.mark.slow

#: Seconds the two ranks together may take (each is a few seconds of digits).
_DEADLINE_S = 150.0


def _rank_main(
    rank: int, init_file: str, config: TrialConfig, clock_scale: float, ddp_backend: str, queue: Any
) -> None:
    """One rank: this rank's clock runs ``clock_scale`` times as fast; the loop's outcome (or
    the error) goes to ``queue``."""
    try:
        import torch.distributed as dist

        from autotune.trial.devices.cpu import CpuBackend
        from autotune.trial.measure import WindowClock
        from autotune.trial.training import _meter, _throughput, _to_target
        from autotune.trial.training._setup import prepare_training
        from autotune.trial.workloads import load_workload

        def skewed() -> float:
            return time.perf_counter() * clock_scale

        _meter.WindowClock = functools.partial(WindowClock, clock=skewed)  # type: ignore[misc]
        calls: list[tuple[str, bool]] = []  # (tensor device, on the default group) per all_reduce
        all_reduce = dist.all_reduce

        def counting_all_reduce(tensor: Any, *args: Any, **kwargs: Any) -> Any:
            calls.append((tensor.device.type, kwargs.get("group") is None))
            return all_reduce(tensor, *args, **kwargs)

        _to_target.dist.all_reduce = counting_all_reduce  # type: ignore[attr-defined]

        class Backend(CpuBackend):
            pass

        backend = Backend()
        backend.ddp_backend = ddp_backend  # what the loop believes the DDP group runs on
        backend.setup(rank, 2, config.precision)
        dist.init_process_group(
            "gloo",
            init_method=f"file://{init_file}",
            rank=rank,
            world_size=2,
            timeout=datetime.timedelta(seconds=60),
        )
        training = prepare_training(config, backend, load_workload(config.workload), rank, 2)
        if config.objective == "time_to_accuracy":
            m = _to_target.train_to_target(training, rank, 2, maximize=True)
        else:
            m = _throughput.train_for_throughput(training, rank, 2)
        gathered: list[Any] = [None, None]
        dist.all_gather_object(gathered, m.timed_steps)  # run_rank's closing collective
        queue.put((rank, "ok", {"timed_steps": gathered, "steps": m.steps, "calls": calls}))
        dist.destroy_process_group()
    except BaseException as e:  # reported; the test fails on it
        queue.put((rank, "error", f"{type(e).__name__}: {e}"))


def _run_two_ranks(
    tmp_path: Path, config: TrialConfig, scales: tuple[float, float], ddp_backend: str = "gloo"
) -> dict[int, dict[str, Any]]:
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    init_file = str(tmp_path / "dist_init")
    procs = [
        ctx.Process(
            target=_rank_main,
            args=(rank, init_file, config, scales[rank], ddp_backend, queue),
            name=f"test-rank{rank}",
        )
        for rank in range(2)
    ]
    for proc in procs:
        proc.start()
    outcomes: dict[int, Any] = {}
    deadline = time.monotonic() + _DEADLINE_S
    try:
        while len(outcomes) < 2:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                pytest.fail(f"the ranks hung (outcomes so far: {outcomes})")
            try:
                rank, status, payload = queue.get(timeout=min(remaining, 5.0))
            except Exception:  # queue.Empty
                continue
            assert status == "ok", f"rank {rank}: {payload}"
            outcomes[rank] = payload
    finally:
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
                proc.join()
    return outcomes


# --------------------------------------------------------------------------------------------
# advanced.measure.min_timed_s: rank 0 decides whether (and how long) to extend the timing


@pytest.mark.parametrize(
    "scales",
    [
        pytest.param((1000.0, 1.0), id="rank0-clock-fast-no-extension"),
        pytest.param((1.0, 1000.0), id="rank1-clock-fast-rank0-extends"),
    ],
)
def test_ranks_with_skewed_clocks_agree_on_the_timing_extension(
    tmp_path: Path, scales: tuple[float, float]
) -> None:
    # One rank's clock sees its windows cover far more than min_timed_s, the other's far less:
    # before, each decided alone and the trial hung in mismatched collectives.
    config = make_trial_config(family="mlp", width=16, gpu_count=2, measure={"min_timed_s": 0.3})

    outcomes = _run_two_ranks(tmp_path, config, scales)

    timed = outcomes[0]["timed_steps"]
    assert timed[0] == timed[1]  # the same windows on both ranks
    extended = scales[0] == 1.0  # rank 0's clock decides
    assert (timed[0] > outcomes[0]["steps"]) is extended  # extension windows: more steps


# --------------------------------------------------------------------------------------------
# time to accuracy: the per-step stop decision does not run on the DDP (device) group


def test_time_based_stop_decision_is_agreed_on_a_host_group_once_per_step(tmp_path: Path) -> None:
    config = make_trial_config(
        family="mlp",
        width=16,
        gpu_count=2,
        objective="time_to_accuracy",
        train={"epochs": 2, "target_accuracy": 1.0, "eval_every_s": 0.2},
    )

    # The loop believes DDP runs on NCCL (as on CUDA): its per-step agreement must not use that
    # group (an NCCL all-reduce of a device tensor and .tolist(): a device sync every step).
    outcomes = _run_two_ranks(tmp_path, config, (1.0, 1.0), ddp_backend="nccl")

    for rank in (0, 1):
        calls = outcomes[rank]["calls"]
        assert len(calls) == outcomes[rank]["steps"]  # one collective per step
        assert all(device == "cpu" for device, _ in calls)
        assert not any(default_group for _, default_group in calls)
