"""Resolving a workload by reference and checking it against a space before a study opens
(autotune/trial/workloads/_loader.py). Workload files are written into ``tmp_path``."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from autotune.cli import main
from autotune.core.config import ModelSpace, TrialConfig, WorkloadSpec, load_space
from autotune.core.exceptions import WorkloadError
from autotune.trial.training import run_rank
from autotune.trial.workloads import (
    LoadedWorkload,
    Workload,
    check_workload,
    load_workload,
)
from autotune.trial.workloads._loader import (
    default_evaluate,
    smallest_knobs,
)

from .sources import REGRESSION, write_regression

#: The body of a workload class ``W`` whose knob is ``hidden``; tests replace parts of it.
_GOOD = """\
import torch
from torch import nn
from torch.utils.data import TensorDataset


class W:
    def __init__(self, size: int = 8) -> None:
        self.size = size

    def build_model(self, hidden: int):
        return nn.Sequential(nn.Flatten(), nn.Linear(4, hidden), nn.Linear(hidden, 2))

    def datasets(self):
        x, y = torch.randn(self.size, 4), torch.zeros(self.size, dtype=torch.long)
        return TensorDataset(x, y), TensorDataset(x, y)
"""


@pytest.fixture
def write_workload(tmp_path: Path) -> Callable[..., WorkloadSpec]:
    """Write Python source to ``tmp_path/<name>`` and return a spec naming ``attr`` in it."""

    def write(source: str, attr: str = "W", name: str = "work.py", **args: object) -> WorkloadSpec:
        path = tmp_path / name
        path.write_text(textwrap.dedent(source), encoding="utf-8")
        return WorkloadSpec(ref=f"{path}:{attr}", args=args)

    return write


def _model(**knobs: object) -> ModelSpace:
    return ModelSpace.model_validate(knobs)


def _one_line(err: pytest.ExceptionInfo[WorkloadError]) -> str:
    message = str(err.value)
    assert "\n" not in message, f"error message is not one line: {message!r}"
    return message


# --------------------------------------------------------------------------------------------
# The reference


def test_a_missing_file(tmp_path: Path) -> None:
    spec = WorkloadSpec(ref=f"{tmp_path / 'nowhere.py'}:W")

    with pytest.raises(WorkloadError) as err:
        load_workload(spec)

    assert _one_line(err) == f"workload: no such file {tmp_path / 'nowhere.py'}"


def test_a_missing_attribute(write_workload: Callable[..., WorkloadSpec]) -> None:
    spec = write_workload(_GOOD, attr="Nope")

    with pytest.raises(WorkloadError) as err:
        load_workload(spec)

    message = _one_line(err)
    assert message.startswith("workload: ")
    assert message.endswith("work.py has no attribute 'Nope'")


def test_a_module_that_raises_on_import(write_workload: Callable[..., WorkloadSpec]) -> None:
    spec = write_workload("import torch\nraise RuntimeError('no GPU driver here')\n")

    with pytest.raises(WorkloadError) as err:
        load_workload(spec)

    message = _one_line(err)
    assert message.startswith("workload: importing ")
    assert message.endswith("work.py failed: RuntimeError: no GPU driver here")


def test_a_module_that_cannot_be_imported() -> None:
    with pytest.raises(WorkloadError) as err:
        load_workload(WorkloadSpec(ref="no_such_package_here.models:Net"))

    assert _one_line(err) == (
        "workload: cannot import no_such_package_here.models: "
        "ModuleNotFoundError: No module named 'no_such_package_here'"
    )


def test_a_package_module_reference(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "my_workloads_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "regression.py").write_text(REGRESSION)
    monkeypatch.syspath_prepend(str(tmp_path))

    loaded = load_workload(WorkloadSpec(ref="my_workloads_pkg.regression:WORKLOAD"))

    assert type(loaded.obj).__name__ == "Regression"
    assert (loaded.metric_name, loaded.metric_direction) == ("val_mse", "minimize")
    sys.modules.pop("my_workloads_pkg.regression", None)
    sys.modules.pop("my_workloads_pkg", None)


# --------------------------------------------------------------------------------------------
# The object and its arguments


@pytest.mark.parametrize(
    ("source", "attr", "expected"),
    [
        ("W = 42\n", "W", "workload: work.py:W is a int, not a workload"),
        (
            "class W:\n    def build_model(self, hidden): ...\n",
            "W",
            "workload: work.py:W(...) returned a W, which has no build_model(**knobs) and "
            "datasets() methods",
        ),
        (
            "def W():\n    return {'build_model': None}\n",
            "W",
            "workload: work.py:W(...) returned a dict, which has no build_model(**knobs)",
        ),
    ],
    ids=["a-number", "no-datasets", "a-factory-of-something-else"],
)
def test_an_object_that_is_not_a_workload(
    write_workload: Callable[..., WorkloadSpec], source: str, attr: str, expected: str
) -> None:
    with pytest.raises(WorkloadError) as err:
        load_workload(write_workload(source, attr=attr))

    assert _one_line(err).startswith(expected)


def test_a_class_is_called_with_the_workload_args(
    write_workload: Callable[..., WorkloadSpec],
) -> None:
    loaded = load_workload(write_workload(_GOOD, size=12))

    assert type(loaded.obj).__name__ == "W"
    assert loaded.obj.size == 12
    train, validation = loaded.datasets()
    assert len(train) == len(validation) == 12  # type: ignore[arg-type]
    assert isinstance(loaded.obj, Workload)  # the protocol, without subclassing


def test_workload_args_given_to_an_instance(write_workload: Callable[..., WorkloadSpec]) -> None:
    spec = write_workload(_GOOD + "\nINSTANCE = W()\n", attr="INSTANCE", size=12)

    with pytest.raises(WorkloadError) as err:
        load_workload(spec)

    assert _one_line(err) == (
        "workload_args: work.py:INSTANCE is already a workload object, not a class or factory "
        "to call with arguments; remove workload_args"
    )


def test_workload_args_the_class_does_not_take(
    write_workload: Callable[..., WorkloadSpec],
) -> None:
    with pytest.raises(WorkloadError) as err:
        load_workload(write_workload(_GOOD, colour="red"))

    message = _one_line(err)
    assert message.startswith("workload_args: work.py:W() does not accept them: ")
    assert "colour" in message


def test_a_class_that_raises_when_made(write_workload: Callable[..., WorkloadSpec]) -> None:
    source = _GOOD.replace("self.size = size", "raise ValueError(f'size {size} is too small')")

    with pytest.raises(WorkloadError) as err:
        load_workload(write_workload(source, size=1))

    assert _one_line(err) == "workload: work.py:W(...) raised ValueError: size 1 is too small"


@pytest.mark.parametrize(
    ("attributes", "expected"),
    [
        (
            "metric_direction = 'lower'",
            "workload: work.py:W.metric_direction must be maximize or minimize, got 'lower'",
        ),
        (
            "metric_name = 'val loss'",
            "workload: work.py:W.metric_name must be an identifier such as val_loss, "
            "got 'val loss'",
        ),
    ],
)
def test_invalid_metric_attributes(
    write_workload: Callable[..., WorkloadSpec], attributes: str, expected: str
) -> None:
    source = _GOOD.replace("class W:\n", f"class W:\n    {attributes}\n")

    with pytest.raises(WorkloadError) as err:
        load_workload(write_workload(source))

    assert _one_line(err) == expected


def test_defaults_of_a_workload_without_the_optional_parts(
    write_workload: Callable[..., WorkloadSpec],
) -> None:
    loaded = load_workload(write_workload(_GOOD))

    assert (loaded.metric_name, loaded.metric_direction) == ("accuracy", "maximize")
    assert not loaded.has_own_evaluate
    output, target = torch.tensor([[2.0, 0.0]]), torch.tensor([0])
    assert loaded.loss(output, target) == torch.nn.functional.cross_entropy(output, target)


# --------------------------------------------------------------------------------------------
# check_workload: the space's knobs, the smallest model, the data


def test_a_good_workload_passes_the_check(write_workload: Callable[..., WorkloadSpec]) -> None:
    model = _model(hidden=[16, 4, 8])

    loaded = check_workload(write_workload(_GOOD), model)

    assert isinstance(loaded, LoadedWorkload)
    assert smallest_knobs(model) == {"hidden": 4}


def test_a_knob_build_model_does_not_take(write_workload: Callable[..., WorkloadSpec]) -> None:
    with pytest.raises(WorkloadError) as err:
        check_workload(write_workload(_GOOD), _model(hidden=[4], depth=[1, 2]))

    assert _one_line(err) == (
        "model.depth: build_model() of work.py:W has no such argument (it takes: hidden)"
    )


def test_build_model_with_keyword_arguments_takes_any_knob(
    write_workload: Callable[..., WorkloadSpec],
) -> None:
    source = _GOOD.replace("def build_model(self, hidden: int):", "def build_model(self, **kw):")
    source = source.replace("nn.Linear(4, hidden), nn.Linear(hidden, 2)", "nn.Linear(4, 2)")

    check_workload(write_workload(source), _model(anything=[1, 2], other=["a", "b"]))


def test_a_required_argument_the_space_does_not_give(
    write_workload: Callable[..., WorkloadSpec],
) -> None:
    with pytest.raises(WorkloadError) as err:
        check_workload(write_workload(_GOOD), _model())

    assert _one_line(err) == (
        "model: build_model() of work.py:W needs the knob hidden, which the space does not "
        "give (add it under model:)"
    )


def test_a_model_that_fails_with_the_smallest_knobs(
    write_workload: Callable[..., WorkloadSpec],
) -> None:
    source = _GOOD.replace(
        "        return nn.Sequential(",
        "        if hidden < 8:\n"
        "            raise ValueError(f'hidden={hidden} is below the 8 heads')\n"
        "        return nn.Sequential(",
    )

    with pytest.raises(WorkloadError) as err:
        check_workload(write_workload(source), _model(hidden=[4, 8, 16]))

    assert _one_line(err) == (
        "model: build_model(hidden=4) of work.py:W failed with the smallest knobs: "
        "ValueError: hidden=4 is below the 8 heads"
    )


def test_a_build_model_that_returns_no_module(
    write_workload: Callable[..., WorkloadSpec],
) -> None:
    source = _GOOD.replace(
        "return nn.Sequential(nn.Flatten(), nn.Linear(4, hidden), nn.Linear(hidden, 2))",
        "return 'a model'",
    )

    with pytest.raises(WorkloadError) as err:
        check_workload(write_workload(source), _model(hidden=[4]))

    message = _one_line(err)
    assert message.startswith("model: build_model(hidden=4) of work.py:W failed")
    assert "returned a str, not a torch.nn.Module" in message


@pytest.mark.parametrize(
    ("datasets", "expected"),
    [
        (
            "return TensorDataset(x, y)",
            "workload: datasets() of work.py:W failed: TypeError: work.py:W: datasets() must "
            "return (train, validation), got a TensorDataset",
        ),
        (
            "return TensorDataset(x[:0], y[:0]), TensorDataset(x, y)",
            "workload: datasets() of work.py:W gave 0 training and 8 validation items; both "
            "need at least one",
        ),
        (
            "return [x[0], x[1]], [x[0]]",
            "workload: datasets() of work.py:W: an item must be an (input, target) pair, got a "
            "Tensor",
        ),
        (
            "return 3, 4",
            "workload: datasets() of work.py:W failed: TypeError: object of type 'int' has no "
            "len()",
        ),
    ],
    ids=["one-dataset", "empty", "no-pairs", "not-datasets"],
)
def test_datasets_of_the_wrong_shape(
    write_workload: Callable[..., WorkloadSpec], datasets: str, expected: str
) -> None:
    source = _GOOD.replace("return TensorDataset(x, y), TensorDataset(x, y)", datasets)

    with pytest.raises(WorkloadError) as err:
        check_workload(write_workload(source), _model(hidden=[4]))

    assert _one_line(err) == expected


def test_default_evaluate_is_top1_accuracy() -> None:
    model = torch.nn.Linear(2, 2, bias=False)
    with torch.no_grad():
        model.weight.copy_(torch.eye(2))
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    y = torch.tensor([0, 1, 1, 1])

    accuracy = default_evaluate(model, [(x[:2], y[:2]), (x[2:], y[2:])], torch.device("cpu"))

    assert accuracy == 0.75


# --------------------------------------------------------------------------------------------
# A good workload through a real trial, and a bad one through the command line


def test_a_workload_with_its_own_loss_and_metric_trains_in_a_trial(tmp_path: Path) -> None:
    space = load_space(str(write_regression(tmp_path)))
    knobs = {
        "hidden": 8,
        "activation": "gelu",
        "scale": 1.0,
        "batch_size": 16,
        "precision": "fp32",
        "memory_format": "contiguous",
        "compile_mode": "none",
        "num_workers": 0,
        "gpu_count": 1,
    }
    train = space.train_settings().model_copy(update={"max_steps": 10, "warmup_steps": 2})
    measure = space.advanced.measure.model_copy(update={"windows": 2})
    config = TrialConfig.from_knobs(knobs, space, device="cpu", train=train, measure=measure)

    m = run_rank(config)

    assert m is not None
    workload = load_workload(config.workload)  # the same object this process trained with
    assert (workload.metric_name, workload.metric_direction) == ("val_mse", "minimize")
    assert workload.obj.evaluated == [m.val_metric]  # its evaluate(), called once
    assert m.val_metric > 0 and m.simulated is False
    assert m.steps == 10 and m.samples_per_step == 16
    assert m.throughput_sps > 0 and m.peak_memory_bytes > 0


def _files(root: Path) -> list[Path]:
    return sorted(p.relative_to(root) for p in root.rglob("*"))


@pytest.mark.parametrize(
    ("edit", "fragment"),
    [
        (
            lambda space: space.replace("regression.py:Regression", "missing.py:Regression"),
            "workload: no such file ",
        ),
        (
            lambda space: space.replace("  hidden: [4, 8]", "  hidden: [4, 8]\n  heads: [2]"),
            "model.heads: build_model() of regression.py:Regression has no such argument",
        ),
        (
            lambda space: space.replace("{samples: 256}", "{samples: 256, colour: red}"),
            "workload_args: regression.py:Regression() does not accept them",
        ),
    ],
    ids=["missing-file", "unknown-knob", "bad-args"],
)
def test_the_command_line_refuses_a_bad_workload_and_writes_nothing(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    edit: Callable[[str], str],
    fragment: str,
) -> None:
    from .sources import REGRESSION_SPACE

    space = write_regression(tmp_path, edit(REGRESSION_SPACE))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)  # the default storage is storage/autotune.db under it
    monkeypatch.setenv("COLUMNS", "80")
    before = _files(tmp_path)

    code = main(["run", f"space={space}", "device=cpu", "--trials", "1"])

    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"autotune: error: {space}: ")  # the space file, then the key
    assert fragment in err
    assert _files(tmp_path) == before  # no storage/, no database


# --------------------------------------------------------------------------------------------
# The doors' functions (loop, hf_trainer, lightning)

_LOOP = """\
def train(trial, steps=1):
    return None

