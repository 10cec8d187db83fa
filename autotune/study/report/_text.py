"""The words and figures every output shares, in one place: the SIMULATED warning, the
placeholder of a missing figure, each figure's format (MiB, samples/s, milliseconds, seconds,
ratios, intervals, spreads), the model's knobs as text, the metric's column, spread and paired
difference, a busy run's flag and the other processes' CPU share, HTML escaping, the
``autotune`` command lines a page names, and the line of a study without a verification."""

from __future__ import annotations

import html
import shlex
from collections.abc import Mapping
from typing import Any

from autotune.core.config import DEFAULT_STORAGE_URL, SYSTEM_KNOBS, display_url, format_knob_value
from autotune.core.units import MIB
from autotune.study.objectives import Objective, seconds_text
from autotune.study.verification import CandidateVerdict, difference_number, difference_unit

__all__ = [
    "MISSING",
    "NOT_VERIFIED",
    "SIMULATED_TEXT",
    "busy_runs_text",
    "busy_text",
    "ci_text",
    "compile_text",
    "cpu_share_text",
    "esc",
    "metric_column",
    "metric_difference",
    "metric_spread",
    "mib_text",
    "model_knobs",
    "model_text",
    "not_verified_line",
    "ratio_text",
    "seconds_text",
    "sps_text",
    "step_ms_text",
    "study_command",
    "time_spread_text",
    "verify_command",
]

#: The first words of what every output says about a study without a finished verification.
NOT_VERIFIED = "not verified"

#: What every output of a study on the mock device says first (the run header and its end,
#: ``best``, ``report`` and the HTML report's banner).
SIMULATED_TEXT = (
    "SIMULATED: device=mock is an analytic cost model; no training happens and no figure is a "
    "measurement."
)

#: A table cell without a figure (not recorded, not measured, or no baseline to compare with).
MISSING = "n/a"


def esc(value: Any) -> str:
    """``value`` as text with HTML's special characters escaped (quotes too): every
    user-provided string of a page or a figure goes through it."""
    return html.escape(str(value), quote=True)


def mib_text(n_bytes: float | None) -> str:
    """Bytes in MiB with one decimal: ``1,234.5``; :data:`MISSING` for None."""
    return MISSING if n_bytes is None else f"{n_bytes / MIB:,.1f}"


def sps_text(samples_per_s: float | None) -> str:
    """A throughput in samples/s, whole: ``12,345``; :data:`MISSING` for None."""
    return MISSING if samples_per_s is None else f"{samples_per_s:,.0f}"


def step_ms_text(step_s: float | None) -> str:
    """A step time in milliseconds with three decimals: ``16.000``; :data:`MISSING` for None."""
    return MISSING if step_s is None else f"{1e3 * step_s:.3f}"


def compile_text(compile_s: float | None, compile_cache: str | None = None) -> str:
    """Seconds ``torch.compile`` added, one decimal, with the compile cache's state when it
    was recorded and anything was compiled: ``3.1``, ``3.1 cold``, ``0.4 warm``;
    :data:`MISSING` for None."""
    if compile_s is None:
        return MISSING
    cache = f" {compile_cache}" if compile_cache and compile_s > 0 else ""
    return f"{compile_s:.1f}{cache}"


def ci_text(ci95: tuple[float, float] | None) -> str:
    """A ratio's 95 % interval: ``2.30-2.70x``; :data:`MISSING` for None."""
    return MISSING if ci95 is None else f"{ci95[0]:.2f}-{ci95[1]:.2f}x"


def time_spread_text(verdict: CandidateVerdict) -> str:
    """Fastest-slowest time to target over a verdict's rounds: ``3.50-4.50``; :data:`MISSING`
    without one."""
    spread = verdict.time_to_accuracy_spread_s
    return MISSING if spread is None else f"{seconds_text(spread[0])}-{seconds_text(spread[1])}"


def model_knobs(params: Mapping[str, Any]) -> dict[str, Any]:
    """The model's knobs among a trial's parameters: all but the tuner's and the guide's
    (:data:`~autotune.core.config.SYSTEM_KNOBS`),
    in their order (``depth``, ``width`` for the built-ins; a workload's own names)."""
    return {name: value for name, value in params.items() if name not in SYSTEM_KNOBS}


def model_text(params: Mapping[str, Any]) -> str:
    """The model's knobs for a table cell: ``depth=2 width=16``, ``n_layer=4 n_embd=128``;
    ``-`` when the space has none."""
    knobs = model_knobs(params).items()
    return " ".join(f"{name}={format_knob_value(value)}" for name, value in knobs) or "-"


