"""The throughput floor: when a trial's steps are evidence that it runs too slow to finish.

One rule, read by the measuring core of every door (``autotune.trial.training._meter``) on a
real host clock and replayed by the mock device on its simulated step times, so that the mock
stops where a real trial would.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Protocol

from autotune.trial.measure._windows import WindowPlan

__all__ = ["FLOOR_JUDGED_WINDOWS", "FlagAgreement", "ThroughputFloor"]

#: Timed windows the floor judges at most. A trial stops at a window's end only when every
#: window judged so far ran below the floor: the better of the first two decides. One window
#: on a shared machine is not evidence enough: on a 2-core Intel Xeon whose hypervisor took a
#: quarter of the CPU time, channels_last, 1.42x faster than the baseline over its whole
#: measurement, read 4,158 samples/s in its first window, under a floor of 4,196, and the
#: README's study ended with nothing to verify (docs/research/main-job.md, 2026-11-29).
FLOOR_JUDGED_WINDOWS = 2


class FlagAgreement(Protocol):
    """How DDP ranks agree on a host-side flag (``autotune.trial.training._meter.HostAgreement``:
    a gloo all-reduce of one flag per entry, no device sync)."""

    def any(self, flags: list[bool]) -> list[bool]:
        """Any rank's flag set -> set on every rank (one collective call on every rank)."""
        ...


