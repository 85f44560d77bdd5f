"""`with accel.watch(interval=1.0): ...` shows the host and every device updating in place while
the block runs: in a notebook (Jupyter, JupyterLab, Colab, VS Code) one output, replaced at every
sample through a display handle (no ipywidgets needed), with lines of utilisation and memory
over the last minutes; elsewhere one line of text per sample. The page is accel's own HTML (the
`watch` document of `accel monitor --html`), drawn in Rust."""

from __future__ import annotations

import time

# typing costs 9 ms of import time; annotations are strings (the __future__ import), so
# its names are needed only by type checkers.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, List, Optional

from . import _accel
from ._objects import json


def _kernel() -> bool:
    """Whether this runs in a notebook kernel (a display handle can be updated there)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    ip = get_ipython()
    return ip is not None and hasattr(ip, "kernel")


def _line(s: dict) -> str:
    """One sample as a line of text, for terminals."""
    h = s.get("host", {})
    m = h.get("memory", {})
    gib = 1 << 30
    parts = [time.strftime("%H:%M:%S", time.localtime(s.get("time_unix_s", 0)))]
    cpu = h.get("cpu_percent")
    parts.append(f"host CPU {cpu:.0f} %" if cpu is not None else "host CPU -")
    if m.get("total_bytes"):
        parts.append(f"RAM {m.get('used_bytes', 0) / gib:.1f}/{m['total_bytes'] / gib:.1f} GiB")
    for d in s.get("devices", []):
        u = d.get("utilization_percent")
        used, total = d.get("memory_used_bytes"), d.get("memory_total_bytes")
        mem = f" {used / gib:.1f}/{total / gib:.1f} GiB" if used is not None and total else ""
        state = "" if d.get("up", True) else " DOWN"
        parts.append(f"{d.get('vendor')}:{d.get('index')} {'-' if u is None else f'{u:.0f} %'}{mem}{state}")
    return "; ".join(parts)


class Watch:
    """A live view of the host and every device. `accel.watch(...)` starts nothing; `with` it
    (or `.run(seconds)`) samples every `interval` seconds on a native thread and updates one
    output in place. `.updates` counts the updates shown; `.samples` are the snapshots kept
    (the last `minutes` of them)."""

    def __init__(self, interval: float = 1.0, minutes: float = 5.0,
                 _recorder: Any = None, _out: Optional[Callable[[str], None]] = None) -> None:
        interval, minutes = float(interval), float(minutes)
        # Checked here, where they are divided (before: ZeroDivisionError for interval 0,
        # OverflowError for a tiny one), with the recorder's own range.
        if not 0.01 <= interval <= 3600:
            raise _accel.AccelError(f"interval {interval} s: expected 0.01 to 3600 seconds")
        if not 0 < minutes <= 7 * 24 * 60:
            raise _accel.AccelError(f"minutes {minutes}: expected above 0, at most a week")
        keep = max(2, min(3600, int(minutes * 60 / interval)))
        self.interval = interval
        self.updates = 0
        self._rec = _recorder if _recorder is not None else _accel.Recorder(interval, keep)
        self._own = _recorder is None
        self._keep = keep
        self._out = _out
        self._handle: Any = None
        self._seen = 0
        import threading  # here, not at import: it costs 3 ms of `import accelkit`

        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    @property
    def samples(self) -> List[dict]:
        return json.loads(self._rec.samples_json())[-self._keep:]

    def _html(self) -> str:
        return _accel.render_html("watch", json.dumps({"samples": self.samples}))

    def _show(self) -> None:
        """Shows the newest sample: the first time a new output, then that output replaced."""
        samples = self.samples
        if not samples:
            return
        if self._out is not None:
            self._out(_line(samples[-1]))
        elif _kernel():
            from IPython.display import HTML, display

            page = HTML(_accel.render_html("watch", json.dumps({"samples": samples})))
            if self._handle is None:
                self._handle = display(page, display_id=True)
            else:
                self._handle.update(page)
        else:
            print(_line(samples[-1]), flush=True)
        self.updates += 1

    def _step(self) -> None:
        taken = self._rec.taken()
        if taken > self._seen:
            self._seen = taken
            self._show()

    def __enter__(self) -> "Watch":
        if self._thread is not None:
            raise _accel.AccelError("this watch is already running")
        self._stop.clear()
        # A KeyboardInterrupt (or any error) before the `with` block is entered skips
        # __exit__: what was started is stopped here, so no sampler or follower outlives it.
        try:
            if self._own:
                self._rec.start()
            # The first sample comes at once: shown from this thread, so the output belongs
            # to the cell that started the watch; later ones update it from the follower.
            deadline = time.monotonic() + max(5.0, 2 * self.interval)
            while self._rec.taken() == 0 and time.monotonic() < deadline:
                time.sleep(0.01)
            self._seen = self._rec.taken()
            self._show()
            import threading

            import weakref

            t = threading.Thread(target=_follow, args=(weakref.ref(self),),
                                 name="accel-watch", daemon=True)
            t.start()
            self._thread = t
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        try:
            t, self._thread = self._thread, None
            if t is not None:
                t.join()
        finally:
            if self._own:
                self._rec.stop()

    def run(self, seconds: Optional[float] = None) -> "Watch":
        """Watches in the foreground until `seconds` pass (None: until the cell is
        interrupted), then returns this watch."""
        with self:
            end = None if seconds is None else time.monotonic() + float(seconds)
            try:
                while end is None or time.monotonic() < end:
                    time.sleep(0.05 if end is None else max(0.0, min(0.05, end - time.monotonic())))
            except KeyboardInterrupt:
                pass
        return self

    def _repr_html_(self) -> str:
        return self._html() if self._rec.taken() else "<p>accel.watch: not started</p>"

    def __repr__(self) -> str:
        return f"Watch(interval={self.interval}, updates={self.updates})"


def _follow(ref: Any) -> None:
    """The follower thread: it holds its watch only through a weak reference, so a watch that
    Python lets go of (an interrupt skipped its `__exit__`) is collected, its native sampler
    with it, and this thread ends instead of keeping both alive."""
    while True:
        w = ref()
        if w is None or w._stop.is_set():
            return
        w._step()
        stop, wait = w._stop, min(0.05, w.interval / 4)
        del w
        stop.wait(wait)


def watch(interval: float = 1.0, minutes: float = 5.0) -> Watch:
    """A live view of the host and every device, updated every `interval` seconds with lines
    over the last `minutes`: `with accel.watch(): train()` or `accel.watch().run(60)`."""
    return Watch(interval, minutes)
