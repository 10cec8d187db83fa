"""The study's objectives: their directions, and the values a measurement gives them."""

from __future__ import annotations

import optuna
import pytest

from autotune.study.objectives import (
    OBJECTIVES,
    PEAK_MEMORY,
    TIME_TO_ACCURACY,
    failed_values,
    metric_objective,
    objective_mode,
    objective_values,
    objectives_of_study,
    study_objectives,
)
from autotune.testing import make_measurement


def test_a_maximized_objective_gains_what_it_rises_and_a_minimized_one_what_it_falls() -> None:
    accuracy = OBJECTIVES[1]
    loss = study_objectives("val_loss", "minimize")[1]
    assert (accuracy.maximized, accuracy.sign) == (True, 1.0)
    assert (loss.maximized, loss.sign) == (False, -1.0)
    assert accuracy.gain(0.02) == pytest.approx(0.02)
    assert loss.gain(-0.02) == pytest.approx(0.02)  # a loss 0.02 lower is better by 0.02
    # The worse end of a difference's interval, whatever the direction.
    assert min((-0.01, 0.03), key=accuracy.gain) == -0.01
    assert min((-0.01, 0.03), key=loss.gain) == 0.03
    assert max([3.0, 1.0, 2.0], key=PEAK_MEMORY.gain) == 1.0


def test_the_modes_give_three_or_two_objectives() -> None:
    throughput = study_objectives()
    tta = study_objectives(mode="time_to_accuracy")
    assert [o.name for o in throughput] == ["throughput_sps", "accuracy", "peak_memory_bytes"]
    assert tta == (TIME_TO_ACCURACY, PEAK_MEMORY)
    assert (objective_mode(throughput), objective_mode(tta)) == ("throughput", "time_to_accuracy")
    assert metric_objective(throughput) == throughput[1] and metric_objective(tta) is None


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("accuracy", "up"), "metric_direction must be maximize or minimize"),
        (("accuracy", "maximize", "fastest"), "objective must be throughput or time_to_acc"),
    ],
)
def test_a_bad_direction_or_mode_is_refused(args: tuple[str, ...], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        study_objectives(*args)  # type: ignore[arg-type]


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
def test_a_study_gives_back_the_objectives_it_was_created_with() -> None:
    loss = study_objectives("val_loss", "minimize")
    study = optuna.create_study(directions=[o.direction for o in loss])
    study.set_metric_names([o.name for o in loss])
    assert objectives_of_study(study) == loss


def test_values_follow_the_objectives_order_and_a_failure_is_the_worst() -> None:
    measurement = make_measurement(throughput_sps=1000.0, val_metric=0.9, peak_memory_bytes=64)
    assert objective_values(measurement) == (1000.0, 0.9, 64.0)
    assert failed_values(1024, "maximize") == (0.0, 0.0, 1024.0)
    # A loss has no worst bound: the worst the study measured.
    assert failed_values(None, "minimize", worst_metric=2.5) == (0.0, 2.5, 0.0)
