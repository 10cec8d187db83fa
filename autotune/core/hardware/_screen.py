"""The precision screen: a precision whose peak FLOP/s on this device is a small share of
fp32's is removed from the space before a new study opens.

The peaks are the device's (:attr:`DeviceCapabilities.peak_flops_per_s`): the square-matmul
peak measured in this process on the CPU, NVIDIA's published dense peak on a known CUDA GPU,
the profile's rates on the mock device. Nothing here assumes what a precision does on some
hardware; a device without a known fp32 peak is not screened. fp32, the baseline's precision,
is the reference and is never screened. The screen is stored with the study
(:meth:`PrecisionScreen.to_record`) and a resumed study keeps it
(:func:`study_precision_screen`): a new measurement never changes a study's space.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from autotune.core.config import PRECISIONS, SearchSpace
from autotune.core.exceptions import ConfigError
from autotune.core.flops import flops_text
from autotune.core.hardware._capabilities import DeviceCapabilities, precision_reason

__all__ = ["REFERENCE_PRECISION", "PrecisionScreen", "screen_precisions", "study_precision_screen"]

#: The precision every other one is compared with: the baseline's (PyTorch's default).
REFERENCE_PRECISION = "fp32"

#: The key of the study record (user attribute ``autotune``) that holds the screen.
RECORD_KEY = "precision_screen"


def _peak_name(kind: str) -> str:
    """What the peaks of a device kind are, for the screen's lines."""
    return "matmul peak" if kind == "cpu" else "dense peak"


def _ratio_text(peak: float, reference: float) -> str:
    """``1/123`` for a peak 123 times below the reference (3 significant digits, or whole
    numbers from 100 on: ``1/1.67``, ``1/12.3``, ``1/1,234``)."""
    times = reference / peak
    return f"1/{times:,.0f}" if times >= 100 else f"1/{times:.3g}"


