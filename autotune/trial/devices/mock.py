"""The ``mock`` device: a SIMULATION for tests and demos. Nothing here trains or measures.

An analytic cost model, in the spirit of ``torch.utils.benchmark``'s ``_MockTimer``: a trial's
step time comes from per-precision FLOP rates, kernel-launch overhead, the input pipeline and
DDP communication; its memory from parameters, optimizer state and activations; its accuracy
from model capacity and the number of optimizer steps, weighted by the learning-rate scale
(``train.lr_scaling``). Results are deterministic per seed and cost milliseconds. Every
measurement it returns has ``simulated=True``. Every constant of the model (data sets, compile
modes, memory, step time, noise, accuracy) is one table, ``_COSTS``, each named with its unit.

The simulated machines themselves (``mock.profile=NAME``: their GPUs, memory and rates) are
:mod:`autotune.core.hardware.simulated`, which the study side reads through a simulated NVML as it
reads a real machine.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from autotune.core.config import (
    GUIDE_KNOB_DEFAULTS,
    DataSettings,
    TrainSettings,
    TrialConfig,
    math_key,
)
from autotune.core.flops import ModelProfile
from autotune.core.hardware import CPU_RUNTIME_BYTES, MOCK_RUNTIME_BYTES, estimate_memory
from autotune.core.hardware.simulated import SimulatedMachine, get_profile
from autotune.trial.measure import (
    Measurement,
    ThroughputFloor,
    ThroughputStats,
    WindowPlan,
    graph_recording_steps,
    plan_reused_windows,
    plan_windows,
    reused_timing_steps,
    summarize_windows,
)

__all__ = ["simulate"]


@dataclass(frozen=True)
class _DataSet:
    """The nominal data set a built-in workload trains on, as the simulation sees it."""

    shape: tuple[int, int, int]  # (C, H, W) of one sample
    train_samples: int  # samples of the training split
    accuracy_ceiling: float  # top-1 accuracy in [0, 1] of a large, fully trained model
    under_capacity: float  # accuracy lost by a model of capacity 1 (less for a larger one)


@dataclass(frozen=True)
class _CompileCost:
    """What one torch.compile mode does to a step, relative to eager."""

    compute: float  # compute time, x eager's (fusion)
    launches: float  # kernel-launch overhead, x eager's (CUDA graphs nearly remove it)
    block_s: float  # compile seconds per block (the head counts as one more)


@dataclass(frozen=True)
class _Constants:
    """Every constant of the mock's cost model (SIMULATION ASSUMPTIONS, hand-fitted).

    The simulated machine's own figures (peak FLOP/s, memory, launch overhead, input and
    all-reduce rates, power) are its :class:`~autotune.core.hardware.simulated.SimulatedMachine`.
    """

    # --- data: digits and mnist fit the built-in CNN's measured accuracy (14 configurations
    # on a 2-core CPU, RMS error 0.39 points); fashion_mnist and synthetic are not measured.
    data_sets: Mapping[str, _DataSet] = field(
        default_factory=lambda: {
            "digits": _DataSet((1, 8, 8), 1438, 1.0, 0.118),
            "mnist": _DataSet((1, 28, 28), 48000, 0.986, 0.023),
            "fashion_mnist": _DataSet((1, 28, 28), 48000, 0.92, 0.023),
            "synthetic": _DataSet((1, 28, 28), 3277, 0.1, 0.0),
        }
    )
    # Images of the MNIST test set that data=mnist reads without a data.root (the nominal
    # 48,000 above stands for a directory holding MNIST's training files).
    shipped_mnist_samples: int = 10_000
    kernel_area: int = 9  # the built-in CNN's 3x3 convolutions (multiply-adds per output)
    classes: int = 10  # outputs of the linear head

    # --- memory
    element_bytes: Mapping[str, int] = field(  # bytes per activation element, per precision
        default_factory=lambda: {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2}
    )
    saved_outputs_per_block: int = 3  # a CNN block's conv, BatchNorm and ReLU outputs
    compiled_activation_share: float = 0.85  # of eager's saved activations, when compiled
    input_element_bytes: int = 4  # bytes per input element (fp32 images)
    label_bytes: int = 8  # bytes per label (int64)
    # The caching allocator's rounding and fragmentation: up to this share on top of the
    # modelled bytes (a fixed draw per configuration).
    fragmentation_max: float = 0.5
    # Expandable segments divide that slack by this (a third less: one growing segment).
    expandable_slack_divisor: float = 1.5

    # --- step time
    compile_modes: Mapping[str, _CompileCost] = field(
        default_factory=lambda: {
            "none": _CompileCost(1.0, 1.0, 0.0),
            "default": _CompileCost(0.9, 0.5, 6.0),
            "reduce-overhead": _CompileCost(0.9, 0.05, 8.0),
            "max-autotune": _CompileCost(0.8, 0.45, 25.0),
        }
    )
    passes_per_step: int = 3  # FLOPs of a step over the forward's (forward + 2x backward)
    max_utilization: float = 0.7  # share of the peak FLOP/s a large batch and width reach
    # batch x width at which the utilization is half its maximum (it grows with both).
    half_utilization_batch_width: int = 4096
    channels_last_gain: float = 1.25  # compute rate, x, of a CNN in channels_last at fp16/bf16
    checkpoint_recompute: float = 4 / 3  # compute time, x: the forward (1 of 3 passes) again
    cudnn_benchmark_gain: float = 0.92  # compute time, x, of a CNN with cuDNN's autotuning
    launches_per_block: int = 10  # eager kernel launches per block and step
    launches_per_step: int = 8  # eager kernel launches per step outside the blocks
    # AdamW's kernel launches: for-loop per parameter tensor; foreach and fused per step.
    for_loop_launches_per_tensor: float = 12.0
    foreach_launches: float = 12.0
    fused_launches: float = 1.0
    reference_image_pixels: int = 784  # the machine's host_sample_s is per 28x28 image
    allreduce_latency_s: float = 30e-6  # seconds per all-reduce, whatever its size
    allreduce_passes: int = 2  # a ring all-reduce moves each gradient byte twice
    gradient_bytes: int = 4  # bytes per gradient element (fp32)
    # FSDP's traffic, x DDP's: reduce-scatter plus an all-gather in forward and backward
    # (Zhao et al., "PyTorch FSDP", VLDB 2023, section 3.3).
    fsdp_traffic: float = 1.5

    # --- noise: the same configuration in a fresh process runs a little faster or slower,
    # as on real machines, so that verification has a spread to measure.
    run_noise_sigma: float = 0.05  # log-normal sigma of the per-process throughput factor
    step_noise_sigma: float = 0.02  # log-normal sigma of each step's time
    accuracy_noise_sd: float = 0.003  # standard deviation of the accuracy offset

    # --- accuracy and loss
    # Capacity = depth x (width / capacity_width) ** capacity_exponent: width counts more
    # than depth (on digits, depth 2 x width 8 gives 93.7 %, depth 1 x width 16 96.0 %).
    capacity_width: int = 8
    capacity_exponent: int = 2
    untrained_gap: float = 0.36  # accuracy below the ceiling before training
    learning_steps: float = 24.5  # optimizer steps (x the lr scale) per e-fold of that gap
    fp16_penalty: float = 0.003  # accuracy fp16's narrower range costs
    initial_loss: float = 2.3  # training loss before training (about ln 10: 10 classes)
    loss_steps: int = 80  # optimizer steps per e-fold of the training loss
    min_loss: float = 0.01  # the training loss's floor

    # --- early stop below the floor: host seconds of each stretch of steps a real trial
    # judges (autotune.trial.measure.ThroughputFloor's default).
    min_evidence_s: float = 2.0


#: The one table of the mock's constants.
_COSTS = _Constants()


@dataclass(frozen=True)
class _BuiltinModel:
    """A built-in workload's model and data, the only workloads the mock device models."""

    family: str
    depth: int
    width: int
    data: DataSettings


