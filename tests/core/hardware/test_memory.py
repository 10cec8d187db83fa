"""The memory estimate and the memory feasibility rule (autotune/core/hardware/_memory.py,
_feasibility.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune.core.config import TrialConfig, load_space
from autotune.core.exceptions import ConfigError
from autotune.core.flops import ModelProfile
from autotune.core.hardware import (
    CPU_RUNTIME_BYTES,
    CUDA_RUNTIME_BYTES,
    MEMORY_ESTIMATE_TOLERANCE,
    MemoryEstimate,
    estimate_memory,
)
from autotune.core.units import MIB
from autotune.study.feasibility import _memory_reason as memory_reason
from autotune.study.feasibility import (
    _smallest_trial,
    estimate_trial_memory,
    restrict_space,
    trial_infeasibility_reason,
)
from autotune.testing import make_capabilities, make_trial_config

_PROFILE = ModelProfile(
    parameters=1000,
    activation_bytes_per_sample=500.0,
    activation_fixed_bytes=300,
    input_bytes_per_sample=72,
)


def _estimate(**kwargs: object) -> MemoryEstimate:
    args: dict[str, object] = {
        "batch_size": 10,
        "num_workers": 0,
        "world_size": 1,
        "optimizer": "adamw",
        "on_gpu": True,
    }
    args.update(kwargs)
    return estimate_memory(_PROFILE, **args)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# estimate_memory


def test_estimate_adds_up_its_components_on_a_gpu() -> None:
    e = _estimate()

    assert e.parameters_bytes == 4000  # fp32 weights
    assert e.gradients_bytes == 4000
    assert e.optimizer_bytes == 16000  # AdamW moments + step temporaries, 16 B/param
    assert e.activations_bytes == 2 * 500 * 10 + 300  # saved x2 at the backward peak
    assert e.batch_bytes == 720
    assert e.prefetch_bytes == 0  # pinned host memory, not the GPU's
    assert e.runtime_bytes == CUDA_RUNTIME_BYTES
    assert e.total_bytes == 4000 + 4000 + 16000 + 10300 + 720 + CUDA_RUNTIME_BYTES


def test_sgd_keeps_less_state_than_adamw() -> None:
    assert _estimate(optimizer="sgd").optimizer_bytes == 8000


def test_cpu_counts_prefetch_and_every_rank() -> None:
    e = _estimate(on_gpu=False, num_workers=3, world_size=2)

    assert e.prefetch_bytes == 3 * 2 * 720  # workers x prefetch_factor x batch
    assert e.runtime_bytes == CPU_RUNTIME_BYTES
    assert e.ranks == 2
    assert e.total_bytes == 2 * e.per_rank_bytes


def test_ddp_adds_a_gradient_bucket_copy_but_gpus_do_not_add_up() -> None:
    single, ddp = _estimate(), _estimate(world_size=4)

    assert ddp.gradients_bytes == 2 * single.gradients_bytes
    assert ddp.ranks == 1
    assert ddp.total_bytes == single.total_bytes + single.gradients_bytes


def test_activations_grow_with_the_batch() -> None:
    assert _estimate(batch_size=20).activations_bytes - _estimate().activations_bytes == 10000


def test_describe_breaks_the_estimate_down() -> None:
    text = _estimate(on_gpu=False, world_size=2, runtime_bytes=0).describe()

    assert text.startswith("params+grads+optimizer 0.0, activations 0.0, batch+prefetch 0.0")
    assert text.endswith("runtime 0.0 MiB, x 2 ranks")


def test_trial_estimate_uses_the_devices_runtime() -> None:
    config = make_trial_config(depth=3, width=64, batch_size=256)

    cpu = estimate_trial_memory(config, make_capabilities("cpu"))
    gpu = estimate_trial_memory(config, make_capabilities("cuda"))
    mock = estimate_trial_memory(config, make_capabilities("mock"))

    assert cpu.runtime_bytes == CPU_RUNTIME_BYTES
    assert gpu.runtime_bytes == CUDA_RUNTIME_BYTES
    assert mock.runtime_bytes == 4 * MIB
    assert cpu.activations_bytes == gpu.activations_bytes > 10 * MIB


def test_trial_estimate_follows_the_data_sets_image_size(mnist_dir: Path) -> None:
    digits = estimate_trial_memory(make_trial_config(), make_capabilities("cuda"))
    mnist = estimate_trial_memory(  # the workload's own data: the real set is loaded
        make_trial_config(data={"name": "mnist", "root": str(mnist_dir)}),
        make_capabilities("cuda"),
    )

    assert mnist.activations_bytes > 10 * digits.activations_bytes  # 28x28 vs 8x8 pixels


# --------------------------------------------------------------------------------------------
# The memory rule


def test_memory_rule_allows_up_to_the_tolerance_above_the_memory() -> None:
    e = _estimate(runtime_bytes=0)
    fits = int(e.total_bytes / (1 + MEMORY_ESTIMATE_TOLERANCE)) + 1
    too_small = int(e.total_bytes / (1 + MEMORY_ESTIMATE_TOLERANCE)) - 1

    assert memory_reason(e, make_capabilities("cuda", memory_bytes=fits)) is None
    reason = memory_reason(e, make_capabilities("cuda", memory_bytes=too_small))
    assert reason is not None
    assert reason.startswith("estimated peak memory 0.0 MiB per GPU (params+grads+optimizer")
    assert reason.endswith("of fake GPU even if it is 35% too high")


def test_memory_rule_without_a_known_memory_allows_everything() -> None:
    assert memory_reason(_estimate(), make_capabilities("cuda", memory_bytes=None)) is None


def test_trial_rule_checks_memory_after_the_knob_rules() -> None:
    tiny = make_capabilities("cuda", memory_bytes=2 * MIB)
    config = make_trial_config(device="cuda", depth=3, width=64, batch_size=256)

    reason = trial_infeasibility_reason(config, tiny)
    assert reason is not None and reason.startswith("estimated peak memory")
    knob_first = trial_infeasibility_reason(config.model_copy(update={"gpu_count": 3}), tiny)
    assert knob_first == "gpu_count=3 exceeds the 1 GPUs of fake GPU"


def test_trial_rule_on_cpu_counts_the_ranks_on_one_host() -> None:
    config = make_trial_config(depth=3, width=64, batch_size=256, gpu_count=2)
    one_rank = estimate_trial_memory(
        config.model_copy(update={"gpu_count": 1}), make_capabilities("cpu")
    )
    host = make_capabilities("cpu", memory_bytes=int(1.5 * one_rank.total_bytes))

    assert trial_infeasibility_reason(config.model_copy(update={"gpu_count": 1}), host) is None
    reason = trial_infeasibility_reason(config, host)
    assert reason is not None and "x 2 ranks" in reason and "per GPU" not in reason


# --------------------------------------------------------------------------------------------
# restrict_space removes what never fits


def test_restrict_removes_batch_sizes_that_never_fit(mnist_dir: Path) -> None:
    space = load_space("cnn_small", ["data=mnist", f"data.root={mnist_dir}"])
    # Memory between what batch 128 and batch 256 need with every other knob at its least.
    roomy = make_capabilities("cuda", memory_bytes=1 << 40, count=2)
    totals = [
        estimate_trial_memory(_smallest_trial(space, roomy, batch_size=b), roomy).total_bytes
        for b in (128, 256)
    ]
    memory = int((totals[0] * totals[1]) ** 0.5 / (1 + MEMORY_ESTIMATE_TOLERANCE))
    caps = make_capabilities("cuda", memory_bytes=memory, count=2)

    restricted, removed = restrict_space(space, caps)

    assert restricted.batch_size.values() == [16, 32, 64, 128]
    assert [line.split(":")[0] for line in removed] == ["batch_size=256"]
    assert "estimated peak memory" in removed[0]
    assert restricted.model == space.model  # every model fits at the smallest batch


def test_restrict_keeps_everything_when_the_largest_configuration_fits() -> None:
    space = load_space("cnn_small")

    restricted, removed = restrict_space(space, make_capabilities("cuda", count=2))

    assert removed == []
    assert restricted == space


def test_restrict_refuses_a_space_where_nothing_fits() -> None:
    space = load_space("cnn_small")

    with pytest.raises(ConfigError, match=r"^space cnn_small: depth: no choice fits in the memory"):
        restrict_space(space, make_capabilities("cuda", memory_bytes=1 * MIB, count=2))


_WIDE = """\
import torch
from torch import nn
from torch.utils.data import TensorDataset


