"""accel: which accelerators this machine has, and what they are doing, without PyTorch.

>>> import accelkit as accel
>>> accel.best()                      # cuda:0, mps, xla:0, wgpu:0 or cpu
>>> accel.cuda.is_available()
>>> accel.doctor()                    # why a device is or is not usable
>>> with accel.record(interval=0.5) as rec:
...     accel.bench.matmul(size=2048)
>>> rec.summary()
>>> with accel.watch(interval=1.0):   # the host and every device, updated in place
...     accel.bench.matmul(size=2048)

Importing loads no backend: each is probed the first time a call asks about it. Errors are
`accel.AccelError` with the reason and the fix.
"""

from __future__ import annotations

# typing costs 9 ms of import time; annotations are strings (the __future__ import), so
# its names are needed only by type checkers.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, List, Optional

from . import _accel
from ._errors import AccelError, AccelIndexError, AccelTypeError, AccelValueError
from ._tensor import (
    Size, Tensor, arange, as_tensor, bfloat16, device, double, dtype, float, float16, float32,
    float64, from_dlpack, full, half, int, int32, int64, long, manual_seed, matmul, ones,
    ones_like, rand, randn, synchronize, tensor, zeros, zeros_like)
from ._objects import Probes, Readings, Record, load
from ._record import Measurement, Recording, measure, record
from ._watch import Watch, watch
from . import accelerator, backends, bench, cuda, mps, nn, xla

Device = device

if TYPE_CHECKING:  # typed views of the records, for editors (generated from schemas/)
    from ._types import Diagnosis, Snapshot

__version__: str = _accel.version()


def _use_the_installed_command_as_probe_helper() -> None:
    import os
    import sys
    import sysconfig

    # The environment this module is installed in is where its CUDA wheels and PJRT plugins
    # are: a notebook kernel in a venv often runs without VIRTUAL_ENV (activation sets it).
    # Named to the native half, not set in os.environ: `import accelkit` changes no variable
    # that the notebook's children would inherit.
    if sys.prefix != sys.base_prefix:
        _accel.set_python_prefix(sys.prefix)

    exe = os.path.join(sysconfig.get_path("scripts"), "accel")
    if os.path.isfile(exe) and os.access(exe, os.X_OK):
        _accel.enable_probe_helper(exe)


_use_the_installed_command_as_probe_helper()

__all__ = [
    "AccelError", "AccelIndexError", "AccelTypeError", "AccelValueError", "Device",
    "Measurement", "Readings", "Record", "Recording", "Size", "Tensor", "Watch", "accelerator",
    "arange", "as_tensor", "backends", "bench", "best", "bfloat16", "cuda", "device", "devices",
    "doctor", "double", "dtype", "float", "float16", "float32", "float64", "from_dlpack", "full",
    "half", "int", "int32", "int64", "long", "manual_seed", "matmul", "measure", "mps", "nn",
    "ones", "ones_like", "pick", "probes", "rand", "randn", "record", "snapshot",
    "synchronize", "tensor", "watch", "xla", "zeros", "zeros_like",
]


def best() -> Device:
    """The best available device: CUDA, then Apple's GPU (mps), XLA, another GPU (wgpu), else
    the CPU, the seeds' `"cuda" if torch.cuda.is_available() else ...`."""
    return Device(_accel.best())


def devices() -> List[Device]:
    """Every usable device, of every backend."""
    return [Device(d) for p in probes() for d in (x.device for x in p.devices)]


def probes() -> "Probes":
    """What each backend's probe found: its devices with their capabilities, or why there
    are none and how to fix it (`accel devices`)."""
    import json

    # An unavailable backend's probe has no `devices` field: an empty list reads the same.
    return Probes(Record({"devices": [], **p}, "Probe") for p in json.loads(_accel.probes_json()))


def doctor() -> "Diagnosis":
    """The doctor's checklist, section by backend, each check PASS/FAIL/WARN/SKIP with what
    was found and the fix (`accel doctor`); `.to_dict()` for plain data."""
    return load(_accel.doctor_json(), "Diagnosis")


def snapshot() -> "Snapshot":
    """The host (CPU %, RAM) and every device's load and memory now, read from the vendors'
    monitoring interfaces (`accel monitor --json`)."""
    return load(_accel.snapshot_json(), "Snapshot")


def pick(min_free: Optional[int] = None, max_util: Optional[float] = None, count: int = 1,
         vendor: str = "nvidia") -> "Readings":
    """The `count` least-loaded devices with at least `min_free` bytes free and at most
    `max_util` percent busy (GPUtil's `getAvailable`); AccelError when too few qualify."""
    return Readings(load(_accel.pick_json(min_free, max_util, count, vendor), "Reading"))


# Import-time helpers, not API: `dir(accel)` and tab completion list only the module's names.
del TYPE_CHECKING, annotations
