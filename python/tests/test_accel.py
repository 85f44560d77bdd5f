"""`import accelkit` from the installed wheel, against real parts: this machine's CPU, XLA's CPU
PJRT plugin (installed beside the wheel by scripts/wheel_check.sh) and NumPy/JAX for the
array exchange. References are computed here (NumPy, /proc/meminfo), not by accel."""

import json
import os
import shutil
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import accelkit as accel


def skip(backend, reason):
    """Skips with `<backend>: <reason>` (pytest -rs prints it), or fails when
    ACCEL_TEST_REQUIRE names the backend, as the Rust tests do."""
    required = [n.strip() for n in os.environ.get("ACCEL_TEST_REQUIRE", "").split(",")]
    assert backend not in required, f"ACCEL_TEST_REQUIRE names {backend}, but {reason}"
    pytest.skip(f"{backend}: {reason}")


def need(module, backend):
    """The module, or a skip naming the backend (a Python package the test needs)."""
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as e:
        skip(backend, f"{module} is not installed ({e})")


def test_import_is_fast_and_loads_no_backend():
    code = (
        "import time; t = time.perf_counter(); import accelkit as accel; dt = time.perf_counter() - t; "
        "maps = open('/proc/self/maps').read(); "
        "print(dt); print(any(s in maps for s in ('pjrt', 'libvulkan', 'libcuda.so', 'libnvidia-ml')))"
    )
    times = []
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        dt, loaded = out.stdout.split()
        assert loaded == "False", "importing accel mapped a backend library"
        times.append(float(dt))
    assert min(times) < 0.05, f"import took {times} s"


def test_best_device_and_device_names():
    best = accel.best()
    assert isinstance(best, accel.Device) and best in accel.devices()
    assert "cpu" in accel.devices()
    assert accel.Device("xla:1").type == "xla" and accel.Device("xla:1").index == 1
    assert accel.Device("cpu").index is None


def test_cuda_and_mps_as_torch_asks():
    n = accel.cuda.device_count()
    assert accel.cuda.is_available() == (n > 0)
    if n == 0:
        with pytest.raises(accel.AccelError) as e:
            accel.cuda.get_device_name(0)
        assert "cpu" in str(e.value)  # the error lists the devices that exist
    else:
        assert accel.cuda.get_device_name(0)
    assert accel.mps.is_available() == (sys.platform == "darwin" and "mps" in accel.devices())


def test_xla_devices_from_the_plugin_beside_the_wheel():
    devs = accel.xla.devices()
    if not devs:
        skip("xla", "no PJRT plugin in this environment")
    assert devs[0] == "xla:0"
    probes = {p.backend: p for p in accel.probes()}
    assert probes["xla"].status == "available"
    assert probes["cuda"].status != "available" or accel.cuda.is_available()


def test_doctor_as_objects_and_plain_data():
    d = accel.doctor()
    backends = [s.backend for s in d.sections]
    assert backends[0] == "cpu" and "cuda" in backends
    statuses = {c.status for s in d.sections for c in s.checks}
    assert statuses <= {"pass", "fail", "warn", "skip"}
    # Each section opens with its verdict; every failure names a cause id.
    for s in d.sections:
        assert s.checks[0].id == s.backend + ".verdict"
        assert s.checks[0].cause == s.cause
        for c in s.checks:
            assert c.status not in ("fail", "warn") or "." in c.cause
    plain = d.to_dict()
    json.dumps(plain)
    assert plain["best_device"] == str(accel.best())
    assert d.best_device_works is True


def test_records_that_hold_a_list_iterate_over_it_and_the_others_do_not():
    # `for check in accel.doctor()` and `list(accel.doctor())` raised KeyError: 0.
    d = accel.doctor()
    sections = list(d)
    assert [s.backend for s in sections] == [s.backend for s in d.sections]
    assert len(d) == len(d.to_dict()["sections"]) and d[0] == sections[0]
    assert sections[1] in d and d.sections[-1] == d[-1]
    assert bool(d)
    s = accel.snapshot()
    assert len(s) == len(s.devices) and list(s) == s.devices
    # A record without a list is not a sequence: TypeError, as for a dict-like object.
    section = d[0]
    for op in (list, len, lambda r: r[0]):
        with pytest.raises(TypeError, match="Diagnosis"):
            op(section)
    assert bool(section) and "checks" in section and "nope" not in section
    with pytest.raises(TypeError):
        iter(s.host)


