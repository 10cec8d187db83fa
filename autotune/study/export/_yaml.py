"""``best --export``: the verified recommendation (or a trial asked for with ``--trial``) as
YAML with its figures, its configuration and the PyTorch snippet.

It checks its input before it writes anything: a study without a recommendation raises
:class:`~autotune.core.exceptions.VerificationError`, an unknown trial
:class:`~autotune.core.exceptions.ConfigError`, and no file is created.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from autotune.core.config import BUILTIN_WORKLOAD_REF, display_url
from autotune.core.exceptions import ConfigError, VerificationError
from autotune.study.export._best import BestConfigs
from autotune.study.export._snippet import pytorch_settings, pytorch_snippet, trained_lr
from autotune.study.report import (
    NOT_VERIFIED,
    SIMULATED_TEXT,
    ParetoRow,
    mib_text,
    model_knobs,
    model_text,
    seconds_text,
    verify_command,
)
from autotune.study.verification import VerificationSummary, tolerance_text

__all__ = ["EXPORTED_CONFIG_KEYS", "export_best_yaml", "export_choice"]

#: The keys of a trial's configuration an export holds, in order: what the trial trained (its
#: device kind, model knobs, tuner knobs, seed, objective and training settings). Left out:
#: autotune's own (the measurement settings ``measure``, the search's throughput floor
#: ``min_throughput_sps``, the metric ``reuse`` of the search, the mock device's
#: ``mock_fault`` and ``mock_profile``), and ``workload``, which the export holds at its top
#: level.
EXPORTED_CONFIG_KEYS: tuple[str, ...] = (
    "device",
    "model",
    "batch_size",
    "precision",
    "memory_format",
    "compile_mode",
    "num_workers",
    "gpu_count",
    "seed",
    "objective",
    "train",
)
#: Training settings that steer autotune's search and timing, not the training: the untimed
#: steps before the timed windows (not the learning-rate warm-up, ``lr_warmup_fraction``)
#: and the limits that stop a slow time-to-accuracy trial.
_SEARCH_ONLY_TRAIN_KEYS = frozenset({"warmup_steps", "max_time_s", "max_time_vs_baseline"})


def export_choice(best: BestConfigs, trial: int | None = None) -> ParetoRow:
    """The configuration ``best --export`` writes: the verified recommendation, or ``trial``.

    Args:
        best: the study's verdict and configurations (:func:`best_configurations`).
        trial: export this trial instead (``--trial N``): any feasible, measured trial, with
            its single-trial figures.

    Returns:
        The row of the trial to export.

    Raises:
        VerificationError: no ``trial`` was given and the study has no recommendation (not
            verified, or nothing qualified); the message says how to export a trial anyway.
        ConfigError: ``trial`` is not a feasible, measured trial of the study.
    """
    name = best.study_name
    if trial is not None:
        row = best.configurations.get(trial)
        if row is None:
            raise ConfigError(
                f"--trial {trial}: study={name} has no feasible, measured trial {trial} "
                f"(feasible ones: {_numbers(best.configurations)})"
            )
        return row
    summary = best.verification
    anyway = "or export one trial's unverified, single-trial figures with --trial N"
    if summary is None:
        raise VerificationError(
            f"study={name}: {NOT_VERIFIED}, so there is no recommendation to export: run "
            f"`{verify_command(name, best.storage)}` first, {anyway}"
        )
    if summary.recommended is None:
        raise VerificationError(
            f"study={name}: {summary.headline()} (verification {summary.number}), so there is "
            f"no recommendation to export; {anyway}"
        )
    number = summary.recommended.trial_number
    row = best.configurations.get(number)
    if row is None:  # the recommendation was a feasible trial when it was verified
        raise VerificationError(
            f"study={name}: the recommended trial {number} is no longer a feasible, measured "
            "trial of the study"
        )
    return row


def _exported_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The configuration as an export shows it: :data:`EXPORTED_CONFIG_KEYS` only, the
    training settings without the search-only ones."""
    exported = {key: config[key] for key in EXPORTED_CONFIG_KEYS if key in config}
    if isinstance(exported.get("train"), Mapping):
        train = exported["train"]
        exported["train"] = {k: v for k, v in train.items() if k not in _SEARCH_ONLY_TRAIN_KEYS}
    return exported


