"""The Hugging Face door: a function that builds a ``transformers.Trainer``, given an
:class:`HFTrial` whose :meth:`~HFTrial.training_args` maps the trial's knobs onto the user's
own ``TrainingArguments``::

    def build_trainer(trial: autotune.HFTrial) -> Trainer:
        args = trial.training_args(TrainingArguments(output_dir="out", learning_rate=5e-4))
        model = GPT2LMHeadModel(GPT2Config(**trial.model))
        return Trainer(model=model, args=args, train_dataset=train, eval_dataset=val)

    if __name__ == "__main__":
        build_trainer(autotune.HFTrial()).train()  # as the user wrote it

In a trial, autotune adds a ``TrainerCallback`` that tells the measuring core
(:class:`~autotune.trial.training._meter.StepMeter`) of each optimizer step (``on_step_end``), sets
``max_steps`` to the budget, trains, and takes the metric from ``trainer.evaluate()``.
Transformers is imported only when the door is used (``pip install 'autotune[hf]'``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import RandomSampler, Sampler, Subset

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
    scale_rates,
    to_memory_format,
    with_seed_note,
)
from autotune.trial.training._meter import BudgetTiming, StepMeter

__all__ = ["HFTrial", "ddp_environment", "run_hf_trainer"]


#: ``TrainingArguments.optim`` for each optimizer implementation it offers: PyTorch's AdamW
#: fused (``adamw_torch`` leaves the implementation to PyTorch, the default).
_HF_OPTIMS = {"fused": "adamw_torch_fused"}


class HFTrial(TrialHandle):
    """The handle an ``hf_trainer:`` door's function builds its ``transformers.Trainer`` with.

    In a trial, :meth:`training_args` maps every knob onto the user's ``TrainingArguments``.
    Made by the user (``HFTrial()``), it maps only the knobs given and leaves the rest as the
    user wrote it, so the same file trains on its own; a verified answer can be written in
    (``HFTrial(batch_size=32, precision="bf16")``). The knobs' arguments and properties are
    :class:`~autotune.trial.training._door.TrialHandle`'s.
    """

    def __init__(self, **knobs: Any) -> None:
        super().__init__(**knobs)
        self._args: Any = None
        self._output_dir: str | None = None
        self._user_drop_last = False

    def training_args(self, args: Any) -> Any:
        """The user's ``TrainingArguments`` with the trial's knobs (a new object; build the
        ``Trainer`` with it):

        - ``per_device_train_batch_size`` (``batch_size``) and ``gradient_accumulation_steps``
          (``train.global_batch_size``'s micro-batches; 1 without);
        - ``bf16`` / ``fp16`` / ``tf32`` (``precision``; ``tf32=False`` for every other
          precision, whatever the user's arguments said; in a trial, TF32 is set again from
          the precision just before training, :func:`autotune.trial.devices.cuda.reset_tf32`,
          over what ``TrainingArguments`` set as it was built);
        - ``torch_compile`` and ``torch_compile_mode`` (``compile_mode``);
        - ``dataloader_num_workers``, ``dataloader_pin_memory`` (yours, and on CUDA with
          workers; :meth:`~autotune.trial.training._door.DoorKnobs.pin_memory`) and
          ``dataloader_persistent_workers`` (``num_workers``);
        - ``optim`` (``optimizer_impl=fused``: ``adamw_torch_fused``)
          and ``gradient_checkpointing`` (``activation_checkpointing``: the model's own,
          ``use_reentrant=False``);
        - the learning rate times :attr:`lr_scale`: on its own, ``learning_rate``; in a trial,
          the optimizer's rates once the Trainer has it (yours, from ``optimizers=``, or its
          own), linear in the global batch for SGD, its square root otherwise, unless
          ``train.lr_scaling`` says;
        - in a trial also: ``seed`` and ``data_seed``, ``dataloader_drop_last=True`` (for
          training; evaluation gets yours back),
          ``use_cpu`` on a CPU, a temporary ``output_dir``, and no saving, logging, reporting
          or evaluation during training (``max_steps``, the budget, is set once the training
          data is known).

        Args:
            args: the user's ``transformers.TrainingArguments``.

        Returns:
            A copy of ``args`` with those fields (``dataclasses.replace``).

        Raises:
            DoorUsageError: a second call, or ``args`` is not ``TrainingArguments``.
        """
        from transformers import TrainingArguments

        call = "trial.training_args(args)"
        if self._args is not None:
            raise DoorUsageError(f"{call} was called twice: map one TrainingArguments per trial")
        if not isinstance(args, TrainingArguments):
            raise DoorUsageError(
                f"{call}: args must be a transformers.TrainingArguments, got a {type(args).__name__}"
            )
        knobs = self._knobs
        given = self._given
        fields: dict[str, Any] = {}
        if "batch_size" in given:
            fields["per_device_train_batch_size"] = self._batch_size
        if "precision" in given:
            fields.update(
                bf16=self._precision == "bf16",
                fp16=self._precision == "fp16",
                tf32=self._precision == "tf32",  # never the user's own for another precision
            )
        if "compile_mode" in given:
            compiled = self._compile_mode != "none"
            fields.update(
                torch_compile=compiled, torch_compile_mode=self._compile_mode if compiled else None
            )
        if "num_workers" in given:
            workers = self._num_workers or 0
            fields.update(
                dataloader_num_workers=workers,
                dataloader_persistent_workers=workers > 0,
                dataloader_pin_memory=(
                    knobs.pin_memory(args.dataloader_pin_memory)
                    if knobs is not None
                    else args.dataloader_pin_memory
                ),
            )
        if "optimizer_impl" in given and self._optimizer_impl != "default":
            fields["optim"] = _HF_OPTIMS[self._optimizer_impl]
        if "activation_checkpointing" in given and self._activation_checkpointing:
            fields.update(
                gradient_checkpointing=True, gradient_checkpointing_kwargs={"use_reentrant": False}
            )
        if knobs is None and self._lr_scale != 1.0:
            # In a trial the optimizer's rates are scaled once it exists (yours or the
            # Trainer's), by its kind; on its own the Trainer builds it from this.
            fields["learning_rate"] = args.learning_rate * self._lr_scale
        if knobs is not None:
            self._output_dir = tempfile.mkdtemp(prefix="autotune-hf-")
            fields.update(
                gradient_accumulation_steps=self._accumulation,
                seed=knobs.config.seed,
                data_seed=knobs.config.seed,
                dataloader_drop_last=True,
                use_cpu=self._device.type == "cpu",
                output_dir=self._output_dir,
                report_to="none",
                save_strategy="no",
                eval_strategy="no",
                logging_strategy="no",
                load_best_model_at_end=False,
                disable_tqdm=True,
            )
        self._user_drop_last = args.dataloader_drop_last
        self._args = dataclasses.replace(args, **fields)
        return self._args

    def _scale_learning_rates(self, optimizer: Any, scheduler: Any) -> None:
        """In a trial: the factor of the optimizer's kind (the Trainer's wrapper unwrapped)
        at this trial's global batch, applied to its rates and its scheduler's."""
        knobs = self._knobs
        if knobs is None:
            return
        inner = getattr(optimizer, "optimizer", optimizer)
        impl = knobs.config.optimizer_impl
        if impl != "default" and not inner.defaults.get(impl):
            raise DoorUsageError(
                f"optimizer_impl={impl}: the Trainer trains the optimizer you gave it "
                "(optimizers=...), which autotune cannot rebuild; let the Trainer build it from "
                "TrainingArguments.optim, or leave optimizer_impl out of the space"
            )
        self._lr_scale = knobs.lr_factor(
            optimizer_scaling_rule(inner, knobs.config.train.lr_scaling)
        )
        scale_rates(optimizer, [scheduler] if scheduler is not None else [], self._lr_scale)


class _MeterCallback:
    """The ``TrainerCallback`` that tells the measuring core of each optimizer step; built by
    :func:`_meter_callback` as a subclass of ``transformers.TrainerCallback``."""

    def __init__(
        self, meter: StepMeter, reuse: bool, samples_per_step: int, trial: HFTrial
    ) -> None:
        self.meter = meter
        self.reuse = reuse
        self.trial = trial
        self.stopped: str | None = None  # too_slow, reused, or done
        self.timing: BudgetTiming | None = None
        self.flops: StepFlopCounter | None = None
        self.flops_samples = samples_per_step

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        optimizer = kwargs.get("optimizer")
        if optimizer is not None:
            self.trial._scale_learning_rates(optimizer, kwargs.get("lr_scheduler"))
        self.meter.start()

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.meter.flops_step == state.global_step + 1:
            self.flops = StepFlopCounter()
            self.flops.open()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.flops is not None:
            self.flops.close()
        verdict = self.meter.after_step()
        if verdict == "too_slow":
            self.stopped = "too_slow"
            control.should_training_stop = True
        elif verdict == "done":
            self.timing = self.meter.budget()  # the peak memory, before evaluation allocates
            self.stopped = "reused" if self.reuse else "done"
            control.should_training_stop = True


def _meter_callback(meter: StepMeter, reuse: bool, samples_per_step: int, trial: HFTrial) -> Any:
    from transformers import TrainerCallback

    class MeterCallback(_MeterCallback, TrainerCallback):
        pass

    return MeterCallback(meter, reuse, samples_per_step, trial)


def inputs_in_format(model: torch.nn.Module, memory_format: torch.memory_format) -> Any:
    """Give ``model``'s 4-D floating-point inputs ``memory_format`` as it is called, on the
    device: a forward pre-hook (``register_forward_pre_hook(with_kwargs=True)``; the Trainer
    calls ``model(**inputs)`` after ``_prepare_inputs`` moved them), so the conversion runs
    where the workload and loop doors run it, after the transfer, and not in the collate
    function on the host inside the timed windows. A compiled model traces the hook into its
    graph.

    Returns:
        The hook's handle (``.remove()`` takes it off).
    """

    def convert(module: Any, args: Any, kwargs: Any) -> tuple[Any, Any]:
        return to_memory_format(args, memory_format), to_memory_format(kwargs, memory_format)

    return model.register_forward_pre_hook(convert, with_kwargs=True)


@contextlib.contextmanager
def ddp_environment(rank: int, world_size: int) -> Iterator[None]:
    """The environment a framework reads to find an external launcher's DDP ranks (``RANK``,
    ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``, as
    ``torchrun`` sets them), while the trial's process group, already up, serves the
    collectives; nothing with one rank."""
    if world_size == 1:
        yield
        return
    names = {
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "WORLD_SIZE": str(world_size),
        "LOCAL_WORLD_SIZE": str(world_size),
        "NODE_RANK": "0",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": os.environ.get("MASTER_PORT", "29500"),
    }
    saved = {name: os.environ.get(name) for name in names}
    os.environ.update(names)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run_hf_trainer(
    config: TrialConfig, backend: Backend, rank: int, world_size: int, rank_pids: tuple[int, ...]
) -> Measurement:
    """Build the user's ``transformers.Trainer`` as one rank of a trial, train the budget under
    the measuring core, and evaluate.

    Args:
        config: the trial (``config.workload.door == "hf_trainer"``).
        backend: the rank's device, set up.
        rank: this process's rank.
        world_size: DDP ranks.
        rank_pids: every rank's process id.

    Returns:
        The measurement (rank 0's figures are the trial's); ``train_loss`` is the Trainer's
        mean over the run, ``val_metric`` the space's ``metric:`` key of
        ``trainer.evaluate()``.

    Raises:
        DoorUsageError: the function did not return a Trainer built on
            ``trial.training_args(...)``, or ``evaluate()`` lacks the metric.
        Exception: whatever the user's code or the Trainer raises.
    """
    from transformers import Trainer

    call = DoorCall.open("hf_trainer", config, backend, rank, world_size, rank_pids)
    knobs, label = call.knobs, call.label
    trial = HFTrial._for_trial(knobs)
    try:
        with ddp_environment(rank, world_size), call.running() as (kwargs, seeds):
            trainer = call.function(trial, **kwargs)
            if not isinstance(trainer, Trainer):
                raise DoorUsageError(
                    f"{label} returned a {type(trainer).__name__}, not a transformers.Trainer"
                )
            if trial._args is None or trainer.args is not trial._args:
                raise DoorUsageError(
                    f"{label}: build the Trainer with args=trial.training_args(TrainingArguments"
                    "(...)), so that the trial's knobs reach it"
                )
            _check_evaluation(trainer, trial, config, label)
            return with_seed_note(_train_and_evaluate(trainer, trial, knobs, label), seeds)
    finally:
        if trial._output_dir is not None:
            shutil.rmtree(trial._output_dir, ignore_errors=True)


def _check_evaluation(trainer: Any, trial: HFTrial, config: TrialConfig, label: str) -> None:
    """Before the budget trains, the evaluation its metric comes from: the Trainer has an
    ``eval_dataset``, and ``trainer.evaluate()`` over its first batch returns the space's
    metric (seconds, where the whole budget would be minutes). A trial that reuses an earlier
    trial's metric does not evaluate, and is not checked, but for the baseline's discarded
    warm-up run (:meth:`~autotune.core.config.ReusedMetric.warm_up`).

    Raises:
        DoorUsageError: no ``eval_dataset``, or a metric ``evaluate()`` does not return (the
            message lists what it returns).
    """
    if config.reuse is not None and not config.reuse.check_evaluation:
        return
    metric_name = config.workload.metric.name if config.workload.metric else "eval_loss"
    dataset = trainer.eval_dataset
    if dataset is None:
        raise DoorUsageError(
            f"{label}: the Trainer has no eval_dataset, and the metric {metric_name!r} comes "
            "from trainer.evaluate() after the budget: build it with Trainer(eval_dataset=...)"
        )
    try:
        n = min(len(dataset), max(1, trainer.args.per_device_eval_batch_size))
    except TypeError:  # an iterable dataset or a dict of them: checked after the budget
        return
    first = dataset.select(range(n)) if hasattr(dataset, "select") else Subset(dataset, range(n))
    drop_last = trainer.args.dataloader_drop_last
    trainer.args.dataloader_drop_last = False
    try:
        results = trainer.evaluate(eval_dataset=first)
    finally:
        trainer.args.dataloader_drop_last = drop_last
    if metric_name not in results:
        raise DoorUsageError(
            f"{label}: trainer.evaluate() returned no {metric_name!r} (it returned "
            f"{', '.join(sorted(results))}, on {n} eval samples before the budget trained); "
            "name one of them in the space's metric: block, or return it from compute_metrics"
        )


class _FirstSamples(Sampler[Any]):
    """The first ``samples`` indices of each pass of ``sampler`` (its epoch, if it has one,
    passed on)."""

    def __init__(self, sampler: Any, samples: int) -> None:
        self.sampler = sampler
        self.samples = samples

    def __iter__(self) -> Iterator[Any]:
        return itertools.islice(iter(self.sampler), self.samples)

    def __len__(self) -> int:
        return self.samples

    def set_epoch(self, epoch: int) -> None:
        set_epoch = getattr(self.sampler, "set_epoch", None)
        if set_epoch is not None:
            set_epoch(epoch)


def whole_steps_only(trainer: Any, samples_per_epoch: int) -> None:
    """Make each of the Trainer's epochs ``samples_per_epoch`` training samples, a whole
    number of optimizer steps, as the Lightning door's ``limit_train_batches`` does.

    With ``gradient_accumulation_steps`` k and an epoch of batches not a multiple of k, the
    Trainer ends each epoch with an optimizer step of the remaining micro-batches (transformers
    5, ``trainer.py``: ``num_update_steps_per_epoch`` rounds up, the last update takes the
    ``remainder``), which the measuring core counted as k micro-batches' samples: a window
    that held it read fast, and the budget trained fewer samples than it said. The training
    sampler the Trainer builds (``_get_train_sampler``) is cut to its first
    ``samples_per_epoch`` indices per pass: a ``RandomSampler`` becomes one drawing that many
    (``num_samples``; Accelerate's seedable sampler keeps it), so each epoch leaves out other
    samples; any other one is cut to its first (:class:`_FirstSamples`). A batch sampler of
    transformers' own (``train_sampling_strategy="batch_rebalance"``) is left as it is.

    Args:
        trainer: the user's ``transformers.Trainer``.
        samples_per_epoch: whole steps per epoch x micro-batches x batch size x ranks.
    """
    make_sampler = trainer._get_train_sampler

    def sampler_of_whole_steps(*args: Any, **kwargs: Any) -> Any:
        sampler = make_sampler(*args, **kwargs)
        if sampler is None or type(sampler).__name__ == "BatchRebalanceSampler":
            return sampler
        if isinstance(sampler, RandomSampler) and not sampler.replacement:
            return RandomSampler(
                sampler.data_source, num_samples=samples_per_epoch, generator=sampler.generator
            )
        return _FirstSamples(sampler, samples_per_epoch)

    trainer._get_train_sampler = sampler_of_whole_steps


def _train_and_evaluate(trainer: Any, trial: HFTrial, knobs: DoorKnobs, label: str) -> Measurement:
    config = knobs.config
    batches = len(trainer.get_train_dataloader())
    per_epoch = batches // trial._accumulation
    if per_epoch == 0:
        raise ValueError(
            f"batch_size={config.batch_size} x gpu_count={knobs.world_size} x "
            f"{trial._accumulation} micro-batches is more than the training data holds"
        )
    if batches % trial._accumulation:  # no partial optimizer step at an epoch's end
        whole_steps_only(
            trainer, per_epoch * trial._accumulation * config.batch_size * knobs.world_size
        )
    trainer.args.max_steps = knobs.budget_steps(per_epoch)
    if config.memory_format == "channels_last":
        trainer.model.to(memory_format=torch.channels_last)
        inputs_in_format(trainer.model, torch.channels_last)
    meter = knobs.meter(per_epoch)
    callback = _meter_callback(meter, config.reuse is not None, knobs.samples_per_step, trial)
    trainer.add_callback(callback)
    if knobs.backend.kind == "cuda":
        # TrainingArguments set TF32 as they were built (the user's and trial.training_args'),
        # through torch's new API: the trial's precision decides, in the legacy API's terms.
        from autotune.trial.devices.cuda import reset_tf32

        reset_tf32(config.precision)
    output = trainer.train()
    parameters = count_parameters(trainer.model)
    if callback.stopped == "too_slow":
        return meter.too_slow_measurement(parameters)
    timing = callback.timing
    if timing is None:
        raise DoorUsageError(
            f"{label}: the Trainer stopped after {meter.step} of {meter.plan.total_steps} steps "
            "(a callback of yours set should_training_stop?); it must train the budget"
        )
    metric_name = config.workload.metric.name if config.workload.metric else "eval_loss"
    reuse = config.reuse
    if reuse is not None:
        metric, train_loss = reuse.val_metric, reuse.train_loss
    else:
        # Every validation sample counts: the training loader's drop_last is not evaluation's.
        trainer.args.dataloader_drop_last = trial._user_drop_last
        results = trainer.evaluate()
        if metric_name not in results:
            raise DoorUsageError(
                f"{label}: trainer.evaluate() returned no {metric_name!r} (it returned "
                f"{', '.join(sorted(results))}); name one of them in the space's metric: block"
            )
        metric = checked_metric(
            float(results[metric_name]),
            config.workload.metric,
            f"{label}: trainer.evaluate()[{metric_name!r}]",
        )
        train_loss = float(getattr(output, "training_loss", math.nan))
    eval_dataset = trainer.eval_dataset
    try:
        val_samples: int | None = len(eval_dataset)
    except TypeError:
        val_samples = None
    return knobs.measurement(
        meter,
        timing,
        "hf_trainer",
        flops=callback.flops.flops if callback.flops is not None else None,
        flops_samples=callback.flops_samples // knobs.world_size,
        device=trial.device,
        lr_scale=trial.lr_scale,
        accumulation=trial._accumulation,
        val_metric=metric,
        train_loss=train_loss,
        parameters=parameters,
        val_samples=val_samples,
    )