def test_snapshot_host_memory_matches_proc_meminfo():
    s = accel.snapshot()
    with open("/proc/meminfo") as f:
        total_kib = int(next(l for l in f if l.startswith("MemTotal:")).split()[1])
    assert s.host.memory.total_bytes == total_kib * 1024
    assert 0.0 <= s.host.cpu_percent <= 100.0
    assert isinstance(s.devices, list)
    assert {c.collector for c in s.collectors} >= {"nvidia", "amd", "intel", "tpu"}


def test_pick_without_the_devices_asked_for_is_an_error_with_the_reason():
    if any(d.vendor == "nvidia" for d in accel.snapshot().devices):
        assert accel.pick(count=1)
        return
    with pytest.raises(accel.AccelError) as e:
        accel.pick(min_free=1 << 30, count=1)
    assert "nvidia" in str(e.value).lower() or "no " in str(e.value).lower()


def test_bench_matmul_statistics_are_consistent():
    r = accel.bench.matmul(device="cpu", size=96, dtype="f32", warmup=2, iters=20)
    st = r.stats
    assert st.samples == 20
    assert st.min_s <= st.q1_s <= st.median_s <= st.q3_s <= st.max_s
    lo, hi = st.median_ci95_s
    assert lo <= st.median_s <= hi
    assert r.gflop_per_s == pytest.approx(2 * 96**3 / st.median_s / 1e9, rel=1e-6)
    assert r.max_rel_error < 1e-4
    with pytest.raises(accel.AccelError):
        accel.bench.matmul(device="cuda:7", size=8)


def test_bench_matmul_times_a_linear_layer_shape():
    # 12 tokens through a Linear layer from 40 to 24 features, two at once: W stored 24 x 40.
    r = accel.bench.matmul(device="cpu", size=(12, 24, 40), dtype="f64", iters=3, batch=2,
                           linear=True)
    assert (list(r.shape), r.size, r.b_transposed, r.batch) == ([12, 24, 40], 12, True, 2)
    assert r.gflop_per_s == pytest.approx(2 * 2 * 12 * 24 * 40 / r.stats.median_s / 1e9,
                                          rel=1e-6)
    assert r.max_rel_error < 1e-12
    with pytest.raises(ValueError):
        accel.bench.matmul(device="cpu", size=(4, 4))
    with pytest.raises(accel.AccelError):
        accel.bench.matmul(device="cpu", size=(4, 0, 4))


def test_record_sees_the_cpu_busy_while_a_matmul_runs_and_python_threads_go_on():
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.01)

    th = threading.Thread(target=tick)
    th.start()
    with accel.record(interval=0.1) as rec:
        accel.bench.matmul(device="cpu", size=1024, dtype="f32", warmup=1, min_time=1.5)
    stop.set()
    th.join()
    summary = rec.summary()
    # A host sample measures CPU use over 0.2 s itself, so about 5 a second.
    assert summary["host"]["samples"] >= 4
    assert summary["host"]["mean_utilization_percent"] > 50.0, summary
    # The benchmark released the GIL: the Python thread ticked all along.
    assert len(ticks) > 50
    rows = rec.rows()
    assert rows[0]["device"] == "host" and rows[0]["memory_total_bytes"] > 0
    assert len(rec.samples) == summary["host"]["samples"]


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32", "int64"])
def test_numpy_round_trip_and_zero_copy_export(dtype):
    rng = np.random.default_rng(7)
    a = (rng.standard_normal((5, 7)) * 100).astype(dtype)
    t = accel.tensor(a)
    assert t.shape == (5, 7) and t.device == "cpu"
    b = np.asarray(t)
    assert b.dtype == a.dtype and np.array_equal(a, b)
    # Shared, read-only: the same address as accel's buffer, and NumPy may not write it.
    assert b.__array_interface__["data"][0] == t.__array_interface__["data"][0]
    assert not b.flags.writeable
    # Through DLPack too: NumPy imports accel's export without a copy.
    c = np.from_dlpack(t)
    assert c.__array_interface__["data"][0] == t.__array_interface__["data"][0]
    assert np.array_equal(a, c)
    assert t.__dlpack_device__() == (1, 0)


def test_bf16_has_no_numpy_type_and_says_what_to_do():
    t = accel.tensor(np.ones((2, 2), np.float32), dtype="bf16")
    with pytest.raises(TypeError, match="to_dtype"):
        np.asarray(t)
    assert np.array_equal(np.asarray(t.to_dtype("f32")), np.ones((2, 2), np.float32))


