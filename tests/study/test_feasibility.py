"""The feasibility rules: knob rules and restrict_space (autotune/study/feasibility.py);
the memory rule is tested beside the estimate in test_memory.py."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from autotune.core.config import load_space
from autotune.core.exceptions import ConfigError
from autotune.core.hardware import MEMORY_ESTIMATE_TOLERANCE, detect_capabilities
from autotune.study.feasibility import (
    estimate_trial_memory,
    fits_memory_with_margin,
    infeasibility_reason,
    restrict_space,
    trial_infeasibility_reason,
)
from autotune.testing import make_capabilities, make_trial_config
from tests.conftest import MINIMAL_SPACE

VOLTA = make_capabilities("cuda", name="V100", compute_capability=(7, 0), count=2)


def _knobs(**overrides: Any) -> dict[str, Any]:
    return make_trial_config(**overrides).knobs()


# --------------------------------------------------------------------------------------------
# infeasibility_reason


def test_default_config_is_feasible_everywhere() -> None:
    for caps in (make_capabilities("cpu"), make_capabilities("cuda"), make_capabilities("mock")):
        assert infeasibility_reason(_knobs(), caps) is None


def test_tf32_on_cpu() -> None:
    reason = infeasibility_reason(_knobs(precision="tf32"), make_capabilities("cpu"))
    assert reason == "tf32 is a CUDA tensor-core mode; the CPU has no TF32"


@pytest.mark.parametrize("precision", ["bf16", "tf32"])
def test_bf16_and_tf32_need_compute_capability_8(precision: str) -> None:
    reason = infeasibility_reason(_knobs(precision=precision), VOLTA)
    assert reason == f"{precision} needs CUDA compute capability >= 8.0, but V100 has 7.0"


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_fp32_and_fp16_run_on_compute_capability_7(precision: str) -> None:
    assert infeasibility_reason(_knobs(precision=precision), VOLTA) is None


@pytest.mark.parametrize("precision", ["fp32", "fp16", "bf16"])
def test_cpu_precisions_other_than_tf32_are_feasible(precision: str) -> None:
    assert infeasibility_reason(_knobs(precision=precision), make_capabilities("cpu")) is None


def test_bf16_and_tf32_on_ampere_and_the_mock() -> None:
    for caps in (make_capabilities("cuda"), make_capabilities("mock")):
        for precision in ("bf16", "tf32"):
            assert infeasibility_reason(_knobs(precision=precision), caps) is None


def test_reduce_overhead_on_cpu() -> None:
    reason = infeasibility_reason(_knobs(compile_mode="reduce-overhead"), make_capabilities("cpu"))
    assert reason == "compile mode reduce-overhead uses CUDA graphs and needs a CUDA device"


@pytest.mark.parametrize("mode", ["default", "max-autotune"])
def test_other_compile_modes_on_cpu(mode: str) -> None:
    assert infeasibility_reason(_knobs(compile_mode=mode), make_capabilities("cpu")) is None


def test_reduce_overhead_on_gpu() -> None:
    reason = infeasibility_reason(_knobs(compile_mode="reduce-overhead"), make_capabilities("cuda"))
    assert reason is None


def test_more_processes_than_cpu_cores() -> None:
    caps = make_capabilities("cpu", count=2)

    assert infeasibility_reason(_knobs(gpu_count=2), caps) is None
    assert (
        infeasibility_reason(_knobs(gpu_count=3), caps)
        == "gpu_count=3 exceeds the 2 CPU cores of fake CPU"
    )


def test_more_gpus_than_the_device_has() -> None:
    reason = infeasibility_reason(_knobs(gpu_count=2), make_capabilities("cuda", count=1))
    assert reason == "gpu_count=2 exceeds the 1 GPUs of fake GPU"


def test_precision_rule_is_reported_first() -> None:
    knobs = _knobs(precision="tf32", compile_mode="reduce-overhead", gpu_count=8)
    reason = infeasibility_reason(knobs, make_capabilities("cpu"))
    assert reason is not None and reason.startswith("tf32")


# --------------------------------------------------------------------------------------------
# restrict_space


def test_restrict_cnn_small_on_a_cpu() -> None:
    space, removed = restrict_space(load_space("cnn_small"), make_capabilities("cpu", count=2))

    assert space.precision.values() == ["fp32", "fp16", "bf16"]
    assert space.compile_mode.values() == ["none", "default", "max-autotune"]
    assert space.gpu_count.values() == [1, 2]
    assert removed == [
        "precision=tf32: tf32 is a CUDA tensor-core mode; the CPU has no TF32",
        "compile_mode=reduce-overhead: compile mode reduce-overhead uses CUDA graphs and needs "
        "a CUDA device",
    ]


def test_restrict_removes_world_sizes_beyond_the_device() -> None:
    space, removed = restrict_space(load_space("cnn_small"), make_capabilities("cuda", count=1))

    assert space.gpu_count.values() == [1]
    assert removed == ["gpu_count=2: gpu_count=2 exceeds the 1 GPUs of fake GPU"]


def test_restrict_turns_a_gpu_range_into_choices(write_space: Callable[..., Path]) -> None:
    path = write_space(MINIMAL_SPACE + "gpu_count: {low: 1, high: 8}\n")

    space, removed = restrict_space(load_space(str(path)), make_capabilities("mock"))

    assert space.gpu_count.values() == [1, 2, 3, 4]
    assert len(removed) == 4


def test_restrict_on_volta(write_space: Callable[..., Path]) -> None:
    space, removed = restrict_space(load_space("cnn_small"), VOLTA)

    assert space.precision.values() == ["fp32", "fp16"]
    assert space.compile_mode.values() == load_space("cnn_small").compile_mode.values()
    assert [line.split(":")[0] for line in removed] == ["precision=tf32", "precision=bf16"]


def test_restrict_keeps_the_space_order(write_space: Callable[..., Path]) -> None:
    path = write_space(MINIMAL_SPACE + "precision: [bf16, tf32, fp32]\n")

    space, _ = restrict_space(load_space(str(path)), make_capabilities("cpu"))

    assert space.precision.values() == ["bf16", "fp32"]


def test_restrict_leaves_a_feasible_space_alone() -> None:
    # On digits (8x8) every cnn_small choice fits the mock's 64 MiB GPU; on the 28x28 MNIST
    # of cnn_small's default, the widest and largest batches do not.
    original = load_space("cnn_small", ["data=digits"])

    space, removed = restrict_space(original, make_capabilities("mock"))

    assert removed == []
    assert space == original


def test_restrict_errors_when_no_choice_is_left(write_space: Callable[..., Path]) -> None:
    path = write_space(MINIMAL_SPACE + "precision: tf32\n")

    with pytest.raises(ConfigError) as err:
        restrict_space(load_space(str(path)), make_capabilities("cpu"))

    assert str(err.value) == (
        "space tiny: precision: no choice can run on fake CPU "
        "(precision=tf32: tf32 is a CUDA tensor-core mode; the CPU has no TF32)"
    )


def test_restrict_errors_when_every_world_size_is_too_large() -> None:
    space = load_space("cnn_small", ["gpu_count=[2,4]"])

    with pytest.raises(ConfigError, match=r"^space cnn_small: gpu_count: no choice can run"):
        restrict_space(space, make_capabilities("cuda", count=1))


def test_a_global_batch_the_micro_batches_do_not_make_up_is_infeasible() -> None:
    caps = make_capabilities("mock", count=2)
    fits = make_trial_config(
        device="mock", batch_size=16, gpu_count=2, train={"global_batch_size": 64}
    )
    odd = make_trial_config(
        device="mock", batch_size=64, gpu_count=2, train={"global_batch_size": 64}
    )

    assert trial_infeasibility_reason(fits, caps) is None
    assert trial_infeasibility_reason(odd, caps) == (
        "train.global_batch_size=64 is not a multiple of batch_size x gpu_count = 64 x 2 = 128"
    )


def test_the_memory_margin_reads_the_estimate_as_too_low_where_the_rules_read_it_too_high() -> None:
    config = make_trial_config(device="mock", width=32, batch_size=64)
    estimate = estimate_trial_memory(config, make_capabilities("mock")).total_bytes
    tolerance = 1 + MEMORY_ESTIMATE_TOLERANCE

    def caps(memory_bytes: int | None) -> Any:
        return make_capabilities("mock", memory_bytes=memory_bytes)

    assert fits_memory_with_margin(config, caps(math.ceil(estimate * tolerance)))
    assert not fits_memory_with_margin(config, caps(int(estimate * tolerance) - 1024))
    assert fits_memory_with_margin(config, caps(None))  # no memory figure: nothing to test
    # Between the two thresholds: the rules let the trial run, the margin test does not.
    between = caps(estimate)
    assert trial_infeasibility_reason(config, between) is None
    assert not fits_memory_with_margin(config, between)


# --------------------------------------------------------------------------------------------
# CUDA graphs (reduce-overhead; max-autotune on CUDA) under DDP and gradient accumulation


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
def test_cuda_graphs_under_ddp_are_refused_until_measured(mode: str) -> None:
    caps = make_capabilities("cuda", count=2)

    reason = infeasibility_reason(_knobs(compile_mode=mode, gpu_count=2), caps)

    # Recorded again every step (issue 38, item 10): the trial would time the recording.
    assert reason == (
        f"compile mode {mode} records CUDA graphs, which DDP (gpu_count=2) records again "
        "every step (pytorch/pytorch#140395): refused until measured"
    )
    assert infeasibility_reason(_knobs(compile_mode=mode, gpu_count=1), caps) is None
    assert infeasibility_reason(_knobs(compile_mode="default", gpu_count=2), caps) is None


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
def test_cuda_graphs_with_gradient_accumulation_are_refused(mode: str) -> None:
    caps = make_capabilities("cuda")
    accumulating = make_trial_config(
        device="cuda", compile_mode=mode, batch_size=32, train={"global_batch_size": 128}
    )

    reason = trial_infeasibility_reason(accumulating, caps)

    # The next micro-batch's replay overwrites what the previous backward reads (item 2).
    assert reason == (
        f"compile mode {mode} records CUDA graphs, whose replays overwrite the previous "
        "micro-batch's outputs under gradient accumulation (4 micro-batches per step; "
        "pytorch/pytorch#169545): refused"
    )
    one_micro_batch = make_trial_config(
        device="cuda", compile_mode=mode, batch_size=128, train={"global_batch_size": 128}
    )
    assert trial_infeasibility_reason(one_micro_batch, caps) is None
    eager = make_trial_config(
        device="cuda", compile_mode="default", batch_size=32, train={"global_batch_size": 128}
    )
    assert trial_infeasibility_reason(eager, caps) is None


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
def test_a_simulated_gpu_refuses_cuda_graphs_as_a_gpu_does(mode: str) -> None:
    # The mock's h100 ran reduce-overhead under DDP and gradient accumulation, which a real
    # GPU refuses: its tour recommended a combination no GPU runs.
    caps = detect_capabilities("mock", mock_profile="h100")
    ddp = make_trial_config(device="mock", mock_profile="h100", compile_mode=mode, gpu_count=2)
    accumulating = make_trial_config(
        device="mock",
        mock_profile="h100",
        compile_mode=mode,
        batch_size=32,
        train={"global_batch_size": 128},
    )

    assert "which DDP (gpu_count=2) records again" in str(trial_infeasibility_reason(ddp, caps))
    assert "under gradient accumulation (4 micro-batches" in str(
        trial_infeasibility_reason(accumulating, caps)
    )
    one_gpu = make_trial_config(device="mock", mock_profile="h100", compile_mode=mode)
    assert trial_infeasibility_reason(one_gpu, caps) is None


def test_max_autotune_on_the_cpu_records_no_cuda_graphs() -> None:
    config = make_trial_config(
        compile_mode="max-autotune", gpu_count=2, batch_size=16, train={"global_batch_size": 64}
    )

    assert trial_infeasibility_reason(config, make_capabilities("cpu")) is None


# --------------------------------------------------------------------------------------------
# The Tuning Guide's knobs

GUIDE_SPACE = (
    MINIMAL_SPACE
    + """\
