"""The memory model: :func:`estimate_memory` predicts a trial's peak memory from its model,
batch, optimizer, workers and world size; :data:`MEMORY_ESTIMATE_TOLERANCE` is its accuracy.
The feasibility rules and the mock device's cost model both use it.
"""

from __future__ import annotations

from dataclasses import dataclass

from autotune.core.flops import ModelProfile
from autotune.core.units import MIB

__all__ = [
    "CPU_RUNTIME_BYTES",
    "CUDA_RUNTIME_BYTES",
    "MEMORY_ESTIMATE_TOLERANCE",
    "MOCK_RUNTIME_BYTES",
    "MemoryEstimate",
    "estimate_memory",
]


#: The estimate's accuracy: within +-30 % of the measured CPU peak RSS growth over the 19
#: cnn_small configurations of the README's table ("Hardware"; the global-pooling CNN), and
#: +31 % seen once since for the flatten-head CNN (depth 3, width 64, batch 256, bf16 on
#: digits: 58.9 MB estimated, 44.9 MB measured; other runs of it were within 30 %). A
#: configuration is refused only when its estimate exceeds the memory by more than that:
#: estimate / 1.35 > memory.
MEMORY_ESTIMATE_TOLERANCE = 0.35
#: Per-process memory of a CPU trial beyond its tensors: oneDNN/OpenMP buffers and threads,
#: autograd engine, allocator slack. Measured here (torch 2.13 CPU, x86-64): 21.7-29.3 MiB
#: over 11 cnn_small configurations after tensors are taken out; 24 MiB is their middle.
CPU_RUNTIME_BYTES = 24 * MIB
#: CUDA allocator bytes beyond the model's tensors (cuBLAS/cuDNN workspaces). An assumption:
#: not validated on a GPU yet. The CUDA context itself is outside the allocator's count.
CUDA_RUNTIME_BYTES = 16 * MIB
#: The mock device's simulated workspace.
MOCK_RUNTIME_BYTES = 4 * MIB
#: At the peak of backward the saved activations and their gradients coexist: 2x the saved
#: bytes (measured on CPU: 2.0x over batch 16 -> 256 for depth 3, width 64).
ACTIVATION_PEAK_FACTOR = 2.0
#: Bytes per parameter of optimizer state plus its step's temporaries: AdamW keeps two fp32
#: moments (8 B) and its foreach step holds about two parameter-sized temporaries (8 B);
#: SGD with momentum keeps one buffer (4 B) and one temporary (4 B).
OPTIMIZER_BYTES_PER_PARAMETER = {"adamw": 16, "sgd": 8}
#: Batches each DataLoader worker prepares ahead (torch's default ``prefetch_factor``).
PREFETCH_FACTOR = 2


@dataclass(frozen=True)
class MemoryEstimate:
    """Predicted peak memory of one trial on its device, by component (bytes).

    Attributes:
        parameters_bytes: fp32 weights (one replica per rank).
        gradients_bytes: fp32 gradients, plus DDP's gradient buckets when world size > 1.
        optimizer_bytes: optimizer state and its step's temporaries.
        activations_bytes: what backward needs at its peak: saved activations of the batch
            times :data:`ACTIVATION_PEAK_FACTOR`, plus autocast's weight copies.
        batch_bytes: the input batch and labels on the device.
        prefetch_bytes: batches the DataLoader workers hold ahead (host memory: counted on
            the CPU only; on a GPU they sit in pinned host memory).
        runtime_bytes: the process's memory beyond tensors (:data:`CPU_RUNTIME_BYTES`, ...).
        ranks: processes adding up on this memory (CPU: the world size, one host; GPU: 1,
            each rank has its own GPU).
    """

    parameters_bytes: int
    gradients_bytes: int
    optimizer_bytes: int
    activations_bytes: int
    batch_bytes: int
    prefetch_bytes: int
    runtime_bytes: int
    ranks: int = 1

    @property
    def per_rank_bytes(self) -> int:
        """One rank's predicted peak (bytes)."""
        return (
            self.parameters_bytes
            + self.gradients_bytes
            + self.optimizer_bytes
            + self.activations_bytes
            + self.batch_bytes
            + self.prefetch_bytes
            + self.runtime_bytes
        )

    @property
    def total_bytes(self) -> int:
        """Predicted peak on one device: every rank that shares it (bytes)."""
        return self.ranks * self.per_rank_bytes

    def describe(self) -> str:
        """A short breakdown in MiB."""
        parts = (
            (
                "params+grads+optimizer",
                self.parameters_bytes + self.gradients_bytes + self.optimizer_bytes,
            ),
            ("activations", self.activations_bytes),
            ("batch+prefetch", self.batch_bytes + self.prefetch_bytes),
            ("runtime", self.runtime_bytes),
        )
        text = ", ".join(f"{name} {value / MIB:,.1f}" for name, value in parts)
        return f"{text} MiB" + (f", x {self.ranks} ranks" if self.ranks > 1 else "")


