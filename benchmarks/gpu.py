"""One command that proves the CUDA path on a GPU machine, unattended, and writes what it saw.

In order, a part that fails written down with its error while the next goes on (every part
stops starting trials at its share of ``--budget-s``, default 25 minutes; a study then
verifies the trials it ran):

1. the GPU tests (``pytest -m gpu``);
2. every precision x memory format x compile mode the device runs, one trial each, on the
   defaults' model and batch (``autotune.study.baseline``), with throughput, step time, compile
   seconds, peak memory, accuracy, MFU and energy per sample;
3. a 20-trial ``cnn_small`` study with its verification (the README's main job);
4. a time-to-accuracy ``cnn_small`` study with its verification;
5. with two GPUs or more, ``gpu_count=2`` trials, eager and ``reduce-overhead``;

then writes ``--out`` (``docs/research/gpu.md``) with the device, driver, CUDA and torch versions and
every figure.

Usage::

    python benchmarks/gpu.py --out docs/research/gpu.md             # on a CUDA machine
    python benchmarks/gpu.py --device mock --out /tmp/gpu-mock.md   # a rehearsal anywhere

``--device mock`` runs every part on the mock device's ``h100`` profile (8 simulated GPUs):
every figure of that document is SIMULATED and says so; it proves the command, not the GPU.

Only the standard library at the top: the trial runner's forkserver children re-import
``__main__``, so autotune, optuna and torch are imported inside the functions that use them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MIB = 1 << 20
#: Each part's share of ``--budget-s``; a part stops starting trials once its share is used.
SHARES = {"tests": 0.12, "matrix": 0.30, "study": 0.33, "tta": 0.20, "multi_gpu": 0.05}
PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
MEMORY_FORMATS = ("contiguous", "channels_last")
COMPILE_MODES = ("none", "default", "reduce-overhead", "max-autotune")
#: The columns of one trial's figures (:func:`_trial_row`), after the knobs that name it.
FIGURE_COLUMNS = (
    "samples/s",
    "step ms",
    "compile s",
    "peak MiB",
    "val acc",
    "MFU",
    "mJ/sample",
    "memory kind / note",
)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def num(value: float | None, digits: int = 0) -> str:
    return "n/a" if value is None or value != value else f"{value:,.{digits}f}"


@dataclass
class Part:
    """One part of the document: its heading, its lines, and its seconds."""

    heading: str
    lines: list[str] = field(default_factory=list)
    wall_s: float = 0.0

    def text(self) -> str:
        return "\n".join(
            [f"## {self.heading}", "", *self.lines, "", f"Wall time: {self.wall_s:.0f} s"]
        )


def run_part(heading: str, body: Callable[[Part], None]) -> Part:
    """Run one part; an exception is written into the part instead of ending the command."""
    part = Part(heading)
    start = time.perf_counter()
    log(heading)
    try:
        body(part)
    except Exception as e:  # unattended: the next part goes on, the error is written down
        part.lines.append(f"**FAILED**: `{type(e).__name__}: {e}`")
        part.lines.append("```\n" + traceback.format_exc()[-3000:] + "\n```")
        log(f"  failed: {type(e).__name__}: {e}")
    part.wall_s = time.perf_counter() - start
    return part


# --------------------------------------------------------------------------------------------
# The machine


def _nvidia_smi() -> str:
    """The GPUs as ``nvidia-smi`` lists them (name, driver, memory), or why not."""
    try:
        out = subprocess.run(
            [
                "nvidia-smi",
                "--query-gpu=index,name,driver_version,memory.total,pci.bus_id",
                "--format=csv,noheader",
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as e:
        return f"nvidia-smi: not available ({type(e).__name__})"
    return "; ".join(line.strip() for line in out.splitlines())


def machine_lines(device: str, caps: Any) -> list[str]:
    import optuna
    import torch
    from run import _git_describe  # benchmarks/run.py, beside this script (stdlib only)

    from autotune.core.hardware import cpu_model_name

    peaks = ", ".join(
        f"{p} {v / 1e12:,.1f} TFLOP/s" for p, v in sorted(caps.peak_flops_per_s.items())
    )
    return [
        f"- Date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- Device: `{device}`: {caps.name}, {caps.count} visible"
        + (f", {caps.memory_bytes / (1 << 30):,.1f} GiB each" if caps.memory_bytes else "")
        + (f", compute capability {caps.compute_capability}" if caps.compute_capability else ""),
        f"- GPUs (nvidia-smi): {_nvidia_smi()}",
        f"- Peaks used for MFU: {peaks or 'none'} ({caps.peak_flops_source or 'n/a'})",
        f"- Host: {cpu_model_name()}, {os.cpu_count()} logical cores; {platform.platform()}",
        f"- Software: Python {platform.python_version()}, torch {torch.__version__} "
        f"(CUDA {torch.version.cuda or 'none'}, cuDNN "
        f"{torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else 'none'}), "
        f"optuna {optuna.__version__}, autotune git {_git_describe()}",
    ]


# --------------------------------------------------------------------------------------------
# The parts


def gpu_tests(part: Part, budget_s: float) -> None:
    """``pytest -m gpu``: their summary line (skipped where no GPU is visible)."""
    command = [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider"]
    try:
        proc = subprocess.run(
            command, cwd=REPO, capture_output=True, text=True, timeout=max(60.0, budget_s)
        )
    except subprocess.TimeoutExpired:
        part.lines.append(f"`{shlex.join(command[1:])}`: **timed out** after {budget_s:.0f} s")
        return
    tail = [line for line in proc.stdout.strip().splitlines() if line.strip()]
    part.lines.append(f"`python {shlex.join(command[1:])}` exited {proc.returncode}:")
    part.lines.append("```\n" + "\n".join(tail[-15:]) + "\n```")


def _trial_row(
    space: Any, caps: Any, knobs: dict[str, Any], timeout_s: float, *, measure_refused: bool = False
) -> list[str]:
    """One trial of ``knobs``: its figures, or why it did not run. With ``measure_refused``, a
    combination the feasibility rules refuse "until measured" runs anyway, to measure it (its
    row says so)."""
    from autotune.core.config import TrialConfig
    from autotune.core.exceptions import TrialError
    from autotune.core.flops import mfu_figures
    from autotune.study.baseline import trial_train_settings
    from autotune.study.feasibility import trial_infeasibility_reason
    from autotune.study.search import run_trial

    config = TrialConfig.from_knobs(
        knobs, space, device=caps.kind, seed=0, train=trial_train_settings(space)
    )
    reason = trial_infeasibility_reason(config, caps)
    if reason is not None and not measure_refused:
        return ["not run"] * 7 + [f"infeasible: {reason}"]
    try:
        m = run_trial(config.model_copy(update={"timeout_s": timeout_s}))
    except TrialError as e:
        last = (e.detail.strip().splitlines() or [""])[-1][:200]
        return ["failed"] * 7 + [f"{e.failure}: {last}"]
    peak = caps.peak_flops_per_s.get(config.precision)
    flops = m.extra.get("flops_per_sample")
    mfu = (
        mfu_figures(flops, m.throughput_sps, peak, config.gpu_count)["mfu"]
        if peak and flops
        else None
    )
    energy = m.extra.get("energy_j_per_sample")
    cache = m.extra.get("compile_cache")
    context = m.extra.get("gpu_context_bytes")
    note = m.memory_kind
    if context is not None:
        note += f" (outside the allocator: {context / MIB:,.0f} MiB)"
    elif "process_memory_error" in m.extra:
        note += f" (no NVML process memory: {m.extra['process_memory_error']})"
    return [
        num(m.throughput_sps),
        num(1000 * m.step_time_s, 2),
        num(m.compile_s, 1) + (f" {cache}" if cache else ""),
        num(m.peak_memory_bytes / MIB, 1),
        f"{100 * m.val_metric:.2f} %",
        f"{100 * mfu:.1f} %" if mfu is not None else "n/a",
        f"{1000 * energy:.3f}" if energy is not None else "n/a",
        note + (" (SIMULATED)" if m.simulated else ""),
    ]


def knob_matrix(
    part: Part, space: Any, caps: Any, budget_s: float, timeout_s: float, gpu_count: int = 1
) -> None:
    """Every precision x memory format x compile mode of the space, one trial each, on the
    defaults' model and batch; rows past the part's budget are listed as not run."""
    from autotune.study.baseline import baseline_params

    defaults = {**baseline_params(space)[0], "gpu_count": gpu_count}
    header = ["precision", "memory format", "compile", *FIGURE_COLUMNS]
    rows: list[list[str]] = []
    start = time.perf_counter()
    # One fp32 contiguous row per compile mode first (cold compiles take 30-60 s each: a
    # budget spent on eager rows would leave every graph mode "not run"), then the rest,
    # eager first; the budget cuts the last rows.
    firsts = [("fp32", "contiguous", mode) for mode in COMPILE_MODES]
    rest = [
        (precision, memory_format, mode)
        for mode in COMPILE_MODES
        for precision in PRECISIONS
        for memory_format in MEMORY_FORMATS
        if (precision, memory_format, mode) not in firsts
    ]
    for precision, memory_format, compile_mode in firsts + rest:
        label = [precision, memory_format, compile_mode]
        allowed = (
            space.precision.contains(precision)
            and space.memory_format.contains(memory_format)
            and space.compile_mode.contains(compile_mode)
        )
        if not allowed:
            rows.append([*label, *["-"] * 7, "removed from the space for this device"])
            continue
        if time.perf_counter() - start > budget_s:
            rows.append([*label, *["-"] * 7, "not run: the part's time budget was used"])
            continue
        knobs = {
            **defaults,
            "precision": precision,
            "memory_format": memory_format,
            "compile_mode": compile_mode,
        }
        row = _trial_row(space, caps, knobs, timeout_s)
        log(f"  {' '.join(label)}: {row[0]} samples/s {row[-1]}")
        rows.append([*label, *row])
    model = " ".join(f"{k}={v}" for k, v in defaults.items() if k in space.model.knobs)
    part.lines.append(
        f"One trial each, model {model}, batch {defaults['batch_size']}, "
        f"{defaults['num_workers']} DataLoader workers, {gpu_count} GPU(s), seed 0. Single "
        "trials, not verified: the study below verifies."
    )
    part.lines.append("")
    part.lines.append(table(header, rows))


#: Trials a capped study runs between two looks at its time budget.
STUDY_CHUNK_TRIALS = 5


def study_part(
    part: Part,
    args: argparse.Namespace,
    name: str,
    n_trials: int,
    overrides: Sequence[str] = (),
    budget_s: float = float("inf"),
) -> None:
    """A ``cnn_small`` study of ``n_trials`` trials with its verification: the command that
    reproduces it, its trials and failures, its front and its verdict. The trials run in
    chunks of :data:`STUDY_CHUNK_TRIALS` (a study resumes where it stopped) until
    ``n_trials`` or the part's ``budget_s`` is reached; the verification then runs over the
    trials that ran."""
    import optuna

    from autotune.core.config import load_run_config
    from autotune.study.api import run_study

    arguments = [
        "space=cnn_small",
        f"device={args.device}",
        f"study={name}",
        "seed=0",
        f"trial.timeout_s={args.trial_timeout_s:g}",
        *(["mock.profile=h100"] if args.device == "mock" else []),
        *overrides,
    ]
    config = load_run_config([*arguments, f"storage={args.storage}"])

    def on_trial(p: Any) -> None:
        failure = p.last.user_attrs.get("failure", "")
        log(f"  {name}: trial {p.finished}/{p.target} ({p.elapsed_s:.0f} s) {failure}")

    search = config.model_copy(update={"verify": config.verify.model_copy(update={"rounds": 0})})
    started, ran = time.perf_counter(), 0
    while ran < n_trials and time.perf_counter() - started < budget_s:
        ran = min(n_trials, ran + STUDY_CHUNK_TRIALS)
        run_study(search, ran, on_trial=on_trial)
    if ran < n_trials:
        part.lines.append(f"- Stopped at {ran} of {n_trials} trials: the part's time budget.")
    result = run_study(config, ran, on_trial=on_trial)  # the verification of what ran
    study = optuna.load_study(study_name=name, storage=args.storage)
    failures: dict[str, int] = {}
    for t in study.trials:
        failure = t.user_attrs.get("failure")
        if failure is not None:
            failures[failure] = failures.get(failure, 0) + 1
    verdict = (
        result.verification.headline()
        if result.verification is not None
        else f"none ({result.verification_note or 'not verified'})"
    )
    part.lines += [
        f"- Command: `autotune run {shlex.join(arguments[:1])} --trials {n_trials} "
        f"{shlex.join(arguments[1:])}`",
        f"- Trials: {result.finished} finished ({result.ran} run now); {result.wall_s:.0f} s "
        "with verification; failures: "
        + (", ".join(f"{k} {v}" for k, v in sorted(failures.items())) or "none"),
        f"- Pareto-optimal trials: {len(result.pareto_trials)}",
        f"- Verdict: {verdict}",
    ]


def multi_gpu(part: Part, space: Any, caps: Any, timeout_s: float) -> None:
    """``gpu_count=2`` trials, eager and ``reduce-overhead``, on the defaults' model. Studies
    refuse CUDA graphs under DDP until measured (pytorch/pytorch#140395: re-recording every
    step); this part measures them anyway."""
    from autotune.study.baseline import baseline_params

    if caps.count < 2 or not space.gpu_count.contains(2):
        part.lines.append(f"Not run: this machine has {caps.count} GPU(s); it takes 2.")
        return
    header = ["compile", *FIGURE_COLUMNS]
    rows = []
    for compile_mode in ("none", "reduce-overhead"):
        knobs = {**baseline_params(space)[0], "gpu_count": 2, "compile_mode": compile_mode}
        rows.append(
            [compile_mode, *_trial_row(space, caps, knobs, timeout_s, measure_refused=True)]
        )
    part.lines.append("Two DDP ranks (NCCL on CUDA), the defaults' model and batch per rank.")
    part.lines.append("")
    part.lines.append(table(header, rows))


# --------------------------------------------------------------------------------------------
# The command


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "research" / "gpu.md")
    parser.add_argument("--device", choices=("cuda", "mock", "cpu"), default="cuda")
    parser.add_argument("--budget-s", type=float, default=25 * 60.0)
    parser.add_argument("--study-trials", type=int, default=20)
    parser.add_argument("--tta-trials", type=int, default=10)
    parser.add_argument("--tta-target", type=float, default=0.97)
    parser.add_argument("--trial-timeout-s", type=float, default=300.0)
    parser.add_argument(
        "--storage", default=None, help="SQLAlchemy URL (default: a new SQLite file under /tmp)"
    )
    parser.add_argument("--skip-tests", action="store_true", help="leave out pytest -m gpu")
    args = parser.parse_args(argv)
    if args.storage is None:
        args.storage = f"sqlite:///{tempfile.mkdtemp(prefix='autotune-gpu-')}/gpu.db"
    return args


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    from autotune.core.config import load_space
    from autotune.core.hardware import detect_capabilities
    from autotune.study.feasibility import restrict_space

    started = time.perf_counter()
    caps = detect_capabilities(
        args.device, mock_profile="h100" if args.device == "mock" else "default"
    )
    space, removed = restrict_space(load_space("cnn_small", []), caps)
    budget = {name: share * args.budget_s for name, share in SHARES.items()}
    parts: list[Part] = []
    if args.skip_tests:
        parts.append(Part("1. GPU tests", ["Left out (--skip-tests)."]))
    else:
        parts.append(
            run_part("1. GPU tests (`pytest -m gpu`)", lambda p: gpu_tests(p, budget["tests"]))
        )
    parts.append(
        run_part(
            "2. Every precision x memory format x compile mode",
            lambda p: knob_matrix(p, space, caps, budget["matrix"], args.trial_timeout_s),
        )
    )
    parts.append(
        run_part(
            f"3. A {args.study_trials}-trial cnn_small study, verified",
            lambda p: study_part(
                p, args, "gpu_cnn_small", args.study_trials, budget_s=budget["study"]
            ),
        )
    )
    parts.append(
        run_part(
            f"4. Time to accuracy: a {args.tta_trials}-trial study to {100 * args.tta_target:g} %",
            lambda p: study_part(
                p,
                args,
                "gpu_cnn_small_tta",
                args.tta_trials,
                ["objective=time_to_accuracy", f"train.target_accuracy={args.tta_target:g}"],
                budget_s=budget["tta"],
            ),
        )
    )
    parts.append(run_part("5. Two GPUs", lambda p: multi_gpu(p, space, caps, args.trial_timeout_s)))
    total_s = time.perf_counter() - started
    simulated = caps.simulated
    title = f"# autotune on {caps.name}" + (" (SIMULATED: mock device)" if simulated else "")
    head = [
        title,
        "",
        *(
            [
                "**SIMULATED.** Every figure below comes from the mock device's h100 profile, "
                "a cost model: this document proves the command runs, not what a GPU does.",
                "",
            ]
            if simulated
            else []
        ),
        f"- Command: `python benchmarks/gpu.py {shlex.join(argv)}`",
        f"- Total wall time: {total_s / 60:.1f} min (budget {args.budget_s / 60:.0f} min)",
        *machine_lines(args.device, caps),
        "- Removed from the space for this device: " + ("; ".join(removed) or "nothing"),
    ]
    text = "\n".join(head) + "\n\n" + "\n\n".join(p.text() for p in parts) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    log(f"wrote {args.out} ({total_s / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
