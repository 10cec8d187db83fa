"""What the doors share (autotune/trial/training/_door.py): the trial's knobs as the doors apply
them."""

from __future__ import annotations

import pytest

from autotune.testing import make_trial_config
from autotune.trial.devices.cpu import CpuBackend
from autotune.trial.training._door import DoorKnobs


class _PinningBackend(CpuBackend):
    """A CPU backend that pins host memory as the CUDA one does."""

    pin_memory = True


@pytest.mark.parametrize(
    ("users", "workers", "pinned"),
    [(True, 0, True), (False, 0, False), (False, 2, True), (True, 2, True)],
)
def test_a_door_trial_keeps_the_users_pinning_and_pins_with_workers(
    users: bool, workers: int, pinned: bool
) -> None:
    # The baseline (no workers) pinned nothing, where HF pins by default and a loader's
    # pin_memory=True is the user's: it measured a loader the user does not run.
    knobs = DoorKnobs(make_trial_config(num_workers=workers), _PinningBackend(), 0, 1)

    assert knobs.pin_memory(users) is pinned


def test_the_cpu_pins_nothing() -> None:
    knobs = DoorKnobs(make_trial_config(num_workers=2), CpuBackend(), 0, 1)

    assert knobs.pin_memory(True) is False


def test_a_door_trial_says_why_its_short_windows_are_not_extended() -> None:
    knobs = DoorKnobs(make_trial_config(measure={"min_timed_s": 2.0}), CpuBackend(), 0, 1)

    note = knobs.timing_note(0.05, "hf_trainer")["timing_note"]

    assert note.startswith("the windows covered 0.05 s, under advanced.measure.min_timed_s (2 s)")
    assert "the hf_trainer door times the budget's steps only" in note
    assert knobs.timing_note(2.5, "hf_trainer") == {}


def test_a_door_call_loads_the_function_seeds_and_runs_it_as_its_own_script() -> None:
    """Every door opens the same way: the user's function loaded, the peak-memory window
    opened and the trial's seed set before it runs; while it runs, ``sys.argv`` is its own
    script's and a ``torch.manual_seed`` of its own is derived from the trial's seed."""
    import sys

    import torch

    from autotune.core.config import MetricSpec, WorkloadSpec
    from autotune.trial.training._door import DoorCall
    from tests.trial.training import door_code

    spec = WorkloadSpec(
        ref="tests.trial.training.door_code:classify",
        door="loop",
        metric=MetricSpec(name="probe", direction="maximize"),
        args={"argv": ["--epochs", "3"]},
    )
    config = make_trial_config(workload=spec, model={"width": 4}, seed=7)
    resets: list[str] = []

    class Backend(CpuBackend):
        def reset_peak_memory(self) -> None:
            resets.append("reset")

    argv_before = list(sys.argv)
    call = DoorCall.open("loop", config, Backend(), 0, 1, (123,))

    assert call.function is door_code.classify
    assert call.label == "loop tests.trial.training.door_code:classify"
    assert resets == ["reset"]
    assert (call.knobs.rank, call.knobs.world_size, call.knobs.rank_pids) == (0, 1, (123,))
    assert torch.initial_seed() == 7
    with call.running() as (kwargs, seeds):
        assert kwargs == {}  # argv went to sys.argv: classify takes no `argv`
        assert sys.argv[1:] == ["--epochs", "3"]
        assert sys.argv[0].endswith("door_code.py")
        torch.manual_seed(1)
    assert seeds.calls == [("torch.manual_seed", 1)]
    assert torch.initial_seed() != 1  # derived from the trial's seed, not the user's
    assert sys.argv == argv_before
