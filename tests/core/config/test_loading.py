"""Loading spaces and run settings from shipped names, YAML files and ``key=value``
arguments, and their one-line errors that name the file or override, the key and the rule
(autotune/core/config/_loading.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from autotune.core.config import (
    DEFAULT_STORAGE_URL,
    SearchSpace,
    load_run_config,
    load_space,
    load_verify_request,
    run_config_document,
)
from autotune.core.config._loading import available_spaces
from autotune.core.exceptions import ConfigError
from tests.conftest import MINIMAL_SPACE

from .errors import one_line

# --------------------------------------------------------------------------------------------
# Shipped spaces


def test_available_spaces_lists_the_shipped_files() -> None:
    shipped = sorted(p.stem for p in (Path(__file__).parents[3] / "search_spaces").glob("*.yaml"))

    assert available_spaces() == shipped
    assert {"cnn_small", "mlp_small"} <= set(shipped)


@pytest.mark.parametrize("name", ["cnn_small", "mlp_small"])
def test_shipped_space_loads(name: str) -> None:
    space = load_space(name)

    assert isinstance(space, SearchSpace)
    assert space.name == name
    assert set(space.knobs()) == {
        "depth",
        "width",
        "batch_size",
        "precision",
        "memory_format",
        "compile_mode",
        "num_workers",
        "gpu_count",
    }
    assert all(knob.values() for knob in space.knobs().values())


def test_cnn_small_has_the_documented_knobs() -> None:
    space = load_space("cnn_small")

    assert space.model.family == "cnn"
    assert space.model.knobs["depth"].values() == [2, 3, 4]
    assert space.model.knobs["width"].values() == [8, 16, 32, 64]
    assert space.batch_size.values() == [16, 32, 64, 128, 256]
    assert space.precision.values() == ["fp32", "tf32", "fp16", "bf16"]
    assert space.memory_format.values() == ["contiguous", "channels_last"]
    assert space.compile_mode.values() == ["none", "default", "reduce-overhead", "max-autotune"]
    assert space.gpu_count.values() == [1, 2]
    assert space.train.lr == pytest.approx(3.0e-3)  # a float, not the string "3.0e-3"
    # The MNIST test set shipped with autotune (no data.root), split 8,000 / 2,000.
    assert (space.data.name, space.data.root, space.data.val_fraction) == ("mnist", None, 0.2)


def test_mlp_small_fixes_memory_format() -> None:
    assert load_space("mlp_small").memory_format.values() == ["contiguous"]


def test_shipped_spaces_train_on_the_shipped_mnist_and_others_on_digits(
    write_space: Callable[..., Path],
) -> None:
    assert load_space("mlp_small").data.name == "mnist"
    # A space file without `data:` keeps DataSettings' default, scikit-learn's digits.
    assert load_space(str(write_space(MINIMAL_SPACE))).data.name == "digits"


def test_space_from_path_is_named_after_the_file(write_space: Callable[..., Path]) -> None:
    path = write_space(MINIMAL_SPACE.replace("name: tiny\n", ""), name="my_space.yaml")

    space = load_space(str(path))

    assert space.name == "my_space"
    assert space.model.knobs["depth"].values() == [1, 2]
    assert space.precision.values() == ["fp32"]  # defaults for knobs not written
    assert space.compile_mode.values() == ["none"]
    assert space.gpu_count.values() == [1]


# --------------------------------------------------------------------------------------------
# Run settings


def test_run_config_defaults() -> None:
    config = load_run_config([])

    assert config.space.name == "cnn_small"
    assert config.space_source == "search_spaces/cnn_small.yaml"
    assert config.study == "cnn_small"
    assert config.device == "auto"
    assert config.sampler == "gp"
    assert config.storage == DEFAULT_STORAGE_URL
    assert config.seed == 0
    assert config.trial.timeout_s == pytest.approx(600.0)


def test_run_config_splits_run_keys_from_space_overrides(tmp_path: Path) -> None:
    config = load_run_config(
        [
            "space=mlp_small",
            "device=mock",
            "study=123",
            f"storage=sqlite:///{tmp_path}/a.db",
            "sampler=random",
            "seed=7",
            "trial.timeout_s=30",
            "train.epochs=3",
        ]
    )

    assert config.space.name == "mlp_small"
    assert config.device == "mock"
    assert config.study == "123"  # OmegaConf parses 123 as an int; the study name stays text
    assert config.storage == f"sqlite:///{tmp_path}/a.db"
    assert config.sampler == "random"
    assert config.seed == 7
    assert config.trial.timeout_s == pytest.approx(30.0)
    assert config.space.train.epochs == 3


@pytest.mark.parametrize("name", ["007", "1e3", "true", "null", "a=b", " spaced "])
def test_study_and_storage_are_taken_as_written(name: str) -> None:
    """OmegaConf would read 007 as 7, 1e3 as 1000.0 and null as None: a study name is text, the
    same in `run` and in `verify` (and the read commands, which take it verbatim too)."""
    args = [f"study={name}", "storage=sqlite:///x.db?mode=ro"]

    config = load_run_config(args)
    request = load_verify_request(args)

    assert config.study == request.study == name.strip()
    assert config.storage == request.storage == "sqlite:///x.db?mode=ro"


@pytest.mark.parametrize("key", ["study", "storage"])
def test_an_empty_study_or_storage_is_refused(key: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_run_config([f"{key}="])

    assert one_line(err) == f"override {key}=: {key}: String should have at least 1 character"


def _as_overrides(document: dict[str, Any], prefix: str = "") -> list[str]:
    """Every leaf of a configuration document as a ``key=value`` argument; a knob's ``{low,
    high}`` and every list is one value (JSON, which OmegaConf reads as YAML)."""
    args = []
    for key, value in document.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value and not {"low", "high"} <= value.keys():
            args.extend(_as_overrides(value, f"{path}."))
        elif isinstance(value, str):
            args.append(f"{path}={value}")
        else:
            args.append(f"{path}={json.dumps(value)}")
    return args


@pytest.mark.parametrize(
    "args",
    [
        ["device=mock", "train.epochs=2", "precision=[fp32,bf16]", "verify.rounds=5"],
        ["space=mlp_small", "study=other", "seed=3", "model.depth={low: 1, high: 2}"],
    ],
)
def test_each_key_of_the_config_document_is_the_override_that_sets_it(args: list[str]) -> None:
    """What `autotune config` prints: written back as key=value arguments, line by line, it
    gives the same run configuration."""
    config = load_run_config(args)
    document = run_config_document(config)

    again = load_run_config(_as_overrides(document))

    assert document["space"] == config.space.name  # a shipped space by name, not its label
    assert again.model_dump() == config.model_dump()


def test_the_config_document_masks_the_password_and_writes_knobs_as_a_space_does() -> None:
    config = load_run_config(["storage=postgresql://alice:S3cret@db/x", "batch_size=[32, 64]"])

    document = run_config_document(config)

    assert document["storage"] == "postgresql://alice:***@db/x"
    assert document["batch_size"] == [32, 64]
    assert document["model"]["depth"] == {"low": 2, "high": 4}
    assert document["train"]["epochs"] == config.space.train.epochs


def test_run_config_accepts_a_space_file(write_space: Callable[..., Path]) -> None:
    path = write_space(MINIMAL_SPACE)

    config = load_run_config([f"space={path}"])

    assert config.space.name == "tiny"
    assert config.space_source == str(path)
    assert config.study == "tiny"


# --------------------------------------------------------------------------------------------
# One-line errors that name the file, the key and the rule


def test_malformed_yaml_names_file_and_line(write_space: Callable[..., Path]) -> None:
    path = write_space("name: broken\nmodel: [\n")

    with pytest.raises(ConfigError) as err:
        load_space(str(path))

    message = one_line(err)
    assert message.startswith(f"{path}:")
    assert "line 3" in message
    assert "malformed YAML" in message


def test_top_level_must_be_a_mapping(write_space: Callable[..., Path]) -> None:
    path = write_space("- just\n- a list\n")

    with pytest.raises(ConfigError) as err:
        load_space(str(path))

    assert one_line(err) == f"{path}: the top level must be a mapping of keys to values"


def test_unknown_key_in_file(write_space: Callable[..., Path]) -> None:
    path = write_space(MINIMAL_SPACE + "batchsize: 32\n")

    with pytest.raises(ConfigError) as err:
        load_space(str(path))

    assert one_line(err) == f"{path}: batchsize: unknown key (did you mean batch_size?)"


def test_a_research_knob_outside_advanced_is_unknown_and_named_at_its_place(
    write_space: Callable[..., Path],
) -> None:
    """The research knobs live under ``advanced.*``; written without it, the key is refused
    with the one it means (the store was never released: no old spelling is kept)."""
    path = write_space(MINIMAL_SPACE + "search: {reuse_metric: false}\n")

    with pytest.raises(ConfigError) as err:
        load_space(str(path))
    assert one_line(err) == (
        f"{path}: search: unknown key (did you mean advanced.search? the research knobs "
        "live under advanced.*)"
    )
    with pytest.raises(ConfigError) as err:
        load_run_config(["space=cnn_small", "trial.heartbeat_s=5"])
    assert one_line(err) == (
        "override trial.heartbeat_s=5: trial.heartbeat_s: unknown key (did you mean "
        "advanced.trial.heartbeat_s? the research knobs live under advanced.*)"
    )
    with pytest.raises(ConfigError) as err:
        load_verify_request(["study=s", "verify.rounds=5", "verify.candidate=2"])
    assert one_line(err) == "override verify.candidate=2: verify.candidate: unknown key"
    # A key of `autotune run` given to `autotune verify`: said so (it read "device: unknown
    # key (did you mean device?)").
    with pytest.raises(ConfigError) as err:
        load_verify_request(["study=s", "device=cpu"])
    assert one_line(err) == (
        "override device=cpu: device: unknown key (a key of `autotune run`; this command does "
        "not take it)"
    )


def test_a_command_line_key_in_a_space_file_is_said_to_be_one(
    write_space: Callable[..., Path],
) -> None:
    path = write_space(MINIMAL_SPACE + "device: cpu\n")

    with pytest.raises(ConfigError) as err:
        load_space(str(path))

    assert one_line(err) == (
        f"{path}: device: unknown key (a key of the command line, device=VALUE, not of a "
        "space file)"
    )


def test_unknown_nested_key_in_file(write_space: Callable[..., Path]) -> None:
    path = write_space(MINIMAL_SPACE + "advanced: {measure: {windows: 3, repeats: 2}}\n")

    with pytest.raises(ConfigError) as err:
        load_space(str(path))

    assert one_line(err) == f"{path}: advanced.measure.repeats: unknown key"


def test_wrong_type_in_file(write_space: Callable[..., Path]) -> None:
    path = write_space(MINIMAL_SPACE.replace("epochs: 1", "epochs: many"))

    with pytest.raises(ConfigError) as err:
        load_space(str(path))

    message = one_line(err)
    assert message.startswith(f"{path}: train.epochs: ")
    assert "valid integer" in message


def test_value_outside_the_vocabulary(write_space: Callable[..., Path]) -> None:
    path = write_space(MINIMAL_SPACE + "precision: [fp32, fp64]\n")

    with pytest.raises(ConfigError) as err:
        load_space(str(path))

    message = one_line(err)
    assert message.startswith(f"{path}: precision.choices.1: ")
    assert "'bf16'" in message  # the rule lists the allowed values


@pytest.mark.parametrize(
    ("knob_yaml", "key"),
    [
        ("precision: []\n", "precision.choices"),
        ("num_workers: []\n", "num_workers"),
    ],
)
def test_empty_choices(write_space: Callable[..., Path], knob_yaml: str, key: str) -> None:
    path = write_space(MINIMAL_SPACE + knob_yaml)

    with pytest.raises(ConfigError) as err:
        load_space(str(path))

    assert one_line(err) == f"{path}: {key}: `choices` must not be empty"


def test_duplicate_choices(write_space: Callable[..., Path]) -> None:
    path = write_space(MINIMAL_SPACE.replace("[32, 64]", "[32, 32]"))

    with pytest.raises(ConfigError) as err:
        load_space(str(path))

    assert one_line(err) == f"{path}: batch_size: `choices` must be unique, but got [32, 32]"


def test_low_greater_than_high(write_space: Callable[..., Path]) -> None:
    path = write_space(MINIMAL_SPACE.replace("{low: 1, high: 2}", "{low: 4, high: 1}"))

    with pytest.raises(ConfigError) as err:
        load_space(str(path))

    assert one_line(err) == f"{path}: model.depth: `low <= high` must hold, but got low=4, high=1"


def test_non_positive_width(write_space: Callable[..., Path]) -> None:
    path = write_space(MINIMAL_SPACE.replace("[8, 16]", "[0, 16]"))

    with pytest.raises(ConfigError) as err:
        load_space(str(path))

    assert one_line(err) == (f"{path}: model.width: every value must be an integer >= 1")


def test_missing_file() -> None:
    with pytest.raises(ConfigError) as err:
        load_space("no/such/space.yaml")

    assert one_line(err) == "space=no/such/space.yaml: no such file"


def test_unknown_space_name_lists_the_shipped_ones() -> None:
    with pytest.raises(ConfigError) as err:
        load_space("cnn_huge")

    message = one_line(err)
    assert message.startswith("space=cnn_huge: unknown space name")
    assert f"(shipped: {', '.join(available_spaces())})" in message


@pytest.mark.parametrize(
    ("arg", "key", "allowed"),
    [
        ("device=tpu", "device", "'auto', 'cpu', 'cuda' or 'mock'"),
        ("sampler=cmaes", "sampler", "'nsga2', 'tpe', 'gp' or 'random'"),
    ],
)
def test_unknown_run_value(arg: str, key: str, allowed: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_run_config([arg])

    message = one_line(err)
    assert message.startswith(f"override {arg}: {key}: ")
    assert allowed in message


def test_unknown_run_key() -> None:
    with pytest.raises(ConfigError) as err:
        load_run_config(["trial.retries=2"])

    assert one_line(err) == "override trial.retries=2: trial.retries: unknown key"


def test_run_value_rule() -> None:
    with pytest.raises(ConfigError) as err:
        load_run_config(["trial.timeout_s=0"])

    assert (
        one_line(err)
        == "override trial.timeout_s=0: trial.timeout_s: Input should be greater than 0"
    )


def test_space_must_be_a_name() -> None:
    with pytest.raises(ConfigError) as err:
        load_run_config(["space=[a,b]"])

    assert one_line(err) == "override space=[a,b]: space must be a name or a path"


def test_config_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown key"):
        load_space("cnn_small", ["bogus=1"])