def _shared_storage(url: str) -> str:
    """The storage URL as a file to share shows it: without its password
    (:func:`~autotune.core.config.display_url`), and a SQLite file by its absolute path (a
    relative one means nothing away from the directory ``best`` ran in)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return display_url(url)
    database = parsed.database
    if (
        parsed.get_backend_name() == "sqlite"
        and database
        and database != ":memory:"
        and not database.startswith("file:")
        and not Path(database).is_absolute()
    ):
        url = parsed.set(database=str(Path(database).resolve())).render_as_string(
            hide_password=False
        )
    return display_url(url)


def _numbers(rows: Mapping[int, ParetoRow]) -> str:
    numbers = sorted(rows)
    shown = ", ".join(map(str, numbers[:20])) + (", ..." if len(numbers) > 20 else "")
    return shown or "none"


def _verification_section(summary: VerificationSummary) -> dict[str, Any]:
    """The ``verification:`` mapping of an export of the recommended configuration."""
    rec = summary.recommended
    assert rec is not None and rec.speedup is not None
    low, high = rec.speedup_ci95 or (rec.speedup, rec.speedup)
    return {
        "verification_number": summary.number,
        "rounds": summary.rounds,
        "seeds": list(summary.seeds),
        "race_seeds": list(summary.race_seeds),
        "finalists": list(summary.finalists),
        "speedup": round(float(rec.speedup), 4),
        "speedup_ci95": [round(float(low), 4), round(float(high), 4)],
        "throughput_median_sps": rec.throughput_median_sps,
        "metric": summary.metric.name,
        "metric_direction": summary.metric.direction,
        "val_metric_mean": rec.val_metric_mean,
        "val_metric_min": rec.val_metric_min,
        "val_metric_max": rec.val_metric_max,
        "metric_difference_mean": rec.metric_diff_mean,
        "metric_difference_ci95": list(rec.metric_diff_ci95) if rec.metric_diff_ci95 else None,
        "non_inferior": rec.non_inferior,
        "val_samples": rec.val_samples,
        "peak_memory_max_bytes": rec.peak_memory_max_bytes,
        "baseline_trial": summary.baseline.trial_number,
        "baseline_throughput_median_sps": summary.baseline.throughput_median_sps,
        "baseline_val_metric_mean": summary.baseline.val_metric_mean,
        "accuracy_tolerance_pt": summary.accuracy_tolerance_pt,
        "tolerance": tolerance_text(summary.metric, summary.accuracy_tolerance_pt),
        "verdict": summary.headline(),
    } | (_to_target_section(summary) if summary.is_time_to_accuracy else {})


def _to_target_section(summary: VerificationSummary) -> dict[str, Any]:
    """The time-to-accuracy figures of the ``verification:`` mapping: the target, the
    recommendation's and the baseline's times to it (geometric means over the rounds, a miss
    counted at the seconds trained: ``speedup``, how many times sooner, is their ratio), the
    same times as MLPerf aggregates them, and its fastest-slowest."""
    rec = summary.recommended
    assert rec is not None
    spread = rec.time_to_accuracy_spread_s
    return {
        "target": summary.target,
        "time_to_accuracy_s": rec.time_to_accuracy_s,
        "time_to_accuracy_spread_s": None if spread is None else list(spread),
        "time_to_accuracy_mlperf_s": rec.time_to_accuracy_mlperf_s,
        "baseline_time_to_accuracy_s": summary.baseline.time_to_accuracy_s,
        "baseline_time_to_accuracy_mlperf_s": summary.baseline.time_to_accuracy_mlperf_s,
    }


def _unverified_note(best: BestConfigs, number: int) -> str:
    """Why an export chosen with ``--trial`` makes no claim."""
    summary = best.verification
    verdict = (
        next((c.verdict for c in summary.candidates if c.trial_number == number), None)
        if summary is not None
        else None
    )
    why = (
        f"verification {summary.number} re-measured it: {verdict}"
        if summary is not None and verdict is not None
        else "it was not verified"
    )
    return (
        f"NOT VERIFIED: trial {number} was chosen with --trial; its figures are one trial of "
        f"the search (single-trial figures), not a verified claim ({why})"
    )


def _model_words(best: BestConfigs, row: ParetoRow) -> str:
    """The model's knobs and its workload: ``depth=2 width=16 (workload cnn)``."""
    workload = (best.configs.get(row.number) or {}).get("workload")
    label = None
    if isinstance(workload, Mapping):
        ref, args = str(workload.get("ref")), workload.get("args") or {}
        label = str(args.get("family", ref)) if ref == BUILTIN_WORKLOAD_REF else ref
    return model_text(row.params) + (f" (workload {label})" if label else "")