NOT_A_FUNCTION = 3
"""


def _door(spec: WorkloadSpec, door: str = "loop", **args: object) -> WorkloadSpec:
    from autotune.core.config._space import DEFAULT_DOOR_METRICS

    return WorkloadSpec(ref=spec.ref, args=dict(args), door=door, metric=DEFAULT_DOOR_METRICS[door])  # type: ignore[arg-type]


def test_a_doors_function_is_checked_and_gives_the_spaces_metric(
    write_workload: Callable[..., WorkloadSpec],
) -> None:
    spec = _door(write_workload(_LOOP, attr="train"), steps=2)

    loaded = check_workload(spec, _model(width=[8]))

    assert callable(loaded.obj)
    assert (loaded.metric_name, loaded.metric_direction) == ("accuracy", "maximize")


@pytest.mark.parametrize(
    ("attr", "args", "message"),
    [
        ("NOT_A_FUNCTION", {}, "loop: work.py:NOT_A_FUNCTION is a int, not a function"),
        ("train", {"epochs": 3}, "loop: work.py:train(trial, **workload_args) does not fit"),
    ],
)
def test_a_doors_function_that_cannot_take_the_handle_is_refused(
    write_workload: Callable[..., WorkloadSpec], attr: str, args: dict[str, object], message: str
) -> None:
    spec = _door(write_workload(_LOOP, attr=attr, name="work.py"), **args)

    with pytest.raises(WorkloadError) as err:
        check_workload(spec, _model())

    assert message in _one_line(err)


def test_a_framework_door_without_its_package_names_the_extra(
    write_workload: Callable[..., WorkloadSpec], monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "lightning" else real(name, *a),
    )
    spec = _door(write_workload(_LOOP, attr="train", name="lit.py"), door="lightning")

    with pytest.raises(WorkloadError) as err:
        check_workload(spec, _model())

    assert (
        "needs lightning, which is not installed: pip install 'autotune[lightning]'"
        in _one_line(err)
    )


@pytest.mark.parametrize("door", ["loop", "hf_trainer", "lightning"])
def test_a_doors_missing_file_or_function_is_reported_under_its_own_key(
    write_workload: Callable[..., WorkloadSpec], tmp_path: Path, door: str
) -> None:
    missing = WorkloadSpec(ref=f"{tmp_path / 'nowhere.py'}:train")
    no_function = write_workload(_LOOP, attr="trian")

    with pytest.raises(WorkloadError) as no_file:
        check_workload(_door(missing, door=door), _model())
    with pytest.raises(WorkloadError) as no_attr:
        check_workload(_door(no_function, door=door), _model())

    assert _one_line(no_file) == f"{door}: no such file {tmp_path / 'nowhere.py'}"
    assert _one_line(no_attr).startswith(f"{door}: ")
    assert _one_line(no_attr).endswith("work.py has no attribute 'trian'")


def test_a_syntax_error_keeps_its_file_and_line(
    write_workload: Callable[..., WorkloadSpec], tmp_path: Path
) -> None:
    spec = write_workload("import torch\n\n\ndef train(trial):\n    return (\n", attr="train")

    with pytest.raises(WorkloadError) as err:
        check_workload(_door(spec), _model())

    path = tmp_path / "work.py"
    assert _one_line(err) == (
        f"loop: importing {path} failed: {path}:5: SyntaxError: '(' was never closed"
    )


#: A script that reads its command line at import, as training scripts do.
_ARGPARSE_AT_IMPORT = """\
import argparse

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.1)
ARGS = parser.parse_args()
SEEN_ARGV = __import__("sys").argv[:]


