"""The frozen trial configuration: its knobs, built from a sampler's knobs, read back from
the results tables (autotune/core/config/_run.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from autotune.core.config import ReusedMetric, TrialConfig, load_space, math_key
from autotune.testing import make_trial_config

from .spaces import WORKLOAD_SPACE

# --------------------------------------------------------------------------------------------
# Trial configurations


def test_trial_config_knobs_are_the_searched_ones() -> None:
    config = make_trial_config(precision="bf16", gpu_count=2)

    assert config.knobs() == {
        "depth": 1,
        "width": 8,
        "batch_size": 64,
        "precision": "bf16",
        "memory_format": "contiguous",
        "compile_mode": "none",
        "num_workers": 0,
        "gpu_count": 2,
    }


def test_trial_config_from_knobs_of_a_workload_space(write_space: Callable[..., Path]) -> None:
    space = load_space(str(write_space(WORKLOAD_SPACE)))
    knobs = {
        "layers": 2,
        "lr_mult": 1.0e-3,
        "activation": "gelu",
        "dropout": 0.1,
        "bias": True,
        "heads": 4,
        "batch_size": 32,
        "precision": "fp32",
        "memory_format": "contiguous",
        "compile_mode": "none",
        "num_workers": 0,
        "gpu_count": 1,
    }

    config = TrialConfig.from_knobs(knobs, space, device="cpu", seed=3)

    assert config.workload == space.workload_spec()
    assert config.model == {k: knobs[k] for k in space.model.knobs}
    assert config.knobs() == knobs
    assert config.seed == 3
    assert TrialConfig.from_stored(config.model_dump(mode="json")) == config


# --------------------------------------------------------------------------------------------
# The math key (what a trial learns)


@pytest.mark.parametrize(
    "change",
    [
        {"memory_format": "channels_last"},
        {"compile_mode": "default"},
        {"num_workers": 2},
        {"train": {"warmup_steps": 9, "eval_every_s": 1.5, "max_time_s": 30.0}},
        {"measure": {"windows": 3}},
        {"min_throughput_sps": 100.0},
    ],
    ids=lambda change: next(iter(change)),
)
def test_knobs_outside_the_math_keep_the_key(change: dict[str, Any]) -> None:
    assert math_key(make_trial_config(**change)) == math_key(make_trial_config())


@pytest.mark.parametrize(
    "change",
    [
        {"seed": 1},
        {"precision": "bf16"},
        {"batch_size": 32},
        {"gpu_count": 2},
        {"width": 16},
        {"train": {"lr": 0.01}},
        {"train": {"epochs": 2}},
        {"data": {"name": "synthetic"}},
        {"objective": "time_to_accuracy", "train": {"target_accuracy": 0.9}},
    ],
    ids=lambda change: next(iter(change)),
)
def test_what_changes_the_weights_changes_the_key(change: dict[str, Any]) -> None:
    assert math_key(make_trial_config(**change)) != math_key(make_trial_config())


def test_the_reuse_a_study_sets_is_no_part_of_the_key() -> None:
    reuse = ReusedMetric(from_trial=3, val_metric=0.9, train_loss=0.2, steps=22)

    assert math_key(make_trial_config(reuse=reuse)) == math_key(make_trial_config())
    assert len(math_key(make_trial_config())) == 16


def test_under_a_global_batch_batch_size_and_gpu_count_keep_the_key() -> None:
    fixed = {"train": {"global_batch_size": 128}}
    key = math_key(make_trial_config(batch_size=64, gpu_count=1, **fixed))

    assert math_key(make_trial_config(batch_size=16, gpu_count=2, **fixed)) == key
    assert math_key(make_trial_config(batch_size=64, gpu_count=1)) != key
    assert math_key(make_trial_config(train={"global_batch_size": 256})) != key
