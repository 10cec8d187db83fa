"""The command line (autotune/cli.py): in-process through ``main([...])``, plus one run of the
installed ``autotune`` console script.

Bad input must give exit code 2, one line on stderr and no file written; every test runs in
an empty working directory (the default storage, sqlite:///storage/autotune.db, lands there).
"""

from __future__ import annotations

import html
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest
import torch
import yaml

import autotune
from autotune.cli import main
from autotune.core.config._loading import available_spaces
from tests.studies.mock import DemoStudy

NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")

#: (arguments, a fragment of the one-line message). Runs in an empty working directory.
BAD_INPUT = [
    pytest.param(
        ["run", "--trials", "0", "device=mock"],
        "Invalid value for '--trials' / '-n': Input should be greater than or equal to 1",
        id="trials-0",
    ),
    pytest.param(
        ["config", "-n", "-3", "device=mock"],
        "Invalid value for '--trials' / '-n': Input should be greater than or equal to 1",
        id="trials-negative",
    ),
    pytest.param(
        ["run", "train.epochs"], "override 'train.epochs': expected key=value", id="no-equals"
    ),
    pytest.param(
        ["run", "device=tpu"], "override device=tpu: device: Input should be", id="device"
    ),
    pytest.param(
        ["run", "sampler=cmaes"], "override sampler=cmaes: sampler: Input should be", id="sampler"
    ),
    pytest.param(["run", "bogus=1"], "override bogus=1: bogus: unknown key", id="unknown-key"),
    pytest.param(
        ["run", "train.epochs=many"],
        "override train.epochs=many: train.epochs: Input should be a valid integer",
        id="wrong-type",
    ),
    pytest.param(["run", "precision=[]"], "override precision=[]: precision", id="empty-choices"),
    pytest.param(
        ["run", "device=mock", "advanced.hardware.min_peak_ratio=2"],
        "override advanced.hardware.min_peak_ratio=2: advanced.hardware.min_peak_ratio: Input should be less than "
        "or equal to 1",
        id="min-peak-ratio-above-1",
    ),
    pytest.param(
        ["run", "device=mock", "advanced.hardware.min_peak_ratio=-0.1"],
        "advanced.hardware.min_peak_ratio: Input should be greater than or equal to 0",
        id="min-peak-ratio-negative",
    ),
    pytest.param(
        ["run", "device=mock", "advanced.hardware.min_peak_ratio=fast"],
        "override advanced.hardware.min_peak_ratio=fast: advanced.hardware.min_peak_ratio: Input should be a "
        "valid number",
        id="min-peak-ratio-not-a-number",
    ),
    pytest.param(
        ["run", "device=mock", "advanced.hardware.min_peak_ratio=true"],
        "advanced.hardware.min_peak_ratio: must be a number from 0 to 1, not true",
        id="min-peak-ratio-bool",
    ),
    pytest.param(
        ["run", "device=mock", "advanced.hardware.min_peak_ratio=nan"],
        "advanced.hardware.min_peak_ratio: Input should be a finite number",
        id="min-peak-ratio-nan",
    ),
    pytest.param(
        ["run", "device=mock", "advanced.hardware.peak=1"],
        "override advanced.hardware.peak=1: advanced.hardware.peak: unknown key",
        id="hardware-unknown-key",
    ),
    pytest.param(["run", "space=nosuch"], "space=nosuch: unknown space name", id="space-name"),
    pytest.param(
        ["run", "space=missing.yaml"], "space=missing.yaml: no such file", id="space-file"
    ),
    pytest.param(
        ["run", "device=mock", "data=fashion_mnist"],
        "data=fashion_mnist needs data.root=DIR",
        id="data-root",
    ),
    pytest.param(
        ["run", "device=mock", "data=mnist", "data.root=nowhere"],
        "data.root=nowhere: no such directory",
        id="data-dir",
    ),
    pytest.param(
        ["run", "device=cpu", "precision=tf32"],
        "space cnn_small: precision: no choice can run",
        id="infeasible-space",
    ),
    pytest.param(
        ["run", "device=mock", "storage=not a url"],
        "storage=not a url: not a SQLAlchemy database URL",
        id="storage",
    ),
    pytest.param(
        ["run", "device=cuda"], "device=cuda: torch sees no CUDA GPU", id="no-cuda", marks=NO_CUDA
    ),
    pytest.param(["run", "--bogus"], "No such option: --bogus", id="unknown-option"),
    pytest.param(["run", "--trials", "abc"], "Invalid value for '--trials'", id="trials-not-int"),
    pytest.param(["run", "device=mock", "seed=-1"], "seed", id="negative-seed"),
    pytest.param(
        ["run", "warm_start=nosuchstudy", "device=mock", "--trials", "1"],
        "warm_start=nosuchstudy: no such study in storage=sqlite:///storage/autotune.db",
        id="warm-start-missing-database",
    ),
    pytest.param(
        ["run", "warm_start=cnn_small", "device=mock", "--trials", "1"],
        "warm_start=cnn_small: must name another study than study=cnn_small",
        id="warm-start-itself",
    ),
    pytest.param(
        ["best", "study=cnn_small", "--trial", "3"],
        "--trial 3: only with --export FILE",
        id="best-trial-without-export",
    ),
]