def metric_column(metric: Objective) -> str:
    """A table's header for the metric: ``val acc`` for accuracy, else its name."""
    return "val acc" if metric.is_accuracy else metric.name


def ratio_text(ratio: float | None) -> str:
    """A ratio such as a speedup: ``2.60x``, with two significant figures below 0.1
    (``0.0012x``, never a misleading ``0.00x``); ``n/a`` for None."""
    if ratio is None:
        return MISSING
    return f"{ratio:.2f}x" if abs(ratio) >= 0.1 else f"{ratio:.2g}x"


def metric_difference(metric: Objective, verdict: CandidateVerdict) -> str | None:
    """A verdict's paired metric difference and its interval, as the verification tables show
    it: ``-0.08 [-0.31, +0.15] pt`` for accuracy (points), ``+0.005 [-0.001, +0.011]``
    otherwise; None without one (each table writes its own placeholder). The race's rows show
    the mean alone: over two rounds t(0.975, 1) = 12.7 gives no useful interval."""
    if verdict.metric_diff_mean is None:
        return None
    text = difference_number(metric, verdict.metric_diff_mean)
    if verdict.metric_diff_ci95 is not None and verdict.stage == "confirm":
        low, high = verdict.metric_diff_ci95
        text += f" [{difference_number(metric, low)}, {difference_number(metric, high)}]"
    return text + difference_unit(metric)


def busy_runs_text(verdict: CandidateVerdict, *, simulated: bool = False) -> str:
    """The ``busy runs`` cell of the verification tables: how many of a configuration's
    rounds were measured on a busy machine after the re-runs were spent (``0``, ``1 of 5``);
    ``not measured (mock)`` on the mock device."""
    if verdict.busy_runs:
        return f"{verdict.busy_runs} of {verdict.rounds_measured}"
    return "not measured (mock)" if simulated else "0"


def busy_text(other_cpu_share: float) -> str:
    """The flag every output gives a run measured on a busy machine (:mod:`autotune.trial.measure`):
    ``measured on a busy machine (other processes used 48 % of the CPUs)``."""
    return (
        f"measured on a busy machine (other processes used {100 * other_cpu_share:.0f} % of "
        "the CPUs)"
    )


def cpu_share_text(other_cpu_share: float | None, *, simulated: bool = False) -> str:
    """A table cell for the other processes' share: ``3 %``; ``not measured (mock)`` on the
    mock device; ``n/a`` when not recorded (runs from before it was measured)."""
    if other_cpu_share is None:
        return "not measured (mock)" if simulated else MISSING
    return f"{100 * other_cpu_share:.0f} %"


def metric_spread(metric: Objective, mean: float, low: float | None, high: float | None) -> str:
    """A verified mean with its range over rounds: ``98.42% [98.10-98.70]`` for accuracy,
    ``1.2340 [1.2100-1.2500]`` otherwise."""
    if metric.is_accuracy:
        return f"{100 * mean:.2f}% [{100 * (low or 0):.2f}-{100 * (high or 0):.2f}]"
    return f"{metric.format(mean)} [{metric.format(low)}-{metric.format(high)}]"


def study_command(
    command: str, study_name: str, storage_url: str | None = None, *options: str
) -> str:
    """An ``autotune COMMAND study=NAME [storage=URL] [OPTIONS]`` command line, shell-quoted;
    the storage is named unless it is the default, with its password masked
    (:func:`~autotune.core.config.display_url`; the user types it back in, as with pip)."""
    storage = (
        f" storage={shlex.quote(display_url(storage_url))}"
        if storage_url and storage_url != DEFAULT_STORAGE_URL
        else ""
    )
    tail = "".join(f" {shlex.quote(o)}" for o in options)
    return f"autotune {command} study={shlex.quote(study_name)}{storage}{tail}"


def verify_command(study_name: str, storage_url: str | None = None) -> str:
    """The ``autotune verify`` command line for a study (its storage named unless default)."""
    return study_command("verify", study_name, storage_url)


def not_verified_line(study_name: str, storage_url: str | None = None) -> str:
    """What every output says instead of a claim when a study has no finished verification.

    Args:
        study_name: the Optuna study name.
        storage_url: its storage URL (named in the command unless it is the default).
    """
    return (
        f"{NOT_VERIFIED}: run `{verify_command(study_name, storage_url)}` to re-measure the "
        "finalists; single-trial figures are not a claim"
    )
