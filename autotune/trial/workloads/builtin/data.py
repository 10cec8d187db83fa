"""Data sets: ``digits`` (bundled with scikit-learn), ``mnist`` (the 10,000-image MNIST test
set shipped in ``autotune/trial/workloads/builtin/datasets/mnist``, or the IDX files under a
directory the user names), ``fashion_mnist`` (IDX files under a directory the user names), and
``synthetic`` (random tensors, throughput probes only).

Nothing is downloaded. Every data set is split into train and validation with a fixed seed, so
all trials of a study see the same split and their accuracies are comparable.
"""

from __future__ import annotations

import gzip
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from autotune.core.config import DataSettings
from autotune.core.exceptions import DataError

__all__ = ["SHIPPED_MNIST_DIR", "SHIPPED_MNIST_SHA256", "Dataset", "load_dataset", "read_idx"]

#: Seed of the train/validation split: fixed, so every trial of every study sees the same split.
SPLIT_SEED = 0
#: File stems of the IDX sets; Fashion-MNIST uses the same names as MNIST.
_IDX_SPLITS = (
    ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
)
#: The MNIST test set shipped in the package (10,000 images; CC BY-SA 3.0, see the README
#: there): ``data=mnist`` reads it when no ``data.root`` is given.
SHIPPED_MNIST_DIR = Path(__file__).resolve().parent / "datasets" / "mnist"
#: sha256 of each shipped file, checked before it is read (a damaged installation is refused).
SHIPPED_MNIST_SHA256 = {
    "t10k-images-idx3-ubyte.gz": "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
    "t10k-labels-idx1-ubyte.gz": "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
}
_IDX_DTYPES: dict[int, np.dtype[Any]] = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


@dataclass(frozen=True)
class Dataset:
    """A split, normalized data set held in memory as CPU tensors.

    Attributes:
        train_x: ``(N_train, C, H, W)`` float32, standardized with the training mean and std.
        train_y: ``(N_train,)`` int64 class labels.
        val_x: ``(N_val, C, H, W)`` float32, same normalization.
        val_y: ``(N_val,)`` int64.
        num_classes: number of classes.
        name: the data set's name.
    """

    name: str
    train_x: torch.Tensor
    train_y: torch.Tensor
    val_x: torch.Tensor
    val_y: torch.Tensor
    num_classes: int

    @property
    def input_shape(self) -> tuple[int, int, int]:
        """``(C, H, W)`` of one sample."""
        c, h, w = self.train_x.shape[1:]
        return int(c), int(h), int(w)


