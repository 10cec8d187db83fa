"""The search space: immutability, a space's own workload and its knobs, the built-in
workload (autotune/core/config/_space.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import ValidationError

from autotune.core.config import (
    BUILTIN_WORKLOAD_REF,
    TUNER_KNOBS,
    ChoiceParam,
    FloatParam,
    IntParam,
    WorkloadSpec,
    load_space,
)
from autotune.core.exceptions import ConfigError
from tests.conftest import MINIMAL_SPACE

from .errors import one_line
from .spaces import WORKLOAD_SPACE

# --------------------------------------------------------------------------------------------
# The space model


def test_space_is_immutable() -> None:
    space = load_space("cnn_small")
    with pytest.raises(ValidationError):
        space.name = "other"  # type: ignore[misc]


# --------------------------------------------------------------------------------------------
# A space's own workload and its knobs


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
    assert spec.args == {"family": "cnn", "data": space.data_settings().model_dump()}


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

    message = one_line(err)
    assert message.startswith(f"{path}: ")
    assert f"{key}:" in message or f"{key}." in message
    assert rule in message


def test_workload_args_need_a_workload(write_space: Callable[..., Path]) -> None:
    path = write_space(MINIMAL_SPACE + "workload_args: {vocab: 65}\n")

    with pytest.raises(ConfigError) as err:
        load_space(str(path))

    message = one_line(err)
    assert message.startswith(f"{path}: ")
    assert "workload_args: only with `workload:`" in message


def test_a_space_needs_a_family_or_a_workload(write_space: Callable[..., Path]) -> None:
    path = write_space("name: bare\nmodel: {depth: [1]}\nbatch_size: [8]\n")

    with pytest.raises(ConfigError) as err:
        load_space(str(path))

    message = one_line(err)
    assert message.startswith(f"{path}: ")
    assert "model.family: give a built-in family (cnn, mlp)" in message


# --------------------------------------------------------------------------------------------
# A fixed global batch (train.global_batch_size)


def test_a_global_batch_no_choice_divides_is_refused_with_one_line() -> None:
    with pytest.raises(ConfigError) as err:
        load_space("cnn_small", ["train.global_batch_size=96"])

    # cnn_small: batch_size 16 .. 256, gpu_count 1, 2; 96 = 3 x 32, but no GPU count makes it
    # up from micro-batches of 64.
    assert one_line(err) == (
        "override train.global_batch_size=96: train.global_batch_size: 96 is not a multiple "
        "of batch_size x gpu_count for batch_size=64 with any gpu_count (1, 2)"
    )


def test_a_global_batch_some_combinations_divide_is_kept() -> None:
    space = load_space("cnn_small", ["train.global_batch_size=256"])

    assert space.train.global_batch_size == 256
    assert space.train.accumulation_steps(16, 2) == 8
    assert space.train.accumulation_steps(256, 1) == 1
    with pytest.raises(ValueError, match="is not a multiple of batch_size x gpu_count"):
        space.train.accumulation_steps(256, 2)


def test_an_unknown_search_setting_is_refused(write_space: Callable[..., Path]) -> None:
    path = write_space(MINIMAL_SPACE + "search:\n  metric_knob: [width]\n")
    with pytest.raises(ConfigError) as err:
        load_space(str(path))
    assert one_line(err) == (
        f"{path}: search: unknown key (did you mean advanced.search? the research knobs live "
        "under advanced.*)"
    )


# --------------------------------------------------------------------------------------------
# The doors to the user's own code: loop, hf_trainer, lightning

DOOR_SPACE = """\
name: doors
{door}: train.py:build
model:
  width: [8, 16]
batch_size: [32, 64]
train:
  epochs: 1
