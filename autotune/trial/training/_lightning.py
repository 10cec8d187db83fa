"""The Lightning door: a function that returns the user's ``LightningModule`` and
``LightningDataModule``, given a :class:`LightningTrial`; autotune builds the ``Trainer``::

    def build(trial: autotune.LightningTrial) -> tuple[LightningModule, LightningDataModule]:
        return LitClassifier(**trial.model), MNISTData(batch_size=64)

In a trial the knobs map onto ``Trainer(precision=..., devices=..., strategy=...,
accumulate_grad_batches=...)``, the module's memory format and ``torch.compile``, and the
datamodule's training loader (rebuilt with the trial's batch size, workers, pinning and seeded
sampler); a datamodule is passed as ``fit(datamodule=...)``, so ``trainer.datamodule`` works
in callbacks and module code. Before the budget, one validation batch checks that the module
validates and logs the space's metric. A ``Callback`` tells the measuring core
(:class:`~autotune.trial.training._meter.StepMeter`) of each optimizer step; the metric is the
space's ``metric:`` key of ``trainer.validate()``. A third item the function may return, a
dict, holds the user's own ``Trainer`` arguments (``gradient_clip_val``, ``callbacks``, ...),
passed through. Lightning is imported only when the door is used
(``pip install 'autotune[lightning]'``).
"""

from __future__ import annotations

import contextlib
import functools
import math
import shutil
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import torch

from autotune.core.config import TrialConfig
from autotune.core.exceptions import DoorUsageError
from autotune.core.flops import StepFlopCounter, count_parameters
from autotune.trial.devices import Backend
from autotune.trial.measure import Measurement
from autotune.trial.training._door import (
    DoorCall,
    DoorKnobs,
    TrialHandle,
    checked_metric,
    optimizer_scaling_rule,
    rebuild_loader,
    scale_rates,
    to_memory_format,
    with_seed_note,
)
from autotune.trial.training._guide import checkpoint_blocks
from autotune.trial.training._hf import ddp_environment
from autotune.trial.training._meter import BudgetTiming, StepMeter

__all__ = ["LIGHTNING_PRECISIONS", "LightningTrial", "run_lightning"]

#: Lightning's ``Trainer(precision=...)`` for each precision (tf32 is fp32 with TF32 matmuls,
#: which the trial's device sets for the process).
LIGHTNING_PRECISIONS = {
    "fp32": "32-true",
    "tf32": "32-true",
    "fp16": "16-mixed",
    "bf16": "bf16-mixed",
}
#: ``Trainer`` arguments autotune sets in a trial; a user's dict may not set them.
_OWNED_TRAINER_ARGS = frozenset(
    {
        "accelerator",
        "devices",
        "num_nodes",
        "strategy",
        "precision",
        "max_steps",
        "max_epochs",
        "min_steps",
        "min_epochs",
        "max_time",
        "accumulate_grad_batches",
        "limit_train_batches",
        "limit_val_batches",
        "num_sanity_val_steps",
        "use_distributed_sampler",
        "logger",
        "enable_checkpointing",
        "enable_progress_bar",
        "enable_model_summary",
        "default_root_dir",
        "benchmark",
    }
)


class LightningTrial(TrialHandle):
    """The handle a ``lightning:`` door's function builds its module and datamodule with: the
    model knobs (:attr:`model`) and the rest of the trial's knobs, which autotune applies to
    the ``Trainer`` it builds. Made by the user (``LightningTrial()``), it gives PyTorch's
    defaults. The knobs' arguments and properties are
    :class:`~autotune.trial.training._door.TrialHandle`'s.
    """

    def trainer_kwargs(self) -> dict[str, Any]:
        """The knobs given, as ``lightning.pytorch.Trainer`` arguments (for the script on its
        own: ``Trainer(**trial.trainer_kwargs(), max_epochs=3)``): ``precision`` when given."""
        if "precision" in self._given:
            return {"precision": LIGHTNING_PRECISIONS[self._precision]}
        return {}


