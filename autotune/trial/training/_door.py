"""What the doors to the user's own code share (the ``loop``, ``hf_trainer`` and ``lightning``
doors): a trial's knobs as PyTorch values (:class:`DoorKnobs`), batches moved to the device
(:func:`move_batch`), the user's DataLoader rebuilt with the trial's batch size, workers,
pinning and sampler (:func:`rebuild_loader`), and the learning-rate factor that follows the
global batch (:func:`lr_factor`)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import inspect
import multiprocessing
import os
import random
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    DistributedSampler,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
)

from autotune.core.config import (
    COMPILE_MODES,
    MEMORY_FORMATS,
    OPTIMIZER_IMPLS,
    PRECISIONS,
    TrialConfig,
    scaled_lr,
)
from autotune.core.exceptions import DoorUsageError
from autotune.core.flops import TrainingFlops, step_extras
from autotune.trial.devices import Backend
from autotune.trial.lifetime import die_with_rank
from autotune.trial.measure import CpuShareMeter, Measurement
from autotune.trial.training._guide import apply_process_knobs
from autotune.trial.training._meter import BudgetTiming, StepMeter, budget_plan
from autotune.trial.training._metric import checked_metric
from autotune.trial.training._setup import cpu_meter_roots
from autotune.trial.workloads import load_workload

__all__ = [
    "AUTOCAST_DTYPES",
    "SCALED_GROUP_RATES",
    "SCALED_SCHEDULER_RATES",
    "DoorCall",
    "DoorKnobs",
    "SeedGuard",
    "TrialHandle",
    "checked_metric",
    "lr_factor",
    "move_batch",
    "rebuild_loader",
    "scale_rates",
    "script_argv",
    "seed_everything",
    "to_memory_format",
    "trial_seed_guard",
    "with_seed_note",
]

#: What a door scales in an optimizer's parameter groups, and in a scheduler's attributes, when
#: the learning rate follows the batch (``OneCycleLR`` keeps its rates in the groups;
#: ``CyclicLR`` in ``base_lrs`` and ``max_lrs``).
SCALED_GROUP_RATES = ("lr", "initial_lr", "max_lr", "min_lr")
SCALED_SCHEDULER_RATES = ("base_lrs", "max_lrs", "min_lrs", "_last_lr")

#: The autocast dtype of each mixed precision (fp32 and tf32 run without autocast).
AUTOCAST_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def seed_everything(seed: int) -> None:
    """Seed torch (every device), Python's ``random`` and, where the user's code imported it,
    numpy: the user's model is then initialized, and their data shuffled, the same way in
    every trial with this seed (the math key's promise)."""
    torch.manual_seed(seed)
    random.seed(seed)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(seed)


def derived_seed(trial_seed: int, user_seed: int) -> int:
    """The seed a user's own ``torch.manual_seed(user_seed)`` gets inside a trial: a hash of
    both (SHA-256, the first 63 bits), so that the trial's seed still decides the stream
    (verification's fresh seeds stay fresh) and the user's reseeding point stays where they
    wrote it."""
    digest = hashlib.sha256(f"{trial_seed}:{user_seed}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


@dataclass
class SeedGuard:
    """What :func:`trial_seed_guard` saw of the user's own seeding.

    Attributes:
        calls: the user's seeding calls (``torch.manual_seed``, ``random.seed``,
            ``numpy.random.seed``) with a value other than the trial's seed, as
            ``(function, the user's value)``.
    """

    calls: list[tuple[str, Any]]


@contextlib.contextmanager
def trial_seed_guard(trial_seed: int) -> Iterator[SeedGuard]:
    """While the user's code runs in a trial, keep the trial's seed in charge of randomness.

    A user's ``torch.manual_seed(s)`` (also as ``torch.random.manual_seed``, and through
    ``lightning.seed_everything`` or ``transformers.set_seed``), ``random.seed(s)`` or
    ``numpy.random.seed(s)`` would otherwise replace the trial's seed with the same ``s`` in
    every trial, and verification's rounds, meant to run on fresh seeds, would all train the
    same stream. Inside the guard such a call seeds with :func:`derived_seed` of the trial's
    seed and ``s`` instead: the reseeding happens where the user wrote it, each trial seed
    gives its own stream, and the same trial seed gives the same one. A call with the trial's
    own seed (a ``TrainingArguments(seed=...)`` the HF door set) and calls from inside torch
    (DataLoader workers seeding themselves) pass through unchanged. Names bound before the
    guard (``from torch import manual_seed`` at import) escape it.

    Args:
        trial_seed: the trial's seed (``config.seed``).

    Yields:
        A :class:`SeedGuard` that lists the calls it changed.
    """
    guard = SeedGuard(calls=[])
    numpy = sys.modules.get("numpy")
    patched: list[tuple[Any, str, Any]] = [
        (torch, "manual_seed", torch.manual_seed),
        (torch.random, "manual_seed", torch.random.manual_seed),
        (random, "seed", random.seed),
    ]
    if numpy is not None:
        patched.append((numpy.random, "seed", numpy.random.seed))

    def wrap(owner: Any, name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        label = f"{owner.__name__}.{name}"

        @functools.wraps(real)
        def seeded(seed: Any = None, *args: Any, **kwargs: Any) -> Any:
            caller = sys._getframe(1).f_globals.get("__name__", "")
            if (
                isinstance(seed, bool)
                or not isinstance(seed, int)
                or seed == trial_seed
                or caller == "torch"
                or caller.startswith("torch.")
            ):
                return real(seed, *args, **kwargs)
            guard.calls.append((label, seed))
            return real(
                derived_seed(trial_seed, seed) % 2**32
                if label.startswith("numpy")
                else derived_seed(trial_seed, seed),
                *args,
                **kwargs,
            )

        return seeded

    for owner, name, real in patched:
        setattr(owner, name, wrap(owner, name, real))
    try:
        yield guard
    finally:
        for owner, name, real in patched:
            setattr(owner, name, real)


@contextlib.contextmanager
def script_argv(function: Callable[..., Any], args: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """While a door's function runs, ``sys.argv`` is its own script's command line, so that a
    script whose ``main()`` calls ``parser.parse_args()`` (pytorch/examples, transformers'
    ``HfArgumentParser``) parses its own arguments, never autotune's: ``[the function's file,
    *argv]``, where ``argv`` is the space's ``workload_args.argv`` (a list of strings), unless
    the function itself takes a parameter named ``argv`` (then it is passed to it as given).

    Args:
        function: the user's door function.
        args: the space's ``workload_args``.

    Yields:
        The keyword arguments to call the function with (``argv`` taken out where it went to
        ``sys.argv``).

    Raises:
        DoorUsageError: ``workload_args.argv`` is not a list of strings.
    """
    kwargs = dict(args)
    try:
        takes_argv = "argv" in inspect.signature(function).parameters
    except (TypeError, ValueError):
        takes_argv = False
    extra: list[str] = []
    if "argv" in kwargs and not takes_argv:
        extra = kwargs.pop("argv")
        if not isinstance(extra, list) or not all(isinstance(a, str) for a in extra):
            raise DoorUsageError(
                "workload_args.argv: give the script's command-line arguments as a list of "
                f"strings, got {extra!r}"
            )
    script = getattr(getattr(function, "__code__", None), "co_filename", None) or sys.argv[0]
    saved = sys.argv
    sys.argv = [script, *extra]
    try:
        yield kwargs
    finally:
        sys.argv = saved


def with_seed_note(measurement: Measurement, guard: SeedGuard) -> Measurement:
    """``measurement`` with ``extra["user_seeds"]`` naming the user's seeding calls that
    :func:`trial_seed_guard` derived from the trial's seed (``torch.manual_seed(1)``, ...);
    unchanged when there were none."""
    if not guard.calls:
        return measurement
    seen = list(dict.fromkeys(f"{name}({value!r})" for name, value in guard.calls))
    note = ", ".join(seen) + ": derived from the trial's seed"
    return dataclasses.replace(measurement, extra={**measurement.extra, "user_seeds": note})


def lr_factor(rule: str, global_batch: int, reference_batch: int) -> float:
    """The factor the user's learning rate is multiplied by in a trial: their rate holds at
    ``reference_batch`` (the baseline's global batch), and follows the global batch by
    ``rule`` (:func:`autotune.core.config.scaled_lr`: ``linear``, ``sqrt`` or ``none``)."""
    return scaled_lr(1.0, rule, global_batch, reference_batch)


def optimizer_scaling_rule(optimizer: torch.optim.Optimizer, configured: str | None) -> str:
    """``train.lr_scaling`` when set, else the rule of the optimizer's kind: linear for SGD
    (Goyal et al. 2017), the square root for the adaptive ones (Malladi et al. 2022)."""
    if configured is not None:
        return configured
    return "linear" if isinstance(optimizer, torch.optim.SGD) else "sqrt"


def scale_rates(optimizer: Any, schedulers: list[Any], factor: float) -> None:
    """Multiply an optimizer's rates (:data:`SCALED_GROUP_RATES` in its groups) and its
    schedulers' (:data:`SCALED_SCHEDULER_RATES`) by ``factor`` (nothing for 1)."""
    if factor == 1.0:
        return
    for group in optimizer.param_groups:
        for key in SCALED_GROUP_RATES:
            if isinstance(group.get(key), (int, float)):
                group[key] = group[key] * factor
    for scheduler in schedulers:
        for name in SCALED_SCHEDULER_RATES:
            rates = getattr(scheduler, name, None)
            if isinstance(rates, list) and all(isinstance(r, (int, float)) for r in rates):
                setattr(scheduler, name, [r * factor for r in rates])


def move_batch(batch: Any, device: torch.device, memory_format: torch.memory_format) -> Any:
    """``batch`` on ``device``: tensors moved (``non_blocking``), 4-D floating-point tensors
    (images, ``(B, C, H, W)``) in ``memory_format``; mappings (dicts, Hugging Face's
    ``BatchEncoding``), lists, tuples and named tuples rebuilt around their moved items; any
    other object with a ``to(device)`` method moved by it; everything else as it is."""
    if isinstance(batch, torch.Tensor):
        if batch.dim() == 4 and batch.is_floating_point():
            return batch.to(device, non_blocking=True, memory_format=memory_format)
        return batch.to(device, non_blocking=True)
    if isinstance(batch, Mapping):
        moved = {key: move_batch(value, device, memory_format) for key, value in batch.items()}
        try:
            return type(batch)(moved)  # type: ignore[call-arg]
        except TypeError:  # a mapping type that cannot be built from a dict
            return moved
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # a named tuple
        return type(batch)(*(move_batch(item, device, memory_format) for item in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(move_batch(item, device, memory_format) for item in batch)
    to = getattr(batch, "to", None)
    if callable(to):
        return to(device)
    return batch


def to_memory_format(batch: Any, memory_format: torch.memory_format) -> Any:
    """``batch`` with its 4-D floating-point tensors in ``memory_format``, where it is (the
    HF and Lightning doors call it on batches already on the device, after the transfer);
    mappings, lists and tuples rebuilt around their items."""
    if isinstance(batch, torch.Tensor):
        if batch.dim() == 4 and batch.is_floating_point():
            return batch.contiguous(memory_format=memory_format)
        return batch
    if isinstance(batch, Mapping):
        converted = {key: to_memory_format(value, memory_format) for key, value in batch.items()}
        try:
            return type(batch)(converted)  # type: ignore[call-arg]
        except TypeError:
            return converted
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(to_memory_format(item, memory_format) for item in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_memory_format(item, memory_format) for item in batch)
    return batch


def batch_samples(batch: Any) -> int | None:
    """The samples in a collated batch: the first dimension of its first tensor (in a
    mapping, list or tuple), None when it holds no tensor."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() > 0 else None
    items = batch.values() if isinstance(batch, Mapping) else batch
    if isinstance(items, (list, tuple)) or isinstance(batch, Mapping):
        for item in items:
            found = batch_samples(item)
            if found is not None:
                return found
    return None


def _chained(first: Callable[[int], None], second: Callable[[int], None] | None) -> Any:
    if second is None:
        return first
    return functools.partial(_call_both, first, second)


def _call_both(first: Callable[[int], None], second: Callable[[int], None], worker: int) -> None:
    first(worker)
    second(worker)


def rebuild_loader(
    loader: DataLoader[Any],
    *,
    batch_size: int,
    num_workers: int,
    pin_memory: bool,
    seed: int,
    rank: int,
    world_size: int,
    call: str,
) -> DataLoader[Any]:
    """The user's training ``DataLoader`` with the trial's batch size (one micro-batch), workers,
    pinning and sampler; everything else (dataset, ``collate_fn``, ``timeout``, their
    ``worker_init_fn`` after autotune's) as the user made it.

    The sampler: a shuffling loader (``RandomSampler``) shuffles with the trial's seed, a
    ``DistributedSampler`` under DDP; a sequential one stays in order (sharded under DDP); a
    sampler of the user's own is kept with one rank. ``drop_last=True``, so that every step
    has the same batch (steady timing, no recompiles on a ragged last batch). Workers are
    persistent and die with this rank (:func:`autotune.trial.lifetime.die_with_rank`).

    Args:
        loader: the user's loader.
        batch_size: per rank, one micro-batch.
        num_workers: DataLoader workers.
        pin_memory: pin host memory (CUDA with workers).
        seed: the trial's seed (data order).
        rank: this process's rank.
        world_size: DDP ranks.
        call: the user's call, for messages (``trial.prepare()``).

    Raises:
        DoorUsageError: a loader the trial's batch size or ranks cannot be applied to (its
            own ``batch_sampler``; an iterable dataset or a sampler of its own under DDP).
    """
    if not isinstance(loader.batch_sampler, BatchSampler) or type(loader.batch_sampler) not in (
        BatchSampler,
    ):
        raise DoorUsageError(
            f"{call}: the training DataLoader has its own batch_sampler "
            f"({type(loader.batch_sampler).__name__}); autotune sets the batch size, so give "
            "the DataLoader a batch_size and a sampler (or shuffle=True) instead"
        )
    dataset = loader.dataset
    iterable = isinstance(dataset, IterableDataset)
    sampler: Any
    if iterable:
        if world_size > 1:
            raise DoorUsageError(
                f"{call}: the training DataLoader reads an IterableDataset, which autotune cannot "
                "shard over DDP ranks; use a map-style dataset, or gpu_count: [1]"
            )
        sampler = None
    elif isinstance(loader.sampler, RandomSampler):
        if world_size > 1:
            sampler = DistributedSampler(dataset, world_size, rank, shuffle=True, seed=seed)
        else:
            shuffle = torch.Generator().manual_seed(seed)
            sampler = RandomSampler(dataset, generator=shuffle)  # type: ignore[arg-type]
    elif isinstance(loader.sampler, SequentialSampler):
        sampler = (
            DistributedSampler(dataset, world_size, rank, shuffle=False)
            if world_size > 1
            else SequentialSampler(dataset)  # type: ignore[arg-type]
        )
    elif world_size > 1:
        raise DoorUsageError(
            f"{call}: the training DataLoader has a sampler of its own "
            f"({type(loader.sampler).__name__}), which autotune cannot shard over DDP ranks; use "
            "shuffle=True, or gpu_count: [1]"
        )
    else:
        sampler = loader.sampler
    start_method = multiprocessing.get_context().get_start_method()
    die = functools.partial(die_with_rank, os.getpid(), start_method)
    return DataLoader(
        dataset,
        batch_size=batch_size,
        sampler=sampler,
        num_workers=num_workers,
        collate_fn=loader.collate_fn,
        pin_memory=pin_memory,
        drop_last=True,
        timeout=loader.timeout,
        worker_init_fn=_chained(die, loader.worker_init_fn) if num_workers > 0 else None,
        generator=torch.Generator().manual_seed(seed),
        persistent_workers=num_workers > 0,
    )


@dataclass
class DoorKnobs:
    """A trial's knobs as the doors apply them in the trial process.

    Attributes:
        config: the trial.
        backend: its device.
        rank: this process's rank.
        world_size: DDP ranks (``config.gpu_count``).
        rank_pids: every rank's process id (the CPU-share meter counts their trees as the
            trial's own).
    """

    config: TrialConfig
    backend: Backend
    rank: int
    world_size: int
    rank_pids: tuple[int, ...] = ()

    @property
    def device(self) -> torch.device:
        """The device this rank trains on."""
        return self.backend.torch_device()

    @property
    def memory_format(self) -> torch.memory_format:
        """``torch.channels_last`` or ``torch.contiguous_format``."""
        channels_last = self.config.memory_format == "channels_last"
        return torch.channels_last if channels_last else torch.contiguous_format

    @property
    def autocast_dtype(self) -> torch.dtype | None:
        """fp16 or bf16 for the mixed precisions; None (no autocast) for fp32 and tf32."""
        return AUTOCAST_DTYPES.get(self.config.precision)

    @property
    def accumulation_steps(self) -> int:
        """Micro-batches per optimizer step and rank (``train.global_batch_size``; 1 without)."""
        return self.config.train.accumulation_steps(self.config.batch_size, self.world_size)

    @property
    def samples_per_step(self) -> int:
        """Global samples per optimizer step: batch size x ranks x micro-batches."""
        return self.config.batch_size * self.world_size * self.accumulation_steps

    def pin_memory(self, users: bool) -> bool:
        """Pinned host memory for the training loader, given the user's own setting
        (``users``: their ``DataLoader(pin_memory=...)``, or HF's ``dataloader_pin_memory``,
        True by default): on CUDA, the user's, and pinned also with workers (the
        Performance Tuning Guide's pairing, as the workload door pins); never on the CPU.
        So the baseline (no workers, unless the space's ``baseline:`` says) keeps the user's
        pinning: forced off, it measured a loader the user does not run."""
        return self.backend.pin_memory and (users or self.config.num_workers > 0)

    def lr_factor(self, rule: str) -> float:
        """The learning-rate factor at this trial's global batch (:func:`lr_factor`), against
        ``advanced.train.reference_batch_size`` (the baseline's global batch in a study)."""
        reference = self.config.train.reference_batch_size or self.samples_per_step
        return lr_factor(rule, self.samples_per_step, reference)

    def timing_note(self, timed_s: float, door: str) -> dict[str, str]:
        """``timing_note``, where the windows covered less than
        ``advanced.measure.min_timed_s`` (2 s on CUDA, where a small budget's windows last
        milliseconds): why a door's windows are not extended as the workload door's are
        (:func:`~autotune.trial.training._meter.extend_timing`). The workload door runs its own
        step, and times more of them after its evaluation; a door's step is the user's code
        (their loop, or their Trainer's), which autotune cannot run apart from training, and
        more steps before the evaluation would train the model past the budget its metric is
        read after. Empty when the windows were long enough. An energy figure needs windows
        of 1 s (``energy_note`` says where they were shorter).

        Args:
            timed_s: seconds the budget's windows covered.
            door: the door's name (``loop``, ``hf_trainer``, ``lightning``).
        """
        min_timed_s = self.config.measure.min_timed_s_on(self.backend.kind)
        if timed_s >= min_timed_s:
            return {}
        return {
            "timing_note": (
                f"the windows covered {timed_s:.2f} s, under advanced.measure.min_timed_s "
                f"({min_timed_s:g} s): the {door} door times the budget's steps only (they are "
                "your code's, and more of them would train past the budget the metric is read "
                "after); raise train.epochs for a steadier figure"
            )
        }

    def measurement(
        self,
        meter: StepMeter,
        timing: BudgetTiming,
        door: str,
        *,
        flops: TrainingFlops | None,
        flops_samples: int,
        device: torch.device,
        lr_scale: float,
        accumulation: int,
        val_metric: float,
        train_loss: float,
        parameters: int,
        val_samples: int | None,
        extra: Mapping[str, Any] | None = None,
    ) -> Measurement:
        """The closing sequence every door shares, once its metric is known (evaluated, or
        reused): rank 0's figures (FLOPs per sample and MFU of the counted warm-up step,
        :func:`~autotune.core.flops.step_extras`; the learning rate's factor; the
        micro-batches; the meter's common figures and its timing note), then the rank's
        :class:`~autotune.trial.measure.Measurement` from the meter.

        Args:
            meter: the door's measuring core (:meth:`meter`).
            timing: its budget's timing.
            door: ``loop``, ``hf_trainer`` or ``lightning`` (for the timing note).
            flops: the counted warm-up step's FLOPs (forward and backward); None when it
                was not counted.
            flops_samples: the samples of that step on this rank.
            device: the rank's device.
            lr_scale: the learning rate's factor (:func:`lr_factor`).
            accumulation: micro-batches per optimizer step (1: none).
            val_metric: the validation metric (the reused one for a timed trial).
            train_loss: the mean training loss (NaN when unknown).
            parameters: the model's parameter count.
            val_samples: validation samples; None when the data set has no length.
            extra: the door's own figures (rank 0 only), e.g. where its loader lives.
        """
        figures: dict[str, Any] = {}
        if self.rank == 0:
            figures = step_extras(
                flops,
                flops_samples,
                precision=self.config.precision,
                device=device,
                gpu_reading=timing.gpu_reading,
                metered_samples=meter.plan.timed_steps * meter.samples_per_step,
            )
            figures["lr_scale"] = lr_scale
            figures["timing_extension_steps"] = 0
            figures.update(extra or {})
            if accumulation > 1:
                figures["accumulation_steps"] = accumulation
            figures.update(meter.common_extra(timing))
            figures.update(self.timing_note(timing.timed_s, door))
        return meter.measurement(
            timing,
            val_metric=val_metric,
            train_loss=train_loss,
            parameters=parameters,
            val_samples=val_samples,
            extra=figures,
        )

    def budget_steps(self, steps_per_epoch: int) -> int:
        """Optimizer steps of the budget: ``train.epochs`` passes, capped by
        ``train.max_steps``."""
        total = self.config.train.epochs * steps_per_epoch
        cap = self.config.train.max_steps
        return min(total, cap) if cap is not None else total

    def meter(self, steps_per_epoch: int) -> StepMeter:
        """The measuring core over this trial's budget (every rank builds it at the same
        point: the floor's host agreement is a collective call on CUDA)."""
        total = self.budget_steps(steps_per_epoch)
        plan = budget_plan(self.config, self.backend.kind, total, steps_per_epoch)
        roots = cpu_meter_roots(self.rank_pids or (os.getpid(),), os.environ)
        return StepMeter(
            plan,
            self.backend,
            self.samples_per_step,
            rank=self.rank,
            world_size=self.world_size,
            cpu_meter=CpuShareMeter(roots if self.rank == 0 else ()),
            floor_sps=self.config.min_throughput_sps,
            door_flops=True,  # the loop, HF and Lightning doors count on a warm-up step
        )


def _choice(value: str, allowed: tuple[str, ...], name: str, owner: str) -> str:
    if value not in allowed:
        raise ValueError(f"{owner}({name}={value!r}): must be one of {', '.join(allowed)}")
    return value


class TrialHandle:
    """What every door's trial handle gives the user's code: one trial's knobs, or, made by
    the user, PyTorch's defaults (so that the same file trains on its own), with any knob
    given here applied as a trial would apply it (a verified answer written in).

    Args:
        batch_size: samples per batch and rank of the training loader (one micro-batch);
            None: the user's own.
        precision: ``fp32`` (None's default), ``tf32``, ``fp16`` or ``bf16`` (autocast).
        memory_format: ``contiguous`` (None's default) or ``channels_last`` (4-D images).
        compile_mode: ``none`` (None's default), ``default``, ``reduce-overhead`` or
            ``max-autotune``.
        num_workers: DataLoader workers of the training loader; None: the user's own.
        lr_scale: the factor the user's learning rates are multiplied by (in a study: the
            rate following the global batch, ``train.lr_scaling``).
        epochs: passes over the training data (in a study: ``train.epochs``).
        max_steps: a cap on the optimizer steps (in a study: ``train.max_steps``).
        model: the model knobs :attr:`model` gives (in a study: the space's ``model:``).
        device: the device (default: ``cuda`` when torch sees a GPU, else ``cpu``).
        seed: seeds torch, ``random`` and numpy when given (in a study: the trial's seed,
            set before the user's function runs).
        optimizer_impl: ``default`` (None's), ``for_loop``, ``foreach`` or ``fused``: the
            optimizer's implementation (a door that has the optimizer rebuilds it so).
        activation_checkpointing: checkpoint each block named in ``blocks``.
        blocks: the model's blocks by module class name (checkpointing's and FSDP's units).
        cpu_threads: intra-op threads (0: PyTorch's own count); set at once on its own.
        cudnn_benchmark: ``torch.backends.cudnn.benchmark`` (CUDA); set at once on its own.

    Raises:
        ValueError: a knob outside its values (the message names the class and the knob).
    """

    def __init__(
        self,
        *,
        batch_size: int | None = None,
        precision: str | None = None,
        memory_format: str | None = None,
        compile_mode: str | None = None,
        num_workers: int | None = None,
        lr_scale: float = 1.0,
        epochs: int = 1,
        max_steps: int | None = None,
        model: Mapping[str, Any] | None = None,
        device: str | torch.device | None = None,
        seed: int | None = None,
        optimizer_impl: str | None = None,
        activation_checkpointing: bool = False,
        blocks: Sequence[str] = (),
        cpu_threads: int = 0,
        cudnn_benchmark: bool = False,
    ) -> None:
        owner = type(self).__name__
        #: The knobs given (a door on its own applies these and leaves the rest as the user
        #: wrote them: a Trainer's own ``bf16=True`` stays unless ``precision`` is given).
        self._given = frozenset(
            name
            for name, value in (
                ("batch_size", batch_size),
                ("precision", precision),
                ("memory_format", memory_format),
                ("compile_mode", compile_mode),
                ("num_workers", num_workers),
                ("optimizer_impl", optimizer_impl),
                ("activation_checkpointing", activation_checkpointing or None),
            )
            if value is not None
        ) | ({"lr_scale"} if lr_scale != 1.0 else frozenset())
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"{owner}(batch_size={batch_size}): must be >= 1")
        if num_workers is not None and num_workers < 0:
            raise ValueError(f"{owner}(num_workers={num_workers}): must be >= 0")
        if epochs < 1 or (max_steps is not None and max_steps < 1):
            raise ValueError(f"{owner}(epochs={epochs}, max_steps={max_steps}): must be >= 1")
        if not lr_scale > 0:
            raise ValueError(f"{owner}(lr_scale={lr_scale}): must be > 0")
        self._precision = _choice(precision or "fp32", PRECISIONS, "precision", owner)
        self._memory_format_name = _choice(
            memory_format or "contiguous", MEMORY_FORMATS, "memory_format", owner
        )
        self._compile_mode = _choice(compile_mode or "none", COMPILE_MODES, "compile_mode", owner)
        self._batch_size = batch_size
        self._num_workers = num_workers
        self._lr_scale = lr_scale
        self._epochs = epochs
        self._max_steps = max_steps
        self._model_knobs = dict(model or {})
        self._optimizer_impl = _choice(
            optimizer_impl or "default", OPTIMIZER_IMPLS, "optimizer_impl", owner
        )
        if activation_checkpointing and not blocks:
            raise ValueError(
                f"{owner}(activation_checkpointing=True): name the blocks to checkpoint "
                "(blocks=[ClassName, ...])"
            )
        self._activation_checkpointing = activation_checkpointing
        self._blocks = tuple(blocks)
        self._data_parallel = "ddp"
        if cpu_threads < 0:
            raise ValueError(f"{owner}(cpu_threads={cpu_threads}): must be >= 0")
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self._device = torch.device(device)
        self._rank, self._world_size = 0, 1
        self._accumulation = 1
        self._knobs: DoorKnobs | None = None  # set in a study
        if seed is not None:
            seed_everything(seed)
        if self._knobs is None:  # in a trial the rank's set-up applied them
            apply_process_knobs(cpu_threads, cudnn_benchmark, self._device.type)
        if self._precision == "tf32":
            # The state both TF32 APIs read (the backend sets the same in a study).
            torch.set_float32_matmul_precision("high")
            torch.backends.cudnn.allow_tf32 = True

    @classmethod
    def _for_trial(cls, knobs: DoorKnobs) -> Any:
        """The handle of one trial's rank (autotune's own; users call the class)."""
        config = knobs.config
        handle = cls(
            batch_size=config.batch_size,
            precision=config.precision,
            memory_format=config.memory_format,
            compile_mode=config.compile_mode,
            num_workers=config.num_workers,
            epochs=config.train.epochs,
            max_steps=config.train.max_steps,
            model=dict(config.model),
            device=knobs.device,
            cpu_threads=config.cpu_threads,
            cudnn_benchmark=config.cudnn_benchmark,
        )
        handle._knobs = knobs
        handle._optimizer_impl = config.optimizer_impl
        handle._activation_checkpointing = config.activation_checkpointing
        handle._blocks = tuple(config.blocks or ())
        handle._data_parallel = config.data_parallel
        handle._given = frozenset(
            (
                "batch_size",
                "precision",
                "memory_format",
                "compile_mode",
                "num_workers",
                "lr_scale",
                "optimizer_impl",
                "activation_checkpointing",
            )
        )
        handle._rank, handle._world_size = knobs.rank, knobs.world_size
        handle._accumulation = knobs.accumulation_steps
        return handle

    @property
    def in_study(self) -> bool:
        """True inside an autotune trial; False when the script runs on its own."""
        return self._knobs is not None

    @property
    def model(self) -> dict[str, Any]:
        """The model knobs (the space's ``model:``), a new dict each time:
        ``Net(**trial.model)``."""
        return dict(self._model_knobs)

    @property
    def batch_size(self) -> int | None:
        """Samples per training batch and rank (one micro-batch); None: the user's own."""
        return self._batch_size

    @property
    def precision(self) -> str:
        """``fp32``, ``tf32``, ``fp16`` or ``bf16``."""
        return self._precision

    @property
    def memory_format(self) -> str:
        """``contiguous`` or ``channels_last``."""
        return self._memory_format_name

    @property
    def compile_mode(self) -> str:
        """``none``, ``default``, ``reduce-overhead`` or ``max-autotune``."""
        return self._compile_mode

    @property
    def num_workers(self) -> int | None:
        """DataLoader workers of the training loader; None: the user's own."""
        return self._num_workers

    @property
    def gpu_count(self) -> int:
        """The DDP world size (1 outside a study)."""
        return self._world_size

    @property
    def rank(self) -> int:
        """This process's DDP rank (0 outside a study)."""
        return self._rank

    @property
    def device(self) -> torch.device:
        """The device this rank trains on."""
        return self._device

    @property
    def lr_scale(self) -> float:
        """The factor the user's learning rates are multiplied by (in a study, known once the
        door has seen the optimizer's kind)."""
        return self._lr_scale

    @property
    def _memory_format(self) -> torch.memory_format:
        channels_last = self._memory_format_name == "channels_last"
        return torch.channels_last if channels_last else torch.contiguous_format

    @property
    def _autocast_dtype(self) -> torch.dtype | None:
        return AUTOCAST_DTYPES.get(self._precision)


@dataclass(frozen=True)
class DoorCall:
    """How every door opens a trial and calls the user's function: the loop, HF and Lightning
    doors (:func:`~autotune.trial.training._loop.run_loop`, ``run_hf_trainer``,
    ``run_lightning``) each start with :meth:`open` and call the function inside
    :meth:`running`; what differs between them is what the function returns and what the door
    does with it.

    Attributes:
        function: the user's function (the space's ``loop:``, ``hf_trainer:`` or
            ``lightning:``).
        label: the door and the function, for messages (``loop train.py:train``).
        knobs: the trial's knobs in this rank.
    """

    function: Callable[..., Any]
    label: str
    knobs: DoorKnobs

    @classmethod
    def open(
        cls,
        door: str,
        config: TrialConfig,
        backend: Backend,
        rank: int,
        world_size: int,
        rank_pids: tuple[int, ...],
    ) -> DoorCall:
        """Load the user's function (``config.workload``), open the peak-memory window before
        it runs (its data, model and optimizer count) and set the training seed
        (:func:`seed_everything`), so that the model the function builds starts the same in
        every trial with this seed.

        Raises:
            WorkloadError: the function's file or name cannot be loaded
                (:func:`~autotune.trial.workloads.load_workload`).
        """
        function = load_workload(config.workload).obj
        backend.reset_peak_memory()
        seed_everything(config.seed)
        knobs = DoorKnobs(config, backend, rank, world_size, rank_pids)
        return cls(function, f"{door} {config.workload.label}", knobs)

    @contextlib.contextmanager
    def running(self) -> Iterator[tuple[dict[str, Any], SeedGuard]]:
        """While the user's function runs: ``sys.argv`` is its script's own
        (:func:`script_argv`) and the trial's seed stays in charge (:func:`trial_seed_guard`).

        Yields:
            The keyword arguments to call the function with, and the seed guard (for
            :func:`with_seed_note`).

        Raises:
            DoorUsageError: ``workload_args.argv`` is not a list of strings.
        """
        config = self.knobs.config
        with (
            script_argv(self.function, config.workload.args) as kwargs,
            trial_seed_guard(config.seed) as seeds,
        ):
            yield kwargs, seeds
