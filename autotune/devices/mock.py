"""The ``mock`` device: a SIMULATION for tests and demos. Nothing here trains or measures.

An analytic cost model, in the spirit of ``torch.utils.benchmark``'s ``_MockTimer``: a trial's
step time comes from per-precision FLOP rates, kernel-launch overhead, the input pipeline and
DDP communication; its memory from parameters, optimizer state and activations; its accuracy
from model capacity and the number of optimizer steps. Results are deterministic per seed and
cost milliseconds. Every measurement it returns has ``simulated=True``.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field

import numpy as np

from autotune.config import TrialConfig
from autotune.hardware import DeviceCapabilities
from autotune.measure import Measurement, summarize_steps

__all__ = ["DEFAULT_PROFILE", "MockProfile", "simulate"]

_MIB = 1 << 20


@dataclass(frozen=True)
class MockProfile:
    """The simulated GPU's parameters.

    Attributes:
        name: label shown everywhere the device is named (always says "simulated").
        memory_bytes: capacity; a trial whose modelled peak exceeds it runs out of memory.
        count: GPUs in the simulated machine (the largest world size).
        compute_capability: CUDA capability the feasibility rules see.
        peak_flops: dense FLOP/s per precision.
        launch_overhead_s: host cost of one kernel launch in eager mode.
        host_sample_s: input-pipeline seconds per 28x28 sample on one worker.
        allreduce_bytes_per_s: DDP gradient all-reduce bandwidth.
    """

    name: str
    memory_bytes: int
    count: int
    compute_capability: tuple[int, int]
    peak_flops: dict[str, float] = field(default_factory=dict)
    launch_overhead_s: float = 8e-6
    host_sample_s: float = 4e-6
    allreduce_bytes_per_s: float = 50e9

    def capabilities(self) -> DeviceCapabilities:
        """The profile as the feasibility rules see it."""
        return DeviceCapabilities(
            kind="mock",
            name=self.name,
            count=self.count,
            memory_bytes=self.memory_bytes,
            compute_capability=self.compute_capability,
            simulated=True,
        )


#: A deliberately small simulated GPU (A100 rates, 64 MiB), so that memory limits show up in
#: the small demo spaces. Rates: NVIDIA A100 datasheet dense peaks (fp32 19.5, tf32 156,
#: fp16/bf16 312 TFLOP/s).
DEFAULT_PROFILE = MockProfile(
    name="mock GPU (simulated; A100 rates, 64 MiB)",
    memory_bytes=64 * _MIB,
    count=4,
    compute_capability=(8, 0),
    peak_flops={"fp32": 19.5e12, "tf32": 156e12, "fp16": 312e12, "bf16": 312e12},
)

#: Nominal data shapes the simulation assumes: (C, H, W), training samples, accuracy ceiling.
_NOMINAL_DATA = {
    "digits": ((1, 8, 8), 1438, 0.985),
    "mnist": ((1, 28, 28), 48000, 0.993),
    "fashion_mnist": ((1, 28, 28), 48000, 0.92),
    "synthetic": ((1, 28, 28), 3277, 0.1),
}
_BYTES = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2}
#: Relative compute time and launch overhead per compile mode (fusion cuts launches; CUDA
#: graphs in reduce-overhead nearly remove them), and the modelled compile seconds per block.
_COMPILE = {
    "none": (1.0, 1.0, 0.0),
    "default": (0.9, 0.5, 6.0),
    "reduce-overhead": (0.9, 0.05, 8.0),
    "max-autotune": (0.8, 0.45, 25.0),
}


def _model_cost(config: TrialConfig, shape: tuple[int, int, int]) -> tuple[float, int, int]:
    """(forward FLOPs per sample, parameters, activation elements per sample)."""
    c, h, w = shape
    flops, params, acts = 0.0, 0, 0
    if config.family == "cnn":
        for i in range(config.depth):
            out = config.width * 2**i
            flops += 2 * h * w * c * out * 9
            params += c * out * 9 + 2 * out
            acts += 3 * h * w * out  # conv, BatchNorm and ReLU outputs saved for backward
            if h >= 2:
                h, w = h // 2, w // 2
            c = out
        features = c
    else:
        features = c * h * w
        for _ in range(config.depth):
            flops += 2 * features * config.width
            params += features * config.width + config.width
            acts += 2 * config.width
            features = config.width
    flops += 2 * features * 10
    params += features * 10 + 10
    return flops, params, acts


def _rng(config: TrialConfig) -> np.random.Generator:
    digest = hashlib.sha256(config.model_dump_json().encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def simulate(config: TrialConfig, profile: MockProfile = DEFAULT_PROFILE) -> Measurement:
    """Simulate one trial on the mock GPU.

    Args:
        config: the trial configuration (``device`` should be ``mock``).
        profile: the simulated GPU.

    Returns:
        A :class:`Measurement` with ``simulated=True`` and ``memory_kind="simulated"``.

    Raises:
        MemoryError: when the modelled peak memory exceeds ``profile.memory_bytes`` (the trial
            runner records it as ``failure=oom``).
    """
    shape, n_train, acc_ceiling = _NOMINAL_DATA[config.data.name]
    if config.data.name == "synthetic":
        n_train = int(config.data.synthetic_samples * (1 - config.data.val_fraction))
    fwd_flops, params, acts = _model_cost(config, shape)
    batch, world = config.batch_size, config.gpu_count
    rng = _rng(config)

    # Memory: fp32 weights + grads + AdamW moments, activations at the autocast width, workspace.
    optimizer_bytes = params * (16 if config.train.optimizer == "adamw" else 12)
    compute_rel, launch_rel, compile_per_block_s = _COMPILE[config.compile_mode]
    activation_bytes = batch * acts * _BYTES[config.precision] * (0.85 if compute_rel < 1 else 1.0)
    peak_bytes = int(optimizer_bytes + activation_bytes + 4 * _MIB)
    if peak_bytes > profile.memory_bytes:
        raise MemoryError(
            f"simulated CUDA out of memory: needs {peak_bytes} bytes, "
            f"the mock GPU has {profile.memory_bytes}"
        )

    # Step time: compute at a utilization that grows with batch and width, plus launches,
    # plus the input pipeline (overlapped with compute when workers > 0), plus all-reduce.
    utilization = 0.7 * batch / (batch + 4096 / config.width)
    layout_gain = (
        1.25
        if (
            config.family == "cnn"
            and config.memory_format == "channels_last"
            and config.precision in ("fp16", "bf16")
        )
        else 1.0
    )
    rate = profile.peak_flops[config.precision] * utilization * layout_gain
    compute_s = batch * 3 * fwd_flops / rate * compute_rel
    launch_s = (10 * config.depth + 8) * profile.launch_overhead_s * launch_rel
    load_s = batch * profile.host_sample_s * (shape[1] * shape[2]) / 784
    if config.num_workers > 0:
        step_s = max(compute_s + launch_s, load_s / config.num_workers)
    else:
        step_s = compute_s + launch_s + load_s
    if world > 1:
        step_s += 30e-6 + 2 * params * 4 / profile.allreduce_bytes_per_s

    steps = max(1, config.train.epochs * (n_train // (batch * world)))
    if config.train.max_steps is not None:
        steps = min(steps, config.train.max_steps)
    timed = max(1, steps - config.train.warmup_steps)
    step_times = list(step_s * rng.lognormal(0.0, 0.02, size=timed))
    stats = summarize_steps(
        step_times, batch * world, config.measure.windows, config.measure.min_window_steps
    )
    compile_s = compile_per_block_s * (1 + config.depth) if config.compile_mode != "none" else 0.0

    # Accuracy: a ceiling, minus under-capacity and under-training penalties, plus noise.
    capacity = math.sqrt(config.depth * config.width / 8)
    accuracy = (
        acc_ceiling
        - 0.03 / capacity
        - 0.25 * math.exp(-steps / 60)
        - (0.003 if config.precision == "fp16" else 0.0)
        + rng.normal(0.0, 0.003)
    )
    return Measurement(
        throughput_sps=stats.throughput_sps,
        throughput_iqr_sps=stats.throughput_iqr_sps,
        step_time_s=stats.step_time_s,
        step_time_p90_s=stats.step_time_p90_s,
        compile_s=compile_s,
        peak_memory_bytes=peak_bytes,
        val_accuracy=float(min(1.0, max(0.0, accuracy))),
        train_loss=float(max(0.01, 2.3 * math.exp(-steps / 80))),
        train_s=compile_s + steps * step_s,
        steps=steps,
        timed_steps=stats.timed_steps,
        samples_per_step=batch * world,
        parameters=params,
        memory_kind="simulated",
        simulated=True,
        window_throughputs_sps=stats.window_throughputs_sps,
    )