def _builtin_model(config: TrialConfig) -> _BuiltinModel:
    """The built-in model a configuration trains.

    Raises:
        ValueError: the configuration's workload is not a built-in one.
    """
    if not config.workload.is_builtin:
        raise ValueError(
            f"the mock device simulates the built-in workloads (cnn, mlp) only, "
            f"not {config.workload.label}"
        )
    args = config.workload.args
    return _BuiltinModel(
        family=str(args["family"]),
        depth=int(config.model["depth"]),
        width=int(config.model["width"]),
        data=DataSettings.model_validate(args.get("data") or {}),
    )


def _model_cost(m: _BuiltinModel, shape: tuple[int, int, int]) -> tuple[float, int, int]:
    """(forward FLOPs per sample, parameters, activation elements per sample)."""
    c, h, w = shape
    flops, params, acts = 0.0, 0, 0
    if m.family == "cnn":
        for i in range(m.depth):
            out = m.width * 2**i
            flops += 2 * h * w * c * out * _COSTS.kernel_area  # 2 FLOPs per multiply-add
            params += c * out * _COSTS.kernel_area + 2 * out  # BatchNorm: weight and bias
            acts += _COSTS.saved_outputs_per_block * h * w * out  # saved for backward
            if h >= 2 and w >= 2:
                h, w = h // 2, w // 2
            c = out
        features = c * h * w  # the flattened feature map feeds the linear head
    else:
        features = c * h * w
        for _ in range(m.depth):
            flops += 2 * features * m.width
            params += features * m.width + m.width
            acts += 2 * m.width  # the linear layer's and the ReLU's outputs
            features = m.width
    flops += 2 * features * _COSTS.classes
    params += features * _COSTS.classes + _COSTS.classes
    return flops, params, acts


def _guide_compute_factor(config: TrialConfig, m: _BuiltinModel) -> float:
    """The guide's knobs on the compute time (SIMULATION ASSUMPTIONS; 1.0 at PyTorch's
    defaults): activation checkpointing recomputes the forward pass, one of a step's three
    passes; cuDNN's autotuning picks faster convolution algorithms for a CNN (factors in
    :data:`_COSTS`; a CPU rank's ``cpu_threads`` act on its compute rate, in :func:`simulate`)."""
    factor = _COSTS.checkpoint_recompute if config.activation_checkpointing else 1.0
    if config.cudnn_benchmark and m.family == "cnn":
        factor *= _COSTS.cudnn_benchmark_gain
    return factor


