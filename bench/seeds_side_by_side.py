#!/usr/bin/env python3
"""The seeds' two Python scripts run twice in fresh processes: under PyTorch (`import torch`) and
under accel (`import accelkit as torch`), their outputs printed side by side and compared.

    python3 bench/seeds_side_by_side.py [--n 2000] [--iters 10]

The scripts are the ones python/tests/test_torch_spelling.py checks (SEED_DEVICES, SEED_MATMUL),
the matmul script at the seeds' own size (N=2000, 10 timed calls) unless told otherwise. The
device script's lines must be equal, but for the allocator's two lines, where PyTorch's caching
allocator and accel's may differ (both are printed). The matmul script's timing lines differ by
nature; its last line (the CPU and the accelerator on the same operands) must be below 1e-3 for
each. Exit status 1 when a line that must be equal is not, or a script fails. Without PyTorch
installed, accel's side alone runs and the comparison says skipped.
"""
import argparse
import importlib.util
import os
import subprocess
import sys
import textwrap

HAVE_TORCH = importlib.util.find_spec("torch") is not None
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python", "tests"))


def run(code):
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, timeout=600, env={**os.environ, "PYTHONIOENCODING": "utf-8"})
    return r.returncode, r.stdout, r.stderr


def under_torch(code):
    return code.replace("import accelkit.xla as torch_xla", "import torch_xla") \
               .replace("import accelkit as torch", "import torch")


def side_by_side(title, code):
    print(f"== {title}")
    results = {"PyTorch": (0, [])}
    runs = (("PyTorch", under_torch(code)), ("accel", code)) if HAVE_TORCH else (("accel", code),)
    for name, c in runs:
        rc, out, err = run(c)
        results[name] = (rc, out.splitlines())
        if rc != 0:
            print(f"{name} failed (exit {rc}):\n{err[-3000:]}")
    (trc, tl), (arc, al) = results["PyTorch"], results["accel"]
    width = max([len(x) for x in tl] + [7])
    print(f"{'PyTorch':<{width}} | accel")
    for i in range(max(len(tl), len(al))):
        a = al[i] if i < len(al) else ""
        t = tl[i] if i < len(tl) else ""
        print(f"{t:<{width}} | {a}{'' if a == t or not HAVE_TORCH else '   <- differs'}")
    return trc, arc, tl, al


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=2000)
    p.add_argument("--iters", type=int, default=10)
    args = p.parse_args()
    # The scripts as the test module holds them (it imports accelkit, numpy and pytest).
    from test_torch_spelling import SEED_DEVICES, SEED_MATMUL
    bad = 0
    trc, arc, tl, al = side_by_side("the device script", SEED_DEVICES)
    if trc or arc:
        bad += 1
    elif not HAVE_TORCH:
        print("skipped: torch: PyTorch is not installed here; accel's lines are above")
    else:
        alloc = ("Allocated:", "Reserved :")
        differ = [i for i, (t, a) in enumerate(zip(tl, al)) if t != a and not t.startswith(alloc)]
        if differ or len(tl) != len(al):
            print(f"FAIL: lines {[i + 1 for i in differ]} differ (line counts {len(tl)}, {len(al)})")
            bad += 1
        else:
            print("ok: every line but the allocator's is what PyTorch prints")
    matmul = SEED_MATMUL.replace("N = 256", f"N = {args.n}") \
                        .replace("num_iter = 3", f"num_iter = {args.iters}")
    trc, arc, tl, al = side_by_side(f"the matmul script, N={args.n}, {args.iters} timed calls",
                                    matmul)
    for name, rc, lines in (("PyTorch", trc, tl), ("accel", arc, al)):
        if name == "PyTorch" and not HAVE_TORCH:
            continue
        if rc:
            bad += 1
            continue
        diff = float(lines[-1].split(": ")[1])
        print(f"{'ok' if diff < 1e-3 else 'FAIL'}: {name}'s CPU and accelerator results differ by "
              f"{diff:.1e}")
        bad += diff >= 1e-3
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
