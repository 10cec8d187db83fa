"""Units every layer shares: bytes per MiB, the display unit of memory.

Figures are stored in base units (bytes, seconds, samples/s); a unit is chosen only for
display, as ``torch.utils.benchmark`` keeps seconds. Here at the bottom of the layers so that
the hardware layer, the simulated machines, the verdicts and the outputs use one constant.
"""

from __future__ import annotations

__all__ = ["MIB"]

#: Bytes per MiB (2**20), the display unit of peak and device memory.
MIB = 1 << 20