def _optimizer_launches_delta(config: TrialConfig, m: _BuiltinModel, on_gpu: bool) -> float:
    """Kernel launches the optimizer's implementation adds to a step over PyTorch's default
    (SIMULATION ASSUMPTION, counts in :data:`_COSTS`): a for-loop AdamW launches a dozen
    kernels per parameter tensor, foreach a dozen in all, fused one; the default is foreach on
    a GPU, the for-loop on a CPU."""
    # Parameter tensors: a CNN block's conv weight and BatchNorm weight and bias, an MLP
    # layer's weight and bias, the head's weight and bias.
    tensors = 3 * m.depth + 2 if m.family == "cnn" else 2 * m.depth + 2
    launches = {
        "for_loop": _COSTS.for_loop_launches_per_tensor * tensors,
        "foreach": _COSTS.foreach_launches,
        "fused": _COSTS.fused_launches,
    }
    default = "foreach" if on_gpu else "for_loop"
    impl = default if config.optimizer_impl == "default" else config.optimizer_impl
    return launches[impl] - launches[default]


def _fragmentation(config: TrialConfig, m: _BuiltinModel) -> float:
    """What a real allocator adds to the modelled bytes: a factor in [1.0, 1.5)
    (``_COSTS.fragmentation_max``), fixed per model, batch, precision, compile mode and world
    size (the seed does not change it).

    PyTorch's CUDA caching allocator rounds blocks up (512 B; 2 MiB segments for small
    tensors) and fragments between steps, which weighs most on small models like the demo
    spaces'. The factor also keeps the simulation honest about the memory estimate: some
    trials the estimate lets through (autotune.core.hardware) still run out of memory, as on real
    hardware."""
    key = (
        f"{m.family}/{m.depth}/{m.width}/{config.batch_size}/{config.precision}/"
        f"{config.compile_mode}/{config.gpu_count}/{config.train.optimizer}"
    )
    digest = hashlib.sha256(key.encode()).digest()
    return 1.0 + _COSTS.fragmentation_max * int.from_bytes(digest[:8], "little") / 2**64


def _peak_memory_bytes(
    config: TrialConfig,
    m: _BuiltinModel,
    profile: SimulatedMachine,
    mode: _CompileCost,
    shape: tuple[int, int, int],
    params: int,
    acts: int,
) -> int:
    """The modelled peak memory: the same model as :func:`autotune.core.hardware.estimate_memory`
    (fp32 weights, grads and optimizer state; at the peak of backward, saved activations and
    their gradients coexist, factor 2), with the analytic activation count at the autocast
    width, times the allocator's :func:`_fragmentation`.

    Raises:
        MemoryError: the peak exceeds ``profile.memory_bytes``.
    """
    compiled_share = _COSTS.compiled_activation_share if mode.compute < 1 else 1.0
    activation_bytes = acts * _COSTS.element_bytes[config.precision] * compiled_share
    model = ModelProfile(
        parameters=params,
        activation_bytes_per_sample=activation_bytes,
        activation_fixed_bytes=0,
        input_bytes_per_sample=_COSTS.input_element_bytes * shape[0] * shape[1] * shape[2]
        + _COSTS.label_bytes,
        blocks=m.depth,
        # Checkpointing a block keeps its input, one of the saved outputs per block.
        checkpointed_bytes_per_sample=activation_bytes / _COSTS.saved_outputs_per_block,
    )
    modelled_bytes = estimate_memory(
        model,
        batch_size=config.batch_size,
        num_workers=config.num_workers,
        world_size=config.gpu_count,
        optimizer=config.train.optimizer,
        on_gpu=profile.is_gpu,
        runtime_bytes=MOCK_RUNTIME_BYTES if profile.is_gpu else CPU_RUNTIME_BYTES,
        checkpointing=config.activation_checkpointing,
        sharded=config.data_parallel == "fsdp",
    ).total_bytes
    peak_bytes = int(modelled_bytes * _fragmentation(config, m))
    if config.cuda_expandable_segments and profile.is_gpu:
        # One growing segment instead of rounding to new ones: less of the allocator's slack.
        slack = peak_bytes - modelled_bytes
        peak_bytes = int(modelled_bytes + slack / _COSTS.expandable_slack_divisor)
    if peak_bytes > profile.memory_bytes:
        what = "CUDA" if profile.is_gpu else "host"
        raise MemoryError(
            f"simulated {what} out of memory: needs {peak_bytes} bytes, "
            f"the mock device has {profile.memory_bytes}"
        )
    return peak_bytes


class _StepCost(NamedTuple):
    """A step's modelled seconds, noise-free, and the figures they came from."""

    step_s: float  # seconds per optimizer step (all its micro-batches, the all-reduce)
    compute_s: float  # seconds the device computes per micro-batch
    launch_s: float  # kernel-launch seconds per micro-batch
    rate: float  # FLOP/s achieved
    utilization: float  # share of the peak FLOP/s before the layout's gain


