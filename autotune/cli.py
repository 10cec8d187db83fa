"""Command line: argument parsing only; every command calls the Python API.

The grammar: configuration is ``key=value`` (Hydra's form: ``space=``, ``study=``,
``storage=``, ``device=``, any field of the run or the space); options that pick an action
or an output file are flags (``--trials N``, ``--out FILE``, ``--csv FILE``, ...). Every
command that reads a study takes ``study=NAME``, every command that opens a database
``storage=URL``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import typer
import yaml
from rich.console import Console
from rich.text import Text  # the user's text, never read as markup or emoji codes

from autotune.core.exceptions import AutotuneError

if TYPE_CHECKING:  # annotations only: `autotune --help` imports no more than it needs
    from autotune.core.config import RunConfig

__all__ = ["app", "main"]

#: The grammar, as every ``--help`` ends (markdown: ``rich_markup_mode`` below).
_GRAMMAR = (
    "Configuration is `key=value` (Hydra's form): `space=NAME`, `study=NAME`, `storage=URL`, "
    "`device=cpu`, or any field of the run or the space (`train.epochs=2`). Options that pick "
    "an action or an output file are flags: `--trials N`, `--out FILE`, `--csv FILE`, "
    "`--export FILE`, `--diff`, `--style`, `--trial N`, `--objective`, `--host`, `--port`, "
    "`--json`."
)
#: Where every key is listed; ``autotune config`` shows them resolved.
_REFERENCE = (
    "`autotune config [KEY=VALUE]...` prints every key of a run, resolved, without running "
    "it; the full reference of keys and commands is docs/reference.md."
)

#: The ``autotune`` command and its subcommands (Typer); :func:`main` runs it.
app = typer.Typer(
    name="autotune",
    help="Find the fastest way to train a model on your hardware: a measured, multi-objective "
    "Optuna search over precision, memory format, torch.compile, batch size, workers, GPU count "
    "and model size.",
    epilog=f"{_GRAMMAR} {_REFERENCE}",
    add_completion=False,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
    # -h as well as --help, on every command (subcommands inherit the context settings).
    context_settings={"help_option_names": ["-h", "--help"]},
    # Markdown: a docstring's wrapped lines print as one paragraph ("rich" keeps the breaks)
    rich_markup_mode="markdown",
)


def _print_version(value: bool) -> None:
    """``--version``: print ``autotune X.Y.Z`` (the installed distribution's) and exit 0."""
    if value:
        from autotune import __version__

        typer.echo(f"autotune {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        help="Print the version and exit.",
        is_eager=True,
        callback=_print_version,
    ),
) -> None:
    """autotune: measured, multi-objective tuning of training speed, accuracy and memory."""


#: The ``[KEY=VALUE]...`` of ``run`` and ``config``: the same arguments, the same meaning.
_RUN_KEYS_HELP = (
    "space=NAME|FILE device=auto|cpu|cuda|mock study=NAME storage=URL "
    "sampler=nsga2|tpe|gp|random seed=INT data=digits|mnist|fashion_mnist|synthetic "
    "data.root=DIR, or any field of the run or the space (train.epochs=2, "
    "precision=[fp32,bf16], verify.rounds=5)."
)
_TRIALS_HELP = "Finished trials the study should hold; re-running tops it up."
_HARDWARE_CHANGE_HELP = (
    "Resume a study on a machine with another hardware fingerprint (its throughputs are then "
    "not comparable with the earlier trials')."
)


def _run_args(overrides: list[str] | None, allow_hardware_change: bool) -> RunConfig:
    """The :class:`~autotune.core.config.RunConfig` of ``run``'s (and ``config``'s) arguments
    (``--trials`` is checked where it is declared: ``min=1``).

    Raises:
        ConfigError: a key or value the configuration refuses.
    """
    from autotune.core.config import load_run_config

    hardware_args = ["allow_hardware_change=true"] if allow_hardware_change else []
    return load_run_config([*(overrides or []), *hardware_args])


