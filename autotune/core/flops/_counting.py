"""FLOPs of one training step: :func:`count_training_flops` counts a forward and backward pass
of a real batch with ``torch.utils.flop_counter.FlopCounterMode`` (matmuls and convolutions,
as PaLM's and nanoGPT's MFU count them; elementwise ops, normalization and the optimizer step
are not counted).

Model FLOPs, not hardware FLOPs: the forward that activation checkpointing recomputes in the
backward is left out (:class:`_Recomputation`), so that MFU stays model FLOP utilization
(Chowdhery et al., "PaLM", 2022, appendix B: MFU counts no rematerialization; the figure
that counts it is HFU, Korthikanti et al., "Reducing Activation Recomputation in Large
Transformer Models", 2022, section 6). Counted with it, a fully checkpointed CNN's MFU read
about 1.3x its true value, and a checkpointed trial looked better used than the same model
without checkpointing at the same throughput."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import torch

__all__ = [
    "StepFlopCounter",
    "TrainingFlops",
    "count_training_flops",
    "count_training_flops_by_kind",
]


def _autocast(device_type: str, dtype: torch.dtype | None) -> Any:
    import torch

    return torch.autocast(device_type, dtype=dtype, enabled=dtype is not None)


class TrainingFlops(NamedTuple):
    """FLOPs of one training step, all of them and the convolutions' share.

    Attributes:
        total: every counted FLOP (matmuls and convolutions), forward and backward.
        convolution: the convolutions' FLOPs among them (``aten.convolution`` and its
            backward): cuDNN may run these in TF32 where fp32 matmuls stay in fp32.
    """

    total: int
    convolution: int


def count_training_flops(
    model: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    autocast_dtype: torch.dtype | None = None,
    loss_fn: Callable[[Any, Any], torch.Tensor] | None = None,
) -> int:
    """FLOPs of one training forward and backward pass of ``(x, y)``: the total of
    :func:`count_training_flops_by_kind` (same arguments, same rules)."""
    return count_training_flops_by_kind(
        model, x, y, autocast_dtype=autocast_dtype, loss_fn=loss_fn
    ).total


def count_training_flops_by_kind(
    model: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    autocast_dtype: torch.dtype | None = None,
    loss_fn: Callable[[Any, Any], torch.Tensor] | None = None,
) -> TrainingFlops:
    """FLOPs of one training forward and backward pass of ``(x, y)`` with the loss ``loss_fn``
    (default: cross-entropy), with the convolutions' share apart.

    Counted by ``torch.utils.flop_counter.FlopCounterMode`` on the real model (the eager
    module, not a compiled or DDP wrapper). The model is left as it was: its buffers
    (BatchNorm running statistics) are restored, its gradients cleared and its train/eval
    mode kept. Call it outside timed windows: it runs a real step.

    Args:
        model: the model, on its device.
        x: one input batch ``(B, ...)`` on the model's device, in the trial's memory format.
        y: its targets ``(B, ...)`` (class labels ``(B,)`` for cross-entropy).
        autocast_dtype: the trial's autocast dtype (fp16/bf16), or None.
        loss_fn: ``loss(output, target)``; the workload's loss.

    Returns:
        FLOPs of the whole batch (divide by ``B`` for per sample), in all and of the
        convolutions.
    """
    import torch
    import torch.nn.functional as F
    from torch.utils.flop_counter import FlopCounterMode

    loss_of = loss_fn or F.cross_entropy

    buffers = {name: b.detach().clone() for name, b in model.named_buffers()}
    was_training = model.training
    counter = FlopCounterMode(display=False)
    recomputation = _Recomputation(counter)
    model.train()
    try:
        with counter, recomputation:
            with _autocast(x.device.type, autocast_dtype):
                loss = loss_of(model(x), y)
            loss.backward()
    finally:
        model.zero_grad(set_to_none=True)
        with torch.no_grad():
            for name, b in model.named_buffers():
                b.copy_(buffers[name])
        model.train(was_training)
    return recomputation.left_out(_counted(counter))


class _Recomputation:
    """The FLOPs a ``FlopCounterMode`` counts while a module's forward runs inside a backward
    pass: activation checkpointing's recomputation (``torch.utils.checkpoint`` calls the
    checkpointed function again from the backward, ``use_reentrant=False`` through a saved
    tensor's unpack hook, the reentrant variant from its autograd function's backward), which
    autotune's own wrapper (``CheckpointedBlock``), transformers' ``gradient_checkpointing``
    and a user's ``checkpoint(module, ...)`` all run through ``nn.Module.__call__``.

    A forward inside a backward is told by the autograd engine's current graph task
    (``torch._C._current_graph_task_id()``: -1 outside a backward), read in global module
    hooks (``torch.nn.modules.module.register_module_forward_pre_hook`` / ``_hook``) held
    only while counting (the post-hook also where the forward raises: the recomputation
    ends with an exception once it has rebuilt what the backward needs, checkpoint's early
    stop); nested modules count once, by their outermost. A recomputed
    function that is not a module (``checkpoint(some_function, x)``) is not seen, and stays
    counted.
    """

    def __init__(self, mode: Any) -> None:
        self._mode = mode
        self._depth = 0
        self._before: TrainingFlops | None = None
        self._handles: list[Any] = []
        self.total = 0
        self.convolution = 0

    def __enter__(self) -> _Recomputation:
        from torch.nn.modules.module import (
            register_module_forward_hook,
            register_module_forward_pre_hook,
        )

        self._handles = [
            register_module_forward_pre_hook(self._pre),
            # Called when the forward raises too: the recomputation stops with an exception
            # once it has rebuilt what the backward needs (checkpoint's early stop).
            register_module_forward_hook(self._post, always_call=True),
        ]
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def _pre(self, module: Any, args: Any) -> None:
        import torch

        if self._before is None and torch._C._current_graph_task_id() != -1:
            self._before = _counted(self._mode)
        if self._before is not None:
            self._depth += 1

    def _post(self, module: Any, args: Any, output: Any) -> None:
        if self._before is None:
            return
        self._depth -= 1
        if self._depth == 0:
            after = _counted(self._mode)
            self.total += after.total - self._before.total
            self.convolution += after.convolution - self._before.convolution
            self._before = None

    def left_out(self, counted: TrainingFlops) -> TrainingFlops:
        """``counted`` less the recomputation's FLOPs."""
        return TrainingFlops(counted.total - self.total, counted.convolution - self.convolution)


