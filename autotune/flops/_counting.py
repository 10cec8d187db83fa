"""FLOPs of one training step: :func:`count_training_flops` counts a forward and backward pass
of a real batch with ``torch.utils.flop_counter.FlopCounterMode`` (matmuls and convolutions,
as PaLM's and nanoGPT's MFU count them; elementwise ops, normalization and the optimizer step
are not counted)."""

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
    model.train()
    try:
        with counter:
            with _autocast(x.device.type, autocast_dtype):
                loss = loss_of(model(x), y)
            loss.backward()
    finally:
        model.zero_grad(set_to_none=True)
        with torch.no_grad():
            for name, b in model.named_buffers():
                b.copy_(buffers[name])
        model.train(was_training)
    return _counted(counter)


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
        self._open = True

    def close(self) -> None:
        """Stop counting and keep the counts (nothing when not open)."""
        if self._open:
            self._open = False
            self._mode.__exit__(None, None, None)
            if self._stance is not None:
                self._stance.__exit__(None, None, None)
                self._stance = None
            self.flops = _counted(self._mode)
