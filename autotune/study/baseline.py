"""The baseline: what the user trains with today, measured once per study.

A space's ``baseline:`` block names it (any knob, the model's included, and ``lr``); every
knob it leaves out takes PyTorch's defaults, and a space without one is an untuned PyTorch
training script. PyTorch's defaults are fp32, contiguous tensors, eager mode (no ``torch.compile``), a
``DataLoader`` with ``num_workers=0`` and one device. The model is the space's middle one (each
integer or real model knob at its middle, a list of other choices at its first) and the batch
size the common 64 (or the space's closest choice). The baseline is enqueued as the
first trial of a new study, so the same machinery measures it; it counts as one of the
study's trials and carries the user attribute ``baseline=True``. Every report compares with
it ("3.2x faster than your baseline", or "than PyTorch's defaults" when the space names none).
Its global batch is also the reference batch at
which ``train.lr`` holds when the learning rate is scaled with the batch
(:func:`trial_train_settings`).
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import optuna
from optuna.trial import FrozenTrial, TrialState

from autotune.core.config import (
    GUIDE_KNOB_DEFAULTS,
    ChoiceParam,
    FloatParam,
    ModelKnob,
    SearchSpace,
    TrainSettings,
)
from autotune.core.exceptions import ConfigError
from autotune.study.trial_result import BASELINE_ATTR, TrialResult

__all__ = [
    "BASELINE_ATTR",
    "COMMON_BATCH_SIZE",
    "EAGER_EXPLORATION_ATTR",
    "PYTORCH_DEFAULTS",
    "RUN_FAILURES",
    "SAME_MODEL_AFTER_TRIALS",
    "SAME_MODEL_ATTR",
    "SAME_MODEL_BATCH_ATTR",
    "SAME_MODEL_SHARE",
    "SameModelBatchQueue",
    "baseline_global_batch",
    "baseline_params",
    "baseline_trial",
    "check_baseline_runs",
    "eager_exploration_params",
    "enqueue_baseline",
    "enqueue_eager_exploration",
    "enqueue_same_model",
    "enqueue_same_model_batch",
    "failed_baseline",
    "leader_batch_variants",
    "same_model_batch_configurations",
    "same_model_batch_params",
    "search_price",
    "space_tried",
    "trial_train_settings",
    "untried_same_model_batch",
]

#: The trial user attribute of a trial queued to keep the baseline's model
#: (:func:`enqueue_same_model`).
SAME_MODEL_ATTR = "same_model"
#: The share of a study's trials that keep the baseline's model knobs, so that the same-model
#: answer (only the system knobs change) has candidates: on a CPU without fast bf16, 4 of a
#: 50-trial study's trials had the baseline's model, none faster than it, and that answer
#: had no finalist.
SAME_MODEL_SHARE = 0.2
#: Trials a study runs before it queues same-model trials (the start-up design and the first
#: proposals of the sampler go first).
SAME_MODEL_AFTER_TRIALS = 10
#: The batch size of PyTorch's MNIST example and most tutorials.
COMMON_BATCH_SIZE = 64
#: PyTorch's defaults for the categorical knobs and the integer ones that have a default.
PYTORCH_DEFAULTS: dict[str, Any] = {
    "precision": "fp32",
    "memory_format": "contiguous",
    "compile_mode": "none",
    "num_workers": 0,
    "gpu_count": 1,
    **GUIDE_KNOB_DEFAULTS,
}


def _middle(values: Sequence[Any]) -> Any:
    """The middle value; the lower of the two middles for an even count."""
    return values[(len(values) - 1) // 2]


def _model_default(knob: ModelKnob) -> Any:
    """A model knob's baseline value: the middle of an integer knob's values or of a real
    range (geometric on a log scale), the first of a list of other choices."""
    if isinstance(knob, FloatParam):
        return knob.middle()
    if isinstance(knob, ChoiceParam):
        return knob.choices[0]
    return _middle(knob.values())


def _closest_batch(values: Sequence[int]) -> int:
    """The value closest to :data:`COMMON_BATCH_SIZE` on a log scale (ties: the smaller)."""
    return min(values, key=lambda v: (abs(math.log2(v / COMMON_BATCH_SIZE)), v))


def baseline_params(space: SearchSpace) -> tuple[dict[str, Any], list[str]]:
    """The baseline configuration's knobs within ``space``: the space's ``baseline:`` values,
    and PyTorch's defaults for the knobs it leaves out.

    Where the space does not offer a PyTorch default (say it only has ``bf16``), the first
    choice the space offers stands in, and a note says so. A ``baseline:`` value is always in
    its knob's values (:class:`~autotune.core.config.SearchSpace` adds it), unless the device's
    rules removed it, which :func:`check_baseline_runs` refuses before a study starts.

    Args:
        space: the search space, restricted to what the device can run.

    Returns:
        ``(params, notes)``: Optuna parameter values by knob name, and one line per knob where
        the baseline could not use PyTorch's default.
    """
    given = space.baseline
    params: dict[str, Any] = {
        name: given.get(name, _model_default(knob)) for name, knob in space.model.knobs.items()
    }
    params["batch_size"] = given.get("batch_size", _closest_batch(space.batch_size.values()))
    notes: list[str] = []
    searched = space.knobs()  # the guide's knobs only where the space searches them
    for name, default in PYTORCH_DEFAULTS.items():
        if name not in searched:
            continue
        values: list[Any] = getattr(space, name).values()
        if name in given:
            params[name] = given[name]
        elif default in values:
            params[name] = default
        else:
            params[name] = values[0]
            notes.append(f"{name}: the space has no {default}; the baseline uses {values[0]}")
    return params, notes


def check_baseline_runs(space: SearchSpace, removed: Sequence[str]) -> None:
    """Refuse a ``baseline:`` value the device's rules removed from the space.

    Args:
        space: the space restricted to what the device can run
            (:func:`autotune.study.feasibility.restrict_space`).
        removed: the lines the restriction gave, ``"precision=tf32: <reason>"``.

    Raises:
        ConfigError: ``baseline.KEY: VALUE cannot run here (<reason>)``, for the first such
            value.
    """
    knobs = space.knobs()
    for key, value in space.baseline.items():
        knob = knobs.get(key)
        if knob is None or knob.contains(value):
            continue
        prefix = f"{key}={value}: "
        reason = next((line[len(prefix) :] for line in removed if line.startswith(prefix)), None)
        raise ConfigError(
            f"baseline.{key}: {value} cannot run here ({reason or 'removed by the device rules'})"
        )


def baseline_global_batch(space: SearchSpace) -> int:
    """The baseline configuration's global batch: ``train.global_batch_size`` when the space
    fixes one, else its batch size times its GPU count."""
    params, _ = baseline_params(space)
    return space.train.global_batch(int(params["batch_size"]), int(params["gpu_count"]))


def trial_train_settings(space: SearchSpace) -> TrainSettings:
    """The training settings every trial of a study on ``space`` gets: the space's, with
    ``reference_batch_size`` filled in with :func:`baseline_global_batch` when the space
    leaves it unset, so that each trial's configuration says at which batch ``train.lr``
    holds and the baseline trains at exactly ``train.lr``.

    Args:
        space: the search space, restricted to what the device can run (as the baseline).
    """
    train = space.train_settings()
    if train.reference_batch_size is not None:
        return train
    return train.model_copy(update={"reference_batch_size": baseline_global_batch(space)})


def baseline_trial(trials: Sequence[FrozenTrial]) -> FrozenTrial | None:
    """The study's finished baseline trial: the first one that measured, else the first
    failed one (a baseline that failed, then ran again on a rerun, :func:`enqueue_baseline`),
    or None."""
    finished = [
        t
        for t in sorted(trials, key=lambda t: t.number)
        if TrialResult.from_trial(t).baseline
        and t.state in (TrialState.COMPLETE, TrialState.PRUNED)
    ]
    measured = [t for t in finished if not TrialResult.from_trial(t).failed]
    chosen = measured or finished
    return chosen[0] if chosen else None


#: The failures of a trial that ran (:func:`failed_baseline`): the user's code or the machine,
#: not a rule that refused it before it ran (``infeasible``, checked before the study opens
#: for the baseline).
RUN_FAILURES = ("oom", "error", "crash", "timeout")


def failed_baseline(trials: Sequence[FrozenTrial]) -> str | None:
    """Why the study has no baseline to compare with, when its baseline trial failed as it ran
    (and no later run of it measured): one line, ``trial N: KIND (the last line of its reason)``;
    None when the baseline measured, has not finished, or is queued to run again.

    Every figure of a study is a comparison with its baseline, so a study whose baseline
    failed stops there (:func:`autotune.study.api.run_study`) rather than train the rest of its
    trials for nothing.
    """
    if any(
        t.state in (TrialState.WAITING, TrialState.RUNNING) and TrialResult.from_trial(t).baseline
        for t in trials
    ):
        return None  # a rerun queued it again: it has yet to fail
    trial = baseline_trial(trials)
    if trial is None:
        return None
    result = TrialResult.from_trial(trial)
    if result.failure_kind not in RUN_FAILURES:
        return None
    last = (result.failure_detail or "").strip().splitlines()[-1:]
    reason = f" ({last[0].strip()})" if last and last[0].strip() else ""
    return f"trial {trial.number}: {result.failure_kind}{reason}"


def enqueue_baseline(study: optuna.Study, space: SearchSpace) -> bool:
    """Queue the baseline as the study's next trial unless it has one (measured, running or
    queued): a baseline trial that failed is queued again, so that a rerun of the study, once
    the user fixed their code, retries it (the failed trial stays, a finished trial).

    Args:
        study: the study about to run trials.
        space: its search space, restricted to what the device can run.

    Returns:
        True when the baseline was queued now.
    """
    states = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING, TrialState.WAITING)
    for trial in study.get_trials(deepcopy=False, states=states):
        result = TrialResult.from_trial(trial)
        if result.baseline and not (trial.state == TrialState.COMPLETE and result.failed):
            return False
    params, notes = baseline_params(space)
    attrs: dict[str, Any] = {BASELINE_ATTR: True}
    if notes:
        attrs["baseline_notes"] = notes
    study.enqueue_trial(params, user_attrs=attrs)
    return True


def enqueue_same_model(
    study: optuna.Study,
    space: SearchSpace,
    share: float = SAME_MODEL_SHARE,
    after_trials: int = SAME_MODEL_AFTER_TRIALS,
) -> bool:
    """Queue a trial that keeps the baseline's model when too few of the study's trials did.

    The same-model answer (DESIGN.md) needs candidates: a search over the whole space spends
    most trials on other models. Once the study holds ``after_trials`` trials, whenever fewer
    than ``share`` of them (the next one counted) have the baseline's model knobs, this queues
    one with those knobs fixed; the sampler chooses its other knobs (Optuna's
    ``enqueue_trial`` with part of the parameters). Nothing is queued while a trial waits, or
    in a space without model knobs.

    Args:
        study: the study running trials (an Optuna callback calls this after each trial).
        space: its search space, restricted to what the device can run (as the baseline).
        share: the share of trials to keep the baseline's model, in [0, 1].
        after_trials: trials (run, running or failed) before the first is queued.

    Returns:
        True when a trial was queued now.
    """
    params, _ = baseline_params(space)
    model = {name: params[name] for name in space.model.knobs}
    if not model:
        return False
    trials = study.get_trials(deepcopy=False)
    if any(t.state == TrialState.WAITING for t in trials):
        return False
    if len(trials) < after_trials:
        return False
    same = sum(_keeps(t.params, model) for t in trials)
    if same >= share * (len(trials) + 1):
        return False
    study.enqueue_trial(model, user_attrs={SAME_MODEL_ATTR: True})
    return True


#: The trial user attribute of an exploring trial that the cost cap keeps eager
#: (:func:`enqueue_eager_exploration`).
EAGER_EXPLORATION_ATTR = "eager_exploration"


def eager_exploration_params(
    space: SearchSpace,
    tried: Sequence[Mapping[str, Any]] = (),
    seed: int = 0,
    draws: int = 64,
    limit: int = 4096,
) -> dict[str, Any]:
    """An untried exploring configuration under a cost cap: ``compile_mode: none`` and every
    other knob drawn at random (a space of at most ``limit`` eager configurations: one of
    those no trial in ``tried`` ran, chosen at random; a larger one or one with a real-valued
    knob: each knob drawn from its values, or uniformly over its range or its logarithm's,
    up to ``draws`` times until untried). Empty where the space searches no such compile
    mode, or where every eager configuration was tried (or no draw found one): then the
    sampler chooses.

    Compilation is a change of how a model runs, not of what it computes: it is tried on the
    baseline's model once the exploration ends (:func:`untried_same_model_batch`, on the
    eager configurations that measured fastest). While exploring, one compiled trial of a
    larger model costs minutes of compilation (8 full runs of cnn_small's baseline on a
    2-core CPU) before its first timed window can say it is slow. Every knob is fixed, not
    only the compile mode: a model-based sampler (GP, TPE) whose proposal loses one knob to
    a fixed value never learns what it proposed, and proposes it again (the long run's GP
    queued one configuration 23 times). The exploration under a cap lasts a few trials, the
    span of such a sampler's own random start-up.

    Args:
        space: the study's space, restricted to what the device can run.
        tried: the knobs of the study's trials (any state).
        seed: the draw's seed (the study's seed and trial count: a rerun draws the same).
        draws: how many draws may look for an untried configuration.
    """
    knob = space.knobs().get("compile_mode")
    if knob is None or "none" not in getattr(knob, "values", lambda: ())():
        return {}
    rng = random.Random(seed)
    seen = {_knob_key(t) for t in tried}
    eager = _configurations(space, {"compile_mode": "none"}, limit)
    if eager is not None:
        # A small space: one of the untried eager configurations, none when all were tried.
        untried = [config for config in eager if _knob_key(config) not in seen]
        return rng.choice(untried) if untried else {}
    params: dict[str, Any] = {}
    for _ in range(draws):
        params = {}
        for name, param in space.knobs().items():
            if name == "compile_mode":
                params[name] = "none"
            elif hasattr(param, "values"):
                params[name] = rng.choice(list(param.values()))
            else:  # a real-valued model knob (FloatParam)
                low, high = float(param.low), float(param.high)  # type: ignore[union-attr, arg-type]
                if getattr(param, "log", False):
                    params[name] = math.exp(rng.uniform(math.log(low), math.log(high)))
                else:
                    params[name] = rng.uniform(low, high)
        if _knob_key(params) not in seen:
            return params
    return {}


def enqueue_eager_exploration(study: optuna.Study, space: SearchSpace, seed: int = 0) -> bool:
    """Queue an exploring trial that runs eager, every knob fixed
    (:func:`eager_exploration_params`, drawn with ``seed`` plus the study's trial count);
    nothing while a trial waits or where the space searches no eager compile mode.

    Returns:
        True when a trial was queued now.
    """
    trials = study.get_trials(deepcopy=False)
    if any(t.state == TrialState.WAITING for t in trials):
        return False
    params = eager_exploration_params(space, [t.params for t in trials], seed + len(trials))
    if not params:
        return False
    study.enqueue_trial(params, user_attrs={EAGER_EXPLORATION_ATTR: True})
    return True


#: The trial user attribute of a trial queued by the cost cap to keep the baseline's model and
#: global batch (:func:`enqueue_same_model_batch`).
SAME_MODEL_BATCH_ATTR = "same_model_batch"


def same_model_batch_params(space: SearchSpace) -> dict[str, Any]:
    """The baseline's knobs that a trial keeps once the cost cap stops the exploration
    (:func:`autotune.study.cost.budget_stage`'s ``keep_model``): its model knobs, its global batch
    (``batch_size`` and ``gpu_count``, unless ``train.global_batch_size`` fixes it) and
    ``activation_checkpointing``; only those the space searches. Precision is left free: a
    numerics change of the baseline's model trains its evidence once (the budget, or its
    short share), and each other configuration of that precision reuses it by its math key
    (:func:`autotune.core.config.math_key`)."""
    params, _ = baseline_params(space)
    names = [*space.model.knobs, "activation_checkpointing"]
    if space.train.global_batch_size is None:
        names += ["batch_size", "gpu_count"]
    searched = space.knobs()
    return {name: params[name] for name in names if name in searched and name in params}


def _keeps(knobs: Mapping[str, Any], fixed: Mapping[str, Any], but: str = "") -> bool:
    """Whether ``knobs`` hold every value of ``fixed`` (``but`` left out)."""
    return all(knobs.get(k) == v for k, v in fixed.items() if k != but)


def _knob_key(knobs: Mapping[str, Any], without: str = "") -> tuple[tuple[str, str], ...]:
    """A configuration's knobs as a hashable key (``without`` left out)."""
    return tuple(sorted((k, repr(v)) for k, v in knobs.items() if k != without))


def _configurations(
    space: SearchSpace, fixed: Mapping[str, Any], limit: int
) -> list[dict[str, Any]] | None:
    """Every configuration of ``space`` with the knobs in ``fixed`` at their values and every
    other knob over its values; None when they cannot be enumerated: a real-valued knob
    outside ``fixed``, or more than ``limit`` combinations."""
    free = {
        name: knob.values()
        for name, knob in space.knobs().items()
        if name not in fixed and hasattr(knob, "values")
    }
    if any(name not in fixed and name not in free for name in space.knobs()):
        return None  # a knob the enumeration cannot cover (a real-valued one)
    if math.prod(len(v) for v in free.values()) > limit:
        return None
    return [
        {**fixed, **dict(zip(free, values, strict=True))}
        for values in itertools.product(*free.values())
    ]


def space_tried(space: SearchSpace, trials: Sequence[FrozenTrial], limit: int = 4096) -> int | None:
    """How many configurations the whole space has, once a trial finished or under way has
    tried each one of them (a failed or infeasible trial counts: running it again would fail
    again); None while one is left, or when they cannot be enumerated (a real-valued knob,
    more than ``limit`` combinations). A search past this point would only re-measure a
    configuration it has measured, which the verification does in fresh processes."""
    configurations = _configurations(space, {}, limit)
    if not configurations:
        return None
    claimed = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)
    tried = {_knob_key(t.params) for t in trials if t.state in claimed}
    if any(_knob_key(c) not in tried for c in configurations):
        return None
    return len(configurations)


