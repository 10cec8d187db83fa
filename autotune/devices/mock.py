"""The ``mock`` device: a SIMULATION for tests and demos. Nothing here trains or measures.

An analytic cost model, in the spirit of ``torch.utils.benchmark``'s ``_MockTimer``: a trial's
step time comes from per-precision FLOP rates, kernel-launch overhead, the input pipeline and
DDP communication; its memory from parameters, optimizer state and activations; its accuracy
from model capacity and the number of optimizer steps, weighted by the learning-rate scale
(``train.lr_scaling``). Results are deterministic per seed and cost milliseconds. Every
measurement it returns has ``simulated=True``.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from autotune.config import TrialConfig
from autotune.exceptions import ConfigError
from autotune.flops import ModelProfile, published_peak
from autotune.hardware import (
    CPU_RUNTIME_BYTES,
    MOCK_RUNTIME_BYTES,
    DeviceCapabilities,
    MachineFingerprint,
    estimate_memory,
)
from autotune.measure import Measurement, plan_windows, summarize_windows
from autotune.nvml import read_nvml

if TYPE_CHECKING:
    from autotune.testing.fake_nvml import FakeNvml

__all__ = ["DEFAULT_PROFILE", "PROFILES", "PROFILE_NAMES", "MockProfile", "get_profile", "simulate"]

_MIB = 1 << 20
_GIB = 1 << 30


@dataclass(frozen=True)
class MockProfile:
    """A simulated machine: its GPUs (or none: a CPU) and the rates the cost model uses.

    The feasibility rules and the study's hardware fingerprint see it through a fake NVML
    (:meth:`fake_nvml`), exactly as they see a real machine through NVML.

    Attributes:
        name: label shown everywhere the device is named (always says "simulated").
        memory_bytes: capacity of one GPU (host RAM for a CPU profile); a trial whose
            modelled peak exceeds it runs out of memory.
        count: GPUs in the simulated machine (CPU cores for a CPU profile): the largest
            world size.
        compute_capability: CUDA capability the feasibility rules see; None for a CPU profile.
        peak_flops: dense FLOP/s of one device per precision; a precision the device lacks
            is absent.
        launch_overhead_s: host cost of one kernel launch in eager mode.
        host_sample_s: input-pipeline seconds per 28x28 sample on one worker.
        allreduce_bytes_per_s: DDP gradient all-reduce bandwidth (one direction).
        peak_source: where ``peak_flops`` come from.
        gpu_name: the GPU's name as NVML reports it.
        power_limit_w: a GPU's power limit (board TDP), watts.
        idle_power_w: a GPU's idle power, watts.
        runtime_bytes: per-process memory beyond tensors (workspace).
        cpu_model: the simulated host CPU.
        cpu_cores: its cores.
        host_memory_bytes: its RAM.
    """

    name: str
    memory_bytes: int
    count: int
    compute_capability: tuple[int, int] | None
    peak_flops: dict[str, float] = field(default_factory=dict)
    launch_overhead_s: float = 8e-6
    host_sample_s: float = 4e-6
    allreduce_bytes_per_s: float = 50e9
    peak_source: str = ""
    gpu_name: str = "mock GPU (simulated)"
    power_limit_w: float = 400.0
    idle_power_w: float = 55.0
    runtime_bytes: int = MOCK_RUNTIME_BYTES
    cpu_model: str = "simulated host CPU"
    cpu_cores: int = 32
    host_memory_bytes: int = 256 * _GIB

    @property
    def is_gpu(self) -> bool:
        """True when the profile simulates GPUs (False: a CPU-only machine)."""
        return self.compute_capability is not None

    def fake_nvml(self) -> FakeNvml:
        """The fake NVML of the simulated machine (no GPU: ``nvmlInit`` fails as without a
        driver)."""
        from autotune.testing.fake_nvml import FakeGpu, FakeNvml

        if self.compute_capability is None:
            return FakeNvml(())
        gpu = FakeGpu(
            self.gpu_name,
            self.memory_bytes,
            self.compute_capability,
            self.power_limit_w,
            self.idle_power_w,
        )
        return FakeNvml((gpu,) * self.count)

    def fingerprint(self, key: str | None = None) -> MachineFingerprint:
        """The simulated machine's fingerprint, read through :meth:`fake_nvml`."""
        import torch

        info = read_nvml(self.fake_nvml())
        return MachineFingerprint(
            device_kind="mock",
            simulated=True,
            mock_profile=key or _key_of(self),
            gpus=info.gpus if info else (),
            driver_version=info.driver_version if info else None,
            cuda_driver_version=info.cuda_driver_version if info else None,
            cuda_version=None,
            cudnn_version=None,
            torch_version=str(torch.__version__),
            cpu_model=self.cpu_model,
            physical_cores=self.cpu_cores,
            logical_cores=self.cpu_cores,
            ram_bytes=self.host_memory_bytes,
        )

    def capabilities(self) -> DeviceCapabilities:
        """The profile as the feasibility rules see it (its GPUs read through the fake NVML)."""
        fp = self.fingerprint()
        return DeviceCapabilities(
            kind="mock",
            name=self.name,
            count=len(fp.gpus) if fp.gpus else self.count,
            memory_bytes=fp.gpus[0].memory_bytes if fp.gpus else self.memory_bytes,
            compute_capability=fp.gpus[0].compute_capability if fp.gpus else None,
            simulated=True,
            peak_flops_per_s=dict(self.peak_flops),
            peak_flops_source=f"SIMULATED profile rates: {self.peak_source}",
            fingerprint=fp,
        )


