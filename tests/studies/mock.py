"""Studies for the results, report and export tests: run in this process on the mock device,
with the mock cost model (milliseconds a trial), SQLite in a temporary directory."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, IntDistribution
from optuna.trial import FrozenTrial, TrialState

from autotune.core.config import TrialConfig, load_run_config
from autotune.core.exceptions import TrialError
from autotune.study.api import StudyResult, run_study
from autotune.study.baseline import COMMON_BATCH_SIZE, PYTORCH_DEFAULTS
from autotune.testing import simulate_trial
from autotune.trial.measure import Measurement

#: A memory limit that a few cnn_small configurations break (so some trials are infeasible).
MAX_MEMORY_BYTES = 10 * (1 << 20)
#: Trial numbers that fail on purpose (out of memory) in :func:`run_mock_study`.
FAILING_TRIALS = (3,)


def fail_some(config: TrialConfig) -> Measurement:
    """The mock cost model, but trials asked to fail (``advanced.mock.fault=oom``; :func:`run_mock_study`
    asks it of the trials numbered in :data:`FAILING_TRIALS`) run out of memory."""
    if config.mock_fault == "oom":
        raise TrialError("oom", "torch.OutOfMemoryError: CUDA out of memory (injected)")
    return simulate_trial(config)


def sqlite_url(directory: Path) -> str:
    """A SQLite storage URL for a study database inside ``directory``."""
    return f"sqlite:///{directory / 'autotune.db'}"


def run_mock_study(
    url: str,
    n_trials: int = 12,
    *,
    study: str = "demo",
    extra: Sequence[str] = (),
    constrained: bool = True,
) -> StudyResult:
    """Run (or top up) a cnn_small study on the mock device in this process.

    With ``constrained``, peak memory is limited to :data:`MAX_MEMORY_BYTES` so some trials
    are infeasible; trial :data:`FAILING_TRIALS` fail with ``oom``.
    """
    args = [
        "space=cnn_small",
        "device=mock",
        "data=digits",
        f"study={study}",
        f"storage={url}",
        "advanced.mock.fault=oom",
        f"advanced.mock.fault_trials=[{','.join(map(str, FAILING_TRIALS))}]",
        *extra,
    ]
    if constrained:
        args.append(f"constraints.max_memory_bytes={MAX_MEMORY_BYTES}")
    return run_study(load_run_config(args), n_trials, run_trial_fn=fail_some)


_DISTRIBUTIONS = {
    "depth": IntDistribution(1, 3),
    "width": CategoricalDistribution((8, 16, 32, 64)),
    "batch_size": CategoricalDistribution((16, 32, 64, 128, 256)),
    "precision": CategoricalDistribution(("fp32", "tf32", "fp16", "bf16")),
    "memory_format": CategoricalDistribution(("contiguous", "channels_last")),
    "compile_mode": CategoricalDistribution(("none", "default", "reduce-overhead", "max-autotune")),
    "num_workers": CategoricalDistribution((0, 1, 2)),
    "gpu_count": CategoricalDistribution((1, 2)),
}
#: The knob values of a trial built by :func:`make_trial` where it names none (cnn_small's
#: middle model at batch 64, PyTorch's defaults otherwise).
DEFAULT_PARAMS = {
    "depth": 2,
    "width": 16,
    "batch_size": COMMON_BATCH_SIZE,
    # The tuner's knobs: a study that does not search the guide's records none of them.
    **{name: value for name, value in PYTORCH_DEFAULTS.items() if name in _DISTRIBUTIONS},
}


def make_trial(
    number: int,
    values: tuple[float, float, float] | None = None,
    *,
    state: TrialState = TrialState.COMPLETE,
    failure: str | None = None,
    constraint: float = 0.0,
    baseline: bool = False,
    simulated: bool = True,
    extra_attrs: dict[str, object] | None = None,
    **params: object,
) -> FrozenTrial:
    """A finished trial as autotune records it, built by hand.

    Args:
        number: its trial number.
        values: ``(throughput_sps, val_metric, peak_memory_bytes)`` of a measured trial;
            None for a failed or pruned one.
        state: COMPLETE or PRUNED.
        failure: ``oom``, ``error``, ... (stored with a detail line), or ``infeasible``.
        constraint: the ``failed``/limit constraint value (> 0: infeasible).
        baseline: mark it as the baseline.
        simulated: the ``simulated`` attribute.
        extra_attrs: more user attributes.
        **params: knob values overriding the defaults.
    """
    attrs: dict[str, object] = {"simulated": simulated}
    if values is not None:
        attrs.update(
            throughput_sps=values[0],
            val_metric=values[1],
            peak_memory_bytes=int(values[2]),
            step_time_s=64 / values[0] if values[0] else 0.0,
            compile_s=0.0,
        )
    if failure is not None:
        attrs.update(failure=failure, failure_detail=f"{failure} happened\nlast line of {failure}")
    if baseline:
        attrs["baseline"] = True
    attrs.update(extra_attrs or {})
    trial = optuna.trial.create_trial(
        state=state,
        values=None if state == TrialState.PRUNED else list(values or (0.0, 0.0, 64 << 20)),
        params={**DEFAULT_PARAMS, **params},
        distributions=_DISTRIBUTIONS,
        user_attrs=attrs,
        constraints=None if state == TrialState.PRUNED else {"failed": constraint},
    )
    trial.number = number
    return trial


@dataclass(frozen=True)
class DemoStudy:
    """A finished cnn_small study on the mock device, shared by the tests that only read it.

    Attributes:
        url: its SQLite storage URL.
        name: its study name.
        n_trials: its finished trials: the baseline, feasible, over-the-limit and failed ones.
    """

    url: str
    name: str
    n_trials: int


_SHARED: dict[str, DemoStudy] = {}


def shared_demo_study(tmp_path_factory: pytest.TempPathFactory) -> DemoStudy:
    """One :class:`DemoStudy` per test session (built on first use, then reused)."""
    if "demo" not in _SHARED:
        url = sqlite_url(tmp_path_factory.mktemp("demo_study"))
        # 12 trials: the baseline, the 5-row start-up design and 6 of the GP's, enough for a
        # verified recommendation, whose outputs the tests read (at 10 this seed's study ends
        # "not faster at the same accuracy").
        run_mock_study(url, 12)
        _SHARED["demo"] = DemoStudy(url=url, name="demo", n_trials=12)
    return _SHARED["demo"]
