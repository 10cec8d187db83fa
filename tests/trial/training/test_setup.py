"""What both loops share (autotune/trial/training/_setup.py): the peak learning rate scaled with the
global batch, and the learning-rate schedule (linear warm-up, then constant or cosine)."""

from __future__ import annotations

import contextlib
import itertools
import math
from collections.abc import Iterator, Sequence

import pytest
import torch
from torch.utils.data import TensorDataset

from autotune.core.config import TrainSettings, TrialConfig
from autotune.core.hardware import STUDY_PID_VARIABLE
from autotune.testing import make_trial_config
from autotune.trial.devices.cpu import CpuBackend
from autotune.trial.measure import CpuShareMeter
from autotune.trial.training._setup import (
    Training,
    cpu_meter_roots,
    make_loader,
    make_lr_schedule,
    prepare_training,
)
from autotune.trial.workloads import load_workload
from tests.trial.training.loops import train_here

pytestmark = pytest.mark.slow


def test_the_peak_learning_rate_follows_the_global_batch() -> None:
    # SGD, linear rule: batch 128 against the reference 64 trains at twice the rate.
    config = make_trial_config(
        family="mlp",
        width=32,
        batch_size=128,
        train={"optimizer": "sgd", "lr": 0.05, "reference_batch_size": 64},
    )

    m, _ = train_here(config)

    assert m.extra["lr_peak"] == pytest.approx(0.1)
    assert math.isfinite(m.train_loss)


def _lrs(settings: TrainSettings, total_steps: int) -> list[float]:
    """The learning rate of each of ``total_steps`` optimizer steps (peak 0.4)."""
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.4)
    schedule = make_lr_schedule(optimizer, settings, total_steps)
    lrs = []
    for _ in range(total_steps):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        if schedule is not None:
            schedule.step()
    return lrs


def test_lr_warmup_rises_linearly_to_the_peak() -> None:
    constant = TrainSettings(lr_schedule="constant", lr_warmup_fraction=0.5)  # 4 of 8 steps

    assert _lrs(constant, 8) == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.4, 0.4, 0.4, 0.4])


@pytest.mark.parametrize(
    "settings",
    [
        TrainSettings(lr_schedule="constant", lr_scaling="none"),  # no warm-up
        TrainSettings(lr_schedule="constant", lr_warmup_fraction=0.05),  # 1 step of 10
    ],
)
def test_no_lr_warmup_below_two_steps(settings: TrainSettings) -> None:
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.4)

    assert make_lr_schedule(optimizer, settings, 10) is None
    assert _lrs(settings, 10) == [0.4] * 10


def test_cosine_decays_from_the_peak_after_the_warm_up() -> None:
    lrs = _lrs(TrainSettings(lr_warmup_fraction=0.25), 8)  # 2 warm-up steps, then cosine

    assert lrs[:2] == pytest.approx([0.2, 0.4])
    assert all(a > b for a, b in itertools.pairwise(lrs[1:]))
    assert 0 < lrs[-1] < 0.05 * 0.4  # near 0 at the last step


# --------------------------------------------------------------------------------------------
# A fixed global batch: gradient accumulation


def test_accumulated_micro_batches_make_the_whole_batchs_step() -> None:
    # An MLP (no BatchNorm, whose statistics are per micro-batch): 4 micro-batches of 16
    # step the weights as one batch of 64 does, on the same data.
    whole = make_trial_config(family="mlp", width=32, batch_size=64)
    micro = make_trial_config(
        family="mlp", width=32, batch_size=16, train={"global_batch_size": 64}
    )
    a, b = (_training(c) for c in (whole, micro))
    (_, x, y), (_, xm, ym) = next(a.batches()), next(b.batches())

    assert torch.equal(x, xm) and b.accumulation_steps == 4 and b.samples_per_step == 64
    loss_a, loss_b = a.train_step(x, y), b.train_step(xm, ym)

    assert loss_b.item() == pytest.approx(loss_a.detach().item(), rel=1e-5)
    for pa, pb in zip(a.model.parameters(), b.model.parameters(), strict=True):
        torch.testing.assert_close(pa, pb, rtol=1e-5, atol=1e-6)
    assert a.peak_lr == b.peak_lr


def test_ddp_all_reduces_only_an_optimizer_steps_last_micro_batch() -> None:
    config = make_trial_config(
        family="mlp", width=32, batch_size=16, train={"global_batch_size": 64}
    )
    training = _training(config)
    entered: list[int] = []

    class CountingDdp:
        @contextlib.contextmanager
        def no_sync(self) -> Iterator[None]:
            entered.append(1)
            yield

    training.ddp = CountingDdp()  # type: ignore[assignment]
    _, x, y = next(training.batches())
    training.train_step(x, y)

    assert len(entered) == 3  # micro-batches 1-3 skip the all-reduce; the 4th syncs


def _training(config: TrialConfig) -> Training:
    """``config``'s training as rank 0 of 1 in this process."""
    return prepare_training(config, CpuBackend(), load_workload(config.workload), 0, 1)


def test_the_data_order_does_not_depend_on_the_workers() -> None:
    # Workers are outside the math key: every epoch's order must be theirs too (the loader's
    # worker-seed draws once shifted a shared generator from the second epoch on).
    data = TensorDataset(torch.arange(64))

    def orders(workers: int) -> list[list[int]]:
        config = make_trial_config(batch_size=16, num_workers=workers)
        loader = make_loader(config, data, CpuBackend(), 0, 1)
        return [[int(v) for (batch,) in loader for v in batch] for _ in range(3)]

    without, with_two = orders(0), orders(2)
    assert without == with_two
    assert without[0] != without[1]  # shuffled anew each epoch


def test_the_studys_other_workers_count_as_its_own_load() -> None:
    # Two workers on one host: worker 1 (pid 20, a child of the first worker, 10) trains its
    # trial (rank 21) beside this trial's rank 31. Each rank keeps one CPU busy.
    trees = {10: [10, 20, 21, 30, 31], 31: [31]}
    seconds = iter([0.0, 0.0, 1.0, 1.0])  # rank 21, rank 31: at start, then at stop

    def read_tree_s(roots: Sequence[int]) -> dict[int, float]:
        t = {21: next(seconds), 31: next(seconds)}
        return {pid: t.get(pid, 0.0) for root in roots for pid in trees[root]}

    def share(roots: tuple[int, ...]) -> float | None:
        nonlocal seconds
        seconds = iter([0.0, 0.0, 1.0, 1.0])
        busy, clock = iter([0.0, 2.0]), iter([0.0, 1.0])
        meter = CpuShareMeter(
            roots,
            cpus={0, 1},
            read_busy_s=lambda cpus: next(busy),
            read_tree_s=read_tree_s,
            clock=lambda: next(clock),
            load_avg=lambda: 2.0,
        )
        meter.start()
        load = meter.stop()
        assert load is not None
        return load.other_cpu_share

    in_study = cpu_meter_roots((31,), {STUDY_PID_VARIABLE: "10"})

    assert in_study == (31, 10)
    assert share(in_study) == 0.0  # the sibling worker's trial is the study's own
    assert share((31,)) == pytest.approx(0.5)  # as it read before: a busy machine
    assert cpu_meter_roots((31,), {}) == (31,)  # no study around the trial (tests, verify)
