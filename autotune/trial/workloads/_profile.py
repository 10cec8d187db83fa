"""A workload's model traced for the memory estimate: the workload side builds the model and
takes its samples; :func:`autotune.core.flops.profile_model` traces what it is handed."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

from autotune.core.config import WorkloadSpec
from autotune.core.flops import ModelProfile, profile_model
from autotune.trial.workloads._loader import load_workload

__all__ = ["profile_workload"]


def profile_workload(
    spec: WorkloadSpec,
    knobs: Mapping[str, Any],
    precision: str,
    blocks: tuple[str, ...] = (),
) -> ModelProfile:
    """The :class:`~autotune.core.flops.ModelProfile` of a workload's model at ``knobs``: its
    ``build_model(**knobs)`` traced with its training set's first 4 samples and its loss
    (:func:`autotune.core.flops.profile_model`).

    Cached per process (milliseconds per model of the shipped spaces); the workload is
    imported and its ``datasets()`` called once per process.

    Args:
        spec: the workload.
        knobs: its model knobs (``build_model(**knobs)``).
        precision: the trial's precision.
        blocks: module class names of the model's blocks, traced again checkpointed
            (:func:`autotune.core.flops.profile_model`).

    Raises:
        WorkloadError: the workload cannot be loaded.
        Exception: whatever the workload's model or data raise.
    """
    return _profile_cached(
        spec.model_dump_json(), json.dumps(dict(knobs), sort_keys=True), precision, blocks
    )


@functools.lru_cache(maxsize=512)
def _profile_cached(
    spec_json: str, knobs_json: str, precision: str, blocks: tuple[str, ...]
) -> ModelProfile:
    workload = load_workload(WorkloadSpec.model_validate_json(spec_json))
    train, _ = workload.datasets()
    size = len(train)  # type: ignore[arg-type]
    samples = [train[i % size] for i in range(4)]
    knobs = json.loads(knobs_json)
    return profile_model(
        lambda: workload.build_model(knobs), samples, workload.loss, precision, blocks
    )
