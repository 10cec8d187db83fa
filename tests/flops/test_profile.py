"""The model profile of the memory estimate (autotune/flops/_profile.py)."""

from __future__ import annotations

from autotune.flops import profile_model
from autotune.testing import make_trial_config
from autotune.workloads.builtin.networks import build_model, count_parameters


def test_profile_model_counts_what_backward_keeps() -> None:
    spec = make_trial_config(family="cnn").workload  # the built-in cnn on digits (1x8x8)
    knobs = {"depth": 3, "width": 64}
    fp32 = profile_model(spec, knobs, "fp32")
    bf16 = profile_model(spec, knobs, "bf16")

    assert fp32.parameters == count_parameters(build_model("cnn", 3, 64, (1, 8, 8), 10))
    # Block 1 alone saves its conv output and BatchNorm/ReLU output (2 x 64 x 8 x 8 fp32).
    assert fp32.activation_bytes_per_sample > 2 * 64 * 8 * 8 * 4
    assert bf16.activation_bytes_per_sample < 0.75 * fp32.activation_bytes_per_sample
    assert bf16.activation_fixed_bytes > fp32.activation_fixed_bytes  # autocast weight casts
    assert fp32.input_bytes_per_sample == 4 * 64 + 8
    assert profile_model(spec, knobs, "tf32") == fp32


def test_profile_model_is_the_same_under_no_grad_and_leaves_the_random_state() -> None:
    import torch

    from autotune.flops._profile import _profile_cached

    spec = make_trial_config(family="cnn").workload
    knobs = {"depth": 2, "width": 16}
    _profile_cached.cache_clear()
    expected = profile_model(spec, knobs, "fp32")
    _profile_cached.cache_clear()
    torch.manual_seed(123)
    state = torch.get_rng_state()
    with torch.no_grad():  # a sampler's acquisition runs so; autograd saves nothing there
        profiled = profile_model(spec, knobs, "fp32")
    assert profiled == expected
    assert profiled.activation_bytes_per_sample > 0
    assert torch.equal(torch.get_rng_state(), state)  # the caller's draws are not reseeded
