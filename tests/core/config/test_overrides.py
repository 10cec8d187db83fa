"""``key=value`` overrides: values as OmegaConf parses them, and errors that name the
override (autotune/core/config/_overrides.py, through load_space and load_run_config)."""

from __future__ import annotations

import pytest

from autotune.core.config import load_run_config, load_space
from autotune.core.exceptions import ConfigError

from .errors import one_line

# --------------------------------------------------------------------------------------------
# Overrides


def test_override_sets_a_nested_value() -> None:
    assert load_space("cnn_small", ["train.epochs=2"]).train.epochs == 2


def test_override_with_a_list_value() -> None:
    space = load_space("cnn_small", ["precision=[fp32,bf16]"])
    assert space.precision.values() == ["fp32", "bf16"]


def test_override_with_a_float_value() -> None:
    assert load_space("cnn_small", ["train.lr=1.0e-4"]).train.lr == pytest.approx(1.0e-4)


def test_override_range_bounds() -> None:
    space = load_space("cnn_small", ["model.depth.high=3"])
    assert space.model.knobs["depth"].values() == [2, 3]


def test_data_alias_selects_the_data_set_by_name() -> None:
    config = load_run_config(["data=mnist", "data.root=X"])

    assert config.space.data.name == "mnist"
    assert config.space.data.root == "X"
    assert config.space.data.val_fraction == pytest.approx(0.2)  # the rest of data: is kept


def test_data_alias_goes_back_to_digits() -> None:
    # cnn_small trains on the shipped MNIST test set; data=digits is the small, fast data set.
    space = load_space("cnn_small", ["data=digits"])

    assert (space.data.name, space.data.root, space.data.val_fraction) == ("digits", None, 0.2)


def test_data_alias_with_an_unknown_name_is_one_line() -> None:
    with pytest.raises(ConfigError) as err:
        load_space("cnn_small", ["data=imagenet"])

    assert one_line(err) == (
        "override data=imagenet: data.name: Input should be 'digits', 'mnist', "
        "'fashion_mnist' or 'synthetic'"
    )


# --------------------------------------------------------------------------------------------
# One-line errors that name the override


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("train.bogus=1", "override train.bogus=1: train.bogus: unknown key"),
        ("bogus=1", "override bogus=1: bogus: unknown key"),
        (
            "train.epochs=0",
            "override train.epochs=0: train.epochs: Input should be greater than or equal to 1",
        ),
        ("gpu_count=[]", "override gpu_count=[]: gpu_count: `choices` must not be empty"),
        pytest.param(
            "model.depth={low: 3, high: 1}",
            "override model.depth={low: 3, high: 1}: model.depth: "
            "`low <= high` must hold, but got low=3, high=1",
        ),
    ],
)
def test_bad_space_override_names_the_override(override: str, expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_space("cnn_small", [override])

    assert one_line(err) == expected


def test_override_that_breaks_a_rule_of_its_parent_names_the_override() -> None:
    with pytest.raises(ConfigError) as err:
        load_space("cnn_small", ["model.depth.low=5"])

    assert one_line(err) == (
        "override model.depth.low=5: model.depth: `low <= high` must hold, but got low=5, high=4"
    )


def test_wrong_type_override() -> None:
    with pytest.raises(ConfigError) as err:
        load_space("cnn_small", ["train.epochs=abc"])

    message = one_line(err)
    assert message.startswith("override train.epochs=abc: train.epochs: ")
    assert "valid integer" in message


@pytest.mark.parametrize("override", ["train.epochs", "=3", "precision"])
def test_override_without_equals(override: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_space("cnn_small", [override])

    assert one_line(err) == f"override {override!r}: expected key=value (e.g. train.epochs=2)"


def test_override_below_a_single_value() -> None:
    with pytest.raises(ConfigError) as err:
        load_space("cnn_small", ["data.name.x=1"])

    assert (
        one_line(err) == "override data.name.x=1: data.name is a single value, not a group of keys"
    )