def test_matmul_on_every_device_against_numpy():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((64, 48)).astype(np.float32)
    b = rng.standard_normal((48, 32)).astype(np.float32)
    want = a.astype(np.float64) @ b.astype(np.float64)
    for dev in accel.devices():
        if dev.type == "wgpu" and dev not in ("wgpu:0",):
            continue
        ta, tb = accel.tensor(a, device=dev), accel.tensor(b, device=dev)
        got = np.asarray((ta @ tb).to("cpu"))
        assert np.allclose(got, want, rtol=1e-4, atol=1e-4), dev
    # Mixed devices are refused with a clear error.
    if len(accel.devices()) > 1:
        other = [d for d in accel.devices() if d != "cpu"][0]
        with pytest.raises(accel.AccelError, match="device"):
            accel.tensor(a) @ accel.tensor(b, device=other)


def in_forked_child(check, seconds):
    """Runs `check` in a child made by fork(); fails unless it returns true within `seconds`
    (a child that hangs is killed)."""
    pid = os.fork()
    if pid == 0:
        os._exit(0 if check() else 1)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0, "the check failed in the child"
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail(f"the forked child did not finish in {seconds} s")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="cpu: no fork() on this platform")
def test_small_matmul_in_a_forked_child_after_one_in_the_parent():
    # Small products split over a helper thread; a child made by fork() has no such thread
    # and must still finish (and get the right answer) rather than wait for it.
    rng = np.random.default_rng(2)
    a = rng.standard_normal((128, 128)).astype(np.float32)
    want = a.astype(np.float64) @ a.astype(np.float64)
    t = accel.tensor(a)
    assert np.allclose(np.asarray(t @ t), want, rtol=1e-4, atol=1e-3)
    in_forked_child(lambda: np.allclose(np.asarray(t @ t), want, rtol=1e-4, atol=1e-3), 30)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="cpu: no fork() on this platform")
def test_large_ops_in_a_forked_child_after_the_parent_used_its_threads():
    # A 700x700 product (the blocked path, split over threads) and a cast of 2^20 values
    # (rayon's pool) in the parent, then the same in a child made by fork(), where neither
    # the pool's threads nor the matmul helper exist: the child must do them on its own
    # thread. (It used to wait forever for the pool.)
    rng = np.random.default_rng(3)
    a = rng.standard_normal((700, 700)).astype(np.float32)
    want = a.astype(np.float64) @ a.astype(np.float64)
    v = rng.standard_normal(1 << 20).astype(np.float32)
    t, tv = accel.tensor(a), accel.tensor(v)

    def ok():
        prod = np.allclose(np.asarray(t @ t), want, rtol=1e-4, atol=1e-3)
        cast = np.array_equal(np.asarray(tv.to_dtype("f64")), v.astype(np.float64))
        return prod and cast

    assert ok()
    in_forked_child(ok, 60)


def test_non_cpu_tensors_are_not_exported_in_place():
    xla = accel.xla.devices()
    if not xla:
        skip("xla", "no device to hold a tensor off the CPU")
    t = accel.tensor(np.ones(3, np.float32), device=xla[0])
    with pytest.raises(accel.AccelError, match="cpu"):
        np.asarray(t)
    assert np.array_equal(np.asarray(t.to("cpu")), np.ones(3, np.float32))


def test_dlpack_from_jax():
    jnp = need("jax.numpy", "jax")
    x = jnp.arange(12, dtype=jnp.float32).reshape(3, 4) * 0.5
    t = accel.from_dlpack(x)
    assert t.shape == (3, 4)
    assert np.array_equal(np.asarray(t), np.arange(12, dtype=np.float32).reshape(3, 4) * 0.5)
    import jax

    # JAX asks for DLPack before 1.0, which has no read-only flag: it gets a copy.
    y = jax.dlpack.from_dlpack(t)
    assert np.array_equal(np.asarray(y), np.asarray(t))
    z = np.from_dlpack(t)  # NumPy asks for 1.0: the same memory
    assert z.__array_interface__["data"][0] == t.__array_interface__["data"][0]


def test_errors_carry_the_reason():
    with pytest.raises(accel.AccelError, match="expected"):
        accel.tensor(np.ones(2), device="tpu:0")
    with pytest.raises(accel.AccelError):
        accel.record(interval=0)
    with pytest.raises(AttributeError, match="has no field"):
        accel.doctor().no_such_field


