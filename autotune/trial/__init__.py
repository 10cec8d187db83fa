"""The trial process: one trial's training, in a child process of the study.

- `training`: the doors (built-in, loop, Hugging Face, Lightning) and the child's entry;
- `devices`: the training backends (CPU, CUDA) and the mock cost model;
- `measure`: step timing, throughput statistics and peak memory;
- `workloads`: the workload protocol, its loader and the built-in MNIST workload;
- `lifetime`: the child dies with the study.

It imports `autotune.core` and never `autotune.study` (import-linter's layers contract).
"""

__all__: list[str] = []  # a floor, not a face: its rooms are the faces
