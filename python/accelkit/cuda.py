"""NVIDIA GPUs, as `torch.cuda` asks about them."""

from __future__ import annotations

from . import _accel


def is_available() -> bool:
    """Whether at least one CUDA GPU is usable (`torch.cuda.is_available()`)."""
    return device_count() > 0


def device_count() -> int:
    """How many CUDA GPUs are usable, after CUDA_VISIBLE_DEVICES."""
    return len(_accel.devices_of("cuda"))


def get_device_name(i: int = 0) -> str:
    """The GPU's name (`torch.cuda.get_device_name(i)`); AccelError listing what exists."""
    return _accel.device_name(f"cuda:{int(i)}")