def test_recording_as_a_dataframe_and_a_plot():
    pd = need("pandas", "pandas")
    matplotlib = need("matplotlib", "matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with accel.record(interval=0.05) as rec:
        accel.bench.matmul(device="cpu", size=512, dtype="f32", warmup=1, min_time=0.5)
    df = rec.to_pandas()
    assert isinstance(df, pd.DataFrame)
    assert {"time", "device", "utilization_percent", "memory_used_bytes"} <= set(df.columns)
    host = df[df["device"] == "host"]
    assert len(host) == rec.summary()["host"]["samples"]
    assert host["utilization_percent"].max() > 50.0
    assert (host["time"].diff().dropna() > pd.Timedelta(0)).all()
    ax = rec.plot()
    lines = {l.get_label(): l for l in ax.get_lines()}
    assert "host" in lines and len(lines["host"].get_xdata()) == len(host)
    plt.close("all")


class _StrictHTML:
    """Python's html.parser with the checks a validator makes that matter here: every
    element closed in order, nothing but known elements, no script and no URL."""

    VOID = {"br"}
    KNOWN = {"div", "style", "p", "b", "table", "tr", "th", "td", "span", "br", "svg", "polyline",
             "rect", "line"}

    def __init__(self, text):
        from html.parser import HTMLParser

        self.stack, self.rows, self.cells = [], 0, []
        outer = self

        class P(HTMLParser):
            def handle_starttag(self, tag, attrs):
                assert tag in outer.KNOWN, tag
                assert not any(v and ("http" in v or "javascript" in v) for _, v in attrs), attrs
                if tag == "tr":
                    outer.rows += 1
                if tag not in outer.VOID:
                    outer.stack.append(tag)

            def handle_endtag(self, tag):
                assert outer.stack and outer.stack[-1] == tag, (outer.stack, tag)
                outer.stack.pop()

            def handle_data(self, data):
                if any(t in ("td", "th") for t in outer.stack):
                    outer.cells.append(data)

        p = P(convert_charrefs=True)
        p.feed(text)
        p.close()
        assert not self.stack, self.stack
        assert "<script" not in text and "http" not in text


def test_a_notebook_shows_the_doctor_and_the_probes_as_tables():
    d = accel.doctor()
    h = d._repr_html_()
    checks = [c for s in d.to_dict()["sections"] for c in s["checks"]]
    parsed = _StrictHTML(h)
    # A title and a header row per section, one row per check, each status as its word.
    assert parsed.rows == 2 * len(d.sections) + len(checks)
    for c in checks:
        assert c["status"].upper() in parsed.cells, c
        assert c["title"] in parsed.cells, c
    p = accel.probes()
    hp = p._repr_html_()
    parsed = _StrictHTML(hp)
    assert parsed.rows == 1 + len(p)
    names = {x.backend for x in p}
    assert names <= set(parsed.cells) and {"cpu", "cuda", "xla", "wgpu", "mps"} <= names
    assert "AVAILABLE" in parsed.cells
    # Records without a view have no HTML (the plain repr is shown), and a probe list is
    # still a list.
    assert accel.doctor().sections[0]._repr_html_() is None
    assert isinstance(p, list) and p[0].backend == "cpu"


def test_a_snapshot_and_picked_devices_show_as_tables_with_bars():
    s = accel.snapshot()
    parsed = _StrictHTML(s._repr_html_())
    # The host's header and row, then a header and a row per device (or a line saying none).
    devices = s.to_dict()["devices"]
    assert parsed.rows == 2 + (1 + len(devices) if devices else 0), (parsed.rows, devices)
    assert "host CPU and RAM" in parsed.cells
    gib = s.host.memory.total_bytes / 2**30
    assert any(f"{gib:.2f} GiB" in c for c in parsed.cells), parsed.cells
    # A list of readings (what accel.pick() returns) renders the devices alone.
    r = accel.Readings([accel.Record({"vendor": "amd", "index": 0, "name": "X", "up": True,
                                      "utilization_percent": 40.0, "processes": [], "owners": []},
                                     "Reading")])
    parsed = _StrictHTML(r._repr_html_())
    assert parsed.rows == 2 and "40 %" in " ".join(parsed.cells), parsed.cells


def test_watch_starts_nothing_until_used_then_shows_every_sample():
    w = accel.watch(interval=0.1)
    time.sleep(0.3)
    assert w.updates == 0 and w._rec.taken() == 0
    lines = []
    w = accel.Watch(interval=0.1, _out=lines.append).run(seconds=0.55)
    assert w.updates == len(lines) >= 3, lines
    assert all("host CPU" in l and "RAM" in l for l in lines), lines
    # Its page is the last sample with a line per row over all of them.
    assert w._repr_html_().count("<svg") >= 2
    with pytest.raises(accel.AccelError):
        accel._accel.Recorder(0.1, 0)  # keeping no sample at all is refused


def test_record_live_shows_the_samples_while_it_records(capsys):
    with accel.record(interval=0.1, live=True) as rec:
        time.sleep(0.45)
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) >= 3 and all("host CPU" in l for l in out), out
    assert len(rec.samples) >= len(out) - 1