@app.command(context_settings={"allow_extra_args": False}, epilog=f"{_REFERENCE} {_GRAMMAR}")
def run(
    overrides: list[str] = typer.Argument(None, metavar="[KEY=VALUE]...", help=_RUN_KEYS_HELP),
    trials: int = typer.Option(50, "--trials", "-n", min=1, metavar="N", help=_TRIALS_HELP),
    allow_hardware_change: bool = typer.Option(
        False, "--allow-hardware-change", help=_HARDWARE_CHANGE_HELP
    ),
) -> None:
    """Run (or resume) a study: every trial trains for real on the device and is measured."""
    from autotune.study.api import prepare_run, run_study
    from autotune.study.console import (
        ProgressDisplay,
        describe_peaks,
        print_header,
        print_result,
        verification_line,
    )

    config = _run_args(overrides, allow_hardware_change)
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
                on_verify=lambda p: console.print(Text(verification_line(p, metric))),
            )
    except KeyboardInterrupt:
        # Typer would turn this into a silent exit code 130; say what happened and what next.
        _print_error("interrupted; finished trials are saved. Run the same command to resume.")
        raise typer.Exit(130) from None
    print_result(console, result, metric)
    if result.baseline_failure is not None:
        # Every figure compares with the baseline: without one the study cannot answer.
        then = (
            f"this study holds its {result.finished} trials: choose a new study=NAME, or raise "
            "--trials to retry the baseline here"
            if result.finished >= trials
            else "fix it and run the same command again (the rerun retries the baseline; the "
            "failed trial stays, and counts towards --trials), or choose a new study=NAME"
        )
        _print_error(f"the baseline trial failed ({result.baseline_failure}): {then}")
        raise typer.Exit(1)


class _ConfigDumper(yaml.SafeDumper):
    """YAML as a space file is written: mappings as blocks, lists in one line (``[8, 16]``)."""


_ConfigDumper.add_representer(
    list, lambda dumper, data: dumper.represent_sequence("tag:yaml.org,2002:seq", data, True)
)


@app.command("config", context_settings={"allow_extra_args": False}, epilog=_GRAMMAR)
def show_config(
    overrides: list[str] = typer.Argument(None, metavar="[KEY=VALUE]...", help=_RUN_KEYS_HELP),
    trials: int | None = typer.Option(
        None, "--trials", "-n", min=1, metavar="N", help="As for `run`: checked and shown, not run."
    ),
    allow_hardware_change: bool = typer.Option(
        False, "--allow-hardware-change", help="As for `run`: shown, not run."
    ),
) -> None:
    """Print the resolved configuration of a run as YAML, without running it.

    What `autotune run` with the same arguments would run: the run's keys and the space's
    fields, each at the path where `key=value` sets it, the storage password masked. The keys,
    the values and the storage URL are checked as `run` checks them; the device, the workload,
    its data and the database are checked when `run` starts. Nothing is opened or written."""
    from autotune.core.config import run_config_document
    from autotune.study.storage import validate_storage_url

    config = _run_args(overrides, allow_hardware_change)
    validate_storage_url(config.storage)  # parses it and finds its driver; connects to nothing
    header = [
        "# The configuration `autotune run` resolves from these arguments (nothing was run).",
        "# Each key is a key=value argument: train.epochs=2, verify.rounds=5, precision=[fp32].",
    ]
    if trials is not None:
        header.append(f"# --trials {trials}: the finished trials the study should hold.")
    document = yaml.dump(
        run_config_document(config), Dumper=_ConfigDumper, sort_keys=False, width=1000
    )
    typer.echo("\n".join(header) + "\n" + document, nl=False)


# --- The study and the storage, named the same way by every command that reads them


#: ``storage=URL`` in help texts.
_STORAGE_HELP = "storage=URL: the study database (default sqlite:///storage/autotune.db)."
#: ``study=NAME [storage=URL]`` in help texts.
_STUDY_HELP = f"study=NAME: the study (`autotune ls` lists them). {_STORAGE_HELP}"


def _required_study(study: str | None, command: str) -> str:
    """The study a command reads (``study=NAME``).

    Raises:
        ConfigError: none was given.
    """
    from autotune.core.exceptions import ConfigError

    if study is None:
        raise ConfigError(
            f"{command}: which study? write study=NAME (`autotune ls storage=URL` lists them)"
        )
    return study


