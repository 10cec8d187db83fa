"""Table 6: the power and the false-recommendation rate of the verification (SIMULATED).

How often does the verification recommend a configuration that is truly faster, and how often
one that is not? Real runs cannot answer it (the truth is unknown), so this drives the real
verification code, :func:`autotune.study.api.verify_study` (the screen, the race, the confirmation,
the results tables and the verdict), many times against a scripted device whose truth is set:

- A mock ``cnn_small`` study (:mod:`autotune.trial.devices.mock`) is searched once; its screen picks
  the baseline and the finalists, as in a real run.
- Every verification run then comes from :func:`scripted_run`, not from the mock's cost model:
  each configuration has a true throughput (the baseline 1,000 samples/s; in the *power*
  scenario the first finalist 1.3x that and the others 1.0x, in the *null* scenario all
  1.0x) times a per-process factor drawn log-normal with sigma 0.09 (a run-to-run coefficient
  of variation of about 9 %, what fresh processes of one configuration showed on this
  project's 2-core CPUs), and an accuracy drawn binomially at 98.5 % on 2,000 validation
  images, the same for every configuration (equal accuracy).
- Each verification of the study is a new one (new seeds, hence new draws), as ``autotune
  verify`` repeated.

- In the *inferior* scenario the first finalist is truly 1.3x faster and truly 1 pt less
  accurate (97.5 %): the non-inferiority rule must keep it from being recommended.

Power: the share of verifications that recommend the truly faster finalist. False
recommendations: the share of null-scenario verifications that recommend anything, and the
share of inferior-scenario verifications that recommend the less accurate one. One-sided,
the confirmation's 95 % interval has a 2.5 % false rate per confirmed survivor by
construction (two answers confirm up to two). Power at a 1.3x truth with equal accuracy
grows with the confirmation rounds; it is set by the accuracy's non-inferiority more than by
the speed (a t test alone, accuracy drawn binomially per run: 0.55 at 5 rounds, 0.71 at 6,
0.81 at 7, 0.88 at 8), which is why ``verify.rounds`` defaults to 8.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import optuna

from autotune.core.config import TrialConfig, VerifySettings, load_run_config
from autotune.study.api import run_study, verify_study
from autotune.study.storage import FINISHED_STATES
from autotune.study.verification import select_finalists
from autotune.testing import make_measurement, simulate_trial
from autotune.trial.measure import Measurement

#: Run-to-run throughput spread of one configuration in fresh processes (log-normal sigma).
PROCESS_SIGMA = 0.09
#: The true accuracy of every configuration, and the validation images it is measured on.
TRUE_ACCURACY = 0.985
VAL_SAMPLES = 2000
#: The truly faster finalist's speedup in the power and inferior scenarios.
TRUE_SPEEDUP = 1.3
#: The truly faster finalist's accuracy in the inferior scenario: 1 pt below the others'.
INFERIOR_ACCURACY = TRUE_ACCURACY - 0.01
BASELINE_SPS = 1000.0


@dataclass(frozen=True)
class PowerRow:
    """One setting's rates over its simulated verifications.

    Attributes:
        scenario: ``power`` (one finalist truly 1.3x faster), ``null`` (none faster) or
            ``inferior`` (one finalist truly 1.3x faster and 1 pt less accurate).
        rounds: confirmation rounds (``verify.rounds``).
        race_rounds: race rounds (``advanced.verify.race_rounds``).
        finalists: finalists in each race.
        verifications: simulated verifications.
        recommended_true: verifications that recommended the truly faster finalist.
        recommended_any: verifications that recommended anything.
        survivor_true: races in which the truly faster finalist survived (one survivor per
            answer).
        endings: how the verifications ended, ending -> count.
    """

    scenario: str
    rounds: int
    race_rounds: int
    finalists: int
    verifications: int
    recommended_true: int
    recommended_any: int
    survivor_true: int
    endings: dict[str, int]


def _draws(config: TrialConfig, salt: str) -> np.random.Generator:
    """A generator per run: the configuration (seed included) and the scenario's salt."""
    text = config.model_dump_json(exclude={"timeout_s"}) + salt  # the draws as before the limit
    return np.random.default_rng(
        int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    )


