"""Your baseline (autotune/study/baseline.py, the space's ``baseline:`` in
autotune/core/config/_space.py, its device check in autotune/study/api/_prepare.py): what the user trains
with today is the baseline trial, every figure compares with it, and a value that cannot run
is one line before anything is written."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState

from autotune.cli import main
from autotune.core.config import load_space
from autotune.core.exceptions import ConfigError
from autotune.study.api import prepare_run, run_study
from autotune.study.baseline import (
    SAME_MODEL_AFTER_TRIALS,
    SAME_MODEL_ATTR,
    baseline_params,
    enqueue_same_model,
    trial_train_settings,
)
from autotune.study.feasibility import restrict_space
from autotune.testing import make_capabilities, simulate_trial
from tests.studies.runs import mock_run_config

YOURS = [
    "baseline.depth=3",
    "baseline.width=16",
    "baseline.batch_size=48",
    "baseline.precision=fp32",
    "baseline.num_workers=1",
    "baseline.lr=1.0e-3",
]


def test_the_baseline_runs_what_the_space_names_and_defaults_the_rest() -> None:
    space = load_space("cnn_small", YOURS)

    params, notes = baseline_params(space)

    assert params == {
        "depth": 3,
        "width": 16,
        "batch_size": 48,
        "precision": "fp32",
        "memory_format": "contiguous",  # not named: PyTorch's default
        "compile_mode": "none",
        "num_workers": 1,
        "gpu_count": 1,
    }
    assert notes == []
    # Your learning rate holds at your global batch; other batches scale from it.
    train = trial_train_settings(space)
    assert train.lr == pytest.approx(1.0e-3) and train.reference_batch_size == 48
    # ... even where the space named another reference batch; the notes survive the device's
    # restriction of the space.
    other = load_space("cnn_small", ["advanced.train.reference_batch_size=256", *YOURS])
    restricted, _ = restrict_space(other, make_capabilities("mock"))
    assert trial_train_settings(restricted).reference_batch_size == 48
    assert restricted.baseline_notes() == [
        "baseline: batch_size=48 is not among the space's values; added to them"
    ]


def test_a_baseline_value_outside_the_space_is_added_to_its_knob_and_said() -> None:
    space = load_space("cnn_small", [*YOURS, "baseline.depth=5", "baseline.width=12"])

    assert 48 in space.batch_size.values() and space.batch_size.values() == sorted(
        space.batch_size.values()
    )
    assert space.model.knobs["depth"].values() == [2, 3, 4, 5]  # a range widens
    assert space.model.knobs["width"].values() == [8, 12, 16, 32, 64]
    assert space.baseline_notes() == [  # in the baseline's order
        "baseline: depth=5 is not among the space's values; added to them",
        "baseline: width=12 is not among the space's values; added to them",
        "baseline: batch_size=48 is not among the space's values; added to them",
    ]
    # A value the space has already adds nothing.
    assert load_space("cnn_small", ["baseline.batch_size=64"]).baseline_notes() == []


@pytest.mark.parametrize(
    ("override", "said"),
    [
        ("baseline.dropout=0.1", "baseline.dropout: not a knob of this space (its knobs: depth,"),
        ("baseline.precision=fp8", "baseline.precision: Input should be 'fp32', 'tf32', "),
        ("baseline.batch_size=big", "baseline.batch_size: must be an integer, but got 'big'"),
        ("baseline.lr=0", "baseline.lr: must be a number > 0, but got 0"),
    ],
)
def test_a_baseline_that_cannot_be_read_is_one_line(override: str, said: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_space("cnn_small", [override])

    (line,) = str(e.value).splitlines()
    assert said in line and line.startswith(f"override {override}: ")


def test_a_baseline_the_device_cannot_run_is_refused_before_anything_is_written(
    tmp_path: Path, sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ConfigError) as e:
        prepare_run(mock_run_config(sqlite_url, "device=cpu", "baseline.precision=tf32"))

    (line,) = str(e.value).splitlines()
    assert "baseline.precision: tf32 cannot run here (" in line
    assert list(tmp_path.iterdir()) == []
    code = main(["run", "device=cpu", f"storage={sqlite_url}", "baseline.precision=tf32"])
    assert code == 2 and list(tmp_path.iterdir()) == []
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert "baseline.precision: tf32 cannot run here" in err


def test_every_figure_compares_with_your_baseline(sqlite_url: str) -> None:
    config = mock_run_config(sqlite_url, *YOURS, "verify.rounds=3")

    result = run_study(config, 12, run_trial_fn=simulate_trial)

    study = optuna.load_study(study_name=config.study, storage=config.storage)
    first = min(study.trials, key=lambda t: t.number)
    assert first.user_attrs["baseline"] is True
    assert first.params["batch_size"] == 48 and first.params["num_workers"] == 1
    summary = result.verification
    assert summary is not None and summary.baseline_words == "your baseline"
    assert "your baseline" in summary.headline()
    assert "PyTorch's defaults" not in summary.headline()


def _study_with(space_args: list[str], models: list[dict[str, int]]) -> tuple[optuna.Study, Any]:
    """A study of ``cnn_small`` holding one finished trial per model in ``models``."""
    space, _ = restrict_space(load_space("cnn_small", space_args), make_capabilities("mock"))
    study = optuna.create_study(directions=["maximize", "maximize", "minimize"])
    base, _ = baseline_params(space)
    for model in models:
        params = {**base, **model}
        study.add_trial(
            optuna.trial.create_trial(
                params=params,
                distributions={
                    name: CategoricalDistribution(knob.values())  # type: ignore[union-attr]
                    for name, knob in space.knobs().items()
                },
                values=[1.0, 0.9, 1.0],
            )
        )
    return study, space


def test_a_share_of_the_trials_keeps_the_baseline_model() -> None:
    # Ten trials, none of the baseline's model (depth 3, width 16): one is queued with the
    # model knobs fixed, the sampler to choose the rest; not a second while it waits.
    study, space = _study_with([], [{"depth": 2, "width": 8}] * SAME_MODEL_AFTER_TRIALS)

    assert enqueue_same_model(study, space)
    waiting = study.get_trials(states=(TrialState.WAITING,))
    assert len(waiting) == 1
    assert waiting[0].user_attrs[SAME_MODEL_ATTR] is True
    assert waiting[0].system_attrs["fixed_params"] == {
        "depth": 3,
        "width": 16,
    }
    assert not enqueue_same_model(study, space)


def test_no_same_model_trial_is_queued_early_enough_or_without_model_knobs() -> None:
    few, space = _study_with([], [{"depth": 2}] * (SAME_MODEL_AFTER_TRIALS - 1))
    assert not enqueue_same_model(few, space)
    # A fifth of the trials already keep the model: nothing to add.
    mixed, space = _study_with([], [{"depth": 3}] * 3 + [{"depth": 2}] * 9)
    assert not enqueue_same_model(mixed, space)
    # One model: every trial keeps it, nothing to queue.
    fixed, space = _study_with(["model.depth=3", "model.width=16"], [{}] * 12)
    assert not enqueue_same_model(fixed, space)


def test_under_a_cap_an_exploring_trial_is_queued_eager_every_knob_fixed() -> None:
    from autotune.study.baseline import (
        EAGER_EXPLORATION_ATTR,
        eager_exploration_params,
        enqueue_eager_exploration,
    )

    study, space = _study_with(["compile_mode=[none,default]"], [{}])
    params = eager_exploration_params(space, seed=3)
    assert set(params) == set(space.knobs()) and params["compile_mode"] == "none"
    assert params == eager_exploration_params(space, seed=3)  # the same seed, the same draw
    assert eager_exploration_params(space, [params], seed=3) != params  # an untried one
    assert enqueue_eager_exploration(study, space)
    assert not enqueue_eager_exploration(study, space)  # one waits already
    trial = study.ask()
    assert trial.user_attrs[EAGER_EXPLORATION_ATTR]
    queued = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))[0]
    fixed = queued.system_attrs["fixed_params"]  # every knob is the queued one, none sampled
    assert set(fixed) == set(space.knobs()) and fixed["compile_mode"] == "none"
    # Once every eager configuration was tried, none is queued: the sampler chooses.
    small = [
        *("compile_mode=[none,default]", "precision=[fp32,bf16]", "memory_format=[contiguous]"),
        *("num_workers=[0]", "batch_size=[64]", "model.depth=3", "model.width=16"),
    ]
    _, space = _study_with(small, [{}])
    tried: list[dict[str, Any]] = []
    while drawn := eager_exploration_params(space, tried, seed=len(tried)):
        assert drawn not in tried and drawn["compile_mode"] == "none"
        tried.append(drawn)
    eager = [k.values() for n, k in space.knobs().items() if n != "compile_mode"]  # type: ignore[union-attr]
    assert len(tried) == math.prod(len(v) for v in eager) > 1
    # A space that does not search compile modes (or has no eager one) queues nothing.
    other, space = _study_with(["compile_mode=[default]"], [{}])
    assert eager_exploration_params(space) == {}
    assert not enqueue_eager_exploration(other, space)


def test_the_same_model_batch_configurations_come_cheapest_first_and_each_once() -> None:
    from autotune.core.config import load_space
    from autotune.study.baseline import (
        baseline_params,
        same_model_batch_params,
        untried_same_model_batch,
    )

    space = load_space(
        "cnn_small", ["compile_mode=[none,default]", "num_workers=[0,2]", "precision=[fp32,bf16]"]
    )
    base, _ = baseline_params(space)
    fixed = same_model_batch_params(space)
    assert fixed == {k: base[k] for k in ("depth", "width", "batch_size", "gpu_count")}
    tried: list[dict[str, object]] = [base]
    measured = [(base, 1000.0)]
    order, variants = [], []
    while (nxt := untried_same_model_batch(space, tried, throughputs=measured)) is not None:
        tried.append(nxt)
        if nxt["batch_size"] != base["batch_size"]:  # the leader at another batch size
            variants.append((len(order), nxt))
            continue  # stopped below the floor (not measured): no step further out
        assert {k: nxt[k] for k in fixed} == fixed  # the model and batch are the baseline's
        fast = nxt["memory_format"] == "channels_last" and nxt["num_workers"] == 0
        bf16 = 1.5 if nxt["precision"] == "bf16" else 1.0
        measured.append((nxt, bf16 * (1500.0 if fast else 900.0)))
        order.append(
            (nxt["precision"], nxt["memory_format"], nxt["compile_mode"], nxt["num_workers"])
        )
    # The leader (bf16 + channels_last, eager) at 128 and 32 as soon as it leads: after the
    # three fp32 ones and itself, before the eager ones that build on slower twins.
    leader = {**base, "precision": "bf16", "memory_format": "channels_last"}
    assert variants == [(4, {**leader, "batch_size": 128}), (4, {**leader, "batch_size": 32})]
    # Eager at the baseline's precision first (one knob changed, then two); then eager at
    # another precision (it trains once; the rest reuse it), the precision alone first; then
    # compiled, the fastest eager twin first (bf16 + channels_last here).
    assert order[:3] == [
        ("fp32", "contiguous", "none", 2),
        ("fp32", "channels_last", "none", 0),
        ("fp32", "channels_last", "none", 2),
    ]
    assert order[3] == ("bf16", "channels_last", "none", 0)  # its fp32 twin measured fastest
    assert {o[0] for o in order[3:7]} == {"bf16"} and {o[2] for o in order[:7]} == {"none"}
    assert order[7] == ("bf16", "channels_last", "default", 0)
    assert len(order) == len(set(order)) == 2 * 2 * 2 * 2 - 1  # every one but the baseline, once


def test_the_leader_is_tried_at_the_batch_sizes_next_to_the_baseline_s_once_it_leads() -> None:
    from autotune.study.baseline import leader_batch_variants, untried_same_model_batch

    space = load_space(
        "cnn_small",
        [
            "compile_mode=[none,default]",
            "num_workers=[0]",
            "precision=[fp32,bf16]",
            "gpu_count=[1]",
        ],
    )
    base, _ = baseline_params(space)
    assert base["batch_size"] == 64  # of 16, 32, 64, 128, 256

    def sps(knobs: dict[str, Any]) -> float:
        """A machine where bf16 + channels_last is fastest and larger batches run faster, up
        to 128 (256 a little slower)."""
        fast = 1.5 if knobs["memory_format"] == "channels_last" else 1.0
        numerics = 1.4 if knobs["precision"] == "bf16" else 1.0
        batch = {16: 0.5, 32: 0.8, 64: 1.0, 128: 1.3, 256: 1.2}[knobs["batch_size"]]
        return 1000.0 * fast * numerics * batch

    tried: list[dict[str, Any]] = [base]
    measured = [(base, sps(base))]
    order = []
    while (nxt := untried_same_model_batch(space, tried, throughputs=measured)) is not None:
        tried.append(nxt)
        measured.append((nxt, sps(nxt)))
        order.append(
            (nxt["batch_size"], nxt["precision"], nxt["memory_format"], nxt["compile_mode"])
        )
    # The fp32 eager configuration first (channels_last, the leader then); then bf16 +
    # channels_last (its twin is the leader: a precision before a batch variant of the same
    # throughput) and, once it leads, it one step up and one down, the larger first; each was
    # measured (none stopped below the floor), so one step further out on each side (256 ran
    # slower than 128: one trial's throughput does not end a side); then bf16 contiguous
    # (its twin is the slower baseline); then the compiled ones.
    assert order[:6] == [
        (64, "fp32", "channels_last", "none"),
        (64, "bf16", "channels_last", "none"),
        (128, "bf16", "channels_last", "none"),
        (32, "bf16", "channels_last", "none"),
        (256, "bf16", "channels_last", "none"),
        (16, "bf16", "channels_last", "none"),
    ]
    assert order[6] == (64, "bf16", "contiguous", "none")
    assert {o[3] for o in order[7:]} == {"default"} and {o[0] for o in order[7:]} == {64}
    # A batch fixed by train.global_batch_size, or a space of one batch size: no variants.
    fixed = load_space("cnn_small", ["train.global_batch_size=256"])
    assert leader_batch_variants(fixed, tried, measured) == ([], 0.0)
    one = load_space("cnn_small", ["batch_size=[64]"])
    assert leader_batch_variants(one, tried, measured)[0] == []


def test_a_precision_too_slow_at_the_baseline_model_is_not_tried_again() -> None:
    from autotune.core.config import load_space
    from autotune.study.baseline import baseline_params, untried_same_model_batch

    space = load_space("cnn_small", ["compile_mode=[none]", "precision=[fp32,fp16]"])
    base, _ = baseline_params(space)
    tried: list[dict[str, object]] = [base]
    while (nxt := untried_same_model_batch(space, tried, slow_precisions=["fp16"])) is not None:
        assert nxt["precision"] == "fp32"
        tried.append(nxt)
    assert len(tried) == len(space.knobs()["memory_format"].values()) * len(  # type: ignore[attr-defined]
        space.knobs()["num_workers"].values()  # type: ignore[attr-defined]
    )


def test_the_search_price_follows_what_the_trials_cost() -> None:
    from autotune.study.baseline import search_price
    from autotune.study.trial_result import BASELINE_ATTR

    space = restrict_space(
        load_space("cnn_small", ["compile_mode=[none,default]", "precision=[fp32,bf16]"]),
        make_capabilities("mock"),
    )[0]
    base, _ = baseline_params(space)
    dists = {
        name: CategoricalDistribution(knob.values())  # type: ignore[union-attr]
        for name, knob in space.knobs().items()
    }

    def trial(params: dict[str, object], **attrs: object) -> optuna.trial.FrozenTrial:
        return optuna.trial.create_trial(
            params={**base, **params}, distributions=dists, values=[1.0, 0.9, 1.0], user_attrs=attrs
        )

    baseline = trial({}, **{BASELINE_ATTR: True, "full_run_s": 10.0, "run_s": 20.0})
    assert search_price([], space) is None  # no full run measured yet
    price = search_price([baseline], space)
    assert price is not None
    # Before any compiled or timed trial: twice, once and half the baseline trial's 2.0.
    assert price({**base, "compile_mode": "default"}) == 4.0
    assert price({**base, "precision": "bf16"}) == 2.0
    assert price({**base, "memory_format": "channels_last"}) == 1.0
    compiled = trial({"compile_mode": "default"}, run_s=55.0, accuracy_source="inherited")
    timed = trial({"memory_format": "channels_last"}, run_s=3.0, accuracy_source="inherited")
    bf16 = trial({"precision": "bf16"}, run_s=12.0, accuracy_source="measured")
    price = search_price([baseline, compiled, timed, bf16], space)
    assert price is not None
    assert price({**base, "compile_mode": "default"}) == 5.5  # the dearest compiled
    assert price({**base, "precision": "bf16", "memory_format": "channels_last"}) == 0.3
    # Another batch size trains its own evidence: what the trained trials of the baseline's
    # model cost (the baseline trial's before any; another model's trained trial is not one).
    assert price({**base, "batch_size": 128}) == 1.2
    other_model = trial({"width": 32, "precision": "bf16"}, run_s=40.0, accuracy_source="measured")
    assert search_price([baseline, other_model], space)({**base, "batch_size": 128}) == 2.0  # type: ignore[misc]


_TINY = [
    "model.depth=[3]",
    "model.width=[16]",
    "batch_size=[64]",
    "precision=[fp32]",
    "memory_format=[contiguous,channels_last]",
    "compile_mode=[none]",
    "num_workers=[0,1]",
    "gpu_count=[1]",
]


def test_space_tried_counts_the_space_once_each_configuration_was_tried() -> None:
    from optuna.trial import create_trial

    from autotune.study.baseline import space_tried

    space = load_space("cnn_small", _TINY)
    configurations = [
        {"memory_format": m, "num_workers": w}
        for m in ("contiguous", "channels_last")
        for w in (0, 1)
    ]

    def trial(params: dict[str, Any], state: TrialState = TrialState.COMPLETE) -> Any:
        knobs = {**baseline_params(space)[0], **params}
        distributions = {k: CategoricalDistribution([v]) for k, v in knobs.items()}
        return create_trial(
            state=state,
            params=knobs,
            distributions=distributions,
            values=[1.0] if state == TrialState.COMPLETE else None,
        )

    done = [trial(c) for c in configurations[:3]]
    assert space_tried(space, done) is None  # one left
    assert space_tried(space, [*done, trial(configurations[3], TrialState.FAIL)]) is None
    assert space_tried(space, [*done, trial(configurations[3], TrialState.WAITING)]) is None
    assert space_tried(space, [*done, trial(configurations[3], TrialState.RUNNING)]) == 4
    assert space_tried(space, [*done, trial(configurations[3]), trial(configurations[0])]) == 4
    # A space that cannot be enumerated (here, past the limit) never reads as tried.
    assert space_tried(space, [*done, trial(configurations[3])], limit=3) is None


def test_a_study_stops_once_every_configuration_of_its_space_was_tried(tmp_path: Path) -> None:
    config = mock_run_config(
        f"sqlite:///{tmp_path / 's.db'}", "space=cnn_small", "data=digits", *_TINY
    )
    notes: list[str] = []

    result = run_study(config, 10, on_trial=lambda p: notes.append(p.note or ""))

    study = optuna.load_study(study_name=config.study, storage=config.storage)
    keys = [tuple(sorted(t.params.items())) for t in study.trials]
    # The space has 4 configurations: the run tries each once and stops there, not at 10.
    assert len(keys) == len(set(keys)) == 4
    assert result.finished == len(study.trials) < 10
    assert any(
        "every configuration of the space has been tried, so the search stops at "
        f"{result.finished} of 10 trials" in n
        for n in notes
    )
