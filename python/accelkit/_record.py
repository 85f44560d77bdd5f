"""`with accel.record(interval=0.5) as rec:` samples the host and every device on a native
thread while the block runs (accel's long calls release the GIL, so it goes on beside them)."""

from __future__ import annotations

import time

# typing costs 9 ms of import time; annotations are strings (the __future__ import), so
# its names are needed only by type checkers.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional

from . import _accel
from ._objects import Record, json, wrap


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
        # A KeyboardInterrupt (or any error) before the `with` block is entered skips
        # __exit__: whatever was started is stopped here, so no sampler outlives the block.
        try:
            self._native.start()
            if self._live is not None:
                self._live.__enter__()
        except BaseException:
            self._stop_quietly()
            raise
        return self

    def _stop_quietly(self) -> None:
        try:
            if self._live is not None:
                self._live.__exit__(None, None, None)
        finally:
            self._native.stop()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        """Stops sampling (also done on leaving the `with` block)."""
        # The native sampler stops even when stopping the live view is interrupted.
        self._stop_quietly()
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

    def energy(self) -> Dict[str, Dict[str, Any]]:
        """Energy over the recording (from its first sample to its last), per device: `joules`,
        `watt_hours` and `source`: "counter" (the device's energy counter, NVIDIA and AMD),
        "power integral" (its power readings integrated over time, where it has no counter) or
        None (neither). The host: the CPU packages' and the DRAM's from RAPL (`joules`,
        `dram_joules`), with `note` saying why not where RAPL cannot be read."""
        return _energy(self._raw or json.loads(self._native.samples_json()))

    def summary(self) -> Dict[str, Dict[str, Any]]:
        """Per device: samples, mean and max utilisation (percent), max memory used, and its
        energy (`energy_joules`, `energy_wh`, `energy_source`; see `energy()`)."""
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
        for dev, e in self.energy().items():
            if dev in out:
                out[dev].update({"energy_joules": e["joules"], "energy_wh": e["watt_hours"],
                                 "energy_source": e["source"]})
                if dev == "host":
                    out[dev].update({"dram_energy_joules": e.get("dram_joules"),
                                     "energy_note": e.get("note")})
        return out

    def _repr_html_(self) -> str:
        """The last sample with a line of utilisation and memory per device over the whole
        recording (accel's `watch` page), in notebooks."""
        samples = self._raw or json.loads(self._native.samples_json())
        return _accel.render_html("watch", json.dumps({"samples": samples}))

    def __repr__(self) -> str:
        rows = self.summary()
        if not rows:
            return f"Recording(interval={self.interval}, no samples)"
        lines = [f"Recording(interval={self.interval}): {next(iter(rows.values()))['samples']} samples",
                 f"{'device':<12}{'mean %':>8}{'max %':>8}{'max memory':>14}{'energy J':>10}  source"]
        for dev, r in rows.items():
            m = r.get("max_memory_used_bytes")
            e = r.get("energy_joules")
            pct = lambda v: "-" if v is None else f"{v:.0f}"
            lines.append(f"{dev:<12}{pct(r['mean_utilization_percent']):>8}{pct(r['max_utilization_percent']):>8}"
                         f"{'-' if m is None else f'{m / 2**30:.2f} GiB':>14}{'-' if e is None else f'{e:.1f}':>10}"
                         f"  {r.get('energy_source') or '-'}")
        return "\n".join(lines)

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


def _wh(j: Optional[float]) -> Optional[float]:
    return None if j is None else j / 3600.0


def _energy(samples: List[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """Energy between the first and the last of `samples`, per device and for the host."""
    by: Dict[str, List[Any]] = {}
    for s in samples:
        for d in s.get("devices", []):
            by.setdefault(f"{d.get('vendor')}:{d.get('index')}", []).append(
                (s["time_unix_s"], d.get("energy_joules"), d.get("power_w")))
    out: Dict[str, Dict[str, Any]] = {}
    for dev, pts in by.items():
        c = [(t, j) for t, j, _ in pts if j is not None]
        p = [(t, w) for t, _, w in pts if w is not None]
        joules, source = None, None
        if len(c) >= 2 and c[-1][1] >= c[0][1]:
            joules, source = c[-1][1] - c[0][1], "counter"
        elif len(p) >= 2:
            joules = sum((t1 - t0) * (w0 + w1) / 2 for (t0, w0), (t1, w1) in zip(p, p[1:]))
            source = "power integral"
        out[dev] = {"joules": joules, "watt_hours": _wh(joules), "source": source}
    if samples:
        first, last = samples[0].get("host", {}), samples[-1].get("host", {})

        def diff(k: str) -> Optional[float]:
            a, b = first.get(k), last.get(k)
            return None if a is None or b is None or len(samples) < 2 else b - a

        cpu = diff("cpu_energy_joules")
        note = last.get("energy_note")
        if cpu is None and note is None and len(samples) < 2:
            note = "one sample only: no energy between samples"
        out["host"] = {"joules": cpu, "watt_hours": _wh(cpu), "source": "RAPL" if cpu is not None else None,
                       "dram_joules": diff("dram_energy_joules"), "note": note}
    return out


class Measurement:
    """`with accel.measure() as m:` (Zeus's `begin_window`/`end_window`): `m.seconds` the block
    took, and `m.energy` per device and for the host (`{"joules", "watt_hours", "source"}`,
    the host's with `dram_joules` and `note`), between the first and the last sample of a
    recording every `interval` seconds during the block (one more sample is waited for at its
    end, so even a short block has two)."""

    def __init__(self, interval: float = 0.1) -> None:
        self._rec = Recording(interval)
        self.seconds: Optional[float] = None
        self.energy: Dict[str, Dict[str, Any]] = {}

    def __enter__(self) -> "Measurement":
        self._rec.__enter__()
        try:
            self._t0 = time.perf_counter()
        except BaseException:
            self._rec._stop_quietly()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        # However this is left (an interrupt while it waits for the last sample included),
        # the sampler is stopped.
        try:
            self.seconds = time.perf_counter() - self._t0
            n = self._rec._native.taken()
            deadline = time.monotonic() + 5 * self._rec.interval + 1.0
            while self._rec._native.taken() < max(2, n + 1) and time.monotonic() < deadline:
                time.sleep(0.01)
        finally:
            self._rec.stop()
        self.energy = self._rec.energy()

    def __repr__(self) -> str:
        parts = [f"{d}: {e['joules']:.1f} J ({e['source']})" for d, e in self.energy.items()
                 if e.get("joules") is not None]
        return f"Measurement(seconds={self.seconds}, {', '.join(parts) or 'no energy readings'})"


def measure(interval: float = 0.1) -> Measurement:
    """Time and energy of a `with` block, per device and for the host's CPU and DRAM."""
    return Measurement(interval)


def record(interval: float = 0.5, live: bool = False) -> Recording:
    """Samples the host and every device every `interval` seconds while the `with` block runs;
    `live=True` also shows them updating in place as `accel.watch()` does."""
    return Recording(interval, live)