def _gpu_profile(
    gpu_name: str,
    memory_mib: int,
    compute_capability: tuple[int, int],
    power_limit_w: float,
    idle_power_w: float,
    count: int,
    allreduce_bytes_per_s: float,
) -> MockProfile:
    """A profile of ``count`` real GPUs of one model, with NVIDIA's published dense peaks."""
    peak = published_peak(gpu_name)
    assert peak is not None, gpu_name
    return MockProfile(
        name=f"{count} x {gpu_name} (simulated)",
        memory_bytes=memory_mib * _MIB,
        count=count,
        compute_capability=compute_capability,
        peak_flops=dict(peak.flops_per_s),
        allreduce_bytes_per_s=allreduce_bytes_per_s,
        peak_source=peak.source,
        gpu_name=gpu_name,
        power_limit_w=power_limit_w,
        idle_power_w=idle_power_w,
    )


#: A deliberately small simulated GPU (A100 rates, 16 MiB), so that memory limits show up in
#: the small demo spaces. Rates: NVIDIA A100 datasheet dense peaks (fp32 19.5, tf32 156,
#: fp16/bf16 312 TFLOP/s).
DEFAULT_PROFILE = MockProfile(
    name="mock GPU (simulated; A100 rates, 16 MiB)",
    memory_bytes=16 * _MIB,
    count=4,
    compute_capability=(8, 0),
    peak_flops={"fp32": 19.5e12, "tf32": 156e12, "fp16": 312e12, "bf16": 312e12},
    peak_source="NVIDIA A100 Tensor Core GPU datasheet (dense)",
    gpu_name="mock GPU (simulated; A100 rates, 16 MiB)",
)

#: A simulated CPU-only machine: 16 cores at 2.0 GHz with two AVX-512 FMA units, i.e.
#: 16 x 2.0e9 x 64 fp32 FLOP/cycle = 2.05 TFLOP/s (per-core FMA throughput from the Intel 64
#: and IA-32 Architectures Optimization Reference Manual); bf16 at twice that (AVX512_BF16
#: dot products); fp16 at the fp32 rate (converted; no native fp16 FMA). 64 GiB RAM.
_CPU_PROFILE = MockProfile(
    name="16-core AVX-512 CPU, 64 GiB (simulated)",
    memory_bytes=64 * _GIB,
    count=16,
    compute_capability=None,
    peak_flops={"fp32": 2.048e12, "fp16": 2.048e12, "bf16": 4.096e12},
    launch_overhead_s=5e-6,
    allreduce_bytes_per_s=10e9,
    peak_source="16 cores x 2.0 GHz x 64 FP32 FLOP/cycle (2 AVX-512 FMA units; Intel "
    "Optimization Reference Manual), bf16 2x via AVX512_BF16; gloo all-reduce 10 GB/s assumed",
    runtime_bytes=CPU_RUNTIME_BYTES,
    cpu_model="simulated 16-core AVX-512 CPU",
    cpu_cores=16,
    host_memory_bytes=64 * _GIB,
)

