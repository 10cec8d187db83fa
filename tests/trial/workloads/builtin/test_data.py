"""Data sets and the IDX reader (autotune/trial/workloads/builtin/data.py)."""

from __future__ import annotations

import gzip
import hashlib
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import autotune.trial.workloads.builtin.data
from autotune.core.config import DataSettings
from autotune.core.exceptions import DataError
from autotune.trial.workloads.builtin.data import (
    SHIPPED_MNIST_DIR,
    SHIPPED_MNIST_SHA256,
    load_dataset,
    read_idx,
)

#: Label counts of the MNIST test set (from its README).
MNIST_TEST_LABEL_COUNTS = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]


def _idx_bytes(array: np.ndarray) -> bytes:
    """Encode a uint8 array in IDX: two zero bytes, type 0x08, ndim, big-endian dims, data."""
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(
        int(d).to_bytes(4, "big") for d in array.shape
    )
    return header + array.astype(np.uint8).tobytes()


def _write_idx_pair(root: Path, n: int, *, gz: bool = False, stem: str = "t10k") -> None:
    """Write ``n`` random 28x28 images and labels 0..9 as an IDX pair under ``root``."""
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
    labels = (np.arange(n) % 10).astype(np.uint8)
    for name, array in (
        (f"{stem}-images-idx3-ubyte", images),
        (f"{stem}-labels-idx1-ubyte", labels),
    ):
        blob = _idx_bytes(array)
        if gz:
            (root / f"{name}.gz").write_bytes(gzip.compress(blob))
        else:
            (root / name).write_bytes(blob)


# --------------------------------------------------------------------------------------------
# digits and synthetic


def test_digits_split_sizes_and_shapes() -> None:
    data = load_dataset(DataSettings(name="digits"))

    # 1,797 digits; round(1797 * 0.2) = 359 held out.
    assert data.name == "digits"
    assert data.train_x.shape == (1438, 1, 8, 8)
    assert data.val_x.shape == (359, 1, 8, 8)
    assert data.train_y.shape == (1438,)
    assert data.val_y.shape == (359,)
    assert data.input_shape == (1, 8, 8)
    assert data.num_classes == 10
    assert data.train_x.dtype == torch.float32
    assert data.train_y.dtype == torch.int64


def test_digits_are_standardized_with_training_statistics() -> None:
    data = load_dataset(DataSettings(name="digits"))

    assert float(data.train_x.mean()) == pytest.approx(0.0, abs=1e-5)
    assert float(data.train_x.std()) == pytest.approx(1.0, abs=1e-4)
    # The validation split uses the training mean and std: close to, but not exactly, 0 and 1.
    assert abs(float(data.val_x.mean())) < 0.1
    assert float(data.val_x.mean()) != pytest.approx(0.0, abs=1e-6)


def test_split_is_fixed_and_a_partition_of_the_data_set() -> None:
    from sklearn.datasets import load_digits

    first = load_dataset(DataSettings(name="digits"))
    second = load_dataset(DataSettings(name="digits"))
    assert torch.equal(first.train_x, second.train_x)
    assert torch.equal(first.val_y, second.val_y)

    # Undo the standardization (an affine map; raw pixels are 0..16 and both ends occur in
    # the training split), then compare the rows with scikit-learn's: every sample lands in
    # exactly one side, with its label.
    lo, hi = first.train_x.min(), first.train_x.max()
    pixels = torch.cat([first.train_x, first.val_x]).flatten(1)
    raw = torch.round((pixels - lo) / (hi - lo) * 16).to(torch.int64)
    labels = torch.cat([first.train_y, first.val_y])
    ours = sorted(zip(map(tuple, raw.tolist()), labels.tolist(), strict=True))
    digits = load_digits()
    theirs = sorted(
        zip(map(tuple, digits.data.astype(np.int64).tolist()), digits.target.tolist(), strict=True)
    )
    assert ours == theirs


def test_val_fraction_sets_the_split() -> None:
    data = load_dataset(DataSettings(name="digits", val_fraction=0.5))
    assert (len(data.train_x), len(data.val_x)) == (899, 898)  # round(898.5) = 898 held out


def test_synthetic_shape() -> None:
    data = load_dataset(DataSettings(name="synthetic", synthetic_samples=100))

    assert data.train_x.shape == (80, 1, 28, 28)
    assert data.val_x.shape == (20, 1, 28, 28)
    assert data.input_shape == (1, 28, 28)
    assert data.num_classes == 10
    assert int(data.train_y.min()) >= 0
    assert int(data.train_y.max()) <= 9


def test_split_with_an_empty_side_is_refused() -> None:
    with pytest.raises(DataError, match=r"16 samples cannot be split with val_fraction=0\.01"):
        load_dataset(DataSettings(name="synthetic", synthetic_samples=16, val_fraction=0.01))


# --------------------------------------------------------------------------------------------
# IDX files


