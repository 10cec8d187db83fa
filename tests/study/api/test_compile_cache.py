"""A study's trials and verification runs compile into the study's own cache directory
(``advanced.measure.compile_cache=study``; autotune/study/api/_run.py and _verify.py open it)."""

from __future__ import annotations

from autotune.core.config import TrialConfig
from autotune.study.api import run_study
from autotune.study.search._launcher import _STUDY_CACHE_DIR, study_compile_cache_dir
from autotune.testing import FakeRunTrial, simulate_trial
from autotune.trial.measure import Measurement
from tests.studies.runs import mock_run_config


def test_the_search_and_its_verification_run_inside_the_studys_cache(sqlite_url: str) -> None:
    seen: list[str | None] = []

    def recording(config: TrialConfig) -> Measurement:
        seen.append(_STUDY_CACHE_DIR.get())  # what the runner would give the trial's ranks
        return simulate_trial(config)

    config = mock_run_config(sqlite_url, "verify.rounds=3", "advanced.verify.race_rounds=1")

    result = run_study(config, 6, run_trial_fn=FakeRunTrial(then=recording))

    assert result.verification is not None  # verification runs were made too
    assert len(seen) > 6
    assert set(seen) == {str(study_compile_cache_dir(config.storage, config.study))}
    assert _STUDY_CACHE_DIR.get() is None  # only inside the study