def _storage_args(args: list[str] | None, *, study: bool) -> tuple[str | None, str]:
    """``study=NAME`` (where the command reads a study) and ``storage=URL``, taken as written;
    the last of a key wins, as in ``autotune run``.

    Returns:
        ``(study or None, storage URL)``; the storage is the default one when not given.

    Raises:
        ConfigError: any other argument (a URL in it masked).
    """
    from autotune.core.config import DEFAULT_STORAGE_URL, display_url
    from autotune.core.exceptions import ConfigError

    expected = "study=NAME or storage=URL" if study else "storage=URL"
    name: str | None = None
    url = DEFAULT_STORAGE_URL
    for text in args or []:
        key, sep, value = text.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not value or key not in (("study", "storage") if study else ("storage",)):
            raise ConfigError(f"argument {display_url(text)!r}: expected {expected}")
        if key == "study":
            name = value
        else:
            url = value
    return name, url


def _study_and_storage(args: list[str] | None, command: str) -> tuple[str, str]:
    """The study and storage of a read command (``report``, ``best``, ``trials``).

    Raises:
        ConfigError: no study, two, or an argument that is neither key.
    """
    keyed, storage = _storage_args(args, study=True)
    return _required_study(keyed, command), storage


def _out_console() -> Console:
    return Console() if sys.stdout.isatty() else Console(width=200)


@app.command(epilog=_GRAMMAR)
def verify(
    args: list[str] = typer.Argument(
        None,
        metavar="study=NAME [KEY=VALUE]...",
        help="study=NAME (required) storage=URL verify.rounds=R (confirmation rounds, default "
        "8, >= 3) verify.accuracy_tolerance_pt=X (default 0.5) trial.timeout_s=S (default: "
        "the limit each trial ran under); research "
        "knobs: advanced.verify.race_rounds=A (default 2) advanced.verify.candidates=K "
        "(finalists per answer, default 3) advanced.verify.screen_z=Z (default 1.645).",
    ),
) -> None:
    """Re-run the baseline and the finalists in interleaved rounds of fresh processes, each
    round with its own seed, and print the verified recommendation (resumes an interrupted
    verification; repeats a finished one with new seeds)."""
    from autotune.core.config import load_verify_request
    from autotune.study.api import verify_study
    from autotune.study.console import print_verdict, verification_line
    from autotune.study.storage import load_existing_study
    from autotune.study.verification import study_metric

    request = load_verify_request(args or [])
    study = _required_study(request.study, "verify")
    # The study's metric, for the lines of each run (verify_study reads the same study).
    metric = study_metric(load_existing_study(study, request.storage))
    console = _out_console()
    try:
        summary = verify_study(
            study,
            request.storage,
            settings=request.verify_settings,
            # The limit each trial stored, unless this command sets one.
            timeout_s=(
                request.trial.timeout_s if "timeout_s" in request.trial.model_fields_set else None
            ),
            on_run=lambda p: console.print(Text(verification_line(p, metric))),
        )
    except KeyboardInterrupt:
        _print_error("interrupted; finished runs are saved. Run the same command to resume.")
        raise typer.Exit(130) from None
    print_verdict(console, summary, request.storage)


# --- Results: report, dashboard, best, ls, trials (read the study database; never run trials)


@app.command(epilog=_GRAMMAR)
def report(
    args: list[str] = typer.Argument(None, metavar="study=NAME [storage=URL]", help=_STUDY_HELP),
    out: Path = typer.Option(
        None, "--out", "-o", metavar="FILE", help="HTML file (default: NAME-report.html)."
    ),
) -> None:
    """Write a self-contained HTML report of a study (Plotly inlined; opens offline); print
    the verified verdict it shows."""
    from autotune.study.report import SIMULATED_TEXT, report_study

    study, storage = _study_and_storage(args, "report")
    data, path = report_study(study, storage, out)
    console = _out_console()
    console.print(
        Text(
            f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB): {data.finished} finished "
            f"trials, {len(data.pareto)} Pareto-optimal"
        )
    )
    _print_verdict_line(console, data.verdict_line(), data.recommended is not None)
    if data.simulated:
        console.print(f"[bold yellow]{SIMULATED_TEXT}[/]")


def _print_verdict_line(console: Console, line: str, recommended: bool) -> None:
    """The one-line verdict (the same in the report, the dashboard and ``best``), unwrapped."""
    style = "bold green" if recommended else "bold"
    console.print(Text(line, style), soft_wrap=True)


