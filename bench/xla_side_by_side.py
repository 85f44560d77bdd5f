#!/usr/bin/env python3
"""accel on an XLA device against JAX on the same machine, matmul, in one run.

JAX compiles `jnp.dot` with XLA for its default backend (the CPU here, the GPU on a GPU
machine); accel compiles StableHLO `dot_general` with XLA through a PJRT plugin. Both are
timed the same way: warm-up (which includes compilation), then timed iterations from dispatch
to a wait for the result (`block_until_ready` / `Device::synchronize`), median reported.
Compilation is excluded from both and accel reports its compile time apart.

    python3 bench/xla_side_by_side.py [--accel target/release/accel] [--device xla:0]
        [--size 2000] [--dtype f32] [--rounds 3]

Needs jax in the Python that runs it, and a PJRT plugin accel can find (for the CPU:
`pip install lammps-jax-pjrt-cpu`; on a GPU machine JAX's own CUDA plugin).
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


def jax_matmul(n, dtype, warmup, iters, platform=None):
    import jax
    import jax.numpy as jnp
    dev = jax.devices(platform)[0] if platform else jax.devices()[0]
    t = {"f32": jnp.float32, "f64": jnp.float64, "bf16": jnp.bfloat16, "f16": jnp.float16}[dtype]
    ka, kb = jax.random.split(jax.random.PRNGKey(0))
    a = jax.device_put(jax.random.normal(ka, (n, n)).astype(t), dev)
    b = jax.device_put(jax.random.normal(kb, (n, n)).astype(t), dev)
    f = jax.jit(jnp.dot)
    for _ in range(warmup):
        f(a, b).block_until_ready()
    samples = []
    for _ in range(iters):
        s = time.perf_counter()
        f(a, b).block_until_ready()
        samples.append(time.perf_counter() - s)
    return statistics.median(samples)


def accel_matmul(accel, device, n, dtype, warmup, iters):
    out = subprocess.run(
        [accel, "bench", "matmul", "--device", device, "--size", str(n), "--dtype", dtype,
         "--warmup", str(warmup), "--iters", str(iters), "--json"],
        check=True, capture_output=True, text=True).stdout
    return json.loads(out)["results"][0]["stats"]["median_s"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--accel", default=DEFAULT_ACCEL)
    p.add_argument("--device", default="xla:0")
    p.add_argument("--size", type=int, action="append")
    p.add_argument("--dtype", default="f32")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--same-plugin", metavar="PLUGIN.so",
                   help="also time JAX on this PJRT plugin (the one accel uses)")
    args = p.parse_args()
    sizes = args.size or [2000]
    if args.dtype == "f64":
        os.environ["JAX_ENABLE_X64"] = "1"

    same = None
    if args.same_plugin:
        # JAX on the very plugin accel uses: registered under its own platform name.
        from jax._src import xla_bridge
        xla_bridge.register_plugin("accelsame", library_path=args.same_plugin)
        same = "accelsame"
    import jax
    print(f"jax {jax.__version__} on {jax.devices()[0].platform} ({jax.devices()[0].device_kind}); "
          f"accel on {args.device}; rounds {args.rounds}", flush=True)
    warmup = 3
    # Each size is measured and printed before the next starts, so a timeout loses nothing
    # measured before it; a failing side is reported on its row and the run goes on.
    print(f"{'workload':<22}{'JAX GFLOP/s':>14}{'JAX same plugin':>17}{'accel GFLOP/s':>16}"
          f"{'accel/JAX':>11}{'accel/JAX same':>16}", flush=True)
    failures = 0
    for n in sizes:
        j, a, js, errors = [], [], [], []

        def attempt(who, fn, into):
            try:
                into.append(fn())
            except subprocess.CalledProcessError as e:
                errors.append(f"{who} exit {e.returncode}: {(e.stderr or '').strip()[-300:]}")
            except Exception as e:  # noqa: BLE001 - report and go on
                errors.append(f"{who}: {type(e).__name__}: {e}")
            time.sleep(1.0)

        for _ in range(args.rounds):
            attempt("jax", lambda: jax_matmul(n, args.dtype, warmup, args.iters), j)
            if same:
                attempt("jax (same plugin)",
                        lambda: jax_matmul(n, args.dtype, warmup, args.iters, same), js)
            attempt("accel", lambda: accel_matmul(args.accel, args.device, n, args.dtype,
                                                  warmup, args.iters), a)
        flops = 2.0 * n ** 3 / 1e9
        rate = lambda ts: flops / statistics.median(ts) if ts else None
        jr, ar, sr = rate(j), rate(a), rate(js)
        cell = lambda v, w: f"{v:{w}.1f}" if v else f"{('failed' if v is None else '-'):>{w}}"
        ratio = lambda x, y, w: f"{x / y:{w}.2f}" if x and y else f"{'-':>{w}}"
        print(f"{f'matmul {args.dtype} N={n}':<22}{cell(jr, 14)}"
              f"{cell(sr, 17) if same else f'{chr(45):>17}'}{cell(ar, 16)}"
              f"{ratio(ar, jr, 11)}{ratio(ar, sr, 16)}", flush=True)
        for e in dict.fromkeys(errors):
            print(f"    FAILED {e}", flush=True)
        failures += bool(errors)
    print(f"\nmedian over {args.rounds} interleaved rounds of the median of {args.iters} timed "
          f"iterations after {warmup} warm-ups; execution only (compilation happens in the "
          f"warm-up). Not like for like: accel runs in a new process each round, so XLA "
          f"compiles (on a GPU, autotunes) its program again every round, inside the warm-up; "
          f"JAX compiles once per process. {failures} size(s) with failures")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
