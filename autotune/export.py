"""Getting results out: the Pareto-optimal configurations (``autotune best``), the verified
recommendation as YAML with a ready-to-paste PyTorch snippet (``best --export``), every trial
as CSV (``autotune export``), and the list of studies in a database (``autotune ls``).

What ``best``, ``best --export`` and ``ls`` claim is the newest finished verification's
recommendation, the same one the report and the dashboard show
(:attr:`autotune.report.ReportData.verification`); the Pareto table is single-trial figures.

Every function checks its input before it writes anything: an unknown study raises
:class:`~autotune.storage.StudyNotFoundError`, a study without a recommendation raises
:class:`~autotune.exceptions.VerificationError`, and no file is created.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import datetime as dt
import json
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
import yaml
from pydantic import ValidationError

from autotune.config import BUILTIN_WORKLOAD_REF, TUNER_KNOBS, DataSettings, TrialConfig
from autotune.exceptions import ConfigError, VerificationError
from autotune.objectives import Objective
from autotune.report import (
    FEASIBLE,
    NOT_VERIFIED,
    Baseline,
    ParetoRow,
    gather_report,
    model_knobs,
    model_text,
    verify_command,
)
from autotune.storage import (
    ResultsStore,
    TrialRecord,
    load_existing_study,
    open_existing_storage,
    study_names,
    trial_record,
)
from autotune.verification import (
    ACCURACY,
    VerificationSummary,
    nothing_qualifies,
    tolerance_text,
)

__all__ = [
    "OBJECTIVE_CHOICES",
    "BestConfigs",
    "StudySummary",
    "best_configurations",
    "export_best_yaml",
    "export_choice",
    "export_csv",
    "list_studies",
    "pytorch_settings",
    "pytorch_snippet",
    "sort_pareto",
    "trial_records",
]

#: ``--objective`` choices and the figure each ranks by (and whether larger is better).
#: ``accuracy`` (or ``metric``) is the study's validation metric, whatever its name; it ranks
#: in the metric's own direction (a ``val_loss``: lower first), see :func:`sort_pareto`.
OBJECTIVE_CHOICES: dict[str, tuple[str, bool]] = {
    "throughput": ("throughput_sps", True),
    "accuracy": ("val_metric", True),
    "metric": ("val_metric", True),
    "memory": ("peak_memory_bytes", False),
}
_MIB = float(1 << 20)
_AUTOCAST = {"fp16": "torch.float16", "bf16": "torch.bfloat16"}


@dataclass(frozen=True)
class BestConfigs:
    """A study's verified verdict and its Pareto-optimal configurations, ranked by one
    objective.

    Attributes:
        study_name: the Optuna study name.
        storage: the storage URL.
        objective: ``throughput``, ``accuracy`` (the study's metric) or ``memory`` (orders
            :attr:`rows` only).
        simulated: the figures come from the mock device (SIMULATED).
        device_name: the device the trials ran on.
        rows: the Pareto-optimal configurations, best first by ``objective`` (single-trial
            figures).
        baseline: the study's baseline, or None.
        configs: the full trial configuration by trial number (knobs, training, data), for
            every feasible, measured trial.
        hardware: ``(label, value)`` rows of the hardware fingerprint.
        verification: the newest finished verification (None: not verified).
        verdict: the one-line verdict every output shows
            (:meth:`autotune.report.ReportData.verdict_line`).
        configurations: every feasible, measured trial by number (single-trial figures).
        metric: the study's validation metric (name, direction, display format).
    """

    study_name: str
    storage: str
    objective: str
    simulated: bool
    device_name: str
    rows: tuple[ParetoRow, ...]
    baseline: Baseline | None
    configs: Mapping[int, Mapping[str, Any]]
    hardware: tuple[tuple[str, str], ...]
    verification: VerificationSummary | None = None
    verdict: str = ""
    configurations: Mapping[int, ParetoRow] = dataclasses.field(default_factory=dict)
    metric: Objective = ACCURACY

    @property
    def recommended_trial(self) -> int | None:
        """The verified recommendation's trial number, or None."""
        rec = self.verification.recommended if self.verification is not None else None
        return rec.trial_number if rec is not None else None


def _check_objective(objective: str) -> tuple[str, bool]:
    if objective not in OBJECTIVE_CHOICES:
        raise ConfigError(
            f"--objective {objective}: unknown objective (known: {', '.join(OBJECTIVE_CHOICES)})"
        )
    return OBJECTIVE_CHOICES[objective]


