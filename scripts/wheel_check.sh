#!/usr/bin/env bash
# The pip-installed `accel`, proven from fresh virtual environments (the test command runs
# this): a venv with only the wheel runs `accel devices`; a venv with the wheel, CUDA's NVRTC
# wheel and XLA's CPU plugin finds both from the venv alone (no VIRTUAL_ENV: through its own
# bin/accel) and runs a matmul on xla:0. Checks the wheel's size (< 30 MiB) and how fast
# `accel devices` starts (reported; < 0.3 s is the bar). Then the Python module: `import
# accel; accel.best()` in the venv with only the wheel (< 0.3 s), and the pytest suite
# (python/tests) in the full venv with NumPy, pytest, JAX (CPU), pandas, matplotlib and a
# Jupyter kernel added.
set -euo pipefail
cd "$(dirname "$0")/.."
# WHEEL_BUILT=1: the test command built it already (scripts/wheel.sh, beside its suites).
if [ "${WHEEL_BUILT:-0}" != 1 ]; then
  scripts/wheel.sh > /dev/null 2>&1 || { scripts/wheel.sh; exit 1; }
fi
whl=$(ls target/wheels/accelkit-*.whl)
mib=$(( $(stat -c %s "$whl") / 1048576 ))
echo "wheel: $(basename "$whl"), $(stat -c %s "$whl") bytes"
[ "$mib" -lt 30 ] || { echo "error: the wheel is ${mib} MiB (limit 30)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# --no-compile: no .pyc for the thousands of files of JAX, pandas and matplotlib (20 s here);
# Python compiles what a test imports.
pipi() { "$1/bin/pip" install -q --disable-pip-version-check --no-compile "${@:2}"; }
# What the checks need beside the wheel goes in with uv where the test command brought it
# (a tenth of pip's CPU time), else with pip.
uvi() {
  if [ -x "${UV:-}" ]; then "$UV" pip install -q --python "$1/bin/python" "${@:2}"; else pipi "$@"; fi
}

python3 -m venv "$tmp/bare"
pipi "$tmp/bare" "$whl"
( cd "$tmp" && env -u VIRTUAL_ENV "$tmp/bare/bin/accel" devices > "$tmp/bare.txt" )
grep -q '^cpu ' "$tmp/bare.txt" || { cat "$tmp/bare.txt"; echo "error: no cpu line" >&2; exit 1; }
echo "a venv with only the wheel: accel devices ran"

python3 -m venv "$tmp/full"
uvi "$tmp/full" "$whl" "nvidia-cuda-nvrtc>=13,<14"
uvi "$tmp/full" --no-deps lammps-jax-pjrt-cpu
cd "$tmp"
env -u VIRTUAL_ENV "$tmp/full/bin/accel" devices --json > devices.json
python3 - "$tmp/full" <<'PY'
import json, sys
venv = sys.argv[1]
d = json.load(open("devices.json"))
nvrtc = [l for l in d["cuda_libraries"] if l["name"] == "nvrtc"][0]
assert (nvrtc["path"] or "").startswith(venv), nvrtc
assert nvrtc["source"] == "python wheel (accel's own environment)", nvrtc
xla = [b for b in d["backends"] if b["backend"] == "xla"][0]
assert xla["status"] == "available", xla
assert all(p["path"].startswith(venv) for p in d["xla_plugins"]), d["xla_plugins"]
print(f"from the venv alone: nvrtc {nvrtc['version']} and {len(xla['devices'])} XLA devices, both inside {venv}")
PY
env -u VIRTUAL_ENV "$tmp/full/bin/accel" bench matmul --device xla:0 --size 128 --warmup 1 --iters 3 | grep -E '^xla:0' \
  || { echo "error: the matmul on xla:0 failed" >&2; exit 1; }
python3 - "$tmp/full/bin/accel" <<'PY'
import os, statistics, subprocess, sys, time
env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
ts = []
for _ in range(5):
    t = time.perf_counter()
    subprocess.run([sys.argv[1], "devices"], env=env, check=True, stdout=subprocess.DEVNULL)
    ts.append(time.perf_counter() - t)
print(f"accel devices from the wheel: median {statistics.median(ts):.3f} s over 5 starts "
      f"(min {min(ts):.3f}, max {max(ts):.3f})")
PY

python3 - "$tmp/bare/bin/python" <<'PY'
import statistics, subprocess, sys, time
ts = []
for _ in range(5):
    t = time.perf_counter()
    out = subprocess.run([sys.argv[1], "-c", "import accelkit as accel; print(accel.best())"],
                         check=True, capture_output=True, text=True).stdout.strip()
    ts.append(time.perf_counter() - t)
assert out == "cpu" or ":" in out or out == "mps", out
print(f"python -c 'import accelkit as accel; print(accel.best())' from the bare venv: {out}, median "
      f"{statistics.median(ts):.3f} s over 5 starts (min {min(ts):.3f}, max {max(ts):.3f})")
assert statistics.median(ts) < 0.3, "the bar is 0.3 s"
PY

# A Jupyter kernel too (ipykernel, driven by nbclient): the notebook test runs its cells in a
# real kernel and photographs their outputs with chromium where the test command installed it.
uvi "$tmp/full" numpy pytest "jax[cpu]" pandas matplotlib ipykernel nbclient nbformat
# -rs prints each skip's `<backend>: <reason>`; what this venv installed is required.
pytests() {
  env -u VIRTUAL_ENV ACCEL_TEST_REQUIRE="${ACCEL_TEST_REQUIRE:+$ACCEL_TEST_REQUIRE,}jax,pandas,matplotlib,jupyter" \
    NOTEBOOK_SCREENSHOT_DIR="$OLDPWD/target" \
    "$tmp/full/bin/python" -m pytest -q -rs -p no:cacheprovider "$@"
}
# The interrupt at every line of a recording's `with` waits out each round's samples: 100 s
# of waiting for 5 s of CPU. In a process of its own beside the others (it counts only its own
# threads), so the wheel's checks, last in the test command, take 2 minutes less.
slow=test_a_keyboard_interrupt_at_any_line_leaves_no_sampler_running
pytests "$OLDPWD/python/tests/test_hardening.py" -k "$slow" > "$tmp/slow.log" 2>&1 &
slow_pid=$!
pytests "$OLDPWD/python/tests" -k "not $slow" || { echo "error: the Python tests failed" >&2; exit 1; }
if ! wait "$slow_pid"; then
  cat "$tmp/slow.log"; echo "error: the Python tests failed (the interrupt test, above)" >&2; exit 1
fi
tail -1 "$tmp/slow.log"
[ -f "$OLDPWD/target/notebook.png" ] && echo "the executed notebook's outputs, photographed: target/notebook.png"
