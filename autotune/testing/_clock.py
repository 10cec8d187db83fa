"""A scripted clock and device sync, in the spirit of ``torch.utils.benchmark``'s ``_MockTimer``."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["FakeClock"]


class FakeClock:
    """A clock whose time advances by scripted costs, and a device sync that is only counted.

    Pass ``sync=fake.sync, clock=fake.clock`` to :class:`autotune.trial.measure.WindowClock`. Each
    read returns the current time and then advances it by the next cost, so the intervals
    after the first read are exactly ``costs_s`` in order (0 once the script runs out); a test
    may also advance ``now_s`` itself (a step's cost between two reads).

    Args:
        costs_s: seconds that pass between consecutive reads.

    Attributes:
        events: ``"sync"`` and ``"read"``, in the order they were called.
        now_s: the time the next read returns.
    """

    def __init__(self, costs_s: Iterable[float] = ()) -> None:
        self._costs = iter(costs_s)
        self.events: list[str] = []
        self.now_s = 0.0

    def sync(self) -> None:
        """The device sync: recorded, costs nothing."""
        self.events.append("sync")

    def clock(self) -> float:
        """Read the time (seconds), then let the next scripted cost pass."""
        self.events.append("read")
        now = self.now_s
        self.now_s += next(self._costs, 0.0)
        return now

    @property
    def syncs(self) -> int:
        """How often :meth:`sync` was called."""
        return self.events.count("sync")

    @property
    def reads(self) -> int:
        """How often :meth:`clock` was called."""
        return self.events.count("read")
