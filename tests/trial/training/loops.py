"""What the tests of :mod:`autotune.trial.training` share: the digits budget's step count, the checks
every real trial passes, and the loops run in this process on a CPU backend that counts its
device synchronizations."""

from __future__ import annotations

import math

import torch

from autotune.core.config import TrialConfig
from autotune.core.flops import count_parameters
from autotune.trial.devices.cpu import CpuBackend
from autotune.trial.measure import Measurement
from autotune.trial.training._setup import Training, prepare_training
from autotune.trial.training._throughput import train_for_throughput
from autotune.trial.training._to_target import train_to_target
from autotune.trial.workloads import load_workload

#: Seconds a trial run through :func:`autotune.study.search.run_trial` may take.
TIMEOUT_S = 300.0
#: digits: 1,797 samples, 359 held out.
N_TRAIN = 1438


def expected_steps(config: TrialConfig) -> int:
    per_rank = math.ceil(N_TRAIN / config.gpu_count)  # DistributedSampler pads to equal shares
    steps = config.train.epochs * (per_rank // config.batch_size)  # drop_last
    return min(steps, config.train.max_steps or steps)


def check(
    m: Measurement,
    config: TrialConfig,
    memory_kind: str = "cpu_peak_rss_growth",
    *,
    fresh_process: bool = True,
) -> None:
    """What every real trial must report. In this process (``fresh_process=False``,
    :func:`train_here`) the peak RSS may not grow at all: an earlier test's freed pages can
    hold the whole trial."""
    assert m.simulated is False
    assert m.throughput_sps > 0
    assert 0.0 <= m.val_metric <= 1.0
    assert m.peak_memory_bytes > 0 if fresh_process else m.peak_memory_bytes >= 0
    assert m.memory_kind == memory_kind
    assert m.steps == expected_steps(config)
    warmup = min(max(config.train.warmup_steps, config.compile_mode != "none"), m.steps - 1)
    extension = m.extra["timing_extension_steps"]
    if extension:  # timing-only steps after the evaluation: one untimed, then the windows
        assert m.timed_steps == extension - 1
    else:
        assert 0 < m.timed_steps <= m.steps - warmup
    assert m.samples_per_step == config.batch_size * config.gpu_count
    assert m.step_time_s > 0
    assert m.train_s > 0
    assert math.isfinite(m.train_loss)
    model = load_workload(config.workload).build_model(config.model)
    assert m.parameters == count_parameters(model)


class CountingCpuBackend(CpuBackend):
    """The CPU backend, counting :meth:`synchronize` calls (each one a clock read's sync)."""

    def __init__(self) -> None:
        super().__init__()
        self.syncs = 0

    def synchronize(self) -> None:
        self.syncs += 1
        super().synchronize()


def train_here(config: TrialConfig) -> tuple[Measurement, int]:
    """Train and evaluate ``config`` as rank 0 of 1 in this process; (measurement, syncs)."""
    backend = CountingCpuBackend()
    training = prepare_training(config, backend, load_workload(config.workload), 0, 1)
    if config.objective == "time_to_accuracy":
        return train_to_target(training, 0, 1, maximize=True), backend.syncs
    m = train_for_throughput(training, 0, 1)
    return m, backend.syncs


def counted_training(config: TrialConfig) -> tuple[Training, list[str]]:
    """The training of ``config`` in this process, its steps and evaluations logged."""
    training = prepare_training(config, CpuBackend(), load_workload(config.workload), 0, 1)
    calls: list[str] = []
    step, evaluate = training.train_step, training.evaluate

    def counted_step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        calls.append("step")
        return step(x, y)

    def counted_evaluate() -> float:
        calls.append("evaluate")
        return evaluate()

    training.train_step = counted_step  # type: ignore[method-assign]
    training.evaluate = counted_evaluate  # type: ignore[method-assign]
    return training, calls
