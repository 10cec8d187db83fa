"""The study's record of its machine: the fingerprint a study was measured on, kept with the
study, and the refusal to mix throughputs from two machines."""

from __future__ import annotations

from typing import TYPE_CHECKING

from autotune.core.exceptions import ConfigError
from autotune.core.hardware import MachineFingerprint, fingerprint_mismatch
from autotune.study.trial_result import StudyAttributes

if TYPE_CHECKING:
    import optuna

__all__ = ["check_study_hardware"]


def check_study_hardware(
    study: optuna.Study, fingerprint: MachineFingerprint | None, *, allow_change: bool
) -> None:
    """Record the machine in the study's ``hardware`` user attribute, or refuse another one.

    A new study (or one made before fingerprints existed) records ``fingerprint``. An
    existing study compares it with the machine it last ran on; on a difference it raises,
    unless ``allow_change``: then the change is appended to the ``hardware_changes`` user
    attribute as ``{"from_trial": <first trial number on the new machine>, "hardware": ...}``.

    Raises:
        ConfigError: the study was measured on other hardware and ``allow_change`` is False.
    """
    if fingerprint is None:
        return
    current = fingerprint.to_dict()
    recorded = StudyAttributes.from_study(study)
    if recorded.hardware is None:
        study.set_user_attr("hardware", current)
        return
    changes = [dict(c) for c in recorded.hardware_changes]
    last = recorded.latest_hardware or recorded.hardware
    diff = fingerprint_mismatch(last, current)
    if diff is None:
        return
    if not allow_change:
        raise ConfigError(
            f"study={study.study_name}: it was measured on other hardware ({diff}); throughputs "
            "from two machines are not comparable. Start a new study (study=NAME, optionally "
            f"warm_start={study.study_name}) or pass --allow-hardware-change"
        )
    changes.append({"from_trial": len(study.trials), "hardware": current})
    study.set_user_attr("hardware_changes", changes)
