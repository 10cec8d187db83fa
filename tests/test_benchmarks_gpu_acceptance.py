"""The GPU acceptance script (benchmarks/gpu_acceptance.py) on the CPU, with ``--tiny``: every
stage writes its JSON line, the compile probe passes, and each CUDA stage says it skipped."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(120)
def test_the_acceptance_script_runs_on_the_cpu_and_says_each_skip(tmp_path: Path) -> None:
    out = tmp_path / "acceptance.jsonl"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_acceptance.py"), "--tiny", f"--out={out}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {row["stage"]: row for row in map(json.loads, out.read_text().splitlines())}
    assert rows["env"]["status"] == "ok" and rows["env"]["torch"]
    probe = rows["compile_probe"]
    assert probe["status"] == "ok", probe
    assert probe["compiled_calls_after"] == probe["steps_after"] > 0
    assert probe["counted_flops"] > 0
    if not rows["env"]["cuda_available"]:
        cuda_stages = [name for name in rows if name.startswith(("workload_", "door_", "pytest"))]
        assert len(cuda_stages) == 11
        assert all(rows[name]["status"] == "skipped" for name in cuda_stages)
        assert all(rows[name]["reason"] == "no CUDA device" for name in cuda_stages)
    assert rows["end"]["wall_s"] < 540


@pytest.mark.timeout(180)
def test_a_door_stage_runs_compiled_on_the_cpu(tmp_path: Path) -> None:
    """The door stage's trial, on the CPU (the script runs it on CUDA only): the loop door
    with compile default times the compiled frame (one compiled call a step or more, but
    the eager FLOP-counted step)."""
    code = (
        "import json, sys; sys.path[:0] = [sys.argv[1], sys.argv[1] + '/benchmarks']; "
        "import gpu_acceptance; print(json.dumps(gpu_acceptance.door_trial('loop', 'cpu', 1)))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(ROOT)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=170,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    assert row["device"] == "cpu" and row["steps"] > 1
    assert row["compiled_ok"], row
    assert row["compile_s"] > 0 and row["throughput_sps"] > 0