def _unpack(result: Any, label: str) -> tuple[Any, Any, dict[str, Any]]:
    """``(module, datamodule or None, the user's Trainer arguments)`` from what the function
    returned.

    Raises:
        DoorUsageError: not a module (and datamodule, and dict), or a Trainer argument autotune
            owns.
    """
    from lightning.pytorch import LightningDataModule, LightningModule

    items = result if isinstance(result, tuple) else (result,)
    module = items[0] if items else None
    datamodule = items[1] if len(items) > 1 else None
    kwargs = items[2] if len(items) > 2 else {}
    if (
        not isinstance(module, LightningModule)
        or len(items) > 3
        or not (datamodule is None or isinstance(datamodule, LightningDataModule))
        or not isinstance(kwargs, dict)
    ):
        got = ", ".join(type(item).__name__ for item in items)
        raise DoorUsageError(
            f"{label} returned ({got}); return a LightningModule, a LightningDataModule (or "
            "None) and, optionally, a dict of your own Trainer arguments"
        )
    owned = sorted(set(kwargs) & _OWNED_TRAINER_ARGS)
    if owned:
        raise DoorUsageError(
            f"{label}: Trainer argument {owned[0]!r} is the trial's to set; remove it from the "
            "dict you return"
        )
    return module, datamodule, kwargs


class _MeterCallback:
    """The ``Callback`` that tells the measuring core of each optimizer step, scales the
    optimizers' learning rates once they exist, and keeps the training loss of the last
    epoch; built by :func:`_meter_callback` as a subclass of Lightning's ``Callback``."""

    def __init__(self, meter: StepMeter, knobs: DoorKnobs, trial: LightningTrial) -> None:
        self.meter = meter
        self.knobs = knobs
        self.trial = trial
        self.accumulation = knobs.accumulation_steps
        self.stopped: str | None = None  # too_slow, reused or done
        self.timing: BudgetTiming | None = None
        self.flops: StepFlopCounter | None = None
        self.epoch_loss: torch.Tensor | None = None  # on the device: no sync per batch
        self.epoch_batches = 0
        self._optimizer_steps = 0

    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        optimizers = list(trainer.optimizers)
        if not optimizers:
            return
        rule = optimizer_scaling_rule(optimizers[0], self.knobs.config.train.lr_scaling)
        factor = self.knobs.lr_factor(rule)
        self.trial._lr_scale = factor
        schedulers = [config.scheduler for config in trainer.lr_scheduler_configs]
        for optimizer in optimizers:
            scale_rates(optimizer, schedulers if optimizer is optimizers[0] else [], factor)

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self.meter.start()

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        self.epoch_loss, self.epoch_batches = None, 0

    def on_train_batch_start(
        self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int
    ) -> None:
        first_micro = batch_idx % self.accumulation == 0
        if first_micro and self.meter.flops_step == self._optimizer_steps + 1:
            self.flops = StepFlopCounter()
            self.flops.open()

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        if isinstance(loss, torch.Tensor):
            value = loss.detach().float()
            self.epoch_loss = value if self.epoch_loss is None else self.epoch_loss + value
            self.epoch_batches += 1
        if (batch_idx + 1) % self.accumulation != 0:
            return
        if self.flops is not None:
            self.flops.close()
        self._optimizer_steps += 1
        verdict = self.meter.after_step()
        if verdict == "too_slow":
            self.stopped = "too_slow"
            trainer.should_stop = True
        elif verdict == "done":
            self.timing = self.meter.budget()  # the peak memory, before validation allocates
            self.stopped = "reused" if self.knobs.config.reuse is not None else "done"
            trainer.should_stop = True


def _meter_callback(meter: StepMeter, knobs: DoorKnobs, trial: LightningTrial) -> Any:
    from lightning.pytorch import Callback

    class MeterCallback(_MeterCallback, Callback):
        pass

    return MeterCallback(meter, knobs, trial)


def _batches_in_format(module: Any, datamodule: Any, memory_format: torch.memory_format) -> None:
    """Give the batches' 4-D floating-point tensors ``memory_format`` after Lightning moved
    them to the device: the ``on_after_batch_transfer`` hook Lightning calls (the
    datamodule's where the user overrode it there, else the module's; Lightning's
    ``_DataHookSelector``) wrapped, in place, around the user's own (``functools.wraps``, so
    Lightning still sees which one the user overrode). The workload and loop doors convert
    after the transfer too; a collate function would convert on the host, inside the timed
    windows with 0 workers."""
    from lightning.pytorch.utilities.model_helpers import is_overridden

    owner = (
        datamodule
        if datamodule is not None and is_overridden("on_after_batch_transfer", datamodule)
        else module
    )
    hook = owner.on_after_batch_transfer

    @functools.wraps(hook)
    def on_after_batch_transfer(batch: Any, dataloader_idx: int) -> Any:
        return to_memory_format(hook(batch, dataloader_idx), memory_format)

    owner.on_after_batch_transfer = on_after_batch_transfer


