"""Stand-ins for :func:`autotune.study.search.run_trial` that run in this process, in milliseconds."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from autotune.core.config import TrialConfig
from autotune.core.exceptions import TrialError
from autotune.study.search import RunTrialFn
from autotune.trial.devices.mock import simulate
from autotune.trial.measure import Measurement

__all__ = ["FakeRunTrial", "simulate_trial"]


def simulate_trial(config: TrialConfig) -> Measurement:
    """What :func:`autotune.study.search.run_trial` returns for a ``mock`` trial, without a child
    process: the mock cost model, with its ``MemoryError`` reported as ``TrialError("oom")``
    (``config.timeout_s`` is not applied: the simulation takes milliseconds).

    Args:
        config: the trial (any device; the mock cost model ignores it).

    Raises:
        TrialError: ``oom`` when the modelled peak memory exceeds the mock GPU's.
    """
    try:
        return simulate(config)
    except MemoryError as e:
        raise TrialError("oom", f"MemoryError: {e}") from None


class FakeRunTrial:
    """A ``run_trial`` that plays scripted outcomes, then falls back to another function.

    Use it as ``run_study(config, n, run_trial_fn=FakeRunTrial([...]))`` or as the
    ``run_trial`` of :class:`autotune.study.search.TrialObjective`.

    Args:
        outcomes: what the first calls do, in order: a :class:`Measurement` is returned, an
            exception (e.g. ``TrialError("oom", "...")``) is raised.
        then: what every later call does (default :func:`simulate_trial`).

    Attributes:
        configs: the configuration of every call, in order.
    """

    def __init__(
        self,
        outcomes: Iterable[Measurement | BaseException] = (),
        *,
        then: RunTrialFn = simulate_trial,
    ) -> None:
        self._pending = deque(outcomes)
        self._then = then
        self.configs: list[TrialConfig] = []

    def __call__(self, config: TrialConfig) -> Measurement:
        self.configs.append(config)
        if not self._pending:
            return self._then(config)
        outcome = self._pending.popleft()
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome
