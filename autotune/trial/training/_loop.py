"""The loop door: the user's own training function, given a :class:`LoopTrial` handle.

A space names the function (``loop: train.py:train``); each trial process imports it again and
calls it with a handle that applies the trial's knobs where the user's code hands it their
objects, in the shape Hugging Face Accelerate made familiar::

    def train(trial: autotune.LoopTrial) -> None:
        model = Net(**trial.model)
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
        model, optimizer, train_loader, val_loader = trial.prepare(
            model, optimizer, train_loader, val_loader
        )
        for batch in trial.steps(train_loader):
            optimizer.zero_grad()
            with trial.autocast():
                loss = F.cross_entropy(model(batch["x"]), batch["y"])
            trial.backward(loss)
            optimizer.step()
        trial.report(evaluate(model, val_loader))

    if __name__ == "__main__":
        train(autotune.LoopTrial())  # PyTorch's defaults: the same file trains on its own

A loop written epoch by epoch (a per-epoch evaluation, ``StepLR``) wraps :meth:`LoopTrial.steps`
in :meth:`LoopTrial.epochs`: ``for epoch in trial.epochs(): for batch in trial.steps(loader)``.
While the function runs, ``sys.argv`` is its script's own and a ``torch.manual_seed`` of its
own is derived from the trial's seed (:func:`~autotune.trial.training._door.script_argv`,
:func:`~autotune.trial.training._door.trial_seed_guard`).

The measuring core (:class:`~autotune.trial.training._meter.StepMeter`) owns the budget inside
:meth:`LoopTrial.steps`: warm-up, timed windows synced at their edges, peak memory after the
warm-up, the busy-machine meter, the throughput floor; everything else (process isolation,
failure kinds, metric reuse, verification, every output) is the same as for a workload.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler

from autotune.core.config import TrialConfig
from autotune.core.exceptions import DoorUsageError
from autotune.core.flops import StepFlopCounter, count_parameters
from autotune.trial.devices import Backend
from autotune.trial.measure import Measurement
from autotune.trial.training._door import (
    DoorCall,
    TrialHandle,
    checked_metric,
    move_batch,
    optimizer_scaling_rule,
    rebuild_loader,
    scale_rates,
    with_seed_note,
)
from autotune.trial.training._guide import (
    checkpoint_blocks,
    gradient_sync,
    shard_model,
    with_optimizer_impl,
)
from autotune.trial.training._meter import BudgetTiming, StepMeter

__all__ = ["LoopTrial", "run_loop"]


class _StopTrial(BaseException):
    """Raised out of :meth:`LoopTrial.steps` into the user's function to end a trial early:
    below its throughput floor, or a trial that reuses another's metric once its windows are
    timed. A ``BaseException``, as ``GeneratorExit`` and ``KeyboardInterrupt`` are, so that a
    user's ``except Exception`` does not swallow it."""


#: What :meth:`LoopTrial._batches` yields between two epochs under :meth:`LoopTrial.epochs`
#: (never seen by the user's code).
_EPOCH_END = object()


class PreparedOptimizer(torch.optim.Optimizer):
    """The user's optimizer as :meth:`LoopTrial.prepare` returns it: ``step()`` runs once per
    optimizer step (after the last micro-batch of a gradient-accumulation cycle), through the
    fp16 ``GradScaler`` where one is on; ``zero_grad()`` keeps a cycle's gradients until its
    step. Everything else (``param_groups``, ``state``, ``state_dict``) is the user's
    optimizer's. A subclass of ``torch.optim.Optimizer`` (without its ``__init__``), so that a
    learning-rate scheduler can be built on it, as Accelerate's ``AcceleratedOptimizer`` is.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, trial: LoopTrial) -> None:
        # No super().__init__: the wrapped optimizer holds the parameter groups and state.
        self.optimizer = optimizer
        self._trial = trial

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        return self.optimizer.param_groups

    @param_groups.setter
    def param_groups(self, groups: list[dict[str, Any]]) -> None:
        self.optimizer.param_groups = groups

    @property
    def state(self) -> Any:
        return self.optimizer.state

    @state.setter
    def state(self, state: Any) -> None:
        self.optimizer.state = state

    @property
    def defaults(self) -> dict[str, Any]:
        return self.optimizer.defaults

    @defaults.setter
    def defaults(self, defaults: dict[str, Any]) -> None:
        self.optimizer.defaults = defaults

    def step(self, closure: Callable[[], float] | None = None) -> Any:
        """The user's optimizer step, once per accumulation cycle (a no-op before its last
        micro-batch); unscaled and skipped on inf/NaN gradients by the fp16 ``GradScaler``."""
        trial = self._trial
        if not trial.sync_gradients:
            return None
        trial._grads_pending = False
        scaler = trial._scaler
        if scaler.is_enabled():
            result = (
                scaler.step(self.optimizer, closure) if closure else scaler.step(self.optimizer)
            )
            scaler.update()
            return result
        return self.optimizer.step(closure) if closure is not None else self.optimizer.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        """The user's ``zero_grad``, except between the micro-batches of an accumulation cycle
        (whose gradients add up until the cycle's step)."""
        if self._trial._grads_pending:
            return
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict[str, Any]:
        return self.optimizer.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state_dict)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        self.optimizer.add_param_group(param_group)

    def __repr__(self) -> str:
        return f"PreparedOptimizer({self.optimizer!r})"


