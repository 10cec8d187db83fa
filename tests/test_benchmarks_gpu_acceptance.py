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