@contextlib.contextmanager
def _attached(datamodule: Any, train_loader: Any, val_loader: Any) -> Iterator[None]:
    """The user's datamodule, as ``fit(datamodule=...)`` and ``validate(datamodule=...)`` take
    it (so that ``trainer.datamodule`` works in callbacks and module code), serving the
    trial's rebuilt training loader and the validation loader already built: its
    ``train_dataloader``/``val_dataloader`` return those, and its ``prepare_data``, ``setup``
    and ``teardown`` (already run once, before the loaders were built) do nothing, until the
    block ends. Nothing happens for ``datamodule=None``."""
    if datamodule is None:
        yield
        return
    served: dict[str, Callable[..., Any]] = {
        "train_dataloader": lambda: train_loader,
        "val_dataloader": lambda: val_loader,
        "prepare_data": lambda: None,
        "setup": lambda stage=None: None,
        "teardown": lambda stage=None: None,
    }
    shadowed = {name: datamodule.__dict__[name] for name in served if name in datamodule.__dict__}
    datamodule.__dict__.update(served)
    try:
        yield
    finally:
        for name in served:
            del datamodule.__dict__[name]
        datamodule.__dict__.update(shadowed)


def _validate(trainer: Any, fit_module: Any, datamodule: Any, val_loader: Any) -> dict[str, Any]:
    """``trainer.validate()`` over the validation loader (through the datamodule where there
    is one): what it logged, by key."""
    with _attached(datamodule, None, val_loader):
        if datamodule is not None:
            results = trainer.validate(fit_module, datamodule=datamodule, verbose=False)
        else:
            results = trainer.validate(fit_module, dataloaders=val_loader, verbose=False)
    return {**(results[0] if results else {}), **trainer.callback_metrics}


def _check_validation(module: Any, metric_name: str, label: str) -> None:
    """The module validates at all.

    Raises:
        DoorUsageError: no ``validation_step``.
    """
    from lightning.pytorch.utilities.model_helpers import is_overridden

    if not is_overridden("validation_step", module):
        raise DoorUsageError(
            f"{label}: {type(module).__name__} has no validation_step, and the metric "
            f"{metric_name!r} comes from trainer.validate() after the budget: define it, with "
            f"self.log({metric_name!r}, ...)"
        )


def _check_logged(
    logged: dict[str, Any], metric_name: str, label: str, *, early: bool = False
) -> None:
    """The validation logged the space's metric.

    Raises:
        DoorUsageError: it did not (the message lists what it logged).
    """
    if metric_name in logged:
        return
    when = " on one batch, before the budget trained" if early else ""
    raise DoorUsageError(
        f"{label}: validation logged no {metric_name!r}{when} (it logged "
        f"{', '.join(sorted(logged)) or 'nothing'}); self.log({metric_name!r}, ...) in "
        "validation_step, or name a logged key in the space's metric: block"
    )


