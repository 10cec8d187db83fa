"""The PyTorch side of a configuration: how its knobs map onto PyTorch, and a ready-to-paste
training function that applies them (``best --export`` writes it)."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from autotune.core.config import TrainSettings

__all__ = ["pytorch_settings", "pytorch_snippet"]

#: The autocast dtype of each precision that autocasts, as PyTorch source.
AUTOCAST_DTYPES = {"fp16": "torch.float16", "bf16": "torch.bfloat16"}


def pytorch_settings(params: Mapping[str, Any]) -> dict[str, Any]:
    """How a configuration's knobs map onto PyTorch (what the trial itself did).

    Args:
        params: the knobs (``precision``, ``memory_format``, ``compile_mode``, ``batch_size``,
            ``num_workers``, ``gpu_count``).

    Returns:
        ``autocast_dtype`` (``"torch.bfloat16"``, ``"torch.float16"`` or None for fp32/tf32),
        ``tf32``, ``channels_last``, ``compile_mode`` (None: eager), ``dataloader`` keyword
        arguments and ``ddp_world_size``.
    """
    workers = int(params.get("num_workers", 0))
    compile_mode = params.get("compile_mode", "none")
    return {
        "autocast_dtype": AUTOCAST_DTYPES.get(str(params.get("precision", "fp32"))),
        "tf32": params.get("precision") == "tf32",
        "grad_scaler": params.get("precision") == "fp16",
        "channels_last": params.get("memory_format") == "channels_last",
        "compile_mode": None if compile_mode == "none" else str(compile_mode),
        "dataloader": {
            "batch_size": int(params.get("batch_size", 1)),
            "num_workers": workers,
            "pin_memory": "True on CUDA" if workers > 0 else False,
            "persistent_workers": workers > 0,
            "drop_last": True,
        },
        "ddp_world_size": int(params.get("gpu_count", 1)),
    }


def trained_lr(config: Mapping[str, Any], params: Mapping[str, Any]) -> tuple[float | None, int]:
    """The peak learning rate (after warm-up) a trial trained with, and its gradient
    accumulation steps, from its stored configuration's ``train`` settings: ``lr`` at
    ``reference_batch_size``, scaled by ``lr_scaling`` to the trial's global batch, as
    ``training._setup`` works it out (:meth:`autotune.core.config.TrainSettings.peak_lr`).

    Args:
        config: the trial's stored configuration (:attr:`BestConfigs.configs`).
        params: its knobs (``batch_size``, ``gpu_count``).

    Returns:
        ``(peak_lr, accumulation_steps)``; ``(None, 1)`` when the configuration holds no
        valid ``train`` settings.
    """
    train = config.get("train")
    if not isinstance(train, Mapping):
        return None, 1
    try:
        settings = TrainSettings.model_validate(dict(train))
        batch, gpus = int(params["batch_size"]), int(params.get("gpu_count", 1))
        accumulation = settings.accumulation_steps(batch, gpus)
    except (ValidationError, ValueError, KeyError):
        return None, 1
    return settings.peak_lr(batch * gpus * accumulation), accumulation


_SNIPPET_BODY = '''def autotuned_training(model, train_set, loss_fn, optimizer, epochs=1):
    """Train `model` on `train_set` with the settings autotune found; returns the model.

    With WORLD_SIZE > 1 start one process per GPU: torchrun --nproc_per_node=WORLD_SIZE script.py
    """
    distributed = WORLD_SIZE > 1
    if distributed:
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
        if torch.cuda.is_available():
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", dist.get_rank())))
    if torch.cuda.is_available():
        device = torch.device("cuda", torch.cuda.current_device())
    else:
        device = torch.device("cpu")
    if TF32:  # every other torch flag stays at PyTorch's default, as in the trial
        # Sets the legacy and the fp32_precision API alike (torch.compile reads both).
        torch.set_float32_matmul_precision("high")
        torch.backends.cudnn.allow_tf32 = True
    memory_format = torch.channels_last if CHANNELS_LAST else torch.contiguous_format
    model = model.to(device, memory_format=memory_format)
    train_model = DistributedDataParallel(model) if distributed else model
    if COMPILE_MODE is not None:
        train_model = torch.compile(train_model, mode=COMPILE_MODE)
    sampler = DistributedSampler(train_set, shuffle=True) if distributed else None
    loader = DataLoader(
        train_set,
        batch_size=BATCH_SIZE,  # per process
        shuffle=sampler is None,
        sampler=sampler,
        num_workers=NUM_WORKERS,
        pin_memory=device.type == "cuda" and NUM_WORKERS > 0,
        persistent_workers=NUM_WORKERS > 0,
        drop_last=True,
    )
    scaler = torch.amp.GradScaler(device.type, enabled=GRAD_SCALER and device.type == "cuda")
    model.train()
    for epoch in range(epochs):
        if sampler is not None:
            sampler.set_epoch(epoch)
        for x, y in loader:
            if x.dim() == 4:
                x = x.to(device, non_blocking=True, memory_format=memory_format)  # (B, C, H, W)
            else:
                x = x.to(device, non_blocking=True)
            y = y.to(device, non_blocking=True)
            with torch.autocast(device.type, dtype=AUTOCAST_DTYPE, enabled=AUTOCAST_DTYPE is not None):
                loss = loss_fn(train_model(x), y)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
    return model
'''


def pytorch_snippet(params: Mapping[str, Any], header: Sequence[str] = ()) -> str:
    """A ready-to-paste PyTorch training function that applies a configuration.

    It sets the autocast dtype (and a GradScaler for fp16 on CUDA), TF32 for ``tf32`` (and
    no other torch flag: every trial leaves them at PyTorch's defaults),
    ``channels_last`` for model and 4-D inputs, ``torch.compile(mode=...)``, the DataLoader
    arguments the trial used, and DDP with the trial's world size (launched by ``torchrun``).

    Args:
        params: the configuration's knobs.
        header: comment lines to put on top (what it is, its figures).

    Returns:
        Python source defining ``autotuned_training(model, train_set, loss_fn, optimizer,
        epochs=1)``.
    """
    s = pytorch_settings(params)
    lines = [f"# {line}" for line in header]
    if s["ddp_world_size"] > 1:
        lines.append(
            f"# Launch with: torchrun --nproc_per_node={s['ddp_world_size']} your_script.py"
        )
    lines += [
        "import os",
        "",
        "import torch",
        "import torch.distributed as dist",
        "from torch.nn.parallel import DistributedDataParallel",
        "from torch.utils.data import DataLoader, DistributedSampler",
        "",
        f"AUTOCAST_DTYPE = {s['autocast_dtype'] or 'None'}  # precision={params.get('precision')}",
        f"GRAD_SCALER = {s['grad_scaler']}  # loss scaling for fp16 (CUDA only)",
        f"TF32 = {s['tf32']}  # TF32 matmul/conv on CUDA; False: PyTorch's default flags",
        f"CHANNELS_LAST = {s['channels_last']}  # memory_format={params.get('memory_format')}",
        f"COMPILE_MODE = {json.dumps(s['compile_mode']) if s['compile_mode'] else None}"
        "  # torch.compile mode; None: eager",
        f"BATCH_SIZE = {s['dataloader']['batch_size']}  # per process; global = BATCH_SIZE * WORLD_SIZE",
        f"NUM_WORKERS = {s['dataloader']['num_workers']}  # DataLoader worker processes",
        f"WORLD_SIZE = {s['ddp_world_size']}  # DDP processes (GPUs)",
        *_guide_settings(params),
        "",
        "",
    ]
    return "\n".join(lines) + textwrap.dedent(_SNIPPET_BODY)


def _guide_settings(params: Mapping[str, Any]) -> list[str]:
    """The guide's knobs a configuration sets away from PyTorch's defaults, as the lines (and
    the notes) a script needs before ``autotuned_training`` runs."""
    lines: list[str] = []
    threads = int(params.get("cpu_threads", 0))
    if threads:
        lines.append(f"torch.set_num_threads({threads})  # intra-op threads per process")
    if params.get("cudnn_benchmark"):
        lines.append("torch.backends.cudnn.benchmark = True  # cuDNN times its algorithms")
    if params.get("cuda_expandable_segments"):
        lines.append("# Launch with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
    impl = params.get("optimizer_impl", "default")
    if impl != "default":
        flag = {"for_loop": "foreach=False", "foreach": "foreach=True", "fused": "fused=True"}[impl]
        lines.append(f"# Build the optimizer with {flag} (optimizer_impl={impl})")
    if params.get("activation_checkpointing"):
        lines.append(
            "# Run each of the model's blocks as torch.utils.checkpoint.checkpoint(block, x, "
            "use_reentrant=False)"
        )
    if params.get("data_parallel") == "fsdp":
        lines.append(
            "# Shard with FSDP2 instead of DDP: fully_shard(block) for each block, then "
            "fully_shard(model) (torch.distributed.fsdp)"
        )
    return ["", *lines] if lines else []
