"""Which steps hold a compiled trial's compilation (autotune/trial/training/_throughput.py
graph_recording_steps): CUDA graphs record on the second call, so compile_s counts two steps
in those modes (issue 38, item 12)."""

from __future__ import annotations

from autotune.testing import make_trial_config
from autotune.trial.measure import graph_recording_steps


def test_graph_modes_on_cuda_count_two_compile_steps() -> None:
    for mode, cuda, cpu in [("reduce-overhead", 2, 1), ("max-autotune", 2, 1), ("default", 1, 1)]:
        config = make_trial_config(compile_mode=mode)
        assert (graph_recording_steps(config, "cuda"), graph_recording_steps(config, "cpu")) == (
            cuda,
            cpu,
        )