def _files(root: Path) -> list[Path]:
    return sorted(p.relative_to(root) for p in root.rglob("*"))


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory and an 80-column environment, as in CI logs."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "80")
    return tmp_path


@pytest.mark.parametrize(("argv", "fragment"), BAD_INPUT)
def test_bad_input_exits_2_with_one_line_and_writes_nothing(
    workdir: Path, capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str
) -> None:
    code = main(argv)

    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert len(err.splitlines()) == 1, err  # not wrapped, even at 80 columns
    assert err.startswith("autotune: error: ")
    assert fragment in err
    assert _files(workdir) == []


def _assert_one_line_error(code: int, capsys: pytest.CaptureFixture[str], fragment: str) -> None:
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert len(err.splitlines()) == 1, err
    assert err.startswith("autotune: error: ")
    assert fragment in err


def test_hardware_with_a_gpu_nvml_cannot_read_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import pynvml

    from autotune.core import nvml
    from autotune.testing.machines import simulated_machine

    lost = simulated_machine("h100x8", failing={"nvmlDeviceGetUUID": pynvml.NVML_ERROR_GPU_IS_LOST})
    monkeypatch.setattr(nvml, "_load", lambda module: lost if module is None else module)

    code = main(["hardware"])

    _assert_one_line_error(
        code, capsys, "NVML started but nvmlDeviceGetUUID failed for GPU 0: NVMLError_GpuIsLost"
    )