def sort_pareto(
    rows: Sequence[ParetoRow], objective: str, metric: Objective = ACCURACY
) -> list[ParetoRow]:
    """Pareto rows best first by ``objective`` (ties: faster, then lower trial number).

    Args:
        rows: the rows to sort.
        objective: an :data:`OBJECTIVE_CHOICES` key.
        metric: the study's validation metric: ``accuracy``/``metric`` rank in its direction
            (default: accuracy, higher first).

    Raises:
        ConfigError: an unknown objective.
    """
    name, larger_is_better = _check_objective(objective)
    if name == "val_metric":
        larger_is_better = metric.direction == "maximize"
    sign = -1.0 if larger_is_better else 1.0
    return sorted(rows, key=lambda r: (sign * getattr(r, name), -r.throughput_sps, r.number))


def _current_form(config: dict[str, Any]) -> dict[str, Any]:
    """A stored configuration in the current form (``workload`` and ``model`` knobs by name);
    one written before workloads (``family``, ``depth``, ``width``, ``data``) is converted by
    :meth:`TrialConfig.from_stored`, and kept as it is if it cannot be."""
    if "family" not in config or "workload" in config:
        return config
    try:
        return TrialConfig.from_stored(config).model_dump(mode="json")
    except (ValidationError, KeyError):
        return config


def _space_workload(space: Mapping[str, Any]) -> dict[str, Any] | None:
    """The workload reference of a study's recorded space (``workload:``, or a built-in
    ``model.family`` on ``data:``), None when the record names neither."""
    if isinstance(space.get("workload"), str):
        return {"ref": space["workload"], "args": dict(space.get("workload_args") or {})}
    family = (space.get("model") or {}).get("family")
    if family is None:
        return None
    data: dict[str, Any] = dict(space.get("data") or {})
    with contextlib.suppress(ValidationError):  # kept as recorded if it no longer validates
        data = DataSettings.model_validate(data).model_dump(mode="json")
    return {"ref": BUILTIN_WORKLOAD_REF, "args": {"family": family, "data": data}}


def _full_configs(
    study: optuna.Study, records: Sequence[TrialRecord], numbers: set[int]
) -> dict[int, dict[str, Any]]:
    """Full configurations from the results rows, in the current form (old rows converted);
    rebuilt from the study's recorded space where no row exists."""
    configs = {
        r.trial_number: _current_form(json.loads(r.config_json))
        for r in records
        if r.trial_number in numbers
    }
    space = (study.user_attrs.get("autotune") or {}).get("space") or {}
    for trial in study.get_trials(deepcopy=False):
        if trial.number in numbers and "train" not in configs.get(trial.number, {}):
            configs[trial.number] = {
                "workload": _space_workload(space),
                "model": model_knobs(trial.params),
                **{name: trial.params[name] for name in TUNER_KNOBS if name in trial.params},
                "train": space.get("train"),
                "measure": space.get("measure"),
            }
    return configs


def best_configurations(
    study_name: str, storage: str, objective: str = "throughput"
) -> BestConfigs:
    """The verified verdict of ``study_name`` and its Pareto-optimal configurations, best
    first by ``objective``.

    Raises:
        ConfigError: an unknown objective.
        StudyNotFoundError: no such study.
        StorageError: the database cannot be read.
    """
    _check_objective(objective)
    study = load_existing_study(study_name, storage)
    with ResultsStore.open(storage, create=False) as results:
        data = gather_report(study, results, importances=False)
        records = results.trials(study_name)
    rows = sort_pareto(data.pareto, objective, data.metric)
    configurations = {r.number: r for r in data.configurations}
    return BestConfigs(
        study_name=study_name,
        storage=storage,
        objective=objective,
        simulated=data.simulated,
        device_name=data.device_name,
        rows=tuple(rows),
        baseline=data.baseline,
        configs=_full_configs(study, records, set(configurations)),
        hardware=data.hardware,
        verification=data.verification,
        verdict=data.verdict_line(),
        configurations=configurations,
        metric=data.metric,
    )


# --------------------------------------------------------------------------------------------
# The PyTorch snippet


