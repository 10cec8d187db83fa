"""A small ResNet on MNIST-format IDX files: an autotune workload.

The model follows He et al. (2016), "Deep Residual Learning for Image Recognition", scaled
down for 28x28 grey-scale digits: a 3x3 stem convolution at full resolution, ``stages``
stages of ``blocks`` residual BasicBlocks each (3x3 conv-BN-ReLU, 3x3 conv-BN, identity or
1x1 projection shortcut, ReLU), where every stage halves the resolution (28 -> 14 -> 7 -> 4
-> 2 pixels) and every stage after the first doubles the channels, then global average
pooling and a linear classifier.

The data are the IDX files of LeCun et al.'s MNIST distribution (or Fashion-MNIST, which uses
the same names): whatever of the training and test files lie in ``root`` (raw or ``.gz``) is
pooled, split with a fixed seed into training and validation sets, and standardized with the
training set's mean and standard deviation. Without a ``root`` it reads the MNIST test set
that ships with autotune (10,000 images; :func:`shipped_mnist_dir`). This module needs only
torch and numpy; importing it reads nothing.

Run it from the repository's root with::

    autotune run space=examples/resnet_mnist/space.yaml --trials 5 device=cpu

and add ``workload_args.root=/path/to/mnist`` for a directory of your own IDX files.
"""

from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import TensorDataset

__all__ = [
    "BasicBlock",
    "ResNet",
    "ResNetWorkload",
    "load_idx_dir",
    "read_idx",
    "shipped_mnist_dir",
]

#: (images, labels) file stems of the two MNIST splits; pooled when both are present.
IDX_SPLITS: tuple[tuple[str, str], ...] = (
    ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
)
#: IDX type codes (third byte of the magic number) and the big-endian dtypes they denote.
IDX_DTYPES: dict[int, str] = {
    0x08: ">u1",
    0x09: ">i1",
    0x0B: ">i2",
    0x0C: ">i4",
    0x0D: ">f4",
    0x0E: ">f8",
}
NUM_CLASSES = 10
SPLIT_SEED = 0  # the train/validation split is the same in every process


def read_idx(path: Path) -> np.ndarray:
    """Read one IDX file (raw, or gzip when the name ends in ``.gz``).

    The format: two zero bytes, a type code (0x08 = uint8, ...), the number of dimensions
    ``ndim``, then ``ndim`` big-endian uint32 sizes, then the values in C order.

    Args:
        path: the file.

    Returns:
        The array, in native byte order, with the shape the header gives.

    Raises:
        FileNotFoundError: when the file does not exist.
        ValueError: when the header is not IDX or the payload does not match it.
    """
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            blob = f.read()
    except (OSError, EOFError) as e:
        if isinstance(e, FileNotFoundError):
            raise
        raise ValueError(f"{path}: cannot read IDX file: {e}") from None
    if len(blob) < 4 or blob[0] != 0 or blob[1] != 0 or blob[2] not in IDX_DTYPES:
        raise ValueError(f"{path}: not an IDX file (bad magic number {blob[:4]!r})")
    ndim = blob[3]
    header = 4 + 4 * ndim
    if len(blob) < header:
        raise ValueError(f"{path}: truncated IDX header")
    shape = tuple(int(d) for d in np.frombuffer(blob, dtype=">u4", count=ndim, offset=4))
    dtype = np.dtype(IDX_DTYPES[blob[2]])
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(blob) - header != expected:
        raise ValueError(
            f"{path}: IDX payload is {len(blob) - header} bytes, "
            f"header says {expected} for shape {shape}"
        )
    data = np.frombuffer(blob, dtype=dtype, offset=header).reshape(shape)
    return data.astype(dtype.newbyteorder("="))


def _find(root: Path, stem: str) -> Path | None:
    """``root/stem`` or ``root/stem.gz``, whichever exists (raw first), else None."""
    for name in (stem, f"{stem}.gz"):
        if (root / name).is_file():
            return root / name
    return None


def shipped_mnist_dir() -> Path:
    """The directory of the MNIST test set that ships with autotune (the two ``t10k-*.gz``
    files autotune's own ``data=mnist`` reads), found without importing autotune: in the
    installed package, else beside this file in a clone of the repository."""
    inside = Path("trial", "workloads", "builtin", "datasets", "mnist")
    spec = importlib.util.find_spec("autotune")  # locates the package; runs none of it
    if spec is not None and spec.origin is not None:
        return Path(spec.origin).parent / inside
    return Path(__file__).resolve().parents[2] / "autotune" / inside