@app.command(epilog=_GRAMMAR)
def dashboard(
    args: list[str] = typer.Argument(None, metavar="[storage=URL]", help=_STORAGE_HELP),
    host: str = typer.Option(
        "127.0.0.1", "--host", help="Address to bind (this machine only by default)."
    ),
    port: int = typer.Option(8080, "--port", help="TCP port (0: any free port)."),
) -> None:
    """Serve a live, read-only dashboard of the studies in a database."""
    from autotune.study.report import DashboardApp, DashboardServer

    _, storage = _storage_args(args, study=False)
    server = DashboardServer(DashboardApp(storage), host, port)
    console = _out_console()
    console.print(
        f"autotune dashboard at {server.url} (read-only; Ctrl-C stops it)", highlight=False
    )
    if not server.is_loopback:
        console.print(
            Text(f"bound to {host}: anyone who can reach it sees the studies", "bold yellow")
        )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()


@app.command(epilog=_GRAMMAR)
def best(
    args: list[str] = typer.Argument(None, metavar="study=NAME [storage=URL]", help=_STUDY_HELP),
    objective: str | None = typer.Option(
        None,
        "--objective",
        help="Rank by time|throughput|goodput|accuracy|memory (default: time to target in a "
        "time-to-accuracy study, else throughput; goodput: a global-batch change's "
        "throughput x E(B); accuracy: the study's validation metric, best first in its "
        "direction; `metric` is the same).",
    ),
    export: Path = typer.Option(
        None,
        "--export",
        metavar="FILE",
        help="Write the verified recommendation as YAML with a PyTorch snippet (refused when "
        "there is none; see --trial). The trials as CSV: `autotune trials`.",
    ),
    diff: bool = typer.Option(
        False,
        "--diff",
        help="Print only what changes from the baseline trial to the verified recommendation, "
        "as lines to paste (refused when there is none; see --trial).",
    ),
    # Literal: the choices typer offers and checks (autotune.study.export.DIFF_STYLES).
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
    from autotune.core.exceptions import ConfigError
    from autotune.study.console import best_table, print_verdict_block
    from autotune.study.export import (
        best_configurations,
        export_best_yaml,
        export_choice,
        export_diff,
    )
    from autotune.study.report import SIMULATED_TEXT

    study, storage = _study_and_storage(args, "best")
    if diff and export is not None:
        raise ConfigError("--diff and --export: use one (--diff prints, --export writes a file)")
    if style is not None and not diff:
        raise ConfigError(f"--style {style}: only with --diff")
    if trial is not None and export is None and not diff:
        raise ConfigError(
            f"--trial {trial}: only with --export FILE or --diff (it picks what to export)"
        )
    result = best_configurations(study, storage, objective)
    if diff:
        # Only the lines: paste-able, or `autotune best study=NAME --diff > changes.py`.
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
            Text(f"wrote {export} (trial {document['trial']}, {what}); its PyTorch snippet:")
        )
        console.print(Text(document["pytorch_snippet"]))


@app.command("ls", epilog=_GRAMMAR)
def ls_studies(
    args: list[str] = typer.Argument(None, metavar="[storage=URL]", help=_STORAGE_HELP),
) -> None:
    """List the studies in a database with trial counts and hardware."""
    from autotune.study.console import studies_table
    from autotune.study.export import list_studies
    from autotune.study.storage import storage_location

    _, storage = _storage_args(args, study=False)
    studies = list_studies(storage)
    if not studies:  # say where it looked: a relative SQLite path depends on the directory
        _out_console().print(Text(f"no studies in {storage_location(storage)}"))
        return
    _out_console().print(studies_table(studies, storage))


_CSV_HELP = "CSV file to write: one row per finished trial."


def _write_trials_csv(study: str, storage: str, csv: Path) -> None:
    from autotune.study.export import export_csv

    rows = export_csv(study, storage, csv)
    _out_console().print(Text(f"wrote {csv}: {rows} trials"))


@app.command("trials", epilog=_GRAMMAR)
def trials_csv(
    args: list[str] = typer.Argument(None, metavar="study=NAME [storage=URL]", help=_STUDY_HELP),
    csv: Path = typer.Option(..., "--csv", metavar="FILE", help=_CSV_HELP),
) -> None:
    """Write every finished trial of a study as CSV (figures with units, configuration); the
    verified recommendation is `autotune best --export FILE`."""
    study, storage = _study_and_storage(args, "trials")
    _write_trials_csv(study, storage, csv)


@app.command(epilog=_GRAMMAR)
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

    from autotune.core.hardware import detect_fingerprint

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

    Bad input (a :class:`~autotune.core.exceptions.AutotuneError` or a usage error) prints one line
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
