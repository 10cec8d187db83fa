"""The docs: the generated reference lists every option, command and column and is what the
code generates now; the README keeps its two commands and its size; and every command in the
README and under docs/ that starts a study runs, at least in its mock form.

The reference's generator is docs/gen_reference.py (an MkDocs hook, imported here by file
path); ``mkdocs build --strict`` in CI fails on a broken link or a stale generated page.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import sys
import types
import typing
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
README = REPO / "README.md"

#: The README's two commands, exactly: CI's .ci/run runs the second one verbatim.
MAIN_JOB = (
    "pip install torch==2.13.0 && pip install -e . && "
    "autotune run space=cnn_small --trials 50 device=cpu budget.full_runs=20"
)
TESTS = 'pip install torch==2.13.0 && pip install -e ".[test,hf,lightning]" && python -m pytest -q'


def _load_generator() -> ModuleType:
    name = "gen_reference"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, DOCS / "gen_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def gen() -> ModuleType:
    return _load_generator()


# --------------------------------------------------------------------------------------------
# The options reference: every key RunConfig accepts, walked here apart from the generator


def _leaf_paths(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every key path a model accepts: its fields, and the fields of the settings groups it
    holds, recursively (a knob, a mapping or a list is one key)."""
    from autotune.core.config import CategoricalParam, FloatParam, IntParam, ModelSpace

    paths: list[str] = []
    for name, info in model.model_fields.items():
        tp = info.annotation
        args = (
            typing.get_args(tp) if typing.get_origin(tp) in (typing.Union, types.UnionType) else ()
        )
        inner = [a for a in args if a is not type(None)] if args else [tp]
        group = inner[0] if len(inner) == 1 else None
        is_group = (
            isinstance(group, type)
            and issubclass(group, BaseModel)
            and not issubclass(group, (IntParam, FloatParam, CategoricalParam))
        )
        if model is ModelSpace and name == "knobs":
            paths.append(f"{prefix}<knob>")  # written one per key: model.width=16
        elif is_group:
            assert group is not None
            paths.extend(_leaf_paths(group, f"{prefix}{name}."))
        else:
            paths.append(prefix + name)
    return paths


def _run_option_paths() -> list[str]:
    """What ``autotune run`` accepts: RunConfig's keys (``space_source`` is the loader's, no
    key), with the space's keys at the top level, as ``key=value`` writes them."""
    from autotune.core.config import RunConfig, SearchSpace

    run = [p for p in _leaf_paths(RunConfig) if not p.startswith(("space.", "space_source"))]
    return ["space", *run, *_leaf_paths(SearchSpace)]


def test_the_walk_finds_the_keys_of_every_settings_group() -> None:
    paths = _run_option_paths()

    assert {"device", "study", "trial.timeout_s", "verify.rounds", "train.epochs"} <= set(paths)
    assert {"constraints.max_memory_bytes", "model.family", "model.<knob>", "metric.name"} <= set(
        paths
    )


def test_every_option_runconfig_accepts_is_in_the_generated_reference(gen: ModuleType) -> None:
    listed = set(gen.option_paths())
    page = gen.options_markdown()

    missing = [p for p in _run_option_paths() if p not in listed or f"| `{p}` |" not in page]

    assert not missing, f"not in docs/reference/options.md: {missing}"


def test_every_key_autotune_config_prints_is_in_the_reference(gen: ModuleType) -> None:
    """The keys of ``autotune config`` (the resolved document of a run) are keys of the
    reference, model knobs aside (the reference writes them model.<knob>)."""
    from autotune.core.config import load_run_config, run_config_document

    document = run_config_document(load_run_config(["device=mock"]))
    keep_whole = ("model", "baseline", "workload_args")  # mappings whose keys are the user's
    listed = set(gen.option_paths())

    def leaves(value: Any, prefix: str) -> list[str]:
        key = prefix.rstrip(".")
        a_knob = isinstance(value, dict) and set(value) <= {"choices", "low", "high", "step", "log"}
        if isinstance(value, dict) and value and not a_knob and key not in keep_whole:
            return [p for k, v in value.items() for p in leaves(v, f"{prefix}{k}.")]
        return [key]

    keys = [p for k, v in document.items() for p in leaves(v, f"{k}.")]
    knobs = {f"model.{k}" for k in document["model"] if k != "family"}
    missing = [k for k in keys if k not in listed and k not in knobs and k != "model"]

    assert not missing, f"autotune config prints keys the reference lacks: {missing}"
    assert "model.<knob>" in listed and "model.family" in listed


