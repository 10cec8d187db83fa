"""The terminal output of ``run`` (autotune/study/console.py): the run header and the commands it
prints for the user to copy never show the storage URL's password; the header says which
precision the screen skipped; the lines and the result of a time-to-accuracy run."""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Callable
from pathlib import Path

import pytest
from optuna.trial import FrozenTrial
from rich.console import Console

from autotune.core.config import load_run_config
from autotune.core.units import MIB
from autotune.study.api import StudyResult, prepare_run
from autotune.study.console import _fmt_best, _trial_line, print_header, print_result
from autotune.study.objectives import study_objectives
from autotune.testing import make_capabilities
from tests.studies.mock import run_mock_study, sqlite_url
from tests.studies.runs import mock_run_config
from tests.studies.tta import TtaStudy, tta_trial

SECRET = "S3cret"
#: What the study's storage is said to be: a PostgreSQL URL with a password.
PASSWORD_URL = f"postgresql+psycopg://alice:{SECRET}@db.example:5432/autotune"
SHOWN = "postgresql+psycopg://alice:***@db.example:5432/autotune"


def _printed(print_fn: Callable[..., None], *args: object) -> str:
    console = Console(width=250, record=True, file=io.StringIO())
    print_fn(console, *args)
    return console.export_text()


def test_the_run_header_masks_the_password(tmp_path: Path) -> None:
    prepared = prepare_run(
        load_run_config(["device=mock", "data=digits", f"storage={sqlite_url(tmp_path)}"])
    )
    config = prepared.config.model_copy(update={"storage": PASSWORD_URL})

    text = _printed(print_header, dataclasses.replace(prepared, config=config), 10)

    assert f"storage {SHOWN}\n" in text
    assert SECRET not in text


@pytest.fixture(scope="module")
def verified(tmp_path_factory: pytest.TempPathFactory) -> StudyResult:
    """A mock study searched and verified (its verification recommends a configuration)."""
    # 1 pt: the mock's fastest finalist is ~0.6 pt less accurate (tests/studies/verdicts.py).
    result = run_mock_study(
        sqlite_url(tmp_path_factory.mktemp("console")),
        8,
        study="s",
        constrained=False,
        extra=["verify.accuracy_tolerance_pt=1.0"],
    )
    assert result.verification is not None and result.verification.recommended is not None
    return result


def test_the_commands_to_copy_mask_the_password(verified: StudyResult) -> None:
    text = _printed(print_result, dataclasses.replace(verified, storage=PASSWORD_URL))

    assert f"the change: autotune best study=s storage='{SHOWN}' --diff\n" in text
    assert f"export it:  autotune best study=s storage='{SHOWN}' --export s-best.yaml\n" in text
    assert f"report:    autotune report study=s storage='{SHOWN}'\n" in text
    assert SECRET not in text


def test_the_verify_command_of_an_unverified_run_masks_the_password(
    verified: StudyResult,
) -> None:
    unverified = dataclasses.replace(verified, storage=PASSWORD_URL, verification=None)

    text = _printed(print_result, unverified)

    assert f"`autotune verify study=s storage='{SHOWN}'` verifies the finalists" in text
    assert SECRET not in text


#: The default mock profile with an fp16 peak of 1/100 of fp32's (FLOP/s).
_SLOW_FP16 = {"fp32": 19.5e12, "tf32": 156e12, "fp16": 0.195e12, "bf16": 312e12}


def _header(tmp_path: Path, *args: str) -> str:
    prepared = prepare_run(
        mock_run_config(f"sqlite:///{tmp_path / 'a.db'}", *args),
        capabilities=make_capabilities("mock", peak_flops_per_s=_SLOW_FP16),
    )
    console = Console(width=250, record=True, file=io.StringIO())
    print_header(console, prepared, 10)
    return console.export_text()


def test_the_header_says_which_precision_the_screen_skipped(tmp_path: Path) -> None:
    lines = _header(tmp_path).splitlines()

    assert (
        "skipped precision=fp16: dense peak 195 GFLOP/s is 1/100 of fp32's 19.5 TFLOP/s "
        "(below advanced.hardware.min_peak_ratio=0.1)"
    ) in lines


