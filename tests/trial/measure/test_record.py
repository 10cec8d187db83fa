"""The measurement a trial returns (autotune/trial/measure/_record.py)."""

from __future__ import annotations

from autotune.testing import make_measurement


def test_measurement_user_attrs_are_flat() -> None:
    m = make_measurement(window_throughputs_sps=(1.0, 2.0), extra={"gpu_util": 0.5})

    attrs = m.as_user_attrs()

    assert attrs["window_throughputs_sps"] == [1.0, 2.0]
    assert attrs["gpu_util"] == 0.5
    assert "extra" not in attrs
    assert attrs["throughput_sps"] == m.throughput_sps
    assert attrs["simulated"] is True


def test_a_measurement_carries_the_share_and_is_busy_above_the_threshold() -> None:
    quiet = make_measurement(simulated=False, other_cpu_share=0.05, load_avg_1m=1.0)
    busy = make_measurement(simulated=False, other_cpu_share=0.48, load_avg_1m=2.5)
    mock = make_measurement()

    assert not quiet.busy(0.10) and busy.busy(0.10) and not busy.busy(0.5)
    assert not mock.busy(0.0)  # not measured: never busy
    assert busy.as_user_attrs()["other_cpu_share"] == 0.48
    assert busy.as_user_attrs()["load_avg_1m"] == 2.5
    assert "other_cpu_share" not in mock.as_user_attrs()


def test_budget_steps_reads_a_short_evidence_runs_budget_and_nothing_else() -> None:
    assert make_measurement(extra={"budget_steps": 600}).budget_steps == 600
    assert make_measurement().budget_steps is None  # trained the budget, or timed only
    for malformed in (0, -3, True, "600", 600.0):
        assert make_measurement(extra={"budget_steps": malformed}).budget_steps is None
