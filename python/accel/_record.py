"""`with accel.record(interval=0.5) as rec:` samples the host and every device on a native
thread while the block runs (accel's long calls release the GIL, so it goes on beside them)."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from . import _accel
from ._objects import Record, wrap


class Recording:
    """The samples taken while a block ran: `.samples` (records), `.rows()` (flat dicts),
    `.summary()`, `.to_pandas()` (with pandas), `.plot()` (with matplotlib)."""

    def __init__(self, interval: float, live: bool = False) -> None:
        self._native = _accel.Recorder(float(interval))
        self._raw: List[Dict[str, Any]] = []
        self.interval = interval
        self._live: Any = None
        if live:
            from ._watch import Watch

            self._live = Watch(interval, _recorder=self._native)

    def __enter__(self) -> "Recording":
        self._native.start()
        if self._live is not None:
            self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        """Stops sampling (also done on leaving the `with` block)."""
        if self._live is not None:
            self._live.__exit__(None, None, None)
        self._native.stop()
        self._raw = json.loads(self._native.samples_json())

    @property
    def samples(self) -> List[Record]:
        if not self._raw:
            self._raw = json.loads(self._native.samples_json())
        return wrap(self._raw, "Snapshot")

    def rows(self) -> List[Dict[str, Any]]:
        """One flat dict per sample and device (the host as device `host`): time, CPU or
        utilisation percent, memory used and total bytes."""
        out = []
        for s in (self._raw or json.loads(self._native.samples_json())):
            t, h = s["time_unix_s"], s["host"]
            mem = h.get("memory", {})
            out.append({"time_unix_s": t, "device": "host", "utilization_percent": h.get("cpu_percent"),
                        "memory_used_bytes": mem.get("used_bytes"), "memory_total_bytes": mem.get("total_bytes")})
            for d in s.get("devices", []):
                out.append({"time_unix_s": t, "device": f"{d.get('vendor')}:{d.get('index')}",
                            "utilization_percent": d.get("utilization_percent"),
                            "memory_used_bytes": d.get("memory_used_bytes"),
                            "memory_total_bytes": d.get("memory_total_bytes")})
        return out

    def summary(self) -> Dict[str, Dict[str, Optional[float]]]:
        """Per device: samples, mean and max utilisation (percent), max memory used."""
        by: Dict[str, List[Dict[str, Any]]] = {}
        for r in self.rows():
            by.setdefault(r["device"], []).append(r)
        out = {}
        for dev, rs in by.items():
            u = [r["utilization_percent"] for r in rs if r["utilization_percent"] is not None]
            m = [r["memory_used_bytes"] for r in rs if r["memory_used_bytes"] is not None]
            out[dev] = {"samples": len(rs), "mean_utilization_percent": sum(u) / len(u) if u else None,
                        "max_utilization_percent": max(u) if u else None,
                        "max_memory_used_bytes": max(m) if m else None}
        return out

    def to_pandas(self) -> Any:
        """The rows as a pandas DataFrame (needs pandas)."""
        import pandas as pd

        df = pd.DataFrame(self.rows())
        df["time"] = pd.to_datetime(df["time_unix_s"], unit="s")
        return df

    def plot(self, ax: Any = None) -> Any:
        """Utilisation over time, one line per device (needs matplotlib)."""
        import matplotlib.pyplot as plt

        ax = ax or plt.gca()
        by: Dict[str, List[Dict[str, Any]]] = {}
        for r in self.rows():
            if r["utilization_percent"] is not None:
                by.setdefault(r["device"], []).append(r)
        for dev, rs in by.items():
            t0 = rs[0]["time_unix_s"]
            ax.plot([r["time_unix_s"] - t0 for r in rs], [r["utilization_percent"] for r in rs], label=dev)
        ax.set_xlabel("seconds")
        ax.set_ylabel("utilisation %")
        ax.legend()
        return ax


def record(interval: float = 0.5, live: bool = False) -> Recording:
    """Samples the host and every device every `interval` seconds while the `with` block runs;
    `live=True` also shows them updating in place as `accel.watch()` does."""
    return Recording(interval, live)
