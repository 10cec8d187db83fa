"""Classes of change and their evidence: what a candidate changes against the baseline, and
the paired K-step equivalence check that measures it.

Evidence follows the math. A candidate that keeps the baseline's math key
(:func:`autotune.core.config.math_key`: the same model, global batch, precision and training
settings) changes only how the computation runs (memory format, compile mode, DataLoader
workers, ...). It is judged on seconds of timed steps plus a measured check, and inherits the
baseline's accuracy with that check; only a change of numerics, dynamics or model pays for
learning evidence (a trained budget).

The check. Every workload-door trial trains with the study's seed, so its first K optimizer
steps start from the same initial weights and take the same batches as the baseline's; it
records their training losses (``advanced.measure.check_steps``, float64, ``check_losses``).
The floor is the same record of the baseline's *float64 twin* (its model, optimizer state and
inputs in float64, under its own autocast), run as the study's discarded warm-up run: how far
the baseline's own arithmetic is from exact, step by step. A candidate is

- ``identical`` when its K losses equal the baseline's bit for bit (DataLoader workers,
  pinning);
- ``same_computation`` when its first-step loss (the same weights and batch: the forward
  pass's arithmetic alone) and its K-step trajectory stay within ``check_margin`` times the
  twin's divergence from the baseline (another kernel or reduction order: channels_last,
  torch.compile, a fused optimizer);
- beyond that it has *diverged* and falls to ``numerics``: it is trained and evaluated in
  full, and its record says why.

The trajectory's divergence grows with the steps (training amplifies any rounding difference
chaotically: Summers & Dinneen, "Nondeterminism and Instability in Neural Network
Optimization", ICML 2021, found one flipped bit of the initial weights as consequential as a
new seed by the end of training), which is why the first step carries the sharpest test and the
trajectory's bound is relative to the twin's own trajectory. Measured on the shipped MNIST CNN
(fp32, AdamW, 2-core Xeon; docs/research/evidence.md): first-step divergence, relative to the
baseline's loss: the float64 twin 8e-8, compile 0, DataLoader workers 0 (identical),
channels_last 2e-6, bf16 2e-4; learning rate x10 3e-1 by step 5.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "ACCURACY_SOURCES",
    "EVIDENCE_CLASSES",
    "FLOAT32_EPS",
    "INHERITING_CLASSES",
    "SOURCE_FLOOR_MARGIN",
    "AccuracySource",
    "CheckFloor",
    "EquivalenceCheck",
    "EvidenceClass",
    "check_equivalence",
    "check_floor",
    "class_by_knobs",
    "evidence_text",
    "relative_divergence",
    "source_floor",
]

#: What a candidate changes against the baseline, from the weakest change to the strongest.
EvidenceClass = Literal[
    "baseline", "identical", "same_computation", "numerics", "dynamics", "model"
]
#: The classes in that order.
EVIDENCE_CLASSES: tuple[EvidenceClass, ...] = (
    "baseline",
    "identical",
    "same_computation",
    "numerics",
    "dynamics",
    "model",
)
#: The classes whose accuracy is the baseline's, inherited with their check.
INHERITING_CLASSES: tuple[EvidenceClass, ...] = ("identical", "same_computation")
#: Where a trial's accuracy comes from: ``measured`` (it trained the budget and was
#: evaluated), ``inherited`` (the same math as a measured trial, with a passed check), or
#: ``inherited_unchecked`` (the same math key, no check recorded: a door without one).
AccuracySource = Literal["measured", "inherited", "inherited_unchecked"]
ACCURACY_SOURCES: tuple[AccuracySource, ...] = ("measured", "inherited", "inherited_unchecked")
#: The unit roundoff of float32 (2**-23, IEEE 754 binary32's machine epsilon): the floor's
#: least value, so that a twin that happens to agree exactly does not make it 0.
FLOAT32_EPS = 2.0**-23


def relative_divergence(candidate: Sequence[float], reference: Sequence[float]) -> list[float]:
    """Step by step ``|candidate - reference| / |reference|`` over the steps both have (a
    reference loss of 0 divides by 1: an absolute difference).

    Args:
        candidate: losses per step, in order.
        reference: losses per step of the run compared with, in order.

    Returns:
        One relative divergence per common step; ``inf`` where either loss is not finite
        (unless both are the same non-finite value).
    """
    out: list[float] = []
    for c, r in zip(candidate, reference, strict=False):
        if c == r or (math.isnan(c) and math.isnan(r)):
            out.append(0.0)
        elif not (math.isfinite(c) and math.isfinite(r)):
            out.append(math.inf)
        else:
            out.append(abs(c - r) / (abs(r) or 1.0))
    return out


@dataclass(frozen=True)
class CheckFloor:
    """The floating-point floor of the paired check: how far the baseline's float64 twin
    moved from the baseline.

    Attributes:
        first: the twin's relative divergence at the first step (at least
            :data:`FLOAT32_EPS`).
        trajectory: its largest relative divergence over the checked steps (at least
            ``first``).
        source: ``float64 twin``, or why the float32 epsilon stands in (the twin failed, or
            recorded no losses); or the source trial whose distance from the twin it is
            (:func:`source_floor`).
        margin: the multiple of this floor a check allows where the floor sets its own
            (:data:`SOURCE_FLOOR_MARGIN`); None: the caller's (``check_margin``).
    """

    first: float
    trajectory: float
    source: str
    margin: float | None = None


def check_floor(
    baseline: Sequence[float], twin: Sequence[float] | None, why_no_twin: str = ""
) -> CheckFloor:
    """The floor from the baseline's check losses and its float64 twin's.

    Args:
        baseline: the baseline's losses of the first K steps.
        twin: the twin's losses of the same steps; None or empty when it did not run.
        why_no_twin: the reason, shown in :attr:`CheckFloor.source`, when ``twin`` is missing.

    Returns:
        The floor; without a twin, :data:`FLOAT32_EPS` for both bounds.
    """
    divergence = relative_divergence(twin or (), baseline)
    if not divergence:
        return CheckFloor(FLOAT32_EPS, FLOAT32_EPS, f"float32 epsilon ({why_no_twin or 'no twin'})")
    first = max(divergence[0], FLOAT32_EPS)
    return CheckFloor(first, max(first, *divergence), "float64 twin")


#: The multiple of a source's distance from exact arithmetic that a variant of it may part
#: from it by (:func:`source_floor`): two runs each within ``d`` of exact arithmetic are within
#: ``2 d`` of each other (the triangle inequality).
SOURCE_FLOOR_MARGIN = 2.0


def source_floor(
    floor: CheckFloor,
    margin: float,
    source: Sequence[float],
    exact: Sequence[float],
    source_name: str,
) -> CheckFloor:
    """The floor of a check against a source of other numerics than the baseline's (a bf16
    trial, against which its compiled or channels_last variants are checked).

    The study's floor is fp32's distance from exact arithmetic (the float64 twin's); a bf16
    source sits about a thousand times further (bf16 keeps 8 significant bits to fp32's 24:
    first-step divergence 2e-4 against the twin's 8e-8 on the shipped MNIST CNN,
    docs/research/evidence.md), and another fusion of the same bf16 computation (a compiled
    variant) parts from it by bf16's rounding, not fp32's: 1.4-2.3e-4 at the first step in
    the long run's study, against a bound of 1.2e-5 from fp32's floor. Judged by fp32's
    floor, every such variant trains its budget. Here a variant no further from exact than
    the source is the same computation at the source's precision: by the triangle
    inequality it parts from the source by at most twice the source's own distance
    (:data:`SOURCE_FLOOR_MARGIN`), measured, not assumed: the source's recorded check
    losses against the twin's. Not ``margin`` times it: at bf16's distance that would let a
    change of the math through (BatchNorm over micro-batches of 4 parts from fp32 by 8.7e-4
    at the first step, 4x bf16's distance, 100x would be 2e-2).

    Args:
        floor: the study's floor (:func:`check_floor`).
        margin: the study's multiple of it (``advanced.measure.check_margin``).
        source: the source's losses of the first K steps (the same seed, weights, batches).
        exact: the float64 twin's losses of the same steps (the baseline's where the twin
            recorded none: fp32 is exact to bf16's eye).
        source_name: how :attr:`CheckFloor.source` names the source (``trial 17 (bf16)``:
            ``distance of trial 17 (bf16) from the float64 twin``).

    Returns:
        ``floor`` itself where its bounds are the wider (the source no further from exact
        than ``margin / 2`` times fp32's floor); else a floor with its own margin of 2 whose
        bounds are the wider of the two, step 1 and the trajectory each.
    """
    divergence = [d for d in relative_divergence(source, exact) if math.isfinite(d)]
    if not divergence:
        return floor
    first = max(margin * floor.first, SOURCE_FLOOR_MARGIN * divergence[0])
    trajectory = max(margin * floor.trajectory, SOURCE_FLOOR_MARGIN * max(divergence), first)
    if first == margin * floor.first and trajectory == margin * floor.trajectory:
        return floor
    return CheckFloor(
        first / SOURCE_FLOOR_MARGIN,
        trajectory / SOURCE_FLOOR_MARGIN,
        f"distance of {source_name} from the float64 twin",
        margin=SOURCE_FLOOR_MARGIN,
    )


@dataclass(frozen=True)
class EquivalenceCheck:
    """The verdict of one paired K-step check.

    Attributes:
        verdict: ``identical``, ``same_computation`` or ``diverged``.
        steps: the steps compared.
        first_divergence: relative divergence at the first step.
        max_divergence: the largest relative divergence over the steps.
        detail: one line that says what was compared and against which bound.
    """

    verdict: Literal["identical", "same_computation", "diverged"]
    steps: int
    first_divergence: float
    max_divergence: float
    detail: str

    @property
    def passed(self) -> bool:
        """Identical or the same computation: the accuracy may be inherited."""
        return self.verdict != "diverged"


def check_equivalence(
    candidate: Sequence[float],
    reference: Sequence[float],
    floor: CheckFloor,
    margin: float,
) -> EquivalenceCheck:
    """Judge a candidate's first K losses against the reference run's (the same seed: the
    same initial weights and batches).

    Args:
        candidate: the candidate's losses per step.
        reference: the reference's (the baseline's, or the measured trial with the same math
            key) losses per step.
        floor: the floating-point floor (:func:`check_floor`, or :func:`source_floor`).
        margin: how many times the floor a same-computation candidate may diverge
            (``advanced.measure.check_margin``), unless the floor sets its own
            (:attr:`CheckFloor.margin`).

    Returns:
        The verdict (:class:`EquivalenceCheck`).

    Raises:
        ValueError: ``candidate`` or ``reference`` is empty (nothing to compare), or
            ``margin`` is not above 1.
    """
    if not candidate or not reference:
        raise ValueError("check_equivalence: both runs must record their check losses")
    if not margin > 1:
        raise ValueError(f"check_equivalence: margin > 1 must hold, but got {margin}")
    steps = min(len(candidate), len(reference))
    divergence = relative_divergence(candidate[:steps], reference[:steps])
    first, worst = divergence[0], max(divergence)
    if list(candidate[:steps]) == list(reference[:steps]):
        return EquivalenceCheck(
            "identical", steps, 0.0, 0.0, f"the same losses bit for bit over {steps} steps"
        )
    if floor.margin is not None:
        margin = floor.margin
    first_bound, trajectory_bound = margin * floor.first, margin * floor.trajectory
    figures = (
        f"first-step divergence {first:.1e} (bound {first_bound:.1e}), "
        f"largest over {steps} steps {worst:.1e} (bound {trajectory_bound:.1e}; "
        f"{margin:g}x the {floor.source})"
    )
    if first <= first_bound and worst <= trajectory_bound:
        return EquivalenceCheck("same_computation", steps, first, worst, figures)
    return EquivalenceCheck("diverged", steps, first, worst, f"diverged: {figures}")


def class_by_knobs(
    knobs: Mapping[str, Any],
    baseline: Mapping[str, Any],
    model_knobs: Collection[str],
    global_batch_fixed: bool,
) -> EvidenceClass:
    """The class a candidate's knobs put it in before any check: ``model`` when a model knob
    differs from the baseline's, else ``dynamics`` when its global batch does (``batch_size``
    or ``gpu_count``, unless ``train.global_batch_size`` fixes it), else ``numerics`` when its
    precision does, else ``same_computation`` (to be confirmed, or refined to ``identical``,
    by the check).

    Args:
        knobs: the candidate's knobs, by Optuna parameter name.
        baseline: the baseline's knobs.
        model_knobs: the names of the model's knobs.
        global_batch_fixed: ``train.global_batch_size`` is set.
    """

    def differs(name: str) -> bool:
        return name in knobs and name in baseline and knobs[name] != baseline[name]

    if any(differs(name) for name in model_knobs):
        return "model"
    if not global_batch_fixed and (differs("batch_size") or differs("gpu_count")):
        return "dynamics"
    if differs("precision"):
        return "numerics"
    return "same_computation"


#: How each class's evidence reads in the verdict and the tables.
_EVIDENCE_TEXT: dict[str, str] = {
    "baseline": "the baseline",
    "identical": "identical computation",
    "same_computation": "the same computation",
    "numerics": "a numerics change",
    "dynamics": "a dynamics change",
    "model": "a model change",
}


def evidence_text(evidence_class: str | None, check_steps: int | None = None) -> str:
    """The class in words: ``identical computation (checked over 20 steps)``, ``a model
    change``; ``unknown`` for None (a trial recorded before classes)."""
    if evidence_class is None:
        return "unknown"
    text = _EVIDENCE_TEXT.get(evidence_class, evidence_class)
    if evidence_class in INHERITING_CLASSES and check_steps:
        text += f" (checked over {check_steps} steps)"
    return text