def test_a_notebook_kernel_updates_one_output_in_place(tmp_path):
    """In a real Jupyter kernel (ipykernel, driven by nbclient): accel.watch() makes one
    output and updates it in place at every sample; the rich views render. The executed
    notebook's outputs are put on one page and, with Debian's chromium, photographed into
    the folder NOTEBOOK_SCREENSHOT_DIR names (the test command's target/)."""
    nbformat = need("nbformat", "jupyter")
    nbclient = need("nbclient", "jupyter")
    need("ipykernel", "jupyter")
    cells = [
        "import accelkit as accel\nw = accel.watch(interval=0.3)\nw.run(seconds=1.0)\nprint('updates', w.updates)",
        "accel.doctor()",
        "accel.probes()",
        "accel.snapshot()",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    msgs = []
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3")
    orig = client.process_message

    def spy(msg, cell, cell_index):
        content = msg.get("content", {})
        msgs.append((cell_index, msg["msg_type"], content.get("transient", {}).get("display_id")))
        return orig(msg, cell, cell_index)

    client.process_message = spy
    client.execute()
    first = [(t, d) for i, t, d in msgs if i == 0]
    shown = [d for t, d in first if t == "display_data"]
    updates = [d for t, d in first if t == "update_display_data"]
    assert len(shown) == 1 and shown[0], first
    assert len(updates) >= 2 and set(updates) == set(shown), first
    outs = nb.cells[0].outputs
    # One display output (updated in place, no new one per sample) and the printed count.
    assert [o.output_type for o in outs] == ["display_data", "stream"], outs
    assert int(outs[1].text.split()[1]) == 1 + len(updates)
    assert "<svg" in outs[0].data["text/html"]
    for cell in nb.cells[1:]:
        html = [o.data["text/html"] for o in cell.outputs if "text/html" in o.get("data", {})]
        assert len(html) == 1, cell.outputs
        _StrictHTML(html[0])
    page = tmp_path / "notebook.html"
    page.write_text("<!doctype html><html><body style='font-family:sans-serif'>" + "".join(
        f"<h3>In [{i + 1}]: {c.source.splitlines()[0]}</h3>" + "".join(
            o.data.get("text/html", "") for o in c.outputs if o.output_type == "display_data"
            or o.output_type == "execute_result") for i, c in enumerate(nb.cells)) + "</body></html>")
    chromium = shutil.which("chromium")
    artifacts = os.environ.get("NOTEBOOK_SCREENSHOT_DIR")
    if artifacts and not chromium:
        skip("chromium", "not installed (apt-get install chromium): no screenshot")
    if chromium and artifacts:
        shot = os.path.join(artifacts, "notebook.png")
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                        "--window-size=1200,2400", f"--screenshot={shot}", page.as_uri()],
                       check=True, capture_output=True, timeout=120)
        assert os.path.getsize(shot) > 10_000, shot
        shutil.copy(page, os.path.join(artifacts, "notebook.html"))