"""


@pytest.mark.parametrize(
    ("door", "metric"),
    [
        ("loop", ("accuracy", "maximize")),
        ("hf_trainer", ("eval_loss", "minimize")),
        ("lightning", ("val_loss", "minimize")),
    ],
)
def test_a_door_names_the_users_function_and_defaults_its_metric(
    write_space: Callable[..., Path], door: str, metric: tuple[str, str]
) -> None:
    path = write_space(DOOR_SPACE.format(door=door))

    space = load_space(str(path))
    spec = space.workload_spec()

    assert space.door == door and spec.door == door
    assert spec.ref == f"{path.parent / 'train.py'}:build"  # relative to the space file
    assert spec.metric is not None and (spec.metric.name, spec.metric.direction) == metric


def test_a_doors_metric_block_names_what_the_code_reports(
    write_space: Callable[..., Path],
) -> None:
    path = write_space(
        DOOR_SPACE.format(door="loop") + "metric: {name: top5, direction: maximize}\n"
    )

    spec = load_space(str(path)).workload_spec()

    assert spec.metric is not None and spec.metric.name == "top5"


@pytest.mark.parametrize(
    ("extra", "rule"),
    [
        ("workload: other.py:W\n", "loop: one door per space, but it also names `workload:`"),
        (
            "train: {epochs: 1, lr: 1.0e-3}\n",
            "train.lr: the loop door trains with your own optimizer",
        ),
        (
            "train: {epochs: 1, optimizer: sgd}\n",
            "train.optimizer: the loop door trains with your own",
        ),
        ("baseline: {lr: 1.0e-3}\n", "baseline.lr: the loop door trains at your own optimizer's"),
        (
            "metric: {name: val loss, direction: minimize}\n",
            "must be an identifier such as val_loss",
        ),
        ("data: {name: mnist}\n", "data: applies to the built-in workloads (model.family) only"),
        (
            "advanced: {data: {synthetic_samples: 64}}\n",
            "advanced.data: applies to the built-in workloads (model.family) only",
        ),
    ],
)
def test_a_doors_space_refuses_what_it_cannot_apply(
    write_space: Callable[..., Path], extra: str, rule: str
) -> None:
    text = DOOR_SPACE.format(door="loop").replace("train:\n  epochs: 1\n", "") + extra
    path = write_space(text)

    with pytest.raises(ConfigError) as err:
        load_space(str(path))

    assert rule in one_line(err)


def test_a_metric_block_beside_a_workload_is_refused(write_space: Callable[..., Path]) -> None:
    path = write_space(MINIMAL_SPACE + "metric: {name: accuracy, direction: maximize}\n")

    with pytest.raises(ConfigError) as err:
        load_space(str(path))

    assert "metric: only with a loop:, hf_trainer: or lightning: door" in one_line(err)


def test_a_workloads_key_fields_are_what_they_were_before_doors() -> None:
    spec = WorkloadSpec(ref="pkg.mod:W", args={"a": 1})

    assert spec.key_fields() == {"ref": "pkg.mod:W", "args": {"a": 1}}
    loop = WorkloadSpec(ref="pkg.mod:f", door="loop")
    assert loop.key_fields() == {"ref": "pkg.mod:f", "args": {}, "door": "loop"}


@pytest.mark.parametrize(
    ("baseline", "rule"),
    [
        ("{batch_size: 0}", "baseline.batch_size: must be >= 1, but got 0"),
        ("{gpu_count: 0}", "baseline.gpu_count: must be >= 1, but got 0"),
        ("{num_workers: -1}", "baseline.num_workers: must be >= 0, but got -1"),
        ("{depth: 0}", "baseline.depth: must be >= 1 (family cnn's depth), but got 0"),
    ],
)
def test_a_baseline_value_below_its_knobs_floor_is_blamed_on_the_baseline(
    write_space: Callable[..., Path], baseline: str, rule: str
) -> None:
    path = write_space(MINIMAL_SPACE + f"baseline: {baseline}\n")

    with pytest.raises(ConfigError) as err:
        load_space(str(path))

    assert one_line(err).endswith(f": {rule}")
