"""Benchmarks with real statistics: warm-up, synchronisation, median with its confidence
interval, IQR, GFLOP/s and % of the device's peak."""

from __future__ import annotations

# typing costs 9 ms of import time; annotations are strings (the __future__ import), so
# its names are needed only by type checkers.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional, Tuple, Union

from . import _accel
from ._objects import Record, load


def matmul(device: Optional[str] = None, size: Union[int, Tuple[int, int, int]] = 1024,
           dtype: str = "f32", warmup: int = 3, iters: Optional[int] = None,
           min_time: float = 1.0, batch: int = 1, linear: bool = False) -> Record:
    """Times `a @ b` on `device` (default: the best one) for `size` x `size` random operands,
    or for `size=(m, n, k)` an m x k by a k x n matrix; `linear=True` stores B as n x k and
    multiplies it transposed (`x @ W.t()`, as `torch.nn.Linear` does). `iters` timed runs, or
    as many as fill `min_time` seconds. The result has `stats` (median_s, median_ci95_s,
    iqr_s...), `gflop_per_s`, `percent_of_peak` and `peak`."""
    from . import best

    dev = str(device) if device is not None else str(best())
    if isinstance(size, (tuple, list)):
        if len(size) != 3:
            raise ValueError(f"size is N or (m, n, k), not {size!r}")
        shape = tuple(int(s) for s in size)
        n = shape[0]
    else:
        shape, n = None, int(size)
    return load(_accel.bench_matmul_json(dev, n, dtype, int(warmup), iters, float(min_time),
                                         int(batch), shape, bool(linear)), "MatmulRun")