def test_mysql_url_without_its_driver_names_the_package_to_install(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # None in sys.modules makes `import MySQLdb` raise ModuleNotFoundError, installed or not.
    monkeypatch.setitem(sys.modules, "MySQLdb", None)

    code = main(["run", "storage=mysql://u@127.0.0.1:1/x", "device=mock", "--trials", "1"])

    _assert_one_line_error(
        code,
        capsys,
        "storage=mysql://u@127.0.0.1:1/x: the MySQL driver is not installed "
        "(pip install mysqlclient, or use mysql+pymysql:// with pip install pymysql)",
    )
    assert _files(workdir) == []


def test_warm_start_from_a_study_the_database_lacks_changes_nothing(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from autotune.core.config import load_run_config
    from autotune.study.api import run_study
    from autotune.testing import simulate_trial

    run_study(
        load_run_config(["device=mock", "study=other", "verify.rounds=0"]),
        1,
        run_trial_fn=simulate_trial,
    )
    database = workdir / "storage" / "autotune.db"
    before = database.read_bytes()
    capsys.readouterr()

    code = main(["run", "warm_start=nosuchstudy", "device=mock", "--trials", "1"])

    _assert_one_line_error(code, capsys, "warm_start=nosuchstudy: no such study in storage=")
    assert database.read_bytes() == before
    assert optuna.get_all_study_names(f"sqlite:///{database}") == ["other"]


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--help"]) == 0

    out = capsys.readouterr().out
    assert "--trials" in out
    assert "KEY=VALUE" in out


def test_help_joins_the_lines_a_docstring_wraps(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command's summary is its docstring's first paragraph as prose: the docstring's line
    breaks (wrapped at 100 columns in the source) are not printed as line breaks."""
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["--help"]) == 0

    out = " ".join(capsys.readouterr().out.split())  # the box's borders and padding aside
    assert "in interleaved rounds of fresh processes, each round with its own seed" in out
    assert "print the verified verdict it shows" in out


def test_no_arguments_shows_usage_without_an_empty_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main([])

    out, err = capsys.readouterr()
    assert code == 0
    assert "Usage: autotune" in out
    assert err == ""


#: Every command autotune lists (``export`` is hidden: deprecated).
COMMANDS = ["run", "config", "verify", "report", "dashboard", "best", "ls", "trials", "hardware"]


def _prose(text: str) -> str:
    """Help text with its line breaks, box borders and padding reduced to single spaces."""
    return " ".join(text.replace("│", " ").split())


@pytest.mark.parametrize("argv", [["-h"], ["--help"], *([c, "-h"] for c in COMMANDS)])
def test_dash_h_is_help_and_every_help_states_the_grammar(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "200")

    code = main(argv)

    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    assert f"Usage: autotune {argv[0] if argv[0] in COMMANDS else ''}".strip() in out
    prose = _prose(out)
    assert "Configuration is key=value" in prose
    assert "Options that pick an action or an output file are flags: --trials N" in prose


def test_the_app_help_lists_every_command_but_the_deprecated_one(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["-h"]) == 0

    listed = [line.split()[1] for line in capsys.readouterr().out.splitlines() if "│ " in line]
    assert [c for c in COMMANDS if c in listed] == COMMANDS
    assert "export" not in listed


def test_run_help_names_the_config_command_and_the_reference(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["run", "-h"]) == 0

    prose = _prose(capsys.readouterr().out)
    assert "autotune config [KEY=VALUE]... prints every key of a run, resolved" in prose
    assert "docs/reference.md" in prose


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    code = main(["--version"])

    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    assert out == f"autotune {autotune.__version__}\n"
    assert autotune.__version__ == version("autotune")  # installed: the distribution's


# --- autotune config: the resolved configuration, nothing run or written


def test_config_prints_the_resolved_configuration_as_yaml_and_writes_nothing(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["config", "device=mock", "train.epochs=2", "study=s", "precision=[fp32,bf16]", "-n", "7"]
    )

    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    document = yaml.safe_load(out)
    assert document["space"] == "cnn_small" and document["name"] == "cnn_small"
    assert document["device"] == "mock" and document["study"] == "s"
    assert document["train"]["epochs"] == 2
    assert document["precision"] == ["fp32", "bf16"]
    assert document["storage"] == "sqlite:///storage/autotune.db"
    assert document["verify"]["rounds"] == 8  # a default, resolved
    assert "# --trials 7" in out
    assert _files(workdir) == []  # no storage/ directory, no database


def test_config_masks_the_password_and_connects_to_nothing(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["config", f"storage={UNREACHABLE}"])

    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    assert yaml.safe_load(out)["storage"] == UNREACHABLE_SHOWN
    assert SECRET not in out


#: The bad input of `run` that `config` refuses with the same line (the device, the workload,
#: its data and the database are checked when a run starts).
CONFIG_BAD_INPUT = [
    pytest.param(["config", *p.values[0][1:]], p.values[1], id=p.id)
    for p in BAD_INPUT
    if p.id
    in {
        "trials-0",
        "no-equals",
        "device",
        "sampler",
        "unknown-key",
        "wrong-type",
        "empty-choices",
        "min-peak-ratio-above-1",
        "min-peak-ratio-bool",
        "hardware-unknown-key",
        "space-name",
        "space-file",
        "storage",
        "unknown-option",
        "trials-not-int",
        "negative-seed",
    }
]


def test_config_bad_input_names_cases_of_run_that_exist() -> None:
    assert len(CONFIG_BAD_INPUT) == 16  # a renamed case of BAD_INPUT would drop out silently


@pytest.mark.parametrize(("argv", "fragment"), CONFIG_BAD_INPUT)
def test_config_refuses_bad_input_as_run_does(
    workdir: Path, capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str
) -> None:
    code = main(argv)

    _assert_one_line_error(code, capsys, fragment)
    assert _files(workdir) == []


# --- study=NAME and storage=URL in every command that reads a study


def test_the_read_commands_take_study_and_storage(
    demo_study: DemoStudy, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    study, storage = f"study={demo_study.name}", f"storage={demo_study.url}"
    csv, page = tmp_path / "trials.csv", tmp_path / "page.html"

    assert main(["best", study, storage]) == 0
    assert main(["report", storage, study, "--out", str(page)]) == 0  # in any order
    assert main(["trials", study, storage, "--csv", str(csv)]) == 0
    assert main(["ls", storage]) == 0

    out, err = capsys.readouterr()
    assert err == ""
    assert f"Pareto-optimal configurations of study {demo_study.name}" in out
    assert page.is_file() and f"wrote {csv}: {demo_study.n_trials} trials" in out
    assert len(csv.read_text().splitlines()) == demo_study.n_trials + 1
    assert f"Studies in {demo_study.url}" in out


@pytest.mark.parametrize("command", ["verify", "report", "best", "trials"])
def test_a_read_command_without_a_study_says_so(
    workdir: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    extra = ["--csv", "t.csv"] if command == "trials" else []

    code = main([command, "storage=sqlite:///elsewhere.db", *extra])

    _assert_one_line_error(code, capsys, f"{command}: which study? write study=NAME")
    assert _files(workdir) == []


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        pytest.param(["best", "study=a", "s"], "argument 's': expected study=NAME or", id="bare"),
        pytest.param(["ls", "study=a"], "argument 'study=a': expected storage=URL", id="ls-study"),
        pytest.param(["best", "study="], "argument 'study=': expected study=NAME", id="empty"),
        pytest.param(["verify", "study="], "study: String should have at least 1", id="v-empty"),
        pytest.param(["best", "a", "study=b"], "argument 'a': expected study=NAME", id="bare2"),
    ],
)
def test_study_and_storage_arguments_that_do_not_parse(
    workdir: Path, capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str
) -> None:
    code = main(argv)

    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.splitlines()[-1].startswith("autotune: error: ") and fragment in err
    assert _files(workdir) == []


# --- The spellings of the unreleased store are gone: a bare STUDY, `autotune export`


@pytest.mark.parametrize(
    "argv",
    [
        ["best", "s"],
        ["report", "s"],
        ["trials", "s", "--csv", "t.csv"],
        ["verify", "s"],
    ],
)
def test_a_bare_study_is_refused_in_one_line(
    argv: list[str], workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(argv)

    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith("autotune: error: ")
    assert "'s'" in err
    assert _files(workdir) == []


def test_the_export_command_is_gone(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "study=s", "--csv", "t.csv"]) == 2
    assert "No such command 'export'" in capsys.readouterr().err


# --- Where it looked: the storage as resolved, a relative SQLite file as an absolute path


@pytest.mark.parametrize(
    "argv",
    [
        ["ls"],
        ["best", "study=s"],
        ["report", "study=s"],
        ["trials", "study=s", "--csv", "t.csv"],
        ["verify", "study=s"],
        ["dashboard", "--port", "0"],
    ],
    ids=lambda argv: argv[0],
)
def test_a_missing_database_names_the_url_and_the_file_it_looked_for(
    workdir: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code = main(argv)

    _assert_one_line_error(
        code,
        capsys,
        "storage=sqlite:///storage/autotune.db: no database file at "
        f"{workdir / 'storage' / 'autotune.db'} (run a study there first",
    )
    assert _files(workdir) == []


def test_a_study_missing_from_a_relative_database_names_its_file(
    demo_study: DemoStudy,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A database made in one directory, read from another: the default (relative) storage is
    the other directory's, and the message says which file that is."""
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    (project / "storage").mkdir(parents=True)
    (elsewhere / "storage").mkdir(parents=True)
    shutil.copy(demo_study.url.removeprefix("sqlite:///"), project / "storage" / "autotune.db")
    optuna.create_study(
        study_name="other", storage="sqlite:///" + str(elsewhere / "storage" / "autotune.db")
    )
    monkeypatch.chdir(elsewhere)

    code = main(["best", f"study={demo_study.name}"])

    _assert_one_line_error(
        code,
        capsys,
        f"study={demo_study.name}: no such study in sqlite:///storage/autotune.db "
        f"({elsewhere / 'storage' / 'autotune.db'}); studies there: other",
    )
    monkeypatch.chdir(project)
    assert main(["best", f"study={demo_study.name}"]) == 0


def test_ls_of_an_empty_database_says_where_it_looked(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (workdir / "storage").mkdir()
    optuna.storages.RDBStorage("sqlite:///storage/autotune.db")  # Optuna's tables, no study

    code = main(["ls"])

    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    assert (
        out
        == f"no studies in sqlite:///storage/autotune.db ({workdir / 'storage' / 'autotune.db'})\n"
    )


@pytest.mark.slow
def test_mock_run_prints_the_pareto_table_and_says_simulated(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["run", "device=mock", "data=digits", "--trials", "8"])

    out = capsys.readouterr().out
    assert code == 0
    assert "SIMULATED" in out
    assert "Pareto-optimal trials of study cnn_small" in out
    assert "samples/s" in out and "peak MiB" in out
    assert "8 finished trials (8 run now" in out
    assert (workdir / "storage" / "autotune.db").is_file()
    study = optuna.load_study(study_name="cnn_small", storage="sqlite:///storage/autotune.db")
    assert len(study.trials) == 8
    assert all(t.user_attrs["simulated"] is True for t in study.trials)


def _console_script() -> str:
    found = shutil.which("autotune") or str(Path(sys.executable).with_name("autotune"))
    if not os.access(found, os.X_OK):
        pytest.skip("the autotune console script is not installed (pip install -e .)")
    return found


def test_console_script_bad_input(tmp_path: Path) -> None:
    proc = subprocess.run(
        [_console_script(), "run", "space=nosuch"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "COLUMNS": "80"},
    )

    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [
        f"autotune: error: space=nosuch: unknown space name (shipped: "
        f"{', '.join(available_spaces())}); or pass a path to a .yaml file"
    ]
    assert _files(tmp_path) == []


#: A password no output may show, and the storage URL that holds it: PostgreSQL on a port
#: where nothing listens (127.0.0.1:1 refuses the connection at once).
SECRET = "S3cret"
UNREACHABLE = f"postgresql+psycopg://alice:{SECRET}@127.0.0.1:1/x"
UNREACHABLE_SHOWN = "postgresql+psycopg://alice:***@127.0.0.1:1/x"


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        pytest.param(
            ["run", f"storage={UNREACHABLE}", "device=mock", "--trials", "1"],
            f"storage={UNREACHABLE_SHOWN}: cannot reach the database: ",
            id="run-unreachable",
        ),
        pytest.param(
            ["ls", f"storage={UNREACHABLE}"],
            f"storage={UNREACHABLE_SHOWN}: cannot open the database: ",
            id="ls-unreachable",
        ),
        pytest.param(
            ["verify", "study=s", f"storage={UNREACHABLE}"],
            f"storage={UNREACHABLE_SHOWN}: cannot open the database: ",
            id="verify-unreachable",
        ),
        pytest.param(
            ["run", f"storage=postgresql://alice:{SECRET}@db:notaport/x", "device=mock"],
            "storage=postgresql://***@db:notaport/x: not a SQLAlchemy database URL",
            id="bad-port",
        ),
        pytest.param(
            ["run", f"stroage={UNREACHABLE}", "device=mock"],
            "override stroage=postgresql+psycopg://***@127.0.0.1:1/x: stroage: unknown key",
            id="misspelt-key",
        ),
        pytest.param(
            ["run", UNREACHABLE, "device=mock"],
            f"override '{UNREACHABLE_SHOWN}': expected key=value",
            id="run-url-without-key",
        ),
        pytest.param(
            ["best", "study=s", UNREACHABLE],
            f"argument '{UNREACHABLE_SHOWN}': expected study=NAME or storage=URL",
            id="best-url-without-key",
        ),
    ],
)
def test_a_password_in_the_storage_url_is_never_printed(
    workdir: Path, capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str
) -> None:
    code = main(argv)

    out, err = capsys.readouterr()
    assert SECRET not in out + err
    assert code == 2 and out == "" and len(err.splitlines()) == 1, err
    assert err.startswith("autotune: error: ") and fragment in err
    assert _files(workdir) == []


def test_the_command_line_masks_the_password_of_an_unreachable_database(tmp_path: Path) -> None:
    """The command as a user runs it, in its own process (this checkout's autotune first on
    the path): nothing on stdout or stderr shows the password."""
    path = [str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "autotune.cli", "run", "space=cnn_small"),
            *(f"storage={UNREACHABLE}", "device=mock", "--trials", "1"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, path))},
    )

    assert proc.returncode == 2
    assert SECRET not in proc.stdout + proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.startswith(f"autotune: error: storage={UNREACHABLE_SHOWN}: cannot reach")
    assert _files(tmp_path) == []


