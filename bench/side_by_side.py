#!/usr/bin/env python3
"""accel against numpy (OpenBLAS) and PyTorch (CPU) on the same workloads, in one run.

Every contender runs the same sizes and dtypes with the same method, as the seeds time
`A @ B`: in a fresh process, warm-up iterations inside it, then timed iterations each measured
on its own, reporting their median. accel runs as `accel bench` (a fresh process each time);
numpy and PyTorch run in a fresh Python process each too (`fresh`), and also inside this one
(`in-proc`, where their thread pools are warm from the previous round), shown beside.

A run is `--rounds` rounds, interleaved (numpy, torch, accel, numpy, ...) so that the
machine's drift hits all alike; a contender's figure for a run is its median over the rounds.
With `--runs` R, the table shows the median figure over runs and the ratio accel / reference
(above 1: accel is faster) as min / median / max over the R runs, and % of the CPU's peak
(`accel bench`'s peak for the dtype) for every contender.

    python3 bench/side_by_side.py [--runs 5] [--rounds 5] [--quick] [--filter 'f32 N=2000']

`accel py` is accel's Python module in a fresh process (`import accelkit`, the seeds' way),
where the wheel is installed in this Python. Needs numpy, and PyTorch for its contenders (left
out with a note where it is not installed; bench/run.sh sets up a venv with both), in the
Python that runs it, and the release binary (cargo build --release).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ACCEL = os.environ.get("ACCEL_BIN", os.path.join(HERE, "..", "target", "release", "accel"))


def time_it(fn, warmup, iters):
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(iters):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples)


# The workloads, by kind: each returns the median seconds of one call, or None where the
# contender has no such operation.

def numpy_matmul(n, dtype, warmup, iters, batch=1):
    import numpy as np
    if dtype not in ("f32", "f64"):
        return None
    t = {"f32": np.float32, "f64": np.float64}[dtype]
    rng = np.random.default_rng(0)
    shape = (batch, n, n) if batch > 1 else (n, n)
    a = rng.standard_normal(shape).astype(t)
    b = rng.standard_normal(shape).astype(t)
    return time_it(lambda: np.matmul(a, b), warmup, iters)


def torch_matmul(n, dtype, warmup, iters, batch=1):
    import torch
    t = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    shape = (batch, n, n) if batch > 1 else (n, n)
    a = torch.randn(*shape).to(t)
    b = torch.randn(*shape).to(t)
    return time_it((lambda: torch.bmm(a, b)) if batch > 1 else (lambda: a @ b), warmup, iters)


def accelpy_matmul(n, dtype, warmup, iters, batch=1):
    """accel's Python module, as the seeds' script would use it (`import accelkit`)."""
    import accelkit as accel
    import numpy as np
    if batch > 1:
        return None
    rng = np.random.default_rng(0)
    wide = {"f32": np.float32, "f64": np.float64}.get(dtype, np.float32)
    a = accel.tensor(rng.standard_normal((n, n)).astype(wide))
    b = accel.tensor(rng.standard_normal((n, n)).astype(wide))
    if dtype not in ("f32", "f64"):
        a, b = a.to_dtype(dtype), b.to_dtype(dtype)
    return time_it(lambda: a @ b, warmup, iters)


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


WORK = {("numpy", "matmul"): numpy_matmul, ("torch", "matmul"): torch_matmul,
        ("accel py", "matmul"): accelpy_matmul,
        ("numpy", "add"): numpy_add, ("torch", "add"): torch_add}


def in_proc(who, kind, **kw):
    return WORK[(who, kind)](**kw)


def fresh(who, kind, **kw):
    """The workload in a new Python process (imports, warm-ups and timing inside it)."""
    spec = json.dumps({"who": who, "kind": kind, "kw": kw})
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", spec],
                         check=True, capture_output=True, text=True, timeout=600).stdout
    return json.loads(out)["s"]


def accel_bench(args, peaks, key):
    """`accel bench ... --json` in a new process: the median seconds (and the peak, kept)."""
    out = subprocess.run([ACCEL, "bench", *args, "--device", "cpu", "--json"], check=True,
                         capture_output=True, text=True, timeout=600).stdout
    r = json.loads(out)["results"][0]
    peak = (r.get("peak") or {})
    if peak.get("gflop_per_s") or peak.get("gb_per_s"):
        peaks[key] = peak.get("gflop_per_s") or peak.get("gb_per_s")
    return r["stats"]["median_s"]


def accel_matmul(n, dtype, warmup, iters, peaks, batch=1):
    return accel_bench(["matmul", "--size", str(n), "--dtype", dtype, "--batch", str(batch),
                        "--warmup", str(warmup), "--iters", str(iters)], peaks, ("matmul", dtype))


def accel_add(n, warmup, iters, peaks):
    return accel_bench(["elementwise", "--op", "add", "--size", str(n),
                        "--warmup", str(warmup), "--iters", str(iters)], peaks, ("add", None))


CONTENDERS = ["numpy", "numpy in-proc", "torch", "torch in-proc", "accel", "accel py"]


def has_accel_module():
    try:
        import accelkit  # noqa: F401 - the wheel installed in this Python
        return True
    except ImportError:
        return False


def cases(quick, peaks):
    """(label, work in GFLOP or GB, unit, peak key, {contender: fn})"""
    out = []

    def matmul(n, dt, warmup, iters, batch=1):
        kw = dict(n=n, dtype=dt, warmup=warmup, iters=iters, batch=batch)
        fns = {"numpy": lambda: fresh("numpy", "matmul", **kw),
               "numpy in-proc": lambda: in_proc("numpy", "matmul", **kw),
               "torch": lambda: fresh("torch", "matmul", **kw),
               "torch in-proc": lambda: in_proc("torch", "matmul", **kw),
               "accel": lambda: accel_matmul(n, dt, warmup, iters, peaks, batch)}
        if batch == 1 and has_accel_module():
            fns["accel py"] = lambda: fresh("accel py", "matmul", **kw)
        if dt not in ("f32", "f64"):
            fns = {k: v for k, v in fns.items() if not k.startswith("numpy")}
        label = f"matmul {dt} N={n}" if batch == 1 else f"bmm {dt} {batch} x {n}x{n}"
        out.append((label, batch * 2.0 * n ** 3 / 1e9, "GFLOP/s", ("matmul", dt), fns))

    for n in [2000] if quick else [2000, 4096]:
        for dt in ["f32", "f64"]:
            # Three warm-ups, as the seeds do; N=4096 takes 0.3-0.7 s a product here.
            matmul(n, dt, 3, 10 if n <= 2000 else 4)
    # PyTorch's CPU f16 matmul runs near 1 GFLOP/s on CPUs without AVX512_FP16: the half
    # types at N=1024 (and bf16 at 2000) only, with fewer iterations.
    matmul(1024, "f16", 1, 3)
    for n in [1024, 2000]:
        matmul(n, "bf16", 1, 3)
    # Small products, where threading and packing overheads dominate.
    for n in [32, 64, 128, 256, 512]:
        matmul(n, "f32", 10, 200 if n <= 128 else 30)
    # A batch of 64 products of 64 x 64 (np.matmul / torch.bmm / one batched accel call).
    matmul(64, "f32", 10, 100, batch=64)
    n = 10_000_000
    kw = dict(n=n, warmup=3, iters=10)
    out.append((f"add f32 n={n:,}", 3 * 4 * n / 1e9, "GB/s", ("add", None),
                {"numpy": lambda: fresh("numpy", "add", **kw),
                 "numpy in-proc": lambda: in_proc("numpy", "add", **kw),
                 "torch": lambda: fresh("torch", "add", **kw),
                 "torch in-proc": lambda: in_proc("torch", "add", **kw),
                 "accel": lambda: accel_add(n, 3, 10, peaks)}))
    return out


def spread(xs):
    """min / median / max of a list, as text."""
    if not xs:
        return f"{'-':>17}"
    return f"{min(xs):5.2f} {statistics.median(xs):5.2f} {max(xs):5.2f}"


def have_torch():
    """PyTorch where it is installed, else None: a contender by default only where it exists."""
    try:
        import torch
        return torch
    except ImportError:
        return None


def header():
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
    import numpy as np
    torch = have_torch()
    tv = f"torch {torch.__version__} ({torch.get_num_threads()} threads)" if torch else \
        "torch not installed (its contenders left out)"
    print(f"numpy {np.__version__}, {tv}, {os.cpu_count()} cpus", flush=True)
    try:
        from threadpoolctl import threadpool_info
        for lib in threadpool_info():
            print(f"  numpy BLAS: {lib.get('internal_api')} {lib.get('version')} "
                  f"({lib.get('architecture')}, {lib.get('num_threads')} threads)")
    except ImportError:
        pass


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=5, help="runs; ratios are shown as min / median / max over them")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds in a run")
    p.add_argument("--quick", action="store_true", help="N=2000 only among the large products")
    p.add_argument("--filter", default="", help="only workloads whose label contains one of these (comma-separated)")
    p.add_argument("--pause", type=float, default=0.3,
                   help="seconds between contenders, for the previous one's spinning threads to stop")
    p.add_argument("--contenders", default=",".join(CONTENDERS),
                   help="comma-separated, from: " + ", ".join(CONTENDERS))
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        spec = json.loads(args.worker)
        print(json.dumps({"s": WORK[(spec["who"], spec["kind"])](**spec["kw"])}))
        return

    header()
    peaks = {}
    wanted = args.filter.split(",")
    todo = [c for c in cases(args.quick, peaks) if any(w in c[0] for w in wanted)]
    chosen = args.contenders.split(",")
    unknown = [c for c in chosen if c not in CONTENDERS]
    if unknown:
        sys.exit(f"unknown contender(s) {unknown}: choose from {CONTENDERS}")
    if have_torch() is None:
        chosen = [c for c in chosen if not c.startswith("torch")]
    todo = [(label, work, unit, key, {k: f for k, f in fns.items() if k in chosen})
            for label, work, unit, key, fns in todo]
    print(f"runs {args.runs} x rounds {args.rounds}; figures: median over runs of each run's median "
          f"over rounds; ratios: min / median / max over runs (fresh processes on both sides)\n")
    cols = "".join(f"{c:>15}" for c in CONTENDERS)
    print(f"{'workload':<22}{cols}{'accel/numpy':>19}{'accel/torch':>19}", flush=True)
    failures = 0
    for label, work, unit, key, fns in todo:
        per_run = {who: [] for who in fns}  # a run's median seconds
        errors = []
        for _ in range(args.runs):
            ts = {who: [] for who in fns}
            for _ in range(args.rounds):
                for who, fn in fns.items():
                    # Let the previous contender's worker threads (OpenMP and OpenBLAS spin
                    # for a while after their last job) go idle before the next one starts.
                    time.sleep(args.pause)
                    try:
                        t = fn()
                    except Exception as e:  # noqa: BLE001 - report and go on
                        errors.append(f"{who}: {type(e).__name__}: {e}")
                        continue
                    if t:
                        ts[who].append(t)
            for who, v in ts.items():
                if v:
                    per_run[who].append(statistics.median(v))
        rate = {who: work / statistics.median(v) if v else None for who, v in per_run.items()}

        def ratios(ref):
            a, b = per_run.get("accel", []), per_run.get(ref, [])
            return [tb / ta for ta, tb in zip(a, b)] if len(a) == len(b) else []

        peak = peaks.get(key)
        cell = lambda v: (f"{v:9.1f}" + (f" {100 * v / peak:3.0f}%" if peak else "     ")) if v else f"{'-':>14}"
        print(f"{label:<22}" + "".join(f" {cell(rate.get(c))}" for c in CONTENDERS)
              + f"  {spread(ratios('numpy'))}  {spread(ratios('torch'))}", flush=True)
        if args.runs > 1:
            # Each run's ratios, in order, so that one bad run can be told from drift.
            each = "; ".join(f"vs {ref}: " + " ".join(f"{r:.2f}" for r in ratios(ref))
                             for ref in ("numpy", "torch") if ratios(ref))
            if each:
                print(f"    runs, in order: {each}", flush=True)
        for e in dict.fromkeys(errors):
            print(f"    FAILED {e}", flush=True)
        failures += bool(errors)
    print(f"\nunits: matmul in GFLOP/s, add in GB/s (3 x 4 bytes per element), with % of the peak "
          f"accel bench gives for the dtype (add: memory bandwidth); {failures} case(s) with failures")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
