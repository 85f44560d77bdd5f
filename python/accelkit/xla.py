"""XLA devices through PJRT plugins (TPUs, GPUs, the CPU), as `torch_xla` lists them."""

from __future__ import annotations

# typing costs 9 ms of import time; annotations are strings (the __future__ import), so
# its names are needed only by type checkers.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Optional

    from ._tensor import device as Device


def devices() -> List["Device"]:
    """The usable XLA devices (`xla:0`, `xla:1`, ...), accelerators first
    (`torch_xla.devices()`)."""
    from . import _accel
    from ._tensor import device

    return [device(d) for d in _accel.devices_of("xla")]


def device(n: Optional[int] = None) -> "Device":
    """An XLA device (`torch_xla.device()`): the first, or number `n`; an error naming why
    when there is none."""
    from . import _accel
    from ._tensor import device as make

    name = f"xla:{0 if n is None else int(n)}"
    _accel.device_name(name)  # the reason and the fix, for a device that is not there
    return make(name)


def sync() -> None:
    """Waits until every XLA device has finished what was queued (`torch_xla.sync()`)."""
    from . import _accel

    for d in _accel.devices_of("xla"):
        _accel.synchronize(d)