@dataclass(frozen=True)
class PrecisionScreen:
    """Which precisions a study leaves out because their peak is a small share of fp32's.

    Attributes:
        min_peak_ratio: ``advanced.hardware.min_peak_ratio`` when the screen was made: a precision
            whose peak is below this share of fp32's is screened out.
        peak_flops_per_s: the device's peak FLOP/s per precision the screen read (one
            device; empty: unknown, nothing screened).
        peak_name: what the peaks are (``matmul peak`` on the CPU, ``dense peak`` otherwise).
        peak_source: where the peaks come from (the run header's source).
        considered: the space's precisions the device can run, which the screen judged.
        screened: the precisions removed from the space.
        kept_below: precisions below the ratio that stay, because the space offers no other
            precision the device can run at least that fast (a space of ``fp16`` alone).
        stored: True when read from the study (a resumed study), False when made now.
    """

    min_peak_ratio: float
    peak_flops_per_s: Mapping[str, float] = field(default_factory=dict)
    peak_name: str = "peak"
    peak_source: str = ""
    considered: tuple[str, ...] = ()
    screened: tuple[str, ...] = ()
    kept_below: tuple[str, ...] = ()
    stored: bool = False

    def ratio(self, precision: str) -> float | None:
        """``precision``'s peak over fp32's, or None when either is unknown."""
        peak = self.peak_flops_per_s.get(precision)
        reference = self.peak_flops_per_s.get(REFERENCE_PRECISION)
        if peak is None or not reference or reference <= 0:
            return None
        return peak / reference

    def is_below(self, precision: str, min_peak_ratio: float | None = None) -> bool:
        """True when ``precision`` (never fp32) has a known peak below ``min_peak_ratio`` (the
        screen's own unless given) of fp32's."""
        ratio = self.ratio(precision)
        limit = self.min_peak_ratio if min_peak_ratio is None else min_peak_ratio
        return precision != REFERENCE_PRECISION and ratio is not None and ratio < limit

    def decide(self, min_peak_ratio: float) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """``(screened, kept_below)`` of :attr:`considered` at ``min_peak_ratio``, from the
        screen's peaks: every precision below the ratio is screened, unless all of them are
        (then they are all kept: the screen never empties the space).
        """
        below = tuple(p for p in self.considered if self.is_below(p, min_peak_ratio))
        if below and len(below) == len(self.considered):
            return (), below
        return below, ()

    def _comparison(self, precision: str) -> str:
        peak = self.peak_flops_per_s[precision]
        reference = self.peak_flops_per_s[REFERENCE_PRECISION]
        return (
            f"{self.peak_name} {flops_text(peak)} is {_ratio_text(peak, reference)} of "
            f"{REFERENCE_PRECISION}'s {flops_text(reference)}"
        )

    def _setting(self) -> str:
        stored = "; stored with the study" if self.stored else ""
        return f"advanced.hardware.min_peak_ratio={self.min_peak_ratio:g}{stored}"

    def reasons(self) -> dict[str, str]:
        """Why each screened precision is removed, by precision (the header prints
        ``skipped precision=fp16: <reason>``)."""
        return {p: f"{self._comparison(p)} (below {self._setting()})" for p in self.screened}

    def notes(self) -> list[str]:
        """One line per precision kept although below the ratio."""
        return [
            f"kept precision={p}: {self._comparison(p)}, below {self._setting()}, but the space "
            "has no faster precision the device can run (advanced.hardware.min_peak_ratio=0 silences this)"
            for p in self.kept_below
        ]

    def to_record(self) -> dict[str, Any]:
        """The screen as the study record keeps it (JSON: FLOP/s, precision names)."""
        return {
            "min_peak_ratio": self.min_peak_ratio,
            "reference": REFERENCE_PRECISION,
            "peak_flops_per_s": dict(self.peak_flops_per_s),
            "peak_name": self.peak_name,
            "peak_source": self.peak_source,
            "considered": list(self.considered),
            "screened": list(self.screened),
            "kept_below": list(self.kept_below),
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> PrecisionScreen:
        """A screen read back from a study record (:meth:`to_record`), marked ``stored``.

        Raises:
            ConfigError: the record is not a screen this version can read.
        """
        try:
            return cls(
                min_peak_ratio=float(record["min_peak_ratio"]),
                peak_flops_per_s={str(k): float(v) for k, v in record["peak_flops_per_s"].items()},
                peak_name=str(record.get("peak_name", "peak")),
                peak_source=str(record.get("peak_source", "")),
                considered=tuple(record.get("considered", ())),
                screened=tuple(record["screened"]),
                kept_below=tuple(record.get("kept_below", ())),
                stored=True,
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ConfigError(f"the study's {RECORD_KEY} record cannot be read ({e!r})") from None


def _runnable_precisions(space: SearchSpace, caps: DeviceCapabilities) -> tuple[str, ...]:
    """The space's precisions the feasibility rules let the device run, in canonical order."""
    offered = space.precision.values()
    return tuple(p for p in PRECISIONS if p in offered and precision_reason(p, caps) is None)


def screen_precisions(
    space: SearchSpace, caps: DeviceCapabilities, min_peak_ratio: float
) -> PrecisionScreen:
    """Screen the space's precisions against the device's peaks.

    A precision other than fp32 whose peak is below ``min_peak_ratio`` of fp32's is screened
    out, unless every precision the space offers and the device can run is below it (a space
    of ``fp16`` alone): then they are kept, and :meth:`PrecisionScreen.notes` says so. A
    precision without a known peak, and every precision on a device without a known fp32
    peak (a CUDA GPU missing from the published table), is kept.

    Args:
        space: the search space (before the feasibility rules).
        caps: the device, with its peaks per precision (FLOP/s of one device).
        min_peak_ratio: ``advanced.hardware.min_peak_ratio``, in [0, 1]; 0 keeps every precision.

    Returns:
        The screen, not yet stored.
    """
    screen = PrecisionScreen(
        min_peak_ratio=min_peak_ratio,
        peak_flops_per_s=dict(caps.peak_flops_per_s),
        peak_name=_peak_name(caps.kind),
        peak_source=caps.peak_flops_source,
        considered=_runnable_precisions(space, caps),
    )
    screened, kept_below = screen.decide(min_peak_ratio)
    return replace(screen, screened=screened, kept_below=kept_below)


def study_precision_screen(
    space: SearchSpace,
    caps: DeviceCapabilities,
    min_peak_ratio: float,
    stored_screen: Mapping[str, Any] | None,
    study_name: str,
    *,
    new_study: bool,
) -> PrecisionScreen | None:
    """The screen a run uses: the study's stored one when it exists, else a new one.

    - A new study: :func:`screen_precisions` now.
    - A study without a stored screen (made before the screen existed): None, nothing is
      screened, so the study keeps the space it was made with.
    - A stored screen: that screen, whatever the device measures now. A
      ``min_peak_ratio`` other than the stored one is refused when, on the stored peaks, it
      would screen other precisions (the study's space would change).

    Args:
        space: the search space (before the feasibility rules).
        caps: the device.
        min_peak_ratio: ``advanced.hardware.min_peak_ratio`` of this run.
        stored_screen: the study's stored screen (:meth:`PrecisionScreen.to_record`; read by
            :attr:`autotune.study.trial_result.StudyAttributes.precision_screen`), None without one.
        study_name: the study, for messages.
        new_study: no study of that name exists yet.

    Raises:
        ConfigError: the ratio would change a stored screen, or the record cannot be read.
    """
    if new_study:
        return screen_precisions(space, caps, min_peak_ratio)
    if stored_screen is None:
        return None
    screen = PrecisionScreen.from_record(stored_screen)
    if min_peak_ratio != screen.min_peak_ratio:
        screened, kept_below = screen.decide(min_peak_ratio)
        if (screened, kept_below) != (screen.screened, screen.kept_below):
            removed = ", ".join(screen.screened) or "no precision"
            raise ConfigError(
                f"advanced.hardware.min_peak_ratio={min_peak_ratio:g}: study={study_name} was made with "
                f"advanced.hardware.min_peak_ratio={screen.min_peak_ratio:g}, which screened out "
                f"{removed}, and keeps that screen; choose a new study name (study=NAME) or "
                f"advanced.hardware.min_peak_ratio={screen.min_peak_ratio:g}"
            )
    return screen
