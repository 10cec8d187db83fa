"""A byte-level GPT on the Python standard library's source: an autotune workload.

The model is a small decoder-only transformer in the style of Karpathy's nanoGPT (itself
GPT-2, Radford et al. 2019): token and learned position embeddings, ``n_layer`` pre-LayerNorm
blocks of causal multi-head self-attention
(:func:`torch.nn.functional.scaled_dot_product_attention`) and a 4x GELU MLP, a final
LayerNorm and a linear head tied to the token embedding. The vocabulary is the 256 byte
values, so no tokenizer is needed.

The text is one every Python installation has: the top-level ``*.py`` files of the standard
library (``sysconfig.get_paths()["stdlib"]``), in sorted order, concatenated and cut at
:data:`CORPUS_BYTES` bytes. The first 90 % of the byte stream is the training set, the last
10 % the validation set; both are cut into non-overlapping windows of :data:`WINDOW` + 1
bytes (input and next-byte target). The model's ``block_size`` knob is its attention context:
it splits each window into ``WINDOW / block_size`` independent sequences, so every trial
predicts the same bytes per sample whatever its context (a sample is always one window,
and a throughput in samples/s is comparable between trials).

The metric is the mean validation cross-entropy in nats per byte (``val_loss``, minimized);
a model that knows nothing scores ln 256 = 5.55. This module needs only torch; importing it
reads nothing.

Run it with::

    autotune run space=examples/char_gpt/space.yaml --trials 5 device=cpu
"""

from __future__ import annotations

import math
import sysconfig
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

__all__ = [
    "GPT",
    "Block",
    "CausalSelfAttention",
    "CharGPTWorkload",
    "byte_windows",
    "load_corpus",
]

VOCAB_SIZE = 256  # byte values
WINDOW = 256  # bytes of input per sample; block_size must divide it
CORPUS_BYTES = 1 << 20  # 1 MiB of source text
VAL_FRACTION = 0.1  # the last 10 % of the byte stream


def load_corpus(stdlib: str | Path | None = None, max_bytes: int = CORPUS_BYTES) -> torch.Tensor:
    """The concatenated top-level ``*.py`` files of the standard library, sorted by name.

    Only the top level is read: ``site-packages`` (which lies under the standard library
    directory in some installations) and the test suites stay out, so the text depends on
    the Python version alone.

    Args:
        stdlib: the standard library directory; default ``sysconfig.get_paths()["stdlib"]``.
        max_bytes: the stream is cut at this many bytes.

    Returns:
        The byte stream, uint8 ``(n,)`` with ``n <= max_bytes``.

    Raises:
        FileNotFoundError: when the directory holds no ``*.py`` file.
    """
    root = Path(stdlib if stdlib is not None else sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.glob("*.py") if p.is_file())
    if not files:
        raise FileNotFoundError(f"{root}: no *.py files (expected the Python standard library)")
    chunks: list[bytes] = []
    total = 0
    for path in files:
        data = path.read_bytes()
        chunks.append(data)
        total += len(data)
        if total >= max_bytes:
            break
    blob = b"".join(chunks)[:max_bytes]
    return torch.frombuffer(bytearray(blob), dtype=torch.uint8)


def byte_windows(data: torch.Tensor, window: int = WINDOW) -> TensorDataset:
    """Non-overlapping next-byte windows of a byte stream.

    Item ``i`` is ``(x, y)`` with ``x = data[i*W : i*W + W]`` and ``y = data[i*W + 1 :
    i*W + W + 1]``, both int64 ``(W,)``. A :class:`~torch.utils.data.TensorDataset` (about
    16 bytes of memory per byte of text): DataLoader workers unpickle it without importing
    this file.

    Raises:
        ValueError: when ``data`` is too short for one window.
    """
    n = (len(data) - 1) // window
    if n < 1:
        raise ValueError(f"{len(data)} bytes are too few for one window of {window} + 1")
    x = data[: n * window].long().view(n, window)  # (N, W)
    y = data[1 : n * window + 1].long().view(n, window)  # (N, W)
    return TensorDataset(x, y)


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention with a fused QKV projection."""

    def __init__(self, n_embd: int, n_head: int, dropout: float) -> None:
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)
        self.dropout = dropout
        self.resid_dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, T, C)`` -> ``(B, T, C)``; position ``t`` attends to positions ``<= t``."""
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)  # 3 x (B, T, C)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(
            q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=True
        )  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(b, t, c)  # (B, T, C)
        return self.resid_dropout(self.proj(y))