def same_model_batch_configurations(
    space: SearchSpace, limit: int = 4096
) -> list[dict[str, Any]] | None:
    """Every configuration that keeps the baseline's model and global batch
    (:func:`same_model_batch_params`), every knob fixed: precision, memory format, compile
    mode, workers and the guide's knobs the space searches over their values. None when they
    cannot be enumerated: a real-valued knob, or more than ``limit`` combinations (then the
    sampler chooses them)."""
    return _configurations(space, same_model_batch_params(space), limit)


def leader_batch_variants(
    space: SearchSpace,
    tried: Sequence[Mapping[str, Any]],
    throughputs: Sequence[tuple[Mapping[str, Any], float]],
) -> tuple[list[dict[str, Any]], float]:
    """The *leader* (the fastest measured configuration that keeps the baseline's model and
    global batch) at the space's other batch sizes: its untried dynamics variants, each
    changing ``batch_size`` alone, and the leader's throughput (samples/s; 0 without one).

    A global-batch change is a dynamics change: it trains its own evidence (the budget, or
    its short share), so the search tries few of them, where they can pay: the batch sizes
    next to the baseline's on each side first (the nearer one first, the larger on a tie), a
    step further out on one side only once every step before it was measured (a step that
    stopped below the throughput floor, or failed, ends that side; under a cost cap the
    floor stops a slow step after its first windows, untrained). A step measured slower
    than the one before does not end its side: one trial's throughput is a single
    measurement, and on the main job's AVX-512 EPYC the search measured bf16 +
    channels_last at batch 128 below batch 64 (7,197 against 7,376 samples/s) where four
    interleaved rounds put it above (7,124 against 6,207) and batch 256 above both (7,841).
    Its learning rate follows the space's ``train.lr_scaling``; its
    goodput (throughput x E(B), :mod:`autotune.core.goodput`) is recorded beside its
    throughput. No variants where ``train.global_batch_size`` fixes the global batch, or the
    space searches one batch size.

    Args:
        space: the study's space, restricted to what the device can run.
        tried: the knobs of the study's trials (any state).
        throughputs: ``(knobs, samples/s)`` of the measured trials.
    """
    knob = space.knobs().get("batch_size")
    if space.train.global_batch_size is not None or not hasattr(knob, "values"):
        return [], 0.0
    fixed = same_model_batch_params(space)
    if "batch_size" not in fixed:
        return [], 0.0
    at_baseline = [(knobs, sps) for knobs, sps in throughputs if _keeps(knobs, fixed)]
    if not at_baseline:
        return [], 0.0
    leader, leader_sps = max(at_baseline, key=lambda pair: pair[1])
    sizes = sorted(int(v) for v in knob.values())  # type: ignore[union-attr]
    base_index = sizes.index(int(fixed["batch_size"]))
    seen = {_knob_key(t) for t in tried}
    measured = {_knob_key(knobs) for knobs, _ in throughputs}
    variants: list[tuple[int, int, dict[str, Any]]] = []
    for side in (1, -1):
        for distance, index in enumerate(
            range(base_index + side, -1 if side < 0 else len(sizes), side), 1
        ):
            variant = {**leader, "batch_size": sizes[index]}
            key = _knob_key(variant)
            if key not in seen:
                variants.append((distance, -side, variant))
                break  # one step past the last one measured on this side
            if key not in measured:
                break  # stopped below the floor or failed: this side ends here
    return [variant for _, _, variant in sorted(variants, key=lambda v: v[:2])], leader_sps


