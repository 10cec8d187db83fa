"""What both processes share: validated settings, the machine, FLOPs, NVML, errors and units.

autotune runs as two processes (docs/architecture.md). The study process (`autotune.study`)
searches, stores, verifies and reports; each trial trains in a child process
(`autotune.trial`). This floor sits below both and imports neither:

- `config`: the run's settings, validated once;
- `hardware`: the machine's fingerprint, capabilities, feasibility and memory estimate;
- `flops`: FLOPs, peaks, MFU and the profile of a model it is handed;
- `nvml`: NVIDIA's management library, behind one module;
- `goodput`: the gradient noise scale, E(B) and goodput (pure arithmetic);
- `exceptions`, `units`: the error classes and byte units.
"""

__all__: list[str] = []  # a floor, not a face: its rooms are the faces
