"""The device-agnostic API of PyTorch 2.6+ (`torch.accelerator`): the machine's accelerator,
whichever vendor's, and its memory (`accel.accelerator.memory`, as `torch.accelerator.memory`
of 2.9). The accelerator is the best device's kind (`accel.best()`: CUDA, then Apple's GPU,
then XLA, then another GPU through wgpu); the CPU is none."""

from __future__ import annotations

from . import _accel

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterator, List, Optional

    from ._tensor import device as Device

_index = [0]


def _kind() -> Optional[str]:
    best = _accel.best()
    return None if best == "cpu" else best.split(":")[0]


def _devices() -> List[str]:
    k = _kind()
    return [] if k is None else _accel.devices_of(k)


def is_available() -> bool:
    """Whether the machine has an accelerator accel can use."""
    return _kind() is not None


def current_accelerator(check_available: bool = False) -> Optional["Device"]:
    """The accelerator's kind as a device without an index (`device(type='cuda')`), or None
    on a machine with only the CPU."""
    from ._tensor import device

    k = _kind()
    return None if k is None else device(k)


def device_count() -> int:
    """How many devices of the accelerator's kind there are (0 without one)."""
    return len(_devices())


def current_device_index() -> int:
    """The index of the current accelerator device (0 unless `set_device_index` chose)."""
    return _index[0]


current_device_idx = current_device_index


def _checked(index: int) -> int:
    n = device_count()
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < max(n, 1):
        from ._errors import AccelValueError

        raise AccelValueError(f"accelerator device index {index!r} is out of range: this "
                              f"machine has {n} such device(s)")
    return index


def set_device_index(device: Any) -> None:
    """Makes device number `device` of the accelerator's kind the current one."""
    _index[0] = _checked(getattr(device, "index", device) or 0)


set_device_idx = set_device_index


class device_index:
    """`with accel.accelerator.device_index(1):` makes device 1 current inside the block."""

    def __init__(self, device: Optional[int]):
        self.device, self.prev = device, None

    def __enter__(self) -> None:
        if self.device is not None:
            self.prev = _index[0]
            set_device_index(self.device)

    def __exit__(self, *exc: Any) -> None:
        if self.prev is not None:
            _index[0] = self.prev


def _name(device: Any = None) -> str:
    if device is None or isinstance(device, int):
        k = _kind()
        if k is None:
            return "cpu"
        devs = _devices()
        i = _index[0] if device is None else device
        return devs[i] if 0 <= i < len(devs) else f"{k}:{i}"
    return str(device)


def synchronize(device: Any = None) -> None:
    """Waits until the accelerator has finished what was queued."""
    _accel.synchronize(_name(device))


class _Memory:
    """`accel.accelerator.memory`: what accel's allocator holds on the current accelerator
    device (or the one named), as `torch.accelerator.memory` reports PyTorch's."""

    def memory_allocated(self, device: Any = None) -> int:
        return _accel.memory_stats(_name(device))[0]

    def memory_reserved(self, device: Any = None) -> int:
        return _accel.memory_stats(_name(device))[1]

    def max_memory_allocated(self, device: Any = None) -> int:
        return _accel.memory_stats(_name(device))[2]

    def max_memory_reserved(self, device: Any = None) -> int:
        # accel's allocator keeps no peak of its reservations: the current one is a floor.
        return max(_accel.memory_stats(_name(device))[1], self.max_memory_allocated(device))

    def memory_stats(self, device: Any = None) -> dict:
        allocated, reserved, peak, _f, _t = _accel.memory_stats(_name(device))
        return {"allocated_bytes.all.current": allocated, "allocated_bytes.all.peak": peak,
                "reserved_bytes.all.current": reserved}

    def empty_cache(self) -> None:
        for d in _devices():
            _accel.empty_cache(d)

    def reset_peak_memory_stats(self, device: Any = None) -> None:
        _accel.reset_peak(_name(device))

    def get_memory_info(self, device: Any = None) -> tuple:
        """(free, total) bytes of the device, where it says."""
        _a, _r, _p, free, total = _accel.memory_stats(_name(device))
        if free is None or total is None:
            from ._errors import AccelError

            raise AccelError(f"{_name(device)} does not report its free memory")
        return free, total

    def __iter__(self) -> Iterator[str]:
        return iter(("memory_allocated", "memory_reserved", "max_memory_allocated",
                     "max_memory_reserved", "memory_stats", "empty_cache",
                     "reset_peak_memory_stats", "get_memory_info"))


memory = _Memory()
memory_allocated = memory.memory_allocated
memory_reserved = memory.memory_reserved
max_memory_allocated = memory.max_memory_allocated
max_memory_reserved = memory.max_memory_reserved
memory_stats = memory.memory_stats
empty_cache = memory.empty_cache
reset_peak_memory_stats = memory.reset_peak_memory_stats
get_memory_info = memory.get_memory_info