def test_every_option_has_a_type_and_a_description(gen: ModuleType) -> None:
    bare = [o.path for g in gen.option_groups() for o in g.options if not o.description]
    untyped = [o.path for g in gen.option_groups() for o in g.options if not o.type]

    assert not bare, f"options without a description (a comment, a docstring or MORE): {bare}"
    assert not untyped


def test_at_most_46_main_options_and_the_research_knobs_under_advanced(gen: ModuleType) -> None:
    """The main options (every key but the settings groups, the knobs a space searches and
    ``advanced.*``) stay few enough to read (46 with ``budget.full_runs``, the cost cap); the
    research knobs have one section."""
    main = gen.main_option_paths()
    page = gen.options_markdown()

    assert len(main) <= 46, main
    assert "## Advanced {#advanced}" in page
    assert page.index("## Advanced {#advanced}") > page.index("## `constraints.*`")
    for path in ("advanced.search.reuse_metric", "advanced.verify.screen_z"):
        assert f"| `{path}` |" in page
    assert not [p for p in main if p.split(".")[0] in ("search", "measure", "hardware")]
    assert "mock.profile" in main  # the tour's simulated machine stays a main option
    assert "mock.fault" not in main and "data.synthetic_samples" not in main


def test_the_extra_descriptions_name_existing_keys(gen: ModuleType) -> None:
    """docs/gen_reference.py's MORE holds words for keys the models say nothing about; an
    entry for a key that is gone is stale."""
    assert set(gen.MORE) <= set(gen.option_paths())


def test_the_reference_gives_types_defaults_and_rules(gen: ModuleType) -> None:
    rows = {o.path: o for g in gen.option_groups() for o in g.options}

    assert rows["verify.rounds"].default == "`8`"
    assert any("0 (off) or >= 3" in r for r in rows["verify.rounds"].rules)
    assert rows["seed"].rules[:2] == [">= 0", "< 2147483648"]
    assert rows["device"].type == "`auto`, `cpu`, `cuda`, `mock`"
    assert rows["study"].default == "the space's `name`"
    assert rows["advanced.trial.min_throughput_vs_baseline"].rules == [">= 0", "< 1", "finite"]


def test_the_space_page_lists_every_top_level_key_and_knob_form(gen: ModuleType) -> None:
    from autotune.core.config import SearchSpace

    page = gen.space_markdown()

    assert all(f"| `{name}` |" in page for name in SearchSpace.model_fields)
    for form in ("IntParam", "FloatParam", "ChoiceParam", "PrecisionParam"):
        assert f"### {form}" in page


# --------------------------------------------------------------------------------------------
# The CLI and the storage schema


def test_every_command_is_in_the_cli_reference(gen: ModuleType) -> None:
    from autotune.cli import app

    page = gen.cli_markdown()
    commands = [
        c.name or getattr(c.callback, "__name__", "")
        for c in app.registered_commands
        if not c.hidden
    ]

    assert commands and set(commands) == set(gen.cli_commands())
    for command in commands:
        assert f"## autotune {command} " in page
    assert "autotune export" not in page  # deprecated, hidden
    for flag in ("--trials", "--diff", "--export", "--style", "--csv", "--out", "--json"):
        assert f"`{flag}`" in page


