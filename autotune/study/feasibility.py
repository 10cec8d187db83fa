"""The feasibility rules: the one place that decides whether a configuration can run on a
device, before the study launches it.

They sit on the study side: the memory rule traces the trial's model
(:func:`autotune.trial.workloads.profile_workload`) and hands its profile to the machine's
memory model (:func:`autotune.core.hardware.estimate_memory`), which knows no workload.

Each rule is a small pure function returning the reason a choice cannot run, or None.
:func:`restrict_space` removes the choices the device can never run before a study starts (and
the precisions the precision screen, :func:`autotune.core.hardware.screen_precisions`, leaves
out); :func:`trial_infeasibility_reason` names the rule any remaining configuration breaks, so it
is never launched (the study records it with ``failure=infeasible``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from autotune.core.config import (
    BUILTIN_BLOCKS,
    COMPILE_MODES,
    GUIDE_KNOBS,
    PRECISIONS,
    IntParam,
    SearchSpace,
    TrialConfig,
    global_batch_reason,
)
from autotune.core.exceptions import ConfigError
from autotune.core.hardware import (
    CPU_RUNTIME_BYTES,
    CUDA_GRAPH_MODES,
    CUDA_RUNTIME_BYTES,
    MEMORY_ESTIMATE_TOLERANCE,
    MOCK_RUNTIME_BYTES,
    DeviceCapabilities,
    MemoryEstimate,
    estimate_memory,
    precision_reason,
)
from autotune.core.units import MIB
from autotune.trial.workloads import profile_workload

__all__ = [
    "CUDA_GRAPH_MODES",
    "estimate_trial_memory_or_none",
    "infeasibility_reason",
    "restrict_space",
    "trial_infeasibility_reason",
]


def _compile_reason(mode: str, caps: DeviceCapabilities) -> str | None:
    if mode == "reduce-overhead" and not caps.is_gpu:
        return "compile mode reduce-overhead uses CUDA graphs and needs a CUDA device"
    return None


def _cuda_graph_ddp_reason(mode: str, gpu_count: int, caps: DeviceCapabilities) -> str | None:
    """CUDA graphs under DDP: recorded again at every step (pytorch/pytorch issue 140395,
    open for torch 2.5 and later), so the trial would time the recording, not the replays.
    Refused until measured on a GPU; on a simulated GPU too (a mock profile's), which
    follows a GPU's rules though its cost model has no such recording."""
    if caps.is_gpu and mode in CUDA_GRAPH_MODES and gpu_count > 1:
        return (
            f"compile mode {mode} records CUDA graphs, which DDP (gpu_count={gpu_count}) "
            "records again every step (pytorch/pytorch#140395): refused until measured"
        )
    return None


def _cuda_graph_accumulation_reason(
    mode: str, accumulation_steps: int, caps: DeviceCapabilities
) -> str | None:
    """CUDA graphs with gradient accumulation: the next micro-batch's replay overwrites the
    outputs the previous one's backward still needs (pytorch/pytorch issue 169545: an error,
    or wrong gradients). Refused, not compiled without CUDA graphs: the knob's value would
    then not be what ran. On a simulated GPU too, as :func:`_cuda_graph_ddp_reason`."""
    if caps.is_gpu and mode in CUDA_GRAPH_MODES and accumulation_steps > 1:
        return (
            f"compile mode {mode} records CUDA graphs, whose replays overwrite the previous "
            f"micro-batch's outputs under gradient accumulation ({accumulation_steps} "
            "micro-batches per step; pytorch/pytorch#169545): refused"
        )
    return None


def _world_size_reason(gpu_count: int, caps: DeviceCapabilities) -> str | None:
    if gpu_count > caps.count:
        unit = "GPUs" if caps.is_gpu else "CPU cores"
        return f"gpu_count={gpu_count} exceeds the {caps.count} {unit} of {caps.name}"
    return None


def _cuda_setting_reason(knob: str, value: Any, caps: DeviceCapabilities) -> str | None:
    """cuDNN's autotuning and the CUDA caching allocator's expandable segments exist on a
    CUDA device only."""
    if value and not caps.is_gpu:
        what = {
            "cudnn_benchmark": "cuDNN's autotuning (torch.backends.cudnn.benchmark)",
            "cuda_expandable_segments": "the CUDA caching allocator's expandable segments",
        }[knob]
        return f"{what} needs a CUDA device"
    return None


def _cpu_threads_reason(threads: int, caps: DeviceCapabilities) -> str | None:
    if caps.kind == "cpu" and threads > caps.count:
        return f"cpu_threads={threads} exceeds the {caps.count} CPU cores of {caps.name}"
    return None


def _has_fully_shard() -> bool:
    """Whether this torch has FSDP2's ``fully_shard`` in its public place (torch >= 2.6)."""
    try:
        from torch.distributed.fsdp import fully_shard  # noqa: F401
    except ImportError:
        return False
    return True


def _door_knob_reason(space: SearchSpace, knob: str, value: Any) -> str | None:
    """A guide knob's value the space's door cannot apply (and one that needs the model's
    blocks when the space names none)."""
    door = space.door
    if knob == "optimizer_impl" and value != "default":
        if door == "lightning":
            return (
                "the lightning door trains the optimizer your configure_optimizers() builds: "
                "give it foreach= or fused= there"
            )
        if door == "hf_trainer" and value != "fused":
            return (
                "the hf_trainer door picks the optimizer by TrainingArguments.optim, whose "
                "PyTorch AdamW is PyTorch's default (adamw_torch) or fused (adamw_torch_fused)"
            )
    needs_blocks = door != "hf_trainer" and space.model.family is None and not space.blocks
    if knob == "activation_checkpointing" and value and needs_blocks:
        return (
            "name the model's blocks to checkpoint (blocks: [ClassName, ...], the module "
            "classes each wrapped in torch.utils.checkpoint)"
        )
    if knob == "data_parallel" and value == "fsdp":
        if door in ("hf_trainer", "lightning"):
            return (
                f"the {door} door shards with DDP; FSDP through its framework (Accelerate's or "
                "Lightning's FSDP) is yours to set in your code"
            )
        if not _has_fully_shard():
            return "FSDP2's fully_shard needs torch >= 2.6 (torch.distributed.fsdp.fully_shard)"
    return None


def _fused_sgd_fsdp_reason(config: TrialConfig) -> str | None:
    """Fused SGD over FSDP2's shards: torch 2.13 registers no DTensor strategy for
    ``aten._fused_sgd_`` (fused Adam and AdamW, and foreach SGD, run). The workload door's
    optimizer only; a door's own optimizer fails its trial (``failure=error``)."""
    if (
        config.workload.door == "workload"
        and config.data_parallel == "fsdp"
        and config.gpu_count > 1
        and config.optimizer_impl == "fused"
        and config.train.optimizer == "sgd"
    ):
        return (
            "fused SGD over FSDP2's shards has no DTensor strategy (aten._fused_sgd_); use "
            "foreach, or AdamW"
        )
    return None


def _fsdp_world_size_reason(data_parallel: str, gpu_count: int) -> str | None:
    if data_parallel == "fsdp" and gpu_count == 1:
        return "data_parallel=fsdp shards over ranks, and gpu_count=1 has one"
    return None


def _memory_reason(estimate: MemoryEstimate, caps: DeviceCapabilities) -> str | None:
    """Refuse a trial that cannot fit even if its estimate is :data:`MEMORY_ESTIMATE_TOLERANCE`
    too high: ``estimate / (1 + tolerance) > memory`` (per GPU; the host RAM on the CPU)."""
    if caps.memory_bytes is None:
        return None
    # The estimate is within the tolerance of the true peak: true >= estimate / (1 + tol).
    if estimate.total_bytes / (1 + MEMORY_ESTIMATE_TOLERANCE) <= caps.memory_bytes:
        return None
    where = "per GPU " if caps.is_gpu else ""
    return (
        f"estimated peak memory {estimate.total_bytes / MIB:,.1f} MiB {where}"
        f"({estimate.describe()}) exceeds the {caps.memory_bytes / MIB:,.0f} MiB of "
        f"{caps.name} even if it is {MEMORY_ESTIMATE_TOLERANCE:.0%} too high"
    )


def infeasibility_reason(knobs: Mapping[str, Any], caps: DeviceCapabilities) -> str | None:
    """The first knob rule a configuration breaks on this device, or None.

    Checks precision, compile mode, world size, and CUDA graphs under DDP (not memory nor
    gradient accumulation: see :func:`trial_infeasibility_reason`).

    Args:
        knobs: the trial's knob values (``TrialConfig.knobs()``).
        caps: the device's capabilities.
    """
    return (
        precision_reason(knobs["precision"], caps)
        or _compile_reason(knobs["compile_mode"], caps)
        or _world_size_reason(knobs["gpu_count"], caps)
        or _cuda_graph_ddp_reason(knobs["compile_mode"], knobs["gpu_count"], caps)
        or _cuda_setting_reason("cudnn_benchmark", knobs.get("cudnn_benchmark"), caps)
        or _cuda_setting_reason(
            "cuda_expandable_segments", knobs.get("cuda_expandable_segments"), caps
        )
        or _cpu_threads_reason(int(knobs.get("cpu_threads", 0)), caps)
        or _fsdp_world_size_reason(str(knobs.get("data_parallel", "ddp")), knobs["gpu_count"])
    )


def estimate_trial_memory_or_none(
    config: TrialConfig, caps: DeviceCapabilities
) -> MemoryEstimate | None:
    """:func:`estimate_trial_memory`, or None when the workload raises while its model is
    built or traced: the memory rules then let the configuration through (and the study's
    memory prior gives it none, :func:`autotune.study.search.prior_mean`), and the trial itself
    fails with the workload's error (recorded as ``failure=error``). None too for the doors
    whose model exists only inside the user's function (``loop``, ``hf_trainer``,
    ``lightning``): nothing here can build it."""
    if config.workload.door != "workload":
        return None
    try:
        return estimate_trial_memory(config, caps)
    except Exception:  # the workload's own error; its trial reports it
        return None


def trial_infeasibility_reason(config: TrialConfig, caps: DeviceCapabilities) -> str | None:
    """Every rule: the knob rules of :func:`infeasibility_reason`, then the fixed global
    batch (``train.global_batch_size`` must be a whole number of ``batch_size x gpu_count``
    micro-batches; the space refuses a choice that never is, so only some combinations get
    here) and CUDA graphs with more than one micro-batch, then the memory estimate (skipped
    when the workload cannot be traced for it)."""
    knob_reason = infeasibility_reason(config.knobs(), caps)
    if knob_reason is not None:
        return knob_reason
    total = config.train.global_batch_size
    if total is not None:
        batch_reason = global_batch_reason(total, config.batch_size, config.gpu_count)
        if batch_reason is not None:
            return batch_reason
        accumulation = config.train.accumulation_steps(config.batch_size, config.gpu_count)
        graph_reason = _cuda_graph_accumulation_reason(config.compile_mode, accumulation, caps)
        if graph_reason is not None:
            return graph_reason
    sharded_sgd_reason = _fused_sgd_fsdp_reason(config)
    if sharded_sgd_reason is not None:
        return sharded_sgd_reason
    estimate = estimate_trial_memory_or_none(config, caps)
    return None if estimate is None else _memory_reason(estimate, caps)


def fits_memory_with_margin(config: TrialConfig, caps: DeviceCapabilities) -> bool:
    """Whether the trial fits in the device's memory even if its estimate is
    :data:`MEMORY_ESTIMATE_TOLERANCE` too low: ``estimate * (1 + tolerance) <= memory`` (per
    GPU; the host RAM on the CPU). True when the device has no memory figure or the workload
    cannot be traced for an estimate.

    The rules (:func:`trial_infeasibility_reason`) refuse only what cannot fit even with the
    estimate too high; between the two thresholds a trial may or may not run out of memory.
    A start-up design prefers rows that pass this test (:func:`autotune.study.search.startup_design`):
    a start-up trial that runs out of memory teaches the model only where trials fail.
    """
    if caps.memory_bytes is None:
        return True
    estimate = estimate_trial_memory_or_none(config, caps)
    if estimate is None:
        return True
    return estimate.total_bytes * (1 + MEMORY_ESTIMATE_TOLERANCE) <= caps.memory_bytes


def _smallest_trial(space: SearchSpace, caps: DeviceCapabilities, **fixed: Any) -> TrialConfig:
    """The configuration of ``space`` with the least memory, some knobs held at ``fixed``:
    every model knob at its least value (:meth:`~autotune.core.config.IntParam.smallest`)."""
    knobs = {
        **{name: knob.smallest() for name, knob in space.model.knobs.items()},
        "batch_size": min(space.batch_size.values()),
        "precision": min(space.precision.values(), key=lambda p: {"fp16": 0, "bf16": 0}.get(p, 1)),
        "memory_format": space.memory_format.values()[0],
        "compile_mode": space.compile_mode.values()[0],
        "num_workers": min(space.num_workers.values()),
        "gpu_count": min(space.gpu_count.values()),
        **fixed,
    }
    return TrialConfig.from_knobs(knobs, space, device=caps.kind)


def _memory_restricted(
    space: SearchSpace, caps: DeviceCapabilities, removed: list[str]
) -> SearchSpace:
    """Remove batch sizes and integer model-knob values that do not fit even with every other
    knob at its least value.

    Assumes the memory grows with each integer model knob (sizes: depth, width, layers,
    channels); a knob where it does not keeps its values, since its smallest configuration
    then fits. Real-valued and categorical model knobs are never removed.
    """
    if caps.memory_bytes is None:
        return space
    sized: dict[str, IntParam] = {
        name: knob for name, knob in space.model.knobs.items() if isinstance(knob, IntParam)
    }
    sized["batch_size"] = space.batch_size
    largest = _smallest_trial(space, caps, **{name: p.largest() for name, p in sized.items()})
    estimate = estimate_trial_memory_or_none(largest, caps)
    if estimate is not None and _memory_reason(estimate, caps) is None:
        return space  # the largest model at the largest batch fits: nothing to remove
    kept: dict[str, list[int]] = {}
    for name, param in sized.items():
        kept[name] = []
        for value in param.values():
            estimate = estimate_trial_memory_or_none(
                _smallest_trial(space, caps, **{name: value}), caps
            )
            reason = None if estimate is None else _memory_reason(estimate, caps)
            if reason is None:
                kept[name].append(value)
            else:
                removed.append(f"{name}={value}: {reason}")
        if not kept[name]:
            raise ConfigError(
                f"space {space.name}: {name}: no choice fits in the memory of {caps.name} "
                f"({removed[-1]})"
            )
    shrunk = {n: p.restricted(kept[n]) for n, p in sized.items() if len(kept[n]) < len(p.values())}
    if not shrunk:
        return space
    model_knobs = {n: shrunk.get(n, k) for n, k in space.model.knobs.items()}
    model = space.model.model_copy(update={"knobs": model_knobs})
    batch = shrunk.get("batch_size", space.batch_size)
    return space.model_copy(update={"model": model, "batch_size": batch})


def restrict_space(
    space: SearchSpace, caps: DeviceCapabilities, screened: Mapping[str, str] | None = None
) -> tuple[SearchSpace, list[str]]:
    """Remove the choices the device can never run, and the precisions screened out.

    Precision, compile mode and world size follow their rules; the precisions in
    ``screened`` go next (the precision screen, :func:`autotune.core.hardware.screen_precisions`);
    then batch sizes and integer model-knob values are removed whose smallest configuration
    already exceeds the memory (with the precisions that are left).

    Args:
        space: the search space.
        caps: the device.
        screened: precisions to remove besides the rules', each with its reason (a precision
            the space lacks is ignored; the screen never lists every precision left).

    Returns:
        The restricted space and one line per removed choice with the rule's reason.

    Raises:
        ConfigError: when a knob would be left with no choice at all.
    """
    removed: list[str] = []
    screened = screened or {}

    def keep(knob: str, values: Sequence[Any], reason_of: Any) -> list[Any]:
        kept = []
        for value in values:
            reason = reason_of(value, caps)
            if reason is None:
                kept.append(value)
            else:
                removed.append(f"{knob}={value}: {reason}")
        if not kept:
            raise ConfigError(
                f"space {space.name}: {knob}: no choice can run on {caps.name} ({removed[-1]})"
            )
        return kept

    precision = keep(
        "precision", [p for p in PRECISIONS if p in space.precision.values()], precision_reason
    )
    unscreened = [p for p in precision if p not in screened]
    if unscreened:  # never empty; a stored screen on another space: open_study refuses that
        removed.extend(f"precision={p}: {screened[p]}" for p in precision if p in screened)
        precision = unscreened
    compile_mode = keep(
        "compile_mode",
        [m for m in COMPILE_MODES if m in space.compile_mode.values()],
        _compile_reason,
    )
    gpu_count = keep("gpu_count", space.gpu_count.values(), _world_size_reason)
    update: dict[str, Any] = {
        "precision": space.precision.restricted(precision),
        "compile_mode": space.compile_mode.restricted(compile_mode),
        "gpu_count": space.gpu_count.restricted(gpu_count)
        if len(gpu_count) < len(space.gpu_count.values())
        else space.gpu_count,
    }
    for name in GUIDE_KNOBS:
        param = getattr(space, name)

        def reason_of(value: Any, caps: DeviceCapabilities, name: str = name) -> str | None:
            if name in ("cudnn_benchmark", "cuda_expandable_segments"):
                return _cuda_setting_reason(name, value, caps)
            if name == "cpu_threads":
                return _cpu_threads_reason(int(value), caps)
            return _door_knob_reason(space, name, value)

        kept = keep(name, param.values(), reason_of)
        if len(kept) < len(param.values()):
            update[name] = param.restricted(kept)
    restricted = space.model_copy(update=update)
    if not removed:
        restricted = space
    restricted = _memory_restricted(restricted, caps, removed)
    return restricted, removed


def _runtime_bytes(caps: DeviceCapabilities) -> int:
    if caps.kind == "mock":
        return MOCK_RUNTIME_BYTES if caps.is_gpu else CPU_RUNTIME_BYTES
    return CUDA_RUNTIME_BYTES if caps.kind == "cuda" else CPU_RUNTIME_BYTES


def estimate_trial_memory(config: TrialConfig, caps: DeviceCapabilities) -> MemoryEstimate:
    """:func:`estimate_memory` for a trial configuration on a device (traces its model once
    per process: :func:`autotune.trial.workloads.profile_workload`).

    Raises:
        WorkloadError: the workload cannot be loaded.
        Exception: whatever the workload's model or data raise while it is traced.
    """
    blocks = config.blocks or (BUILTIN_BLOCKS if config.workload.is_builtin else ())
    needs_blocks = config.activation_checkpointing or config.data_parallel == "fsdp"
    profile = profile_workload(
        config.workload, config.model, config.precision, tuple(blocks) if needs_blocks else ()
    )
    return estimate_memory(
        profile,
        batch_size=config.batch_size,
        num_workers=config.num_workers,
        world_size=config.gpu_count,
        optimizer=config.train.optimizer,
        on_gpu=caps.is_gpu,
        runtime_bytes=_runtime_bytes(caps),
        checkpointing=config.activation_checkpointing,
        sharded=config.data_parallel == "fsdp",
    )