def train(trial):
    trial.report(ARGS.lr)
"""


def test_a_script_that_parses_its_command_line_at_import_reads_its_own_defaults(
    write_workload: Callable[..., WorkloadSpec], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # What sys.argv holds in `autotune run space=... --trials 1`: argparse would refuse it.
    study_argv = ["autotune", "run", "space=s.yaml", "--trials", "1"]
    monkeypatch.setattr(sys, "argv", study_argv)
    spec = _door(write_workload(_ARGPARSE_AT_IMPORT, attr="train", name="argv_script.py"))

    loaded = check_workload(spec, _model())

    module = sys.modules[loaded.obj.__module__]
    assert module.ARGS.lr == 0.1
    seen_argv = module.SEEN_ARGV
    assert seen_argv == [str(tmp_path / "argv_script.py")]
    assert sys.argv == study_argv  # restored


def test_a_script_that_exits_at_import_is_a_one_line_error(
    write_workload: Callable[..., WorkloadSpec],
) -> None:
    source = _ARGPARSE_AT_IMPORT.replace('"--lr"', '"--data", required=True)\n#')
    spec = _door(write_workload(source, attr="train", name="exits.py"))

    with pytest.raises(WorkloadError) as err:
        check_workload(spec, _model())

    assert _one_line(err).endswith(
        "exits.py failed: it called sys.exit(2) at import (put the "
        "script's own command-line code under `if __name__ == "
        '"__main__":`)'
    )
