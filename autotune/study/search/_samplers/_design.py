"""The start-up design: a feasible covering design of the space (:func:`covering_design`, a
Latin hypercube over the knobs' levels, with its repairs) and the sampler that proposes its
rows before the model-based sampler proposes anything (:class:`DesignSampler`). Only
Optuna's public sampler interface is used here."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.samplers import BaseSampler
from optuna.trial import TrialState
from scipy.stats import qmc

from autotune.core.config import CategoricalParam, FloatParam, ModelKnob
from autotune.study.search._samplers._values import fixed_params, holds_value
from autotune.study.search._samplers._wrappers import DelegatingSampler
from autotune.study.trial_result import WARM_START_ATTR, TrialResult

if TYPE_CHECKING:
    from optuna.study import Study
    from optuna.trial import FrozenTrial

__all__ = [
    "GP_STARTUP_TRIALS",
    "STARTUP_DESIGN_SAMPLERS",
    "UNTRIED_ENUMERATION_LIMIT",
    "WARM_START_ATTR",
    "DesignSampler",
    "covering_design",
    "design_levels",
]

#: Trials in the study (the baseline and warm-start trials count) before GPSampler and
#: TPESampler model it. The start-up design fills them (:func:`covering_design`, at least one
#: row per level of the knob with the most levels), so on ``cnn_small`` (batch size: 5 levels)
#: the GP starts right after the baseline and the smallest covering design; with the memory
#: estimate as the GP's prior mean, an early start finds more of the front in the first 25
#: trials than a longer random start-up (docs/research/benchmarks.md, Table 2).
GP_STARTUP_TRIALS = 6
#: The most configurations :meth:`DesignSampler.untried_configuration` enumerates (a space
#: of discrete knobs with more combinations draws at random: a repeat is then improbable).
UNTRIED_ENUMERATION_LIMIT = 4096
#: The samplers whose start-up trials come from :func:`covering_design` (those with a random
#: start-up phase of :data:`GP_STARTUP_TRIALS`); NSGA-II breeds from its own first population
#: and ``random`` stays the random reference.
STARTUP_DESIGN_SAMPLERS = ("gp", "tpe")


def design_levels(
    knobs: Mapping[str, ModelKnob | CategoricalParam[Any]], n_rows: int
) -> dict[str, list[Any]]:
    """The levels a start-up design covers, by knob: a discrete knob's values, and for a
    real range (:class:`~autotune.core.config.FloatParam`) the centres of ``n_rows`` equal strata
    (on a log scale for ``log: true``; rounded to ``step`` if it has one, duplicates
    dropped)."""
    levels: dict[str, list[Any]] = {}
    for name, knob in knobs.items():
        if not isinstance(knob, FloatParam):
            levels[name] = list(knob.values())
            continue
        centres = [(i + 0.5) / n_rows for i in range(n_rows)]
        if knob.log:
            lo, hi = math.log(knob.low), math.log(knob.high)
            values = [math.exp(lo + u * (hi - lo)) for u in centres]
        else:
            values = [knob.low + u * (knob.high - knob.low) for u in centres]
        if knob.step is not None:
            step = knob.step
            values = [
                min(knob.low + round((v - knob.low) / step) * step, knob.high) for v in values
            ]
        levels[name] = list(dict.fromkeys(values))
    return levels


def covering_design(
    levels: Mapping[str, Sequence[Any]],
    n_rows: int,
    seed: int,
    feasible: Callable[[dict[str, Any]], bool] = lambda row: True,
    preferred: Callable[[dict[str, Any]], bool] | None = None,
) -> list[dict[str, Any]]:
    """A start-up design of ``n_rows`` rows over ``levels`` in which every level of every knob
    appears at least once (when ``n_rows`` is at least the most levels any knob has), and
    every row is ``feasible`` and, where the coverage allows, ``preferred``.

    The construction is scipy's Latin hypercube (``scipy.stats.qmc.LatinHypercube``,
    ``scramble=False``: each of the ``n_rows`` points sits at the centre of its stratum on
    every axis; ``optimization="random-cd"``: columns permuted to lower the centred
    discrepancy, so pairs of knobs are spread too), each axis cut into as many equal
    intervals as the knob has levels. An interval of width ``1/L >= 1/n_rows`` always holds
    a stratum centre, so every level appears, about ``n_rows / L`` times each. An orthogonal
    array (``strength=2``) would also balance pairs, but needs ``n_rows = p**2`` (p prime) and
    at most ``p + 1`` knobs: 9 rows allow 4 knobs, and a space has 8.

    A row the rules refuse is repaired by swapping one knob's level with another row (a swap
    keeps every column's levels, hence the coverage) when both rows are then feasible, or,
    failing that, replaced by a feasible random row that keeps the levels only it held (or
    else restores the most levels lost); a row no candidate can replace is dropped. Last, a
    level still missing goes into a row where it fits and whose own level another row also
    holds. A level no feasible row can hold stays missing.

    With ``preferred`` (a stricter test, e.g. "fits in memory with a margin"), the repairs
    and the filling above read a row as feasible only when it is also preferred; a row no
    repair makes preferred is repaired to be feasible only, and a level no preferred row
    can hold then goes into a row that is only feasible (the same filling), so the coverage
    never depends on the stricter test.

    Args:
        levels: the levels of each knob (:func:`design_levels`), in a fixed order.
        n_rows: the rows wanted (>= 1).
        seed: the design's seed; the same seed gives the same design.
        feasible: whether a row (knob values by name) can run (the feasibility rules).
        preferred: whether a feasible row is also one the design would rather have; None:
            every feasible row is.

    Returns:
        Up to ``n_rows`` rows, each a value per knob of ``levels``; empty when no knob has
        more than one level.
    """
    names = [name for name, values in levels.items() if len(values) > 1]
    fixed = {name: values[0] for name, values in levels.items() if len(values) == 1}
    if not names or n_rows < 1:
        return []
    rng = np.random.default_rng(seed)
    points = qmc.LatinHypercube(
        len(names), scramble=False, optimization="random-cd", rng=rng
    ).random(n_rows)  # (n_rows, len(names)), stratum centres
    counts = np.array([len(levels[name]) for name in names])
    index = np.minimum((points * counts).astype(int), counts - 1)  # (n_rows, len(names))

    def row_of(indices: np.ndarray) -> dict[str, Any]:
        chosen = {name: levels[name][int(i)] for name, i in zip(names, indices, strict=True)}
        return {name: chosen.get(name, fixed.get(name)) for name in levels}

    known: dict[tuple[int, ...], bool] = {}
    known_preferred: dict[tuple[int, ...], bool] = {}

    def ok(indices: np.ndarray) -> bool:
        key = tuple(int(i) for i in indices)
        if key not in known:
            known[key] = feasible(row_of(indices))
        return known[key]

    def ok_preferred(indices: np.ndarray) -> bool:
        if preferred is None or not ok(indices):
            return ok(indices)
        key = tuple(int(i) for i in indices)
        if key not in known_preferred:
            known_preferred[key] = preferred(row_of(indices))
        return known_preferred[key]

    for r in range(n_rows):
        for test in (ok_preferred, ok) if preferred is not None else (ok,):
            if test(index[r]) or _swap_repair(index, r, test, rng):
                break
            if _replace(index, r, counts, test, rng):
                break
    _fill_uncovered(index, counts, ok_preferred)
    if preferred is not None:
        _fill_uncovered(index, counts, ok)  # levels no preferred row can hold
    return [row_of(index[r]) for r in range(n_rows) if ok(index[r])]


def _swap_repair(
    index: np.ndarray, r: int, ok: Callable[[np.ndarray], bool], rng: np.random.Generator
) -> bool:
    """Make row ``r`` feasible by swapping one knob's level with another row, in place; a
    swap is kept when row ``r`` is then feasible and the other row is too (or was not
    before). Returns whether a swap was kept."""
    n_rows, n_knobs = index.shape
    for c in rng.permutation(n_knobs):
        for s in rng.permutation(n_rows):
            if s == r or index[s, c] == index[r, c]:
                continue
            other_was_ok = ok(index[s])
            index[[r, s], c] = index[[s, r], c]
            if ok(index[r]) and (ok(index[s]) or not other_was_ok):
                return True
            index[[r, s], c] = index[[s, r], c]
    return False


def _unique_columns(index: np.ndarray, r: int) -> np.ndarray:
    """The knobs (columns) whose level in row ``r`` no other row holds."""
    others = np.delete(index, r, axis=0)
    return np.array([not np.any(others[:, c] == index[r, c]) for c in range(index.shape[1])])


def _replace(
    index: np.ndarray,
    r: int,
    counts: np.ndarray,
    ok: Callable[[np.ndarray], bool],
    rng: np.random.Generator,
    candidates: int = 256,
) -> bool:
    """Replace row ``r`` in place by a feasible random row: first one that keeps the levels
    only row ``r`` holds (its other knobs drawn at random), else the one that covers the most
    (knob, level) pairs the other rows lack; leave it (infeasible, then dropped) if no
    candidate is feasible. Returns whether it was replaced."""
    unique = _unique_columns(index, r)
    for _ in range(candidates):
        candidate = np.where(unique, index[r], rng.integers(0, counts))
        if ok(candidate):
            index[r] = candidate
            return True
    others = np.delete(index, r, axis=0)
    best, best_gain = None, -1
    for _ in range(candidates):
        candidate = rng.integers(0, counts)
        if not ok(candidate):
            continue
        gain = sum(int(not np.any(others[:, c] == candidate[c])) for c in range(index.shape[1]))
        if gain > best_gain:
            best, best_gain = candidate, gain
    if best is None:
        return False
    index[r] = best
    return True


def _fill_uncovered(
    index: np.ndarray, counts: np.ndarray, ok: Callable[[np.ndarray], bool]
) -> None:
    """Put each level no feasible row holds into a feasible row, in place, where that row's
    level of the knob is held by another row too and the row stays feasible."""
    rows = [r for r in range(len(index)) if ok(index[r])]
    for c, count in enumerate(counts):
        for level in range(count):
            if any(index[r, c] == level for r in rows):
                continue
            for r in rows:
                if np.sum(index[rows, c] == index[r, c]) < 2:
                    continue  # the row's level would be lost
                before = index[r, c]
                index[r, c] = level
                if ok(index[r]):
                    break
                index[r, c] = before


def _is_queued(trial: FrozenTrial) -> bool:
    """A trial whose configuration was queued, not proposed: the baseline or a warm start."""
    result = TrialResult.from_trial(trial)
    return result.baseline or result.warm_start_from is not None


def _params_key(params: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(params.items()))


def _enumerable_choices(
    search_space: Mapping[str, BaseDistribution],
) -> dict[str, list[Any]] | None:
    """Each knob's values in a space of discrete knobs (categorical, or integer ranges),
    by name; None for a real-valued knob, or more than :data:`UNTRIED_ENUMERATION_LIMIT`
    combinations."""
    choices: dict[str, list[Any]] = {}
    for name, distribution in search_space.items():
        if isinstance(distribution, CategoricalDistribution):
            choices[name] = list(distribution.choices)
        elif isinstance(distribution, IntDistribution) and not distribution.log:
            step = distribution.step
            choices[name] = list(range(distribution.low, distribution.high + 1, step))
        else:
            return None
    if math.prod(len(values) for values in choices.values()) > UNTRIED_ENUMERATION_LIMIT:
        return None
    return choices


class DesignSampler(DelegatingSampler):
    """Propose the rows of a start-up design (:func:`covering_design`) before the wrapped
    sampler proposes anything.

    The trials the study proposes (every trial but the queued ones: the baseline and warm
    starts, see :func:`_is_queued`) take the design's rows, less those a queued trial runs
    already (the baseline's configuration is not proposed again), in trial-number order: the trial
    with ``k`` proposed trials numbered below it gets row ``k`` while ``k`` is below the
    design's length. The storage numbers trials atomically, so many workers sharing one study
    each get different rows, and a resumed study goes on where it stopped (it never restarts
    its design). A row whose trial was interrupted (FAIL, the row's values set) is proposed
    again once by the first trial after the design, so the design's coverage survives a
    Ctrl-C. A row that repeats an earlier row is skipped (a design over a space smaller
    than it holds repeats). Later trials, and every knob a row does not name, go to the
    wrapped sampler.

    No repeat in the wrapped sampler's own start-up: where the design is shorter than the
    wrapped sampler's random start-up (``GP_STARTUP_TRIALS``: a space of a few
    configurations, or rows the baseline runs already), the wrapped sampler proposes nothing
    relative and would draw each knob at random, which in a space of six configurations
    with five tried repeats one five times in six. Then this sampler proposes a
    configuration of the relative search space no trial has tried (finished, running or
    pruned; an interrupted one does not count) and that the ``feasible`` rules accept,
    uniformly at random (:meth:`untried_configuration`), where the space's discrete knobs
    can be enumerated (at most :data:`UNTRIED_ENUMERATION_LIMIT` combinations; a real-valued
    knob never repeats exactly); when each one was tried, the wrapped sampler draws as
    before.

    Only Optuna's public sampler interface is used: during the design the relative search
    space is empty, so Optuna asks :meth:`sample_independent` for each knob, which answers
    from the row; an untried configuration is a relative proposal.

    Args:
        sampler: the sampler for every trial after the design.
        design: the rows, each a value per knob (Optuna parameter name).
        feasible: whether a configuration (knob values by parameter name) passes the
            feasibility rules; None: every one does.
        seed: the seed of the untried configurations' draws (with the trial's number, so
            workers and resumed studies draw the same for the same trial).

    Attributes:
        sampler: the wrapped sampler.
        design: the rows.
    """

    def __init__(
        self,
        sampler: BaseSampler,
        design: Sequence[Mapping[str, Any]],
        feasible: Callable[[Mapping[str, Any]], bool] | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__(sampler)
        self.design = [dict(row) for row in design]
        self._feasible = feasible
        self._seed = seed
        self._rows: dict[tuple[int, int], dict[str, Any] | None] = {}

    def row(self, study: Study, trial: FrozenTrial) -> dict[str, Any] | None:
        """The design row for ``trial``, or None when the wrapped sampler proposes it."""
        key = (id(study), trial.number)
        if key not in self._rows:
            self._rows[key] = self._find_row(study, trial)
        return self._rows[key]

    def _find_row(self, study: Study, trial: FrozenTrial) -> dict[str, Any] | None:
        if not self.design or _is_queued(trial):
            return None
        trials = study.get_trials(deepcopy=False)
        design = self._unqueued_rows(trials)
        proposed = [t for t in trials if t.number < trial.number and not _is_queued(t)]
        if len(proposed) < len(design):
            return design[len(proposed)]
        tried = {_params_key(t.params) for t in trials if t.state != TrialState.FAIL}
        for row, t in zip(design, proposed, strict=False):
            key = _params_key(row)
            if t.state == TrialState.FAIL and _params_key(t.params) == key and key not in tried:
                return row
        return None

    def _unqueued_rows(self, trials: Sequence[FrozenTrial]) -> list[dict[str, Any]]:
        """The design less the rows a queued trial (the baseline, a warm start) runs already
        and the rows that repeat an earlier one: a row equal to the baseline's configuration
        would run it a second time while other configurations wait (in a space of two, the
        only other one)."""
        queued = [
            {**fixed_params(t), **t.params}
            for t in trials
            if _is_queued(t) and t.state != TrialState.FAIL
        ]
        rows: dict[tuple[tuple[str, Any], ...], dict[str, Any]] = {}
        for row in self.design:
            if not any(all(k in q and q[k] == v for k, v in row.items()) for q in queued):
                rows.setdefault(_params_key(row), row)
        return list(rows.values())

    def untried_configuration(
        self, study: Study, trial: FrozenTrial, search_space: Mapping[str, BaseDistribution]
    ) -> dict[str, Any] | None:
        """A configuration of ``search_space`` (a value per knob) that no other trial of
        ``study`` has tried (COMPLETE, RUNNING or PRUNED: a FAIL was interrupted and a
        WAITING one has not started) and that the feasibility rules accept, drawn uniformly
        at random; None when each one was tried or refused, or when the space cannot be
        enumerated (a real-valued knob, more than :data:`UNTRIED_ENUMERATION_LIMIT`
        combinations)."""
        choices = _enumerable_choices(search_space)
        if choices is None:
            return None
        claimed = (TrialState.COMPLETE, TrialState.RUNNING, TrialState.PRUNED)
        names = list(choices)
        tried = set()
        for t in study.get_trials(deepcopy=False, states=claimed):
            if t.number == trial.number:
                continue
            knobs = {**fixed_params(t), **t.params}
            if all(name in knobs for name in names):
                tried.add(tuple(knobs[name] for name in names))
        untried = [c for c in itertools.product(*choices.values()) if c not in tried]
        rng = np.random.default_rng((self._seed, trial.number))
        for index in rng.permutation(len(untried)):
            configuration = dict(zip(names, untried[index], strict=True))
            if self._feasible is None or self._feasible(configuration):
                return configuration
        return None

    def infer_relative_search_space(
        self, study: Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        if self.row(study, trial) is not None:
            return {}
        return self.sampler.infer_relative_search_space(study, trial)

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        proposal = self.sampler.sample_relative(study, trial, search_space)
        fixed = fixed_params(trial)
        if proposal or all(name in fixed for name in search_space):
            return proposal  # a model's proposal, an empty space, or a queued configuration
        # The wrapped sampler's random start-up: an untried configuration instead.
        return self.untried_configuration(study, trial, search_space) or {}

    def sample_independent(
        self,
        study: Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        row = self.row(study, trial)
        if (
            row is not None
            and param_name in row
            and holds_value(param_distribution, row[param_name])
        ):
            return row[param_name]
        return self.sampler.sample_independent(study, trial, param_name, param_distribution)