def test_the_pages_name_no_constant_a_reader_cannot_look_up(gen: ModuleType) -> None:
    """A comment's ``DEFAULT_DOOR_METRICS`` or ``GUIDE_KNOBS`` reaches the page as its value."""
    pages = gen.options_markdown() + gen.space_markdown()

    assert re.findall(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b", pages) == []
    assert "loop: `accuracy` (maximize), hf_trainer: `eval_loss` (minimize)" in pages


def test_a_choice_options_values_are_in_the_cli_reference(gen: ModuleType) -> None:
    page = gen.cli_markdown()

    assert "| `--style` `torch`\\|`lightning`\\|`hf`\\|`loop` |" in page


def test_every_storage_column_is_in_the_reference_with_a_meaning(gen: ModuleType) -> None:
    from autotune.study.storage.models import Base

    page = gen.storage_markdown()

    assert gen.undocumented_columns() == [], "give each column a row in storage/README.md"
    for name, table in Base.metadata.tables.items():
        assert f"### `{name}`" in page
        for column in table.columns:
            assert f"| `{column.name}` |" in page


def test_the_committed_reference_pages_are_what_the_code_generates(gen: ModuleType) -> None:
    pages = gen.generated_pages()

    assert {p.name for p in pages} >= {"options.md", "space.md", "cli.md", "storage.md"}
    assert gen.stale_pages() == [], "run: python docs/gen_reference.py --write"


def test_the_python_api_page_documents_the_entry_points_and_the_doors_handles() -> None:
    import autotune

    page = (DOCS / "reference" / "python.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^::: autotune(?:\.\w+)+\.(\w+)$", page, re.MULTILINE))

    entry_points = {"prepare_run", "run_study", "verify_study"}
    assert entry_points | {"LoopTrial", "HFTrial", "LightningTrial"} <= documented
    assert documented <= set(autotune.__all__)  # each is on autotune's face too


def test_the_api_pages_docstrings_show_sphinx_roles_as_code() -> None:
    spec = importlib.util.spec_from_file_location("griffe_roles", DOCS / "griffe_roles.py")
    assert spec is not None and spec.loader is not None
    roles = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(roles)

    text = "see :func:`autotune.study.api.run_study` and :class:`~autotune.core.config.RunConfig`"
    assert roles.roles_as_code(text) == "see `autotune.study.api.run_study` and `RunConfig`"


# --------------------------------------------------------------------------------------------
# The README


def test_the_readme_holds_the_two_commands_and_ci_runs_the_second() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()

    assert MAIN_JOB in lines and TESTS in lines
    assert TESTS in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()


def test_the_readme_stays_a_front_door() -> None:
    text = README.read_text(encoding="utf-8")

    assert len(text.split()) < 2500
    assert len(text.splitlines()) <= 250


# --------------------------------------------------------------------------------------------
# Every command that starts a study, as the docs print it


def _bash_blocks(path: Path) -> list[str]:
    """The bodies of a Markdown file's ```bash blocks (fences matched line by line)."""
    blocks: list[str] = []
    body: list[str] | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        fence = re.match(r"^\s*```(\w*)", line)
        if body is None and fence:
            body = [] if fence.group(1) in ("bash", "sh", "shell") else None
            if body is None:
                body = ["<other>"]
        elif body is not None and fence:
            if body[:1] != ["<other>"]:
                blocks.append("\n".join(body))
            body = None
        elif body is not None:
            body.append(line)
    return blocks


def _doc_files() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def run_commands() -> list[tuple[str, list[str]]]:
    """(file, argv after ``autotune``) of every ``autotune run`` in a bash block of the README
    or a page under docs/, continuations joined, comments dropped."""
    found: list[tuple[str, list[str]]] = []
    for path in _doc_files():
        for block in _bash_blocks(path):
            for line in block.replace("\\\n", " ").splitlines():
                command = line.split("&&")[-1].strip()
                if command.startswith("autotune run"):
                    argv = shlex.split(command, comments=True)[1:]
                    found.append((str(path.relative_to(REPO)), argv))
    return found


