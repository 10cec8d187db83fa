"""The example workloads under examples/: each module imported by file path, as autotune's
trial process imports a ``workload: FILE.py:NAME`` reference.

The ResNet reads IDX files written here from scikit-learn's bundled digits (8x8, scaled to
28x28), so no test needs the MNIST download. Models are built at the smallest and the largest
knobs of each example's space.yaml and run one forward/backward step on a real batch.
"""

from __future__ import annotations

import gzip
import importlib.util
import math
import pickle
import re
import shlex
import struct
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import optuna
import pytest
import torch
import torch.nn.functional as F
import yaml
from optuna.study import StudyDirection
from torch.utils.data import DataLoader, Subset, TensorDataset

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
RESNET_DIR = EXAMPLES / "resnet_mnist"
GPT_DIR = EXAMPLES / "char_gpt"


def _import(path: Path) -> ModuleType:
    """Import a module from its file, as the trial process imports ``FILE.py:NAME``."""
    name = f"_example_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look modules up by name
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def resnet() -> ModuleType:
    return _import(RESNET_DIR / "resnet.py")


@pytest.fixture(scope="module")
def gpt() -> ModuleType:
    return _import(GPT_DIR / "gpt.py")


def _space(directory: Path) -> dict[str, Any]:
    with (directory / "space.yaml").open(encoding="utf-8") as f:
        space: dict[str, Any] = yaml.safe_load(f)
    return space


def _extreme_knobs(directory: Path, pick: Callable[[list[Any]], Any]) -> dict[str, Any]:
    """The ``model:`` knobs of a space at one extreme: ``pick`` (min or max) of each knob's
    choices or range ends; fixed values as they are."""
    knobs: dict[str, Any] = {}
    for name, spec in _space(directory)["model"].items():
        if isinstance(spec, dict) and "choices" in spec:
            knobs[name] = pick(spec["choices"])
        elif isinstance(spec, dict):
            knobs[name] = pick([spec["low"], spec["high"]])
        elif isinstance(spec, list):
            knobs[name] = pick(spec)
        else:
            knobs[name] = spec
    return knobs


def _top1_accuracy(model: torch.nn.Module, loader: DataLoader[Any], device: torch.device) -> float:
    """autotune's default metric, for a workload without ``evaluate``."""
    correct = total = 0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        correct += int((model(x).argmax(dim=1) == y).sum())
        total += len(y)
    return correct / total


# --------------------------------------------------------------------------------------------
# IDX files from scikit-learn's digits


def _write_idx(path: Path, array: np.ndarray) -> None:
    """IDX: two zero bytes, type code 0x08 (uint8), ndim, big-endian uint32 sizes, data."""
    assert array.dtype == np.uint8
    blob = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    blob += array.tobytes()
    if path.suffix == ".gz":
        blob = gzip.compress(blob)
    path.write_bytes(blob)


def _digits_28() -> tuple[np.ndarray, np.ndarray]:
    """The 1,797 digits of scikit-learn as MNIST-like uint8 images ``(N, 28, 28)``: each
    8x8 image (values 0..16) scaled 3x to 24x24 and padded by 2 pixels."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = digits.images.astype(np.float64) * (255.0 / 16.0)  # (N, 8, 8)
    images = np.kron(images, np.ones((3, 3)))  # (N, 24, 24)
    images = np.pad(images, ((0, 0), (2, 2), (2, 2)))  # (N, 28, 28)
    return images.round().astype(np.uint8), digits.target.astype(np.uint8)


@pytest.fixture(scope="module")
def idx_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with both MNIST splits: ``train-*`` raw, ``t10k-*`` gzipped."""
    root = tmp_path_factory.mktemp("idx")
    images, labels = _digits_28()
    _write_idx(root / "train-images-idx3-ubyte", images[:1500])
    _write_idx(root / "train-labels-idx1-ubyte", labels[:1500])
    _write_idx(root / "t10k-images-idx3-ubyte.gz", images[1500:])
    _write_idx(root / "t10k-labels-idx1-ubyte.gz", labels[1500:])
    return root


# --------------------------------------------------------------------------------------------
# resnet_mnist: data


def test_read_idx_reads_what_was_written(resnet: ModuleType, tmp_path: Path) -> None:
    array = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    for name in ("a-idx3-ubyte", "b-idx3-ubyte.gz"):
        _write_idx(tmp_path / name, array)

        got = resnet.read_idx(tmp_path / name)

        np.testing.assert_array_equal(got, array)


