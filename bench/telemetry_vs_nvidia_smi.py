#!/usr/bin/env python3
"""accel's telemetry beside nvidia-smi, taken at the same moment, on an NVIDIA machine.

Three views of every GPU, read within the same second: `accel monitor --json --count 1`,
`accel serve`'s DCGM series (one scrape), and `nvidia-smi --query-gpu=...`. Prints one table
per GPU and fails (exit 1) when a number disagrees beyond what the driver's own sampling
explains: memory total must match exactly; memory used within 1 % of the total; temperature
within 3 C; power within 15 % or 15 W; utilisation within 25 points (NVML averages it over a
window that moves between two reads). Also runs `accel pick` and checks that the UUIDs it
prints are GPUs nvidia-smi lists. Without nvidia-smi it says `skipped:` and exits 0.

    python3 bench/telemetry_vs_nvidia_smi.py --accel target/release/accel
"""
import argparse
import json
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request

FIELDS = "index,uuid,utilization.gpu,memory.used,memory.total,temperature.gpu,power.draw"


def smi():
    out = subprocess.run(
        ["nvidia-smi", f"--query-gpu={FIELDS}", "--format=csv,noheader,nounits"],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout
    rows = {}
    for line in out.strip().splitlines():
        f = [x.strip() for x in line.split(",")]
        num = lambda s: float(s) if s not in ("[N/A]", "N/A", "") else None
        rows[f[1]] = {
            "index": int(f[0]), "util": num(f[2]), "used_mib": num(f[3]),
            "total_mib": num(f[4]), "temp": num(f[5]), "power": num(f[6]),
        }
    return rows


def monitor(accel):
    out = subprocess.run([accel, "monitor", "--json", "--count", "1", "--interval", "0.2"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    doc = json.loads(out.strip().splitlines()[-1])
    return {d["uuid"]: d for d in doc["devices"] if d["vendor"] == "nvidia" and d["mig_parent"] is None}


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def dcgm(accel):
    port = free_port()
    p = subprocess.Popen([accel, "serve", "--listen", f"127.0.0.1:{port}", "--interval", "1"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        t0 = time.time()
        while time.time() - t0 < 30:
            try:
                text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
                break
            except OSError:
                time.sleep(0.2)
        else:
            raise SystemExit("accel serve did not answer within 30 s")
    finally:
        p.terminate()
        p.wait()
    series = {}
    for line in text.splitlines():
        if not line.startswith("DCGM_FI_DEV_"):
            continue
        name, rest = line.split("{", 1)
        labels, value = rest.rsplit("} ", 1)
        uuid = labels.split('UUID="', 1)[1].split('"', 1)[0]
        series.setdefault(uuid, {})[name] = float(value)
    return series


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--accel", default="target/release/accel")
    a = ap.parse_args()
    if not shutil.which("nvidia-smi"):
        print("skipped: nvidia: no nvidia-smi on this machine")
        return 0
    # The three reads at the same moment.
    got = {}
    threads = [threading.Thread(target=lambda k=k, f=f: got.__setitem__(k, f()))
               for k, f in (("smi", smi), ("mon", lambda: monitor(a.accel)), ("dcgm", lambda: dcgm(a.accel)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    bad = []
    mib = 1024 * 1024
    for uuid, s in sorted(got["smi"].items(), key=lambda kv: kv[1]["index"]):
        m = got["mon"].get(uuid)
        d = got["dcgm"].get(uuid, {})
        print(f"GPU {s['index']} {uuid}")
        if m is None:
            bad.append(f"{uuid}: not in accel monitor --json")
            continue
        rows = [
            ("utilization %", s["util"], m["utilization_percent"], d.get("DCGM_FI_DEV_GPU_UTIL")),
            ("memory used MiB", s["used_mib"], m["memory_used_bytes"] and m["memory_used_bytes"] / mib, d.get("DCGM_FI_DEV_FB_USED")),
            ("memory total MiB", s["total_mib"], m["memory_total_bytes"] and m["memory_total_bytes"] / mib, None),
            ("temperature C", s["temp"], m["temperature_c"], d.get("DCGM_FI_DEV_GPU_TEMP")),
            ("power W", s["power"], m["power_w"], d.get("DCGM_FI_DEV_POWER_USAGE")),
        ]
        fmt = lambda v: "-" if v is None else f"{v:.1f}"
        print(f"  {'':<18}{'nvidia-smi':>12}{'monitor':>12}{'DCGM series':>13}")
        for name, ref, mon, dc in rows:
            print(f"  {name:<18}{fmt(ref):>12}{fmt(mon):>12}{fmt(dc):>13}")
            tol = {"utilization %": 25, "memory used MiB": 0.01 * (s["total_mib"] or 0) + 1,
                   "memory total MiB": 1, "temperature C": 3,
                   "power W": max(15, 0.15 * (s["power"] or 0))}[name]
            for label, v in (("monitor", mon), ("DCGM", dc)):
                if ref is not None and v is not None and abs(v - ref) > tol:
                    bad.append(f"GPU {s['index']} {name}: nvidia-smi {ref}, {label} {v:.1f} (tolerance {tol:.1f})")
                if ref is not None and v is None and not (label == "DCGM" and name == "memory total MiB"):
                    bad.append(f"GPU {s['index']} {name}: nvidia-smi {ref}, {label} has none")
        print(f"  throttle reasons: {', '.join(m['throttle_reasons']) or 'none'}; "
              f"PCIe tx/rx {m['pcie_tx_bytes_per_s']}/{m['pcie_rx_bytes_per_s']} B/s; "
              f"ECC {m['ecc_corrected_errors']}/{m['ecc_uncorrected_errors']}; energy {m['energy_joules']} J; "
              f"{len(m['processes'])} process(es)")
    pick = subprocess.run([a.accel, "pick", "--count", "1"], capture_output=True, text=True, timeout=60)
    print(f"accel pick: exit {pick.returncode}: {pick.stdout.strip()} {pick.stderr.strip()}")
    if pick.returncode == 0 and pick.stdout.strip() not in got["smi"]:
        bad.append(f"accel pick printed {pick.stdout.strip()!r}, not a UUID nvidia-smi lists")
    for b in bad:
        print(f"DISAGREE {b}")
    print("telemetry agrees with nvidia-smi" if not bad else f"{len(bad)} disagreement(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
