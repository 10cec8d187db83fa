"""Studies with each kind of verdict, for the tests that check every output says the same.

One database holds three mock studies (run in this process, milliseconds a trial):

- ``recommends``: searched and verified with the mock cost model; its verification recommends
  a configuration.
- ``nothing``: searched without a verification, then verified with a fake ``run_trial`` that
  measures every configuration at the same speed, so no finalist beats the baseline in the
  race: "verified: not faster".
- ``unverified``: searched with ``verify.rounds=0``; it has no verification.
"""

from __future__ import annotations

from dataclasses import dataclass

import optuna
import pytest

from autotune.core.config import TrialConfig
from autotune.study.api import verify_study
from autotune.study.storage import ResultsStore
from autotune.study.verification import VerificationSummary, load_verification
from autotune.testing import make_measurement
from autotune.trial.measure import Measurement
from tests.studies.mock import run_mock_study, sqlite_url

#: Finished trials of each study.
N_TRIALS = 8


def same_speed(config: TrialConfig) -> Measurement:
    """A ``run_trial`` under which every configuration is exactly as fast and accurate as the
    baseline (1,000 samples/s, 90 %): nothing is verifiably faster."""
    return make_measurement()


@dataclass(frozen=True)
class VerdictStudies:
    """The database and the names of its three studies.

    Attributes:
        url: its SQLite storage URL.
        recommends: a study whose verification recommends a configuration.
        nothing: a study whose verification finds nothing that qualifies.
        unverified: a study without a verification.
    """

    url: str
    recommends: str = "recommends"
    nothing: str = "nothing"
    unverified: str = "unverified"

    def summary(self, study_name: str) -> VerificationSummary | None:
        """The study's newest finished verification, read straight from the database."""
        study = optuna.load_study(study_name=study_name, storage=self.url)
        with ResultsStore.open(self.url, create=False) as results:
            return load_verification(study, results)


_SHARED: dict[str, VerdictStudies] = {}


def shared_verdict_studies(tmp_path_factory: pytest.TempPathFactory) -> VerdictStudies:
    """One :class:`VerdictStudies` per test session (built on first use; tests only read it)."""
    if "studies" not in _SHARED:
        url = sqlite_url(tmp_path_factory.mktemp("verdict_studies"))
        studies = VerdictStudies(url)
        # 1 pt: the mock's fastest finalist within the screen is ~0.6 pt less accurate, which
        # the confirmation's default 0.5 pt would refuse (verified: not faster).
        run_mock_study(
            url,
            N_TRIALS,
            study=studies.recommends,
            constrained=False,
            extra=["verify.accuracy_tolerance_pt=1.0"],
        )
        run_mock_study(
            url, N_TRIALS, study=studies.nothing, constrained=False, extra=["verify.rounds=0"]
        )
        verify_study(studies.nothing, url, run_trial_fn=same_speed)
        run_mock_study(
            url, N_TRIALS, study=studies.unverified, constrained=False, extra=["verify.rounds=0"]
        )
        _SHARED["studies"] = studies
    return _SHARED["studies"]
