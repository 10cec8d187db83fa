"""`best --diff`: what changes from the baseline, in the words of plain PyTorch, Lightning and
Transformers (:func:`diff_lines`, pure), gathered from a study (:func:`export_diff`), and the
command."""

from __future__ import annotations

import dataclasses
import inspect
import re
import typing
from pathlib import Path
from typing import Any

import optuna
import pytest

from autotune.cli import main
from autotune.core.exceptions import VerificationError
from autotune.study.export import (
    DIFF_STYLES,
    best_configurations,
    export_diff,
)
from autotune.study.export._diff import (
    diff_lines,
)
from tests.studies.mock import DemoStudy
from tests.studies.verdicts import shared_verdict_studies

#: The baseline of these tests: PyTorch's defaults, batch 64, the middle model.
BASE: dict[str, Any] = {
    "depth": 3,
    "width": 16,
    "batch_size": 64,
    "precision": "fp32",
    "memory_format": "contiguous",
    "compile_mode": "none",
    "num_workers": 0,
    "gpu_count": 1,
}
#: bf16, channels_last and torch.compile: the usual recommendation, the batch unchanged.
FAST = BASE | {
    "precision": "bf16",
    "memory_format": "channels_last",
    "compile_mode": "max-autotune",
}


def _lines(params: dict[str, Any], style: str, **kwargs: Any) -> list[str]:
    settings: dict[str, Any] = {"learning_rate": 1.0e-3, "baseline_learning_rate": 1.0e-3}
    return diff_lines(BASE, params, style=style, **(settings | kwargs))  # type: ignore[arg-type]


def test_bf16_channels_last_and_compile_in_plain_pytorch() -> None:
    assert _lines(FAST, "torch") == [
        "model = model.to(memory_format=torch.channels_last)  # was torch.contiguous_format",
        'model = torch.compile(model, mode="max-autotune")  # was eager',
        "for x, y in loader:  # your training loop; its other lines stay",
        "    x = x.to(device, memory_format=torch.channels_last)  # 4-D (B, C, H, W) inputs only",
        '    with torch.autocast(device_type="cuda", dtype=torch.bfloat16):',
        "        loss = loss_fn(model(x), y)  # forward and loss only",
    ]


def test_bf16_channels_last_and_compile_in_lightning() -> None:
    assert _lines(FAST, "lightning") == [
        'trainer = Trainer(precision="bf16-mixed")  # was precision="32-true"',
        "model = model.to(memory_format=torch.channels_last)  # was torch.contiguous_format; "
        "before trainer.fit(model)",
        'model = torch.compile(model, mode="max-autotune")  # was eager; then trainer.fit(model)',
        "# in your LightningModule:",
        "def training_step(self, batch, batch_idx):",
        "    x, y = batch",
        "    x = x.to(memory_format=torch.channels_last)  # 4-D (B, C, H, W) inputs only",
    ]


def test_bf16_channels_last_and_compile_in_transformers() -> None:
    assert _lines(FAST, "hf") == [
        "model = model.to(memory_format=torch.channels_last)  # was torch.contiguous_format; "
        "TrainingArguments has no field for it",
        "# 4-D inputs too: pixel_values.to(memory_format=torch.channels_last) in your collator",
        "args = TrainingArguments(",
        "    # your other arguments stay",
        "    bf16=True,  # was False",
        "    torch_compile=True,  # was False",
        '    torch_compile_mode="max-autotune",  # was None',
        ")",
    ]


def test_compile_in_its_default_mode_names_no_mode() -> None:
    params = BASE | {"compile_mode": "default"}
    assert _lines(params, "torch") == ["model = torch.compile(model)  # was eager"]
    assert _lines(params, "hf")[2:] == ["    torch_compile=True,  # was False", ")"]


