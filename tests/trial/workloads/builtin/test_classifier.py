"""The built-in workloads: cnn and mlp on the built-in data sets, through the same protocol as a
user's workload (autotune/trial/workloads/builtin/_classifier.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from pydantic import ValidationError

from autotune.core.config import BUILTIN_WORKLOAD_REF, DataSettings, load_space
from autotune.core.exceptions import DataError
from autotune.core.flops import count_parameters
from autotune.trial.workloads import Workload, check_workload, load_workload
from autotune.trial.workloads.builtin import ImageClassifier
from autotune.trial.workloads.builtin.networks import ConvNet, build_model


@pytest.mark.parametrize("family", ["cnn", "mlp"])
def test_builtin_is_a_workload_of_digits(family: str) -> None:
    workload = ImageClassifier(family, {"name": "digits"})

    train, validation = workload.datasets()
    model = workload.build_model(depth=2, width=16)

    assert isinstance(workload, Workload)
    assert (workload.metric_name, workload.metric_direction) == ("accuracy", "maximize")
    assert (len(train), len(validation)) == (1438, 359)
    x, y = train[0]
    assert x.shape == (1, 8, 8) and x.dtype == torch.float32
    assert y.dtype == torch.int64
    assert count_parameters(model) == count_parameters(build_model(family, 2, 16, (1, 8, 8), 10))
    assert model(x.unsqueeze(0)).shape == (1, 10)


def test_data_settings_may_be_a_model_or_its_mapping() -> None:
    settings = DataSettings(name="synthetic", synthetic_samples=64)

    assert (
        ImageClassifier("cnn", settings).data
        == ImageClassifier(
            "cnn",
            {
                "name": "synthetic",
                "synthetic_samples": 64,
            },
        ).data
    )


def test_an_unknown_family() -> None:
    with pytest.raises(ValueError, match=r"unknown model family 'rnn' \(known: cnn, mlp\)"):
        ImageClassifier("rnn", {})


def test_invalid_data_settings() -> None:
    with pytest.raises(ValidationError):
        ImageClassifier("cnn", {"name": "imagenet"})


def test_the_data_set_is_loaded_once() -> None:
    workload = ImageClassifier("mlp", {"name": "synthetic", "synthetic_samples": 64})

    first, _ = workload.datasets()
    workload.build_model(depth=1, width=8)
    second, _ = workload.datasets()

    assert first.tensors[0] is second.tensors[0]


def test_builtin_space_resolves_to_the_builtin_workload() -> None:
    space = load_space("cnn_small")

    loaded = check_workload(space.workload_spec(), space.model)

    assert loaded.spec.ref == BUILTIN_WORKLOAD_REF
    assert isinstance(loaded.obj, ImageClassifier)
    assert loaded.obj.family == "cnn"
    assert (loaded.metric_name, loaded.metric_direction) == ("accuracy", "maximize")
    assert not loaded.has_own_evaluate  # top-1 accuracy, the default
    assert isinstance(loaded.build_model({"depth": 2, "width": 8}), ConvNet)


def test_a_missing_data_set_is_a_data_error(tmp_path: Path) -> None:
    space = load_space("cnn_small", ["data=mnist", f"data.root={tmp_path / 'none'}"])

    with pytest.raises(DataError, match=r"data\.root=.*: no such directory"):
        check_workload(space.workload_spec(), space.model)


def test_builtin_workload_accuracy_is_in_range() -> None:
    loaded = load_workload(load_space("mlp_small").workload_spec())
    _, validation = loaded.datasets()
    model = loaded.build_model({"depth": 1, "width": 8}).eval()
    loader = torch.utils.data.DataLoader(validation, batch_size=128)

    with torch.no_grad():
        accuracy = loaded.evaluate(model, loader, torch.device("cpu"))

    assert 0.0 <= accuracy <= 1.0
