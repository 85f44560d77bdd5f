"""Apple GPUs, as `torch.backends.mps` asks about them (the first Metal adapter)."""

from __future__ import annotations

from . import _accel


def is_available() -> bool:
    """Whether an Apple GPU is usable (`torch.backends.mps.is_available()`)."""
    return bool(_accel.devices_of("mps"))
