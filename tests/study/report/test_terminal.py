"""The one Pareto table of `autotune run` and `autotune best` (`report.pareto_table`)."""

from __future__ import annotations

from autotune.core.units import MIB
from autotune.study.objectives import METRIC_INDEX, study_objectives
from autotune.study.report import ParetoRow, pareto_row, pareto_table
from autotune.study.report._text import compile_text
from tests.rendered import rendered_text
from tests.studies.mock import make_trial


def _rows() -> list[ParetoRow]:
    baseline = make_trial(0, (1000.0, 0.97, 8 * MIB), baseline=True)
    fast = make_trial(1, (4000.0, 0.85, 4 * MIB), precision="bf16", batch_size=128)
    return [pareto_row(fast, 1000.0), pareto_row(baseline, 1000.0)]


def test_the_best_table_has_speedups_and_marks_baseline_and_recommendation() -> None:
    table = pareto_table(_rows(), "front", recommended=1)
    headers = [str(c.header) for c in table.columns]
    assert headers == [
        "trial", "samples/s", "x baseline", "val acc", "peak MiB", "step ms", "compile s",
        "other CPU", "model", "batch", "precision", "memory format", "compile", "workers", "gpus",
    ]  # fmt: skip
    text = rendered_text(table)
    assert "1 (recommended)" in text and "0 (baseline)" in text
    assert "4.00x" in text and "1.00x" in text
    assert "4,000" in text and "85.0%" in text and "4.0" in text
    assert "16.000" in text  # step ms: 64 samples / 4000 samples/s


def test_the_run_table_has_compile_seconds_and_no_speedups() -> None:
    table = pareto_table(_rows(), "front", speedup=False)
    headers = [str(c.header) for c in table.columns]
    assert "x baseline" not in headers and headers[4:6] == ["step ms", "compile s"]
    text = rendered_text(table)
    assert "(baseline)" not in text and "(recommended)" not in text and "x " not in text
    assert [line.split()[1] for line in text.splitlines() if line.startswith("│")] == ["1", "0"]


def test_the_table_names_the_study_metric() -> None:
    loss = study_objectives("val_loss", "minimize")[METRIC_INDEX]
    text = rendered_text(pareto_table(_rows(), "front", loss))
    assert "val_loss" in text and "val acc" not in text


def test_a_trial_measured_on_a_busy_machine_is_marked_and_the_caption_says_why() -> None:
    busy = {"other_cpu_share": 0.48, "busy_machine": True}
    quiet = {"other_cpu_share": 0.02, "busy_machine": False}
    rows = [
        pareto_row(make_trial(1, (4000.0, 0.85, 4 * MIB), simulated=False, extra_attrs=busy)),
        pareto_row(make_trial(2, (3000.0, 0.85, 4 * MIB), simulated=False, extra_attrs=quiet)),
        pareto_row(make_trial(3, (2000.0, 0.85, 4 * MIB))),  # the mock: nothing measured
    ]

    text = rendered_text(pareto_table(rows, "front", speedup=False))

    assert "48 % BUSY" in text and "2 %" in text and "not measured (mock)" in text
    assert (
        "BUSY: trial 1 measured on a busy machine (other processes used 48 % of the CPUs)"
        in " ".join(text.split())
    )


def test_the_compile_seconds_say_whether_the_compile_was_cold_or_warm() -> None:
    def row(number: int, **attrs: object) -> ParetoRow:
        trial = make_trial(number, (4000.0, 0.85, 4 * MIB), extra_attrs=attrs)
        return pareto_row(trial, 1000.0)

    cold = row(1, compile_s=31.25, compile_cache="cold")
    warm = row(2, compile_s=2.5, compile_cache="warm")
    unknown = row(3, compile_s=2.5)  # recorded before compile_cache was
    eager = row(4, compile_cache=None)

    assert [compile_text(r.compile_s, r.compile_cache) for r in (cold, warm, unknown, eager)] == [
        "31.2 cold",
        "2.5 warm",
        "2.5",
        "0.0",
    ]
    text = rendered_text(pareto_table([cold, warm], "front", speedup=False))
    assert "31.2 cold" in text and "2.5 warm" in text


def test_a_registered_figure_is_a_column_where_a_row_has_it() -> None:
    """``trial_result.FIGURE_COLUMNS``: the CUDA warm-up peak is a column (in MiB, before
    ``other CPU``) only when some row recorded one (a row without it reads MISSING)."""
    warm = make_trial(1, (4000.0, 0.85, 4 * MIB), extra_attrs={"warmup_peak_memory_bytes": 3 * MIB})
    plain = make_trial(2, (2000.0, 0.9, 4 * MIB))

    with_figure = pareto_table([pareto_row(warm), pareto_row(plain)], "front", speedup=False)
    without = pareto_table([pareto_row(plain)], "front", speedup=False)

    headers = [str(c.header) for c in with_figure.columns]
    assert headers[headers.index("other CPU") - 1] == "warm-up peak MiB"
    assert "warm-up peak MiB" not in [str(c.header) for c in without.columns]
    assert "3.0" in rendered_text(with_figure)


def test_a_batch_change_shows_throughput_e_of_b_and_goodput_side_by_side() -> None:
    """A trial that changed the global batch carries E(B) and goodput (the objective's
    ``goodput_attrs``): the Pareto table shows both beside samples/s, the same-batch row reads
    MISSING there, and ``ParetoRow.goodput_sps`` (``best --objective goodput``) falls back to
    the throughput."""
    batch = make_trial(
        1,
        (3000.0, 0.9, 4 * MIB),
        extra_attrs={"statistical_efficiency": 0.6, "goodput_sps": 1800.0},
    )
    same = make_trial(2, (2000.0, 0.9, 4 * MIB))

    rows = [pareto_row(batch), pareto_row(same)]
    table = pareto_table(rows, "front", speedup=False)

    headers = [str(c.header) for c in table.columns]
    assert headers.index("samples/s") < headers.index("E(B)") < headers.index("goodput samples/s")
    text = rendered_text(table)
    assert "0.6" in text and "1,800" in text
    assert [r.goodput_sps for r in rows] == [1800.0, 2000.0]