class ThroughputFloor:
    """``config.min_throughput_sps`` (global samples/s), judged over the warm-up and the first
    :data:`FLOOR_JUDGED_WINDOWS` timed windows.

    Two kinds of evidence, each asked twice, so that one slow stretch of a shared machine (a
    burst of steal time, another process's work) never decides alone:

    - **At the windows' ends** (:meth:`below_at_edge`): the trial stops at the end of the
      last judged window when each judged window ran below the floor, that is when the
      better of the first two did (one window when the plan has one). The first window at or
      above the floor clears the trial: nothing is judged after it.
    - **Before that** (:meth:`crossed_early`): rank 0 reads the host clock after each step,
      without synchronizing the device, and cuts the steady steps into stretches of at least
      ``min_evidence_s`` host seconds; the trial stops once two consecutive stretches each
      took longer than they may at the floor. The host runs ahead of a GPU, so host seconds
      past the limit mean device seconds past it too. Steady steps are those after the plan's
      compile steps (the first step, which holds compilation and first-touch costs; with CUDA
      graphs also the second, which records them:
      :func:`~autotune.trial.measure.graph_recording_steps`), less ``excluded_step``, the step
      a door counts FLOPs on (run eagerly under ``FlopCounterMode``): either, counted as
      steady, could make a fast compiled trial look too slow (a recording step of seconds on
      a GPU whose steps take milliseconds is 2 s of evidence on its own). The evidence bound
      keeps one late step (a DataLoader worker still starting, a page-fault burst: tenths of
      a second) from deciding. So a trial far below the floor costs its compile steps and
      about ``2 x min_evidence_s``, not its warm-up plus two windows (a quick run's fp16
      trial on a CPU without fp16 units took 45 s to reach its first window's end; a 2-rank
      one, deciding only at that end, 165 s).

    DDP ranks take rank 0's decisions through ``agreement`` (one host all-reduce of one flag
    a step, only while the floor judges): every rank calls :meth:`crossed_early` after every
    step and :meth:`below_at_edge` at every window edge, so the ranks' collectives match.

    Args:
        floor_sps: the floor, global samples/s (> 0).
        plan: the loop's windows (its :attr:`~autotune.trial.measure.WindowPlan.compile_steps`
            when compiled, else 1, start the evidence).
        samples_per_step: global samples per optimizer step.
        world_size: DDP ranks.
        min_evidence_s: host seconds of steady steps in each stretch of early evidence.
        clock: the host clock (``time.perf_counter``; tests and the mock inject a fake).
        agreement: how DDP ranks agree (None: one process; required when ``world_size > 1``).
        rank: this process's rank (rank 0 decides).
        excluded_step: a step whose time is not evidence (the door's FLOP-counted step);
            None: none.

    Raises:
        ValueError: ``floor_sps <= 0``, or ``world_size > 1`` without an ``agreement``.
    """

    def __init__(
        self,
        floor_sps: float,
        plan: WindowPlan,
        samples_per_step: int,
        world_size: int,
        min_evidence_s: float = 2.0,
        clock: Callable[[], float] = time.perf_counter,
        agreement: FlagAgreement | None = None,
        rank: int = 0,
        excluded_step: int | None = None,
    ) -> None:
        if floor_sps <= 0:
            raise ValueError(f"ThroughputFloor(floor_sps={floor_sps}): the floor must be > 0")
        if world_size > 1 and agreement is None:
            raise ValueError(
                f"ThroughputFloor(world_size={world_size}): DDP ranks need an agreement"
            )
        self.floor_sps = floor_sps
        self.window_steps = plan.window_steps
        #: Timed windows judged (:data:`FLOOR_JUDGED_WINDOWS`, fewer when the plan has fewer).
        self.judged_windows = min(FLOOR_JUDGED_WINDOWS, plan.windows)
        self._judged_ends = plan.window_edges[1 : self.judged_windows + 1]
        #: The step at which the judging ends (the last judged window's end).
        self.end_step = self._judged_ends[-1]
        #: The step after which the evidence clock starts (the last compile step).
        self.evidence_start_step = plan.compile_steps if plan.compiled else 1
        self.excluded_step = excluded_step
        self.samples_per_step = samples_per_step
        self.world_size = world_size
        self.min_evidence_s = min_evidence_s
        self._clock = clock
        self._agreement = agreement
        self._rank = rank
        self._start_s: float | None = None  # host clock after the evidence's start step
        self._last_s: float | None = None  # host clock after the latest step
        self._excluded_s = 0.0  # seconds of the excluded step, once it ran as evidence
        self._steps = 0  # steady steps judged
        self._seconds = 0.0  # their host seconds
        self._stretch_start = (0, 0.0)  # (steps, seconds) at the current stretch's start
        self._previous_stretch: tuple[int, float, bool] | None = None  # steps, s, below
        self._below_windows_s: list[float] = []  # the judged windows so far, all below
        self._cleared = False  # a window ran at or above the floor
        self._stopped: tuple[int, tuple[float, ...]] | None = None

    @property
    def judging(self) -> bool:
        """Whether a later step can still stop the trial (False once a window cleared it, or
        once it stopped)."""
        return not self._cleared and self._stopped is None

    def evidence(self) -> tuple[int, tuple[float, ...]]:
        """What the trial was judged on, as ``(steps per window, each window's seconds)``.

        After a stop at the windows' ends: the judged windows (each below the floor). After an
        early stop: one window of the two stretches' steady steps and their host seconds
        (the excluded step left out). Before a stop: every steady step so far, as one window.
        """
        if self._stopped is not None:
            return self._stopped
        return self._steps, (self._seconds,)

    def crossed_early(self, step: int) -> bool:
        """Before the last judged window's end: two consecutive stretches of steady steps,
        each of at least ``min_evidence_s`` host seconds, each ran below the floor, by rank
        0's host clock (no device sync), agreed by every rank. Every rank calls it after
        every step (no collective up to the evidence's start step, nor once a window cleared
        the trial: every rank knows that through :meth:`below_at_edge`'s agreement)."""
        if step >= self.end_step or not self.judging:
            return False
        now_s = self._clock()
        last_s, self._last_s = self._last_s, now_s
        if step <= self.evidence_start_step or self._start_s is None:
            if step >= self.evidence_start_step:
                self._start_s = now_s
            return False
        if step == self.excluded_step and last_s is not None:
            self._excluded_s += now_s - last_s
        excluded = (
            self.excluded_step is not None and self.evidence_start_step < self.excluded_step <= step
        )
        self._steps = step - self.evidence_start_step - int(excluded)
        self._seconds = now_s - self._start_s - self._excluded_s
        below = False
        stretch_steps = self._steps - self._stretch_start[0]
        stretch_s = self._seconds - self._stretch_start[1]
        if self._rank == 0 and stretch_s >= self.min_evidence_s:
            slow = stretch_s * self.floor_sps > stretch_steps * self.samples_per_step
            previous = self._previous_stretch
            below = slow and previous is not None and previous[2]
            if below and previous is not None:
                steps, seconds = previous[0] + stretch_steps, previous[1] + stretch_s
                self._stopped = (steps, (seconds,))
            self._previous_stretch = (stretch_steps, stretch_s, slow)
            self._stretch_start = (self._steps, self._seconds)
        if self.world_size > 1:
            assert self._agreement is not None
            (below,) = self._agreement.any([below])
            if below and self._stopped is None:  # another rank's process: rank 0 decided
                self._stopped = (self._steps, (self._seconds,))
        return below

    def below_at_edge(self, step: int, marks_s: Mapping[int, float]) -> bool:
        """At a judged window's end: whether the trial stops, every judged window having run
        below the floor, as rank 0 measured it (every rank takes rank 0's reading of each
        window through the same agreement as :meth:`crossed_early`, so all stop, go on or
        are cleared together).

        Args:
            step: the optimizer steps taken.
            marks_s: clock seconds by step count, read at (at least) the window edges.
        """
        if step not in self._judged_ends or not self.judging:
            return False
        seconds = max(marks_s[step] - marks_s[step - self.window_steps], 1e-9)
        below = self._rank == 0 and self.window_steps * self.samples_per_step < (
            seconds * self.floor_sps
        )
        if self.world_size > 1:
            assert self._agreement is not None
            (below,) = self._agreement.any([below])
        if not below:
            self._cleared = True
            return False
        self._below_windows_s.append(seconds)
        if len(self._below_windows_s) < self.judged_windows:
            return False
        self._stopped = (self.window_steps, tuple(self._below_windows_s))
        return True
