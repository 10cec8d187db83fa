"""The keys that moved under ``advanced.*``: an old key works with a note naming its new one
(as the CLI's other deprecated spellings do), in a space file, an override or a group, and a
study stored before compares in the new shape."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from autotune.core.config import (
    DeprecatedKeyWarning,
    SearchSpace,
    load_run_config,
    load_space,
    load_verify_request,
    upgrade_space_record,
)
from autotune.core.config._renamed import MOVED_KEYS, new_key
from autotune.core.exceptions import ConfigError


def _notes(call: object) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert callable(call)
        call()
    return [str(w.message) for w in caught if isinstance(w.message, DeprecatedKeyWarning)]


@pytest.mark.parametrize(("old", "new"), sorted(MOVED_KEYS.items()))
def test_every_moved_key_is_under_advanced(old: str, new: str) -> None:
    assert new.startswith("advanced.") and new_key(old) == new


def test_the_twin_budgets_have_names_that_say_how_they_differ() -> None:
    assert new_key("trial.busy_remeasures") == "advanced.trial.busy_retimes"
    assert new_key("verify.busy_reruns") == "advanced.verify.busy_rerun_budget"


@pytest.mark.parametrize(
    ("old", "new", "read"),
    [
        ("verify.screen_z=2.5", "advanced.verify.screen_z", lambda c: c.verify_settings.screen_z),
        (
            "trial.busy_remeasures=3",
            "advanced.trial.busy_retimes",
            lambda c: c.advanced.trial.busy_retimes,
        ),
        (
            "verify.busy_reruns=4",
            "advanced.verify.busy_rerun_budget",
            lambda c: c.verify_settings.busy_rerun_budget,
        ),
        ("mock.fault=oom", "advanced.mock.fault", lambda c: c.advanced.mock.fault),
        (
            "data.synthetic_samples=64",
            "advanced.data.synthetic_samples",
            lambda c: c.space.data_settings().synthetic_samples,
        ),
        ("measure.windows=3", "advanced.measure.windows", lambda c: c.advanced.measure.windows),
        (
            "train.warmup_steps=2",
            "advanced.train.warmup_steps",
            lambda c: c.space.train_settings().warmup_steps,
        ),
        (
            "hardware.min_peak_ratio=0",
            "advanced.hardware.min_peak_ratio",
            lambda c: c.advanced.hardware.min_peak_ratio,
        ),
    ],
)
def test_an_old_override_works_with_a_note_naming_the_new_key(
    old: str, new: str, read: object
) -> None:
    value = old.partition("=")[2]
    configs = []
    notes = _notes(lambda: configs.append(load_run_config(["device=mock", old])))
    fresh = load_run_config(["device=mock", f"{new}={value}"])

    assert notes == [
        f"override {old}: {old.partition('=')[0]} is deprecated and goes in the next release; "
        f"write {new}"
    ]
    assert callable(read)
    assert read(configs[0]) == read(fresh)
    assert configs[0] == fresh


def test_an_old_group_override_splits_into_what_stayed_and_what_moved() -> None:
    notes = _notes(lambda: load_run_config(["trial={timeout_s: 5, heartbeat_s: 2}"]))
    config = load_run_config(["trial={timeout_s: 5, heartbeat_s: 2}"])

    assert config.trial.timeout_s == 5 and config.advanced.trial.heartbeat_s == 2
    assert len(notes) == 1 and "trial.heartbeat_s" in notes[0]


def test_an_old_key_in_a_space_file_works_with_a_note(tmp_path: Path) -> None:
    path = tmp_path / "old.yaml"
    path.write_text(
        "name: old\nmodel: {family: mlp, depth: 1, width: 8}\nbatch_size: [16]\n"
        "train: {epochs: 1, warmup_steps: 2}\nmeasure: {windows: 3}\n"
        "search: {reuse_metric: false}\n",
        encoding="utf-8",
    )
    spaces = []
    notes = _notes(lambda: spaces.append(load_space(str(path))))

    space = spaces[0]
    assert space.advanced.train.warmup_steps == 2 and space.train.epochs == 1
    assert space.advanced.measure.windows == 3
    assert space.advanced.search.reuse_metric is False
    assert sorted(n.split(": ")[1] for n in notes) == [
        "measure is deprecated and goes in the next release; write advanced.measure",
        "search is deprecated and goes in the next release; write advanced.search",
        "train.warmup_steps is deprecated and goes in the next release; write "
        "advanced.train.warmup_steps",
    ]


def test_an_old_key_beside_its_new_one_in_a_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "both.yaml"
    path.write_text(
        "name: both\nmodel: {family: mlp}\nbatch_size: [16]\nmeasure: {windows: 3}\n"
        "advanced: {measure: {windows: 4}}\n",
        encoding="utf-8",
    )

    with pytest.raises(ConfigError) as err, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecatedKeyWarning)
        load_space(str(path))

    assert str(err.value) == (
        f"{path}: measure and advanced.measure are the same setting; keep advanced.measure"
    )


def test_a_moved_key_keeps_its_rule_and_names_its_new_place() -> None:
    with pytest.raises(ConfigError) as err:
        load_run_config(["advanced.verify.screen_z=11"])

    assert str(err.value) == (
        "override advanced.verify.screen_z=11: advanced.verify.screen_z: Input should be less "
        "than or equal to 10"
    )


def test_autotune_verify_takes_the_old_and_the_new_keys() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecatedKeyWarning)
        old = load_verify_request(["study=s", "verify.candidates=1", "verify.rounds=3"])
    new = load_verify_request(["study=s", "advanced.verify.candidates=1", "verify.rounds=3"])

    assert old == new
    assert new.verify_settings.candidates == 1 and new.verify_settings.rounds == 3


def test_a_stored_space_of_the_release_before_reads_in_the_new_shape() -> None:
    old = {
        "name": "s",
        "train": {"epochs": 2, "max_time_vs_baseline": 6.0},
        "measure": {"windows": 3},
        "search": {"reuse_metric": False},
    }

    assert upgrade_space_record(old) == {
        "name": "s",
        "train": {"epochs": 2},
        "advanced": {
            "measure": {"windows": 3},
            "search": {"reuse_metric": False},
            "train": {"max_time_vs_baseline": 6.0},
        },
    }
    assert upgrade_space_record(None) == {}


# A key whose feature was removed: ignored, with a note that says why and to delete it.

_METRIC_KNOBS_NOTE = "advanced.search.metric_knobs was removed and is ignored (the validation"


def _load_with_notes(path: Path, search: str) -> tuple[SearchSpace, list[str]]:
    """A minimal space file with the ``search`` line, loaded; its notes."""
    path.write_text(
        f"name: {path.stem}\nmodel: {{family: mlp, depth: 1, width: 8}}\nbatch_size: [16]\n"
        f"{search}\n",
        encoding="utf-8",
    )
    spaces: list[SearchSpace] = []
    notes = _notes(lambda: spaces.append(load_space(str(path))))
    return spaces[0], notes


def test_a_removed_key_in_a_space_file_is_ignored_with_a_note(tmp_path: Path) -> None:
    path = tmp_path / "removed.yaml"
    space, notes = _load_with_notes(
        path, "advanced: {search: {metric_knobs: [batch_size], reuse_metric: false}}"
    )

    assert space.advanced.search.reuse_metric is False
    assert len(notes) == 1
    assert notes[0].startswith(f"{path}: {_METRIC_KNOBS_NOTE}")
    assert notes[0].endswith("; delete it")


def test_a_removed_key_under_its_old_group_is_ignored_with_both_notes(tmp_path: Path) -> None:
    space, notes = _load_with_notes(
        tmp_path / "old_removed.yaml", "search: {metric_knobs: [batch_size]}"
    )

    assert space.advanced.search == load_space("cnn_small").advanced.search
    assert [n.split(": ", 1)[1][:40] for n in notes] == [
        "search is deprecated and goes in the nex",
        _METRIC_KNOBS_NOTE[:40],
    ]


@pytest.mark.parametrize(
    "override",
    [
        "advanced.search.metric_knobs=[batch_size]",
        "search.metric_knobs=[batch_size]",
        "advanced.search={metric_knobs: [batch_size], reuse_metric: false}",
    ],
)
def test_a_removed_key_in_an_override_is_ignored_with_a_note(override: str) -> None:
    configs = []
    notes = _notes(lambda: configs.append(load_run_config(["device=mock", override])))

    assert any(n.startswith(f"override {override}: {_METRIC_KNOBS_NOTE}") for n in notes)
    expected = "reuse_metric: false" not in override
    assert configs[0].space.advanced.search.reuse_metric is expected


def test_a_stored_space_with_a_removed_key_reads_without_it() -> None:
    stored = {"name": "s", "advanced": {"search": {"metric_knobs": ["width"]}}}

    assert upgrade_space_record(stored) == {"name": "s"}


def test_the_cli_prints_a_removed_key_note_on_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from autotune.cli import _noting_moved_keys

    with _noting_moved_keys():
        load_run_config(["device=mock", "advanced.search.metric_knobs=[width]"])

    err = capsys.readouterr().err.strip()
    assert err.startswith(
        f"autotune: note: override advanced.search.metric_knobs=[width]: {_METRIC_KNOBS_NOTE}"
    )
    assert "\n" not in err