def _step_cost(
    config: TrialConfig,
    m: _BuiltinModel,
    profile: SimulatedMachine,
    mode: _CompileCost,
    shape: tuple[int, int, int],
    fwd_flops: float,
    params: int,
) -> _StepCost:
    """The modelled seconds of one optimizer step: compute at a utilization that grows with
    batch and width, plus launches, plus the input pipeline (overlapped with compute when
    workers > 0), per micro-batch, plus the all-reduce."""
    batch, world = config.batch_size, config.gpu_count
    utilization = (
        _COSTS.max_utilization * batch / (batch + _COSTS.half_utilization_batch_width / m.width)
    )
    layout_gain = (
        _COSTS.channels_last_gain
        if (
            m.family == "cnn"
            and config.memory_format == "channels_last"
            and config.precision in ("fp16", "bf16")
        )
        else 1.0
    )
    rate = profile.peak_flops[config.precision] * utilization * layout_gain
    if not profile.is_gpu:
        rate /= world  # CPU ranks share the cores the peak is for
        if config.cpu_threads:
            # A rank's own thread count: its share of the cores, never more than all of them
            # (oversubscribed ranks take turns; SIMULATION ASSUMPTION).
            cores = max(1, profile.cpu_cores or profile.count)
            rate *= min(cores, config.cpu_threads * world) / cores
    compute_s = batch * _COSTS.passes_per_step * fwd_flops / rate * mode.compute
    compute_s *= _guide_compute_factor(config, m)
    eager_launches = _COSTS.launches_per_block * m.depth + _COSTS.launches_per_step
    launch_s = eager_launches * profile.launch_overhead_s * mode.launches
    launch_s += _optimizer_launches_delta(config, m, profile.is_gpu) * profile.launch_overhead_s
    load_s = batch * profile.host_sample_s * (shape[1] * shape[2]) / _COSTS.reference_image_pixels
    if config.num_workers > 0:
        step_s = max(compute_s + launch_s, load_s / config.num_workers)
    else:
        step_s = compute_s + launch_s + load_s
    # train.global_batch_size: every micro-batch computes and loads; one all-reduce per step.
    step_s *= config.train.accumulation_steps(batch, world)
    if world > 1:
        traffic = _COSTS.fsdp_traffic if config.data_parallel == "fsdp" else 1.0
        # Each gradient byte crosses the link allreduce_passes times (x traffic under FSDP).
        moved = traffic * _COSTS.allreduce_passes * params * _COSTS.gradient_bytes
        step_s += _COSTS.allreduce_latency_s + moved / profile.allreduce_bytes_per_s
    return _StepCost(step_s, compute_s, launch_s, rate, utilization)


#: Training settings left out of the noise seed while at their defaults, so that a setting
#: nobody changes leaves a configuration's draws (and the tests' figures) as they are.
_UNSEEDED_AT_DEFAULT = (
    "target_accuracy",
    "target_metric",
    "eval_every_steps",
    "eval_every_s",
    "max_time_s",
    "max_time_vs_baseline",
    "global_batch_size",
    "evidence_share",
)

#: ``train``'s fields in the order they had before ``advanced.train`` split them off
#: (TrainSettings is now TrainOptions + AdvancedTrainSettings): the noise seed hashes them
#: in this order, so that a configuration draws the same noise as before.
_SEEDED_TRAIN_ORDER = (
    "optimizer",
    "lr",
    "weight_decay",
    "momentum",
    "epochs",
    "max_steps",
    "warmup_steps",
    "lr_scaling",
    "reference_batch_size",
    "global_batch_size",
    "lr_warmup_fraction",
    "lr_schedule",
    "target_accuracy",
    "target_metric",
    "eval_every_steps",
    "eval_every_s",
    "max_time_s",
    "max_time_vs_baseline",
)