#: Spaces the mock device refuses (it simulates the built-in models only), and the test that
#: runs each as a study on the CPU instead.
EXAMPLE_STUDY_TESTS = {
    "examples/resnet_mnist/space.yaml": "test_resnet_study_on_cpu",
    "examples/char_gpt/space.yaml": "test_char_gpt_study_on_cpu",
    "examples/loop_cnn/space.yaml": "test_loop_cnn_study_on_cpu",
    "examples/hf_gpt2/space.yaml": "test_hf_gpt2_study_on_cpu",
    "examples/lightning_mnist/space.yaml": "test_lightning_mnist_study_on_cpu",
    "examples/pytorch_mnist/space.yaml": "test_pytorch_mnist_study_on_cpu",
    # The long run (nine minutes of real trials): its command is checked up to its first trial.
    "examples/resnet_mnist/long.yaml": "test_the_readme_command_runs_as_pasted_from_the_repository_root",
}
#: Commands run as pasted by a test of their own here.
OWN_TESTS = {
    "space=space.yaml": "test_the_readme_workload_runs_as_pasted",
    "study=tour": "test_the_mock_tour_runs_as_pasted",
}


def _skip_reason(argv: list[str]) -> str | None:
    for arg in argv:
        if arg.startswith("space=") and arg[len("space=") :] in EXAMPLE_STUDY_TESTS:
            return f"a user's door, which the mock refuses: tests/test_examples.py::{EXAMPLE_STUDY_TESTS[arg[6:]]}"
        if arg in OWN_TESTS:
            return f"run as pasted by {OWN_TESTS[arg]}"
    return None


def mock_form(argv: list[str], storage: str) -> list[str]:
    """A docs command in its mock form: ``device=mock``, 4 trials, a short verification, the
    test's own storage; a placeholder data directory (``/path/to/...``) left out, so the mock
    reads the shipped MNIST."""
    kept = [
        a
        for a in argv[1:]
        if not a.startswith(("device=", "storage=", "data.root=/path/to/"))
        and not re.fullmatch(r"\d+", a)
        and a not in ("--trials", "-n")
    ]
    return [
        "run",
        *kept,
        "device=mock",
        f"storage={storage}",
        "--trials",
        "4",
        "verify.rounds=3",
        "advanced.verify.race_rounds=1",
        "advanced.verify.candidates=1",
    ]


def _study_commands() -> list[Any]:
    params: list[Any] = []
    seen: set[str] = set()
    for where, argv in run_commands():
        key = shlex.join(mock_form(argv, "STORAGE"))
        reason = _skip_reason(argv)
        if key in seen:
            continue
        seen.add(key)
        marks = [pytest.mark.skip(reason=reason)] if reason else []
        params.append(pytest.param(argv, id=f"{where}: {shlex.join(argv)}", marks=marks))
    return params


def test_the_docs_have_study_commands_and_each_skip_names_its_test() -> None:
    commands = run_commands()
    examples = (REPO / "tests" / "test_examples.py").read_text(encoding="utf-8")

    assert len(commands) >= 10
    assert any(a == ["run", "space=cnn_small", "--trials", "50", "device=cpu"] for _, a in commands)
    for name in EXAMPLE_STUDY_TESTS.values():
        assert f"def {name}(" in examples
    for name in OWN_TESTS.values():
        assert name in globals()


