"""Search spaces, run settings and key=value overrides (autotune/config.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import ValidationError

from autotune.config import (
    BUILTIN_WORKLOAD_REF,
    DEFAULT_LR_SCALING,
    DEFAULT_STORAGE_URL,
    LR_SCALING_RULES,
    TUNER_KNOBS,
    ChoiceParam,
    FloatParam,
    IntParam,
    SearchSpace,
    TrainSettings,
    TrialConfig,
    WorkloadSpec,
    available_spaces,
    load_run_config,
    load_space,
    scaled_lr,
)
from autotune.exceptions import ConfigError
from autotune.testing import make_trial_config

from .conftest import MINIMAL_SPACE


def _one_line(err: pytest.ExceptionInfo[ConfigError]) -> str:
    message = str(err.value)
    assert "\n" not in message, f"error message is not one line: {message!r}"
    return message


# --------------------------------------------------------------------------------------------
# Shipped spaces


def test_available_spaces_lists_the_shipped_files() -> None:
    shipped = sorted(p.stem for p in (Path(__file__).parents[1] / "search_spaces").glob("*.yaml"))

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
    assert space.data.name == "digits"


def test_mlp_small_fixes_memory_format() -> None:
    assert load_space("mlp_small").memory_format.values() == ["contiguous"]


def test_space_is_immutable() -> None:
    space = load_space("cnn_small")
    with pytest.raises(ValidationError):
        space.name = "other"  # type: ignore[misc]


def test_space_from_path_is_named_after_the_file(write_space: Callable[..., Path]) -> None:
    path = write_space(MINIMAL_SPACE.replace("name: tiny\n", ""), name="my_space.yaml")

    space = load_space(str(path))

    assert space.name == "my_space"
    assert space.model.knobs["depth"].values() == [1, 2]
    assert space.precision.values() == ["fp32"]  # defaults for knobs not written
    assert space.compile_mode.values() == ["none"]
    assert space.gpu_count.values() == [1]


def test_knob_forms_scalar_list_mapping_and_range(write_space: Callable[..., Path]) -> None:
    path = write_space(
        MINIMAL_SPACE
        + "precision: bf16\n"
        + "memory_format: {choices: [contiguous, channels_last]}\n"
        + "num_workers: {low: 0, high: 4, step: 2}\n"
    )

    space = load_space(str(path))

    assert space.precision.values() == ["bf16"]
    assert space.memory_format.values() == ["contiguous", "channels_last"]
    assert space.num_workers.values() == [0, 2, 4]


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


def test_run_config_accepts_a_space_file(write_space: Callable[..., Path]) -> None:
    path = write_space(MINIMAL_SPACE)

    config = load_run_config([f"space={path}"])

    assert config.space.name == "tiny"
    assert config.space_source == str(path)
    assert config.study == "tiny"


# --------------------------------------------------------------------------------------------
# One-line errors that name the file or override, the key and the rule


def test_malformed_yaml_names_file_and_line(write_space: Callable[..., Path]) -> None:
    path = write_space("name: broken\nmodel: [\n")

    with pytest.raises(ConfigError) as err:
        load_space(str(path))

    message = _one_line(err)
    assert message.startswith(f"{path}:")
    assert "line 3" in message
    assert "malformed YAML" in message


def test_top_level_must_be_a_mapping(write_space: Callable[..., Path]) -> None:
    path = write_space("- just\n- a list\n")

    with pytest.raises(ConfigError) as err:
        load_space(str(path))

    assert _one_line(err) == f"{path}: the top level must be a mapping of keys to values"


def test_unknown_key_in_file(write_space: Callable[..., Path]) -> None:
    path = write_space(MINIMAL_SPACE + "batchsize: 32\n")

    with pytest.raises(ConfigError) as err:
        load_space(str(path))

    assert _one_line(err) == f"{path}: batchsize: unknown key"


def test_unknown_nested_key_in_file(write_space: Callable[..., Path]) -> None:
    path = write_space(MINIMAL_SPACE + "measure: {windows: 3, repeats: 2}\n")

    with pytest.raises(ConfigError) as err:
        load_space(str(path))

    assert _one_line(err) == f"{path}: measure.repeats: unknown key"


def test_wrong_type_in_file(write_space: Callable[..., Path]) -> None:
    path = write_space(MINIMAL_SPACE.replace("epochs: 1", "epochs: many"))

    with pytest.raises(ConfigError) as err:
        load_space(str(path))

    message = _one_line(err)
    assert message.startswith(f"{path}: train.epochs: ")
    assert "valid integer" in message


def test_value_outside_the_vocabulary(write_space: Callable[..., Path]) -> None:
    path = write_space(MINIMAL_SPACE + "precision: [fp32, fp64]\n")

    with pytest.raises(ConfigError) as err:
        load_space(str(path))

    message = _one_line(err)
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

    assert _one_line(err) == f"{path}: {key}: `choices` must not be empty"


def test_duplicate_choices(write_space: Callable[..., Path]) -> None:
    path = write_space(MINIMAL_SPACE.replace("[32, 64]", "[32, 32]"))

    with pytest.raises(ConfigError) as err:
        load_space(str(path))

    assert _one_line(err) == f"{path}: batch_size: `choices` must be unique, but got [32, 32]"


def test_low_greater_than_high(write_space: Callable[..., Path]) -> None:
    path = write_space(MINIMAL_SPACE.replace("{low: 1, high: 2}", "{low: 4, high: 1}"))

    with pytest.raises(ConfigError) as err:
        load_space(str(path))

    assert _one_line(err) == f"{path}: model.depth: `low <= high` must hold, but got low=4, high=1"


def test_non_positive_width(write_space: Callable[..., Path]) -> None:
    path = write_space(MINIMAL_SPACE.replace("[8, 16]", "[0, 16]"))

    with pytest.raises(ConfigError) as err:
        load_space(str(path))

    assert _one_line(err) == (f"{path}: model.width: every value must be an integer >= 1")


def test_missing_file() -> None:
    with pytest.raises(ConfigError) as err:
        load_space("no/such/space.yaml")

    assert _one_line(err) == "space=no/such/space.yaml: no such file"


def test_unknown_space_name_lists_the_shipped_ones() -> None:
    with pytest.raises(ConfigError) as err:
        load_space("cnn_huge")

    message = _one_line(err)
    assert message.startswith("space=cnn_huge: unknown space name")
    assert f"(shipped: {', '.join(available_spaces())})" in message


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

    assert _one_line(err) == expected


def test_override_that_breaks_a_rule_of_its_parent_names_the_override() -> None:
    with pytest.raises(ConfigError) as err:
        load_space("cnn_small", ["model.depth.low=5"])

    assert _one_line(err) == (
        "override model.depth.low=5: model.depth: `low <= high` must hold, but got low=5, high=4"
    )


def test_wrong_type_override() -> None:
    with pytest.raises(ConfigError) as err:
        load_space("cnn_small", ["train.epochs=abc"])

    message = _one_line(err)
    assert message.startswith("override train.epochs=abc: train.epochs: ")
    assert "valid integer" in message


@pytest.mark.parametrize("override", ["train.epochs", "=3", "precision"])
def test_override_without_equals(override: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_space("cnn_small", [override])

    assert _one_line(err) == f"override {override!r}: expected key=value (e.g. train.epochs=2)"


def test_override_below_a_single_value() -> None:
    with pytest.raises(ConfigError) as err:
        load_space("cnn_small", ["data.name.x=1"])

    assert (
        _one_line(err) == "override data.name.x=1: data.name is a single value, not a group of keys"
    )


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

    message = _one_line(err)
    assert message.startswith(f"override {arg}: {key}: ")
    assert allowed in message


def test_unknown_run_key() -> None:
    with pytest.raises(ConfigError) as err:
        load_run_config(["trial.retries=2"])

    assert _one_line(err) == "override trial.retries=2: trial.retries: unknown key"


def test_run_value_rule() -> None:
    with pytest.raises(ConfigError) as err:
        load_run_config(["trial.timeout_s=0"])

    assert (
        _one_line(err)
        == "override trial.timeout_s=0: trial.timeout_s: Input should be greater than 0"
    )


def test_space_must_be_a_name() -> None:
    with pytest.raises(ConfigError) as err:
        load_run_config(["space=[a,b]"])

    assert _one_line(err) == "override space=[a,b]: space must be a name or a path"


def test_config_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown key"):
        load_space("cnn_small", ["bogus=1"])


# --------------------------------------------------------------------------------------------
# Parameter models


def test_int_param_range_with_step() -> None:
    assert IntParam(low=16, high=64, step=16).values() == [16, 32, 48, 64]


@pytest.mark.parametrize(
    ("fields", "rule"),
    [
        ({"choices": [1], "low": 1, "high": 2}, "not both"),
        ({"low": 1}, "give `choices` or both `low` and `high`"),
        ({"low": 1, "high": 4, "step": 0}, "`step >= 1` must hold"),
        ({"low": 1, "high": 8, "step": 2, "log": True}, "`log: true` needs step=1"),
    ],
)
def test_int_param_rules(fields: dict[str, object], rule: str) -> None:
    with pytest.raises(ValidationError, match=rule):
        IntParam.model_validate(fields)


def test_int_param_restricted_keeps_order_as_choices() -> None:
    restricted = IntParam(low=1, high=4).restricted([4, 2])

    assert restricted.choices == [2, 4]
    assert restricted.low is None


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


# --------------------------------------------------------------------------------------------
# A space's own workload and its knobs

#: A space with its own workload and knobs of every form: an integer range, a real range on a
#: log scale, a list of strings, and fixed values (a float, a boolean, an integer).
WORKLOAD_SPACE = """\
name: mine
workload: models/net.py:Net
workload_args: {vocab: 65}
model:
  layers: {low: 1, high: 4}
  lr_mult: {low: 1.0e-4, high: 1.0e-1, log: true}
  activation: [relu, gelu]
  dropout: 0.1
  bias: true
  heads: 4