def _rng(config: TrialConfig) -> np.random.Generator:
    fields = config.model_dump(mode="json")
    train = fields["train"]
    fields["train"] = {
        **{name: train[name] for name in _SEEDED_TRAIN_ORDER if name in train},
        **{name: value for name, value in train.items() if name not in _SEEDED_TRAIN_ORDER},
    }
    if fields["objective"] == "throughput":
        del fields["objective"]
    defaults = TrainSettings().model_dump(mode="json")
    for name in _UNSEEDED_AT_DEFAULT:
        if fields["train"][name] == defaults[name]:
            del fields["train"][name]
    # The study's floor says when to stop, and the busy threshold how to judge a run, not
    # what the configuration is: the same draws with or without them.
    del fields["min_throughput_sps"]
    # Reuse changes what the trial runs, not the configuration's draws; nor does its limit.
    del fields["reuse"]
    del fields["timeout_s"]
    # Settings at their defaults stay out of the seed (the workload by its key fields: the
    # mock simulates workloads only), so that a new setting keeps the existing draws.
    fields["workload"] = config.workload.key_fields()
    for name, default in GUIDE_KNOB_DEFAULTS.items():
        if fields[name] == default:
            del fields[name]
    if fields["blocks"] is None:
        del fields["blocks"]
    fields["measure"].pop("max_other_cpu_share", None)
    for name in ("check_steps", "check_margin", "timing_steps"):  # the check's, not the draws'
        fields["measure"].pop(name, None)
    if fields.get("twin") == "none":
        del fields["twin"]
    if fields["measure"].get("min_timed_s") is None:  # unset: the mock's default, 0 s
        fields["measure"]["min_timed_s"] = 0.0
    text = json.dumps(fields, separators=(",", ":"))
    digest = hashlib.sha256(text.encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


class _NoiseFree:
    """Stands in for the noise generator of :func:`simulate` with ``noise=False``: every
    draw is its distribution's median (log-normal factors 1, normal offsets 0)."""

    def lognormal(
        self, mean: float = 0.0, sigma: float = 1.0, size: tuple[int, ...] | None = None
    ) -> Any:
        return math.exp(mean) if size is None else np.full(size, math.exp(mean))

    def normal(
        self, loc: float = 0.0, scale: float = 1.0, size: tuple[int, ...] | None = None
    ) -> Any:
        return loc if size is None else np.full(size, loc)


def simulate(
    config: TrialConfig, profile: SimulatedMachine | None = None, *, noise: bool = True
) -> Measurement:
    """Simulate one trial on a mock device.

    Args:
        config: the trial configuration (``device`` should be ``mock``).
        profile: the simulated machine; default: the one ``config.mock_profile`` names.
        noise: False gives the configuration's noise-free values (every noise draw at its
            median: no run-to-run or per-step throughput factor, no accuracy offset), the
            same for every seed: the expected values a benchmark's ground truth is made of.
            A study always simulates with noise, as a real device measures.

    Returns:
        A :class:`Measurement` with ``simulated=True`` and ``memory_kind="simulated"``; its
        ``extra`` holds ``flops_per_sample`` (3x the analytic forward FLOPs), ``lr_peak`` (the
        learning rate after warm-up, as a real trial would use) and, for GPU profiles,
        ``gpu_utilization_pct``, ``gpu_power_w`` and ``energy_j_per_sample``, all modelled,
        with ``simulated_figures=True``. Below ``config.min_throughput_sps`` in its first
        window, it stops there as a real trial does (``too_slow``, no accuracy).

    Raises:
        MemoryError: when the modelled peak memory exceeds ``profile.memory_bytes`` (the trial
            runner records it as ``failure=oom``).
        ValueError: a precision the profile's device does not have (the feasibility rules
            remove those before a trial starts), or a workload other than the built-ins.
    """
    if profile is None:
        profile = get_profile(config.mock_profile)
    if config.precision not in profile.peak_flops:
        raise ValueError(f"precision {config.precision} is not supported by {profile.name}")
    m = _builtin_model(config)
    nominal = _COSTS.data_sets[m.data.name]
    shape, n_train = nominal.shape, nominal.train_samples
    if m.data.name == "synthetic":
        n_train = int(m.data.synthetic_samples * (1 - m.data.val_fraction))
    elif m.data.name == "mnist" and m.data.root is None:
        # The shipped MNIST test set (workloads.builtin.data) less the validation split.
        shipped = _COSTS.shipped_mnist_samples
        n_train = shipped - round(shipped * m.data.val_fraction)
    fwd_flops, params, acts = _model_cost(m, shape)
    batch, world = config.batch_size, config.gpu_count
    # train.global_batch_size: micro-batches of `batch` per step and rank (1 without).
    accumulation = config.train.accumulation_steps(batch, world)
    global_batch = batch * world * accumulation
    rng: np.random.Generator | _NoiseFree = _rng(config) if noise else _NoiseFree()
    mode = _COSTS.compile_modes[config.compile_mode]
    peak_bytes = _peak_memory_bytes(config, m, profile, mode, shape, params, acts)
    step_s, compute_s, launch_s, rate, utilization = _step_cost(
        config, m, profile, mode, shape, fwd_flops, params
    )

    steps = max(1, config.train.epochs * (n_train // global_batch))
    if config.train.max_steps is not None:
        steps = min(steps, config.train.max_steps)
    # The windows a real loop of `steps` steps would time (autotune.trial.training), each the sum of
    # its simulated steps; a trial reusing another's metric runs only its warm-up and one
    # epoch of windows (autotune.trial.measure.plan_reused_windows), and costs only those.
    steps_per_epoch = max(1, n_train // global_batch)
    budget_steps = steps
    if config.reuse is None:  # short evidence: the budget's first share (evidence_steps)
        steps = config.train.evidence_steps(steps)
    plan = (plan_windows if config.reuse is None else _plan_reused(steps_per_epoch, config))(
        steps,
        warmup_steps=config.train.warmup_steps,
        windows=config.measure.windows,
        min_window_steps=config.measure.min_window_steps,
        compiled=config.compile_mode != "none",
        # The machine's kind decides, as on a real one: CUDA graphs record on a GPU's second step.
        compile_steps=graph_recording_steps(config, "cuda" if profile.is_gpu else "cpu"),
    )
    # Noise per process (another seed, another verification round) and per step.
    run_factor = float(rng.lognormal(0.0, _COSTS.run_noise_sigma))
    step_noise = rng.lognormal(0.0, _COSTS.step_noise_sigma, size=(plan.windows, plan.window_steps))
    step_times = step_s * run_factor * step_noise
    stats = summarize_windows(step_times.sum(axis=1).tolist(), plan.window_steps, global_batch)
    compile_s = mode.block_s * (1 + m.depth) if config.compile_mode != "none" else 0.0
    floor_sps = config.min_throughput_sps
    if floor_sps is not None and config.objective == "throughput":
        stopped = _stopped_too_slow(floor_sps, plan, step_s * run_factor, step_times, global_batch)
        if stopped is not None:
            steps_done, (window_steps, windows_s) = stopped
            return Measurement.from_stats(
                summarize_windows(list(windows_s), window_steps, global_batch),
                compile_s=compile_s,
                peak_memory_bytes=peak_bytes,
                val_metric=math.nan,
                train_loss=math.nan,
                train_s=compile_s + steps_done * step_s * run_factor,
                steps=steps_done,
                samples_per_step=global_batch,
                parameters=params,
                memory_kind="simulated",
                simulated=True,
                too_slow=True,
                extra={"min_throughput_sps": floor_sps, "simulated_figures": True},
            )

    # Accuracy: a ceiling, minus under-capacity and under-training penalties, plus noise.
    # SIMULATION ASSUMPTION: training progresses with the optimizer steps times the
    # learning-rate scale factor (the peak learning rate over train.lr), so a larger batch
    # with a scaled learning rate makes up for its fewer steps; with lr_scaling=none the
    # factor is 1 and only the steps count.
    lr_peak = config.train.peak_lr(global_batch)
    lr_gain = lr_peak / config.train.lr
    effective_steps = steps * lr_gain
    capacity = m.depth * (m.width / _COSTS.capacity_width) ** _COSTS.capacity_exponent
    accuracy_noise = float(rng.normal(0.0, _COSTS.accuracy_noise_sd))

    def accuracy_after(trained_steps: int) -> float:
        return float(
            nominal.accuracy_ceiling
            - nominal.under_capacity / capacity
            - _COSTS.untrained_gap * math.exp(-trained_steps * lr_gain / _COSTS.learning_steps)
            - (_COSTS.fp16_penalty if config.precision == "fp16" else 0.0)
            + accuracy_noise
        )

    accuracy = accuracy_after(steps)
    extra: dict[str, Any] = {
        "flops_per_sample": _COSTS.passes_per_step * fwd_flops,
        "lr_peak": lr_peak,
        "simulated_figures": True,
    }
    if config.train.evidence_share is not None and config.reuse is None:
        extra["budget_steps"] = budget_steps  # evaluated at a share of the budget
    if config.objective == "throughput" and config.measure.check_steps:
        extra["check_losses"] = simulated_check_losses(config)
    if (
        config.objective == "throughput"
        and config.reuse is None
        and config.min_throughput_sps is None
        and world == 1
    ):
        # The gradient noise scale the real loop probes (autotune.trial.training._noise): SIMULATED,
        # a fixed multiple of the global batch's scale, nothing measured.
        extra["gradient_noise_probes"] = 8
        extra["gradient_noise_scale"] = SIMULATED_NOISE_SCALE_SAMPLES
        extra["gradient_noise_scale_simulated"] = True
    if profile.is_gpu:
        # A GPU is busy while it computes; its power rises from idle towards its limit with
        # the busy share of the step and the modelled tensor-core efficiency.
        busy = compute_s / step_s
        power_w = world * (
            profile.idle_power_w
            + (profile.power_limit_w - profile.idle_power_w)
            * busy
            * min(1.0, utilization / _COSTS.max_utilization)
        )
        extra.update(
            gpu_utilization_pct=100.0 * busy,
            gpu_power_w=power_w,
            energy_j_per_sample=power_w / stats.throughput_sps,
        )
    n_val = max(1, round(n_train * m.data.val_fraction / (1 - m.data.val_fraction)))
    eval_s = n_val * fwd_flops / rate * mode.compute + launch_s * math.ceil(n_val / batch)
    if config.reuse is not None:
        return _simulate_reused(
            config,
            stats,
            plan=plan,
            step_s=step_s * run_factor,
            eval_s=eval_s,
            compile_s=compile_s,
            val_samples=n_val,
            peak_memory_bytes=peak_bytes,
            parameters=params,
            extra=extra,
        )
    if config.objective == "time_to_accuracy":
        return _simulate_to_target(
            config,
            stats,
            step_s=step_s * run_factor,
            eval_s=eval_s,
            compile_s=compile_s,
            steps=steps,
            steps_per_epoch=steps_per_epoch,
            accuracy_after=accuracy_after,
            val_samples=n_val,
            peak_memory_bytes=peak_bytes,
            parameters=params,
            extra=extra,
        )
    return Measurement.from_stats(
        stats,
        compile_s=compile_s,
        peak_memory_bytes=peak_bytes,
        val_metric=float(min(1.0, max(0.0, accuracy))),
        train_loss=_train_loss(effective_steps),
        train_s=compile_s + steps * step_s,
        steps=steps,
        samples_per_step=global_batch,
        parameters=params,
        memory_kind="simulated",
        simulated=True,
        val_samples=n_val,
        extra=extra,
    )


#: The simulated paired check (:func:`simulated_check_losses`): each knob's relative
#: divergence from the baseline's arithmetic at the first step, as measured on the shipped
#: MNIST CNN on a 2-core Xeon (docs/research/evidence.md; tf32 by its 10-bit mantissa), and
#: how fast training amplifies it per step.
_CHECK_FIRST_DIVERGENCE = {
    "twin": 8e-8,
    "channels_last": 2e-6,
    "compile": 1e-7,
    "optimizer_impl": 1e-7,
    "tf32": 5e-5,
    "bf16": 2e-4,
    "fp16": 1e-4,
}
_CHECK_GROWTH_PER_STEP = 1.6
#: Precisions whose rounding another order of the same computation (memory format, compile
#: mode, the optimizer's implementation) changes by about their own distance from exact: a
#: compiled bf16 trial parted from its eager bf16 source by 1.4-2.3e-4 at the first step in
#: the long run's study (docs/research/evidence.md), bf16's own distance being 2e-4.
_REORDERED_AT_OWN_DIVERGENCE = frozenset({"bf16", "fp16"})


#: The mock's gradient noise scale B_simple (samples), SIMULATED: of the order McCandlish et
#: al. 2018 (Fig. 4) report for MNIST classifiers early in training.
SIMULATED_NOISE_SCALE_SAMPLES = 400.0


def simulated_check_losses(config: TrialConfig) -> list[float]:
    """The first ``advanced.measure.check_steps`` training losses of a simulated trial: one
    smooth curve per math key less the precision (the same model, global batch, training
    settings and seed), perturbed by each knob that changes the arithmetic (precision, memory
    format, compile mode, the optimizer's implementation, the float64 twin) by its measured
    first-step divergence (:data:`_CHECK_FIRST_DIVERGENCE`), grown by
    :data:`_CHECK_GROWTH_PER_STEP` a step; at bf16 or fp16, a reordering knob by that
    precision's own divergence (:data:`_REORDERED_AT_OWN_DIVERGENCE`). DataLoader workers
    change nothing: identical. SIMULATED, like every mock figure."""
    # One curve per math key but the precision, which perturbs it as the other knobs do.
    key = math_key(config.model_copy(update={"twin": "none", "precision": "fp32"}))
    rng = np.random.default_rng(int(key, 16))
    curve = [
        _train_loss(step) * (1.0 + 0.02 * float(rng.standard_normal()))
        for step in range(config.measure.check_steps)
    ]
    scale = 0.0
    if config.twin != "none":
        scale += _CHECK_FIRST_DIVERGENCE["twin"]
    if config.memory_format == "channels_last":
        scale += _CHECK_FIRST_DIVERGENCE["channels_last"]
    if config.compile_mode != "none":
        scale += _CHECK_FIRST_DIVERGENCE["compile"]
    if config.optimizer_impl != "default":
        scale += _CHECK_FIRST_DIVERGENCE["optimizer_impl"]
    own = _CHECK_FIRST_DIVERGENCE.get(config.precision, 0.0)
    if config.precision in _REORDERED_AT_OWN_DIVERGENCE and (
        config.memory_format == "channels_last"
        or config.compile_mode != "none"
        or config.optimizer_impl != "default"
    ):
        scale += own  # another order of a low-precision computation: its own rounding again
    scale += own
    if not scale:
        return curve
    signs = np.random.default_rng(int(key, 16) + 1).choice((-1.0, 1.0), size=len(curve))
    return [
        loss * (1.0 + float(sign) * min(0.5, scale * _CHECK_GROWTH_PER_STEP**step))
        for step, (loss, sign) in enumerate(zip(curve, signs, strict=True))
    ]


def _train_loss(trained_steps: float) -> float:
    """The modelled mean training loss after ``trained_steps`` optimizer steps."""
    decay = math.exp(-trained_steps / _COSTS.loss_steps)
    return float(max(_COSTS.min_loss, _COSTS.initial_loss * decay))


def _plan_reused(steps_per_epoch: int, config: TrialConfig) -> Callable[..., WindowPlan]:
    """:func:`plan_reused_windows` for epochs of ``steps_per_epoch`` steps and ``config``'s
    timing steps, called as :func:`plan_windows` is."""
    return functools.partial(
        plan_reused_windows,
        steps_per_epoch=steps_per_epoch,
        timing_steps=reused_timing_steps(config),
    )


def _simulate_reused(
    config: TrialConfig,
    stats: ThroughputStats,
    *,
    plan: WindowPlan,
    step_s: float,
    eval_s: float,
    compile_s: float,
    val_samples: int,
    peak_memory_bytes: int,
    parameters: int,
    extra: dict[str, float | bool],
) -> Measurement:
    """A SIMULATED trial that reuses another trial's metric (``config.reuse``), as
    ``autotune.trial.training`` runs one: its cost (``train_s``) is the compilation plus the steps of
    ``plan`` (warm-up and windows) only, plus one timed evaluation in a time-to-accuracy
    study, whose time to accuracy is the source's steps and evaluations at this
    configuration's modelled step and evaluation seconds (the target missed past
    ``train.max_time_s``)."""
    reuse = config.reuse
    assert reuse is not None
    train_s = compile_s + plan.total_steps * step_s
    figures: dict[str, object] = {}
    if config.objective == "time_to_accuracy":
        estimate_s = compile_s + reuse.steps * step_s + reuse.evaluations * eval_s
        max_time_s = config.train.max_time_s
        reached = max_time_s is None or estimate_s <= max_time_s
        train_s += eval_s
        figures = {
            "time_to_accuracy_s": estimate_s if reached else None,
            "target_reached": reached,
            "eval_s": reuse.evaluations * eval_s,
            "metric_curve": ((estimate_s, reuse.steps, reuse.val_metric),) if reached else (),
        }
        extra = {**extra, "target": config.train.target if config.train.target else 1.0}
    return Measurement.from_stats(
        stats,
        compile_s=compile_s,
        peak_memory_bytes=peak_memory_bytes,
        val_metric=reuse.val_metric,
        train_loss=reuse.train_loss,
        train_s=train_s,
        steps=plan.total_steps,
        samples_per_step=config.train.global_batch(config.batch_size, config.gpu_count),
        parameters=parameters,
        memory_kind="simulated",
        simulated=True,
        val_samples=val_samples,
        extra=extra,
        **figures,
    )


def _stopped_too_slow(
    floor_sps: float,
    plan: WindowPlan,
    warmup_step_s: float,
    window_step_s: np.ndarray,
    samples_per_step: int,
) -> tuple[int, tuple[int, tuple[float, ...]]] | None:
    """Where a real trial stops below its floor, as ``(steps taken, (steps per window, each
    judged window's seconds))``; None when it does not.

    The real rule (:class:`~autotune.trial.measure.ThroughputFloor`, one process: DDP ranks
    take rank 0's decisions) replayed on a simulated host clock: warm-up steps of
    ``warmup_step_s`` each, then the windows' steps (``window_step_s``, shape
    ``(plan.windows, plan.window_steps)``), up to the last judged window's end.
    """
    now_s = [0.0]
    floor = ThroughputFloor(
        floor_sps,
        plan,
        samples_per_step,
        world_size=1,
        min_evidence_s=_COSTS.min_evidence_s,
        clock=lambda: now_s[0],
    )
    judged = window_step_s[: floor.judged_windows].ravel()
    seconds = np.concatenate([np.full(plan.warmup_steps, warmup_step_s), judged])
    marks_s = {0: 0.0}
    edges = set(plan.window_edges)
    for step, step_seconds in enumerate(seconds.tolist(), start=1):
        now_s[0] += step_seconds
        if floor.crossed_early(step):
            return step, floor.evidence()
        if step in edges:
            marks_s[step] = now_s[0]
            if floor.below_at_edge(step, marks_s):
                return step, floor.evidence()
        if not floor.judging:
            return None
    return None


def _simulate_to_target(
    config: TrialConfig,
    stats: ThroughputStats,
    *,
    step_s: float,
    eval_s: float,
    compile_s: float,
    steps: int,
    steps_per_epoch: int,
    accuracy_after: Callable[[int], float],
    val_samples: int,
    peak_memory_bytes: int,
    parameters: int,
    extra: dict[str, float | bool],
) -> Measurement:
    """A SIMULATED time-to-accuracy run (``objective=time_to_accuracy``): the modelled
    accuracy after each evaluation's step count, on the clock of ``autotune.trial.training._to_target``
    (compilation, then steps of ``step_s`` seconds, then ``eval_s`` seconds per evaluation;
    evaluations as ``train.eval_every_steps`` / ``eval_every_s`` / once per epoch ask), until
    the accuracy meets ``train.target`` or the schedule (``steps``) or ``train.max_time_s``
    ends. A ``target_metric`` is read as an accuracy: only the built-in workloads (whose
    metric is accuracy) are simulated.
    """
    settings = config.train
    target = settings.target if settings.target is not None else 1.0
    if settings.eval_every_steps is not None:
        every = settings.eval_every_steps
    elif settings.eval_every_s is not None:
        every = max(1, math.ceil(settings.eval_every_s / step_s))
    else:
        every = steps_per_epoch
    curve: list[tuple[float, int, float]] = []
    reached_s: float | None = None
    wall_s = compile_s
    done = 0
    while done < steps:
        stride = min(every, steps - done)
        out_of_time = settings.max_time_s is not None and wall_s + stride * step_s > (
            settings.max_time_s
        )
        if out_of_time and settings.max_time_s is not None:
            stride = max(1, int((settings.max_time_s - wall_s) / step_s))
        done += stride
        wall_s += stride * step_s + eval_s
        metric = min(1.0, max(0.0, accuracy_after(done)))
        curve.append((wall_s, done, metric))
        if metric >= target:
            reached_s = wall_s
            break
        if out_of_time:
            break
    return Measurement.from_stats(
        stats,
        compile_s=compile_s,
        peak_memory_bytes=peak_memory_bytes,
        val_metric=curve[-1][2],
        train_loss=_train_loss(done),
        train_s=wall_s,
        steps=done,
        samples_per_step=config.train.global_batch(config.batch_size, config.gpu_count),
        parameters=parameters,
        memory_kind="simulated",
        simulated=True,
        time_to_accuracy_s=reached_s,
        target_reached=reached_s is not None,
        eval_s=eval_s * len(curve),
        metric_curve=tuple(curve),
        val_samples=val_samples,
        extra={**extra, "target": target},
    )