def estimate_memory(
    profile: ModelProfile,
    *,
    batch_size: int,
    num_workers: int,
    world_size: int,
    optimizer: str,
    on_gpu: bool,
    runtime_bytes: int | None = None,
    checkpointing: bool = False,
    sharded: bool = False,
) -> MemoryEstimate:
    """Predict a trial's peak memory on its device (a pure function of its inputs).

    Parameters, gradients and optimizer state are fp32 whatever the autocast precision;
    activations scale with the per-rank batch; DDP adds one gradient-sized bucket copy.
    Compiler memory (torch.compile's own Python and generated code) is not included: the
    estimate is of the training tensors and the runtime of an eager trial.

    Activation checkpointing (``checkpointing``, the profile's blocks) keeps what the
    checkpointed model saves, plus one block's activations recomputed at a time in the
    backward (the saved bytes it drops, over the number of blocks). FSDP2 (``sharded``) keeps
    1 / ``world_size`` of the parameters, their gradients and the optimizer's state on each
    rank, plus one block's parameters all-gathered at a time (the parameters over the number
    of blocks, or all of them when the model names none), and no DDP bucket.

    Args:
        profile: the model's sizes (:func:`autotune.core.flops.profile_model`).
        batch_size: samples per rank.
        num_workers: DataLoader workers.
        world_size: DDP ranks (``gpu_count``).
        optimizer: ``adamw`` or ``sgd``.
        on_gpu: the device is a GPU (each rank has its own memory; prefetch stays on the
            host) rather than the CPU (ranks share RAM; prefetch counts).
        runtime_bytes: per-process memory beyond tensors; default :data:`CUDA_RUNTIME_BYTES`
            on a GPU, :data:`CPU_RUNTIME_BYTES` on the CPU.
        checkpointing: the trial checkpoints the profile's blocks.
        sharded: the trial shards the model with FSDP2 (``data_parallel=fsdp``).
    """
    params_bytes = 4 * profile.parameters
    batch_bytes = batch_size * profile.input_bytes_per_sample
    per_sample = profile.activation_bytes_per_sample
    if checkpointing and profile.checkpointed_bytes_per_sample is not None and profile.blocks:
        dropped = max(0.0, per_sample - profile.checkpointed_bytes_per_sample)
        per_sample = profile.checkpointed_bytes_per_sample + dropped / profile.blocks
    state_bytes = OPTIMIZER_BYTES_PER_PARAMETER[optimizer] * profile.parameters
    gradients_bytes = params_bytes * (2 if world_size > 1 else 1)
    if sharded and world_size > 1:
        gathered = params_bytes // max(1, profile.blocks) if profile.blocks else params_bytes
        params_bytes = params_bytes // world_size + gathered
        gradients_bytes = 4 * profile.parameters // world_size + gathered
        state_bytes //= world_size
    return MemoryEstimate(
        parameters_bytes=params_bytes,
        gradients_bytes=gradients_bytes,
        optimizer_bytes=state_bytes,
        activations_bytes=int(
            ACTIVATION_PEAK_FACTOR * per_sample * batch_size + profile.activation_fixed_bytes
        ),
        batch_bytes=batch_bytes,
        prefetch_bytes=0 if on_gpu else num_workers * PREFETCH_FACTOR * batch_bytes,
        runtime_bytes=(
            runtime_bytes
            if runtime_bytes is not None
            else (CUDA_RUNTIME_BYTES if on_gpu else CPU_RUNTIME_BYTES)
        ),
        ranks=1 if on_gpu else world_size,
    )
