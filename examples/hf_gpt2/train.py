"""A small GPT-2 trained with Hugging Face's ``Trainer`` on the Python standard library's
source: autotune's ``hf_trainer:`` door.

The model is ``transformers.GPT2LMHeadModel`` built from a ``GPT2Config`` (no weights are
downloaded) with a byte vocabulary (256 values, no tokenizer). The text is the top-level
``*.py`` files of the standard library, as in examples/char_gpt: the first 90 % trains, the
last 10 % validates, cut into non-overlapping windows of 128 bytes. The metric is the
Trainer's ``eval_loss`` (next-byte cross-entropy in nats; ln 256 = 5.55 knows nothing),
minimized.

The one autotune line is ``trial.training_args(...)``: it maps the trial's batch size,
precision, ``torch.compile``, DataLoader workers and learning rate onto these
``TrainingArguments``. Run on its own, ``HFTrial()`` leaves them as written::

    python examples/hf_gpt2/train.py          # trains as written, prints eval_loss
    autotune run space=examples/hf_gpt2/space.yaml --trials 3 device=cpu
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

import torch
from torch.utils.data import Dataset
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

import autotune

WINDOW = 128  # bytes per sample (the model's context)


def load_text(max_bytes: int) -> torch.Tensor:
    """The concatenated top-level ``*.py`` files of the standard library, sorted by name, cut
    at ``max_bytes``: uint8 ``(n,)``."""
    root = Path(sysconfig.get_paths()["stdlib"])
    blob = b"".join(p.read_bytes() for p in sorted(root.glob("*.py")) if p.is_file())
    return torch.frombuffer(bytearray(blob[:max_bytes]), dtype=torch.uint8)


class ByteWindows(Dataset):
    """Non-overlapping windows of a byte stream as causal-LM samples: ``{"input_ids",
    "labels"}``, both int64 ``(WINDOW,)`` (the model shifts the labels itself)."""

    def __init__(self, data: torch.Tensor) -> None:
        n = len(data) // WINDOW
        self.windows = data[: n * WINDOW].long().view(n, WINDOW)  # (N, W)

    def __len__(self) -> int:
        return len(self.windows)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.windows[i], "labels": self.windows[i]}


def build_trainer(trial: autotune.HFTrial, max_bytes: int = 262_144) -> Trainer:
    """The Trainer for one trial: a GPT-2 of the trial's model knobs on the byte windows.

    Args:
        trial: autotune's handle (``autotune.HFTrial()`` on its own).
        max_bytes: bytes of source text (the last 10 % validate).
    """
    data = load_text(max_bytes)
    split = int(0.9 * len(data))
    train_set, val_set = ByteWindows(data[:split]), ByteWindows(data[split:])
    knobs = {"n_layer": 2, "n_embd": 64, "n_head": 2, **trial.model}
    config = GPT2Config(vocab_size=256, n_positions=WINDOW, bos_token_id=0, eos_token_id=0, **knobs)
    model = GPT2LMHeadModel(config)
    args = trial.training_args(
        TrainingArguments(
            output_dir="hf_gpt2_out",
            learning_rate=1.0e-3,
            per_device_train_batch_size=16,
            per_device_eval_batch_size=64,
            num_train_epochs=1,
            warmup_steps=5,
            weight_decay=0.0,
            report_to="none",
            save_strategy="no",
            use_cpu=not torch.cuda.is_available(),
        )
    )
    return Trainer(model=model, args=args, train_dataset=train_set, eval_dataset=val_set)


if __name__ == "__main__":
    trainer = build_trainer(autotune.HFTrial())
    trainer.train()
    print(f"eval_loss {trainer.evaluate()['eval_loss']:.3f}")
