#!/usr/bin/env python3
"""accel against PyTorch on an NVIDIA GPU, the same workloads in one run.

Both sides use the same method: warm-up iterations, then timed iterations each measured on the
host from launch to a full synchronisation (torch.cuda.synchronize / accel's stream sync),
median reported. Rounds are interleaved (torch, accel, torch, ...) and the table shows the
median over rounds and accel / torch as a throughput ratio (above 1: accel is faster).

    python3 bench/gpu_side_by_side.py [--accel target/release/accel] [--rounds 3] [--quick]

Needs torch with CUDA in the Python that runs it. Workloads (issue 3's bars):
  matmul N=8192 f32 (TF32 off), tf32, bf16, f16; add of 2^28 f32; 1 GiB copies host->device and
  device->host, from and to pageable memory (PyTorch's `x.to("cuda")`, `x.cpu()`; accel stages
  through its own pinned buffers) and pinned memory (`pin_memory()` on both sides: one DMA);
  add of two 1x1 tensors, synchronised, 1000 times (launch-to-completion latency).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_ACCEL = os.path.join(HERE, "..", "target", "release", "accel")


def sync_timed(torch, fn, warmup, iters):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(iters):
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples)


def torch_matmul(torch, n, dtype, warmup, iters):
    tf32 = dtype == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    t = {"f32": torch.float32, "tf32": torch.float32, "f16": torch.float16,
         "bf16": torch.bfloat16, "f64": torch.float64}[dtype]
    a = torch.randn(n, n, device="cuda").to(t)
    b = torch.randn(n, n, device="cuda").to(t)
    r = sync_timed(torch, lambda: a @ b, warmup, iters)
    torch.backends.cuda.matmul.allow_tf32 = False
    return r


def torch_add(torch, n, warmup, iters):
    a = torch.ones(n, device="cuda")
    b = torch.ones(n, device="cuda")
    return sync_timed(torch, lambda: a + b, warmup, iters)


def torch_copy(torch, nbytes, direction, host_memory, warmup, iters):
    n = nbytes // 4
    pinned = host_memory == "pinned"
    if direction == "h2d":
        host = torch.arange(n, dtype=torch.float32)
        if pinned:
            host = host.pin_memory()
        return sync_timed(torch, lambda: host.to("cuda", non_blocking=pinned), warmup, iters)
    dev = torch.arange(n, dtype=torch.float32, device="cuda")
    if not pinned:
        return sync_timed(torch, lambda: dev.cpu(), warmup, iters)
    out = torch.empty(n, dtype=torch.float32).pin_memory()
    return sync_timed(torch, lambda: out.copy_(dev, non_blocking=True), warmup, iters)


def accel_json(accel, args):
    out = subprocess.run([accel, "bench", *args, "--json"], check=True,
                         capture_output=True, text=True).stdout
    r = json.loads(out)["results"][0]
    dev = (r.get("device_stats") or {}).get("median_s")
    return r["stats"]["median_s"], dev


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--accel", default=DEFAULT_ACCEL)
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke test")
    args = p.parse_args()

    import torch
    if not torch.cuda.is_available():
        sys.exit("torch sees no CUDA GPU")
    idx = int(args.device.split(":")[1])
    print(f"torch {torch.__version__} (CUDA {torch.version.cuda}), "
          f"{torch.cuda.get_device_name(idx)}, rounds {args.rounds}", flush=True)
    torch.cuda.set_device(idx)

    n = 2048 if args.quick else 8192
    add_n = 1 << (22 if args.quick else 28)
    copy_bytes = (64 << 20) if args.quick else (1 << 30)
    warmup, iters = 3, 20
    dev = args.device
    cases = []  # (label, work, unit, torch fn, accel args)
    for dt in ["f32", "tf32", "bf16", "f16"]:
        accel_dt = "f32" if dt == "tf32" else dt
        extra = ["--tf32"] if dt == "tf32" else []
        cases.append((f"matmul {dt} N={n}", 2.0 * n ** 3 / 1e12, "TFLOP/s",
                      lambda dt=dt: torch_matmul(torch, n, dt, warmup, iters),
                      ["matmul", "--device", dev, "--size", str(n), "--dtype", accel_dt,
                       "--warmup", str(warmup), "--iters", str(iters), *extra]))
    cases.append((f"add f32 n=2^{add_n.bit_length() - 1}", 3 * 4 * add_n / 1e9, "GB/s",
                  lambda: torch_add(torch, add_n, warmup, iters),
                  ["elementwise", "--op", "add", "--device", dev, "--size", str(add_n),
                   "--warmup", str(warmup), "--iters", str(iters)]))
    for d in ["h2d", "d2h"]:
        for mem in ["pageable", "pinned"]:
            cases.append((f"copy {d} {mem} {copy_bytes >> 20} MiB", copy_bytes / 1e9, "GB/s",
                          lambda d=d, mem=mem: torch_copy(torch, copy_bytes, d, mem, warmup, 10),
                          ["copy", "--direction", d, "--device", dev, "--size", str(copy_bytes),
                           "--host-memory", mem, "--warmup", str(warmup), "--iters", "10"]))
    cases.append(("add 1x1 (latency)", None, "us",
                  lambda: torch_add(torch, 1, 10, 1000),
                  ["elementwise", "--op", "add", "--device", dev, "--size", "1",
                   "--warmup", "10", "--iters", "1000"]))

    # Each case is measured and printed before the next starts (rounds interleaved within
    # it), so a timeout or a failure loses nothing measured before it; a failing side is
    # reported on its row and the run goes on.
    notes = {
        "copy d2h pageable": "not like for like: accel copies into a cached host buffer it "
                             "zero-filled once; PyTorch pays the page faults of a fresh tensor",
        "add 1x1 (latency)": "both synchronise after every add; accel's includes its stream sync",
    }
    print(f"{'workload':<30}{'torch':>16}{'accel':>16}{'accel/torch':>13}{'accel (events)':>18}",
          flush=True)
    failures = 0
    for label, work, unit, tfn, aargs in cases:
        ts, walls, devs, errors = [], [], [], []
        for _ in range(args.rounds):
            try:
                ts.append(tfn())
                torch.cuda.empty_cache()
            except Exception as e:  # noqa: BLE001 - report and go on
                errors.append(f"torch: {type(e).__name__}: {e}")
            try:
                wall, devt = accel_json(args.accel, aargs)
                walls.append(wall)
                if devt is not None:
                    devs.append(devt)
            except subprocess.CalledProcessError as e:
                errors.append(f"accel exit {e.returncode}: {(e.stderr or '').strip()[-300:]}")
            except Exception as e:  # noqa: BLE001
                errors.append(f"accel: {type(e).__name__}: {e}")
        t = statistics.median(ts) if ts else None
        a = statistics.median(walls) if walls else None
        evs = f"{statistics.median(devs) * 1e6:15.1f} us" if devs else f"{'-':>18}"
        short = unit.split('/')[0]
        if work is None:
            # Latency: lower is better; the ratio is still "how many times faster accel is".
            cell = lambda v: f"{v * 1e6:13.2f} us" if v else f"{'failed':>16}"
        else:
            cell = lambda v: f"{work / v:12.1f} {short:<3}" if v else f"{'failed':>16}"
        ratio = f"{t / a:13.2f}" if t and a else f"{'-':>13}"
        print(f"{label:<30}{cell(t)}{cell(a)}{ratio}{evs}", flush=True)
        for key, note in notes.items():
            if label.startswith(key):
                print(f"    note: {note}", flush=True)
        for e in dict.fromkeys(errors):
            print(f"    FAILED {e}", flush=True)
        failures += bool(errors)
    print(f"\nunits: matmul in TFLOP/s, add in GB/s (3 x 4 bytes per element), copies in GB/s; "
          f"median over {args.rounds} interleaved rounds of the median of {iters} timed "
          f"iterations (copies 10, latency 1000), each from launch to synchronisation; "
          f"{failures} case(s) with failures")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