def test_fp16_brings_the_grad_scaler_on_cuda_only() -> None:
    fp16 = BASE | {"precision": "fp16"}
    assert _lines(fp16, "torch") == [
        'scaler = torch.amp.GradScaler("cuda")  # fp16 loss scaling',
        "for x, y in loader:  # your training loop; its other lines stay",
        '    with torch.autocast(device_type="cuda", dtype=torch.float16):',
        "        loss = loss_fn(model(x), y)  # forward and loss only",
        "    scaler.scale(loss).backward()  # instead of loss.backward()",
        "    scaler.step(optimizer)  # instead of optimizer.step()",
        "    scaler.update()",
    ]
    # The trial scales fp16 losses on CUDA only; on the CPU autocast alone.
    assert _lines(fp16, "torch", device_type="cpu") == [
        "for x, y in loader:  # your training loop; its other lines stay",
        '    with torch.autocast(device_type="cpu", dtype=torch.float16):',
        "        loss = loss_fn(model(x), y)  # forward and loss only",
    ]
    # Lightning and Transformers scale the loss themselves.
    assert _lines(fp16, "lightning") == [
        'trainer = Trainer(precision="16-mixed")  # was precision="32-true"'
    ]
    assert _lines(fp16, "hf") == [
        "args = TrainingArguments(",
        "    # your other arguments stay",
        "    fp16=True,  # was False",
        ")",
    ]


def test_from_fp16_to_bf16_drops_the_scaler() -> None:
    lines = diff_lines(BASE | {"precision": "fp16"}, BASE | {"precision": "bf16"})
    assert lines == [
        "for x, y in loader:  # your training loop; its other lines stay",
        '    with torch.autocast(device_type="cuda", dtype=torch.bfloat16):  # was '
        "dtype=torch.float16",
        "        loss = loss_fn(model(x), y)  # forward and loss only",
        "    loss.backward()  # no GradScaler (was fp16); then optimizer.step()",
    ]
    hf = diff_lines(BASE | {"precision": "fp16"}, BASE | {"precision": "bf16"}, style="hf")
    assert hf[2:4] == ["    bf16=True,  # was False", "    fp16=False,  # was True"]


def test_tf32_is_the_matmul_precision_in_every_style_but_transformers() -> None:
    tf32 = BASE | {"precision": "tf32"}
    line = (
        'torch.set_float32_matmul_precision("high")  # TF32 matmuls '
        "(torch.backends.cuda.matmul.allow_tf32 = True)"
    )
    assert _lines(tf32, "torch") == [line]
    # Not a Trainer precision: "32-true" stays, so no Trainer line.
    assert _lines(tf32, "lightning") == [f"{line}; not a Trainer precision"]
    assert _lines(tf32, "hf") == [
        "args = TrainingArguments(",
        "    # your other arguments stay",
        "    tf32=True,  # was False",
        ")",
    ]
    assert diff_lines(tf32, BASE) == [
        'torch.set_float32_matmul_precision("highest")  # no TF32 (was "high")'
    ]


def test_a_batch_change_brings_its_learning_rate() -> None:
    batch = BASE | {"batch_size": 256}
    lr = {"learning_rate": 2.0e-3, "baseline_learning_rate": 1.0e-3}
    assert _lines(batch, "torch", **lr) == [
        "loader = DataLoader(train_set, batch_size=256)  # was batch_size=64",
        "lr = 0.002  # the optimizer's lr; was 0.001: the global batch went 64 -> 256; the peak, "
        "after warm-up",
    ]
    assert _lines(batch, "lightning", **lr) == [
        "# in your LightningModule:",
        "def train_dataloader(self):",
        "    return DataLoader(self.train_set, batch_size=256)  # was batch_size=64",
        "def configure_optimizers(self):",
        "    lr = 0.002  # the optimizer's lr; was 0.001: the global batch went 64 -> 256; the "
        "peak, after warm-up",
    ]
    assert _lines(batch, "hf", **lr) == [
        "args = TrainingArguments(",
        "    # your other arguments stay",
        "    per_device_train_batch_size=256,  # was 64",
        "    learning_rate=0.002,  # was 0.001: the global batch went 64 -> 256; the peak, after "
        "warm-up",
        ")",
    ]
    unknown = _lines(batch, "torch", learning_rate=None)
    assert unknown[-1] == (
        "# learning rate: not stored for this trial; scale yours: the global batch went 64 -> 256"
    )


def test_a_fixed_global_batch_changes_the_accumulation_not_the_learning_rate() -> None:
    micro = BASE | {"batch_size": 32}
    kwargs = {"accumulation_steps": 4, "baseline_accumulation_steps": 2}
    assert _lines(micro, "hf", **kwargs)[2:] == [
        "    per_device_train_batch_size=32,  # was 64",
        "    gradient_accumulation_steps=4,  # was 2",
        ")",
    ]
    assert _lines(micro, "lightning", **kwargs)[0] == (
        "trainer = Trainer(accumulate_grad_batches=4)  # was accumulate_grad_batches=2"
    )
    assert _lines(micro, "torch", **kwargs) == [
        "loader = DataLoader(train_set, batch_size=32)  # was batch_size=64",
        "# gradient accumulation: 4 micro-batches per optimizer step (was 2): divide the loss by "
        "4, step the optimizer every 4 batches (DDP: model.no_sync() on the others)",
    ]