class Wide:
    def build_model(self, hidden: int, activation: str = "relu", dropout: float = 0.0):
        return nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 2))

    def datasets(self):
        x, y = torch.randn(32, 64), torch.zeros(32, dtype=torch.long)
        return TensorDataset(x, y), TensorDataset(x, y)
"""


def test_restrict_removes_integer_model_knob_values_of_any_workload(tmp_path: Path) -> None:
    (tmp_path / "wide.py").write_text(_WIDE)
    (tmp_path / "wide.yaml").write_text(
        "name: wide\nworkload: wide.py:Wide\n"
        "model: {hidden: [16, 65536], activation: [relu, gelu], dropout: {low: 0.0, high: 0.5}}\n"
        "batch_size: [8]\n"
    )
    space = load_space(str(tmp_path / "wide.yaml"))
    knobs = {"batch_size": 8, "precision": "fp32", "memory_format": "contiguous"}
    base = {**knobs, "compile_mode": "none", "num_workers": 0, "gpu_count": 1}
    caps = make_capabilities("cuda", memory_bytes=1 << 40)
    totals = [
        estimate_trial_memory(
            TrialConfig.from_knobs(
                {**base, "hidden": h, "activation": "relu", "dropout": 0.0}, space, device="cuda"
            ),
            caps,
        ).total_bytes
        for h in (16, 65536)
    ]
    # Room for hidden=16 even 35 % over its estimate, none for hidden=65536.
    memory = int((totals[0] * totals[1]) ** 0.5 / (1 + MEMORY_ESTIMATE_TOLERANCE))
    assert totals[0] <= memory * (1 + MEMORY_ESTIMATE_TOLERANCE) < totals[1]

    restricted, removed = restrict_space(space, make_capabilities("cuda", memory_bytes=memory))

    assert restricted.model.knobs["hidden"].values() == [16]  # type: ignore[union-attr]
    assert [line.split(":")[0] for line in removed] == ["hidden=65536"]
    assert restricted.model.knobs["activation"] == space.model.knobs["activation"]
    assert restricted.model.knobs["dropout"] == space.model.knobs["dropout"]  # a real range
    assert restricted.workload == space.workload


# --------------------------------------------------------------------------------------------
# Against real CPU trials (done-criterion 3; the full table is in docs/research/memory-estimate.md)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("depth", "width", "batch_size", "precision"),
    [(1, 8, 16, "fp32"), (3, 64, 256, "bf16")],
)
def test_estimate_is_within_tolerance_of_a_real_cpu_trial(
    depth: int, width: int, batch_size: int, precision: str
) -> None:
    from autotune.study.search import run_trial

    config = make_trial_config(
        depth=depth, width=width, batch_size=batch_size, precision=precision, train={"epochs": 1}
    )
    measured = run_trial(config.model_copy(update={"timeout_s": 300})).peak_memory_bytes
    estimate = estimate_trial_memory(config, make_capabilities("cpu")).total_bytes

    assert abs(estimate / measured - 1) <= MEMORY_ESTIMATE_TOLERANCE


# --------------------------------------------------------------------------------------------
# The Tuning Guide's knobs in the estimate

_BLOCKED = ModelProfile(
    parameters=8000,
    activation_bytes_per_sample=3000.0,
    activation_fixed_bytes=0,
    input_bytes_per_sample=72,
    blocks=4,
    checkpointed_bytes_per_sample=1000.0,
)


def test_checkpointing_lowers_the_activations_to_what_is_kept_plus_one_block() -> None:
    common: dict[str, object] = {"batch_size": 10, "num_workers": 0, "world_size": 1}
    plain = estimate_memory(_BLOCKED, optimizer="adamw", on_gpu=True, **common)  # type: ignore[arg-type]
    kept = estimate_memory(_BLOCKED, optimizer="adamw", on_gpu=True, checkpointing=True, **common)  # type: ignore[arg-type]

    assert kept.activations_bytes < plain.activations_bytes
    # 2 x (1000 kept + 2000 dropped / 4 blocks) x 10 samples
    assert kept.activations_bytes == 2 * (1000 + 2000 / 4) * 10


def test_sharding_divides_the_optimizer_state_over_the_ranks() -> None:
    common: dict[str, object] = {"batch_size": 10, "num_workers": 0, "world_size": 4}
    ddp = estimate_memory(_BLOCKED, optimizer="adamw", on_gpu=True, **common)  # type: ignore[arg-type]
    fsdp = estimate_memory(_BLOCKED, optimizer="adamw", on_gpu=True, sharded=True, **common)  # type: ignore[arg-type]

    assert fsdp.optimizer_bytes == ddp.optimizer_bytes // 4
    assert (
        fsdp.parameters_bytes == 4 * 8000 // 4 + 4 * 8000 // 4
    )  # a quarter, and one block gathered
    assert fsdp.per_rank_bytes < ddp.per_rank_bytes


def test_the_trial_estimate_of_the_builtin_cnn_follows_both_knobs() -> None:
    caps = make_capabilities("cpu", count=2)
    base = dict(depth=3, width=32, batch_size=128)

    plain = estimate_trial_memory(make_trial_config(**base), caps)
    checkpointed = estimate_trial_memory(
        make_trial_config(**base, activation_checkpointing=True), caps
    )
    ddp = estimate_trial_memory(make_trial_config(**base, gpu_count=2), caps)
    fsdp = estimate_trial_memory(make_trial_config(**base, gpu_count=2, data_parallel="fsdp"), caps)

    assert checkpointed.activations_bytes < plain.activations_bytes
    assert fsdp.optimizer_bytes == ddp.optimizer_bytes // 2