POSTGRES_URL = os.environ.get(
    "AUTOTUNE_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


@pytest.fixture
def postgres_with_password() -> Iterator[tuple[str, str]]:
    """A fresh PostgreSQL database (dropped afterwards; so no other checkout's schema is in
    it) and its URL with a password: the server's own where the test URL has one, otherwise
    one that the server's trust authentication ignores. Yields ``(url, password)``."""
    import sqlalchemy as sa
    from sqlalchemy.engine import make_url

    base = make_url(POSTGRES_URL)
    try:
        admin = sa.create_engine(base, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
    except Exception as e:  # any driver or connection failure means: no server here
        pytest.skip(f"no PostgreSQL server answers at {POSTGRES_URL}: {type(e).__name__}")
    name = f"autotune_secret_{os.getpid()}"
    password = base.password or SECRET
    with admin.connect() as conn:
        conn.execute(sa.text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        conn.execute(sa.text(f"CREATE DATABASE {name}"))
    try:
        url = base.set(password=password, database=name)
        yield url.render_as_string(hide_password=False), password
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        admin.dispose()


@pytest.mark.postgres
def test_no_output_of_a_study_on_postgresql_shows_the_password(
    workdir: Path, capsys: pytest.CaptureFixture[str], postgres_with_password: tuple[str, str]
) -> None:
    """run (header, the verify command), report (the page and its line), best (the refusal, the
    exported YAML), ls and the dashboard, on a PostgreSQL URL that holds a password."""
    from sqlalchemy.engine import make_url

    from autotune.study.report import DashboardApp
    from autotune.study.storage import StudyNotFoundError

    url, secret = postgres_with_password
    shown = make_url(url).render_as_string(hide_password=True)
    storage = f"storage={url}"
    run = ["run", "device=mock", "data=digits", "study=s", storage, "verify.rounds=0", "-n", "3"]
    assert main(run) == 0
    assert main(["report", "study=s", storage, "--out", "page.html"]) == 0
    assert main(["best", "study=s", storage, "--export", "best.yaml"]) == 2  # not verified
    assert main(["best", "study=s", storage, "--export", "t0.yaml", "--trial", "0"]) == 0
    assert main(["ls", storage]) == 0
    out, err = capsys.readouterr()
    app = DashboardApp(url, importances=False)
    try:
        with pytest.raises(StudyNotFoundError) as missing:
            app.page("nosuch")
        page = app.page("s")
    finally:
        app.close()

    report = (workdir / "page.html").read_text()
    exported = (workdir / "t0.yaml").read_text()
    assert f"storage {shown}\n" in out  # the run header
    assert f"`autotune verify study=s storage='{shown}'` verifies the finalists" in out
    assert f"`autotune verify study=s storage='{shown}'` first" in err
    assert f"Studies in {shown}" in out
    assert f"storage: {shown}\n" in exported
    assert html.escape(f"`autotune verify study=s storage='{shown}'`") in report
    assert str(missing.value) == f"study=nosuch: no such study in {shown}"
    for text in (out, err, page, report, exported):
        assert secret not in text


def _sigint_as_in_a_terminal() -> None:
    """Give the child SIGINT's default action, as a command started in a terminal has.

    A test run started in the background of a non-interactive shell (``cmd &`` in a CI script)
    inherits SIGINT ignored, and so would this child: Python then installs no KeyboardInterrupt
    handler, and the SIGINT below would do nothing while the mock trial hangs forever.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_exits_130_with_a_resume_hint_and_the_rerun_completes(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 'studies.db'}"
    command = [
        sys.executable,
        "-m",
        "autotune.cli",
        "run",
        "--trials",
        "12",
        "device=mock",
        "data=digits",
        f"storage={storage}",
        "study=interrupted",
        "verify.rounds=0",  # the search alone; verification has its own tests
    ]
    # stderr goes to a file, not a pipe: the forkserver and the resource tracker inherit it
    # and may hold a pipe open after `autotune run` exits. With -X faulthandler, SIGABRT makes
    # a run that does not exit write every thread's stack there before it dies.
    stderr_path = tmp_path / "first.stderr"
    with stderr_path.open("w") as stderr:
        # Trial 3 hangs on purpose, so the interrupt is sure to land while a trial runs.
        first = subprocess.Popen(
            [
                sys.executable,
                "-X",
                "faulthandler",
                *command[1:],
                "advanced.mock.fault=hang",
                "advanced.mock.fault_trials=[3]",
            ],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            preexec_fn=_sigint_as_in_a_terminal,
        )
    deadline = time.monotonic() + 240
    running: list[optuna.trial.FrozenTrial] = []
    while not running and time.monotonic() < deadline and first.poll() is None:
        time.sleep(0.5)
        try:
            study = optuna.load_study(study_name="interrupted", storage=storage)
        except KeyError:
            continue
        running = [
            t for t in study.get_trials(states=(optuna.trial.TrialState.RUNNING,)) if t.number == 3
        ]
    if not running:
        first.kill()
        pytest.fail(f"trial 3 never started (exit code {first.poll()})")
    assert [t.number for t in running] == [3]
    first.send_signal(signal.SIGINT)
    try:
        first.wait(timeout=60)
    except subprocess.TimeoutExpired:
        first.send_signal(signal.SIGABRT)
        try:
            first.wait(timeout=30)
        except subprocess.TimeoutExpired:
            first.kill()
            first.wait(timeout=30)
        pytest.fail(
            "`autotune run` did not exit within 60 s of SIGINT; its stderr and threads:\n"
            + stderr_path.read_text(errors="replace")[-8000:]
        )

    err = stderr_path.read_text()
    assert first.returncode == 130, err
    assert (
        "autotune: interrupted; finished trials are saved. Run the same command to resume."
        in err.splitlines()
    ), err
    study = optuna.load_study(study_name="interrupted", storage=storage)
    assert study.trials[3].state == optuna.trial.TrialState.FAIL
    kept = {t.number: t.values for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE}
    second = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr
    study = optuna.load_study(study_name="interrupted", storage=storage)
    finished = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    assert len(study.get_trials(states=finished)) == 12
    assert all(study.trials[n].values == values for n, values in kept.items())


def test_a_failed_baseline_ends_the_run_with_exit_1_and_says_what_to_do(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import functools

    import autotune.study.api
    from autotune.core.exceptions import TrialError

    def broken(config: object) -> object:
        raise TrialError("error", "Traceback ...\nNameError: name 'ImageSampler' is not defined")

    real = autotune.study.api.run_study
    monkeypatch.setattr(
        autotune.study.api, "run_study", functools.partial(real, run_trial_fn=broken)
    )

    code = main(["run", "device=mock", "--trials", "4"])

    out, err = capsys.readouterr()
    assert code == 1
    # Not "verify.rounds=0": the verification was on, and the failed baseline stopped it.
    assert "not verified: the baseline trial failed, and every figure compares with it" in out
    assert "verify.rounds=0" not in out
    assert err.splitlines()[-1] == (
        "autotune: the baseline trial failed (trial 0: error (NameError: name 'ImageSampler' "
        "is not defined)): fix it and run the same command again (the rerun retries the "
        "baseline; the failed trial stays, and counts towards --trials), or choose a new "
        "study=NAME"
    )


def test_the_verify_help_states_the_defaults_the_settings_declare() -> None:
    """`autotune verify --help` names the verification's defaults in words (the CLI imports no
    settings when it starts); this holds the words to the declarations, so a changed default
    cannot leave the help behind."""
    import inspect

    from autotune.cli import verify
    from autotune.core.config import VerifySettings

    help_text = inspect.signature(verify).parameters["args"].default.help
    defaults = VerifySettings()
    for key, value in (
        ("verify.rounds=R (confirmation rounds, default", defaults.rounds),
        ("verify.accuracy_tolerance_pt=X (default", defaults.accuracy_tolerance_pt),
        ("advanced.verify.race_rounds=A (default", defaults.race_rounds),
        ("(finalists per answer, default", defaults.candidates),
        ("advanced.verify.screen_z=Z (default", defaults.screen_z),
    ):
        assert f"{key} {value:g}" in help_text, key
