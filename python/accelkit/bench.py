"""Benchmarks with real statistics: warm-up, synchronisation, median with its confidence
interval, IQR, GFLOP/s and % of the device's peak."""

from __future__ import annotations

# typing costs 9 ms of import time; annotations are strings (the __future__ import), so
# its names are needed only by type checkers.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

from . import _accel
from ._objects import Record, load


def matmul(device: Optional[str] = None, size: int = 1024, dtype: str = "f32", warmup: int = 3,
           iters: Optional[int] = None, min_time: float = 1.0, batch: int = 1) -> Record:
    """Times `a @ b` for `size` x `size` random operands on `device` (default: the best one):
    `iters` timed runs, or as many as fill `min_time` seconds. The result has `stats`
    (median_s, median_ci95_s, iqr_s...), `gflop_per_s`, `percent_of_peak` and `peak`."""
    from . import best

    dev = str(device) if device is not None else str(best())
    return load(_accel.bench_matmul_json(dev, int(size), dtype, int(warmup), iters,
                                         float(min_time), int(batch)), "MatmulRun")