def test_read_idx_refuses_a_file_that_is_not_idx(resnet: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "train-images-idx3-ubyte"
    path.write_bytes(b"PK\x03\x04 not an IDX file")

    with pytest.raises(ValueError, match="not an IDX file"):
        resnet.read_idx(path)


def test_read_idx_refuses_a_truncated_payload(resnet: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "x"
    _write_idx(path, np.zeros((4, 28, 28), dtype=np.uint8))
    path.write_bytes(path.read_bytes()[:-10])

    with pytest.raises(ValueError, match="header says"):
        resnet.read_idx(path)


def test_missing_directory_names_the_path(resnet: ModuleType, tmp_path: Path) -> None:
    root = tmp_path / "no-such-dir"

    with pytest.raises(FileNotFoundError, match="no-such-dir"):
        resnet.ResNetWorkload(root).datasets()


def test_directory_without_idx_files_names_the_files(resnet: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no MNIST IDX files .*train-images-idx3-ubyte"):
        resnet.ResNetWorkload(tmp_path).datasets()


def test_images_without_labels_name_the_missing_file(resnet: ModuleType, tmp_path: Path) -> None:
    _write_idx(tmp_path / "t10k-images-idx3-ubyte", np.zeros((4, 28, 28), dtype=np.uint8))

    with pytest.raises(FileNotFoundError, match="t10k-labels-idx1-ubyte"):
        resnet.ResNetWorkload(tmp_path).datasets()


def test_datasets_pool_the_splits_and_standardize(resnet: ModuleType, idx_dir: Path) -> None:
    train, val = resnet.ResNetWorkload(idx_dir, val_fraction=0.2).datasets()

    assert (len(train), len(val)) == (1797 - 359, 359)
    x, y = train[0]
    assert x.shape == (1, 28, 28) and x.dtype == torch.float32
    assert y.dtype == torch.int64
    train_x = train.tensors[0]
    assert abs(float(train_x.mean())) < 1e-4
    assert float(train_x.std()) == pytest.approx(1.0, abs=1e-4)
    assert set(train.tensors[1].tolist()) == set(range(10))


def test_datasets_split_is_the_same_every_time(resnet: ModuleType, idx_dir: Path) -> None:
    first = resnet.ResNetWorkload(idx_dir).datasets()
    second = resnet.ResNetWorkload(idx_dir).datasets()

    for a, b in zip(first, second, strict=True):
        assert torch.equal(a.tensors[0], b.tensors[0])
        assert torch.equal(a.tensors[1], b.tensors[1])


@pytest.mark.parametrize("val_fraction", [0.0, 1.0])
def test_val_fraction_outside_0_1_is_refused(resnet: ModuleType, val_fraction: float) -> None:
    with pytest.raises(ValueError, match="val_fraction"):
        resnet.ResNetWorkload("/tmp", val_fraction=val_fraction)


def test_the_space_reads_the_shipped_mnist_test_set_by_default(resnet: ModuleType) -> None:
    """space.yaml names no directory of its own (``root: null``): the workload reads the MNIST
    test set that ships with autotune, the files ``data=mnist`` reads."""
    from autotune.trial.workloads.builtin.data import SHIPPED_MNIST_DIR

    workload = resnet.ResNetWorkload(**_space(RESNET_DIR)["workload_args"])
    train, val = workload.datasets()

    assert workload.root.resolve() == SHIPPED_MNIST_DIR.resolve()
    assert (len(train), len(val)) == (8000, 2000)  # 10,000 images at val_fraction 0.2


def _readme_commands(directory: Path) -> list[list[str]]:
    """The ``autotune ...`` lines of the bash blocks of a folder's README.md, split as a shell
    splits them."""
    text = (directory / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", text, re.DOTALL)
    return [
        shlex.split(line) for b in blocks for line in b.splitlines() if line.startswith("autotune")
    ]


@pytest.mark.parametrize("directory", [RESNET_DIR, GPT_DIR], ids=lambda d: d.name)
def test_the_readme_command_runs_as_pasted_from_the_repository_root(
    directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Everything `autotune run` checks before its first trial (the space, the workload, its
    data, the storage URL) passes for the README's command, run where a fresh clone puts the
    user: nothing there but the repository. prepare_run writes nothing."""
    from autotune.core.config import load_run_config
    from autotune.study.api import prepare_run

    commands = _readme_commands(directory)
    assert commands
    monkeypatch.chdir(REPO)
    for argv in commands:  # resnet_mnist's README also runs its long run (long.yaml)
        assert argv[:2] == ["autotune", "run"]
        config = load_run_config([a for a in argv[2:] if "=" in a])  # --trials N is a flag
        prepared = prepare_run(config)
        assert prepared.config.space.name.startswith(directory.name)


# --------------------------------------------------------------------------------------------
# resnet_mnist: model


def test_resnet_workload_protocol(resnet: ModuleType) -> None:
    space = _space(RESNET_DIR)
    file, _, name = space["workload"].partition(":")

    assert (RESNET_DIR / file).is_file()
    workload = getattr(resnet, name)(**space["workload_args"])
    assert workload.metric_name == "accuracy"
    assert workload.metric_direction == "maximize"
    assert not hasattr(workload, "evaluate")  # autotune's top-1 accuracy
    assert not hasattr(workload, "loss")  # autotune's cross-entropy


@pytest.mark.parametrize("pick", [min, max], ids=["smallest", "largest"])
def test_resnet_trains_one_step_at_the_space_extremes(
    resnet: ModuleType, idx_dir: Path, pick: Callable[[list[Any]], Any]
) -> None:
    torch.manual_seed(0)
    workload = resnet.ResNetWorkload(idx_dir)
    train, val = workload.datasets()
    model = workload.build_model(**_extreme_knobs(RESNET_DIR, pick))
    x, y = next(iter(DataLoader(train, batch_size=16, shuffle=True)))  # (16, 1, 28, 28), (16,)

    logits = model(x)
    loss = F.cross_entropy(logits, y)
    loss.backward()

    assert logits.shape == (16, 10)
    assert math.isfinite(loss.item())
    assert all(p.grad is not None for p in model.parameters())
    model.eval()
    with torch.no_grad():
        accuracy = _top1_accuracy(
            model, DataLoader(Subset(val, range(64)), batch_size=32), torch.device("cpu")
        )
    assert 0.0 <= accuracy <= 1.0


def test_resnet_runs_in_channels_last_and_bf16(resnet: ModuleType, idx_dir: Path) -> None:
    workload = resnet.ResNetWorkload(idx_dir)
    train, _ = workload.datasets()
    model = workload.build_model(blocks=1, width=8, stages=2).to(memory_format=torch.channels_last)
    x, y = next(iter(DataLoader(train, batch_size=8)))

    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(x.to(memory_format=torch.channels_last)), y)
    loss.backward()

    assert math.isfinite(loss.item())


@pytest.mark.slow
def test_resnet_learns_the_digits(resnet: ModuleType, idx_dir: Path) -> None:
    """A few dozen steps at the smallest knobs lift validation accuracy well above chance."""
    torch.manual_seed(0)
    workload = resnet.ResNetWorkload(idx_dir)
    train, val = workload.datasets()
    model = workload.build_model(**_extreme_knobs(RESNET_DIR, min))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3.0e-3)
    for x, y in DataLoader(train, batch_size=32, shuffle=True):
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()

    model.eval()
    with torch.no_grad():
        accuracy = _top1_accuracy(model, DataLoader(val, batch_size=128), torch.device("cpu"))
    assert accuracy > 0.5


def test_resnet_refuses_a_knob_below_one(resnet: ModuleType, idx_dir: Path) -> None:
    with pytest.raises(ValueError, match="blocks must be >= 1"):
        resnet.ResNetWorkload(idx_dir).build_model(blocks=0, width=8, stages=2)


# --------------------------------------------------------------------------------------------
# char_gpt: data


def test_corpus_is_deterministic_and_cut_at_max_bytes(gpt: ModuleType) -> None:
    first = gpt.load_corpus(max_bytes=100_000)
    second = gpt.load_corpus(max_bytes=100_000)

    assert first.dtype == torch.uint8
    assert len(first) == 100_000  # the standard library holds megabytes of *.py files
    assert torch.equal(first, second)
    assert bytes(first[:3].tolist()).isascii()


def test_corpus_refuses_a_directory_without_python_files(gpt: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=str(tmp_path)):
        gpt.load_corpus(tmp_path)


def test_windows_pair_each_byte_with_the_next(gpt: ModuleType) -> None:
    data = torch.arange(1000, dtype=torch.int64).remainder(256).to(torch.uint8)
    windows = gpt.byte_windows(data, window=100)

    x, y = windows[3]

    assert len(windows) == 9  # (1000 - 1) // 100
    assert x.dtype == y.dtype == torch.int64
    assert x.tolist() == [i % 256 for i in range(300, 400)]
    assert y.tolist() == [i % 256 for i in range(301, 401)]


def test_windows_refuse_a_stream_shorter_than_one_window(gpt: ModuleType) -> None:
    with pytest.raises(ValueError, match="too few"):
        gpt.byte_windows(torch.zeros(100, dtype=torch.uint8), window=100)


def test_validation_is_the_tail_of_the_stream(gpt: ModuleType) -> None:
    workload = gpt.CharGPTWorkload(max_bytes=100_000)
    corpus = gpt.load_corpus(max_bytes=100_000)

    train, val = workload.datasets()

    x, y = val[0]
    assert x.shape == y.shape == (gpt.WINDOW,)
    assert x.tolist() == corpus[90_000 : 90_000 + gpt.WINDOW].tolist()
    assert len(train) == (90_000 - 1) // gpt.WINDOW
    assert len(val) == (10_000 - 1) // gpt.WINDOW


# --------------------------------------------------------------------------------------------
# char_gpt: model


def test_gpt_workload_protocol(gpt: ModuleType) -> None:
    space = _space(GPT_DIR)
    file, _, name = space["workload"].partition(":")

    assert (GPT_DIR / file).is_file()
    workload = getattr(gpt, name)(**space["workload_args"])
    assert workload.metric_name == "val_loss"
    assert workload.metric_direction == "minimize"
    for knobs in (_extreme_knobs(GPT_DIR, min), _extreme_knobs(GPT_DIR, max)):
        assert knobs["n_embd"] % knobs["n_head"] == 0


@pytest.mark.parametrize("pick", [min, max], ids=["smallest", "largest"])
def test_gpt_trains_one_step_at_the_space_extremes(
    gpt: ModuleType, pick: Callable[[list[Any]], Any]
) -> None:
    torch.manual_seed(0)
    workload = gpt.CharGPTWorkload(max_bytes=200_000)
    train, val = workload.datasets()
    model = workload.build_model(**_extreme_knobs(GPT_DIR, pick))
    x, y = next(iter(DataLoader(train, batch_size=4, shuffle=True)))  # (4, 256) each

    logits = model(x)
    loss = workload.loss(logits, y)
    loss.backward()

    assert logits.shape == (4, gpt.WINDOW, gpt.VOCAB_SIZE)
    # Near ln 256 = 5.55 at initialization (a little lower: bytes repeat in source text).
    assert 4.0 < loss.item() < 7.0
    assert all(p.grad is not None for p in model.parameters())
    model.eval()
    with torch.no_grad():
        val_loss = workload.evaluate(
            model, DataLoader(Subset(val, range(8)), batch_size=4), torch.device("cpu")
        )
    assert isinstance(val_loss, float)
    assert 4.0 < val_loss < 7.0


def test_gpt_attention_is_causal_within_each_block(gpt: ModuleType) -> None:
    """A byte's logits depend on the earlier bytes of its own block_size chunk only."""
    torch.manual_seed(0)
    model = gpt.CharGPTWorkload().build_model(n_layer=2, n_head=2, n_embd=32, block_size=32)
    model.eval()
    x = torch.randint(0, 256, (1, 64))
    changed = x.clone()
    changed[0, 10] = (x[0, 10] + 1) % 256  # a byte in the first chunk

    with torch.no_grad():
        before, after = model(x), model(changed)

    assert torch.equal(before[0, :10], after[0, :10])  # earlier positions: unchanged
    assert not torch.allclose(before[0, 10:32], after[0, 10:32])  # later in the chunk
    assert torch.equal(before[0, 32:], after[0, 32:])  # the next chunk: independent


def test_gpt_loss_crops_the_target_to_the_output(gpt: ModuleType) -> None:
    workload = gpt.CharGPTWorkload()
    output = torch.zeros(2, 8, gpt.VOCAB_SIZE)  # uniform logits for the last 8 positions
    target = torch.randint(0, 256, (2, 32))

    assert workload.loss(output, target).item() == pytest.approx(math.log(256))


@pytest.mark.slow
def test_gpt_learns_under_bf16_autocast(gpt: ModuleType) -> None:
    torch.manual_seed(0)
    workload = gpt.CharGPTWorkload(max_bytes=100_000)
    train, val = workload.datasets()
    model = workload.build_model(**_extreme_knobs(GPT_DIR, min))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3.0e-3)
    loader = DataLoader(train, batch_size=16, shuffle=True)
    for _, (x, y) in zip(range(15), loader, strict=False):
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = workload.loss(model(x), y)
        loss.backward()
        optimizer.step()

    model.eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        val_loss = workload.evaluate(
            model, DataLoader(Subset(val, range(16)), batch_size=8), torch.device("cpu")
        )
    assert math.isfinite(val_loss)
    assert val_loss < 4.0  # from ~5.5: the byte frequencies alone are worth that much


@pytest.mark.parametrize(
    ("knobs", "match"),
    [
        ({"n_head": 3, "n_embd": 64}, "n_embd=64 is not divisible by n_head=3"),
        ({"block_size": 48}, "block_size=48 must divide"),
        ({"n_layer": 0}, "n_layer must be >= 1"),
    ],
)
def test_gpt_refuses_invalid_knobs(gpt: ModuleType, knobs: dict[str, int], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        gpt.CharGPTWorkload().build_model(**knobs)


def test_datasets_unpickle_without_the_example_files(
    resnet: ModuleType, gpt: ModuleType, idx_dir: Path
) -> None:
    """DataLoader workers started by spawn or forkserver unpickle the datasets: their classes
    must be torch's, not ones from a file imported by path."""
    for workload in (resnet.ResNetWorkload(idx_dir), gpt.CharGPTWorkload(max_bytes=100_000)):
        for dataset in workload.datasets():
            assert type(dataset) is TensorDataset
            restored = pickle.loads(pickle.dumps(dataset))
            assert torch.equal(restored[5][0], dataset[5][0])


# --------------------------------------------------------------------------------------------
# End to end: three CPU trials through the public API


def _study(storage: str, name: str) -> optuna.Study:
    return optuna.load_study(study_name=name, storage=storage)


@pytest.mark.slow
def test_resnet_study_on_cpu(idx_dir: Path, tmp_path: Path) -> None:
    from autotune.core.config import load_run_config
    from autotune.study.api import run_study

    storage = f"sqlite:///{tmp_path}/s.db"
    config = load_run_config(
        [
            f"space={RESNET_DIR / 'space.yaml'}",
            "device=cpu",
            f"storage={storage}",
            "verify.rounds=0",
            f"workload_args.root={idx_dir}",
            "model.blocks=1",
            "model.width=[8, 16]",
            "model.stages=2",
            "batch_size=[32, 64]",
            "num_workers=0",
            "train.max_steps=20",
            "advanced.train.warmup_steps=2",
            "advanced.measure.windows=3",
            # Every trial trains to the end: this checks the workload, and a precision this
            # CPU emulates would otherwise stop as too_slow (tested in tests/study/search/test_study.py).
            "advanced.trial.min_throughput_vs_baseline=0",
        ]
    )

    result = run_study(config, n_trials=3)

    assert result.finished == 3
    assert result.pareto_trials
    study = _study(storage, result.study_name)
    assert study.metric_names == ["throughput_sps", "accuracy", "peak_memory_bytes"]
    trials = study.trials
    assert len(trials) == 3
    for t in trials:
        assert "failure" not in t.user_attrs, t.user_attrs.get("failure_detail")
        assert t.values is not None
        throughput, accuracy, _ = t.values
        assert throughput > 0
        assert 0.0 <= accuracy <= 1.0


@pytest.mark.slow
def test_char_gpt_study_on_cpu(tmp_path: Path) -> None:
    from autotune.core.config import load_run_config
    from autotune.study.api import run_study

    storage = f"sqlite:///{tmp_path}/s.db"
    config = load_run_config(
        [
            f"space={GPT_DIR / 'space.yaml'}",
            "device=cpu",
            f"storage={storage}",
            "verify.rounds=0",
            "workload_args.max_bytes=65536",  # 229 training windows, 25 validation windows
            "model.n_layer=1",
            "model.n_head=2",
            "model.n_embd=32",
            "model.block_size=[32, 64]",
            "batch_size=[16, 32]",
            "compile_mode=none",
            "num_workers=0",
            "train.max_steps=20",
            "advanced.train.warmup_steps=2",
            "advanced.measure.windows=3",
            # Every trial trains to the end: this checks the workload, and a precision this
            # CPU emulates would otherwise stop as too_slow (tested in tests/study/search/test_study.py).
            "advanced.trial.min_throughput_vs_baseline=0",
        ]
    )

    result = run_study(config, n_trials=3)

    assert result.finished == 3
    assert result.pareto_trials
    study = _study(storage, result.study_name)
    assert study.metric_names == ["throughput_sps", "val_loss", "peak_memory_bytes"]
    assert study.directions[1] == StudyDirection.MINIMIZE
    trials = study.trials
    assert len(trials) == 3
    for t in trials:
        assert "failure" not in t.user_attrs, t.user_attrs.get("failure_detail")
        assert t.values is not None
        throughput, val_loss, _ = t.values
        assert throughput > 0
        assert 0.0 < val_loss < 6.0


# --- the doors' examples: a short study each, on the CPU -------------------------------------


def _door_study(space: Path, tmp_path: Path, *overrides: str) -> Any:
    from autotune.core.config import load_run_config
    from autotune.study.api import prepare_run, run_study
    from autotune.study.baseline import space_tried

    storage = f"sqlite:///{tmp_path}/s.db"
    config = load_run_config(
        [
            f"space={space}",
            "device=cpu",
            f"storage={storage}",
            "verify.rounds=0",
            "train.max_steps=12",
            "advanced.train.warmup_steps=2",
            "advanced.measure.windows=3",
            "advanced.trial.min_throughput_vs_baseline=0",  # every trial trains to its end
            *overrides,
        ]
    )
    result = run_study(config, n_trials=3)
    study = _study(storage, result.study_name)
    # 3 trials, or fewer where the space as this machine runs it has fewer configurations
    # (hf_gpt2's batch x precision is 2 where the CPU's bf16 is screened out).
    tried_all = space_tried(prepare_run(config).space, study.trials)
    assert result.finished == 3 or tried_all is not None, result.finished
    for t in study.trials:
        assert "failure" not in t.user_attrs, t.user_attrs.get("failure_detail")
        assert t.values is not None and t.values[0] > 0
    return study


@pytest.mark.slow
def test_loop_cnn_study_on_cpu(tmp_path: Path) -> None:
    study = _door_study(
        EXAMPLES / "loop_cnn" / "space.yaml",
        tmp_path,
        "model.depth=2",
        "model.width=[8, 16]",
        "batch_size=[32, 64]",
        "precision=fp32",
        "compile_mode=none",
        "gpu_count=1",
        "num_workers=0",
    )
    assert study.metric_names == ["throughput_sps", "accuracy", "peak_memory_bytes"]
    assert all(0.0 <= t.values[1] <= 1.0 for t in study.trials)


@pytest.mark.slow
def test_hf_gpt2_study_on_cpu(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    study = _door_study(
        EXAMPLES / "hf_gpt2" / "space.yaml",
        tmp_path,
        "workload_args.max_bytes=32768",
        "model.n_layer=1",
        "model.n_embd=32",
        "baseline.n_layer=1",
        "baseline.n_embd=32",
        "batch_size=[8, 16]",
        "baseline.batch_size=16",
    )
    assert study.metric_names == ["throughput_sps", "eval_loss", "peak_memory_bytes"]
    assert study.directions[1] == StudyDirection.MINIMIZE
    assert all(0.0 < t.values[1] < 6.0 for t in study.trials)


@pytest.mark.slow
def test_lightning_mnist_study_on_cpu(tmp_path: Path) -> None:
    pytest.importorskip("lightning")
    study = _door_study(
        EXAMPLES / "lightning_mnist" / "space.yaml",
        tmp_path,
        "model.depth=2",
        "model.width=8",
        "baseline.depth=2",
        "baseline.width=8",
    )
    assert study.metric_names == ["throughput_sps", "val_acc", "peak_memory_bytes"]
    assert all(0.0 <= t.values[1] <= 1.0 for t in study.trials)


@pytest.mark.slow
def test_pytorch_mnist_study_on_cpu(tmp_path: Path) -> None:
    """pytorch/examples' mnist/main.py through the loop door: its argparse reads the space's
    argv, its own manual_seed is derived from each trial's seed."""
    study = _door_study(
        EXAMPLES / "pytorch_mnist" / "space.yaml",
        tmp_path,
        "batch_size=[64, 128]",
        "precision=fp32",
        "memory_format=contiguous",
    )
    assert study.metric_names == ["throughput_sps", "accuracy", "peak_memory_bytes"]
    assert all(0.0 <= t.values[1] <= 1.0 for t in study.trials)
    trained = [t for t in study.trials if "user_seeds" in t.user_attrs]
    assert trained and {t.user_attrs["user_seeds"] for t in trained} == {
        "torch.manual_seed(1): derived from the trial's seed"
    }