def _single_trial_words(best: BestConfigs, row: ParetoRow) -> str:
    """What the row's single trial measured, in one sentence."""
    memory = f"peak memory {mib_text(row.peak_memory_bytes)} MiB."
    if row.time_to_accuracy_s is not None:
        return (
            f"Its single trial: reached {best.metric.label} "
            f"{best.metric.format(row.val_metric, 1)} (target "
            f"{best.metric.format(best.target, 1)}) in {seconds_text(row.time_to_accuracy_s)} s"
            + (
                f" ({row.speedup:.2f}x sooner than the baseline's trial)"
                if row.speedup is not None
                else ""
            )
            + f", {memory}"
        )
    return (
        f"Its single trial: {row.throughput_sps:,.0f} samples/s"
        + (f" ({row.speedup:.2f}x the baseline's trial)" if row.speedup is not None else "")
        + f", {best.metric.label} {best.metric.format(row.val_metric, 1)}, {memory}"
    )


def _single_trial_figures(best: BestConfigs, row: ParetoRow) -> dict[str, Any]:
    """The ``single_trial_figures:`` mapping: a throughput study's figures, and in a
    time-to-accuracy study its time to target, the target and how many times sooner than the
    baseline's trial it reached it (``speedup_vs_baseline_trial`` is then that ratio)."""
    figures: dict[str, Any] = {}
    if row.time_to_accuracy_s is not None:
        figures.update(
            {
                "time_to_accuracy_s": float(row.time_to_accuracy_s),
                "target": {
                    "metric": best.metric.name,
                    "direction": best.metric.direction,
                    "value": best.target,
                },
                "eval_s": row.eval_s,
                "baseline_time_to_accuracy_s": (
                    None if best.baseline is None else best.baseline.time_to_accuracy_s
                ),
            }
        )
    figures.update(
        {
            "throughput_sps": float(row.throughput_sps),
            "speedup_vs_baseline_trial": (
                None if row.speedup is None else round(float(row.speedup), 4)
            ),
            "baseline_throughput_sps": (
                None if best.baseline is None else best.baseline.throughput_sps
            ),
            "metric": best.metric.name,
            "metric_direction": best.metric.direction,
            "val_metric": float(row.val_metric),
            "peak_memory_bytes": int(row.peak_memory_bytes),
            "step_time_s": row.step_time_s,
            "compile_s": row.compile_s,
        }
    )
    return figures