optimizer_impl: [default, for_loop, foreach, fused]
activation_checkpointing: [false, true]
cpu_threads: [0, 1, 64]
cudnn_benchmark: [false, true]
cuda_expandable_segments: [false, true]
data_parallel: [ddp, fsdp]
gpu_count: [1, 2]
"""
)


def test_a_cpu_keeps_the_guides_knobs_it_can_run_and_says_why_it_drops_the_rest(
    write_space: Callable[..., Path],
) -> None:
    space = load_space(str(write_space(GUIDE_SPACE)))

    restricted, removed = restrict_space(space, make_capabilities("cpu", count=2))

    assert restricted.cudnn_benchmark.values() == [False]
    assert restricted.cuda_expandable_segments.values() == [False]
    assert restricted.cpu_threads.values() == [0, 1]
    assert restricted.optimizer_impl.values() == ["default", "for_loop", "foreach", "fused"]
    assert restricted.data_parallel.values() == ["ddp", "fsdp"]
    assert restricted.activation_checkpointing.values() == [False, True]  # cnn: blocks known
    reasons = dict(line.split(": ", 1) for line in removed)
    assert reasons["cudnn_benchmark=True"] == (
        "cuDNN's autotuning (torch.backends.cudnn.benchmark) needs a CUDA device"
    )
    assert "expandable segments needs a CUDA device" in reasons["cuda_expandable_segments=True"]
    assert reasons["cpu_threads=64"] == "cpu_threads=64 exceeds the 2 CPU cores of " + (
        make_capabilities("cpu", count=2).name
    )


def test_a_gpu_keeps_its_cuda_settings(write_space: Callable[..., Path]) -> None:
    space = load_space(str(write_space(GUIDE_SPACE)))

    restricted, _ = restrict_space(space, make_capabilities("cuda", count=2))

    assert restricted.cudnn_benchmark.values() == [False, True]
    assert restricted.cuda_expandable_segments.values() == [False, True]


@pytest.mark.parametrize(
    ("door", "knob", "value", "reason"),
    [
        ("lightning", "optimizer_impl", "fused", "give it foreach= or fused= there"),
        ("hf_trainer", "optimizer_impl", "foreach", "adamw_torch) or fused (adamw_torch_fused)"),
        ("hf_trainer", "data_parallel", "fsdp", "the hf_trainer door shards with DDP"),
        ("lightning", "data_parallel", "fsdp", "the lightning door shards with DDP"),
        ("loop", "activation_checkpointing", True, "name the model's blocks to checkpoint"),
    ],
)
def test_a_door_refuses_the_guide_knobs_it_cannot_apply(
    write_space: Callable[..., Path], door: str, knob: str, value: Any, reason: str
) -> None:
    (Path(write_space("", "train.py")).parent / "train.py").write_text("def f(trial): ...\n")
    text = (
        f"name: doors\n{door}: train.py:f\nbatch_size: [32]\ngpu_count: [1, 2]\n"
        f"{knob}: {[GUIDE_DEFAULTS[knob], value]}\n".replace("'", "")
    )
    space = load_space(str(write_space(text)))

    _, removed = restrict_space(space, make_capabilities("cuda", count=2))

    assert any(line.startswith(f"{knob}={value}: ") and reason in line for line in removed), removed


GUIDE_DEFAULTS: dict[str, Any] = {
    "optimizer_impl": "default",
    "data_parallel": "ddp",
    "activation_checkpointing": False,
}


def test_fsdp_needs_several_ranks() -> None:
    caps = make_capabilities("cuda", count=2)

    assert infeasibility_reason(_knobs(data_parallel="fsdp"), caps) == (
        "data_parallel=fsdp shards over ranks, and gpu_count=1 has one"
    )
    assert infeasibility_reason(_knobs(data_parallel="fsdp", gpu_count=2), caps) is None


def test_fused_sgd_over_fsdp_shards_is_refused() -> None:
    config = make_trial_config(
        gpu_count=2, data_parallel="fsdp", optimizer_impl="fused", train={"optimizer": "sgd"}
    )

    reason = trial_infeasibility_reason(config, make_capabilities("cpu", count=2))

    assert reason is not None and "fused SGD over FSDP2's shards" in reason
