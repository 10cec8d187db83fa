"""prepare_run (autotune/study/api/_prepare.py): everything validated before anything is written;
a workload study recording the metric prepare_run took from it; the precision screen a
study stores and keeps."""

from __future__ import annotations

import os
from pathlib import Path

import optuna
import pytest

from autotune.core.config import TrialConfig
from autotune.core.exceptions import ConfigError, DataError, StorageError, WorkloadError
from autotune.core.hardware import DeviceCapabilities
from autotune.study.api import prepare_run, run_study
from autotune.study.objectives import OBJECTIVES, study_objectives
from autotune.study.storage import ResultsStore
from autotune.testing import FakeRunTrial, make_capabilities, make_measurement
from autotune.trial.measure import Measurement
from tests.studies.runs import load_study, mock_run_config
from tests.trial.workloads.sources import REGRESSION_SPACE, write_regression

# --------------------------------------------------------------------------------------------
# prepare_run


def test_prepare_mock_run_removes_nothing(sqlite_url: str) -> None:
    prepared = prepare_run(mock_run_config(sqlite_url))

    assert prepared.capabilities.simulated is True
    assert prepared.removed_choices == []
    assert prepared.space == prepared.config.space


def test_prepare_cpu_run_removes_what_a_cpu_cannot_run(sqlite_url: str) -> None:
    prepared = prepare_run(mock_run_config(sqlite_url, "device=cpu"))

    assert prepared.capabilities.kind == "cpu"
    assert "tf32" not in prepared.space.precision.values()
    assert "reduce-overhead" not in prepared.space.compile_mode.values()
    removed = [line.split(":")[0] for line in prepared.removed_choices]
    assert "precision=tf32" in removed
    assert "compile_mode=reduce-overhead" in removed


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["data=mnist", "data.root=/no/such/dir"], DataError),
        (["storage=not a url"], StorageError),
        (["device=cpu", "precision=tf32"], ConfigError),
    ],
)
def test_prepare_refuses_before_writing(
    tmp_path: Path, sqlite_url: str, args: list[str], error: type[Exception]
) -> None:
    with pytest.raises(error):
        prepare_run(mock_run_config(sqlite_url, *args))

    assert list(tmp_path.iterdir()) == []


def test_prepare_checks_the_workload_and_takes_its_metric(tmp_path: Path, sqlite_url: str) -> None:
    space = write_regression(tmp_path)

    prepared = prepare_run(mock_run_config(sqlite_url, f"space={space}", "device=cpu"))

    assert prepared.objectives == study_objectives("val_mse", "minimize")
    assert prepared.space.model.knobs == prepared.config.space.model.knobs  # nothing too big
    assert (
        prepare_run(mock_run_config(sqlite_url)).objectives == OBJECTIVES
    )  # the built-in: accuracy


@pytest.mark.parametrize(
    ("space", "args", "error", "message"),
    [
        (
            REGRESSION_SPACE.replace("  hidden: [4, 8]", "  hidden: [4, 8]\n  depth: [1]"),
            ["device=cpu"],
            WorkloadError,
            "model.depth: build_model() of regression.py:Regression has no such argument",
        ),
        (
            REGRESSION_SPACE,
            ["device=mock"],
            ConfigError,
            "device=mock: the mock device simulates the built-in workloads (cnn, mlp) only",
        ),
        (
            REGRESSION_SPACE + "constraints: {min_accuracy: 0.9}\n",
            ["device=cpu"],
            ConfigError,
            "constraints.min_accuracy: the workload's metric is val_mse, not accuracy",
        ),
    ],
    ids=["unknown-knob", "mock-device", "min-accuracy"],
)
def test_prepare_refuses_a_workload_before_writing(
    tmp_path: Path,
    space: str,
    args: list[str],
    error: type[Exception],
    message: str,
) -> None:
    path = write_regression(tmp_path, space)
    before = sorted(tmp_path.iterdir())
    url = f"sqlite:///{tmp_path / 'studies' / 'autotune.db'}"

    with pytest.raises(error) as err:
        prepare_run(mock_run_config(url, f"space={path}", *args))

    assert message in str(err.value)
    assert "\n" not in str(err.value)
    assert sorted(tmp_path.iterdir()) == before  # no database, no directory