def test_the_header_says_when_a_slow_precision_is_kept_as_the_only_one(tmp_path: Path) -> None:
    text = _header(tmp_path, "precision=fp16")

    assert "skipped precision=fp16" not in text
    assert (
        "kept precision=fp16: dense peak 195 GFLOP/s is 1/100 of fp32's 19.5 TFLOP/s, below "
        "advanced.hardware.min_peak_ratio=0.1, but the space has no faster precision the device can run "
        "(advanced.hardware.min_peak_ratio=0 silences this)"
    ) in text.splitlines()


def test_a_too_slow_trial_on_a_busy_machine_says_both() -> None:
    import optuna

    from autotune.study.console import _trial_line

    trial = optuna.trial.create_trial(
        params={"precision": "fp16"},
        distributions={"precision": optuna.distributions.CategoricalDistribution(["fp16"])},
        values=[80.0, 0.0, 3.0],
        user_attrs={
            "failure": "too_slow",
            "failure_detail": "80 samples/s over 12 steady steps, below ...",
            "busy_machine": True,
            "other_cpu_share": 0.43,
        },
    )
    trial.number = 7

    assert _trial_line(trial) == (
        "trial 7: too_slow (80 samples/s over 12 steady steps, below ...), "
        "WARNING: measured on a busy machine (other processes used 43 % of the CPUs) "
        "precision=fp16"
    )


def test_a_reused_trial_says_whose_metric_it_has() -> None:
    import optuna

    from autotune.study.console import _trial_line

    trial = optuna.trial.create_trial(
        params={"memory_format": "channels_last"},
        distributions={
            "memory_format": optuna.distributions.CategoricalDistribution(["channels_last"])
        },
        values=[1234.0, 0.9812, 3 << 20],
        user_attrs={
            "throughput_sps": 1234.0,
            "val_metric": 0.9812,
            "peak_memory_bytes": 3 << 20,
            "metric_from_trial": 4,
        },
    )
    trial.number = 9

    assert _trial_line(trial) == (
        "trial 9: 1,234 samples/s, acc 98.1%, 3.0 MiB, metric from trial 4  "
        "memory_format=channels_last"
    )


def _timed_trial(iqr_sps: float) -> FrozenTrial:
    import optuna

    trial = optuna.trial.create_trial(
        params={"batch_size": 64},
        distributions={"batch_size": optuna.distributions.CategoricalDistribution([64])},
        values=[1000.0, 0.98, 3 << 20],
        user_attrs={
            "throughput_sps": 1000.0,
            "throughput_iqr_sps": iqr_sps,
            "val_metric": 0.98,
            "peak_memory_bytes": 3 << 20,
        },
    )
    trial.number = 5
    return trial


@pytest.mark.parametrize("terminal", [False, True])
def test_a_trial_whose_windows_spread_says_so_as_torch_benchmark_does(terminal: bool) -> None:
    from autotune.study.api import StudyProgress
    from autotune.study.console import ProgressDisplay

    assert _trial_line(_timed_trial(150.0)) == (
        "trial 5: 1,000 samples/s, acc 98.0%, 3.0 MiB, WARNING: the timed windows' "
        "interquartile range is 15.0 % of their median: this could indicate system "
        "fluctuation  batch_size=64"
    )
    assert (
        _trial_line(_timed_trial(20.0))
        == "trial 5: 1,000 samples/s, acc 98.0%, 3.0 MiB  batch_size=64"
    )
    # Under the progress bar, the warned trial's line is printed above it, as a busy one's is.
    console = Console(width=250, record=True, file=io.StringIO(), force_terminal=terminal)
    with ProgressDisplay(console, target=2, already=0) as display:
        display.update(
            StudyProgress(finished=1, target=2, elapsed_s=4.0, best={}, last=_timed_trial(300.0))
        )
    assert "interquartile range is 30.0 % of their median: this suggests significant" in (
        console.export_text()
    )


def test_a_reached_trials_line_says_whether_its_compile_was_cold() -> None:
    reached = tta_trial(3, 12.4, 8.3, metric=0.952)
    reached.user_attrs["compile_cache"] = "cold"

    assert _trial_line(reached).startswith(
        "trial 3: reached 95.2% in 12.4 s (compile 0.5 s cold), 8.3 MiB  depth=2"
    )


