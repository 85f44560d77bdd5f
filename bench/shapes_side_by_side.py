#!/usr/bin/env python3
"""accel against PyTorch on the CPU for given matmul shapes (a Linear layer's x @ W.t() on a
few tokens, a vector times a matrix), which side_by_side.py's square products do not cover.

    python3 bench/shapes_side_by_side.py [--dtype bf16] [--layout t] [--rounds 3] SHAPE...

SHAPE is MxNxK; --layout t stores B as n x k and multiplies by its transpose (PyTorch's Linear
weight), n as k x n. Each round runs accel (crates/compute/examples/matmul_shapes, built here
if missing) and PyTorch (this script with --worker, torch.set_num_threads(2)) in a fresh
process each, in alternating order; both time the same way (10 warm-ups, 7 timed runs of
calls, the median run). The table gives each one's median over rounds in GFLOP/s and
accel / PyTorch as min / median / max over rounds (above 1: accel is faster).
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "target", "release", "examples", "matmul_shapes")


def worker(dtype, layout, shapes):
    """PyTorch's side, in its own process: one line 'MxNxK GFLOP/s' a shape."""
    import torch
    torch.set_num_threads(2)
    dt = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16,
          "f16": torch.float16}[dtype]
    for spec in shapes:
        m, n, k = (int(d) for d in spec.split("x"))
        a = torch.randn(m, k, dtype=dt)
        b = torch.randn(n, k, dtype=dt).t() if layout == "t" else torch.randn(k, n, dtype=dt)
        gflop = 2 * m * n * k / 1e9
        for _ in range(10):
            a @ b
        calls = min(100_000, max(3, int(2.5 / gflop + 0.999)))
        rates = []
        for _ in range(7):
            t = time.perf_counter()
            for _ in range(calls):
                a @ b
            rates.append(gflop * calls / (time.perf_counter() - t))
        rates.sort()
        print(f"{spec} {rates[3]:.1f}", flush=True)


def parse(out):
    return {line.split()[0]: float(line.split()[1]) for line in out.splitlines() if line.strip()}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dtype", default="bf16", choices=["f32", "f64", "bf16", "f16"])
    p.add_argument("--layout", default="t", choices=["t", "n"])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("shapes", nargs="+")
    args = p.parse_args()
    for s in args.shapes:
        d = s.split("x")
        if len(d) != 3 or not all(x.isdigit() and int(x) > 0 for x in d):
            p.error(f"shape {s!r} is not MxNxK with sizes above 0")
    if args.worker:
        return worker(args.dtype, args.layout, args.shapes)
    if not os.path.exists(EXAMPLE):
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "accelkit", "--example",
                        "matmul_shapes"], cwd=ROOT, check=True)
    env = dict(os.environ, OMP_NUM_THREADS="2", RAYON_NUM_THREADS="2")
    cmds = {"accel": [EXAMPLE, args.dtype, args.layout, *args.shapes],
            "torch": [sys.executable, os.path.abspath(__file__), "--worker", "--dtype",
                      args.dtype, "--layout", args.layout, *args.shapes]}
    got = {"accel": [], "torch": []}
    for r in range(args.rounds):
        for who in (["accel", "torch"] if r % 2 == 0 else ["torch", "accel"]):
            out = subprocess.run(cmds[who], env=env, check=True, capture_output=True, text=True)
            got[who].append(parse(out.stdout))
    print(f"{args.dtype}, B {'transposed (n x k stored)' if args.layout == 't' else 'k x n'}, "
          f"{args.rounds} rounds, GFLOP/s (median over rounds)")
    print(f"{'shape':>16} {'accel':>8} {'torch':>8}   accel/torch min median max")
    for s in args.shapes:
        a = [g[s] for g in got["accel"]]
        t = [g[s] for g in got["torch"]]
        ratios = [x / y for x, y in zip(a, t)]
        print(f"{s:>16} {statistics.median(a):8.1f} {statistics.median(t):8.1f}   "
              f"{min(ratios):.2f} {statistics.median(ratios):.2f} {max(ratios):.2f}")


if __name__ == "__main__":
    main()