#: The ``mock.profile`` choices: ``default`` (:data:`DEFAULT_PROFILE`), four real GPU
#: machines, and ``cpu`` (no GPU). GPU names and memory are what NVML reports; memory, power
#: limit (board TDP) and NVLink figures are from NVIDIA's datasheets: H100 SXM5 80 GB, 700 W,
#: NVLink 4 900 GB/s; A100 SXM4 80 GB, 400 W, NVLink 3 600 GB/s; V100 SXM2 32 GB, 300 W;
#: T4 16 GB, 70 W, PCIe 3.0 x16. All-reduce bandwidth is half the bidirectional link figure;
#: idle powers are typical ``nvidia-smi`` readings (assumed). Compute capabilities: NVIDIA's
#: CUDA GPUs table. Peaks: :data:`autotune.flops.PUBLISHED_PEAKS`. The fake NVML machines of
#: the tests (:data:`autotune.testing.fake_nvml.FAKE_MACHINES`) are these GPUs.
PROFILES: dict[str, MockProfile] = {
    "default": DEFAULT_PROFILE,
    "h100": _gpu_profile("NVIDIA H100 80GB HBM3", 81559, (9, 0), 700.0, 70.0, 8, 450e9),
    "a100": _gpu_profile("NVIDIA A100-SXM4-80GB", 81920, (8, 0), 400.0, 55.0, 4, 300e9),
    "v100": _gpu_profile("Tesla V100-SXM2-32GB", 32768, (7, 0), 300.0, 40.0, 1, 150e9),
    "t4": _gpu_profile("Tesla T4", 15360, (7, 5), 70.0, 10.0, 1, 16e9),
    "cpu": _CPU_PROFILE,
}
PROFILE_NAMES = tuple(PROFILES)


def _key_of(profile: MockProfile) -> str:
    for key, known in PROFILES.items():
        if known == profile:
            return key
    return "custom"


def get_profile(name: str) -> MockProfile:
    """The mock profile called ``name`` (``mock.profile=NAME``).

    Raises:
        ConfigError: an unknown name.
    """
    try:
        return PROFILES[name]
    except KeyError:
        raise ConfigError(
            f"mock.profile={name}: unknown profile (known: {', '.join(PROFILE_NAMES)})"
        ) from None


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


def _fragmentation(config: TrialConfig) -> float:
    """What a real allocator adds to the modelled bytes: a factor in [1.0, 1.5), fixed per
    model, batch, precision, compile mode and world size (the seed does not change it).

    PyTorch's CUDA caching allocator rounds blocks up (512 B; 2 MiB segments for small
    tensors) and fragments between steps, which weighs most on small models like the demo
    spaces'. The factor also keeps the simulation honest about the memory estimate: some
    trials the estimate lets through (autotune.hardware) still run out of memory, as on real
    hardware."""
    key = (
        f"{config.family}/{config.depth}/{config.width}/{config.batch_size}/{config.precision}/"
        f"{config.compile_mode}/{config.gpu_count}/{config.train.optimizer}"
    )
    digest = hashlib.sha256(key.encode()).digest()
    return 1.0 + 0.5 * int.from_bytes(digest[:8], "little") / 2**64


#: Log-normal sigma of the per-process throughput factor (simulated run-to-run noise).
_RUN_NOISE_SIGMA = 0.05