def test_a_workload_study_records_its_metric(tmp_path: Path, sqlite_url: str) -> None:
    space = write_regression(tmp_path)
    config = mock_run_config(sqlite_url, f"space={space}", "device=cpu")
    prepared = prepare_run(config)
    # 0.7: the baseline's discarded warm-up run; then the three measured trials.
    fake = FakeRunTrial(
        [make_measurement(val_metric=v, simulated=False) for v in (0.7, 0.5, 0.2, 0.9)]
    )

    result = run_study(config, 3, run_trial_fn=fake, prepared=prepared)

    study = load_study(config)
    assert result.finished == 3
    assert study.metric_names == ["throughput_sps", "val_mse", "peak_memory_bytes"]
    assert study.directions[1] == optuna.study.StudyDirection.MINIMIZE
    for trial_config in fake.configs:
        assert trial_config.workload == config.space.workload_spec()
        assert set(trial_config.model) == {"hidden", "activation", "scale"}
    with ResultsStore.open(sqlite_url) as store:
        record = store.study(config.study)
        rows = store.trials(config.study)
    assert record is not None
    assert (record.metric_name, record.metric_direction) == ("val_mse", "minimize")
    assert sorted(r.val_metric for r in rows if r.val_metric is not None) == [0.2, 0.5, 0.9]
    assert {r.workload for r in rows} == {"regression.py:Regression"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["objective=time_to_accuracy"],
            "objective=time_to_accuracy needs train.target_accuracy",
        ),
        (["train.target_accuracy=0.98"], "train.target_accuracy: only read with objective="),
        (["train.eval_every_steps=10"], "train.eval_every_steps: only read with objective="),
        (
            [
                "objective=time_to_accuracy",
                "train.target_accuracy=0.98",
                "constraints.min_accuracy=0.9",
            ],
            "constraints.min_accuracy: not used with objective=time_to_accuracy",
        ),
    ],
)
def test_prepare_refuses_time_to_accuracy_settings_that_disagree(
    tmp_path: Path, sqlite_url: str, args: list[str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        prepare_run(mock_run_config(sqlite_url, *args))

    assert list(tmp_path.iterdir()) == []


def test_prepare_time_to_accuracy_has_two_objectives_and_keeps_the_metric(
    sqlite_url: str,
) -> None:
    prepared = prepare_run(
        mock_run_config(sqlite_url, "objective=time_to_accuracy", "train.target_accuracy=0.98")
    )

    assert [o.name for o in prepared.objectives] == ["time_to_accuracy_s", "peak_memory_bytes"]
    assert [o.direction for o in prepared.objectives] == ["minimize", "minimize"]
    assert prepared.metric.name == "accuracy"
    assert prepared.space.train.target == 0.98


# --------------------------------------------------------------------------------------------
# The precision screen (advanced.hardware.min_peak_ratio), stored with the study

_SLOW_FP16 = {"fp32": 19.5e12, "tf32": 156e12, "fp16": 0.195e12, "bf16": 312e12}
_FAST_FP16 = {**_SLOW_FP16, "fp16": 312e12}
_FP16_LINE = (
    "precision=fp16: dense peak 195 GFLOP/s is 1/100 of fp32's 19.5 TFLOP/s "
    "(below advanced.hardware.min_peak_ratio=0.1)"
)


def _mock_caps(peaks: dict[str, float]) -> DeviceCapabilities:
    """The default mock profile with other peaks (one device, FLOP/s)."""
    return make_capabilities("mock", peak_flops_per_s=peaks)


def test_a_new_study_screens_out_a_slow_precision_and_stores_the_screen(sqlite_url: str) -> None:
    config = mock_run_config(sqlite_url)

    prepared = prepare_run(config, capabilities=_mock_caps(_SLOW_FP16))
    result = run_study(config, 2, run_trial_fn=FakeRunTrial(), prepared=prepared)

    assert _FP16_LINE in prepared.removed_choices
    assert "fp16" not in prepared.space.precision.values()
    assert result.removed_choices == prepared.removed_choices
    record = load_study(config).user_attrs["autotune"]
    assert record["precision_screen"] == {
        "min_peak_ratio": 0.1,
        "reference": "fp32",
        "peak_flops_per_s": _SLOW_FP16,
        "peak_name": "dense peak",
        "peak_source": prepared.capabilities.peak_flops_source,
        "considered": ["fp32", "tf32", "fp16", "bf16"],
        "screened": ["fp16"],
        "kept_below": [],
    }
    assert "fp16" not in record["space"]["precision"]


def test_min_peak_ratio_0_keeps_the_slow_precision(sqlite_url: str) -> None:
    config = mock_run_config(sqlite_url, "advanced.hardware.min_peak_ratio=0")

    prepared = prepare_run(config, capabilities=_mock_caps(_SLOW_FP16))

    assert "fp16" in prepared.space.precision.values()
    assert not any(line.startswith("precision=") for line in prepared.removed_choices)


@pytest.mark.parametrize(
    ("made_with", "resumed_with", "fp16_in_space"),
    [(_SLOW_FP16, _FAST_FP16, False), (_FAST_FP16, _SLOW_FP16, True)],
    ids=["stays-screened", "stays-kept"],
)
def test_a_resumed_study_keeps_its_stored_screen(
    sqlite_url: str,
    made_with: dict[str, float],
    resumed_with: dict[str, float],
    fp16_in_space: bool,
) -> None:
    config = mock_run_config(sqlite_url)
    first = prepare_run(config, capabilities=_mock_caps(made_with))
    run_study(config, 2, run_trial_fn=FakeRunTrial(), prepared=first)

    again = prepare_run(config, capabilities=_mock_caps(resumed_with))
    result = run_study(config, 4, run_trial_fn=FakeRunTrial(), prepared=again)

    assert result.finished == 4  # the study accepted the space: the same as stored
    assert again.space == first.space
    assert ("fp16" in again.space.precision.values()) is fp16_in_space
    assert again.screen is not None and again.screen.stored
    assert again.screen.peak_flops_per_s == made_with  # not what the device says now
    if not fp16_in_space:
        assert _FP16_LINE.replace("=0.1)", "=0.1; stored with the study)") in (
            again.removed_choices
        )


def test_resuming_with_a_ratio_that_would_change_the_screen_is_refused(sqlite_url: str) -> None:
    config = mock_run_config(sqlite_url)
    prepared = prepare_run(config, capabilities=_mock_caps(_SLOW_FP16))
    run_study(config, 1, run_trial_fn=FakeRunTrial(), prepared=prepared)

    with pytest.raises(
        ConfigError, match=r"^advanced.hardware.min_peak_ratio=0: study=cnn_small was made"
    ):
        prepare_run(
            mock_run_config(sqlite_url, "advanced.hardware.min_peak_ratio=0"),
            capabilities=_mock_caps(_SLOW_FP16),
        )


def test_a_study_made_before_the_screen_keeps_its_whole_space(sqlite_url: str) -> None:
    config = mock_run_config(sqlite_url)
    prepared = prepare_run(config, capabilities=_mock_caps(_FAST_FP16))
    run_study(config, 1, run_trial_fn=FakeRunTrial(), prepared=prepared)
    study = load_study(config)
    old_record = dict(study.user_attrs["autotune"])
    del old_record["precision_screen"]
    study.set_user_attr("autotune", old_record)

    again = prepare_run(config, capabilities=_mock_caps(_SLOW_FP16))
    result = run_study(config, 2, run_trial_fn=FakeRunTrial(), prepared=again)

    assert again.screen is None
    assert "fp16" in again.space.precision.values()
    assert result.finished == 2


def test_a_space_of_the_slow_precision_alone_keeps_it_and_says_so(sqlite_url: str) -> None:
    prepared = prepare_run(
        mock_run_config(sqlite_url, "precision=fp16"), capabilities=_mock_caps(_SLOW_FP16)
    )

    assert prepared.space.precision.values() == ["fp16"]
    assert prepared.screen is not None
    assert [line.split(":")[0] for line in prepared.screen.notes()] == ["kept precision=fp16"]


# --------------------------------------------------------------------------------------------
# workers on cuda: each owns its GPUs (autotune.core.hardware.worker_share)


def _a100x4(monkeypatch: pytest.MonkeyPatch) -> DeviceCapabilities:
    from autotune.core.hardware import detect_fingerprint
    from autotune.core.hardware._capabilities import capabilities_from_fingerprint
    from autotune.testing.machines import simulated_machine

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return capabilities_from_fingerprint(
        detect_fingerprint("cuda", nvml=simulated_machine("a100x4"))
    )


def test_a_cuda_worker_runs_its_trials_on_its_own_gpus(
    monkeypatch: pytest.MonkeyPatch, sqlite_url: str
) -> None:
    caps = _a100x4(monkeypatch)
    assert caps.fingerprint is not None
    uuids = [g.uuid for g in caps.fingerprint.gpus]
    config = mock_run_config(sqlite_url, "device=cuda", "workers=2", "gpu_count=[1,2,4]")

    prepared = prepare_run(config, capabilities=caps, worker_index=1)

    assert prepared.capabilities.count == 2
    assert prepared.capabilities.cuda_visible_devices == ",".join(uuids[2:])
    assert prepared.space.gpu_count.values() == [1, 2]
    assert "gpu_count=4 exceeds the 2 GPUs of NVIDIA A100-SXM4-80GB" in prepared.removed_choices[0]

    seen: list[tuple[str | None, int]] = []

    def run_trial(trial_config: TrialConfig) -> Measurement:
        seen.append((os.environ.get("CUDA_VISIBLE_DEVICES"), trial_config.gpu_count))
        return make_measurement()

    # Worker 1 (worker 0 would start the other worker's process): its trials see its GPUs.
    run_study(config, 3, run_trial_fn=run_trial, prepared=prepared, worker_index=1)

    assert [devices for devices, _ in seen] == [",".join(uuids[2:])] * 3
    assert all(gpus <= 2 for _, gpus in seen)
    assert "CUDA_VISIBLE_DEVICES" not in os.environ  # restored after the run


def test_more_cuda_workers_than_gpus_is_refused_before_writing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, sqlite_url: str
) -> None:
    caps = _a100x4(monkeypatch)
    config = mock_run_config(sqlite_url, "device=cuda", "workers=5")

    with pytest.raises(ConfigError, match="workers=5: device=cuda sees 4 GPUs"):
        prepare_run(config, capabilities=caps)

    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------------------------
# The doors to the user's own code


def _loop_space(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text("def train(trial):\n    pass\n", encoding="utf-8")
    space = tmp_path / "space.yaml"
    space.write_text(
        "name: loopy\nloop: train.py:train\nbatch_size: [32, 64]\ntrain: {epochs: 1}\n",
        encoding="utf-8",
    )
    return space


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["objective=time_to_accuracy", "train.target_accuracy=0.9"],
            "objective=time_to_accuracy: needs the workload door",
        ),
        (["device=mock"], "device=mock: the mock device simulates the built-in workloads"),
    ],
)
def test_prepare_refuses_what_a_door_cannot_run_before_writing(
    tmp_path: Path, args: list[str], message: str
) -> None:
    from autotune.core.config import load_run_config

    space = _loop_space(tmp_path)
    storage = f"sqlite:///{tmp_path / 'db' / 's.db'}"

    with pytest.raises(ConfigError, match=message):
        prepare_run(load_run_config([f"space={space}", f"storage={storage}", *args]))

    assert not (tmp_path / "db").exists()
