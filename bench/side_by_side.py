#!/usr/bin/env python3
"""accel against numpy (OpenBLAS) and PyTorch (CPU) on the same workloads, in one run.

Every contender runs the same sizes and dtypes with the same method: warm-up iterations, then
timed iterations each measured on its own, reporting the median. Rounds are interleaved
(numpy, torch, accel, numpy, ...) so that the machine's drift hits all alike, and the table
shows the median over rounds and the ratio accel / reference (above 1 means accel is faster).

    python3 bench/side_by_side.py [--rounds 5] [--quick]

Needs numpy and torch in the Python that runs it (bench/run.sh sets up a venv with both) and
the release binary (cargo build --release).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ACCEL = os.path.join(HERE, "..", "target", "release", "accel")


def time_it(fn, warmup, iters):
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(iters):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples)


def numpy_matmul(n, dtype, warmup, iters):
    import numpy as np
    if dtype not in ("f32", "f64"):
        return None
    t = {"f32": np.float32, "f64": np.float64}[dtype]
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(t)
    b = rng.standard_normal((n, n)).astype(t)
    return time_it(lambda: a @ b, warmup, iters)


def torch_matmul(n, dtype, warmup, iters):
    import torch
    t = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    a = torch.randn(n, n).to(t)
    b = torch.randn(n, n).to(t)
    return time_it(lambda: a @ b, warmup, iters)


def numpy_bmm(b, n, warmup, iters):
    import numpy as np
    rng = np.random.default_rng(0)
    x = rng.standard_normal((b, n, n)).astype(np.float32)
    y = rng.standard_normal((b, n, n)).astype(np.float32)
    return time_it(lambda: np.matmul(x, y), warmup, iters)


def torch_bmm(b, n, warmup, iters):
    import torch
    x = torch.randn(b, n, n)
    y = torch.randn(b, n, n)
    return time_it(lambda: torch.bmm(x, y), warmup, iters)


def accel_matmul(n, dtype, warmup, iters, batch=1):
    out = subprocess.run(
        [ACCEL, "bench", "matmul", "--device", "cpu", "--size", str(n), "--dtype", dtype,
         "--batch", str(batch),
         "--warmup", str(warmup), "--iters", str(iters), "--json"],
        check=True, capture_output=True, text=True).stdout
    return json.loads(out)["results"][0]["stats"]["median_s"]


def numpy_add(n, warmup, iters):
    import numpy as np
    a = np.ones(n, dtype=np.float32)
    b = np.ones(n, dtype=np.float32)
    return time_it(lambda: a + b, warmup, iters)


def torch_add(n, warmup, iters):
    import torch
    a = torch.ones(n)
    b = torch.ones(n)
    return time_it(lambda: a + b, warmup, iters)


def accel_add(n, warmup, iters):
    out = subprocess.run(
        [ACCEL, "bench", "elementwise", "--op", "add", "--size", str(n), "--device", "cpu",
         "--warmup", str(warmup), "--iters", str(iters), "--json"],
        check=True, capture_output=True, text=True).stdout
    return json.loads(out)["results"][0]["stats"]["median_s"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="one size, fewer iterations")
    p.add_argument("--filter", default="", help="only workloads whose label contains one of these (comma-separated)")
    args = p.parse_args()

    import numpy as np
    import torch
    cpu = {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            k, _, v = line.partition(":")
            cpu.setdefault(k.strip(), v.strip())
    flags = [x for x in cpu.get("flags", "").split() if x.startswith(("avx512", "amx")) or x in ("avx2", "fma")]
    print(f"CPU: {cpu.get('model name', '?')} (family {cpu.get('cpu family', '?')}, model "
          f"{cpu.get('model', '?')}); flags: {' '.join(flags)}")
    for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        if v in os.environ:
            print(f"  note: {v}={os.environ[v]} is set: OpenBLAS may not use its best kernels "
                  f"(bench/run.sh unsets it)")
    print(f"numpy {np.__version__}, torch {torch.__version__} ({torch.get_num_threads()} threads), "
          f"{os.cpu_count()} cpus, rounds {args.rounds}", flush=True)
    try:
        from threadpoolctl import threadpool_info
        for lib in threadpool_info():
            print(f"  numpy BLAS: {lib.get('internal_api')} {lib.get('version')} "
                  f"({lib.get('architecture')}, {lib.get('num_threads')} threads)")
    except ImportError:
        pass

    warmup, iters = 3, 10
    cases = []  # (label, flops or bytes, unit, {contender: fn})
    sizes = [2000] if args.quick else [2000, 4096]
    for n in sizes + [1024]:
        for dt in ["f32", "f64", "f16", "bf16"]:
            # PyTorch's CPU f16 matmul runs near 1 GFLOP/s on CPUs without AVX512_FP16: time
            # the half types at N=1024 (and bf16 at 2048) only, with fewer iterations.
            if dt.endswith("16") != (n == 1024) and not (dt == "bf16" and n == 2000):
                continue
            it = iters if not dt.endswith("16") else 3
            fns = {"numpy": lambda n=n, dt=dt, it=it: numpy_matmul(n, dt, warmup if it > 3 else 1, it),
                   "torch": lambda n=n, dt=dt, it=it: torch_matmul(n, dt, warmup if it > 3 else 1, it),
                   "accel": lambda n=n, dt=dt, it=it: accel_matmul(n, dt, warmup if it > 3 else 1, it)}
            cases.append((f"matmul {dt} N={n}", 2.0 * n ** 3 / 1e9, "GFLOP/s", fns))
    # Small products, where threading and packing overheads dominate.
    for n in [32, 64, 128, 256, 512]:
        it = 200 if n <= 128 else 30
        fns = {"numpy": lambda n=n, it=it: numpy_matmul(n, "f32", 10, it),
               "torch": lambda n=n, it=it: torch_matmul(n, "f32", 10, it),
               "accel": lambda n=n, it=it: accel_matmul(n, "f32", 10, it)}
        cases.append((f"matmul f32 N={n}", 2.0 * n ** 3 / 1e9, "GFLOP/s", fns))
    # A batch of 64 products of 64 x 64 (np.matmul / torch.bmm / one batched accel call).
    fns = {"numpy": lambda: numpy_bmm(64, 64, 10, 100),
           "torch": lambda: torch_bmm(64, 64, 10, 100),
           "accel": lambda: accel_matmul(64, "f32", 10, 100, batch=64)}
    cases.append(("bmm f32 64 x 64x64", 64 * 2.0 * 64 ** 3 / 1e9, "GFLOP/s", fns))
    n = 10_000_000
    cases.append((f"add f32 n={n:,}", 3 * 4 * n / 1e9, "GB/s",
                  {"numpy": lambda: numpy_add(n, warmup, iters),
                   "torch": lambda: torch_add(n, warmup, iters),
                   "accel": lambda: accel_add(n, warmup, iters)}))

    wanted = args.filter.split(",")
    cases = [c for c in cases if any(w in c[0] for w in wanted)]
    # Each case is measured and printed before the next starts (rounds interleaved within
    # it), so a timeout loses nothing measured before it; a failing contender is reported on
    # its row and the run goes on.
    print(f"{'workload':<24}{'numpy':>14}{'torch':>14}{'accel':>14}{'accel/numpy':>13}{'accel/torch':>13}",
          flush=True)
    failures = 0
    for label, work, unit, fns in cases:
        results = {k: [] for k in fns}
        errors = []
        for _ in range(args.rounds):
            for who, fn in fns.items():
                # Let the previous contender's worker threads (OpenMP and OpenBLAS spin for a
                # while after their last job) go idle before the next one starts.
                time.sleep(1.0)
                try:
                    t = fn()
                except Exception as e:  # noqa: BLE001 - report and go on
                    errors.append(f"{who}: {type(e).__name__}: {e}")
                    continue
                if t is not None:
                    results[who].append(t)
        rate = {who: work / statistics.median(ts) if ts else None for who, ts in results.items()}
        cell = lambda v: f"{v:10.1f} {unit.split('/')[0]:<3}" if v else f"{'-':>14}"
        ratio = lambda a, b: f"{a / b:13.2f}" if a and b else f"{'-':>13}"
        print(f"{label:<24}{cell(rate['numpy'])}{cell(rate['torch'])}{cell(rate['accel'])}"
              f"{ratio(rate['accel'], rate['numpy'])}{ratio(rate['accel'], rate['torch'])}",
              flush=True)
        for e in dict.fromkeys(errors):
            print(f"    FAILED {e}", flush=True)
        failures += bool(errors)
    print(f"\nunits: matmul in GFLOP/s, add in GB/s (3 x 4 bytes per element); median over "
          f"{args.rounds} interleaved rounds of the median of timed iterations; "
          f"{failures} case(s) with failures")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