@pytest.mark.slow
@pytest.mark.parametrize("argv", _study_commands())
def test_every_study_command_of_the_docs_runs_on_the_mock(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from autotune.cli import main

    monkeypatch.chdir(tmp_path)
    command = mock_form(argv, f"sqlite:///{tmp_path / 'studies.db'}")

    assert main(command) == 0, shlex.join(command)


def _code_block_after(text: str, marker: str, language: str) -> str:
    start = text.index(marker)
    match = re.compile(rf"```{language}\n(.*?)\n```", re.DOTALL).search(text, start)
    assert match is not None
    return match.group(1) + "\n"


@pytest.mark.slow
def test_the_readme_workload_runs_as_pasted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's my_model.py and space.yaml, written as they are, run as a CPU study (fewer
    trials and epochs, no verification); the user guide shows the same two files."""
    from autotune.cli import main

    text = README.read_text(encoding="utf-8")
    model = _code_block_after(text, "`my_model.py`:", "python")
    space = _code_block_after(text, "and `space.yaml` beside it", "yaml")
    guide = (DOCS / "guide" / "your-code.md").read_text(encoding="utf-8")
    assert model in guide and space in guide
    (tmp_path / "my_model.py").write_text(model, encoding="utf-8")
    (tmp_path / "space.yaml").write_text(space, encoding="utf-8")
    [argv] = [a for f, a in run_commands() if "space=space.yaml" in a and f == "README.md"]
    assert argv == ["run", "space=space.yaml", "--trials", "5", "device=cpu"]
    monkeypatch.chdir(tmp_path)

    code = main(
        [*argv[:3], "2", argv[4], "train.epochs=1", "verify.rounds=0", "advanced.measure.windows=2"]
    )

    out = capsys.readouterr().out
    assert code == 0
    assert "study digits_mlp" in out and "[2/2" in out
    assert yaml.safe_load(space)["workload"] == "my_model.py:DigitsMLP"


@pytest.mark.slow
def test_the_mock_tour_runs_as_pasted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's tour, its three commands exactly: a verified recommendation, its diff and
    the report file it names."""
    from autotune.cli import main

    text = README.read_text(encoding="utf-8")
    tour = _bash_blocks(README)[
        next(i for i, b in enumerate(_bash_blocks(README)) if "study=tour" in b)
    ]
    commands = [shlex.split(line, comments=True)[1:] for line in tour.splitlines()]
    assert [c[0] for c in commands] == ["run", "best", "report"]
    monkeypatch.chdir(tmp_path)

    codes = [main(c) for c in commands]

    out = capsys.readouterr().out
    assert codes == [0, 0, 0]
    # The verdict's kind as pasted (the GP's floating point may differ between CPUs, so the
    # trial and figures are not compared).
    pasted = re.search(r"SIMULATED \(mock device\): verified: [a-z ]+ answer", text)
    assert pasted is not None and pasted.group(0) in out
    assert "same model: trial" in out or "same model answer" in pasted.group(0)
    assert "the change: autotune best study=tour --diff" in out
    assert (tmp_path / "tour-report.html").is_file()


@pytest.mark.parametrize(
    "readme", sorted((REPO / "examples").glob("*/README.md")), ids=lambda p: p.parent.name
)
def test_each_example_readme_passes_every_pre_run_check_as_pasted(
    readme: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each example's ``autotune run`` passes everything run checks before its first trial
    (the space, the door's code, its data, the storage), run from the repository's root as a
    fresh clone has it; its ``autotune best`` names that study and its ``python`` the file.
    The studies themselves run in tests/test_examples.py."""
    from autotune.core.config import load_run_config
    from autotune.study.api import prepare_run

    extra = {"hf_gpt2": "transformers", "lightning_mnist": "lightning"}.get(readme.parent.name)
    if extra:
        pytest.importorskip(extra)
    lines = [line for block in _bash_blocks(readme) for line in block.splitlines()]
    commands = [shlex.split(line, comments=True) for line in lines if line.strip()]
    runs = [c for c in commands if c[:2] == ["autotune", "run"]]
    monkeypatch.chdir(REPO)

    assert runs
    for argv in runs:
        prepared = prepare_run(load_run_config([a for a in argv[2:] if "=" in a]))
        for other in commands:
            if other[:2] == ["autotune", "best"]:
                assert f"study={prepared.config.study}" in other
            elif other[0] == "python":
                assert (REPO / other[1]).is_file()
