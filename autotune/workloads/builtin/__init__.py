"""The built-in workloads: image classifiers (``cnn``, ``mlp``) on ``digits``, ``mnist``,
``fashion_mnist`` or ``synthetic`` data, written with the same protocol as a user's workload.

- :mod:`._classifier`: :class:`ImageClassifier`, the workload (``model.family: cnn | mlp``
  refers to it as ``autotune.workloads.builtin:ImageClassifier``).
- :mod:`.data`: the data sets (the MNIST test set ships in ``datasets/mnist``).
- :mod:`.networks`: the parametric ``cnn`` and ``mlp``.
"""

from __future__ import annotations

from autotune.workloads.builtin._classifier import ImageClassifier

__all__ = ["ImageClassifier"]