def _rng(config: TrialConfig) -> np.random.Generator:
    digest = hashlib.sha256(config.model_dump_json().encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def simulate(config: TrialConfig, profile: MockProfile | None = None) -> Measurement:
    """Simulate one trial on a mock device.

    Args:
        config: the trial configuration (``device`` should be ``mock``).
        profile: the simulated machine; default: the one ``config.mock_profile`` names.

    Returns:
        A :class:`Measurement` with ``simulated=True`` and ``memory_kind="simulated"``; its
        ``extra`` holds ``flops_per_sample`` (3x the analytic forward FLOPs), ``lr_peak`` (the
        learning rate after warm-up, as a real trial would use) and, for GPU profiles,
        ``gpu_utilization_pct``, ``gpu_power_w`` and ``energy_j_per_sample``, all modelled,
        with ``simulated_figures=True``.

    Raises:
        MemoryError: when the modelled peak memory exceeds ``profile.memory_bytes`` (the trial
            runner records it as ``failure=oom``).
        ValueError: a precision the profile's device does not have (the feasibility rules
            remove those before a trial starts).
    """
    if profile is None:
        profile = get_profile(config.mock_profile)
    if config.precision not in profile.peak_flops:
        raise ValueError(f"precision {config.precision} is not supported by {profile.name}")
    shape, n_train, acc_ceiling = _NOMINAL_DATA[config.data.name]
    if config.data.name == "synthetic":
        n_train = int(config.data.synthetic_samples * (1 - config.data.val_fraction))
    fwd_flops, params, acts = _model_cost(config, shape)
    batch, world = config.batch_size, config.gpu_count
    rng = _rng(config)

    # Memory: the same model as autotune.hardware.estimate_memory (fp32 weights, grads and
    # optimizer state; at the peak of backward, saved activations and their gradients
    # coexist, factor 2), with the analytic activation count at the autocast width.
    compute_rel, launch_rel, compile_per_block_s = _COMPILE[config.compile_mode]
    model = ModelProfile(
        parameters=params,
        activation_bytes_per_sample=acts
        * _BYTES[config.precision]
        * (0.85 if compute_rel < 1 else 1.0),
        activation_fixed_bytes=0,
        input_bytes_per_sample=4 * shape[0] * shape[1] * shape[2] + 8,
    )
    modelled_bytes = estimate_memory(
        model,
        batch_size=batch,
        num_workers=config.num_workers,
        world_size=world,
        optimizer=config.train.optimizer,
        on_gpu=profile.is_gpu,
        runtime_bytes=profile.runtime_bytes,
    ).total_bytes
    peak_bytes = int(modelled_bytes * _fragmentation(config))
    if peak_bytes > profile.memory_bytes:
        what = "CUDA" if profile.is_gpu else "host"
        raise MemoryError(
            f"simulated {what} out of memory: needs {peak_bytes} bytes, "
            f"the mock device has {profile.memory_bytes}"
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
    if not profile.is_gpu:
        rate /= world  # CPU ranks share the cores the peak is for
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
    # The windows a real loop of `steps` steps would time (autotune.trial), each the sum of
    # its simulated steps.
    plan = plan_windows(
        steps,
        warmup_steps=config.train.warmup_steps,
        windows=config.measure.windows,
        min_window_steps=config.measure.min_window_steps,
        compiled=config.compile_mode != "none",
    )
    # Noise: per step (2 %), and per process (5 %): the same configuration in a fresh process
    # (another seed, another verification round) runs a little faster or slower, as seen on
    # real machines (docs/benchmarks.md, Table 4), so verification has a spread to measure.
    run_factor = float(rng.lognormal(0.0, _RUN_NOISE_SIGMA))
    step_times = (
        step_s * run_factor * rng.lognormal(0.0, 0.02, size=(plan.windows, plan.window_steps))
    )
    stats = summarize_windows(step_times.sum(axis=1).tolist(), plan.window_steps, batch * world)
    compile_s = compile_per_block_s * (1 + config.depth) if config.compile_mode != "none" else 0.0

    # Accuracy: a ceiling, minus under-capacity and under-training penalties, plus noise.
    # SIMULATION ASSUMPTION: training progresses with the optimizer steps times the
    # learning-rate scale factor (the peak learning rate over train.lr), so a larger batch
    # with a scaled learning rate makes up for its fewer steps; with lr_scaling=none the
    # factor is 1 and only the steps count.
    lr_peak = config.train.peak_lr(batch * world)
    effective_steps = steps * lr_peak / config.train.lr
    capacity = math.sqrt(config.depth * config.width / 8)
    accuracy = (
        acc_ceiling
        - 0.03 / capacity
        - 0.25 * math.exp(-effective_steps / 60)
        - (0.003 if config.precision == "fp16" else 0.0)
        + rng.normal(0.0, 0.003)
    )
    extra: dict[str, float | bool] = {
        "flops_per_sample": 3.0 * fwd_flops,
        "lr_peak": lr_peak,
        "simulated_figures": True,
    }
    if profile.is_gpu:
        # A GPU is busy while it computes; its power rises from idle towards its limit with
        # the busy share of the step and the modelled tensor-core efficiency.
        busy = compute_s / step_s
        power_w = world * (
            profile.idle_power_w
            + (profile.power_limit_w - profile.idle_power_w) * busy * min(1.0, utilization / 0.7)
        )
        extra.update(
            gpu_utilization_pct=100.0 * busy,
            gpu_power_w=power_w,
            energy_j_per_sample=power_w / stats.throughput_sps,
        )
    return Measurement.from_stats(
        stats,
        compile_s=compile_s,
        peak_memory_bytes=peak_bytes,
        val_accuracy=float(min(1.0, max(0.0, accuracy))),
        train_loss=float(max(0.01, 2.3 * math.exp(-effective_steps / 80))),
        train_s=compile_s + steps * step_s,
        steps=steps,
        samples_per_step=batch * world,
        parameters=params,
        memory_kind="simulated",
        simulated=True,
        extra=extra,
    )
