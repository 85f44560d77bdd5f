"""XLA devices through PJRT plugins (TPUs, GPUs, the CPU), as `torch_xla` lists them."""

from __future__ import annotations

from typing import List


def devices() -> List[str]:
    """The usable XLA devices (`xla:0`, `xla:1`, ...), accelerators first."""
    from . import Device, _accel

    return [Device(d) for d in _accel.devices_of("xla")]