def test_console_lines_of_reached_and_missed_trials() -> None:
    reached = tta_trial(3, 12.4, 8.3, metric=0.952)
    assert _trial_line(reached).startswith(
        "trial 3: reached 95.2% in 12.4 s (compile 0.5 s), 8.3 MiB  depth=2"
    )
    missed = tta_trial(3, 30.0, 8.3, reached=False, metric=0.941)
    assert _trial_line(missed).startswith("trial 3: missed 95.0% (94.1% after 30.0 s), 8.3 MiB")
    loss = study_objectives("val_loss", "minimize")[1]
    assert "reached val_loss 0.952 in" in _trial_line(reached, loss)
    failed = tta_trial(4, 0.0, 16.0, failure="oom")
    assert _trial_line(failed).startswith("trial 4: oom (last line of oom) depth=2")
    best = {"time_to_accuracy_s": 12.4, "peak_memory_bytes": 8.3 * MIB}
    assert _fmt_best(best, target=0.95) == "best: 12.4 s to 95.0% · mem 8.3 MiB"
    assert _fmt_best({}, target=0.95) == "best: no trial reached the target yet"
    # A throughput study's line is unchanged.
    assert _fmt_best({"throughput_sps": 1000.0, "accuracy": 0.9, "peak_memory_bytes": MIB}) == (
        "best: 1,000 samples/s · acc 90.0% · mem 1.0 MiB"
    )


def test_print_result_of_a_time_to_accuracy_run(tta_study: TtaStudy) -> None:
    console = Console(width=250, record=True, file=io.StringIO())
    print_result(console, tta_study.result)
    text = console.export_text()
    assert "time to target s" in text and "to reach 95.0%" in text and "[SIMULATED]" in text
    assert "samples/s" not in text.split("\n")[2]  # the header row
    assert "not verified (verify.rounds=0)" in text


#: The end of a user's error output: markup-like brackets, a closing tag rich cannot match
#: (it raised MarkupError and ended the study), an emoji code (``:train:``).
_USERS_ERROR = (
    "Traceback (most recent call last):\n"
    '  File "train.py", line 9, in train\n'
    "RuntimeError: [enforce fail at alloc_cpu.cpp:127] train.py:train: no [/x] memory"
)


def _failed_trial() -> FrozenTrial:
    import optuna

    trial = optuna.trial.create_trial(
        params={"precision": "fp16"},
        distributions={"precision": optuna.distributions.CategoricalDistribution(["fp16"])},
        values=[0.0, 0.0, 1e12],
        user_attrs={"failure": "error", "failure_detail": _USERS_ERROR},
    )
    trial.number = 3
    return trial


@pytest.mark.parametrize("terminal", [False, True])
def test_the_progress_line_prints_the_users_error_as_written(terminal: bool) -> None:
    from autotune.study.api import StudyProgress
    from autotune.study.console import ProgressDisplay

    console = Console(width=250, record=True, file=io.StringIO(), force_terminal=terminal)
    progress = StudyProgress(
        finished=1, target=2, elapsed_s=4.0, best={}, last=_failed_trial(), note="[/note] :train:"
    )

    with ProgressDisplay(console, target=2, already=0) as display:
        display.update(progress)

    text = console.export_text()
    assert "[/note] :train:\n" in text
    assert (
        "trial 3: error (RuntimeError: [enforce fail at alloc_cpu.cpp:127] train.py:train: no "
        "[/x] memory) precision=fp16"
    ) in text


def test_the_tables_and_the_verdict_print_the_users_text_as_written(
    verified: StudyResult,
) -> None:
    name = "s[/x]:train:"
    assert verified.verification is not None
    summary = dataclasses.replace(
        verified.verification, notes=("resumed [/x] from train.py:train:",), study_name=name
    )
    result = dataclasses.replace(verified, verification=summary, study_name=name)

    text = _printed(print_result, result)

    assert "note: resumed [/x] from train.py:train:\n" in text
    assert "Pareto-optimal trials of study s[/x]:train: on" in text
    assert "Verification 1 of study s[/x]:train:" in text
    assert "study='s[/x]:train:'" in text  # the commands to copy
