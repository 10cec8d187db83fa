"""Command line: argument parsing only; every command calls the Python API."""

from __future__ import annotations

import sys

import click
import typer
from rich.console import Console

from autotune.exceptions import AutotuneError

__all__ = ["app", "main"]

app = typer.Typer(
    name="autotune",
    help="Find the fastest way to train a model on your hardware: a measured, multi-objective "
    "Optuna search over precision, memory format, torch.compile, batch size, workers, GPU count "
    "and model size.",
    add_completion=False,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
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
) -> None:
    """Run (or resume) a study: every trial trains for real on the device and is measured."""
    from autotune.api import prepare_run, run_study
    from autotune.config import load_run_config
    from autotune.console import ProgressDisplay, print_header, print_result
    from autotune.exceptions import ConfigError

    if trials < 1:
        raise ConfigError(f"--trials: must be >= 1, but got {trials}")
    config = load_run_config(overrides or [])
    prepared = prepare_run(config)
    # Off a terminal (logs, CI) rich would wrap tables at 80 columns; keep rows whole there.
    console = Console() if sys.stdout.isatty() else Console(width=200)
    print_header(console, prepared, trials)
    with ProgressDisplay(console, trials, already=0) as display:
        result = run_study(config, trials, on_trial=display.update, prepared=prepared)
    print_result(console, result)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``autotune`` console script.

    Bad input (a :class:`~autotune.exceptions.AutotuneError` or a usage error) prints one line
    on stderr and exits with code 2; Ctrl-C exits with 130 after the running trial is stopped.
    """
    err = Console(stderr=True, highlight=False)
    try:
        app(
            args=argv if argv is not None else sys.argv[1:],
            prog_name="autotune",
            standalone_mode=False,
        )
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.ClickException as e:
        err.print(f"autotune: error: {e.format_message()}", markup=False)
        return 2
    except click.exceptions.Abort:
        return 130
    except AutotuneError as e:
        err.print(f"autotune: error: {e}", markup=False)
        return 2
    except KeyboardInterrupt:
        err.print(
            "autotune: interrupted; finished trials are saved. Run the same command to resume."
        )
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
