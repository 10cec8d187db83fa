"""A workload's model traced for the memory estimate (autotune/trial/workloads/_profile.py)."""

from __future__ import annotations

import torch

from autotune.core.flops import profile_model
from autotune.testing import make_trial_config
from autotune.trial.workloads import load_workload, profile_workload


def test_profile_workload_traces_the_workloads_model_on_its_own_samples() -> None:
    spec = make_trial_config(family="cnn").workload  # the built-in cnn on digits (1x8x8)
    knobs = {"depth": 3, "width": 64}
    workload = load_workload(spec)
    train, _ = workload.datasets()

    profiled = profile_workload(spec, knobs, "bf16", ("ConvBlock",))

    assert profiled == profile_model(
        lambda: workload.build_model(knobs),
        [train[i] for i in range(4)],
        workload.loss,
        "bf16",
        ("ConvBlock",),
    )
    assert profiled.input_bytes_per_sample == 4 * 64 + 8  # digits: 1x8x8 float32, int64 label
    assert profile_workload(spec, knobs, "bf16", ("ConvBlock",)) is profiled  # once per process


def test_profile_workload_is_the_same_under_no_grad_and_leaves_the_random_state() -> None:
    from autotune.trial.workloads._profile import _profile_cached

    spec = make_trial_config(family="cnn").workload
    knobs = {"depth": 2, "width": 16}
    _profile_cached.cache_clear()
    expected = profile_workload(spec, knobs, "fp32")
    _profile_cached.cache_clear()
    torch.manual_seed(123)
    state = torch.get_rng_state()
    with torch.no_grad():  # a sampler's acquisition runs so; autograd saves nothing there
        profiled = profile_workload(spec, knobs, "fp32")

    assert profiled == expected
    assert profiled.activation_bytes_per_sample > 0
    assert torch.equal(torch.get_rng_state(), state)  # the caller's draws are not reseeded