def untried_same_model_batch(
    space: SearchSpace,
    tried: Sequence[Mapping[str, Any]],
    limit: int = 4096,
    throughputs: Sequence[tuple[Mapping[str, Any], float]] = (),
    configurations: Sequence[dict[str, Any]] | None = None,
    slow_precisions: Sequence[str] = (),
    fits: Callable[[Mapping[str, Any]], bool] | None = None,
) -> dict[str, Any] | None:
    """The next configuration that keeps the baseline's model and global batch and that no
    trial has tried, or the leader at a neighbouring batch size
    (:func:`leader_batch_variants`); None when each one was tried, or when they cannot be
    enumerated (:func:`same_model_batch_configurations`).

    The cheapest evidence first: eager before compiled (compiling costs seconds to minutes);
    among eager ones the baseline's precision before another (its configurations are timed
    and inherit the baseline's metric; another precision trains its evidence once, then its
    other configurations reuse it); within each, the one whose cheaper twin measured the
    highest throughput first (a compiled one's eager twin, the same knobs at compile mode
    ``none``: compile speeds up what it is given; an eager one at another precision, its twin
    at the baseline's precision: the precision speeds up what the other knobs give), then the
    fewest knobs changed from the baseline's. A precision in
    ``slow_precisions`` (every trial of it at this model and batch stopped below the
    throughput floor) is not tried again. The leader's batch variants train their evidence as
    another precision does, so they rank among those, by the leader's throughput (after a
    precision whose twin is the leader): once the leader is known, its variants come before
    the eager configurations that build on slower twins, and before every compiled one. On
    the main job's AVX-512 EPYC the fastest configuration of the baseline's model was bf16
    + channels_last at twice or four times the batch, which no configuration at the
    baseline's batch reaches (docs/research/main-job.md); placed after every eager
    configuration, the variants were never reached within the cap in one run of two.

    Args:
        space: the study's space, restricted to what the device can run.
        tried: the knobs of the study's trials (any state).
        limit: the most combinations enumerated.
        throughputs: ``(knobs, samples/s)`` of the measured trials.
        configurations: :func:`same_model_batch_configurations`'s, when the caller has them.
        slow_precisions: precisions to leave out (see above).
        fits: whether a configuration's projected cost fits what the search has left
            (:func:`search_price`); one that does not is passed over for the next.
    """
    if configurations is None:
        configurations = same_model_batch_configurations(space, limit)
    if configurations is None:
        return None
    params, _ = baseline_params(space)
    seen = {_knob_key(t) for t in tried}
    measured_sps = {_knob_key(knobs): sps for knobs, sps in throughputs}
    base_precision = params.get("precision")

    def cheaper_twin_sps(candidate: dict[str, Any]) -> float:
        """The measured throughput of the twin a candidate builds on: a compiled one's eager
        twin; an eager one at another precision, its twin at the baseline's precision."""
        if candidate.get("compile_mode", "none") != "none":
            return measured_sps.get(_knob_key({**candidate, "compile_mode": "none"}), 0.0)
        if candidate.get("precision", base_precision) != base_precision:
            return measured_sps.get(_knob_key({**candidate, "precision": base_precision}), 0.0)
        return 0.0

    variants, leader_sps = leader_batch_variants(space, tried, throughputs)
    variant_keys = {_knob_key(v) for v in variants}

    def cost_order(candidate: dict[str, Any]) -> tuple[bool, bool, float, int, bool]:
        compiled = candidate.get("compile_mode", "none") != "none"
        changed = sum(v != params.get(k) for k, v in candidate.items())
        if _knob_key(candidate) in variant_keys:
            # It trains its own evidence, as another precision does: beside those, by the
            # throughput it builds on (the leader's), after a precision of the same.
            return compiled, not compiled, -leader_sps, changed, True
        numerics = candidate.get("precision", base_precision) != base_precision
        # A compiled candidate's eager twin ran by then: its precision's evidence is paid.
        trains = numerics and not compiled
        return compiled, trains, -cheaper_twin_sps(candidate), changed, False

    return next(
        (
            c
            for c in sorted([*configurations, *variants], key=cost_order)
            if _knob_key(c) not in seen
            and c.get("precision") not in slow_precisions
            and (fits is None or fits(c))
        ),
        None,
    )