def test_workers_bring_pinned_memory_and_persistent_workers() -> None:
    workers = BASE | {"num_workers": 4}
    assert _lines(workers, "torch") == [
        "loader = DataLoader(train_set, num_workers=4, pin_memory=True, persistent_workers=True)"
        "  # was num_workers=0, pin_memory=False, persistent_workers=False"
    ]
    assert _lines(workers, "torch", device_type="cpu") == [
        "loader = DataLoader(train_set, num_workers=4, persistent_workers=True)"
        "  # was num_workers=0, persistent_workers=False"
    ]
    assert _lines(workers, "hf")[2:] == [
        "    dataloader_num_workers=4,  # was 0",
        "    dataloader_pin_memory=True,  # was False",
        "    dataloader_persistent_workers=True,  # was False",
        ")",
    ]
    # More workers than the baseline's: only the count changes.
    assert diff_lines(BASE | {"num_workers": 2}, workers) == [
        "loader = DataLoader(train_set, num_workers=4)  # was num_workers=2"
    ]
    # Back to none: persistent_workers=True would be an error without workers.
    assert diff_lines(workers, BASE, style="lightning")[-1] == (
        "    return DataLoader(self.train_set, num_workers=0, pin_memory=False, "
        "persistent_workers=False)  # was num_workers=4, pin_memory=True, persistent_workers=True"
    )


def test_two_gpus_are_ddp_with_the_learning_rate_of_the_global_batch() -> None:
    ddp = BASE | {"gpu_count": 2}
    lr = {"learning_rate": 1.41421e-3, "baseline_learning_rate": 1.0e-3}
    assert _lines(ddp, "torch", **lr) == [
        "# launch: torchrun --nproc_per_node=2 train.py (DDP; was python train.py)",
        'torch.distributed.init_process_group("nccl")  # one process per GPU',
        'torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))',
        "model = torch.nn.parallel.DistributedDataParallel(model)  # after .to(device), before "
        "torch.compile",
        "loader = DataLoader(train_set, sampler=DistributedSampler(train_set))  # no shuffle=True: "
        "the sampler shuffles",
        "lr = 0.00141421  # the optimizer's lr; was 0.001: the global batch went 64 -> 128; the "
        "peak, after warm-up",
    ]
    assert _lines(ddp, "lightning", **lr)[0] == (
        'trainer = Trainer(devices=2, strategy="ddp")  # was devices=1, strategy="auto"'
    )
    assert _lines(ddp, "hf", **lr) == [
        "# launch: torchrun --nproc_per_node=2 train.py (DDP; was python train.py)",
        "args = TrainingArguments(",
        "    # your other arguments stay",
        "    learning_rate=0.00141421,  # was 0.001: the global batch went 64 -> 128; the peak, "
        "after warm-up",
        ")",
    ]


#: The styles that write a framework's own lines (the loop style writes a LoopTrial).
FRAMEWORK_STYLES = ("torch", "lightning", "hf")


@pytest.mark.parametrize("style", FRAMEWORK_STYLES)
def test_a_model_knob_is_a_build_model_line_in_every_style(style: str) -> None:
    assert _lines(BASE | {"depth": 2}, style) == ["model = build_model(depth=2)  # was 3"]
    assert _lines(BASE | {"depth": 2, "width": 32}, style) == [
        "model = build_model(depth=2, width=32)  # was depth=3, width=16"
    ]


@pytest.mark.parametrize("style", DIFF_STYLES)
def test_no_change_is_one_line(style: str) -> None:
    assert _lines(dict(BASE), style) == [
        "# no change: the configuration's knobs are the baseline's"
    ]
    assert _lines(dict(BASE), style, header=["the header"]) == [
        "# the header",
        "# no change: the configuration's knobs are the baseline's",
    ]


def test_diff_lines_refuses_an_unknown_style_or_device() -> None:
    with pytest.raises(
        ValueError, match="style must be one of torch, lightning, hf, loop, but got 'jax'"
    ):
        diff_lines(BASE, FAST, style="jax")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="device_type must be cuda or cpu, but got 'mps'"):
        diff_lines(BASE, FAST, device_type="mps")  # type: ignore[arg-type]