def test_read_idx_raw_and_gzip_agree(tmp_path: Path) -> None:
    array = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    (tmp_path / "raw").write_bytes(_idx_bytes(array))
    (tmp_path / "packed.gz").write_bytes(gzip.compress(_idx_bytes(array)))

    np.testing.assert_array_equal(read_idx(tmp_path / "raw"), array)
    np.testing.assert_array_equal(read_idx(tmp_path / "packed.gz"), array)


def test_read_idx_big_endian_int32(tmp_path: Path) -> None:
    values = np.array([1, -2, 70000], dtype=">i4")
    path = tmp_path / "ints"
    path.write_bytes(bytes([0, 0, 0x0C, 1]) + (3).to_bytes(4, "big") + values.tobytes())

    assert read_idx(path).tolist() == [1, -2, 70000]


def test_bad_magic_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "train-images-idx3-ubyte"
    path.write_bytes(b"\x50\x4b\x03\x04" + bytes(100))  # a zip header, not IDX

    with pytest.raises(DataError) as err:
        read_idx(path)

    assert str(err.value) == f"{path}: not an IDX file (bad magic number)"


def test_unknown_type_byte_is_bad_magic(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(bytes([0, 0, 0x07, 1]) + (1).to_bytes(4, "big") + b"\x00")

    with pytest.raises(DataError, match="bad magic number"):
        read_idx(path)


def test_truncated_payload_names_the_file_and_sizes(tmp_path: Path) -> None:
    path = tmp_path / "t10k-images-idx3-ubyte"
    blob = _idx_bytes(np.zeros((10, 28, 28), dtype=np.uint8))
    path.write_bytes(blob[: len(blob) - 100])

    with pytest.raises(DataError) as err:
        read_idx(path)

    assert str(err.value) == (
        f"{path}: IDX payload is 7740 bytes, header says 7840 for shape (10, 28, 28)"
    )


def test_truncated_header_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "t10k-labels-idx1-ubyte"
    path.write_bytes(bytes([0, 0, 0x08, 3, 0, 0]))

    with pytest.raises(DataError) as err:
        read_idx(path)

    assert str(err.value) == f"{path}: truncated IDX header"


def test_truncated_gzip_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "t10k-images-idx3-ubyte.gz"
    packed = gzip.compress(_idx_bytes(np.ones((50, 28, 28), dtype=np.uint8)))
    path.write_bytes(packed[: len(packed) // 2])

    with pytest.raises(DataError) as err:
        read_idx(path)

    assert str(err.value).startswith(f"{path}: cannot read IDX file")


def test_idx_directory_loads_and_splits(tmp_path: Path) -> None:
    _write_idx_pair(tmp_path, 50, gz=True)

    data = load_dataset(DataSettings(name="fashion_mnist", root=str(tmp_path)))

    assert data.train_x.shape == (40, 1, 28, 28)
    assert data.val_x.shape == (10, 1, 28, 28)
    assert data.num_classes == 10


def test_idx_directory_pools_train_and_test_files(tmp_path: Path) -> None:
    _write_idx_pair(tmp_path, 30, stem="train")
    _write_idx_pair(tmp_path, 20, stem="t10k")

    data = load_dataset(DataSettings(name="mnist", root=str(tmp_path)))

    assert len(data.train_x) + len(data.val_x) == 50


def test_missing_directory_names_it(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"

    with pytest.raises(DataError) as err:
        load_dataset(DataSettings(name="mnist", root=str(missing)))

    assert str(err.value) == (
        f"data.root={missing}: no such directory (data=mnist reads IDX files there)"
    )


def test_directory_without_idx_files(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=f"data.root={tmp_path}: no IDX files found"):
        load_dataset(DataSettings(name="mnist", root=str(tmp_path)))


def test_labels_missing_beside_images(tmp_path: Path) -> None:
    _write_idx_pair(tmp_path, 10)
    (tmp_path / "t10k-labels-idx1-ubyte").unlink()

    with pytest.raises(DataError) as err:
        load_dataset(DataSettings(name="mnist", root=str(tmp_path)))

    assert str(err.value) == (
        f"data.root={tmp_path}: t10k-labels-idx1-ubyte[.gz] is missing beside its pair"
    )


def test_image_and_label_counts_must_match(tmp_path: Path) -> None:
    _write_idx_pair(tmp_path, 10)
    (tmp_path / "t10k-labels-idx1-ubyte").write_bytes(_idx_bytes(np.zeros(9, dtype=np.uint8)))

    with pytest.raises(DataError) as err:
        load_dataset(DataSettings(name="mnist", root=str(tmp_path)))

    assert str(err.value).startswith(f"{tmp_path / 't10k-images-idx3-ubyte'}: expected images")


def test_corrupt_file_in_directory_names_the_file(tmp_path: Path) -> None:
    _write_idx_pair(tmp_path, 10)
    images = tmp_path / "t10k-images-idx3-ubyte"
    images.write_bytes(images.read_bytes()[:-1])

    with pytest.raises(DataError, match=f"^{images}: IDX payload is"):
        load_dataset(DataSettings(name="mnist", root=str(tmp_path)))


def test_fashion_mnist_needs_a_root() -> None:
    # Only the MNIST test set ships with autotune; Fashion-MNIST must be given.
    with pytest.raises(DataError) as err:
        load_dataset(DataSettings(name="fashion_mnist"))

    assert str(err.value) == (
        "data=fashion_mnist needs data.root=DIR (a directory of IDX files; only the MNIST "
        "test set ships with autotune)"
    )


# --------------------------------------------------------------------------------------------
# The MNIST test set shipped in the package (data=mnist without data.root)


def test_shipped_mnist_files_are_in_the_package() -> None:
    assert (
        Path(autotune.trial.workloads.builtin.data.__file__).parent / "datasets" / "mnist"
        == SHIPPED_MNIST_DIR
    )
    for name in SHIPPED_MNIST_SHA256:
        assert (SHIPPED_MNIST_DIR / name).is_file(), name
    assert "CC BY-SA 3.0" in (SHIPPED_MNIST_DIR / "README.md").read_text(encoding="utf-8")


def test_mnist_without_a_root_loads_the_shipped_test_set() -> None:
    data = load_dataset(DataSettings(name="mnist"))

    # 10,000 images; round(10000 * 0.2) = 2,000 held out.
    assert data.name == "mnist"
    assert data.train_x.shape == (8000, 1, 28, 28)
    assert data.val_x.shape == (2000, 1, 28, 28)
    assert data.train_y.shape == (8000,)
    assert data.val_y.shape == (2000,)
    assert data.num_classes == 10
    counts = torch.bincount(torch.cat([data.train_y, data.val_y]), minlength=10)
    assert counts.tolist() == MNIST_TEST_LABEL_COUNTS
    assert float(data.train_x.mean()) == pytest.approx(0.0, abs=1e-4)


def test_shipped_mnist_is_split_as_the_same_files_under_a_root(mnist_dir: Path) -> None:
    shipped = load_dataset(DataSettings(name="mnist"))
    rooted = load_dataset(DataSettings(name="mnist", root=str(mnist_dir)))

    assert torch.equal(shipped.train_x, rooted.train_x)
    assert torch.equal(shipped.val_y, rooted.val_y)


def test_shipped_mnist_with_another_sha256_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in SHIPPED_MNIST_SHA256:
        shutil.copyfile(SHIPPED_MNIST_DIR / name, tmp_path / name)
    labels = tmp_path / "t10k-labels-idx1-ubyte.gz"
    blob = bytearray(labels.read_bytes())
    blob[-9] ^= 0xFF  # a damaged byte (gzip's CRC would catch it later, the digest first)
    labels.write_bytes(bytes(blob))
    monkeypatch.setattr(autotune.trial.workloads.builtin.data, "SHIPPED_MNIST_DIR", tmp_path)

    with pytest.raises(DataError) as err:
        load_dataset(DataSettings(name="mnist"))

    digest = hashlib.sha256(bytes(blob)).hexdigest()
    assert str(err.value) == (
        f"{labels}: sha256 {digest} is not the shipped MNIST file's "
        f"{SHIPPED_MNIST_SHA256[labels.name]}; reinstall autotune or pass data.root=DIR"
    )


def test_shipped_mnist_file_missing_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(autotune.trial.workloads.builtin.data, "SHIPPED_MNIST_DIR", tmp_path)

    with pytest.raises(DataError) as err:
        load_dataset(DataSettings(name="mnist"))

    assert str(err.value) == (
        f"{tmp_path / 't10k-images-idx3-ubyte.gz'}: the shipped MNIST file cannot be read "
        "(No such file or directory); reinstall autotune or pass data.root=DIR"
    )


# --------------------------------------------------------------------------------------------
# The real MNIST test set


def test_read_idx_on_the_real_mnist_test_set(mnist_dir: Path) -> None:
    images = read_idx(mnist_dir / "t10k-images-idx3-ubyte.gz")
    labels = read_idx(mnist_dir / "t10k-labels-idx1-ubyte.gz")

    assert images.shape == (10000, 28, 28)
    assert images.dtype == np.uint8
    assert int(images.max()) == 255
    assert labels.shape == (10000,)
    assert np.bincount(labels).tolist() == MNIST_TEST_LABEL_COUNTS


def test_load_dataset_on_the_real_mnist_test_set(mnist_dir: Path) -> None:
    data = load_dataset(DataSettings(name="mnist", root=str(mnist_dir)))

    assert data.train_x.shape == (8000, 1, 28, 28)
    assert data.val_x.shape == (2000, 1, 28, 28)
    assert data.num_classes == 10
    counts = torch.bincount(torch.cat([data.train_y, data.val_y]), minlength=10)
    assert counts.tolist() == MNIST_TEST_LABEL_COUNTS
    assert float(data.train_x.mean()) == pytest.approx(0.0, abs=1e-4)
    assert float(data.train_x.std()) == pytest.approx(1.0, abs=1e-3)
