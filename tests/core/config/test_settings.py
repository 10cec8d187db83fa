"""Fixed settings: learning-rate scaling rules, warm-up and their overrides; the hardware
screen's ratio (autotune/core/config/_settings.py)."""

from __future__ import annotations

import pytest

from autotune.core.config import TrainSettings, load_run_config, load_space, scaled_lr
from autotune.core.config._settings import (
    DEFAULT_LR_SCALING,
    LR_SCALING_RULES,
    HardwareSettings,
    MeasureSettings,
)
from autotune.core.exceptions import ConfigError

from .errors import one_line

# --------------------------------------------------------------------------------------------
# Learning-rate scaling


@pytest.mark.parametrize(
    ("rule", "global_batch", "expected"),
    [
        ("linear", 256, 4.0e-3),  # 4x the batch, 4x the rate (Goyal et al. 2017)
        ("linear", 32, 0.5e-3),
        ("sqrt", 256, 2.0e-3),  # 4x the batch, 2x the rate (Malladi et al. 2022)
        ("sqrt", 16, 0.5e-3),
        ("none", 256, 1.0e-3),
        ("linear", 64, 1.0e-3),  # the reference batch keeps lr exactly
        ("sqrt", 64, 1.0e-3),
    ],
)
def test_scaled_lr(rule: str, global_batch: int, expected: float) -> None:
    assert scaled_lr(1.0e-3, rule, global_batch, 64) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("cubic", 64, 64), "unknown learning-rate scaling rule 'cubic'"),
        (("sqrt", 0, 64), "batches must be >= 1"),
        (("sqrt", 64, 0), "batches must be >= 1"),
    ],
)
def test_scaled_lr_refuses(args: tuple[str, int, int], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        scaled_lr(1.0e-3, *args)


def test_train_settings_lr_scaling_defaults() -> None:
    train = TrainSettings()

    assert train.lr_scaling is None
    assert train.reference_batch_size is None
    assert train.lr_warmup_fraction == 0.05
    assert LR_SCALING_RULES == ("none", "linear", "sqrt")


@pytest.mark.parametrize(
    ("optimizer", "lr_scaling", "rule"),
    [
        ("adamw", None, "sqrt"),
        ("sgd", None, "linear"),
        ("adamw", "linear", "linear"),
        ("sgd", "none", "none"),
    ],
)
def test_lr_scaling_rule_defaults_by_optimizer(
    optimizer: str, lr_scaling: str | None, rule: str
) -> None:
    train = TrainSettings.model_validate({"optimizer": optimizer, "lr_scaling": lr_scaling})

    assert train.lr_scaling_rule == rule
    if lr_scaling is None:
        assert DEFAULT_LR_SCALING[optimizer] == rule


def test_peak_lr_scales_from_the_reference_batch() -> None:
    sgd = TrainSettings(optimizer="sgd", lr=0.1, reference_batch_size=64)
    adamw = TrainSettings(lr=1.0e-3, reference_batch_size=64)

    assert sgd.peak_lr(128) == pytest.approx(0.2)
    assert adamw.peak_lr(256) == pytest.approx(2.0e-3)
    assert adamw.peak_lr(64) == 1.0e-3


def test_peak_lr_without_a_reference_is_lr() -> None:
    # A configuration built outside a study: its own global batch is the reference.
    assert TrainSettings(lr=1.0e-3).peak_lr(512) == 1.0e-3


@pytest.mark.parametrize(
    ("fields", "total_steps", "expected"),
    [
        ({}, 110, 6),  # 5.5 rounded up
        ({}, 60, 3),  # exactly 3, although 0.05 * 60 is 3.0000000000000004 in floats
        ({}, 22, 2),
        ({}, 1, 1),
        ({"lr_warmup_fraction": 0.0}, 110, 0),
        ({"lr_scaling": "none"}, 110, 0),  # no scaling: every trial at lr, no warm-up
    ],
)
def test_lr_warmup_steps(fields: dict[str, object], total_steps: int, expected: int) -> None:
    assert TrainSettings.model_validate(fields).lr_warmup_steps(total_steps) == expected


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("train.lr_scaling=cubic", "train.lr_scaling"),
        ("advanced.train.reference_batch_size=0", "advanced.train.reference_batch_size"),
        ("advanced.train.lr_warmup_fraction=1.0", "advanced.train.lr_warmup_fraction"),
    ],
)
def test_bad_lr_scaling_override_names_the_key(override: str, key: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_space("cnn_small", [override])

    assert one_line(err).startswith(f"override {override}: {key}: ")


def test_lr_scaling_overrides() -> None:
    space = load_space(
        "cnn_small",
        [
            "train.lr_scaling=linear",
            "advanced.train.reference_batch_size=128",
            "advanced.train.lr_warmup_fraction=0.1",
        ],
    )

    assert space.train.lr_scaling == "linear"
    assert space.advanced.train.reference_batch_size == 128
    assert space.advanced.train.lr_warmup_fraction == 0.1


# --------------------------------------------------------------------------------------------
# Time-to-accuracy settings


def test_time_to_accuracy_overrides() -> None:
    space = load_space(
        "cnn_small",
        ["train.target_accuracy=0.98", "train.eval_every_steps=50", "train.max_time_s=120"],
    )

    assert space.train.target == 0.98
    assert space.train.eval_every_steps == 50
    assert space.train.max_time_s == 120.0
    assert TrainSettings(target_metric=0.25).target == 0.25
    assert TrainSettings().target is None


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["train.target_accuracy=98"], "train.target_accuracy: "),
        (["train.target_accuracy=0"], "train.target_accuracy: "),
        (["train.eval_every_steps=0"], "train.eval_every_steps: "),
        (["train.max_time_s=-1"], "train.max_time_s: "),
        (
            ["train.target_accuracy=0.9", "train.target_metric=0.1"],
            "set train.target_accuracy or train.target_metric, not both",
        ),
        (
            ["train.eval_every_steps=5", "train.eval_every_s=2"],
            "set train.eval_every_steps or train.eval_every_s, not both",
        ),
    ],
)
def test_bad_time_to_accuracy_settings_are_refused_in_one_line(
    overrides: list[str], message: str
) -> None:
    with pytest.raises(ConfigError) as err:
        load_space("cnn_small", overrides)

    assert message in one_line(err)


