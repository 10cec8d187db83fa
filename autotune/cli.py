"""Command line: argument parsing only; every command calls the Python API."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

import typer
from rich.console import Console

from autotune.exceptions import AutotuneError

__all__ = ["app", "main"]

#: The ``autotune`` command and its subcommands (Typer); :func:`main` runs it.
app = typer.Typer(
    name="autotune",
    help="Find the fastest way to train a model on your hardware: a measured, multi-objective "
    "Optuna search over precision, memory format, torch.compile, batch size, workers, GPU count "
    "and model size.",
    add_completion=False,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
    # Markdown: a docstring's wrapped lines print as one paragraph ("rich" keeps the breaks)
    rich_markup_mode="markdown",
)


@app.callback()
def _root() -> None:
    """autotune: measured, multi-objective tuning of training speed, accuracy and memory."""


@app.command(context_settings={"allow_extra_args": False})
def run(
    overrides: list[str] = typer.Argument(
        None,
        metavar="[KEY=VALUE]...",
        help="space=NAME|FILE device=auto|cpu|cuda|mock study=NAME storage=URL "
        "sampler=nsga2|tpe|gp|random seed=INT data=digits|mnist|fashion_mnist|synthetic "
        "data.root=DIR, or any field of the space (train.epochs=2, precision=[fp32,bf16]).",
    ),
    trials: int = typer.Option(
        50, "--trials", "-n", help="Finished trials the study should hold; re-running tops it up."
    ),
    allow_hardware_change: bool = typer.Option(
        False,
        "--allow-hardware-change",
        help="Resume a study on a machine with another hardware fingerprint (its throughputs "
        "are then not comparable with the earlier trials').",
    ),
) -> None:
    """Run (or resume) a study: every trial trains for real on the device and is measured."""
    from autotune.api import prepare_run, run_study
    from autotune.config import load_run_config
    from autotune.console import (
        ProgressDisplay,
        describe_peaks,
        print_header,
        print_result,
        verification_line,
    )
    from autotune.exceptions import ConfigError

    if trials < 1:
        raise ConfigError(f"--trials: must be >= 1, but got {trials}")
    hardware_args = ["allow_hardware_change=true"] if allow_hardware_change else []
    config = load_run_config([*(overrides or []), *hardware_args])
    prepared = prepare_run(config)
    metric = prepared.metric
    # Off a terminal (logs, CI) rich would wrap tables at 80 columns; keep rows whole there.
    console = Console() if sys.stdout.isatty() else Console(width=200)
    print_header(console, prepared, trials)
    peaks = describe_peaks(prepared.capabilities, prepared.space.precision.values())
    console.print(peaks, style="dim", markup=False, highlight=False)
    try:
        with ProgressDisplay(console, trials, already=0, metric=metric) as display:
            result = run_study(
                config,
                trials,
                on_trial=display.update,
                prepared=prepared,
                on_verify=lambda p: console.print(
                    verification_line(p, metric), highlight=False, markup=False
                ),
            )
    except KeyboardInterrupt:
        # Typer would turn this into a silent exit code 130; say what happened and what next.
        _print_error("interrupted; finished trials are saved. Run the same command to resume.")
        raise typer.Exit(130) from None
    print_result(console, result, metric)


@app.command()
def verify(
    study: str = typer.Argument(..., metavar="STUDY", help="Optuna study name."),
    args: list[str] = typer.Argument(
        None,
        metavar="[KEY=VALUE]...",
        help="storage=URL verify.rounds=R (confirmation rounds, default 8, >= 3) "
        "verify.race_rounds=A (default 2) verify.candidates=K (finalists per answer, default 3) "
        "verify.accuracy_tolerance_pt=X (default 0.5) verify.screen_z=Z (default 1.645) "
        "trial.timeout_s=S.",
    ),
) -> None:
    """Re-run the baseline and the finalists in interleaved rounds of fresh processes, each
    round with its own seed, and print the verified recommendation (resumes an interrupted
    verification; repeats a finished one with new seeds)."""
    from autotune.api import verify_study
    from autotune.config import load_verify_request
    from autotune.console import print_verdict, verification_line
    from autotune.storage import load_existing_study
    from autotune.verification import study_metric

    request = load_verify_request(args or [])
    # The study's metric, for the lines of each run (verify_study reads the same study).
    metric = study_metric(load_existing_study(study, request.storage))
    console = _out_console()
    try:
        summary = verify_study(
            study,
            request.storage,
            settings=request.verify,
            timeout_s=request.trial.timeout_s,
            on_run=lambda p: console.print(
                verification_line(p, metric), highlight=False, markup=False
            ),
        )
    except KeyboardInterrupt:
        _print_error("interrupted; finished runs are saved. Run the same command to resume.")
        raise typer.Exit(130) from None
    print_verdict(console, summary, request.storage)


# --- Results: report, dashboard, best, ls, export (read the study database; never run trials)


def _storage_arg(args: list[str] | None) -> str:
    """The storage URL of ``storage=URL`` (the one ``key=value`` these commands take)."""
    from autotune.config import DEFAULT_STORAGE_URL, display_url
    from autotune.exceptions import ConfigError

    url = DEFAULT_STORAGE_URL
    for text in args or []:
        key, sep, value = text.partition("=")
        if key.strip() != "storage" or not sep or not value.strip():
            raise ConfigError(f"argument {display_url(text)!r}: expected storage=URL")
        url = value.strip()
    return url


def _out_console() -> Console:
    return Console() if sys.stdout.isatty() else Console(width=200)


_STORAGE_ARG_HELP = "storage=URL: the study database (default sqlite:///storage/autotune.db)."


@app.command()
def report(
    study: str = typer.Argument(..., metavar="STUDY", help="Optuna study name."),
    args: list[str] = typer.Argument(None, metavar="[storage=URL]", help=_STORAGE_ARG_HELP),
    out: Path = typer.Option(None, "--out", "-o", help="HTML file (default: STUDY-report.html)."),
) -> None:
    """Write a self-contained HTML report of a study (Plotly inlined; opens offline); print
    the verified verdict it shows."""
    from autotune.report import SIMULATED_TEXT, report_study

    data, path = report_study(study, _storage_arg(args), out)
    console = _out_console()
    console.print(
        f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB): {data.finished} finished trials, "
        f"{len(data.pareto)} Pareto-optimal",
        highlight=False,
    )
    _print_verdict_line(console, data.verdict_line(), data.recommended is not None)
    if data.simulated:
        console.print(f"[bold yellow]{SIMULATED_TEXT}[/]")


def _print_verdict_line(console: Console, line: str, recommended: bool) -> None:
    """The one-line verdict (the same in the report, the dashboard and ``best``), unwrapped."""
    style = "bold green" if recommended else "bold"
    console.print(line, style=style, markup=False, highlight=False, soft_wrap=True)


@app.command()
def dashboard(
    args: list[str] = typer.Argument(None, metavar="[storage=URL]", help=_STORAGE_ARG_HELP),
    host: str = typer.Option(
        "127.0.0.1", "--host", help="Address to bind (this machine only by default)."
    ),
    port: int = typer.Option(8080, "--port", help="TCP port (0: any free port)."),
) -> None:
    """Serve a live, read-only dashboard of the studies in a database."""
    from autotune.report import DashboardApp, DashboardServer

    server = DashboardServer(DashboardApp(_storage_arg(args)), host, port)
    console = _out_console()
    console.print(
        f"autotune dashboard at {server.url} (read-only; Ctrl-C stops it)", highlight=False
    )
    if not server.is_loopback:
        console.print(f"[bold yellow]bound to {host}: anyone who can reach it sees the studies[/]")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()


@app.command()
def best(
    study: str = typer.Argument(..., metavar="STUDY", help="Optuna study name."),
    args: list[str] = typer.Argument(None, metavar="[storage=URL]", help=_STORAGE_ARG_HELP),
    objective: str | None = typer.Option(
        None,
        "--objective",
        help="Rank by time|throughput|accuracy|memory (default: time to target in a "
        "time-to-accuracy study, else throughput; accuracy: the study's validation metric, "
        "best first in its direction; `metric` is the same).",
    ),
    export: Path = typer.Option(
        None,
        "--export",
        help="Write the verified recommendation as YAML with a PyTorch snippet (refused when "
        "there is none; see --trial).",
    ),
    diff: bool = typer.Option(
        False,
        "--diff",
        help="Print only what changes from the baseline trial to the verified recommendation, "
        "as lines to paste (refused when there is none; see --trial).",
    ),
    # Literal: the choices typer offers and checks (autotune.export.DIFF_STYLES).
    style: Literal["torch", "lightning", "hf", "loop"] | None = typer.Option(
        None,
        "--style",
        help="With --diff: in the words of plain PyTorch, Lightning's Trainer, Transformers' "
        "TrainingArguments or the loop door's LoopTrial (default: the study's door's own; "
        "plain PyTorch for a workload).",
    ),
    trial: int = typer.Option(
        None,
        "--trial",
        metavar="N",
        help="With --export or --diff: trial N instead (its single-trial figures; not verified).",
    ),
) -> None:
    """Print the verified verdict and the Pareto-optimal configurations (single trials);
    optionally export the verified recommendation, or print only what it changes."""
    from autotune.console import best_table, print_verdict_block
    from autotune.exceptions import ConfigError
    from autotune.export import best_configurations, export_best_yaml, export_choice, export_diff
    from autotune.report import SIMULATED_TEXT

    if diff and export is not None:
        raise ConfigError("--diff and --export: use one (--diff prints, --export writes a file)")
    if style is not None and not diff:
        raise ConfigError(f"--style {style}: only with --diff")
    if trial is not None and export is None and not diff:
        raise ConfigError(
            f"--trial {trial}: only with --export FILE or --diff (it picks what to export)"
        )
    result = best_configurations(study, _storage_arg(args), objective)
    if diff:
        # Only the lines: paste-able, or `autotune best STUDY --diff > changes.py`.
        lines = export_diff(result, style=style, trial=trial)
        typer.echo("\n".join(lines))
        return
    if export is not None:
        export_choice(result, trial)  # refuse before printing anything
    console = _out_console()
    if result.simulated:
        console.print(f"[bold yellow]{SIMULATED_TEXT}[/]")
    if result.verification is not None and result.verification.complete:
        print_verdict_block(console, result.verification)  # for a person: a line per figure
    else:
        _print_verdict_line(console, result.verdict, result.recommended_trial is not None)
    console.print(best_table(result))
    if export is not None:
        document = export_best_yaml(result, export, trial=trial)
        what = (
            "the verified recommendation"
            if document["verification"] is not None
            else "NOT VERIFIED: single-trial figures"
        )
        console.print(
            f"wrote {export} (trial {document['trial']}, {what}); its PyTorch snippet:",
            highlight=False,
        )
        console.print(document["pytorch_snippet"], markup=False, highlight=False)


@app.command("ls")
def ls_studies(
    args: list[str] = typer.Argument(None, metavar="[storage=URL]", help=_STORAGE_ARG_HELP),
) -> None:
    """List the studies in a database with trial counts and hardware."""
    from autotune.console import studies_table
    from autotune.export import list_studies

    storage = _storage_arg(args)
    _out_console().print(studies_table(list_studies(storage), storage))


@app.command("export")
def export_trials(
    study: str = typer.Argument(..., metavar="STUDY", help="Optuna study name."),
    args: list[str] = typer.Argument(None, metavar="[storage=URL]", help=_STORAGE_ARG_HELP),
    csv: Path = typer.Option(..., "--csv", help="CSV file to write: one row per finished trial."),
) -> None:
    """Write every finished trial of a study as CSV (figures with units, configuration)."""
    from autotune.export import export_csv

    rows = export_csv(study, _storage_arg(args), csv)
    _out_console().print(f"wrote {csv}: {rows} trials", highlight=False)


@app.command()
def hardware(
    as_json: bool = typer.Option(False, "--json", help="Print the fingerprint as JSON."),
    mock_profile: str | None = typer.Option(
        None,
        "--mock-profile",
        metavar="NAME",
        help="Show a mock profile's SIMULATED machine instead (default, h100, a100, v100, t4, "
        "cpu).",
    ),
) -> None:
    """Print the hardware fingerprint: GPUs through NVML (name, UUID, memory, compute
    capability, power limit), driver, CUDA, cuDNN and torch versions, CPU, cores and RAM."""
    import json

    from rich.table import Table

    from autotune.hardware import detect_fingerprint

    kind = "mock" if mock_profile is not None else "auto"
    fp = detect_fingerprint(kind, mock_profile=mock_profile or "default")
    if as_json:
        typer.echo(json.dumps(fp.to_dict(), indent=2))
        return
    table = Table(
        title="Hardware fingerprint" + (" (SIMULATED)" if fp.simulated else ""),
        title_justify="left",
        show_header=False,
    )
    for label, value in fp.rows():
        table.add_row(label, value)
    Console(highlight=False, width=None if sys.stdout.isatty() else 160).print(table)


def _print_error(message: str) -> None:
    """One line on stderr, never wrapped: scripts and tests read it."""
    print(f"autotune: {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``autotune`` console script.

    Bad input (a :class:`~autotune.exceptions.AutotuneError` or a usage error) prints one line
    on stderr and exits with code 2; Ctrl-C exits with 130 after the running trial is stopped.
    """

    fail = _print_error

    try:
        # Without standalone mode, typer returns a command's exit code (typer.Exit) instead of
        # calling sys.exit; it is 130 after Ctrl-C.
        code = app(
            # No arguments: show the help and exit 0 (not a usage error).
            args=(argv if argv is not None else sys.argv[1:]) or ["--help"],
            prog_name="autotune",
            standalone_mode=False,
        )
        if isinstance(code, int):
            return code
    except typer.Exit as e:  # --help and friends
        return int(getattr(e, "exit_code", 0))
    except typer.Abort:
        return 130
    except typer.exceptions.TyperException as e:  # usage errors: unknown option, bad value
        message = e.format_message() if hasattr(e, "format_message") else str(e)
        fail(f"error: {message}")
        return 2
    except AutotuneError as e:
        fail(f"error: {e}")
        return 2
    except KeyboardInterrupt:
        fail("interrupted; finished trials are saved. Run the same command to resume.")
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