def _counted(counter: Any) -> TrainingFlops:
    """A ``FlopCounterMode``'s counts, in all and of the convolutions."""
    by_op = counter.get_flop_counts().get("Global", {})
    convolution = sum(n for op, n in by_op.items() if "convolution" in str(op))
    return TrainingFlops(int(counter.get_total_flops()), int(convolution))


class StepFlopCounter:
    """Counts the FLOPs of whatever runs while it is open: a training step that is the user's
    own code (the ``loop``, ``hf_trainer`` and ``lightning`` doors), forward, backward and
    optimizer step, with ``torch.utils.flop_counter.FlopCounterMode`` (which counts matmuls,
    convolutions and attention, not elementwise ops, so the optimizer adds nothing). It also
    counts through ``torch.compile``'d modules (the same FLOPs as eager).

    Open it with :meth:`open` and close it with :meth:`close` (a step may span several
    calls of a generator, so not only as a ``with`` block); :attr:`flops` holds the counts
    once closed.

    While open, ``torch.compile``'d code runs eagerly (``torch.compiler.set_stance
    ("force_eager")``, torch >= 2.6): under a dispatch mode Dynamo can miss its cache and
    mark the frame skipped for good, so every later, timed step would run eager (PyTorch
    issues 140909, 144787, 190286; on torch 2.13 CPU a compiled step counted here ran 0 of
    its next calls compiled). Eager FLOPs are the compiled ones (the same ops).
    """

    def __init__(self) -> None:
        from torch.utils.flop_counter import FlopCounterMode

        self._mode = FlopCounterMode(display=False)
        self._recomputation = _Recomputation(self._mode)
        self._stance: Any = None
        self._open = False
        #: The counts, once :meth:`close` has run.
        self.flops: TrainingFlops | None = None

    def open(self) -> None:
        """Start counting, with compiled code run eagerly until :meth:`close`."""
        import torch

        set_stance = getattr(torch.compiler, "set_stance", None)
        if set_stance is not None:
            self._stance = set_stance("force_eager")
            self._stance.__enter__()
        self._mode.__enter__()
        self._recomputation.__enter__()
        self._open = True

    def close(self) -> None:
        """Stop counting and keep the counts (nothing when not open)."""
        if self._open:
            self._open = False
            self._recomputation.__exit__(None, None, None)
            self._mode.__exit__(None, None, None)
            if self._stance is not None:
                self._stance.__exit__(None, None, None)
                self._stance = None
            self.flops = self._recomputation.left_out(_counted(self._mode))
