"""``best --diff``: what changes between the baseline trial's knobs and a recommended
configuration's, as lines to paste into a training script, in the words of the framework the
user trains with.

Three styles, each in its framework's own argument names:

- ``torch``: plain PyTorch: the ``DataLoader`` arguments, ``model.to(memory_format=...)``,
  ``torch.compile``, ``torch.autocast`` around the forward pass and the loss, the
  ``GradScaler`` of fp16, ``torch.set_float32_matmul_precision`` for TF32,
  ``DistributedDataParallel`` launched by ``torchrun``, and the learning rate.
- ``lightning``: ``Trainer(precision="bf16-mixed", devices=N, strategy="ddp",
  accumulate_grad_batches=N)`` (Lightning's precision strings; TF32 is not one, so it stays
  ``torch.set_float32_matmul_precision``), and the LightningModule's hooks that change
  (``training_step``, ``train_dataloader``, ``configure_optimizers``).
- ``hf``: ``transformers.TrainingArguments(bf16=..., fp16=..., tf32=..., torch_compile=...,
  torch_compile_mode=..., dataloader_*=..., per_device_train_batch_size=...,
  gradient_accumulation_steps=..., learning_rate=...)``; ``channels_last`` has no field
  there, so it is a line on the model.
- ``loop``: the ``autotune.LoopTrial(batch_size=..., precision=..., lr_scale=...)`` a loop
  door's script runs with on its own, which applies the knobs as the trial did.

A study's door picks the default (:data:`DOOR_STYLES`): a workload speaks plain PyTorch, the
other doors their framework's words. For a door the learning rate is the user's own, so the
lines give the factor the trial multiplied it by (``lr_scale``).

A model knob that changes is a ``build_model(...)`` line in every style. The learning rate is
printed whenever the global batch (batch size x GPU count x accumulation steps) changes: it
is the peak learning rate the trial trained with (after warm-up), worked out by the trial's
own stored training settings (:meth:`autotune.core.config.TrainSettings.peak_lr`).

:func:`diff_lines` is pure (knobs in, lines out); :func:`export_diff` gathers its input from a
study's :class:`~autotune.study.export.BestConfigs`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from autotune.core.config import BUILTIN_BLOCKS, BUILTIN_WORKLOAD_REF, SYSTEM_KNOBS
from autotune.core.exceptions import VerificationError
from autotune.study.baseline import PYTORCH_DEFAULTS
from autotune.study.export._best import BestConfigs
from autotune.study.export._snippet import AUTOCAST_DTYPES, trained_lr
from autotune.study.export._yaml import export_choice
from autotune.study.report import SIMULATED_TEXT, ParetoRow, ratio_text

__all__ = ["DIFF_STYLES", "DOOR_STYLES", "DiffStyle", "diff_lines", "export_diff"]

#: ``--style``: the framework whose words a diff speaks.
DiffStyle = Literal["torch", "lightning", "hf", "loop"]
#: The values of :data:`DiffStyle`, in order (the first is the default).
DIFF_STYLES: tuple[str, ...] = get_args(DiffStyle)

#: What each style calls its framework, for the header.
_FRAMEWORK = {
    "torch": "PyTorch",
    "lightning": "Lightning",
    "hf": "Transformers",
    "loop": "loop-door (autotune.LoopTrial)",
}
#: Lightning's ``Trainer(precision=...)`` for each precision; TF32 is fp32 to Lightning
#: (``torch.set_float32_matmul_precision`` turns it on).
_LIGHTNING_PRECISION = {
    "fp32": "32-true",
    "tf32": "32-true",
    "fp16": "16-mixed",
    "bf16": "bf16-mixed",
}
_MEMORY_FORMAT = {"contiguous": "torch.contiguous_format", "channels_last": "torch.channels_last"}
#: Input conversion for channels_last: only 4-D tensors have it.
_INPUT_NOTE = "4-D (B, C, H, W) inputs only"


def _fmt(value: Any) -> str:
    """A value as Python source: ``"relu"``, ``2``, ``True``; a float in at most 6 significant
    figures (``0.00212132``)."""
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_fmt(k)}: {_fmt(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    if isinstance(value, str) and not isinstance(value, _Source):
        return json.dumps(value)
    return repr(value)


def _call(args: Mapping[str, Any]) -> str:
    return ", ".join(f"{name}={_fmt(value)}" for name, value in args.items())


class _Source(str):
    """Source text shown as it is (not quoted) by :func:`_fmt`."""

    def __repr__(self) -> str:
        return str(self)


@dataclass(frozen=True)
class _Settings:
    """What :func:`diff_lines` is told besides the knobs."""

    lr: float | None
    base_lr: float | None
    lr_scale: float | None  # a door's: the user's own rate times this (None: a workload)
    accumulation: int
    base_accumulation: int
    device_type: str
    blocks: tuple[str, ...] = ()
    function: str = "train"  # the loop door's function, as the space names it
    loader_home: str = "LightningModule"  # where a Lightning script's train_dataloader lives
    command_line: bool = False  # an HF script that reads its TrainingArguments from flags

    def global_batches(self, c: _Change) -> tuple[int, int]:
        """The baseline's and the configuration's global batch: samples per optimizer step
        over all ranks (batch size x GPU count x accumulation steps)."""
        old = int(c.before("batch_size")) * int(c.before("gpu_count")) * self.base_accumulation
        new = int(c.after("batch_size")) * int(c.after("gpu_count")) * self.accumulation
        return old, new


@dataclass(frozen=True)
class _Change:
    """The baseline's (``old``) and the configuration's (``new``) knobs, read with PyTorch's
    defaults for a knob one of them lacks."""

    old: Mapping[str, Any]
    new: Mapping[str, Any]

    def get(self, side: Mapping[str, Any], name: str) -> Any:
        return side.get(name, PYTORCH_DEFAULTS.get(name))

    def before(self, name: str) -> Any:
        return self.get(self.old, name)

    def after(self, name: str) -> Any:
        return self.get(self.new, name)

    def changed(self, name: str) -> bool:
        return bool(self.before(name) != self.after(name))

    def model_knobs(self) -> list[str]:
        """The model knobs (every knob but the tuner's) whose value changes, in order."""
        names = [n for n in self.new if n not in SYSTEM_KNOBS]
        names += [n for n in self.old if n not in SYSTEM_KNOBS and n not in self.new]
        return [n for n in names if self.old.get(n) != self.new.get(n)]


def _was(args: Mapping[str, Any], before: Mapping[str, Any]) -> str:
    """``  # was batch_size=64, num_workers=0``: the baseline's values of ``args``."""
    shown = {name: before[name] for name in args if name in before}
    return f"  # was {_call(shown)}" if shown else ""


def _model_line(c: _Change) -> list[str]:
    """``model = build_model(depth=2)  # was 3``: the model knobs that change."""
    names = c.model_knobs()
    if not names:
        return []
    args = {n: c.new[n] for n in names if n in c.new}
    if len(names) == 1:
        was = _fmt(c.old[names[0]]) if names[0] in c.old else "unset"
    else:
        was = ", ".join(f"{n}={_fmt(c.old[n]) if n in c.old else 'unset'}" for n in names)
    return [f"model = build_model({_call(args)})  # was {was}"]


def _memory_format_line(c: _Change, where: str = "") -> list[str]:
    if not c.changed("memory_format"):
        return []
    new, old = _MEMORY_FORMAT[c.after("memory_format")], _MEMORY_FORMAT[c.before("memory_format")]
    return [f"model = model.to(memory_format={new})  # was {old}{where}"]


def _compile_line(c: _Change, then: str = "") -> list[str]:
    if not c.changed("compile_mode"):
        return []
    new, old = c.after("compile_mode"), c.before("compile_mode")
    was = "eager" if old == "none" else f'mode="{old}"'
    if new == "none":
        return [f"# no torch.compile: eager (was {was}); remove model = torch.compile(model, ...)"]
    mode = "" if new == "default" else f', mode="{new}"'
    return [f"model = torch.compile(model{mode})  # was {was}{then}"]


def _tf32_line(c: _Change, note: str = "") -> list[str]:
    """TF32 matmuls on (``tf32``) or off again (from a ``tf32`` baseline). cuDNN's
    convolutions already run in TF32 by PyTorch's default (``torch.backends.cudnn.allow_tf32``)."""
    new_tf32, old_tf32 = c.after("precision") == "tf32", c.before("precision") == "tf32"
    if new_tf32 == old_tf32:
        return []
    if new_tf32:
        return [
            'torch.set_float32_matmul_precision("high")  # TF32 matmuls '
            f"(torch.backends.cuda.matmul.allow_tf32 = True){note}"
        ]
    return ['torch.set_float32_matmul_precision("highest")  # no TF32 (was "high")']


def _loader_args(
    c: _Change, device_type: str, *, sampler: bool
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The DataLoader arguments that change, and the baseline's values of them.

    ``pin_memory`` (on CUDA) and ``persistent_workers`` follow ``num_workers > 0``, as in the
    trial; they are named when that changes (``persistent_workers=True`` with no workers is
    an error in PyTorch)."""
    new: dict[str, Any] = {}
    old: dict[str, Any] = {}
    for name in ("batch_size", "num_workers"):
        if c.changed(name):
            new[name], old[name] = c.after(name), c.before(name)
    workers_new, workers_old = int(c.after("num_workers")) > 0, int(c.before("num_workers")) > 0
    if workers_new != workers_old:
        if device_type == "cuda":
            new["pin_memory"], old["pin_memory"] = workers_new, workers_old
        new["persistent_workers"], old["persistent_workers"] = workers_new, workers_old
    if sampler and int(c.after("gpu_count")) > 1 and int(c.before("gpu_count")) == 1:
        new["sampler"] = _Source("DistributedSampler(train_set)")
    return new, old


def _lr_line(
    prefix: str,
    c: _Change,
    s: _Settings,
    suffix: str = "",
) -> list[str]:
    """The learning rate when the global batch (or the rate) changes: ``lr = 0.002121  # ...``
    (``prefix`` is ``lr = `` or ``learning_rate=``); for a door, whose rate is the user's own,
    the factor to multiply it by: ``lr = lr * 1.41421  # ...``."""
    lr, base_lr = s.lr, s.base_lr
    old_batch, new_batch = s.global_batches(c)
    scale = s.lr_scale
    if old_batch == new_batch and (
        (scale is not None and math.isclose(scale, 1.0, rel_tol=1e-9))
        or (
            scale is None
            and (lr is None or base_lr is None or math.isclose(lr, base_lr, rel_tol=1e-9))
        )
    ):
        return []
    went = (
        f"the global batch went {old_batch} -> {new_batch}"
        if old_batch != new_batch
        else f"the global batch stays {new_batch}"
    )
    if scale is not None:
        name = prefix.strip().rstrip("=").strip()
        return [
            f"{prefix}{_Source(name)} * {_fmt(scale)}{suffix}  # your rate times {_fmt(scale)}: "
            f"{went}; the peak, after warm-up"
        ]
    if lr is None:
        return [f"# learning rate: not stored for this trial; scale yours: {went}"]
    was = f"was {_fmt(base_lr)}: " if base_lr is not None else ""
    return [f"{prefix}{_fmt(lr)}{suffix}  # {was}{went}; the peak, after warm-up"]


# --- the guide's knobs, in each style -------------------------------------------------------

_IMPL_FLAGS = {
    "default": "",
    "for_loop": "foreach=False",
    "foreach": "foreach=True",
    "fused": "fused=True",
}


def _impl_was(c: _Change) -> str:
    old = c.before("optimizer_impl")
    return "PyTorch's default implementation" if old == "default" else _IMPL_FLAGS[old]


def _blocks_text(s: _Settings) -> str:
    return ", ".join(s.blocks) if s.blocks else "your blocks"


def _fsdp_lines(s: _Settings) -> list[str]:
    """FSDP2 in place of DDP: each block sharded, then the model (before compile and the
    optimizer, which must see the sharded parameters)."""
    classes = ", ".join(s.blocks) if s.blocks else "YourBlock"
    return [
        "from torch.distributed.fsdp import fully_shard  # instead of DistributedDataParallel",
        f"for block in [m for m in model.modules() if type(m).__name__ in {{{_quoted(s.blocks)}}}]:"
        f"  # {classes}: each block, then the model",
        "    fully_shard(block)",
        "fully_shard(model)  # before torch.compile and the optimizer",
    ]


def _quoted(names: Sequence[str]) -> str:
    return ", ".join(f'"{n}"' for n in names) if names else '"YourBlock"'


def _guide_lines(c: _Change, s: _Settings, style: str) -> list[str]:
    """The guide's knobs that change, in ``style``'s words (the process-wide ones first)."""
    lines: list[str] = []
    if c.changed("cuda_expandable_segments"):
        on = bool(c.after("cuda_expandable_segments"))
        lines.append(
            "# launch with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (read when CUDA starts)"
            if on
            else "# launch without expandable_segments:True in PYTORCH_CUDA_ALLOC_CONF"
        )
    if c.changed("cpu_threads"):
        threads = int(c.after("cpu_threads"))
        was = int(c.before("cpu_threads"))
        was_text = "PyTorch's default, one per core" if was == 0 else str(was)
        lines.append(
            f"torch.set_num_threads({threads})  # was {was_text}; intra-op threads per process"
            if threads
            else f"# torch.set_num_threads: PyTorch's default, one per core (was {was})"
        )
    if c.changed("cudnn_benchmark") and style != "lightning":  # Lightning: Trainer(benchmark=)
        on = bool(c.after("cudnn_benchmark"))
        lines.append(f"torch.backends.cudnn.benchmark = {on}  # was {not on}")
    if c.changed("activation_checkpointing") and style not in ("hf",):
        on = bool(c.after("activation_checkpointing"))
        lines.append(
            f"# activation checkpointing: run each {_blocks_text(s)} as "
            "torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)"
            if on
            else "# no activation checkpointing: call your blocks directly"
        )
    if c.changed("optimizer_impl") and style in ("torch",):
        flag = _IMPL_FLAGS[c.after("optimizer_impl")]
        args = ", ".join(a for a in ("model.parameters()", "lr=lr", flag) if a)
        lines.append(f"optimizer = torch.optim.AdamW({args})  # was {_impl_was(c)}")
    return lines


# --- torch ----------------------------------------------------------------------------------


def _torch_lines(c: _Change, s: _Settings) -> list[str]:
    """Plain PyTorch, in the order a script does it: launch, process group, TF32, model,
    memory format, DDP, compile, scaler, loader, learning rate, then the loop's lines."""
    lines: list[str] = []
    gpus_new, gpus_old = int(c.after("gpu_count")), int(c.before("gpu_count"))
    ddp_on = gpus_new > 1 and gpus_old == 1
    if c.changed("gpu_count"):
        lines.append(_launch_line(gpus_new, gpus_old))
    if ddp_on:
        backend = "nccl" if s.device_type == "cuda" else "gloo"
        lines.append(f'torch.distributed.init_process_group("{backend}")  # one process per GPU')
        if s.device_type == "cuda":
            lines.append('torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))')
    lines += _tf32_line(c)
    lines += _model_line(c)
    lines += _memory_format_line(c)
    fsdp_new = gpus_new > 1 and c.after("data_parallel") == "fsdp"
    fsdp_old = gpus_old > 1 and c.before("data_parallel") == "fsdp"
    if fsdp_new and (ddp_on or not fsdp_old):
        lines += _fsdp_lines(s)
    elif ddp_on or (fsdp_old and gpus_new > 1):
        lines.append(
            "model = torch.nn.parallel.DistributedDataParallel(model)  # after .to(device), "
            "before torch.compile" + ("; was FSDP's fully_shard" if fsdp_old else "")
        )
    elif gpus_new == 1 and gpus_old > 1:
        lines.append("# no DistributedDataParallel, no DistributedSampler: one process")
    lines += _compile_line(c)
    lines += _guide_lines(c, s, "torch")
    scaler_new = c.after("precision") == "fp16" and s.device_type == "cuda"
    scaler_old = c.before("precision") == "fp16" and s.device_type == "cuda"
    if scaler_new and not scaler_old:
        lines.append(f'scaler = torch.amp.GradScaler("{s.device_type}")  # fp16 loss scaling')
    new, old = _loader_args(c, s.device_type, sampler=True)
    if new:
        note = _was(new, old)
        if "sampler" in new:
            note += "  # no shuffle=True: the sampler shuffles"
        if gpus_new > 1 and "batch_size" in new:
            note += "  # batch_size per process"
        lines.append(f"loader = DataLoader(train_set, {_call(new)}){note}")
    lines += _accumulation_comment(s)
    lines += _lr_line("lr = ", c, s, "  # the optimizer's lr")
    lines += _torch_loop(c, s.device_type, scaler_new, scaler_old)
    return [_fix_comment(line) for line in lines]


def _fix_comment(line: str) -> str:
    """One ``#`` per line: ``x  # a  # b`` reads ``x  # a; b``."""
    code, sep, comment = line.partition("  # ")
    if not sep:
        return line
    return f"{code}  # {comment.replace('  # ', '; ')}"


def _launch_line(gpus_new: int, gpus_old: int) -> str:
    if gpus_new > 1:
        was = "python train.py" if gpus_old == 1 else f"--nproc_per_node={gpus_old}"
        return f"# launch: torchrun --nproc_per_node={gpus_new} train.py (DDP; was {was})"
    return (
        f"# launch: python train.py (one process, no DDP; was torchrun --nproc_per_node={gpus_old})"
    )


def _accumulation_comment(s: _Settings) -> list[str]:
    if s.accumulation == s.base_accumulation:
        return []
    return [
        f"# gradient accumulation: {s.accumulation} micro-batches per optimizer step (was "
        f"{s.base_accumulation}): divide the loss by {s.accumulation}, step the optimizer every "
        f"{s.accumulation} batches (DDP: model.no_sync() on the others)"
    ]


def _torch_loop(c: _Change, device_type: str, scaler_new: bool, scaler_old: bool) -> list[str]:
    """The lines inside the training loop: 4-D inputs in channels_last, autocast around the
    forward pass and the loss, the GradScaler's backward and step."""
    body: list[str] = []
    if c.changed("memory_format"):
        fmt = _MEMORY_FORMAT[c.after("memory_format")]
        body.append(f"    x = x.to(device, memory_format={fmt})  # {_INPUT_NOTE}")
    dtype_new = AUTOCAST_DTYPES.get(c.after("precision"))
    dtype_old = AUTOCAST_DTYPES.get(c.before("precision"))
    if dtype_new != dtype_old:
        if dtype_new is not None:
            body += [
                f'    with torch.autocast(device_type="{device_type}", dtype={dtype_new}):',
                "        loss = loss_fn(model(x), y)  # forward and loss only",
            ]
            if dtype_old is not None:
                body[-2] += f"  # was dtype={dtype_old}"
        else:
            body.append(
                f"    loss = loss_fn(model(x), y)  # no torch.autocast (was dtype={dtype_old})"
            )
    if scaler_new and not scaler_old:
        body += [
            "    scaler.scale(loss).backward()  # instead of loss.backward()",
            "    scaler.step(optimizer)  # instead of optimizer.step()",
            "    scaler.update()",
        ]
    elif scaler_old and not scaler_new:
        body.append("    loss.backward()  # no GradScaler (was fp16); then optimizer.step()")
    return (
        ["for x, y in loader:  # your training loop; its other lines stay", *body] if body else []
    )


# --- lightning ------------------------------------------------------------------------------


def _lightning_lines(c: _Change, s: _Settings) -> list[str]:
    """Lightning: the Trainer's arguments, the model before ``trainer.fit``, then the
    LightningModule's hooks that change (Lightning adds the DistributedSampler and the fp16
    GradScaler itself)."""
    lines = _tf32_line(c, "; not a Trainer precision")
    trainer: dict[str, Any] = {}
    before: dict[str, Any] = {}
    old_p = _LIGHTNING_PRECISION[c.before("precision")]
    new_p = _LIGHTNING_PRECISION[c.after("precision")]
    if new_p != old_p:
        trainer["precision"], before["precision"] = new_p, old_p
    if c.changed("gpu_count"):
        gpus_new, gpus_old = int(c.after("gpu_count")), int(c.before("gpu_count"))
        trainer["devices"], before["devices"] = gpus_new, gpus_old
        strategy_new, strategy_old = ("ddp" if n > 1 else "auto" for n in (gpus_new, gpus_old))
        if strategy_new != strategy_old:
            trainer["strategy"], before["strategy"] = strategy_new, strategy_old
    if s.accumulation != s.base_accumulation:
        trainer["accumulate_grad_batches"] = s.accumulation
        before["accumulate_grad_batches"] = s.base_accumulation
    if c.changed("cudnn_benchmark"):
        trainer["benchmark"] = bool(c.after("cudnn_benchmark"))
        before["benchmark"] = bool(c.before("cudnn_benchmark"))
    if c.changed("data_parallel"):
        fsdp = c.after("data_parallel") == "fsdp"
        trainer["strategy"] = "fsdp" if fsdp else "ddp"
        before["strategy"] = "ddp" if fsdp else "fsdp"
    if trainer:
        lines.append(f"trainer = Trainer({_call(trainer)}){_was(trainer, before)}")
    lines += _model_line(c)
    lines += _memory_format_line(c, "; before trainer.fit(model)")
    lines += _compile_line(c, "; then trainer.fit(model)")
    lines += _guide_lines(c, s, "lightning")
    hooks: list[str] = []
    if c.changed("memory_format"):
        fmt = _MEMORY_FORMAT[c.after("memory_format")]
        hooks += [
            "def training_step(self, batch, batch_idx):",
            "    x, y = batch",
            f"    x = x.to(memory_format={fmt})  # {_INPUT_NOTE}",
        ]
    new, old = _loader_args(c, s.device_type, sampler=False)
    loader_hook: list[str] = []
    if new:
        loader_hook = [
            "def train_dataloader(self):",
            f"    return DataLoader(self.train_set, {_call(new)}){_was(new, old)}",
        ]
    if s.loader_home == "LightningModule":
        hooks += loader_hook
    lr = _lr_line("    lr = ", c, s, "  # the optimizer's lr")
    if c.changed("optimizer_impl"):
        flag = _IMPL_FLAGS[c.after("optimizer_impl")]
        args = ", ".join(a for a in ("self.parameters()", "lr=lr", flag) if a)
        lr.append(f"    return torch.optim.AdamW({args})  # was {_impl_was(c)}")
    if lr:
        hooks += ["def configure_optimizers(self):", *lr]
    if hooks:
        lines += ["# in your LightningModule:", *hooks]
    if loader_hook and s.loader_home != "LightningModule":
        lines += [f"# in your {s.loader_home}:", *loader_hook]
    return [_fix_comment(line) for line in lines]


# --- hf -------------------------------------------------------------------------------------


def _hf_precision(precision: str) -> dict[str, Any]:
    return {"bf16": precision == "bf16", "fp16": precision == "fp16", "tf32": precision == "tf32"}


def _hf_compile(mode: str) -> dict[str, Any]:
    return {
        "torch_compile": mode != "none",
        "torch_compile_mode": None if mode in ("none", "default") else mode,
    }


def _hf_lines(c: _Change, s: _Settings) -> list[str]:
    """Transformers: the launch, the model's lines, then the ``TrainingArguments`` that
    change, one per line with the baseline's value."""
    lines: list[str] = []
    if c.changed("gpu_count"):
        lines.append(_launch_line(int(c.after("gpu_count")), int(c.before("gpu_count"))))
    lines += _model_line(c)
    if c.changed("memory_format"):
        lines += _memory_format_line(c, "; TrainingArguments has no field for it")
        fmt = _MEMORY_FORMAT[c.after("memory_format")]
        lines.append(f"# 4-D inputs too: pixel_values.to(memory_format={fmt}) in your collator")
    new: dict[str, Any] = {}
    old: dict[str, Any] = {}
    pairs = (
        (_hf_precision(c.after("precision")), _hf_precision(c.before("precision"))),
        (_hf_compile(c.after("compile_mode")), _hf_compile(c.before("compile_mode"))),
    )
    for after, before in pairs:
        for name in after:
            if after[name] != before[name]:
                new[name], old[name] = after[name], before[name]
    names = {
        "batch_size": "per_device_train_batch_size",
        "num_workers": "dataloader_num_workers",
        "pin_memory": "dataloader_pin_memory",
        "persistent_workers": "dataloader_persistent_workers",
    }
    if c.changed("batch_size"):
        name = names["batch_size"]
        new[name], old[name] = c.after("batch_size"), c.before("batch_size")
    if s.accumulation != s.base_accumulation:
        new["gradient_accumulation_steps"] = s.accumulation
        old["gradient_accumulation_steps"] = s.base_accumulation
    if c.changed("optimizer_impl"):
        optims = {"fused": "adamw_torch_fused"}
        optim_new, optim_old = (
            optims.get(c.get(side, "optimizer_impl"), "adamw_torch") for side in (c.new, c.old)
        )
        if optim_new != optim_old:
            new["optim"], old["optim"] = optim_new, optim_old
        if c.after("optimizer_impl") in ("for_loop", "foreach"):
            lines.append(
                f"# optimizer_impl={c.after('optimizer_impl')}: TrainingArguments.optim has no "
                "field for it; give the Trainer your own optimizer (optimizers=...)"
            )
    if c.changed("activation_checkpointing"):
        new["gradient_checkpointing"] = bool(c.after("activation_checkpointing"))
        old["gradient_checkpointing"] = bool(c.before("activation_checkpointing"))
    if c.changed("data_parallel"):
        fsdp = c.after("data_parallel") == "fsdp"
        new["fsdp"], old["fsdp"] = ("full_shard", "") if fsdp else ("", "full_shard")
    lines += _guide_lines(c, s, "hf")
    loader_new, loader_old = _loader_args(c, s.device_type, sampler=False)
    for name in ("num_workers", "pin_memory", "persistent_workers"):
        if name in loader_new:
            new[names[name]], old[names[name]] = loader_new[name], loader_old[name]
    if s.command_line:  # HfArgumentParser's flags, as the script is launched
        flags = [
            f"--{name} {_flag(value)}  # was {_flag(old[name])}" for name, value in new.items()
        ]
        for line in _lr_line("learning_rate=", c, s):  # the flag takes a number, not a formula
            line = re.sub(
                r"^learning_rate=learning_rate \* (\S+)", r"--learning_rate <yours x \1>", line
            )
            flags.append(re.sub(r"^learning_rate=", "--learning_rate ", line))
        if flags:
            lines += ["# on the script's command line (HfArgumentParser), your other flags stay:"]
            lines += flags
        return [_fix_comment(line) for line in lines]
    args = [f"    {name}={_fmt(value)},  # was {_fmt(old[name])}" for name, value in new.items()]
    args += _lr_line("    learning_rate=", c, s, ",")
    if args:
        lines += ["args = TrainingArguments(", "    # your other arguments stay", *args, ")"]
    return [_fix_comment(line) for line in lines]


def _flag(value: Any) -> str:
    """A value as HfArgumentParser reads it from the command line (``True``, ``128``, ``""``
    for an empty string)."""
    if value is None:
        return "None"
    if isinstance(value, str):
        return value or '""'
    return _fmt(value)


# --- loop ------------------------------------------------------------------------------------

#: The knobs a LoopTrial takes, in its argument order.
_LOOP_KNOBS = ("batch_size", "precision", "memory_format", "compile_mode", "num_workers")


def _loop_lines(c: _Change, s: _Settings) -> list[str]:
    """The loop door: the ``autotune.LoopTrial(...)`` the script runs with on its own, with the
    knobs that change (the handle applies them as a trial did), and the DDP launch it cannot
    make on its own."""
    lines: list[str] = []
    args: dict[str, Any] = {}
    before: dict[str, Any] = {}
    for name in _LOOP_KNOBS:
        if c.changed(name):
            args[name], before[name] = c.after(name), c.before(name)
    model = {n: c.new[n] for n in c.model_knobs() if n in c.new}
    if model:
        args["model"] = model
        before["model"] = {n: c.old.get(n) for n in model}
    for name in ("optimizer_impl", "cpu_threads", "cudnn_benchmark"):
        if c.changed(name):
            args[name], before[name] = c.after(name), c.before(name)
    if c.changed("activation_checkpointing"):
        args["activation_checkpointing"] = bool(c.after("activation_checkpointing"))
        before["activation_checkpointing"] = bool(c.before("activation_checkpointing"))
        if args["activation_checkpointing"] and s.blocks:
            args["blocks"] = list(s.blocks)
    old_batch, new_batch = s.global_batches(c)
    scale = s.lr_scale
    if scale is not None and not math.isclose(scale, 1.0, rel_tol=1e-9):
        args["lr_scale"] = scale
        before["lr_scale"] = 1.0
    if args:
        note = _was(args, before)
        if "lr_scale" in args:
            note += f"  # lr_scale: the global batch went {old_batch} -> {new_batch}"
        lines.append(f"{s.function}(autotune.LoopTrial({_call(args)})){note}")
    if c.changed("gpu_count"):
        gpus = int(c.after("gpu_count"))
        lines.append(
            f"# gpu_count={gpus}: DDP over {gpus} processes, which a study's trial launches and "
            "LoopTrial() on its own does not (--style torch gives the torchrun lines)"
        )
    if c.changed("data_parallel") and c.after("data_parallel") == "fsdp":
        lines.append(
            "# data_parallel=fsdp: FSDP2's fully_shard over the trial's ranks, which LoopTrial() "
            "on its own does not launch (--style torch gives the lines)"
        )
    if c.changed("cuda_expandable_segments"):
        lines += _guide_lines(
            _Change(
                {"cuda_expandable_segments": c.before("cuda_expandable_segments")},
                {"cuda_expandable_segments": c.after("cuda_expandable_segments")},
            ),
            s,
            "loop",
        )
    if s.accumulation != s.base_accumulation:
        lines.append(
            f"# gradient accumulation: {s.accumulation} micro-batches per optimizer step (was "
            f"{s.base_accumulation}), as train.global_batch_size makes trial.steps() yield them"
        )
    return [_fix_comment(line) for line in lines]


# --- the public face ------------------------------------------------------------------------


_STYLE_LINES: dict[str, Callable[[_Change, _Settings], list[str]]] = {
    "torch": _torch_lines,
    "lightning": _lightning_lines,
    "hf": _hf_lines,
    "loop": _loop_lines,
}
#: Each door's own words: the style ``best --diff`` speaks unless ``--style`` says.
DOOR_STYLES: dict[str, str] = {
    "workload": "torch",
    "loop": "loop",
    "hf_trainer": "hf",
    "lightning": "lightning",
}


def diff_lines(
    baseline_params: Mapping[str, Any],
    params: Mapping[str, Any],
    *,
    style: DiffStyle = "torch",
    learning_rate: float | None = None,
    baseline_learning_rate: float | None = None,
    learning_rate_scale: float | None = None,
    accumulation_steps: int = 1,
    baseline_accumulation_steps: int = 1,
    device_type: Literal["cuda", "cpu"] = "cuda",
    header: Sequence[str] = (),
    blocks: Sequence[str] = (),
    function: str = "train",
    loader_home: str = "LightningModule",
    command_line: bool = False,
) -> list[str]:
    """What changes from the baseline's knobs to ``params``, as lines to paste.

    A knob that does not change prints nothing; no change at all prints one line saying so.

    Args:
        baseline_params: the baseline trial's knobs (the tuner's and the model's, by Optuna
            parameter name); a tuner knob it lacks is PyTorch's default.
        params: the configuration's knobs.
        style: ``torch`` (plain PyTorch), ``lightning`` (``lightning.Trainer`` and a
            LightningModule's hooks), ``hf`` (``transformers.TrainingArguments``) or ``loop``
            (``autotune.LoopTrial``).
        learning_rate: the configuration's peak learning rate (after warm-up), printed when
            the global batch changes; None: not known (a line says to scale it).
        baseline_learning_rate: the baseline's, for the ``was`` comment.
        learning_rate_scale: a door's: the factor the configuration multiplied the user's own
            learning rate by, against the baseline's (printed instead of a rate).
        accumulation_steps: micro-batches per optimizer step and rank (with a fixed
            ``train.global_batch_size``; 1 otherwise).
        baseline_accumulation_steps: the baseline's.
        device_type: ``cuda`` or ``cpu``: autocast's ``device_type``; the GradScaler of fp16
            and ``pin_memory`` are CUDA's only, as in the trial.
        header: comment lines to put on top (without ``#``).
        blocks: the model's blocks by class name (activation checkpointing's and FSDP's
            units), for the lines that name them.
        function: ``loop``: the user's function, as the space names it (``main`` for
            ``loop: main.py:main``).
        loader_home: ``lightning``: the class whose ``train_dataloader`` builds the training
            loader (``LightningDataModule`` when the script returns one).
        command_line: ``hf``: the script reads its ``TrainingArguments`` from its command line
            (the space passes ``workload_args.argv``): the changes as flags.

    Returns:
        The lines: ``# header`` comments, then the changes.

    Raises:
        ValueError: an unknown ``style`` or ``device_type``.
    """
    if style not in _STYLE_LINES:
        raise ValueError(f"style must be one of {', '.join(DIFF_STYLES)}, but got {style!r}")
    if device_type not in ("cuda", "cpu"):
        raise ValueError(f"device_type must be cuda or cpu, but got {device_type!r}")
    settings = _Settings(
        learning_rate,
        baseline_learning_rate,
        learning_rate_scale,
        accumulation_steps,
        baseline_accumulation_steps,
        device_type,
        tuple(blocks),
        function,
        loader_home,
        command_line,
    )
    body = _STYLE_LINES[style](_Change(baseline_params, params), settings)
    if not body:
        body = ["# no change: the configuration's knobs are the baseline's"]
    return [f"# {line}" for line in header] + body


def _device_type(config: Mapping[str, Any]) -> Literal["cuda", "cpu"]:
    """Where the trial ran, as autocast names it: ``cpu``, else ``cuda`` (the mock device
    simulates a GPU, except its ``cpu`` profile)."""
    if config.get("device") == "cpu" or config.get("mock_profile") == "cpu":
        return "cpu"
    return "cuda"


def _header(best: BestConfigs, row: ParetoRow, baseline: int, style: str) -> list[str]:
    """Which trial against which baseline, with its verified speedup (or NOT VERIFIED and
    its single-trial figure), SIMULATED when it is, and what the lines are."""
    summary = best.verification
    rec = summary.recommended if summary is not None else None
    faster = "sooner to the target" if best.objective_mode == "time_to_accuracy" else "faster"
    start = (
        f"autotune: study {best.study_name!r}, trial {row.number} vs the baseline "
        f"(trial {baseline})"
    )
    if summary is not None and rec is not None and rec.trial_number == row.number:
        ci = rec.speedup_ci95
        interval = f", 95 % CI {ci[0]:.2f}-{ci[1]:.2f}x" if ci else ""
        lines = [
            f"{start}: verified {ratio_text(rec.speedup)} {faster} (verification "
            f"{summary.number}, {summary.rounds} rounds{interval})"
        ]
    else:
        single = (
            f": {ratio_text(row.speedup)} {faster} than the baseline's trial"
            if row.speedup is not None
            else ""
        )
        lines = [f"{start}: NOT VERIFIED, chosen with --trial (single-trial figures{single})"]
    if best.simulated:
        lines.append(SIMULATED_TEXT)
    lines.append(f"What changes in a {_FRAMEWORK[style]} training script; the rest stays.")
    return lines


def export_diff(
    best: BestConfigs, *, style: DiffStyle | None = None, trial: int | None = None
) -> list[str]:
    """``best --diff``: the verified recommendation (or ``trial``) as the lines that change
    from the study's baseline trial, with a header saying which trial and its verified
    speedup (or ``NOT VERIFIED`` for a trial chosen with ``trial``).

    The learning rates are those the two trials trained with: for a workload, each trial's
    peak learning rate from its stored ``train`` settings (``lr`` at ``reference_batch_size``,
    scaled by ``lr_scaling`` to its global batch: :meth:`autotune.core.config.TrainSettings.peak_lr`);
    for the other doors, which train at the user's own rate, the factor each trial multiplied
    it by (its ``lr_scale``).

    Args:
        best: the study's verdict and configurations (:func:`best_configurations`).
        style: ``torch``, ``lightning``, ``hf`` or ``loop`` (see :func:`diff_lines`); None:
            the study's door's own (:data:`DOOR_STYLES`).
        trial: diff this feasible, measured trial instead of the recommendation.

    Returns:
        The lines (see :func:`diff_lines`).

    Raises:
        VerificationError: no ``trial`` and no recommendation, or the study has no baseline
            trial to compare with.
        ConfigError: ``trial`` is not a feasible, measured trial.
        ValueError: an unknown ``style``.
    """
    if style is not None and style not in DIFF_STYLES:
        raise ValueError(f"style must be one of {', '.join(DIFF_STYLES)}, but got {style!r}")
    row = export_choice(best, trial)
    if best.baseline is None:
        raise VerificationError(
            f"study={best.study_name}: no baseline trial, so there is nothing to diff against"
        )
    baseline = best.baseline
    config = best.configs.get(row.number) or {}
    door = str((config.get("workload") or {}).get("door", "workload"))
    chosen = style or DOOR_STYLES.get(door, "torch")
    lr, accumulation = trained_lr(config, row.params)
    base_lr, base_accumulation = trained_lr(
        best.configs.get(baseline.number) or {}, baseline.params
    )
    scale: float | None = None
    if door != "workload":
        lr = base_lr = None  # a door trains at the user's own rate: train.lr is not it
        new_scale = best.lr_scales.get(row.number)
        old_scale = best.lr_scales.get(baseline.number, 1.0)
        scale = new_scale / old_scale if new_scale is not None and old_scale else None
    return diff_lines(
        baseline.params,
        row.params,
        style=chosen,  # type: ignore[arg-type]
        learning_rate=lr,
        baseline_learning_rate=base_lr,
        learning_rate_scale=scale,
        accumulation_steps=accumulation,
        baseline_accumulation_steps=base_accumulation,
        device_type=_device_type(config),
        header=_header(best, row, baseline.number, chosen),
        blocks=config.get("blocks") or _builtin_blocks(config),
        **_script_shape(config, best.loader_homes.get(baseline.number)),
    )


def _script_shape(config: Mapping[str, Any], loader_home: str | None) -> dict[str, Any]:
    """What a door saw of the user's script, for :func:`diff_lines`: the loop's function name
    (the space's ``loop: FILE.py:NAME``), where a Lightning script's training loader lives (its
    baseline trial recorded it), and whether an HF script takes its command line
    (``workload_args.argv``)."""
    workload = config.get("workload") or {}
    ref = str(workload.get("ref") or "")
    shape: dict[str, Any] = {"command_line": "argv" in (workload.get("args") or {})}
    if workload.get("door") == "loop" and ":" in ref:
        shape["function"] = ref.rsplit(":", 1)[1].rsplit(".", 1)[-1]
    if loader_home:
        shape["loader_home"] = loader_home
    return shape


def _builtin_blocks(config: Mapping[str, Any]) -> tuple[str, ...]:
    """The built-in model's block class (``ConvBlock`` for the cnn, ``HiddenLayer`` for the
    mlp: :data:`autotune.core.config.BUILTIN_BLOCKS`); none for another workload."""
    workload = config.get("workload") or {}
    if workload.get("ref") != BUILTIN_WORKLOAD_REF:
        return ()
    family = (workload.get("args") or {}).get("family")
    return (BUILTIN_BLOCKS[0],) if family == "cnn" else (BUILTIN_BLOCKS[1],)