class PreparedScheduler:
    """The user's learning-rate scheduler as :meth:`LoopTrial.prepare` returns it: ``step()``
    runs once per optimizer step (after an accumulation cycle's last micro-batch); every other
    attribute is the scheduler's own."""

    def __init__(self, scheduler: Any, trial: LoopTrial) -> None:
        self.scheduler = scheduler
        self._trial = trial

    def step(self, *args: Any, **kwargs: Any) -> None:
        """The scheduler's step, once per optimizer step."""
        if self._trial.sync_gradients:
            self.scheduler.step(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.scheduler, name)


class DeviceLoader:
    """An evaluation loader as :meth:`LoopTrial.prepare` returns it: the user's DataLoader,
    unchanged, whose batches arrive on the trial's device (4-D images in its memory format).

    Attributes:
        loader: the user's DataLoader.
    """

    def __init__(self, loader: DataLoader[Any], trial: LoopTrial) -> None:
        self.loader = loader
        self._trial = trial

    def __iter__(self) -> Iterator[Any]:
        device, memory_format = self._trial.device, self._trial._memory_format
        for batch in self.loader:
            yield move_batch(batch, device, memory_format)

    def __len__(self) -> int:
        return len(self.loader)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)


class LoopTrial(TrialHandle):
    """The handle a ``loop:`` door's function trains with; in a study, one trial's knobs.

    Made by autotune inside a trial process. Made by the user (``LoopTrial()``), it gives
    PyTorch's defaults, so the same file trains on its own (``python train.py``): fp32, no
    ``torch.compile``, the model's own memory format, the loaders as the user made them, one
    process, CUDA when torch sees a GPU. Any knob given here applies as a trial would apply
    it, so a verified answer can be written in (``LoopTrial(batch_size=128,
    memory_format="channels_last", lr_scale=1.414)``). The knobs' arguments and properties
    are :class:`~autotune.trial.training._door.TrialHandle`'s.

    Raises:
        ValueError: a knob outside its values (the message names it).
    """

    def __init__(self, **knobs: Any) -> None:
        super().__init__(**knobs)
        self._scaler = torch.amp.GradScaler(
            self._device.type, enabled=self._precision == "fp16" and self._device.type == "cuda"
        )
        self._prepared = False
        self._eager_model: torch.nn.Module | None = None
        self._ddp: DistributedDataParallel | None = None
        self._train_loader: DataLoader[Any] | None = None
        self._optimizer: torch.optim.Optimizer | None = None
        self._steps_started = False
        self._steps_finished = False
        self._budget: Iterator[Any] | None = None  # the whole budget's batches, epoch by epoch
        self._epochs_started = False
        self._epoch_steps_called = False  # trial.steps() was called in the current epoch
        self._epoch_ended = False  # the current epoch's trial.steps() ran to its end
        self._steps_entered = 0  # steps whose first batch the loop was given
        self._micro_last = True  # the current micro-batch ends its accumulation cycle
        self._grads_pending = False
        self._epoch_loss: torch.Tensor | None = None
        self._epoch_steps = 0
        self._metric: float | None = None
        self._val_samples: int | None = None
        self._meter: StepMeter | None = None
        self._timing: BudgetTiming | None = None
        self._stopped: str | None = None  # "too_slow" or "reused"
        self._flops: StepFlopCounter | None = None
        self._flops_samples = 0

    @property
    def sync_gradients(self) -> bool:
        """True when the current batch ends its optimizer step (always without gradient
        accumulation): where a ``clip_grad_norm_`` belongs."""
        return self._micro_last

    # -- the hooks -------------------------------------------------------------------------

    def prepare(
        self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, *others: Any
    ) -> Any:
        """Apply the trial's knobs to the user's objects, in the order PyTorch requires: the
        model to the device and memory format, its named blocks checkpointed
        (``activation_checkpointing``), then DDP or FSDP2's ``fully_shard``
        (``gpu_count > 1``, ``data_parallel``), then ``torch.compile``; the optimizer rebuilt
        in its implementation (``optimizer_impl``) or over the sharded parameters, and its
        learning rates times :attr:`lr_scale`; the first
        DataLoader (the training loader) rebuilt with the trial's batch size, workers, pinning
        and seeded sampler; further DataLoaders (evaluation) yielding batches on the device;
        learning-rate schedulers stepping once per optimizer step.

        Args:
            model: the model (``torch.nn.Module``), built on the CPU or anywhere.
            optimizer: its optimizer, over ``model.parameters()``.
            *others: DataLoaders (the first one trains) and learning-rate schedulers, in any
                order.

        Returns:
            ``(model, optimizer, *others)`` in the order given: the model to call (compiled,
            DDP-wrapped), a :class:`PreparedOptimizer`, the rebuilt training loader (iterate
            it with :meth:`steps`), :class:`DeviceLoader`\\ s, :class:`PreparedScheduler`\\ s.

        Raises:
            DoorUsageError: a second call; an argument of another kind; no DataLoader.
        """
        call = "trial.prepare(model, optimizer, ...)"
        if self._prepared:
            raise DoorUsageError(
                "trial.prepare() was called twice: call it once, with the model, the optimizer, "
                "the DataLoaders and the schedulers"
            )
        if not isinstance(model, torch.nn.Module):
            raise DoorUsageError(
                f"{call}: model must be a torch.nn.Module, got a {type(model).__name__}"
            )
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise DoorUsageError(
                f"{call}: optimizer must be a torch.optim.Optimizer, got a {type(optimizer).__name__}"
            )
        loaders = [o for o in others if isinstance(o, DataLoader)]
        for i, other in enumerate(others):
            if not isinstance(other, DataLoader) and not callable(getattr(other, "step", None)):
                raise DoorUsageError(
                    f"{call}: argument {i + 3} is a {type(other).__name__}; give DataLoaders and "
                    "learning-rate schedulers after the model and optimizer"
                )
        if not loaders:
            raise DoorUsageError(
                f"{call}: give it your training DataLoader too (the first DataLoader is the one "
                "trial.steps() iterates)"
            )
        self._prepared = True
        # Module.to takes memory_format (keyword only; documented, and parsed at run time by
        # torch._C._nn._parse_to), but torch's overloads of `to` leave it out.
        model = model.to(device=self._device, memory_format=self._memory_format)  # type: ignore[call-overload]
        if self._activation_checkpointing:
            checkpoint_blocks(model, self._blocks)
        self._eager_model = model
        step_model: Any = model
        replaced: dict[int, torch.nn.Parameter] = {}
        if self._world_size > 1 and self._data_parallel == "fsdp":
            before = {name: id(p) for name, p in model.named_parameters()}
            step_model = model = shard_model(
                model, self._blocks, self._world_size, self._device, self._autocast_dtype
            )
            replaced = {before[name]: p for name, p in model.named_parameters() if name in before}
        elif self._world_size > 1:
            step_model = self._ddp = DistributedDataParallel(model)
        if self._compile_mode != "none":
            step_model = torch.compile(step_model, mode=self._compile_mode)
        model.train()
        if self._knobs is not None:
            rule = optimizer_scaling_rule(optimizer, self._knobs.config.train.lr_scaling)
            self._lr_scale = self._knobs.lr_factor(rule)
        schedulers = [o for o in others if not isinstance(o, DataLoader)]
        optimizer = with_optimizer_impl(optimizer, self._optimizer_impl, schedulers, replaced)
        scale_rates(optimizer, schedulers, self._lr_scale)
        self._optimizer = optimizer
        prepared_optimizer = PreparedOptimizer(optimizer, self)
        out: list[Any] = [step_model, prepared_optimizer]
        for other in others:
            if other is loaders[0]:
                self._train_loader = self._training_loader(other)
                out.append(self._train_loader)
            elif isinstance(other, DataLoader):
                out.append(DeviceLoader(other, self))
            else:
                out.append(PreparedScheduler(other, self))
        return tuple(out)

    def _training_loader(self, loader: DataLoader[Any]) -> DataLoader[Any]:
        knobs = self._knobs
        if knobs is None and self._batch_size is None and self._num_workers is None:
            return loader  # on its own, with nothing to change: the user's loader as it is
        return rebuild_loader(
            loader,
            batch_size=self._batch_size or loader.batch_size or 1,
            num_workers=self._num_workers if self._num_workers is not None else loader.num_workers,
            pin_memory=knobs.pin_memory(loader.pin_memory)
            if knobs is not None
            else loader.pin_memory,
            seed=knobs.config.seed if knobs is not None else torch.initial_seed() % 2**63,
            rank=self._rank,
            world_size=self._world_size,
            call="trial.prepare()",
        )

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """The forward pass's context: ``torch.autocast`` in fp16 or bf16, nothing for fp32
        and tf32 (whose TF32 flags are set for the whole process)."""
        dtype = self._autocast_dtype
        return torch.autocast(self._device.type, dtype=dtype, enabled=dtype is not None)

    def backward(self, loss: torch.Tensor) -> None:
        """``loss.backward()``, divided over the micro-batches of an accumulation cycle and
        scaled by the fp16 ``GradScaler`` where one is on (CUDA).

        Raises:
            DoorUsageError: before :meth:`prepare`.
        """
        if not self._prepared:
            raise DoorUsageError(
                "trial.backward(loss): call trial.prepare(model, optimizer, loader) first"
            )
        k = self._accumulation
        if self._epoch_loss is not None:
            self._epoch_loss += loss.detach().float() / k
        scaled = loss / k if k > 1 else loss
        self._scaler.scale(scaled).backward()
        self._grads_pending = True

    def clip_grad_norm_(
        self,
        parameters: Iterable[torch.Tensor] | torch.Tensor,
        max_norm: float,
        norm_type: float = 2.0,
    ) -> torch.Tensor | None:
        """``torch.nn.utils.clip_grad_norm_`` on unscaled gradients (the fp16 ``GradScaler``
        unscales first), once per optimizer step: None before an accumulation cycle's last
        micro-batch."""
        if not self.sync_gradients:
            return None
        if self._scaler.is_enabled() and self._optimizer is not None:
            self._scaler.unscale_(self._optimizer)
        return torch.nn.utils.clip_grad_norm_(parameters, max_norm, norm_type=norm_type)

    def steps(self, loader: DataLoader[Any]) -> Iterator[Any]:
        """The training batches of the budget, on the device: ``train.epochs`` passes over
        ``loader`` (capped by ``train.max_steps``; on its own, ``epochs`` and ``max_steps``),
        one batch per optimizer step, or each accumulation cycle's micro-batches in turn. In a
        study it owns the timing: warm-up, timed windows synced only at their edges, peak
        memory after the warm-up; a trial below its throughput floor, or one that reuses an
        earlier trial's metric once timed, ends inside it (the rest of the function does not
        run). Iterate it to its end, once.

        Args:
            loader: the training loader :meth:`prepare` returned.

        Raises:
            DoorUsageError: before :meth:`prepare`, a second call, or another loader.
        """
        if not self._prepared:
            raise DoorUsageError(
                "trial.steps(loader): call trial.prepare(model, optimizer, loader) first"
            )
        if loader is not self._train_loader:
            raise DoorUsageError(
                "trial.steps(loader): pass the training DataLoader that trial.prepare() returned "
                "(the first DataLoader you gave it)"
            )
        if self._epochs_started:
            if self._epoch_steps_called:
                raise DoorUsageError(
                    "trial.steps() was called twice in one epoch of trial.epochs(): call it "
                    "once per epoch"
                )
            self._epoch_steps_called = True
            return self._one_epoch()
        if self._steps_started:
            raise DoorUsageError("trial.steps() was called twice: one training loop per trial")
        self._steps_started = True
        return self._batches(loader)

    def epochs(self, start: int = 0) -> Iterator[int]:
        """The budget's epochs, for a loop written epoch by epoch: ``start, start + 1, ...``
        (as ``enumerate`` counts; ``start=1`` for a loop that counts from 1) until the
        budget is spent (``train.epochs`` passes, fewer where ``train.max_steps`` or a short
        evidence budget ends it sooner; on its own, ``epochs`` and ``max_steps``). Inside each,
        :meth:`steps` yields that epoch's batches::

            for epoch in trial.epochs():
                for x, y in trial.steps(train_loader):
                    ...                                 # one optimizer step
                accuracy = test(model, val_loader)       # per-epoch evaluation, untimed
                scheduler.step()                         # a per-epoch schedule (StepLR)
            trial.report(accuracy)

        What runs between two epochs' steps (an evaluation, logging, a scheduler's step) is
        the user's, as written; the measuring core's clock stops there, so it is not timed as
        training (the busy-machine meter and, on CUDA, the energy meter keep running).

        Args:
            start: the first epoch's number.

        Raises:
            DoorUsageError: before :meth:`prepare`, after :meth:`steps` began outside it, a
                second call, or an epoch in which :meth:`steps` was not iterated to its end.
        """
        if not self._prepared or self._train_loader is None:
            raise DoorUsageError(
                "trial.epochs(): call trial.prepare(model, optimizer, loader) first"
            )
        if self._epochs_started or self._steps_started:
            raise DoorUsageError(
                "trial.epochs() after the training loop began: iterate it once, around "
                "trial.steps(train_loader)"
            )
        self._epochs_started = self._steps_started = True
        self._budget = self._batches(self._train_loader, by_epoch=True)
        return self._epoch_numbers(start)

    def _epoch_numbers(self, start: int) -> Iterator[int]:
        epoch = start
        while not self._steps_finished:
            self._epoch_steps_called = False
            yield epoch
            if not self._steps_finished and not self._epoch_ended:
                raise DoorUsageError(
                    f"epoch {epoch} of trial.epochs() did not iterate trial.steps(train_loader) "
                    "to its end: call it once in every epoch, and do not break out of it"
                )
            epoch += 1

    def _one_epoch(self) -> Iterator[Any]:
        """One epoch's batches of the budget's generator (it stops at the next epoch's first
        batch, with the meter's clock stopped, and resumes there)."""
        assert self._budget is not None
        self._epoch_ended = False
        for batch in self._budget:
            if batch is _EPOCH_END:
                self._epoch_ended = True
                return
            yield batch
        self._epoch_ended = True

    def budget_steps(self, loader: DataLoader[Any]) -> int:
        """The optimizer steps :meth:`steps` yields over ``loader`` (to size a learning-rate
        schedule): ``train.epochs`` passes in a study, ``epochs`` on its own, capped by
        ``max_steps``; each step is ``gpu_count`` ranks x the accumulation's micro-batches.

        Raises:
            DoorUsageError: the loader has no length.
        """
        try:
            per_epoch = len(loader) // self._accumulation
        except TypeError:
            raise DoorUsageError(
                "trial.budget_steps(loader): the loader has no length to count steps by"
            ) from None
        if self._knobs is not None:
            return self._knobs.budget_steps(per_epoch)
        total = per_epoch * self._epochs
        return min(total, self._max_steps) if self._max_steps is not None else total

    def _batches(self, loader: DataLoader[Any], *, by_epoch: bool = False) -> Iterator[Any]:
        """The budget's batches; ``by_epoch``: with :data:`_EPOCH_END` before each epoch's
        first batch after the first, yielded with the meter's clock stopped."""
        k = self._accumulation
        knobs = self._knobs
        try:
            per_epoch = len(loader) // k
        except TypeError:  # an iterable dataset without a length
            if knobs is not None:
                raise DoorUsageError(
                    "trial.steps(loader): the training loader has no length, and a trial's budget "
                    "counts passes over it (train.epochs); give its dataset a __len__"
                ) from None
            per_epoch = None
        if per_epoch == 0:
            raise ValueError(
                f"batch_size={self._batch_size} x gpu_count={self._world_size} x {k} "
                "micro-batches is more than one pass of the training loader holds"
            )
        meter = knobs.meter(per_epoch) if knobs is not None and per_epoch else None
        self._meter = meter
        total: int | None
        if knobs is not None and per_epoch:
            total = knobs.budget_steps(per_epoch)
        else:
            total = per_epoch * self._epochs if per_epoch else None
            if self._max_steps is not None:
                total = min(total, self._max_steps) if total is not None else self._max_steps
        self._epoch_loss = torch.zeros((), device=self._device)
        micro_batches = self._micro_batches(loader, per_epoch)
        if meter is not None:
            meter.start()
        step = 0
        while total is None or step < total:
            first = next(micro_batches, None)  # the step's first micro-batch
            if first is None:  # an unsized loader on its own: its epochs are over
                self._steps_finished = True
                return
            if by_epoch and first[0] and step > 0:
                if meter is not None:
                    meter.pause()
                yield _EPOCH_END  # the user's code between two epochs runs here, untimed
                if meter is not None:
                    meter.resume()
            counter = self._open_flops_counter(meter, step + 1)
            try:
                for micro in range(k):
                    found = first if micro == 0 else next(micro_batches, None)
                    if found is None:  # an unsized loader on its own: its epochs are over
                        self._steps_finished = True
                        return
                    new_epoch, batch = found
                    if new_epoch and micro == 0:
                        self._epoch_loss.zero_()
                        self._epoch_steps = 0
                    self._micro_last = micro == k - 1
                    self._steps_entered = step + 1
                    sync = gradient_sync(self._eager_model, self._ddp, self._micro_last)
                    with sync:  # the forward and backward of this micro-batch run here
                        yield move_batch(batch, self._device, self._memory_format)
            finally:
                self._micro_last = True
                if counter is not None:
                    counter.close()
            step += 1
            self._epoch_steps += 1
            if meter is None:
                continue
            verdict = meter.after_step()
            if verdict == "too_slow":
                self._stopped = "too_slow"
                raise _StopTrial
            if verdict == "done":
                break
        if meter is not None:
            self._timing = meter.budget()  # the peak memory, before evaluation allocates
            reuse = knobs.config.reuse if knobs is not None else None
            if reuse is not None and not reuse.check_evaluation:
                self._stopped = "reused"
                raise _StopTrial
        self._steps_finished = True

    def _micro_batches(
        self, loader: DataLoader[Any], per_epoch: int | None
    ) -> Iterator[tuple[bool, Any]]:
        """``(starts an epoch, batch)``, epoch after epoch (reshuffled: a
        ``DistributedSampler`` is told its epoch), ``per_epoch`` accumulation cycles of each
        (the micro-batches that fill no cycle are left out, as the workload door's
        ``drop_last`` leaves them); an unsized loader on its own: ``epochs`` whole passes."""
        k = self._accumulation
        epoch = 0
        while per_epoch is not None or epoch < self._epochs:
            if isinstance(loader.sampler, DistributedSampler):
                loader.sampler.set_epoch(epoch)
            for i, batch in enumerate(loader):
                if per_epoch is not None and i >= per_epoch * k:
                    break
                yield i == 0, batch
            epoch += 1

    def _left_early(self) -> str:
        total = self._meter.plan.total_steps if self._meter is not None else "?"
        return (
            f"the loop left trial.steps() after {self._steps_entered} of {total} steps: iterate "
            "it to its end (it ends with the budget)"
        )

    def _open_flops_counter(self, meter: StepMeter | None, step: int) -> StepFlopCounter | None:
        """A FLOP counter open over ``step`` when it is the meter's counting step."""
        if meter is None or meter.flops_step != step:
            return None
        self._flops = StepFlopCounter()
        self._flops_samples = (self._batch_size or 1) * self._accumulation
        self._flops.open()
        return self._flops

    def report(self, metric: float | torch.Tensor, *, samples: int | None = None) -> None:
        """The validation metric of the budget's model, once, after :meth:`steps` ran to its
        end (the space's ``metric:`` names it and its direction; top-1 accuracy in [0, 1] by
        default).

        Args:
            metric: a real number (a 0-d tensor too).
            samples: the validation samples it was computed on (the verification's accuracy
                interval uses it), if known.

        Raises:
            DoorUsageError: a second report, a report before the loop ended, not a number; in
                a study, a NaN or infinite metric, or an accuracy outside [0, 1]
                (:func:`~autotune.trial.training._door.checked_metric`).
        """
        if self._metric is not None:
            raise DoorUsageError("trial.report() was called twice: report the budget's metric once")
        if self._knobs is not None and not self._steps_finished:
            if self._steps_started and self._meter is not None:
                raise DoorUsageError(f"trial.report(metric): {self._left_early()}")
            raise DoorUsageError(
                "trial.report(metric) came before trial.steps() ran to its end: report the "
                "metric of the budget's model, after the loop"
            )
        try:
            value = float(metric.item() if isinstance(metric, torch.Tensor) else metric)
        except (TypeError, ValueError, RuntimeError):
            raise DoorUsageError(
                f"trial.report(metric): the metric must be a real number, got {metric!r}"
            ) from None
        if self._knobs is not None:  # in a study: a figure the study can rank
            value = checked_metric(
                value, self._knobs.config.workload.metric, "trial.report(metric)"
            )
        self._metric = value
        self._val_samples = samples

    # -- the measurement -------------------------------------------------------------------

    def _measurement(self, label: str) -> Measurement:
        """The trial's measurement once the user's function has returned (or stopped inside
        :meth:`steps`).

        Raises:
            DoorUsageError: a hook the function never called, or a loop it left early.
        """
        knobs, meter = self._knobs, self._meter
        assert knobs is not None, "a study's handle"
        if not self._prepared:
            raise DoorUsageError(
                f"{label} returned without calling trial.prepare(model, optimizer, loader)"
            )
        if meter is None:
            raise DoorUsageError(
                f"{label} returned without iterating trial.steps(loader): train with "
                "`for batch in trial.steps(train_loader):`"
            )
        parameters = count_parameters(self._eager_model) if self._eager_model is not None else 0
        if self._stopped == "too_slow":
            return meter.too_slow_measurement(parameters)
        timing = self._timing
        if timing is None:
            raise DoorUsageError(f"{label}: {self._left_early()}")
        reuse = knobs.config.reuse
        if self._metric is None and (reuse is None or reuse.check_evaluation):
            raise DoorUsageError(
                f"{label} returned without trial.report(metric): report the validation metric "
                "after the loop"
            )
        if reuse is not None:
            metric, train_loss = reuse.val_metric, reuse.train_loss
        else:
            assert self._metric is not None  # a run without a reuse must report: raised above
            metric = self._metric
            train_loss = (
                float(self._epoch_loss.item() / max(1, self._epoch_steps))
                if self._epoch_loss is not None
                else math.nan
            )
        return knobs.measurement(
            meter,
            timing,
            "loop",
            flops=self._flops.flops if self._flops is not None else None,
            flops_samples=self._flops_samples,
            device=self._device,
            lr_scale=self._lr_scale,
            accumulation=self._accumulation,
            val_metric=metric,
            train_loss=train_loss,
            parameters=parameters,
            val_samples=self._val_samples,
        )


def run_loop(
    config: TrialConfig, backend: Backend, rank: int, world_size: int, rank_pids: tuple[int, ...]
) -> Measurement:
    """Run the user's ``loop:`` function as one rank of a trial and measure it.

    The peak-memory window opens before the function runs (its data, model and optimizer
    included); the training seed is set, so the model the function builds starts the same in
    every trial with this seed, and a ``torch.manual_seed`` of the function's own is derived
    from it (:func:`~autotune.trial.training._door.trial_seed_guard`), never put in its place.

    Args:
        config: the trial (``config.workload.door == "loop"``).
        backend: the rank's device, set up.
        rank: this process's rank.
        world_size: DDP ranks.
        rank_pids: every rank's process id.

    Returns:
        The measurement (rank 0's figures are the trial's).

    Raises:
        DoorUsageError: the function misused its handle (the message names the call).
        Exception: whatever the user's function raises.
    """
    call = DoorCall.open("loop", config, backend, rank, world_size, rank_pids)
    trial = LoopTrial._for_trial(call.knobs)
    with call.running() as (kwargs, seeds), contextlib.suppress(_StopTrial):
        call.function(trial, **kwargs)
    return with_seed_note(trial._measurement(call.label), seeds)