def pytorch_settings(params: Mapping[str, Any]) -> dict[str, Any]:
    """How a configuration's knobs map onto PyTorch (what the trial itself did).

    Args:
        params: the knobs (``precision``, ``memory_format``, ``compile_mode``, ``batch_size``,
            ``num_workers``, ``gpu_count``).

    Returns:
        ``autocast_dtype`` (``"torch.bfloat16"``, ``"torch.float16"`` or None for fp32/tf32),
        ``tf32``, ``channels_last``, ``compile_mode`` (None: eager), ``dataloader`` keyword
        arguments and ``ddp_world_size``.
    """
    workers = int(params.get("num_workers", 0))
    compile_mode = params.get("compile_mode", "none")
    return {
        "autocast_dtype": _AUTOCAST.get(str(params.get("precision", "fp32"))),
        "tf32": params.get("precision") == "tf32",
        "grad_scaler": params.get("precision") == "fp16",
        "channels_last": params.get("memory_format") == "channels_last",
        "compile_mode": None if compile_mode == "none" else str(compile_mode),
        "dataloader": {
            "batch_size": int(params.get("batch_size", 1)),
            "num_workers": workers,
            "pin_memory": "True on CUDA",
            "persistent_workers": workers > 0,
            "drop_last": True,
        },
        "ddp_world_size": int(params.get("gpu_count", 1)),
    }


_SNIPPET_BODY = '''def autotuned_training(model, train_set, loss_fn, optimizer, epochs=1):
    """Train `model` on `train_set` with the settings autotune found; returns the model.

    With WORLD_SIZE > 1 start one process per GPU: torchrun --nproc_per_node=WORLD_SIZE script.py
    """
    distributed = WORLD_SIZE > 1
    if distributed:
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
        if torch.cuda.is_available():
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", dist.get_rank())))
    if torch.cuda.is_available():
        device = torch.device("cuda", torch.cuda.current_device())
    else:
        device = torch.device("cpu")
    torch.backends.cuda.matmul.allow_tf32 = TF32
    torch.backends.cudnn.allow_tf32 = TF32
    memory_format = torch.channels_last if CHANNELS_LAST else torch.contiguous_format
    model = model.to(device, memory_format=memory_format)
    train_model = DistributedDataParallel(model) if distributed else model
    if COMPILE_MODE is not None:
        train_model = torch.compile(train_model, mode=COMPILE_MODE)
    sampler = DistributedSampler(train_set, shuffle=True) if distributed else None
    loader = DataLoader(
        train_set,
        batch_size=BATCH_SIZE,  # per process
        shuffle=sampler is None,
        sampler=sampler,
        num_workers=NUM_WORKERS,
        pin_memory=device.type == "cuda",
        persistent_workers=NUM_WORKERS > 0,
        drop_last=True,
    )
    scaler = torch.amp.GradScaler(device.type, enabled=GRAD_SCALER and device.type == "cuda")
    model.train()
    for epoch in range(epochs):
        if sampler is not None:
            sampler.set_epoch(epoch)
        for x, y in loader:
            if x.dim() == 4:
                x = x.to(device, non_blocking=True, memory_format=memory_format)  # (B, C, H, W)
            else:
                x = x.to(device, non_blocking=True)
            y = y.to(device, non_blocking=True)
            with torch.autocast(device.type, dtype=AUTOCAST_DTYPE, enabled=AUTOCAST_DTYPE is not None):
                loss = loss_fn(train_model(x), y)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
    return model
'''