def _header(best: BestConfigs, row: ParetoRow, verified: bool) -> list[str]:
    device = best.device_name or "the study device"
    if verified:
        assert best.verification is not None
        lines = [
            f"autotune: study {best.study_name!r}, trial {row.number}, the verified "
            f"recommendation (verification {best.verification.number}), on {device}.",
            best.verification.headline(),
        ]
    else:
        lines = [
            f"autotune: study {best.study_name!r}, trial {row.number}, chosen with --trial, "
            f"on {device}.",
            _unverified_note(best, row.number) + ".",
            _single_trial_words(best, row),
        ]
    lines.append(f"Model: {_model_words(best, row)}.")
    if best.simulated:
        lines.append(f"{SIMULATED_TEXT} Re-measure on real hardware.")
    return lines


def export_best_yaml(best: BestConfigs, path: Path, *, trial: int | None = None) -> dict[str, Any]:
    """Write the verified recommendation (or ``trial``) as YAML with its PyTorch snippet.

    The file holds the study, the ``verification:`` figures (rounds, seeds, speedup and its
    95 % interval, mean metric; ``null`` for a trial chosen with ``trial`` that is not the
    recommendation, with a ``note`` saying so), the trial's single-trial figures from the
    search (units in the names; ``metric`` names the validation metric ``val_metric`` is; a
    time-to-accuracy study's also ``time_to_accuracy_s`` and its ``target``),
    the workload reference (``workload``: ``ref`` and ``args``, as ``autotune`` resolves it)
    and the model's knobs under their own names (``model``), the configuration it trained
    (``config``: :data:`EXPORTED_CONFIG_KEYS`; no field of autotune's own), the PyTorch
    settings (with ``peak_lr``, the learning rate after warm-up it trained with) and
    ``pytorch_snippet``, the code to paste. A SQLite ``storage`` is written with its
    absolute path.

    Args:
        best: the study's verdict and configurations (:func:`best_configurations`).
        path: the YAML file to write.
        trial: export this feasible, measured trial instead of the recommendation.

    Returns:
        The mapping written.

    Raises:
        VerificationError: no ``trial`` and no recommendation (nothing is written).
        ConfigError: ``trial`` is not a feasible, measured trial, or ``path`` cannot be written.
    """
    row = export_choice(best, trial)
    params = dict(row.params)
    config = dict(best.configs.get(row.number) or params)
    verified = best.recommended_trial == row.number and best.verification is not None
    document: dict[str, Any] = {
        "study": best.study_name,
        "storage": _shared_storage(best.storage),  # a file to share: no password
        "trial": row.number,
        "selected_by": "verification" if trial is None else "--trial",
        "simulated": best.simulated,
        "device": best.device_name,
        "exported_at": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "verification": (
            _verification_section(best.verification)
            if verified and best.verification is not None
            else None
        ),
    }
    if not verified:
        document["note"] = _unverified_note(best, row.number)
    document.update(
        {
            "single_trial_figures": _single_trial_figures(best, row),
            "workload": config.get("workload"),
            "model": model_knobs(params),
            "config": _exported_config(config),
            # The peak learning rate it trained with: train.lr scaled to its global batch.
            "pytorch": pytorch_settings(params) | {"peak_lr": trained_lr(config, params)[0]},
            "hardware": dict(best.hardware),
            "pytorch_snippet": pytorch_snippet(params, _header(best, row, verified)),
        }
    )
    text = _dump_yaml(document, _header(best, row, verified))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"--export {path}: cannot write ({e.strerror or e})") from None
    return document


class _BlockDumper(yaml.SafeDumper):
    """Writes multi-line strings as ``|`` blocks, so the snippet reads as code, and a value
    used twice in full both times (no ``&id001`` anchors and ``*id001`` aliases)."""

    def ignore_aliases(self, data: object) -> bool:
        return True


def _str_presenter(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _str_presenter)


def _dump_yaml(document: Mapping[str, Any], header: Sequence[str]) -> str:
    body = yaml.dump(dict(document), Dumper=_BlockDumper, sort_keys=False, width=100)
    return "".join(f"# {line}\n" for line in header) + body