def load_idx_dir(root: Path) -> tuple[np.ndarray, np.ndarray]:
    """Pool every MNIST split present under ``root``.

    Args:
        root: directory holding ``train-images-idx3-ubyte`` / ``train-labels-idx1-ubyte``
            and/or ``t10k-images-idx3-ubyte`` / ``t10k-labels-idx1-ubyte`` (optionally .gz).

    Returns:
        ``(images, labels)``: uint8 ``(N, 28, 28)`` and int64 ``(N,)`` with labels in 0..9.

    Raises:
        FileNotFoundError: when ``root`` is missing or holds no complete split.
        ValueError: when a file is malformed or images and labels disagree.
    """
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no such directory (expected MNIST IDX files there)")
    images: list[np.ndarray] = []
    labels: list[np.ndarray] = []
    for image_stem, label_stem in IDX_SPLITS:
        image_path, label_path = _find(root, image_stem), _find(root, label_stem)
        if image_path is None and label_path is None:
            continue
        if image_path is None or label_path is None:
            missing = image_stem if image_path is None else label_stem
            raise FileNotFoundError(f"{root / missing}: missing (its partner file is present)")
        x, y = read_idx(image_path), read_idx(label_path)
        if x.ndim != 3 or x.shape[1:] != (28, 28) or x.dtype != np.uint8:
            raise ValueError(
                f"{image_path}: expected uint8 images (N, 28, 28), got {x.dtype} {x.shape}"
            )
        if y.shape != (len(x),):
            raise ValueError(f"{label_path}: {y.shape} labels for {len(x)} images")
        if y.size and (y.min() < 0 or y.max() >= NUM_CLASSES):
            raise ValueError(f"{label_path}: labels outside 0..{NUM_CLASSES - 1}")
        images.append(x)
        labels.append(y.astype(np.int64))
    if not images:
        names = ", ".join(f"{i}[.gz] + {lab}[.gz]" for i, lab in IDX_SPLITS)
        raise FileNotFoundError(f"{root}: no MNIST IDX files (looked for {names})")
    return np.concatenate(images), np.concatenate(labels)


class BasicBlock(nn.Module):
    """Two 3x3 conv-BN layers with a residual connection (He et al. 2016, Fig. 2).

    With ``stride=2`` or a change of channels, the shortcut is a 1x1 strided convolution plus
    BatchNorm (option B of the paper).
    """

    def __init__(self, in_channels: int, out_channels: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, 1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, C_in, H, W)`` -> ``(B, C_out, H / stride, W / stride)``."""
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    """Stem, ``stages`` stages of ``blocks`` BasicBlocks, global average pooling, linear head.

    Stage ``i`` has ``width * 2**i`` channels and starts with a stride-2 block, so a 28x28
    input is 14, 7, 4, 2 pixels wide in stages 0..3 (downsampling from the first stage keeps
    the receptive field large enough for global pooling, and a CPU trial short).
    """

    def __init__(
        self, blocks: int, width: int, stages: int, in_channels: int = 1, num_classes: int = 10
    ) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, width, 3, padding=1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
        )
        layers: list[nn.Module] = []
        channels = width
        for stage in range(stages):
            out_channels = width * 2**stage
            for block in range(blocks):
                stride = 2 if block == 0 else 1
                layers.append(BasicBlock(channels, out_channels, stride))
                channels = out_channels
        self.layers = nn.Sequential(*layers)
        self.head = nn.Linear(channels, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Images ``(B, 1, 28, 28)`` -> logits ``(B, num_classes)``."""
        x = self.layers(self.stem(x))  # (B, C, H', W')
        return self.head(x.mean(dim=(2, 3)))  # (B, C) -> (B, num_classes)


class ResNetWorkload:
    """The autotune workload: a :class:`ResNet` on the MNIST IDX files under ``root``.

    Knobs (the ``model:`` keys of ``space.yaml``): ``blocks`` per stage, base ``width``
    (channels of the first stage), and ``stages``. The metric is autotune's default,
    top-1 validation accuracy (maximized).

    Args:
        root: directory holding the IDX files (see :func:`load_idx_dir`); None: the MNIST test
            set that ships with autotune (:func:`shipped_mnist_dir`).
        val_fraction: share of the pooled images held out for validation, in (0, 1).
    """

    metric_name = "accuracy"
    metric_direction = "maximize"

    def __init__(self, root: str | Path | None = None, val_fraction: float = 0.2) -> None:
        if not 0 < val_fraction < 1:
            raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
        self.root = shipped_mnist_dir() if root is None else Path(root).expanduser()
        self.val_fraction = val_fraction

    def build_model(self, blocks: int = 1, width: int = 16, stages: int = 3) -> ResNet:
        """A fresh :class:`ResNet` (1 input channel, 10 classes).

        Raises:
            ValueError: when a knob is below 1.
        """
        for name, value in (("blocks", blocks), ("width", width), ("stages", stages)):
            if int(value) < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        return ResNet(blocks=int(blocks), width=int(width), stages=int(stages))

    def datasets(self) -> tuple[TensorDataset, TensorDataset]:
        """``(train, validation)``; items are ``(image (1, 28, 28) float32, label int64)``.

        The split is a seeded permutation (the same in every process); both sets are
        standardized with the training images' mean and standard deviation.

        Raises:
            FileNotFoundError, ValueError: see :func:`load_idx_dir`; also when the files
                hold too few images for both sets.
        """
        images, labels = load_idx_dir(self.root)
        n_val = round(len(images) * self.val_fraction)
        if n_val < 1 or n_val >= len(images):
            raise ValueError(
                f"{self.root}: {len(images)} images cannot be split with "
                f"val_fraction={self.val_fraction}"
            )
        order = np.random.default_rng(SPLIT_SEED).permutation(len(images))
        val_idx, train_idx = order[:n_val], order[n_val:]
        x = torch.from_numpy(images).unsqueeze(1).float().div_(255.0)  # (N, 1, 28, 28) in [0, 1]
        y = torch.from_numpy(labels)  # (N,)
        train_x = x[train_idx]
        mean, std = float(train_x.mean()), float(train_x.std()) or 1.0
        train = TensorDataset((train_x - mean) / std, y[train_idx])
        val = TensorDataset((x[val_idx] - mean) / std, y[val_idx])
        return train, val
