"""The live pages in a real browser: `accel serve`'s `/` and the fleet's
(`accel monitor --hosts ... --serve`), opened in Debian's headless chromium and read through
the DevTools protocol while a fixture GPU's load changes under them. The page's own script must
carry the change: the server renders the first view, only `/events` can change it after that.
The binary is the wheel's; the references are the fixture's files, written here."""

import base64
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sysconfig
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from test_accel import skip

FIXTURE = Path(__file__).resolve().parents[2] / "crates/telemetry/tests/fixtures/telemetry/mixed"
BUSY = "sys/devices/pci0000:00/0000:00:01.0/0000:03:00.0/gpu_busy_percent"


class DevTools:
    """The smallest DevTools client: one page target's WebSocket (RFC 6455 text frames, the
    client's masked), one command at a time."""

    def __init__(self, ws_url):
        m = re.match(r"ws://([^/:]+):(\d+)(/.*)", ws_url)
        self.sock = socket.create_connection((m[1], int(m[2])), timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {m[3]} HTTP/1.1\r\nHost: {m[1]}:{m[2]}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            b = self.sock.recv(1)
            assert b, f"DevTools closed the handshake: {head!r}"
            head += b
        assert b" 101 " in head.split(b"\r\n")[0], head
        self.next_id = 0

    def _exact(self, n):
        out = b""
        while len(out) < n:
            b = self.sock.recv(n - len(out))
            assert b, "DevTools closed the connection"
            out += b
        return out

    def _message(self):
        data = b""
        while True:
            b0, b1 = self._exact(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._exact(8))[0]
            data += self._exact(n)
            if b0 & 0x80:
                return data

    def call(self, method, **params):
        self.next_id += 1
        payload = json.dumps({"id": self.next_id, "method": method, "params": params}).encode()
        mask = os.urandom(4)
        n = len(payload)
        head = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + struct.pack(">H", n))
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))
        while True:
            msg = json.loads(self._message())
            if msg.get("id") == self.next_id:
                assert "error" not in msg, msg
                return msg["result"]

    def text(self, element_id):
        r = self.call("Runtime.evaluate", returnByValue=True,
                      expression=f"(document.getElementById('{element_id}')||{{}}).innerText||''")
        return r["result"].get("value", "")

    def wait(self, element_id, ok, seconds, what):
        t = time.monotonic()
        seen = ""
        while time.monotonic() - t < seconds:
            seen = self.text(element_id)
            if ok(seen):
                return seen
            time.sleep(0.2)
        raise AssertionError(f"{what}: not within {seconds} s; #{element_id} reads {seen!r}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url, seconds=10):
    t = time.monotonic()
    while time.monotonic() - t < seconds:
        try:
            return urllib.request.urlopen(url, timeout=1).read()
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"{url} did not answer within {seconds} s")


def start(args):
    # Its own process group: chromium's renderer, GPU and crash-handler children go with it.
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def stop(p):
    """Stops `p` and everything it started (its process group)."""
    def group(sig):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            pass
    if p.poll() is None:
        group(signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            group(signal.SIGKILL)
            p.wait()
    # Children that outlive the leader (chromium's, writing its profile) are stopped too.
    group(signal.SIGKILL)


def test_the_live_pages_follow_the_gpu_in_a_real_browser():
    chromium = shutil.which("chromium")
    if not chromium:
        skip("chromium", "not installed (apt-get install chromium): the live pages are not opened")
    exe = os.path.join(sysconfig.get_path("scripts"), "accel")
    assert os.path.exists(exe), exe
    procs = []
    # Removed by hand at the end: a browser child may still be closing files in its profile
    # when the group is stopped, and a failed cleanup is no failure of the pages.
    tmp = tempfile.mkdtemp()
    try:
        tree = Path(tmp) / "mixed"
        shutil.copytree(FIXTURE, tree, symlinks=True)
        (tree / BUSY).write_text("42\n")
        machine, dead, fleet, devtools = free_port(), free_port(), free_port(), free_port()
        try:
            procs.append(start([exe, "serve", "--listen", f"127.0.0.1:{machine}", "--interval", "0.5",
                                "--path.sysfs", str(tree / "sys"), "--path.procfs", str(tree / "proc"),
                                "--tpu.metrics-address", f"127.0.0.1:{free_port()}"]))
            serve = procs[-1]
            wait_http(f"http://127.0.0.1:{machine}/healthz")
            procs.append(start([exe, "monitor", "--hosts", f"127.0.0.1:{machine},127.0.0.1:{dead}",
                                "--serve", f"127.0.0.1:{fleet}", "--interval", "0.5", "--timeout", "1"]))
            wait_http(f"http://127.0.0.1:{fleet}/healthz")
            profile = Path(tmp) / "profile"
            procs.append(start([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                                f"--user-data-dir={profile}", f"--remote-debugging-port={devtools}",
                                f"http://127.0.0.1:{machine}/"]))
            targets = json.loads(wait_http(f"http://127.0.0.1:{devtools}/json/list", 30))
            page = next(t for t in targets if t["type"] == "page")
            dt = DevTools(page["webSocketDebuggerUrl"])

            # One machine: the fixture's AMD GPU at 42 %, then at 77 % once its file says so.
            dt.wait("state", lambda s: "updated" in s, 30, "the page's script took no event")
            live = dt.text("live")
            assert "AMD GPU 0x744c" in live and "42 %" in live, live
            (tree / BUSY).write_text("77\n")
            live = dt.wait("live", lambda s: "77 %" in s, 30, "the page did not follow the GPU")
            assert "42 %" not in live, live

            # The fleet: the machine up with its GPU at 77 %, the other down and why.
            dt.call("Page.navigate", url=f"http://127.0.0.1:{fleet}/")
            # (a round or two behind the machine: it polls the machine's own collections)
            # The page is served with the latest round already drawn, so 77 % can show before its
            # script has taken an event: wait for the fleet page (the machine page's "updated" must
            # not count), then for an event, then for the figure.
            dt.wait("live", lambda s: "of 2 machines up" in s, 30, "the fleet page did not open")
            dt.wait("state", lambda s: "updated" in s, 30, "the fleet page's script took no event")
            live = dt.wait("live", lambda s: "77 %" in s, 30, "the fleet page did not follow the GPU")
            assert "1 of 2 machines up" in live, live
            assert f"127.0.0.1:{dead}" in live and "cannot connect" in live, live
            # The machine's exporter stops: the fleet page shows it down, live.
            stop(serve)
            dt.wait("live", lambda s: "0 of 2 machines up" in s, 30,
                    "the fleet page did not show the machine going down")
            # The fleet server stops: the page says its stream is gone.
            stop(procs[1])
            dt.wait("state", lambda s: "connection lost" in s, 30,
                    "the page did not notice its stream end")
        finally:
            for p in reversed(procs):
                stop(p)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