def _slow_precisions(trials: Sequence[FrozenTrial], fixed: Mapping[str, Any]) -> list[str]:
    """The precisions whose every finished trial at the baseline's model and global batch
    (``fixed``) stopped below the throughput floor (``too_slow``)."""
    outcomes: dict[str, list[bool]] = {}
    for t in trials:
        if t.state == TrialState.RUNNING or t.state == TrialState.WAITING:
            continue
        if "precision" not in t.params or not _keeps(t.params, fixed):
            continue
        too_slow = TrialResult.from_trial(t).failure_kind == "too_slow"
        outcomes.setdefault(str(t.params["precision"]), []).append(too_slow)
    return [p for p, slow in outcomes.items() if all(slow)]


#: What :func:`enqueue_same_model_batch` did: queued a trial; found one waiting already;
#: found every configuration tried; found none left whose projected cost fits.
SameModelBatchQueue = Literal["queued", "waiting", "tried_all", "over_budget"]


def search_price(
    trials: Sequence[FrozenTrial], space: SearchSpace
) -> Callable[[Mapping[str, Any]], float] | None:
    """The projected cost of one more search trial of the baseline's model and global batch,
    in full runs of the baseline, from what the study's trials cost (``run_s`` over the
    baseline's ``full_run_s``): a compiled one, the dearest compiled trial so far (twice the
    baseline trial's cost before any compiled); one at a precision no trial of this model
    and batch trained yet, the baseline trial's cost (it trains as the baseline did); one at
    another batch size (:func:`leader_batch_variants`: it trains its own evidence), the
    median of the trained trials of the baseline's model other than the baseline (the
    baseline trial's before any); any other, the median of the timed trials' (half the
    baseline trial's before any). None before the baseline measured its full run.
    """
    results = [TrialResult.from_trial(t) for t in trials]
    base = next((r for r in results if r.baseline and r.full_run_s and r.run_s), None)
    if base is None or not base.full_run_s or not base.run_s:
        return None
    full_run_s = base.full_run_s
    base_cost = base.run_s / full_run_s
    fixed = same_model_batch_params(space)
    compiled, timed, trained = [], [], []
    trained_precisions = {base.params.get("precision")}  # the baseline trained its own
    for r in results:
        if not r.run_s:
            continue
        cost = r.run_s / full_run_s
        if r.params.get("compile_mode", "none") != "none":
            compiled.append(cost)
        elif r.inherits_accuracy:
            timed.append(cost)
        elif (
            r.accuracy_source == "measured"
            and not r.baseline
            and _keeps(r.params, fixed, but="batch_size")
        ):
            trained.append(cost)
        if r.accuracy_source == "measured" and _keeps(r.params, fixed):
            trained_precisions.add(r.params.get("precision"))
    compiled_price = max(compiled, default=2.0 * base_cost)
    timed_price = statistics.median(timed) if timed else 0.5 * base_cost
    trained_price = statistics.median(trained) if trained else base_cost

    def price(candidate: Mapping[str, Any]) -> float:
        if candidate.get("compile_mode", "none") != "none":
            return compiled_price
        if "batch_size" in fixed and candidate.get("batch_size") != fixed["batch_size"]:
            return trained_price
        if candidate.get("precision") not in trained_precisions:
            return base_cost
        return timed_price

    return price


