"""The built-in workloads: image classifiers (``cnn``, ``mlp``) on ``digits``, ``mnist``,
``fashion_mnist`` or ``synthetic`` data, written with the same protocol as a user's workload.

- :mod:`._classifier`: :class:`ImageClassifier`, the workload (``model.family: cnn | mlp``
  refers to it as ``autotune.trial.workloads.builtin:ImageClassifier``).
- :mod:`.data`: the data sets (the MNIST test set ships in ``datasets/mnist``):
  :func:`load_dataset` gives one split, normalized, as a :class:`Dataset`.
- :mod:`.networks`: the parametric ``cnn`` and ``mlp``: :func:`build_model`.

The examples' own loops (``examples/loop_cnn``, ``examples/lightning_mnist``,
``examples/pytorch_mnist``) train the same model on the same data through this face.
"""

from __future__ import annotations

from autotune.trial.workloads.builtin._classifier import ImageClassifier
from autotune.trial.workloads.builtin.data import Dataset, load_dataset
from autotune.trial.workloads.builtin.networks import build_model

__all__ = ["Dataset", "ImageClassifier", "build_model", "load_dataset"]