# --- the keywords are the frameworks' own ---------------------------------------------------

#: Every change at once, so that each style uses all its keywords.
_EVERYTHING = FAST | {"depth": 2, "batch_size": 256, "num_workers": 4, "gpu_count": 2}
_ALL = {"learning_rate": 2.0e-3, "accumulation_steps": 2}


def test_every_transformers_keyword_is_a_training_argument() -> None:
    transformers = pytest.importorskip("transformers")
    known = inspect.signature(transformers.TrainingArguments).parameters
    lines = _lines(_EVERYTHING, "hf", **_ALL) + _lines(BASE | {"precision": "tf32"}, "hf")
    used = {m[1] for line in lines if (m := re.match(r"    (\w+)=", line))}
    assert used >= {"bf16", "tf32", "torch_compile_mode", "gradient_accumulation_steps"}
    assert used <= set(known), used - set(known)


def test_every_lightning_keyword_and_precision_is_lightnings() -> None:
    lightning = pytest.importorskip("lightning")
    from lightning.fabric.plugins.precision.precision import _PRECISION_INPUT_STR

    known = inspect.signature(lightning.Trainer).parameters
    precisions = set(typing.get_args(_PRECISION_INPUT_STR))
    trainers = [
        line
        for params in (_EVERYTHING, BASE | {"precision": "fp16"})
        for line in _lines(params, "lightning", **_ALL)
        if line.startswith("trainer = Trainer(")
    ]
    used: set[str] = set()
    for line in trainers:
        call = line.split("  # ")[0]
        used |= set(re.findall(r"(\w+)=", call))
        assert set(re.findall(r'precision="([^"]+)"', call)) <= precisions
    assert used == {"precision", "devices", "strategy", "accumulate_grad_batches"}
    assert used <= set(known), used - set(known)


# --- from a study ---------------------------------------------------------------------------


def test_export_diff_is_the_recommendation_with_the_learning_rate_it_trained_with(
    demo_study: DemoStudy,
) -> None:
    best = best_configurations(demo_study.name, demo_study.url)
    number = best.recommended_trial
    assert best.verification is not None and number == 10
    lines = export_diff(best, style="hf")
    rec = best.verification.recommended
    assert rec is not None and rec.speedup is not None and rec.speedup_ci95 is not None
    low, high = rec.speedup_ci95
    assert lines[0] == (
        f"# autotune: study 'demo', trial 10 vs the baseline (trial 0): verified "
        f"{rec.speedup:.2f}x faster (verification 1, {best.verification.rounds} rounds, "
        f"95 % CI {low:.2f}-{high:.2f}x)"
    )
    assert lines[1].startswith("# SIMULATED: device=mock")
    assert lines[2] == "# What changes in a Transformers training script; the rest stays."
    # The same-model answer (the mock's draws decide which answer the demo study verifies;
    # a model knob's line: test_a_model_knob_is_a_build_model_line_in_every_style).
    assert rec.answer == "same_model"
    assert lines[3:] == [
        "model = model.to(memory_format=torch.channels_last)  # was torch.contiguous_format; "
        "TrainingArguments has no field for it",
        "# 4-D inputs too: pixel_values.to(memory_format=torch.channels_last) in your collator",
        "args = TrainingArguments(",
        "    # your other arguments stay",
        "    bf16=True,  # was False",
        "    torch_compile=True,  # was False",
        '    torch_compile_mode="reduce-overhead",  # was None',
        "    per_device_train_batch_size=32,  # was 64",
        "    dataloader_num_workers=2,  # was 0",
        "    dataloader_pin_memory=True,  # was False",
        "    dataloader_persistent_workers=True,  # was False",
        "    learning_rate=0.00212132,  # was 0.003: the global batch went 64 -> 32; the peak, "
        "after warm-up",
        ")",
    ]
    # The figure is the trial's own: train.lr=3e-3 at the baseline's batch 64, sqrt-scaled to
    # 32, as the trial recorded it.
    study = optuna.load_study(study_name=demo_study.name, storage=demo_study.url)
    assert study.trials[number].user_attrs["lr_peak"] == pytest.approx(3.0e-3 * 0.5**0.5, rel=1e-5)
    assert study.trials[0].user_attrs["lr_peak"] == pytest.approx(3.0e-3)