class Block(nn.Module):
    """Pre-LayerNorm transformer block: ``x + attn(ln(x))``, then ``x + mlp(ln(x))``."""

    def __init__(self, n_embd: int, n_head: int, dropout: float) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, dropout)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(
            nn.Linear(n_embd, 4 * n_embd),
            nn.GELU(),
            nn.Linear(4 * n_embd, n_embd),
            nn.Dropout(dropout),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, T, C)`` -> ``(B, T, C)``."""
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """A byte-level GPT whose attention context is ``block_size`` bytes.

    ``forward`` takes windows longer than ``block_size``: a window of ``T`` bytes is cut into
    ``T / block_size`` sequences that are modelled independently (as nanoGPT trains on
    ``block_size`` crops), and the logits are put back in window order.
    """

    def __init__(
        self, n_layer: int, n_head: int, n_embd: int, block_size: int, dropout: float = 0.0
    ) -> None:
        super().__init__()
        self.block_size = block_size
        self.wte = nn.Embedding(VOCAB_SIZE, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(n_embd, n_head, dropout) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, VOCAB_SIZE, bias=False)
        self.lm_head.weight = self.wte.weight  # weight tying (Press & Wolf 2017)
        self.apply(self._init_weights)
        # GPT-2's scaled init of the projections into the residual stream.
        for name, p in self.named_parameters():
            if name.endswith(("attn.proj.weight", "mlp.2.weight")):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Bytes ``(B, T)`` int64 -> next-byte logits ``(B, T, 256)``.

        Raises:
            ValueError: when ``T`` is not a multiple of ``block_size`` (and not shorter).
        """
        b, t = idx.shape
        seq = min(t, self.block_size)
        if t % seq:
            raise ValueError(f"input length {t} is not a multiple of block_size {seq}")
        idx = idx.reshape(b * (t // seq), seq)  # (B * T/bs, bs)
        pos = torch.arange(seq, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))  # (B * T/bs, bs, C)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))  # (B * T/bs, bs, V)
        return logits.reshape(b, t, VOCAB_SIZE)


class CharGPTWorkload:
    """The autotune workload: a :class:`GPT` on :func:`load_corpus`'s bytes.

    Knobs (the ``model:`` keys of ``space.yaml``): ``n_layer``, ``n_head``, ``n_embd``
    (a multiple of ``n_head``), ``block_size`` (a divisor of :data:`WINDOW`) and ``dropout``.

    Args:
        max_bytes: length of the byte stream (training plus validation).
    """

    metric_name = "val_loss"
    metric_direction = "minimize"

    def __init__(self, max_bytes: int = CORPUS_BYTES) -> None:
        if max_bytes < 20 * (WINDOW + 1):
            raise ValueError(f"max_bytes must be >= {20 * (WINDOW + 1)}, got {max_bytes}")
        self.max_bytes = max_bytes

    def build_model(
        self,
        n_layer: int = 2,
        n_head: int = 2,
        n_embd: int = 64,
        block_size: int = 64,
        dropout: float = 0.0,
    ) -> GPT:
        """A fresh :class:`GPT`.

        Raises:
            ValueError: when ``n_embd`` is not a multiple of ``n_head``, ``block_size`` does
                not divide :data:`WINDOW`, or a size is below 1.
        """
        for name, value in (("n_layer", n_layer), ("n_head", n_head), ("n_embd", n_embd)):
            if int(value) < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if n_embd % n_head:
            raise ValueError(
                f"n_embd={n_embd} is not divisible by n_head={n_head}: every head needs "
                f"n_embd / n_head channels"
            )
        if not 1 <= block_size <= WINDOW or WINDOW % block_size:
            raise ValueError(f"block_size={block_size} must divide the window of {WINDOW} bytes")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        return GPT(int(n_layer), int(n_head), int(n_embd), int(block_size), float(dropout))

    def datasets(self) -> tuple[TensorDataset, TensorDataset]:
        """``(train, validation)``: windows of the first 90 % and of the last 10 % of the
        byte stream; items are ``(x, y)``, int64 ``(WINDOW,)`` each."""
        data = load_corpus(max_bytes=self.max_bytes)
        split = int(len(data) * (1 - VAL_FRACTION))
        return byte_windows(data[:split]), byte_windows(data[split:])

    def loss(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Mean next-byte cross-entropy (nats) of logits ``(B, T', V)`` against bytes
        ``(B, T)``, ``T' <= T``: the target is cropped to its last ``T'`` positions."""
        target = target[:, -output.shape[1] :]  # (B, T')
        return F.cross_entropy(output.float().flatten(0, 1), target.flatten())

    def evaluate(
        self,
        model: nn.Module,
        loader: DataLoader[tuple[torch.Tensor, ...]],
        device: torch.device,
    ) -> float:
        """Mean validation cross-entropy in nats per byte, over every predicted byte."""
        total = 0.0
        count = 0
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            output = model(x)  # (B, T', V)
            target = y[:, -output.shape[1] :]  # (B, T')
            total += float(
                F.cross_entropy(output.float().flatten(0, 1), target.flatten(), reduction="sum")
            )
            count += target.numel()
        if count == 0:
            raise ValueError("the validation loader yielded no batch")
        return total / count
