"""XLA devices through PJRT plugins (TPUs, GPUs, the CPU), as `torch_xla` lists them."""

from __future__ import annotations

# typing costs 9 ms of import time; annotations are strings (the __future__ import), so
# its names are needed only by type checkers.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List


def devices() -> List[str]:
    """The usable XLA devices (`xla:0`, `xla:1`, ...), accelerators first."""
    from . import Device, _accel

    return [Device(d) for d in _accel.devices_of("xla")]
