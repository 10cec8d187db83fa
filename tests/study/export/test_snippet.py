"""The PyTorch settings and the ready-to-paste snippet of a configuration."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F
from torch.utils.data import TensorDataset

from autotune.study.export import (
    pytorch_snippet,
)
from autotune.study.export._snippet import (
    pytorch_settings,
)
from tests.study.export.knobs import PARAMS


def test_pytorch_settings_map_every_knob() -> None:
    settings = pytorch_settings(
        {**PARAMS, "precision": "bf16", "memory_format": "channels_last",
         "compile_mode": "max-autotune", "num_workers": 2, "gpu_count": 4, "batch_size": 128}
    )  # fmt: skip
    assert settings == {
        "autocast_dtype": "torch.bfloat16",
        "tf32": False,
        "grad_scaler": False,
        "channels_last": True,
        "compile_mode": "max-autotune",
        "dataloader": {
            "batch_size": 128,
            "num_workers": 2,
            "pin_memory": "True on CUDA",
            "persistent_workers": True,
            "drop_last": True,
        },
        "ddp_world_size": 4,
    }
    fp32 = pytorch_settings(PARAMS)
    assert fp32["autocast_dtype"] is None and fp32["compile_mode"] is None
    # Without workers, PyTorch's default: no pinned memory (what the baseline trial ran).
    assert fp32["dataloader"]["num_workers"] == 0 and fp32["dataloader"]["pin_memory"] is False
    assert pytorch_settings({**PARAMS, "precision": "tf32"})["tf32"] is True
    assert pytorch_settings({**PARAMS, "precision": "fp16"})["grad_scaler"] is True


@pytest.mark.parametrize(
    ("precision", "memory_format"),
    [("fp32", "contiguous"), ("bf16", "channels_last"), ("fp16", "contiguous")],
)
def test_the_snippet_trains_a_model_on_cpu(precision: str, memory_format: str) -> None:
    source = pytorch_snippet({**PARAMS, "precision": precision, "memory_format": memory_format})
    namespace: dict[str, object] = {}
    exec(compile(source, "<snippet>", "exec"), namespace)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
        torch.nn.Linear(4 * 8 * 8, 10),
    )  # fmt: skip
    before = [p.detach().clone() for p in model.parameters()]
    data = TensorDataset(torch.randn(64, 1, 8, 8), torch.randint(0, 10, (64,)))  # (B, C, H, W)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    trained = namespace["autotuned_training"](model, data, F.cross_entropy, optimizer, epochs=2)  # type: ignore[operator]
    assert trained is model
    assert all(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    if memory_format == "channels_last":
        assert model[0].weight.is_contiguous(memory_format=torch.channels_last)


def test_the_snippet_for_ddp_and_compile_says_how_to_launch() -> None:
    source = pytorch_snippet(
        {**PARAMS, "gpu_count": 2, "compile_mode": "reduce-overhead"}, header=["my header"]
    )
    compile(source, "<snippet>", "exec")
    assert source.startswith("# my header\n# Launch with: torchrun --nproc_per_node=2")
    assert 'COMPILE_MODE = "reduce-overhead"' in source and "WORLD_SIZE = 2" in source
    assert "DistributedDataParallel(model)" in source and "DistributedSampler" in source


def test_the_tf32_snippet_sets_a_state_both_tf32_apis_read() -> None:
    matmul, cpu_matmul = torch.backends.cuda.matmul, torch.backends.mkldnn.matmul
    saved = (matmul.fp32_precision, cpu_matmul.fp32_precision, matmul.allow_tf32)
    source = pytorch_snippet({**PARAMS, "precision": "tf32"})
    namespace: dict[str, object] = {}
    exec(compile(source, "<snippet>", "exec"), namespace)
    model = torch.nn.Linear(4, 2)
    data = TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    try:
        namespace["autotuned_training"](model, data, F.cross_entropy, optimizer)  # type: ignore[operator]

        # The legacy readers torch.compile still calls: the new fp32_precision API alone made
        # them raise "mix of the legacy and new APIs" (issue 38, item 1).
        assert torch.get_float32_matmul_precision() == "high"
        assert matmul.allow_tf32 is True and torch.backends.cudnn.allow_tf32 is True
        assert (
            matmul.fp32_precision == "tf32" and torch.backends.cudnn.conv.fp32_precision == "tf32"
        )
    finally:
        matmul.allow_tf32 = saved[2]
        matmul.fp32_precision, cpu_matmul.fp32_precision = saved[0], saved[1]
