"""The paired K-step check on real training (autotune/study/evidence.py through
autotune/trial/training/_throughput.py): every trial of the same seed records the losses of its
first K steps; the baseline's float64 twin gives the floor. One epoch of digits per run,
seconds each, in this process (the DataLoader-worker case in a child process)."""

from __future__ import annotations

from typing import Any

import pytest

from autotune.core.config import TrialConfig, WorkloadSpec
from autotune.study.evidence import EquivalenceCheck, check_equivalence, check_floor
from autotune.study.search import run_trial
from autotune.testing import make_trial_config
from tests.trial.training.loops import TIMEOUT_S, train_here

pytestmark = pytest.mark.slow

#: The shipped cnn with BatchNorm, two blocks; 20 checked steps (the default).
BASE: dict[str, Any] = {"depth": 2, "width": 8, "batch_size": 32}


def _losses(config: TrialConfig) -> list[float]:
    m, _ = train_here(config)
    return list(m.extra["check_losses"])


def _check(candidate: TrialConfig, baseline: TrialConfig) -> EquivalenceCheck:
    base = _losses(baseline)
    twin = _losses(baseline.model_copy(update={"twin": "float64"}))
    floor = check_floor(base, twin)
    return check_equivalence(_losses(candidate), base, floor, baseline.measure.check_margin)


def test_every_trial_records_its_first_k_losses() -> None:
    config = make_trial_config(**BASE, measure={"check_steps": 7})
    losses = _losses(config)
    assert len(losses) == 7
    assert all(0.0 < v < 10.0 for v in losses)
    assert _losses(config) == losses  # the same seed: the same losses, bit for bit


def test_dataloader_workers_are_identical() -> None:
    base = make_trial_config(**BASE)
    workers = base.model_copy(update={"num_workers": 2})
    ran = run_trial(
        workers.model_copy(update={"timeout_s": TIMEOUT_S})
    )  # workers need a trial process of their own
    check = check_equivalence(
        ran.extra["check_losses"], _losses(base), check_floor([1.0], [1.0]), 100.0
    )
    assert check.verdict == "identical"


def test_channels_last_is_the_same_computation() -> None:
    base = make_trial_config(**BASE)
    check = _check(base.model_copy(update={"memory_format": "channels_last"}), base)
    assert check.passed, check.detail


def test_bf16_is_beyond_the_floor() -> None:
    base = make_trial_config(**BASE)
    check = _check(base.model_copy(update={"precision": "bf16"}), base)
    assert check.verdict == "diverged", check.detail


def test_batchnorm_over_micro_batches_of_4_fails_the_check() -> None:
    # The same math key (train.global_batch_size fixes the global batch at 32): the
    # gradients add up to the same mean, but BatchNorm normalizes over 4 samples, not 32.
    base = make_trial_config(**BASE, train={"global_batch_size": 32})
    micro = base.model_copy(update={"batch_size": 4})
    check = _check(micro, base)
    assert check.verdict == "diverged", check.detail
    assert check.first_divergence > 1e-3


def test_a_custom_op_that_mishandles_channels_last_fails_the_check() -> None:
    spec = WorkloadSpec(ref="tests.trial.training.check_workloads:StridedDigits")
    base = make_trial_config(workload=spec, model={"width": 4}, batch_size=32)
    check = _check(base.model_copy(update={"memory_format": "channels_last"}), base)
    assert check.verdict == "diverged", check.detail


def test_a_workload_whose_evaluate_returns_nan_fails_the_trial_with_one_line() -> None:
    # A NaN reached Optuna as the trial's value, which Optuna fails without counting it
    # towards --trials: the study ran for ever (issue 49). Now the trial fails as an error.
    from autotune.core.exceptions import DoorUsageError

    spec = WorkloadSpec(ref="tests.trial.training.check_workloads:NanDigits")
    config = make_trial_config(workload=spec, model={"width": 4}, batch_size=32)
    with pytest.raises(DoorUsageError, match=r"the workload's evaluate\(\): the accuracy is nan"):
        train_here(config)
