"""The resident set size of this process: now, at its peak, and resetting the peak (the CPU's
peak memory: the growth of the peak RSS over a trial)."""

from __future__ import annotations

import resource
import sys

__all__ = ["current_rss_bytes", "peak_rss_bytes", "reset_peak_rss"]


def current_rss_bytes() -> int:
    """Resident set size of this process now (bytes); Linux reads /proc, others use the peak."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return pages * resource.getpagesize()
    except OSError:  # pragma: no cover (non-Linux)
        return peak_rss_bytes()


def reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark (Linux >= 4.0, ``/proc/self/clear_refs`` value 5).

    Returns:
        True when the reset worked; otherwise the peak is the process lifetime's.
    """
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss_bytes() -> int:
    """Peak resident set size of this process (bytes) since start or :func:`reset_peak_rss`."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:  # pragma: no cover (non-Linux)
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)