# --------------------------------------------------------------------------------------------
# hardware.* (the precision screen)


def test_min_peak_ratio_defaults_to_a_tenth_and_takes_a_whole_number() -> None:
    assert HardwareSettings().min_peak_ratio == 0.1
    assert (
        load_run_config(["advanced.hardware.min_peak_ratio=0"]).advanced.hardware.min_peak_ratio
        == 0.0
    )
    assert (
        load_run_config(["advanced.hardware.min_peak_ratio=1"]).advanced.hardware.min_peak_ratio
        == 1.0
    )


@pytest.mark.parametrize(
    ("override", "rule"),
    [
        ("advanced.hardware.min_peak_ratio=1.5", "Input should be less than or equal to 1"),
        ("advanced.hardware.min_peak_ratio=false", "must be a number from 0 to 1, not false"),
        ("advanced.hardware.min_peak_ratio=inf", "Input should be a finite number"),
        ("advanced.hardware.min_peak_ratio=null", "Input should be a valid number"),
    ],
)
def test_min_peak_ratio_refusals_name_the_override_and_key(override: str, rule: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_run_config([override])

    assert one_line(err) == f"override {override}: advanced.hardware.min_peak_ratio: {rule}"


def test_the_timed_seconds_default_to_the_devices() -> None:
    unset = MeasureSettings()
    assert (unset.min_timed_s_on("cpu"), unset.min_timed_s_on("mock")) == (0.0, 0.0)
    assert unset.min_timed_s_on("cuda") == 2.0  # a GPU's windows are milliseconds otherwise
    assert MeasureSettings(min_timed_s=0.5).min_timed_s_on("cuda") == 0.5


def test_short_evidence_stops_every_batch_at_the_same_samples_seen() -> None:
    from autotune.core.config import BudgetSettings, TrainSettings

    assert BudgetSettings(full_runs=1.0).short_evidence
    assert not BudgetSettings(full_runs=7.0).short_evidence
    assert not BudgetSettings().short_evidence  # no cap: trained evidence
    train = TrainSettings(evidence_share=0.05)
    assert train.evidence_steps(1000) == 50
    assert train.evidence_steps(125 * 32) == 200  # batch 64: 125 steps an epoch, 32 epochs
    assert train.evidence_steps(63 * 32) == 101  # batch 128: ceil(100.8), the same samples
    assert train.evidence_steps(3) == 1
    assert TrainSettings().evidence_steps(1000) == 1000  # no share: the budget
