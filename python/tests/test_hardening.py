"""Issue 48's attacks on `import accelkit`, each written against the behaviour before its fix: the
environment a notebook's children inherit, a sampler that outlives its Python owner, and a
PJRT plugin planted under /opt by another user."""

import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

import pytest

import accelkit as accel


def _recorder_threads():
    """accel's native sampling threads in this process (named `accel-recorder`)."""
    n = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                n += f.read().strip() == "accel-recorder"
        except OSError:
            pass
    return n


def _watch_threads():
    return sum(t.name == "accel-watch" for t in threading.enumerate())


def _settles(limit=2.0):
    """Whether every sampler and follower thread is gone within `limit` seconds."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if _recorder_threads() == 0 and _watch_threads() == 0:
            return True
        # What only a collection frees (a recorder in a cycle) stops its thread then: collected
        # before each wait, not before the first look (in this process, beside JAX and pandas,
        # a collection costs tens of milliseconds, and the interrupt test looks hundreds of times).
        gc.collect()
        time.sleep(0.02)
    return False


def test_import_accel_leaves_the_environment_its_children_inherit_unchanged():
    # Before: TPU_SKIP_MDS_QUERY=1 and XDG_RUNTIME_DIR were set in the C environment (behind
    # os.environ), and VIRTUAL_ENV in os.environ, so every child inherited them (JAX's
    # TPU-pod auto-detection then failed in a training script started from the notebook).
    code = textwrap.dedent("""
        import json, os, subprocess
        def child():
            out = subprocess.run(["env", "-0"], capture_output=True, check=True).stdout
            return sorted(v for v in out.decode("utf-8", "replace").split("\\0") if v)
        before, py_before = child(), dict(os.environ)
        import accelkit as accel
        accel.best(); accel.devices(); accel.doctor(); accel.snapshot(); accel.probes()
        with accel.record(interval=0.05):
            pass
        after, py_after = child(), dict(os.environ)
        print(json.dumps({
            "added": sorted(set(after) - set(before)),
            "removed": sorted(set(before) - set(after)),
            "os_environ_changed": sorted(k for k in set(py_before) | set(py_after)
                                         if py_before.get(k) != py_after.get(k)),
            "best": str(accel.best()),
        }))
    """)
    env = {k: v for k, v in os.environ.items()
           if k not in ("XDG_RUNTIME_DIR", "TPU_SKIP_MDS_QUERY", "VIRTUAL_ENV")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["added"] == [] and r["removed"] == [], r
    assert r["os_environ_changed"] == [], r
    # The module still finds what its environment holds without VIRTUAL_ENV (the XLA plugin
    # installed beside the wheel: the same best device as in this process).
    assert r["best"] == str(accel.best()), r


def test_a_recorder_python_lets_go_of_stops_sampling():
    # Before: a Recording dropped without stop() sampled for ever (about 30 KB/s kept).
    assert _settles(), "a sampler was running before the test"
    r = accel.record(interval=0.01)
    r.__enter__()
    deadline = time.monotonic() + 10
    while r._native.taken() < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _recorder_threads() == 1
    assert r._native.taken() >= 2
    del r
    assert _settles(1.0), "the sampler outlived its recording"


def _interrupt_at_line(k, files, hits):
    """A trace function that raises KeyboardInterrupt at the k-th line run in `files`."""
    def local(frame, event, arg):
        if event == "line":
            hits[0] += 1
            if hits[0] == k:
                raise KeyboardInterrupt
        return local

    def tracer(frame, event, arg):
        return local if frame.f_code.co_filename in files else None

    return tracer


@pytest.mark.parametrize("make", [
    lambda: accel.record(interval=0.02),
    lambda: accel.record(interval=0.02, live=True),
    lambda: accel.measure(interval=0.02),
    lambda: accel._watch.Watch(0.02, _out=lambda line: None),
], ids=["record", "record-live", "measure", "watch"])
def test_a_keyboard_interrupt_at_any_line_leaves_no_sampler_running(make):
    # KeyboardInterrupt raised at every line the `with` statement runs in accel's own code
    # (entering, leaving, stopping), one line per round, until a round runs to its end
    # without reaching the k-th line: afterwards no sampler or follower thread is left.
    import accelkit._record as _rec  # noqa: F401 (binds accelkit)
    import accelkit._watch as _w  # noqa: F401

    files = {accel._record.__file__, accel._watch.__file__}
    assert _settles(), "a sampler was running before the test"
    k = 0
    while True:
        k += 1
        hits = [0]
        interrupted = False
        sys.settrace(_interrupt_at_line(k, files, hits))
        try:
            try:
                with make():
                    time.sleep(0.03)
            finally:
                sys.settrace(None)
        except KeyboardInterrupt:
            interrupted = True
        assert _settles(), f"a sampler kept running after an interrupt at line {k} of the run"
        if not interrupted:
            break
        assert k < 500
    assert k > 5, f"only {k} lines were traced: the test did not reach accel's code"


def test_an_interrupt_from_another_thread_stops_the_block_and_its_sampler():
    import _thread

    assert _settles()
    timer = threading.Timer(0.1, _thread.interrupt_main)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        with accel.record(interval=0.01):
            time.sleep(5)
    timer.join()
    assert _settles(1.0)


def _reachable_by_others(path):
    p = os.path.realpath(path)
    while True:
        if not os.stat(p).st_mode & 0o001:
            return False
        if p == "/":
            return True
        p = os.path.dirname(p)


def test_a_plugin_under_opt_that_another_user_owns_is_never_loaded_by_import_accel():
    # Before: /opt/* Python environments were searched with no owner or mode check, and a
    # PJRT plugin another user planted there ran its constructor in `import accelkit as accel;
    # accel.best()`. /opt here is a private tmpfs in a mount namespace of the test's own.
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("gcc"):
        pytest.skip("unshare: needs root, unshare and gcc")
    if subprocess.run(["unshare", "--mount", "--propagation", "private", "true"]).returncode:
        pytest.skip("unshare: no mount namespace here")
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)
        marker = os.path.join(tmp, "markers", "MARKER")
        os.makedirs(os.path.dirname(marker))
        os.chmod(os.path.dirname(marker), 0o1777)
        src = os.path.join(tmp, "evil.c")
        so = os.path.join(tmp, "pjrt_c_api_evil_plugin.so")
        with open(src, "w") as f:
            f.write('#include <fcntl.h>\n#include <unistd.h>\n'
                    '__attribute__((constructor)) static void planted(void) '
                    f'{{ int fd = open("{marker}", O_CREAT | O_WRONLY, 0644); '
                    'if (fd >= 0) close(fd); }\n')
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", so, src], check=True)
        py = "import accelkit as accel; print(accel.best())"
        env = {k: v for k, v in os.environ.items()
               if k not in ("VIRTUAL_ENV", "ACCEL_PJRT_PLUGIN", "PJRT_NAMES_AND_LIBRARY_PATHS",
                            "ACCEL_TRUSTED_DIRS", "XDG_RUNTIME_DIR", "CONDA_PREFIX")}
        env["ACCEL_RUNTIME_CACHE"] = "off"
        env["HOME"] = tmp
        cases = [("4242:4242", "", False), ("0:0", "", True)]  # the second: the control
        # As a third user too, where that user can reach this interpreter and its packages
        # (every folder above them searchable by others; a venv in a private temporary
        # folder is not).
        if _reachable_by_others(sys.prefix):
            cases.insert(1, ("4242:4242", "setpriv --reuid 4343 --regid 4343 --clear-groups",
                             False))
        else:
            print(f"third user: {sys.prefix} is not reachable by other users; as root only")
        for owner, as_user, loads in cases:
            script = (
                "set -e; mount -t tmpfs -o mode=755 none /opt; "
                "sp=/opt/shared/lib/python3.11/site-packages/pkg; mkdir -p $sp; "
                f"cp {so} $sp/; chmod -R u=rwX,go=rX /opt/shared; chown -R {owner} /opt/shared; "
                f"exec {as_user} {sys.executable} -c '{py}'"
            )
            out = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                                  script], env=env, capture_output=True, text=True, timeout=120,
                                 cwd=tmp)
            assert out.returncode == 0, (owner, as_user, out.stderr)
            assert os.path.exists(marker) == loads, (owner, as_user, out.stdout, out.stderr)
            if os.path.exists(marker):
                os.remove(marker)


def test_big_endian_and_zero_dimensional_arrays_are_taken_as_numpy_holds_them():
    np = pytest.importorskip("numpy")
    # Before: a big-endian array was refused as "no accel dtype", a 0-d one became (1,).
    be = np.arange(6, dtype=">f4").reshape(2, 3) / 4
    t = accel.tensor(be)
    assert t.shape == (2, 3)
    assert np.array_equal(np.asarray(t), be.astype("<f4"))
    for dt in (">i8", ">f8", "<i4"):
        x = np.array([[1, -2], [3, 2**20]], dtype=dt)
        assert np.array_equal(np.asarray(accel.tensor(x)), x), dt
    z = accel.tensor(np.float64(2.5))
    assert z.shape == ()
    assert np.asarray(z).shape == () and float(np.asarray(z)) == 2.5
    # A transposed (not C-contiguous) array keeps its values.
    m = np.arange(6, dtype=np.float32).reshape(2, 3).T
    assert np.array_equal(np.asarray(accel.tensor(m)), m)


def test_errors_are_accel_errors_in_python_spelling():
    # Before: ZeroDivisionError / OverflowError from a watch's interval, and messages with
    # Rust syntax (`.to_device(&cpu)`, `DType::F32`).
    for interval in (0, 1e-320, float("inf"), float("nan"), -1):
        with pytest.raises(accel.AccelError):
            accel.watch(interval=interval)
    with pytest.raises(accel.AccelError):
        accel.watch(minutes=0)
    np = pytest.importorskip("numpy")
    other = [d for d in accel.devices() if d != "cpu"]
    if other:
        a = accel.tensor(np.ones((2, 2), np.float32), "cpu")
        b = accel.tensor(np.ones((2, 2), np.float32), other[0])
        with pytest.raises(accel.AccelError) as e:
            a.matmul(b)
        msg = str(e.value)
        assert f'.to("{other[0]}")' in msg and "&" not in msg, msg
    i = accel.tensor(np.ones((2, 2), np.int32))
    with pytest.raises(accel.AccelError) as e:
        i.matmul(accel.tensor(np.ones((2, 2), np.float32)))
    assert "DType::" not in str(e.value), str(e.value)