def scripted_run(
    truth: dict[str, float], salt: str, accuracy: dict[str, float] | None = None
) -> Callable[[TrialConfig, float], Measurement]:
    """A ``run_trial`` that measures each configuration as its true speedup over the baseline
    (``truth``, by the configuration's knobs as JSON; 1.0 when absent) times the per-process
    noise, at its true accuracy (``accuracy`` by the same key; :data:`TRUE_ACCURACY` when
    absent) drawn on :data:`VAL_SAMPLES` images. SIMULATED."""
    accuracy = accuracy or {}

    def run(config: TrialConfig) -> Measurement:
        rng = _draws(config, salt)
        key = _knobs_key(config.knobs())
        sps = BASELINE_SPS * truth.get(key, 1.0) * float(rng.lognormal(0.0, PROCESS_SIGMA))
        correct = int(rng.binomial(VAL_SAMPLES, accuracy.get(key, TRUE_ACCURACY)))
        return make_measurement(
            throughput_sps=sps,
            window_throughputs_sps=(sps,) * 5,
            val_metric=correct / VAL_SAMPLES,
            val_samples=VAL_SAMPLES,
        )

    return run


def _knobs_key(knobs: dict[str, object]) -> str:
    return repr(sorted(knobs.items()))


def run_verification_power(
    verifications: int,
    settings: list[tuple[int, int]],
    progress: Callable[[str], None] = print,
) -> list[PowerRow]:
    """Simulate ``verifications`` verifications per scenario and setting.

    Args:
        verifications: per scenario and setting (200 or more for the table's claims).
        settings: ``(rounds, race_rounds)`` pairs to simulate; the null and inferior scenarios
            run for the first only (their false rates do not depend on power).
        progress: called with a line now and then.

    Returns:
        One :class:`PowerRow` per scenario and setting.
    """
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    rows: list[PowerRow] = []
    # Thousands of small commits: on tmpfs where there is one (a disk's fsync per commit made
    # a verification take seconds of waiting).
    shm = Path("/dev/shm")
    with tempfile.TemporaryDirectory(
        prefix="autotune-power-", dir=shm if shm.is_dir() else None
    ) as tmp:
        url = f"sqlite:///{Path(tmp) / 'power.db'}"
        config = load_run_config(
            ["space=cnn_small", "device=mock", "study=power", f"storage={url}", "verify.rounds=0"]
        )
        # The mock search whose screen picks the finalists (in this process: milliseconds).
        run_study(config, 20, run_trial_fn=simulate_trial)
        study = optuna.load_study(study_name="power", storage=url)
        trials = study.get_trials(deepcopy=False, states=FINISHED_STATES)
        by_number = {t.number: t for t in trials}
        jobs = [("power", *settings[0])] + [("power", r, a) for r, a in settings[1:]]
        jobs.append(("null", *settings[0]))
        jobs.append(("inferior", *settings[0]))
        for scenario, rounds, race_rounds in jobs:
            verify = VerifySettings(rounds=rounds, race_rounds=race_rounds)
            _, finalists = select_finalists(
                trials,
                {t.number for t in study.best_trials},
                verify.candidates,
                verify.accuracy_tolerance_pt,
                screen_z=verify.screen_z,
            )
            fast = finalists[0]
            fast_key = _knobs_key(dict(by_number[fast].params))
            truth = {fast_key: TRUE_SPEEDUP} if scenario != "null" else {}
            accuracy = {fast_key: INFERIOR_ACCURACY} if scenario == "inferior" else {}
            row = {"true": 0, "any": 0, "survivor": 0}
            endings: dict[str, int] = {}
            for i in range(verifications):
                summary = verify_study(
                    "power",
                    url,
                    settings=verify,
                    run_trial_fn=scripted_run(
                        truth, f"{scenario}/{rounds}/{race_rounds}/{i}", accuracy
                    ),
                )
                rec = summary.recommended
                row["any"] += rec is not None
                row["true"] += rec is not None and rec.trial_number == fast
                row["survivor"] += fast in summary.survivors.values()
                endings[summary.ending] = endings.get(summary.ending, 0) + 1
            rows.append(
                PowerRow(
                    scenario=scenario,
                    rounds=rounds,
                    race_rounds=race_rounds,
                    finalists=len(finalists),
                    verifications=verifications,
                    recommended_true=row["true"],
                    recommended_any=row["any"],
                    survivor_true=row["survivor"],
                    endings=endings,
                )
            )
            progress(
                f"table 6: {scenario}, {rounds} confirmation rounds: recommended the true one "
                f"{row['true']}/{verifications}, anything {row['any']}/{verifications}"
            )
    return rows