def enqueue_same_model_batch(
    study: optuna.Study, space: SearchSpace, left_full_runs: float | None = None
) -> SameModelBatchQueue:
    """Queue a trial that keeps the baseline's model and global batch: the next untried such
    configuration (:func:`untried_same_model_batch`, every knob fixed) whose projected cost
    (:func:`search_price`) fits ``left_full_runs``, or where the space cannot be enumerated
    those knobs alone (:func:`same_model_batch_params`, the sampler choosing the rest). A
    configuration at the baseline's precision runs seconds of timed steps and the paired
    check, not the budget; one at another precision trains its evidence once, and that
    precision's other configurations reuse it. Called once the search has spent half its
    share of ``budget.full_runs``.

    Args:
        study: the study.
        space: its search space, restricted to what the device can run.
        left_full_runs: what the search's share of the cap leaves, in full runs; None: no
            limit.

    Returns:
        What it did (:data:`SameModelBatchQueue`).
    """
    trials = study.get_trials(deepcopy=False)
    if any(t.state == TrialState.WAITING for t in trials):
        return "waiting"
    measured = [
        (t.params, r.throughput_sps)
        for t in trials
        if (r := TrialResult.from_trial(t)).measured and r.throughput_sps
    ]
    configurations = same_model_batch_configurations(space)
    if configurations is None:  # the sampler chooses the other knobs
        params = same_model_batch_params(space)
    else:
        price = search_price(trials, space) if left_full_runs is not None else None
        slow = _slow_precisions(trials, same_model_batch_params(space))
        tried = [t.params for t in trials]

        def next_untried(
            fits: Callable[[Mapping[str, Any]], bool] | None,
        ) -> dict[str, Any] | None:
            return untried_same_model_batch(
                space,
                tried,
                throughputs=measured,
                configurations=configurations,
                slow_precisions=slow,
                fits=fits,
            )

        left = left_full_runs or 0.0
        untried = next_untried(None if price is None else (lambda c: price(c) <= left))
        if untried is None:
            return "tried_all" if next_untried(None) is None else "over_budget"
        params = untried
    study.enqueue_trial(params, user_attrs={SAME_MODEL_BATCH_ATTR: True})
    return "queued"
