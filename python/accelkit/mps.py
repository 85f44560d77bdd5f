"""Apple GPUs, as `torch.mps` and `torch.backends.mps` ask about them (the first Metal
adapter)."""

from __future__ import annotations

import sys

from . import _accel


def is_built() -> bool:
    """Whether this build can use Apple's GPU (`torch.backends.mps.is_built()`): on macOS."""
    return sys.platform == "darwin"


def is_available() -> bool:
    """Whether an Apple GPU is usable (`torch.backends.mps.is_available()`)."""
    return bool(_accel.devices_of("mps"))


def synchronize() -> None:
    """Waits until the GPU has finished what was queued (`torch.mps.synchronize()`)."""
    _accel.synchronize("mps")


def device_count() -> int:
    return 1 if is_available() else 0