def test_energy_per_device_from_counters_or_power_and_the_host_from_rapl():
    from accelkit._record import _energy

    def sample(t, devices, cpu=None, dram=None, note=None):
        return {"time_unix_s": t, "devices": devices,
                "host": {"cpu_energy_joules": cpu, "dram_energy_joules": dram, "energy_note": note}}

    nv = lambda j, w: {"vendor": "nvidia", "index": 0, "energy_joules": j, "power_w": w}
    intel = lambda w: {"vendor": "intel", "index": 1, "energy_joules": None, "power_w": w}
    none = {"vendor": "tpu", "index": 0}
    e = _energy([sample(10.0, [nv(1000.0, 100.0), intel(10.0), none], cpu=5.0, dram=1.0),
                 sample(11.0, [nv(1150.0, 200.0), intel(30.0), none], cpu=25.0, dram=1.5),
                 sample(13.0, [nv(1550.0, 200.0), intel(30.0), none], cpu=85.0, dram=2.5)])
    # The counter: 1550 - 1000 J (the power readings are not used when there is one).
    assert e["nvidia:0"] == {"joules": 550.0, "watt_hours": 550.0 / 3600, "source": "counter"}
    # The trapezoids: (10 + 30) / 2 * 1 s + 30 * 2 s = 80 J.
    assert e["intel:1"]["joules"] == pytest.approx(80.0) and e["intel:1"]["source"] == "power integral"
    assert e["tpu:0"] == {"joules": None, "watt_hours": None, "source": None}
    assert e["host"]["joules"] == 80.0 and e["host"]["dram_joules"] == 1.5
    assert e["host"]["source"] == "RAPL"
    # A counter that went back (a driver reload) falls back to the power readings.
    e = _energy([sample(0.0, [nv(500.0, 50.0)]), sample(2.0, [nv(10.0, 150.0)])])
    assert e["nvidia:0"]["source"] == "power integral" and e["nvidia:0"]["joules"] == 200.0
    # No RAPL: no host energy, and why.
    e = _energy([sample(0.0, [], note="no RAPL energy counters (a VM)"), sample(1.0, [], note="no RAPL energy counters (a VM)")])
    assert e["host"]["joules"] is None and "RAPL" in e["host"]["note"]


def test_measure_times_a_block_and_says_what_energy_it_can():
    with accel.measure() as m:
        time.sleep(0.3)
    assert 0.3 <= m.seconds < 1.0, m.seconds
    h = m.energy["host"]
    # With RAPL readable the packages used energy while we slept; without, the reason.
    assert (h["joules"] is not None and h["joules"] >= 0) or "RAPL" in (h["note"] or ""), h
    for dev, e in m.energy.items():
        assert e["source"] in (None, "counter", "power integral", "RAPL"), (dev, e)
    assert "Measurement(seconds=" in repr(m)
    with accel.record(interval=0.1) as rec:
        time.sleep(0.25)
    assert "energy_source" in rec.summary()["host"]


def test_a_recording_and_a_benchmark_show_as_tables_and_read_as_text():
    with accel.record(interval=0.1) as rec:
        time.sleep(0.35)
    parsed = _StrictHTML(rec._repr_html_())
    assert "host CPU and RAM" in parsed.cells
    text = repr(rec).splitlines()
    assert text[0].startswith("Recording(interval=0.1): ") and "samples" in text[0], text
    assert text[1].split() == ["device", "mean", "%", "max", "%", "max", "memory", "energy", "J", "source"]
    assert text[2].startswith("host "), text
    r = accel.bench.matmul(device="cpu", size=64, iters=5, warmup=1)
    h = r._repr_html_()
    _StrictHTML(h)
    assert f"{r.gflop_per_s:.1f}" in h and "<svg" in h


def test_listing_xla_devices_starts_no_pjrt_client_in_this_process():
    # The probe helper starts each plugin's client (it may hang or crash) and answers with
    # the facts; a process that only lists devices maps no plugin, and one that computes on
    # an XLA device starts its client then.
    script = (
        "import accelkit as accel, json, numpy as np\n"
        "xla = [d for d in accel.devices() if str(d).startswith('xla')]\n"
        "best = str(accel.best())\n"
        "maps = lambda: 'pjrt_c_api' in open('/proc/self/maps').read() or 'libtpu' in open('/proc/self/maps').read()\n"
        "listed = maps()\n"
        "ok = None\n"
        "if xla:\n"
        "    t = accel.tensor(np.arange(6, dtype=np.float32), device=xla[0])\n"
        "    ok = np.array_equal(np.asarray(t.to('cpu')), np.arange(6, dtype=np.float32))\n"
        "print(json.dumps({'xla': len(xla), 'listed': listed, 'after': maps(), 'ok': ok}))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout.strip().splitlines()[-1])
    if not r["xla"]:
        skip("xla", "no PJRT plugin with devices in this environment")
    assert r["listed"] is False, "listing the devices loaded a PJRT plugin in this process"
    assert r["after"] is True and r["ok"] is True, r
