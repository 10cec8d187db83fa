"""Samplers on one torch thread, timed: :class:`OneThreadSampler` and the plain delegating
wrapper the other wrappers build on.

Optuna's GPSampler fits its Gaussian process with torch; torch's default of one thread per
core oversubscribes a small machine's CPU and slows the fit several times. The study process
trains nothing (trials run in child processes with their own threads), so it can give the
sampler one thread; :class:`OneThreadSampler` does so around every call and restores the
count after. Only Optuna's public ``BaseSampler`` interface is used here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import torch
from optuna.samplers import BaseSampler

if TYPE_CHECKING:
    from optuna.distributions import BaseDistribution
    from optuna.study import Study
    from optuna.trial import FrozenTrial, TrialState

__all__ = ["DelegatingSampler", "OneThreadSampler", "one_torch_thread"]

T = TypeVar("T")


@contextmanager
def one_torch_thread() -> Iterator[None]:
    """Run the block with ``torch.set_num_threads(1)``; the previous count is restored."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class DelegatingSampler(BaseSampler):
    """A sampler that hands every call to ``self.sampler``, unchanged; subclasses change
    only the calls they need to (Optuna's public ``BaseSampler`` interface)."""

    def __init__(self, sampler: BaseSampler) -> None:
        self.sampler = sampler

    def infer_relative_search_space(
        self, study: Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        return self.sampler.infer_relative_search_space(study, trial)

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        return self.sampler.sample_relative(study, trial, search_space)

    def sample_independent(
        self,
        study: Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        return self.sampler.sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        self.sampler.before_trial(study, trial)

    def after_trial(
        self,
        study: Study,
        trial: FrozenTrial,
        state: TrialState,
        values: Sequence[float] | None,
    ) -> None:
        self.sampler.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.sampler.reseed_rng()


class OneThreadSampler(DelegatingSampler):
    """Wrap a sampler so that each of its calls runs on one torch thread.

    Only Optuna's public ``BaseSampler`` interface is used: every method delegates to the
    wrapped sampler, unchanged but for the thread count.

    Args:
        sampler: the sampler to wrap (``GPSampler``, ``TPESampler``, ...).

    Attributes:
        sampler: the wrapped sampler.
        sampler_s: wall seconds spent in ``infer_relative_search_space``, ``sample_relative`` and
            ``sample_independent`` so far in this process (the sampler's cost per trial).
    """

    def __init__(self, sampler: BaseSampler) -> None:
        super().__init__(sampler)
        self.sampler_s = 0.0

    def _timed(self, call: Callable[[], T]) -> T:
        started = time.perf_counter()
        with one_torch_thread():
            try:
                return call()
            finally:
                self.sampler_s += time.perf_counter() - started

    def infer_relative_search_space(
        self, study: Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        return self._timed(lambda: self.sampler.infer_relative_search_space(study, trial))

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        return self._timed(lambda: self.sampler.sample_relative(study, trial, search_space))

    def sample_independent(
        self,
        study: Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        return self._timed(
            lambda: self.sampler.sample_independent(study, trial, param_name, param_distribution)
        )