def test_export_diff_of_a_trial_asked_for_is_not_verified(demo_study: DemoStudy) -> None:
    best = best_configurations(demo_study.name, demo_study.url)
    lines = export_diff(best, trial=0)
    assert lines[0] == (
        "# autotune: study 'demo', trial 0 vs the baseline (trial 0): NOT VERIFIED, chosen with "
        "--trial (single-trial figures: 1.00x faster than the baseline's trial)"
    )
    assert lines[-1] == "# no change: the configuration's knobs are the baseline's"
    with pytest.raises(VerificationError, match="study=demo: not verified, so there is no"):
        export_diff(dataclasses.replace(best, verification=None))


def test_best_diff_prints_only_the_lines(
    demo_study: DemoStudy, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["best", f"study={demo_study.name}", f"storage={demo_study.url}", "--diff"]
    assert main([*args, "--style", "lightning"]) == 0
    out = capsys.readouterr().out
    best = best_configurations(demo_study.name, demo_study.url)
    assert out == "\n".join(export_diff(best, style="lightning")) + "\n"
    assert 'trainer = Trainer(precision="bf16-mixed")  # was precision="32-true"' in out
    assert main([*args, "--trial", "5"]) == 0
    assert "NOT VERIFIED" in capsys.readouterr().out.splitlines()[0]


def test_the_style_choices_of_the_command_are_diff_styles() -> None:
    from autotune import cli

    hint = typing.get_type_hints(cli.best)["style"]
    [choices, _none] = typing.get_args(hint)
    assert typing.get_args(choices) == DIFF_STYLES


@pytest.mark.parametrize(
    ("extra", "error"),
    [
        (["--style", "hf"], "--style hf: only with --diff"),
        (["--diff", "--export", "x.yaml"], "--diff and --export: use one"),
        (["--diff", "--style", "jax"], "Invalid value for '--style'"),
        (["--diff", "--trial", "3"], "--trial 3: study=demo has no feasible, measured trial 3"),
    ],
)
def test_best_diff_with_bad_input_is_one_line_and_exit_2(
    demo_study: DemoStudy, capsys: pytest.CaptureFixture[str], extra: list[str], error: str
) -> None:
    assert main(["best", f"study={demo_study.name}", f"storage={demo_study.url}", *extra]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("autotune: error: ") and error in captured.err
    assert captured.err.count("\n") == 1


@pytest.mark.parametrize("which", ["nothing", "unverified"])
def test_best_diff_without_a_recommendation_fails_as_export_does(
    tmp_path_factory: pytest.TempPathFactory,
    tmp_path: Path,
    which: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    studies = shared_verdict_studies(tmp_path_factory)
    args = ["best", f"study={getattr(studies, which)}", f"storage={studies.url}"]
    assert main([*args, "--export", str(tmp_path / "best.yaml")]) == 2
    export_err = capsys.readouterr().err
    assert main([*args, "--diff"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == export_err
    [line] = captured.err.splitlines()
    assert line.startswith(f"autotune: error: study={getattr(studies, which)}: ")
    assert "--trial N" in line


def test_the_loop_style_is_the_looptrial_the_script_runs_with() -> None:
    new = BASE | {"batch_size": 128, "memory_format": "channels_last", "depth": 2}

    lines = diff_lines(BASE, new, style="loop", learning_rate_scale=1.4142136)

    assert lines == [
        'train(autotune.LoopTrial(batch_size=128, memory_format="channels_last", '
        'model={"depth": 2}, lr_scale=1.41421))  # was batch_size=64, '
        'memory_format="contiguous", model={"depth": 3}, lr_scale=1; lr_scale: the global '
        "batch went 64 -> 128"
    ]


def test_a_doors_learning_rate_is_the_factor_on_the_users_own() -> None:
    new = BASE | {"batch_size": 128}

    torch_lines = diff_lines(BASE, new, style="torch", learning_rate_scale=1.4142136)
    hf_lines = diff_lines(BASE, new, style="hf", learning_rate_scale=1.4142136)

    assert (
        "lr = lr * 1.41421  # the optimizer's lr; your rate times 1.41421: the global batch went 64 -> 128; the peak, after warm-up"
        in torch_lines
    )
    assert (
        "    learning_rate=learning_rate * 1.41421,  # your rate times 1.41421: the global batch went 64 -> 128; the peak, after warm-up"
        in hf_lines
    )


# --- the Tuning Guide's knobs -------------------------------------------------------------------

GUIDE = BASE | {
    "optimizer_impl": "fused",
    "activation_checkpointing": True,
    "cpu_threads": 1,
    "cudnn_benchmark": True,
    "cuda_expandable_segments": True,
}


def test_the_guides_knobs_in_plain_pytorch() -> None:
    lines = diff_lines(BASE, GUIDE, style="torch", blocks=["ConvBlock"])

    assert lines == [
        "# launch with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (read when CUDA starts)",
        "torch.set_num_threads(1)  # was PyTorch's default, one per core; intra-op threads per process",
        "torch.backends.cudnn.benchmark = True  # was False",
        "# activation checkpointing: run each ConvBlock as torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)",
        "optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)  # was PyTorch's default implementation",
    ]


def test_the_guides_knobs_in_lightnings_and_transformers_words() -> None:
    lightning = diff_lines(BASE, GUIDE, style="lightning", blocks=["ConvBlock"])
    hf = diff_lines(BASE, GUIDE, style="hf", blocks=["ConvBlock"])

    assert lightning[0] == "trainer = Trainer(benchmark=True)  # was benchmark=False"
    assert (
        "    return torch.optim.AdamW(self.parameters(), lr=lr, fused=True)  # was PyTorch's "
        "default implementation"
    ) in lightning
    assert '    optim="adamw_torch_fused",  # was "adamw_torch"' in hf
    assert "    gradient_checkpointing=True,  # was False" in hf
    assert "torch.backends.cudnn.benchmark = True  # was False" in hf


def test_fsdp_in_each_style() -> None:
    new = BASE | {"gpu_count": 2, "data_parallel": "fsdp"}
    old = BASE | {"gpu_count": 2}

    torch_lines = diff_lines(old, new, style="torch", blocks=["ConvBlock"])
    lightning = diff_lines(old, new, style="lightning")
    hf = diff_lines(old, new, style="hf")

    assert torch_lines == [
        "from torch.distributed.fsdp import fully_shard  # instead of DistributedDataParallel",
        'for block in [m for m in model.modules() if type(m).__name__ in {"ConvBlock"}]:  '
        "# ConvBlock: each block, then the model",
        "    fully_shard(block)",
        "fully_shard(model)  # before torch.compile and the optimizer",
    ]
    assert lightning == ['trainer = Trainer(strategy="fsdp")  # was strategy="ddp"']
    assert '    fsdp="full_shard",  # was ""' in hf


def test_the_guides_knobs_as_a_looptrials_arguments() -> None:
    lines = diff_lines(BASE, GUIDE, style="loop", blocks=["ConvBlock"])

    assert lines[0] == (
        'train(autotune.LoopTrial(optimizer_impl="fused", cpu_threads=1, cudnn_benchmark=True, '
        'activation_checkpointing=True, blocks=["ConvBlock"]))  # was optimizer_impl="default", '
        "cpu_threads=0, cudnn_benchmark=False, activation_checkpointing=False"
    )
    assert lines[1].startswith("# launch with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")


# --- the script's own shape -------------------------------------------------------------------


def test_the_loop_style_names_the_spaces_function() -> None:
    new = BASE | {"batch_size": 128}

    [line] = diff_lines(BASE, new, style="loop", function="main")

    assert line.startswith("main(autotune.LoopTrial(batch_size=128")


def test_a_datamodules_loader_is_changed_in_the_datamodule() -> None:
    workers = BASE | {"num_workers": 4}

    module = diff_lines(BASE, workers, style="lightning")
    data = diff_lines(BASE, workers, style="lightning", loader_home="LightningDataModule")

    assert "# in your LightningModule:" in module and "def train_dataloader(self):" in module
    home = data.index("# in your LightningDataModule:")
    assert data[home + 1] == "def train_dataloader(self):"
    assert "# in your LightningModule:" not in data  # nothing else changes in the module


def test_an_hf_script_that_reads_its_command_line_gets_flags() -> None:
    new = BASE | {"batch_size": 128, "precision": "bf16"}

    lines = diff_lines(BASE, new, style="hf", command_line=True, learning_rate_scale=1.4142136)

    assert "args = TrainingArguments(" not in lines
    assert lines[0] == "# on the script's command line (HfArgumentParser), your other flags stay:"
    assert "--bf16 True  # was False" in lines
    assert "--per_device_train_batch_size 128  # was 64" in lines
    assert any(line.startswith("--learning_rate <yours x 1.41421>  # ") for line in lines)
