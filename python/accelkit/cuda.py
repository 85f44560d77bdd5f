"""NVIDIA GPUs, as `torch.cuda` asks about them: which there are, and what accel's allocator
holds on each (`memory_allocated` is accel's tensors, as PyTorch's is PyTorch's)."""

from __future__ import annotations

from . import _accel

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, Optional, Tuple

_current = [0]


def is_available() -> bool:
    """Whether at least one CUDA GPU is usable (`torch.cuda.is_available()`)."""
    return device_count() > 0


def device_count() -> int:
    """How many CUDA GPUs are usable, after CUDA_VISIBLE_DEVICES."""
    return len(_accel.devices_of("cuda"))


def is_initialized() -> bool:
    return is_available()


def _name(device: Optional[Any]) -> str:
    """`cuda:N` for a device given as None (the current one), an index, a name or a device."""
    if device is None:
        return f"cuda:{_current[0]}"
    if isinstance(device, int) and not isinstance(device, bool):
        return f"cuda:{device}"
    name = str(device)
    return "cuda:0" if name == "cuda" else name


def current_device() -> int:
    """The index of the current GPU (`torch.cuda.current_device()`): 0 unless `set_device`
    chose another; an error naming why when there is no usable GPU."""
    if not is_available():
        _accel.device_name(f"cuda:{_current[0]}")  # raises the reason and the fix
    return _current[0]


def set_device(device: Any) -> None:
    """Makes `device` the current GPU for the calls here that take no device."""
    name = _name(device)
    _accel.device_name(name)  # an error naming what exists, for a GPU that does not
    _current[0] = int(name.split(":")[1])


def get_device_name(device: Optional[Any] = None) -> str:
    """The GPU's name (`torch.cuda.get_device_name(i)`); AccelError listing what exists."""
    return _accel.device_name(_name(device))


def synchronize(device: Optional[Any] = None) -> None:
    """Waits until the GPU has finished what was queued (`torch.cuda.synchronize()`)."""
    _accel.synchronize(_name(device))


def _stats(device: Optional[Any]) -> Tuple[int, int, int, Optional[int], Optional[int]]:
    return _accel.memory_stats(_name(device))


def memory_allocated(device: Optional[Any] = None) -> int:
    """Bytes held by accel's live tensors on the GPU (0 where it has none, as PyTorch)."""
    return _stats(device)[0]


def memory_reserved(device: Optional[Any] = None) -> int:
    """Bytes accel's allocator holds from the driver: live tensors plus its cache."""
    return _stats(device)[1]


def max_memory_allocated(device: Optional[Any] = None) -> int:
    """The most `memory_allocated` has been since the start or `reset_peak_memory_stats`."""
    return _stats(device)[2]


def memory_stats(device: Optional[Any] = None) -> Dict[str, int]:
    """The counters under PyTorch's keys (`allocated_bytes.all.current` and the like)."""
    allocated, reserved, peak, _free, _total = _stats(device)
    return {"allocated_bytes.all.current": allocated, "allocated_bytes.all.peak": peak,
            "reserved_bytes.all.current": reserved}


def reset_peak_memory_stats(device: Optional[Any] = None) -> None:
    _accel.reset_peak(_name(device))


def empty_cache() -> None:
    """Returns the allocator's cached, unused blocks to the driver (`torch.cuda.empty_cache()`)."""
    for d in _accel.devices_of("cuda"):
        _accel.empty_cache(d)


def mem_get_info(device: Optional[Any] = None) -> Tuple[int, int]:
    """(free, total) bytes of the GPU, as the driver counts them (`torch.cuda.mem_get_info`)."""
    name = _name(device)
    _accel.device_name(name)  # the reason, for a GPU that is not there
    _a, _r, _p, free, total = _accel.memory_stats(name)
    if free is None or total is None:
        from ._errors import AccelError

        raise AccelError(f"{name} does not report its free memory")
    return free, total


def utilization(device: Optional[Any] = None) -> int:
    """Percent of the last sample period the GPU was busy (`torch.cuda.utilization`), read
    through NVML without starting CUDA."""
    import json

    name = _name(device)
    idx = int(name.split(":")[1])
    readings = [r for r in json.loads(_accel.snapshot_json()).get("devices", [])
                if r.get("accel_device") == name or (r.get("vendor") == "nvidia"
                                                     and r.get("index") == idx)]
    if not readings or readings[0].get("utilization_percent") is None:
        from ._errors import AccelError

        raise AccelError(f"no utilisation reading for {name} (NVML reports none here)")
    return int(round(readings[0]["utilization_percent"]))