def run_lightning(
    config: TrialConfig, backend: Backend, rank: int, world_size: int, rank_pids: tuple[int, ...]
) -> Measurement:
    """Train the user's ``LightningModule`` as one rank of a trial with a ``Trainer`` autotune
    builds, under the measuring core, then validate.

    Args:
        config: the trial (``config.workload.door == "lightning"``).
        backend: the rank's device, set up.
        rank: this process's rank.
        world_size: DDP ranks (``Trainer(devices=world_size, strategy="ddp")`` over the trial's
            own process group).
        rank_pids: every rank's process id.

    Returns:
        The measurement (rank 0's figures are the trial's); ``train_loss`` is the mean of the
        losses ``training_step`` returned over the last epoch, ``val_metric`` the space's
        ``metric:`` key of ``trainer.validate()``.

    Raises:
        DoorUsageError: the function returned something else, set a Trainer argument the
            trial owns, or the module logs no such metric.
        Exception: whatever the user's code or Lightning raises.
    """
    call = DoorCall.open("lightning", config, backend, rank, world_size, rank_pids)
    knobs, label = call.knobs, call.label
    trial = LightningTrial._for_trial(knobs)
    root = tempfile.mkdtemp(prefix="autotune-lightning-")
    try:
        with ddp_environment(rank, world_size), call.running() as (kwargs, seeds):
            module, datamodule, user_kwargs = _unpack(call.function(trial, **kwargs), label)
            measurement = _fit_and_validate(
                module, datamodule, user_kwargs, trial, knobs, label, root
            )
        return with_seed_note(measurement, seeds)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _fit_and_validate(
    module: Any,
    datamodule: Any,
    user_kwargs: dict[str, Any],
    trial: LightningTrial,
    knobs: DoorKnobs,
    label: str,
    root: str,
) -> Measurement:
    from lightning.pytorch import Trainer

    config = knobs.config
    source = datamodule if datamodule is not None else module
    if datamodule is not None:
        datamodule.prepare_data()
        datamodule.setup("fit")
    train_loader = source.train_dataloader()
    val_loader = source.val_dataloader()
    loader = rebuild_loader(
        train_loader,
        batch_size=config.batch_size,
        num_workers=config.num_workers,
        pin_memory=knobs.pin_memory(train_loader.pin_memory),
        seed=config.seed,
        rank=knobs.rank,
        world_size=knobs.world_size,
        call=f"{label}: train_dataloader()",
    )
    if config.activation_checkpointing:
        checkpoint_blocks(module, config.blocks or ())
    if config.memory_format == "channels_last":
        module.to(memory_format=torch.channels_last)
        _batches_in_format(module, datamodule, torch.channels_last)
    k = knobs.accumulation_steps
    per_epoch = len(loader) // k
    if per_epoch == 0:
        raise ValueError(
            f"batch_size={config.batch_size} x gpu_count={knobs.world_size} x {k} micro-batches "
            "is more than the training data holds"
        )
    meter = knobs.meter(per_epoch)
    callback = _meter_callback(meter, knobs, trial)
    common: dict[str, Any] = {
        "accelerator": "gpu" if knobs.backend.kind == "cuda" else "cpu",
        "devices": knobs.world_size,
        "num_nodes": 1,
        "strategy": "ddp" if knobs.world_size > 1 else "auto",
        "precision": LIGHTNING_PRECISIONS[config.precision],
        "logger": False,
        "enable_checkpointing": False,
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "default_root_dir": root,
        "benchmark": config.cudnn_benchmark if knobs.backend.kind == "cuda" else None,
    }
    user_callbacks = list(user_kwargs.pop("callbacks", None) or [])
    fit_module: Any = (
        torch.compile(module, mode=config.compile_mode) if config.compile_mode != "none" else module
    )
    metric_name = config.workload.metric.name if config.workload.metric else "val_loss"
    if config.reuse is None or config.reuse.check_evaluation:
        # the metric's validation, on one batch, before the budget
        _check_validation(module, metric_name, label)
        dry = Trainer(**common, limit_val_batches=1)
        _check_logged(
            _validate(dry, fit_module, datamodule, val_loader), metric_name, label, early=True
        )
    trainer = Trainer(
        **common,
        **user_kwargs,
        callbacks=[callback, *user_callbacks],
        max_steps=knobs.budget_steps(per_epoch),
        max_epochs=-1,
        accumulate_grad_batches=k,
        limit_train_batches=per_epoch * k,
        limit_val_batches=0,  # no validation inside the budget; it is timed
        num_sanity_val_steps=0,
        use_distributed_sampler=False,  # the rebuilt loader shards itself under DDP
    )
    with _attached(datamodule, loader, val_loader):
        if datamodule is not None:
            trainer.fit(fit_module, datamodule=datamodule)
        else:
            trainer.fit(fit_module, train_dataloaders=loader)
    parameters = count_parameters(module)
    if callback.stopped == "too_slow":
        return meter.too_slow_measurement(parameters)
    timing = callback.timing
    if timing is None:
        raise DoorUsageError(
            f"{label}: Lightning stopped after {meter.step} of {meter.plan.total_steps} steps "
            "(a callback of yours set trainer.should_stop?); it must train the budget"
        )
    reuse = config.reuse
    if reuse is not None:
        metric, train_loss = reuse.val_metric, reuse.train_loss
    else:
        logged = _validate(Trainer(**common), fit_module, datamodule, val_loader)
        _check_logged(logged, metric_name, label)
        metric = checked_metric(
            float(logged[metric_name]),
            config.workload.metric,
            f"{label}: trainer.validate()[{metric_name!r}]",
        )
        train_loss = (
            float(callback.epoch_loss.item()) / callback.epoch_batches
            if callback.epoch_loss is not None
            else math.nan
        )
    try:
        val_samples: int | None = len(val_loader.dataset)
    except (TypeError, AttributeError):
        val_samples = None
    return knobs.measurement(
        meter,
        timing,
        "lightning",
        flops=callback.flops.flops if callback.flops is not None else None,
        flops_samples=config.batch_size * k,
        device=trial.device,
        lr_scale=trial.lr_scale,
        accumulation=k,
        val_metric=metric,
        train_loss=train_loss,
        parameters=parameters,
        val_samples=val_samples,
        # Where the training loader lives, for `best --diff` (LOADER_HOME_ATTR).
        extra={
            "train_loader_in": (
                "LightningDataModule" if datamodule is not None else "LightningModule"
            )
        },
    )