batch_size: [32, 64]
"""


def test_workload_space_with_knobs_of_every_form(write_space: Callable[..., Path]) -> None:
    path = write_space(WORKLOAD_SPACE)

    space = load_space(str(path))

    assert space.model.family is None
    assert space.workload_args == {"vocab": 65}
    knobs = space.model.knobs
    assert list(knobs) == ["layers", "lr_mult", "activation", "dropout", "bias", "heads"]
    assert knobs["layers"] == IntParam(low=1, high=4)
    assert knobs["lr_mult"] == FloatParam(low=1.0e-4, high=1.0e-1, log=True)
    assert knobs["activation"] == ChoiceParam(choices=["relu", "gelu"])
    assert knobs["dropout"] == ChoiceParam(choices=[0.1])
    assert knobs["bias"] == ChoiceParam(choices=[True])
    assert knobs["heads"] == IntParam(choices=[4])
    assert list(space.knobs()) == [*knobs, *TUNER_KNOBS]  # model knobs first, as written


def test_workload_file_is_made_absolute_against_the_space_directory(
    write_space: Callable[..., Path], tmp_path: Path
) -> None:
    path = write_space(WORKLOAD_SPACE)

    space = load_space(str(path))

    expected = f"{(tmp_path / 'models' / 'net.py').resolve()}:Net"
    assert space.workload == expected
    assert space.workload_spec() == WorkloadSpec(ref=expected, args={"vocab": 65})
    assert not space.workload_spec().is_builtin
    assert space.workload_spec().label == "net.py:Net"


@pytest.mark.parametrize("ref", ["/abs/models/net.py:Net", "my_models.net:Net"])
def test_absolute_and_module_workloads_are_kept(write_space: Callable[..., Path], ref: str) -> None:
    path = write_space(WORKLOAD_SPACE.replace("models/net.py:Net", ref))

    assert load_space(str(path)).workload == ref


def test_builtin_space_names_the_builtin_workload() -> None:
    space = load_space("cnn_small")

    spec = space.workload_spec()
    assert space.workload is None
    assert spec.ref == BUILTIN_WORKLOAD_REF
    assert spec.is_builtin
    assert spec.label == "cnn"
    assert spec.args == {"family": "cnn", "data": space.data.model_dump()}


@pytest.mark.parametrize(
    ("edit", "key", "rule"),
    [
        (
            lambda s: s.replace("model:\n", "model:\n  family: cnn\n  depth: [1]\n  width: [8]\n"),
            "model.family",
            "a built-in family cannot be combined with `workload:",
        ),
        (
            lambda s: s + "data: {name: mnist}\n",
            "data",
            "applies to the built-in workloads (model.family) only",
        ),
        (
            lambda s: s.replace("  heads: 4", "  batch_size: [8, 16]"),
            "model",
            "knob 'batch_size': the name is taken by autotune",
        ),
        (
            lambda s: s.replace("  heads: 4", "  num-heads: 4"),
            "model",
            "knob name 'num-heads' must be a Python identifier",
        ),
        (
            lambda s: s.replace("high: 1.0e-1, log: true", "high: 1.0e-1, step: 1.0e-2, log: true"),
            "model",
            "lr_mult: `log: true` needs low > 0 and no step",
        ),
    ],
    ids=["family-and-workload", "data-with-workload", "batch_size-knob", "bad-name", "log-step"],
)
def test_workload_space_rules(
    write_space: Callable[..., Path], edit: Callable[[str], str], key: str, rule: str
) -> None:
    path = write_space(edit(WORKLOAD_SPACE))

    with pytest.raises(ConfigError) as err:
        load_space(str(path))

    message = _one_line(err)
    assert message.startswith(f"{path}: ")
    assert f"{key}:" in message or f"{key}." in message
    assert rule in message


def test_workload_args_need_a_workload(write_space: Callable[..., Path]) -> None:
    path = write_space(MINIMAL_SPACE + "workload_args: {vocab: 65}\n")

    with pytest.raises(ConfigError) as err:
        load_space(str(path))

    message = _one_line(err)
    assert message.startswith(f"{path}: ")
    assert "workload_args: only with `workload:`" in message


def test_a_space_needs_a_family_or_a_workload(write_space: Callable[..., Path]) -> None:
    path = write_space("name: bare\nmodel: {depth: [1]}\nbatch_size: [8]\n")

    with pytest.raises(ConfigError) as err:
        load_space(str(path))

    message = _one_line(err)
    assert message.startswith(f"{path}: ")
    assert "model.family: give a built-in family (cnn, mlp)" in message


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


def test_trial_config_from_stored_converts_the_form_before_workloads() -> None:
    old = make_trial_config().model_dump(mode="json")
    old.pop("workload")
    old.pop("model")
    old.update(family="mlp", depth=2, width=16, data={"name": "synthetic"})

    config = TrialConfig.from_stored(old)

    assert config.model == {"depth": 2, "width": 16}
    assert config.workload.is_builtin
    assert config.workload.args["family"] == "mlp"
    assert config.workload.args["data"]["name"] == "synthetic"
    assert config.knobs()["depth"] == 2


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
        ("train.reference_batch_size=0", "train.reference_batch_size"),
        ("train.lr_warmup_fraction=1.0", "train.lr_warmup_fraction"),
    ],
)
def test_bad_lr_scaling_override_names_the_key(override: str, key: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_space("cnn_small", [override])

    assert _one_line(err).startswith(f"override {override}: {key}: ")


def test_lr_scaling_overrides() -> None:
    space = load_space(
        "cnn_small",
        [
            "train.lr_scaling=linear",
            "train.reference_batch_size=128",
            "train.lr_warmup_fraction=0.1",
        ],
    )

    assert space.train.lr_scaling == "linear"
    assert space.train.reference_batch_size == 128
    assert space.train.lr_warmup_fraction == 0.1
