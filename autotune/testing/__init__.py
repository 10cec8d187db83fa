"""Fakes and builders for tests of autotune and of code that uses it.

Nothing here trains or measures. The fakes are injected, never patched in:

- :class:`FakeRunTrial` stands in for :func:`autotune.study.search.run_trial` (pass it as
  ``run_trial_fn=`` of :func:`autotune.study.api.run_study`): canned measurements or failures first,
  then the mock device's cost model, in this process.
- :class:`FakeClock` is a scripted clock and counted device sync for
  :class:`autotune.trial.measure.WindowClock`.
- :func:`make_trial_config`, :func:`make_measurement` and :func:`make_capabilities` build valid
  value objects with small defaults, overriding only what a test cares about.
"""

from __future__ import annotations

from autotune.testing._builders import make_capabilities, make_measurement, make_trial_config
from autotune.testing._clock import FakeClock
from autotune.testing._run_trial import FakeRunTrial, simulate_trial
from autotune.testing.machines import simulated_machine

__all__ = [
    "FakeClock",
    "FakeRunTrial",
    "make_capabilities",
    "make_measurement",
    "make_trial_config",
    "simulate_trial",
    "simulated_machine",
]
