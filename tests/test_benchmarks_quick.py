"""The benchmark's smoke run (``python benchmarks/run.py --quick``) works end to end.

Benchmarks print figures; they are not timed tests. This only checks that the quick run
finishes and writes the six tables with numbers and a verdict on every target row: it asserts on
what the run writes, never on how fast the machine ran it. The run is made smaller than
``--quick`` alone (no MNIST rows: an empty ``--mnist-root``; two simulated verifications per row
of Table 6; four trials of the tuning study, three of Table 5's), and nothing bounds its time
but a guard against a hang, far above what it takes on a busy machine.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEADINGS = (
    "## 1. Tuned vs defaults vs expert",
    "## 2. Search efficiency",
    "## 3. Cost of tuning",
    "## 4. Measurement noise",
    "## 5. Time to accuracy",
    "## 6. Verification power",
)


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end != -1 else len(text)]


#: Simulated verifications per row of Table 6 (``--quick`` alone: 5).
POWER_VERIFICATIONS = 2
#: Trials of the tuning study (``--quick`` alone: 6) and, less one, of Table 5's (4): on a
#: 2-core AMD EPYC the command took 100 s with them, against about 130 s.
TUNING_TRIALS = 4


@pytest.mark.slow
@pytest.mark.timeout(3600)  # a hang's guard, not a speed bound: the run takes minutes
def test_quick_benchmark_writes_the_six_tables(tmp_path: Path) -> None:
    out = tmp_path / "benchmarks.md"
    no_mnist = tmp_path / "no-mnist"  # Table 1 on digits only: one data set's arms, not two
    no_mnist.mkdir()
    command = [
        *("--quick", "--out", str(out), "--mnist-root", str(no_mnist)),
        *("--power-verifications", str(POWER_VERIFICATIONS)),
        *("--trials", str(TUNING_TRIALS), "--tta-trials", str(TUNING_TRIALS - 1)),
    ]
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), *command],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    text = out.read_text(encoding="utf-8")

    assert "QUICK SMOKE RUN" in text
    assert "- Command: `python benchmarks/run.py --quick --out " in text
    for label in ("Machine:", "Software: Python", "torch", "optuna"):
        assert label in text
    for heading in HEADINGS:
        assert heading in text, heading

    tuned = _section(text, HEADINGS[0])
    assert re.search(r"\| digits \| tuned \| [\d,]+ \| \d+\.\dx \|", tuned), tuned
    assert "| mnist |" not in tuned
    assert f"MNIST rows skipped: no t10k-images-idx3-ubyte.gz in {no_mnist}" in text
    search = _section(text, HEADINGS[1])
    for sampler in ("nsga2", "tpe", "gp", "random"):
        assert re.search(rf"\| {sampler}[^|]* \| [01]\.\d{{3}} \| [01]\.\d{{3}} \|", search), (
            sampler
        )
    cost = _section(text, HEADINGS[2])
    assert re.search(
        r"per-trial overhead of `run_trial`.* \| \d+\.\d\d s \| (PASS|\*\*MISS\*\*) \|", cost
    )
    noise = _section(text, HEADINGS[3])
    assert re.search(r"same config \(seed 0\), back to back \| 3 \| [\d,]+ \| \d+\.\d %", noise)

    tta = _section(text, HEADINGS[4])
    assert re.search(r"\| defaults \|.* \| \d+\.\d\d \| [\d.]+-[\d.]+ \| 1/1 \| 1\.00x \|", tta), (
        tta
    )
    assert "| expert |" in tta and "| tuned" in tta

    # The real verification driven by the scripted device: a 1.3x finalist against the null,
    # and against a 1.3x finalist that is 1 pt less accurate.
    power = _section(text, HEADINGS[5])
    n = POWER_VERIFICATIONS
    assert re.search(rf"\| power \| 8 \(default\) \| 2 \| \d \| {n} \| [\d.]+ % \|", power), power
    assert re.search(rf"\| null \| 8 \(default\) \| 2 \| \d \| {n} \| - \| - \| [\d.]+ % \|", power)
    assert re.search(rf"\| inferior \| 8 \(default\) \| 2 \| \d \| {n} \| [\d.]+ % \|", power)

    # Every target row of the summary carries a verdict.
    summary = _section(text, "## Targets at a glance")
    rows = [line for line in summary.splitlines() if re.match(r"\| \d \|", line)]
    assert rows
    assert all(re.search(r"\| (PASS|\*\*MISS\*\*|n/a) \|$", row) for row in rows), rows