def pytorch_snippet(params: Mapping[str, Any], header: Sequence[str] = ()) -> str:
    """A ready-to-paste PyTorch training function that applies a configuration.

    It sets the autocast dtype (and a GradScaler for fp16 on CUDA), the TF32 flags,
    ``channels_last`` for model and 4-D inputs, ``torch.compile(mode=...)``, the DataLoader
    arguments the trial used, and DDP with the trial's world size (launched by ``torchrun``).

    Args:
        params: the configuration's knobs.
        header: comment lines to put on top (what it is, its figures).

    Returns:
        Python source defining ``autotuned_training(model, train_set, loss_fn, optimizer,
        epochs=1)``.
    """
    s = pytorch_settings(params)
    lines = [f"# {line}" for line in header]
    if s["ddp_world_size"] > 1:
        lines.append(
            f"# Launch with: torchrun --nproc_per_node={s['ddp_world_size']} your_script.py"
        )
    lines += [
        "import os",
        "",
        "import torch",
        "import torch.distributed as dist",
        "from torch.nn.parallel import DistributedDataParallel",
        "from torch.utils.data import DataLoader, DistributedSampler",
        "",
        f"AUTOCAST_DTYPE = {s['autocast_dtype'] or 'None'}  # precision={params.get('precision')}",
        f"GRAD_SCALER = {s['grad_scaler']}  # loss scaling for fp16 (CUDA only)",
        f"TF32 = {s['tf32']}  # TF32 matmul/conv on CUDA",
        f"CHANNELS_LAST = {s['channels_last']}  # memory_format={params.get('memory_format')}",
        f"COMPILE_MODE = {json.dumps(s['compile_mode']) if s['compile_mode'] else None}"
        "  # torch.compile mode; None: eager",
        f"BATCH_SIZE = {s['dataloader']['batch_size']}  # per process; global = BATCH_SIZE * WORLD_SIZE",
        f"NUM_WORKERS = {s['dataloader']['num_workers']}  # DataLoader worker processes",
        f"WORLD_SIZE = {s['ddp_world_size']}  # DDP processes (GPUs)",
        "",
        "",
    ]
    return "\n".join(lines) + textwrap.dedent(_SNIPPET_BODY)


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
            f"study={name}: {nothing_qualifies(summary.metric)} (verification {summary.number}, "
            f"{summary.rounds} rounds), so there is no recommendation to export; {anyway}"
        )
    number = summary.recommended.trial_number
    row = best.configurations.get(number)
    if row is None:  # the recommendation was a feasible trial when it was verified
        raise VerificationError(
            f"study={name}: the recommended trial {number} is no longer a feasible, measured "
            "trial of the study"
        )
    return row


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
        "speedup": round(float(rec.speedup), 4),
        "speedup_ci95": [round(float(low), 4), round(float(high), 4)],
        "throughput_median_sps": rec.throughput_median_sps,
        "metric": summary.metric.name,
        "metric_direction": summary.metric.direction,
        "val_metric_mean": rec.val_metric_mean,
        "val_metric_min": rec.val_metric_min,
        "val_metric_max": rec.val_metric_max,
        "peak_memory_max_bytes": rec.peak_memory_max_bytes,
        "baseline_trial": summary.baseline.trial_number,
        "baseline_throughput_median_sps": summary.baseline.throughput_median_sps,
        "baseline_val_metric_mean": summary.baseline.val_metric_mean,
        "accuracy_tolerance_pt": summary.accuracy_tolerance_pt,
        "tolerance": tolerance_text(summary.metric, summary.accuracy_tolerance_pt),
        "verdict": summary.headline(),
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
            f"Its single trial: {row.throughput_sps:,.0f} samples/s"
            + (f" ({row.speedup:.2f}x the baseline's trial)" if row.speedup is not None else "")
            + f", {best.metric.label} {best.metric.format(row.val_metric, 1)}, "
            f"peak memory {row.peak_memory_bytes / _MIB:,.1f} MiB.",
        ]
    lines.append(f"Model: {_model_words(best, row)}.")
    if best.simulated:
        lines.append(
            "SIMULATED: measured on device=mock (a cost model); re-measure on real hardware."
        )
    return lines