def read_idx(path: Path) -> np.ndarray:
    """Read one IDX file (raw or gzip), as in LeCun et al.'s MNIST distribution format.

    The header is two zero bytes, a type byte (0x08 = uint8, ...), a dimension count, then one
    big-endian uint32 per dimension.

    Raises:
        DataError: when the file is unreadable, truncated, or its header is not IDX.
    """
    try:
        with path.open("rb") as f:
            magic = f.read(2)
            f.seek(0)
            opener = gzip.open if magic == b"\x1f\x8b" else open
            with opener(path, "rb") as g:
                blob = g.read()
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        raise DataError(f"{path}: cannot read IDX file: {e}") from None
    if len(blob) < 4 or blob[0] != 0 or blob[1] != 0 or blob[2] not in _IDX_DTYPES:
        raise DataError(f"{path}: not an IDX file (bad magic number)")
    ndim = blob[3]
    header = 4 + 4 * ndim
    if ndim == 0 or len(blob) < header:
        raise DataError(f"{path}: truncated IDX header")
    shape = tuple(int.from_bytes(blob[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    dtype = _IDX_DTYPES[blob[2]]
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(blob) - header != expected:
        raise DataError(
            f"{path}: IDX payload is {len(blob) - header} bytes, header says {expected} for shape {shape}"
        )
    return np.frombuffer(blob, dtype=dtype, offset=header).reshape(shape)


def _find(root: Path, stem: str) -> Path | None:
    for name in (stem, stem + ".gz"):
        if (root / name).is_file():
            return root / name
    return None


def _load_idx_dir(root: Path, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Pool every IDX split present under ``root``: images ``(N, 1, 28, 28)`` uint8, labels."""
    if not root.is_dir():
        raise DataError(f"data.root={root}: no such directory (data={name} reads IDX files there)")
    images, labels = [], []
    for image_stem, label_stem in _IDX_SPLITS:
        image_path, label_path = _find(root, image_stem), _find(root, label_stem)
        if image_path is None and label_path is None:
            continue
        if image_path is None or label_path is None:
            missing = image_stem if image_path is None else label_stem
            raise DataError(f"data.root={root}: {missing}[.gz] is missing beside its pair")
        x, y = read_idx(image_path), read_idx(label_path)
        if x.ndim != 3 or y.ndim != 1 or len(x) != len(y):
            raise DataError(
                f"{image_path}: expected images (N, H, W) and labels (N,), got {x.shape} and {y.shape}"
            )
        images.append(x)
        labels.append(y)
    if not images:
        raise DataError(
            f"data.root={root}: no IDX files found (expected {_IDX_SPLITS[1][0]}[.gz] or "
            f"{_IDX_SPLITS[0][0]}[.gz] with their labels)"
        )
    return np.concatenate(images)[:, None], np.concatenate(labels)


def _load_shipped_mnist(root: Path) -> tuple[np.ndarray, np.ndarray]:
    """The shipped MNIST test set under ``root``, each file checked against
    :data:`SHIPPED_MNIST_SHA256` first: images ``(10000, 1, 28, 28)`` uint8, labels."""
    for name, expected in SHIPPED_MNIST_SHA256.items():
        path = root / name
        try:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError as e:
            raise DataError(
                f"{path}: the shipped MNIST file cannot be read ({e.strerror or e}); reinstall "
                "autotune or pass data.root=DIR"
            ) from None
        if digest != expected:
            raise DataError(
                f"{path}: sha256 {digest} is not the shipped MNIST file's {expected}; reinstall "
                "autotune or pass data.root=DIR"
            )
    images, labels = _IDX_SPLITS[1]
    x, y = read_idx(root / f"{images}.gz"), read_idx(root / f"{labels}.gz")
    return x[:, None], y


def _load_arrays(settings: DataSettings) -> tuple[np.ndarray, np.ndarray]:
    if settings.name == "digits":
        from sklearn.datasets import load_digits  # bundled with scikit-learn; no download

        digits = load_digits()
        return digits.images[:, None].astype(np.float32) / 16.0, digits.target
    if settings.name in ("mnist", "fashion_mnist"):
        if settings.root is not None:
            x, y = _load_idx_dir(Path(settings.root).expanduser(), settings.name)
        elif settings.name == "mnist":
            x, y = _load_shipped_mnist(SHIPPED_MNIST_DIR)
        else:
            raise DataError(
                f"data={settings.name} needs data.root=DIR (a directory of IDX files; only "
                "the MNIST test set ships with autotune)"
            )
        return x.astype(np.float32) / 255.0, y
    if settings.name == "synthetic":
        rng = np.random.default_rng(SPLIT_SEED)
        n = settings.synthetic_samples
        return rng.random((n, 1, 28, 28), dtype=np.float32), rng.integers(0, 10, n)
    raise DataError(f"data={settings.name}: unknown data set")  # pragma: no cover (validated)


def load_dataset(settings: DataSettings) -> Dataset:
    """Load, split and normalize a data set.

    The split is a seeded shuffle (``SPLIT_SEED``) with ``val_fraction`` held out; inputs are
    standardized with the training split's mean and std.

    ``mnist`` without ``data.root`` is the shipped MNIST test set: 10,000 images, so 8,000 /
    2,000 at the default ``val_fraction`` of 0.2. With ``data.root``, every IDX split found
    there is pooled (the full 70,000 for MNIST's four files).

    Raises:
        DataError: missing directory or files, corrupt IDX, a shipped file whose sha256 does
            not match, ``fashion_mnist`` without ``data.root``, or a split with an empty side.
    """
    x, y = _load_arrays(settings)
    n = len(x)
    n_val = round(n * settings.val_fraction)
    if n_val < 1 or n - n_val < 1:
        raise DataError(
            f"data={settings.name}: {n} samples cannot be split with val_fraction={settings.val_fraction}"
        )
    order = np.random.default_rng(SPLIT_SEED).permutation(n)
    val_idx, train_idx = order[:n_val], order[n_val:]
    train_x = torch.from_numpy(np.ascontiguousarray(x[train_idx], dtype=np.float32))
    val_x = torch.from_numpy(np.ascontiguousarray(x[val_idx], dtype=np.float32))
    mean, std = train_x.mean(), train_x.std().clamp_min(1e-6)
    labels = torch.from_numpy(np.asarray(y, dtype=np.int64))
    return Dataset(
        name=settings.name,
        train_x=(train_x - mean) / std,
        train_y=labels[train_idx],
        val_x=(val_x - mean) / std,
        val_y=labels[val_idx],
        num_classes=int(labels.max()) + 1 if settings.name != "synthetic" else 10,
    )
