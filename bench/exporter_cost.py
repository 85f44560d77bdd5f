#!/usr/bin/env python3
"""What `accel serve` costs the machine it watches, beside node_exporter, in one run.

Both exporters run at the same time for --seconds (60 by default) and are scraped once a second
each, as a Prometheus with `scrape_interval: 1s` would; accel collects every --interval (1 s).
Reported per exporter: resident memory at the end (VmRSS), average CPU use in percent of one
core (utime + stime from /proc/PID/stat over the wall time), and whether a PJRT plugin,
libvulkan or libcuda is mapped into it (/proc/PID/maps). The CPU model is printed first: the
numbers belong to it.

    python3 bench/exporter_cost.py [--accel target/release/accel] [--seconds 60]
        [--serve-args "--collector.process.labels=namespace,pod,container,hpc_job ..."]
        [--pages N]

--pages N keeps N browsers' worth of the live page open on accel serve for the whole run: each
reads `/events` as it arrives (one rendered page per collection), as an open tab does.

node_exporter comes from Debian (`apt-get install prometheus-node-exporter`); without it accel
is measured alone and the script says so.
"""
import argparse
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def cpu_seconds(pid):
    # Fields 14 and 15 of /proc/PID/stat (after the command in parentheses): utime, stime.
    text = open(f"/proc/{pid}/stat").read()
    rest = text.rsplit(")", 1)[1].split()
    ticks = int(rest[11]) + int(rest[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def mapped(pid):
    found = set()
    for line in open(f"/proc/{pid}/maps"):
        low = line.lower()
        for key in ("pjrt", "libvulkan", "libcuda", "libtpu", "xla"):
            if key in low:
                found.add(key)
    return sorted(found)


def wait_up(url, seconds=20):
    t0 = time.time()
    while time.time() - t0 < seconds:
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return True
        except OSError:
            time.sleep(0.2)
    return False


def read_events(url, stop, counts, i):
    """One open page: read the event stream until told to stop, counting whole events."""
    counts[i] = 0
    in_event = False
    with urllib.request.urlopen(url, timeout=10) as r:
        while not stop.is_set():
            line = r.readline()
            if not line:
                return
            if line.startswith(b"data:"):
                in_event = True
            elif line in (b"\n", b"\r\n") and in_event:
                counts[i] += 1
                in_event = False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--accel", default="target/release/accel")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--interval", default="1")
    ap.add_argument(
        "--serve-args",
        default="",
        help="more arguments for accel serve, one string (fixture roots, "
        "--collector.process.labels, --kubelet.pod-resources-socket)",
    )
    ap.add_argument("--pages", type=int, default=0, help="live pages kept open on /events")
    a = ap.parse_args()

    print(f"CPU: {cpu_model()}, {os.cpu_count()} logical cores")
    procs = {}
    port = free_port()
    procs["accel serve"] = (
        subprocess.Popen(
            [a.accel, "serve", "--listen", f"127.0.0.1:{port}", "--interval", a.interval]
            + a.serve_args.split(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ),
        f"http://127.0.0.1:{port}/metrics",
    )
    ne = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
    if ne:
        nport = free_port()
        procs["node_exporter"] = (
            subprocess.Popen(
                [ne, f"--web.listen-address=127.0.0.1:{nport}"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            ),
            f"http://127.0.0.1:{nport}/metrics",
        )
    else:
        print("node_exporter: not installed (apt-get install prometheus-node-exporter): accel alone")
    try:
        for name, (p, url) in procs.items():
            if not wait_up(url):
                sys.exit(f"{name} did not answer on {url}")
        start = {name: (cpu_seconds(p.pid), time.time()) for name, (p, _) in procs.items()}
        stop = threading.Event()
        events = {}
        events_url = procs["accel serve"][1].replace("/metrics", "/events")
        pages = [
            threading.Thread(target=read_events, args=(events_url, stop, events, i), daemon=True)
            for i in range(a.pages)
        ]
        for t in pages:
            t.start()
        t0 = time.time()
        scrapes = {name: 0 for name in procs}
        while time.time() - t0 < a.seconds:
            tick = time.time()
            for name, (_, url) in procs.items():
                urllib.request.urlopen(url, timeout=5).read()
                scrapes[name] += 1
            time.sleep(max(0.0, 1.0 - (time.time() - tick)))
        print(f"{'exporter':<15} {'RSS after':>10} {'CPU avg':>9} {'scrapes':>8}  mapped compute libraries")
        for name, (p, _) in procs.items():
            c0, w0 = start[name]
            cpu = (cpu_seconds(p.pid) - c0) / (time.time() - w0) * 100
            libs = ", ".join(mapped(p.pid)) or "none"
            print(f"{name:<15} {rss_kib(p.pid) / 1024:>7.1f} MiB {cpu:>7.2f} % {scrapes[name]:>8}  {libs}")
        if a.pages:
            got = [events.get(i, 0) for i in range(a.pages)]
            print(f"live pages open on accel serve: {a.pages}, events each read: {got}")
        stop.set()
    finally:
        for p, _ in procs.values():
            p.terminate()
            p.wait()


if __name__ == "__main__":
    main()