def export_best_yaml(best: BestConfigs, path: Path, *, trial: int | None = None) -> dict[str, Any]:
    """Write the verified recommendation (or ``trial``) as YAML with its PyTorch snippet.

    The file holds the study, the ``verification:`` figures (rounds, seeds, speedup and its
    95 % interval, mean metric; ``null`` for a trial chosen with ``trial`` that is not the
    recommendation, with a ``note`` saying so), the trial's single-trial figures from the
    search (units in the names; ``metric`` names the validation metric ``val_metric`` is),
    the workload reference (``workload``: ``ref`` and ``args``, as ``autotune`` resolves it)
    and the model's knobs under their own names (``model``), the full configuration, the
    PyTorch settings and ``pytorch_snippet``, the code to paste.

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
        "storage": best.storage,
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
            "single_trial_figures": {
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
            },
            "workload": config.get("workload"),
            "model": model_knobs(params),
            "config": config,
            "pytorch": pytorch_settings(params),
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


# --------------------------------------------------------------------------------------------
# CSV and the study list


def trial_records(study_name: str, storage: str) -> list[TrialRecord]:
    """One row per finished trial: from the results table, or rebuilt from Optuna's record of
    the study where the table has none (a study from before the results tables).

    Raises:
        StudyNotFoundError: no such study.
        StorageError: the database cannot be read.
    """
    study = load_existing_study(study_name, storage)
    with ResultsStore.open(storage, create=False) as results:
        records = results.trials(study_name)
    if records:
        return records
    finished = study.get_trials(
        deepcopy=False,
        states=(optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED),
    )
    return [trial_record(study_name, t) for t in finished]


def export_csv(study_name: str, storage: str, path: Path) -> int:
    """Write one CSV row per finished trial (columns: :class:`TrialRecord`'s fields).

    Returns:
        The number of rows written.

    Raises:
        StudyNotFoundError: no such study (no file is created).
    """
    records = trial_records(study_name, storage)
    columns = [f.name for f in dataclasses.fields(TrialRecord)]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=columns)
            writer.writeheader()
            for record in records:
                row = record.as_row()
                for key, value in row.items():
                    if isinstance(value, dt.datetime):
                        row[key] = value.isoformat()
                writer.writerow(row)
    except OSError as e:
        raise ConfigError(f"--csv {path}: cannot write ({e.strerror or e})") from None
    return len(records)


@dataclass(frozen=True)
class StudySummary:
    """One line of ``autotune ls``.

    Attributes:
        study_name: the Optuna study name.
        space_name: the search space's name ("" when unknown).
        hardware: the device name (with "(simulated)" for the mock device).
        simulated: the figures are SIMULATED.
        finished: finished trials (complete or never launched).
        total: every trial, running and failed-interrupted ones included.
        feasible: feasible trials.
        pareto: Pareto-optimal trials.
        best_throughput_sps: the best feasible throughput of a single trial (None without
            one).
        verified_speedup: the verified recommendation's speedup over the baseline (None: not
            verified, or nothing qualifies).
        recommended_trial: the verified recommendation's trial number, or None.
        verification: ``"recommended"``, ``"nothing qualifies"`` or ``"not verified"``.
        created: when the study was created (its first trial started), or None.
        metric: the validation metric and its direction (``accuracy (max)``,
            ``val_loss (min)``).
    """

    study_name: str
    space_name: str
    hardware: str
    simulated: bool
    finished: int
    total: int
    feasible: int
    pareto: int
    best_throughput_sps: float | None
    verified_speedup: float | None
    recommended_trial: int | None
    verification: str
    created: dt.datetime | None
    metric: str = ""


def list_studies(storage: str) -> list[StudySummary]:
    """Every study in the database with its trial counts and hardware, oldest first.

    Raises:
        StorageError: the database does not exist or cannot be read.
    """
    rdb = open_existing_storage(storage)
    summaries: list[StudySummary] = []
    with ResultsStore.open(storage, create=False) as results:
        for name in study_names(rdb):
            study = optuna.load_study(study_name=name, storage=rdb)
            trials = study.get_trials(deepcopy=False)
            starts = [t.datetime_start for t in trials if t.datetime_start is not None]
            try:
                data = gather_report(study, results, trials=trials, importances=False)
            except ConfigError:  # another tool's study in the same database
                summaries.append(
                    StudySummary(
                        study_name=name,
                        space_name="(not an autotune study)",
                        hardware="",
                        simulated=False,
                        finished=sum(t.state.is_finished() for t in trials),
                        total=len(trials),
                        feasible=0,
                        pareto=0,
                        best_throughput_sps=None,
                        verified_speedup=None,
                        recommended_trial=None,
                        verification="not verified",
                        created=min(starts) if starts else None,
                    )
                )
                continue
            feasible = [p.throughput_sps for p in data.points if p.status == FEASIBLE]
            rec = data.recommended
            summaries.append(
                StudySummary(
                    study_name=name,
                    space_name=data.space_name,
                    hardware=data.device_name or "unknown",
                    simulated=data.simulated,
                    finished=data.finished,
                    total=len(trials),
                    feasible=len(feasible),
                    pareto=len(data.pareto),
                    best_throughput_sps=max((v for v in feasible if v is not None), default=None),
                    verified_speedup=rec.speedup if rec is not None else None,
                    recommended_trial=rec.trial_number if rec is not None else None,
                    verification=(
                        "not verified"
                        if data.verification is None
                        else ("recommended" if rec is not None else "nothing qualifies")
                    ),
                    created=min(starts) if starts else None,
                    metric=f"{data.metric.name} ({data.metric.direction[:3]})",
                )
            )
    rdb.remove_session()
    return summaries
