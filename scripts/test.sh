#!/usr/bin/env bash
# Runs every test, after installing what the tests need. The one command for developers and CI.
#
#   scripts/test.sh           everything (what CI runs)
#   scripts/test.sh --quick   while you work: the floor plan, then the library's unit and
#                             device tests, pjrt's and the CLI's unit tests; no feature-set
#                             builds, CLI end-to-end tests, doc tests, GPU rehearsal, wheel
#                             or fuzzing (docs/testing.md has its time)
#
# Tests that need hardware this machine lacks print `skipped: <backend>: <reason>` and pass;
# set ACCEL_TEST_REQUIRE=cuda,xla,wgpu (any subset) to make a missing backend a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
QUICK=0
# Each section's header says how long the command has run, so a slow step shows in CI's log.
at() { printf '[%dm%02ds] ' $((SECONDS / 60)) $((SECONDS % 60)); }
case "${1:-}" in
  --quick) QUICK=1 ;;
  "") ;;
  *) echo "usage: scripts/test.sh [--quick]" >&2; exit 2 ;;
esac

# What the tests need beyond the Rust toolchain. The CPU backend needs nothing; accelerator
# backends add their runtime pieces here (Vulkan's lavapipe, the PJRT CPU plugin, NVRTC) as
# they land.
command -v cargo >/dev/null || { echo "error: cargo not found; install Rust from rustup.rs" >&2; exit 1; }

# NVRTC (CUDA's run-time compiler) from PyPI, both majors: every CUDA kernel is compiled to a
# CUBIN for sm_75 to sm_120 by NVRTC 12.9 and by NVRTC 13, and NVIDIA's cuobjdump (in CUDA 13's
# wheel folder) reads each one's target back, without a GPU. The tests find them the way users'
# machines do: in a Python environment's wheel folders (nvidia/cu13/lib, nvidia/cuda_nvrtc/lib),
# through VIRTUAL_ENV. Beside them: CUDA 12.0's cuda.h (the driver-symbol floor test), and in
# .venv-test/cu12 a venv with only the CUDA 12 NVRTC and cuBLAS wheels (what PyTorch's cu12x
# builds bring), for the doctor's CUDA 12 test.
VENV=.venv-test
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
# What the tests need from PyPI goes in with uv (from PyPI too): a tenth of pip's CPU time,
# on a command whose time is its CPU work. The wheel's own install in scripts/wheel_check.sh
# stays pip's, as users install it.
if [ ! -x "$VENV/bin/uv" ]; then
  "$VENV/bin/pip" install -q --disable-pip-version-check "uv==0.13.*"
fi
export UV="$PWD/$VENV/bin/uv"
uvi() { local py=$1; shift; "$UV" pip install -q --python "$py" "$@"; }
export VIRTUAL_ENV="$PWD/$VENV"
# Vulkan's window-system code complains on stderr without a runtime folder; the accel command
# makes one itself (accelkit::prepare_environment), the multi-threaded tests cannot.
if [ -z "${XDG_RUNTIME_DIR:-}" ]; then
  XDG_RUNTIME_DIR="$(mktemp -d)"
  export XDG_RUNTIME_DIR
fi
# A build folder without a release build (a fresh clone, CI) builds faster without
# incremental compilation; a warm one keeps it (`[profile.release] incremental = true`).
if [ ! -d target/release/deps ]; then
  export CARGO_INCREMENTAL=0
fi
# The release build of the workspace starts first, in the background: it needs none of what
# is installed or checked below, which is mostly downloads and short scripts (a minute on a
# fresh machine that the build's cores would otherwise wait through). Waited for at "== tests".
# One release build: the tests, and the `accel` binary they run (what `cargo run --release`
# builds; `cargo build --locked -p accelkit-cli` alone would resolve features differently and
# build every crate a second time). Then the seeds' examples as programs (the test build makes
# each a test harness, which does not run its main): the same features, so only the six
# examples link (2 s); tests/it/examples.rs runs them.
build_pid=
if [ "$QUICK" != 1 ]; then
  mkdir -p target
  ( cargo test --locked --workspace --release --all-targets --no-run -q \
      && cargo build --locked --workspace --release --examples -q ) > target/build.log 2>&1 &
  build_pid=$!
  trap 'kill "$build_pid" 2> /dev/null || true' EXIT
fi
if ! ls "$VENV"/lib/python3*/site-packages/nvidia/cu13/lib/libnvrtc.so.13 >/dev/null 2>&1 \
    || ! ls "$VENV"/lib/python3*/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12 >/dev/null 2>&1 \
    || ! ls "$VENV"/lib/python3*/site-packages/nvidia/cu13/bin/cuobjdump >/dev/null 2>&1; then
  echo "== installing the CUDA 13 and CUDA 12.9 NVRTC wheels and cuobjdump into $VENV"
  uvi "$VENV/bin/python" "nvidia-cuda-nvrtc>=13,<14" "nvidia-cuda-nvrtc-cu12==12.9.*" \
    "nvidia-cuda-cuobjdump>=13,<14"
fi
if [ ! -f "$VENV/cuda120/nvidia/cuda_runtime/include/cuda.h" ]; then
  echo "== installing CUDA 12.0's cuda.h (nvidia-cuda-runtime-cu12==12.0.107) into $VENV/cuda120"
  uvi "$VENV/bin/python" --no-deps --target "$VENV/cuda120" "nvidia-cuda-runtime-cu12==12.0.107"
fi
if ! ls "$VENV"/cu12/lib/python3*/site-packages/nvidia/cublas/lib/libcublas.so.12 >/dev/null 2>&1; then
  echo "== installing the CUDA 12 NVRTC and cuBLAS wheels into $VENV/cu12"
  "$VENV/bin/python" -m venv "$VENV/cu12"
  uvi "$VENV/cu12/bin/python" "nvidia-cuda-nvrtc-cu12==12.9.*" "nvidia-cublas-cu12==12.9.*"
fi
# XLA's CPU PJRT plugin: every XLA test runs against it for real (--no-deps: it needs no
# JAX to be loaded as a plugin).
if ! ls "$VENV"/lib/python3*/site-packages/lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so >/dev/null 2>&1; then
  echo "== installing XLA's CPU PJRT plugin into $VENV"
  uvi "$VENV/bin/python" --no-deps "lammps-jax-pjrt-cpu"
fi
# Python's gRPC (grpcio, and grpcio-tools to compile tpu_metric_service.proto at test time): the
# TPU telemetry tests serve known metrics from a real gRPC server to accel's hand-written client.
# numpy: `accel bench --compare numpy` times the same work in it.
if ! "$VENV/bin/python" -c 'import grpc, grpc_tools, numpy' >/dev/null 2>&1; then
  echo "== installing grpcio, grpcio-tools and numpy into $VENV"
  uvi "$VENV/bin/python" grpcio grpcio-tools numpy
fi
# Mesa's lavapipe, a software Vulkan device, and the Vulkan loader: every wgpu test runs its
# WGSL kernels for real on it. Prometheus (and promtool) scrape `accel serve` in its tests;
# tmux drives `accel monitor` in its. (`grep` without -q: under pipefail, -q's early exit
# can fail ldconfig with SIGPIPE and the install would run every time.)
if ! ldconfig -p | grep libvulkan_lvp >/dev/null || ! command -v prometheus >/dev/null \
    || ! command -v tmux >/dev/null; then
  echo "== installing Debian's mesa-vulkan-drivers (lavapipe), libvulkan1, prometheus and tmux"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    mesa-vulkan-drivers libvulkan1 prometheus tmux >/dev/null
fi
# NVRTC (12 and 13), cuobjdump, CUDA 12.0's cuda.h, the CUDA 12 wheels, the XLA plugin, lavapipe,
# grpcio and numpy must be found: missing ones fail the run, not skip.
export ACCEL_TEST_REQUIRE="${ACCEL_TEST_REQUIRE:+$ACCEL_TEST_REQUIRE,}nvrtc,cuobjdump,cuda_h,cuda12,xla,wgpu,prometheus,tmux,grpc,chromium,standin,examples,numpy"
# Debian's chromium photographs the notebook the wheel check runs: installed beside the build
# (its unpack needs no clock the build needs), waited for before the wheel check.
chromium_pid=
if [ "$QUICK" != 1 ] && ! command -v chromium > /dev/null; then
  mkdir -p target
  ( export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq --no-install-recommends chromium > target/chromium-install.log 2>&1 \
      || { apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium; } \
        >> target/chromium-install.log 2>&1 ) &
  chromium_pid=$!
fi
# JAX on the CPU, in its own environment (beside accel's plugin in .venv-test it would be one
# more PJRT plugin there), for the GPU check rehearsal's JAX side-by-side step: installed
# beside the build, waited for before the rehearsal.
jax_pid=
if [ "$QUICK" != 1 ] && { [ ! -x .venv-jax/bin/python ] || ! .venv-jax/bin/python -c 'import jax' 2>/dev/null; }; then
  mkdir -p target
  ( python3 -m venv .venv-jax && uvi .venv-jax/bin/python "jax[cpu]" ) \
    > target/jax-install.log 2>&1 &
  jax_pid=$!
fi
# Compiled kernels are cached per user; the tests use a fresh cache so NVRTC really runs.
export ACCEL_CACHE_DIR="${ACCEL_CACHE_DIR:-$PWD/target/accel-cache}"
rm -rf "$ACCEL_CACHE_DIR"

echo "$(at)== floor plan: no two folders of accelkit import each other (its files may, so that a type's"
echo "   behaviour sits beside it), no two files elsewhere, no backend folder imports another, the"
echo "   PJRT bindings import nothing outside, at most 5 upward arrows (scripts/layers.py)"
python3 scripts/test_layers.py
layers() {  # the whole report only when it fails
  local out
  out="$(python3 scripts/layers.py "$@")" || { echo "$out"; exit 1; }
  echo "   ${*:-crates/compute/src}: ${out##*$'\n'}"
}
layers --cycles folder
layers --no-floors --src crates/cli/src
layers --no-floors --src crates/telemetry/src
layers --no-floors --src crates/core/src
layers --no-floors --src crates/report/src
layers --no-floors --src crates/exporter/src
layers --no-floors --src crates/py/src
echo "$(at)== the alert rules (deploy/prometheus): promtool check rules, promtool test rules"
if command -v promtool > /dev/null; then
  (cd deploy/prometheus && promtool check rules alerts.yml > /dev/null && promtool test rules alerts_test.yml) \
    || { echo "error: the alert rules or their tests failed" >&2; exit 1; }
fi
echo "$(at)== the DaemonSet against Kubernetes' schemas (kubernetes-validate --strict)"
if ! "$VENV/bin/python" -c 'import kubernetes_validate' > /dev/null 2>&1; then
  uvi "$VENV/bin/python" kubernetes-validate
fi
"$VENV/bin/kubernetes-validate" --strict --quiet deploy/kubernetes/daemonset.yaml \
  || { echo "error: deploy/kubernetes/daemonset.yaml does not validate" >&2; exit 1; }
echo "$(at)== the Python module's typed records match the schemas (scripts/record_types.py)"
python3 scripts/record_types.py --check
echo "$(at)== every lock file is current: the builds below are --locked, a run leaves git status clean"
if command -v cargo > /dev/null && cargo +nightly --version > /dev/null 2>&1; then
  (cd fuzz && cargo +nightly metadata --locked --format-version 1 > /dev/null) \
    || { echo "error: fuzz/Cargo.lock is not current: run (cd fuzz && cargo +nightly update -w)" >&2; exit 1; }
fi
cargo metadata --locked --format-version 1 > /dev/null \
  || { echo "error: Cargo.lock is not current" >&2; exit 1; }
if cargo +nightly --version > /dev/null 2>&1; then
  echo "$(at)== maturin's build of the Python module reuses the test build's crates (scripts/feature_drift.py)"
  python3 scripts/feature_drift.py
fi
echo "$(at)== every path cited in comments and docs exists (scripts/cited_paths.py)"
python3 scripts/cited_paths.py
echo "$(at)== the public API is what docs/public-api.txt lists, with no Result<_, String> and no"
echo "   dependency's type in a signature (scripts/public_api.py)"
python3 scripts/public_api.py

if [ "$QUICK" = 1 ]; then
  echo "== quick tests (scripts/test.sh without --quick runs everything)"
  mkdir -p target
  cargo test --locked --release -p accelkit-core -p accelkit-telemetry -p accelkit \
    -p accelkit-report -p accelkit-testkit -p accelkit-exporter --lib --tests -- --nocapture 2>&1 | tee target/test-output.log
  cargo test --locked --release -p accelkit-cli --bins 2>&1 | tee -a target/test-output.log
  python3 scripts/test_counts.py target/test-output.log
  echo "$(at)done"
  exit 0
fi

# Every feature set builds without warnings (no backend, then each alone; telemetry without
# NVML; the monitoring-only command, whose tree must hold no compute dependency), and the
# library crates' docs (every public item documented, every intra-doc link resolved). These
# are debug-profile checks (their own build folder and lock), run beside the release build at
# nice 19: a release build of this workspace leaves a core idle for long stretches (one big
# crate at a time), and these fill it. Reported, and failing the command, after the suites.
feature_sets() {
  check() {
    local out
    out="$(cargo check --locked -q "$@" 2>&1)" || { echo "$out"; echo "error: cargo check $* failed"; return 1; }
    if printf '%s\n' "$out" | grep -q '^warning'; then
      echo "$out"; echo "error: warnings with: cargo check --locked $*"; return 1
    fi
  }
  for features in "" cuda xla wgpu; do
    check -p accelkit --no-default-features ${features:+--features "$features"} || return 1
  done
  check -p accelkit-telemetry --no-default-features || return 1
  check -p accelkit-cli --no-default-features --features monitor || return 1
  RUSTDOCFLAGS="-D warnings" cargo doc --locked -q --no-deps -p accelkit-core -p accelkit-telemetry -p accelkit -p accelkit-report -p accelkit-exporter \
    || { echo "error: cargo doc failed"; return 1; }
  if cargo tree --locked -q -p accelkit-cli --no-default-features --features monitor -e normal \
      | grep -E '^[^a-z]*(cudarc|wgpu|pjrt) '; then
    echo "error: the monitoring-only build (accelkit-cli --no-default-features --features monitor)" \
      "depends on a compute library (above)"
    return 1
  fi
  echo "every feature set built without warnings; docs clean; the monitoring-only tree has no compute library"
}
mkdir -p target
( renice -n 19 -p "$BASHPID" > /dev/null; feature_sets ) > target/feature-sets.log 2>&1 &
features_pid=$!

echo "$(at)== tests"
# Release mode: the kernels run at real sizes, and the build is shared with `cargo run --release`.
# --nocapture lets each test binary's `skipped:` lines through (tests print nothing else).
mkdir -p target
# The release build started at the top.
if ! wait "$build_pid"; then
  cat target/build.log; echo "error: the release build failed (above)" >&2; exit 1
fi
cat target/build.log  # its warnings, if any
echo "$(at)== accel devices (what this machine offers the tests)"
target/release/accel devices
# Two jobs that need the CPU but no clock run beside the suites at the lowest priority, on the
# cycles the suites leave idle (the soak minute, Prometheus's scrape waits, `mem`'s sampling
# sleeps), so the timed tests keep their cores: NVRTC's compile of every kernel for every
# architecture with both CUDA majors (cuda_archs, 90 s of CPU), and the fuzz targets' ASan build
# (the fuzzing section below then finds them built). Their output joins the log at the end.
CUBIN_TEST=cuda_every_kernel_compiles_for_turing_to_blackwell_with_nvrtc_12_and_13
# The test executables as <crate folder>/<target> (what cargo just built): each crate has one
# integration-test binary, `it`, a module per subject.
exes=$(cargo test --locked --workspace --release --all-targets --no-run --message-format=json \
  2>/dev/null | python3 -c '
import json, os, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable"):
        crate = os.path.basename(os.path.dirname(m["manifest_path"]))
        print(crate + "/" + m["target"]["name"], m["executable"])')
exe() { awk -v n="$1" '$1 == n { print $2; exit }' <<< "$exes"; }
# The compile of every kernel is a unit test (the library's own test binary, `accelkit`).
archs_exe=$(exe compute/accelkit) load_exe=$(exe cli/it)
[ -x "$archs_exe" ] && [ -x "$load_exe" ] || { echo "error: no compute/accelkit or cli/it test executable" >&2; exit 1; }
( cd crates/compute && exec nice -n 19 "$archs_exe" --exact "backend::cuda::tests::archs::$CUBIN_TEST" --nocapture ) \
  > target/cuda-archs.log 2>&1 &
archs_pid=$!
# The fuzz targets' ASan build and then their short run, one job from here on: the run needs
# only what the build made, and it used to wait for the suites and then hold up the wheel's
# checks. The build at nice 10, ahead of the other jobs beside the suites (nice 19) and behind
# the suites: on a fresh clone it is the last to finish; the runs at nice 19, two at a time. The short run: the same inputs each time for the same code
# (ACCEL_FUZZ_SECONDS=N draws new ones for N seconds per target instead); `scripts/fuzz.sh
# 600` is the long one (RELIABILITY.md). Exit 10: the build failed; 11: a target crashed.
( FUZZ_BUILD_ONLY=1 nice -n 10 scripts/fuzz.sh > target/fuzz-build.log 2>&1 || exit 10
  FUZZ_JOBS=2 exec nice -n 19 scripts/fuzz.sh "${ACCEL_FUZZ_SECONDS:-short}" > target/fuzz-run.log 2>&1 \
    || exit 11 ) &
fuzz_pid=$!
# The pip wheel's extension module: maturin builds accelkit-py alone, with the features this
# build resolved (crates/py/Cargo.toml names them; scripts/feature_drift.py checked), so only
# pyo3 and the module itself compile (maturin's environment differs). In a build folder of its own (its lock would hold up the doc tests and the rehearsal here),
# seeded with hard links to this one's artifacts so only what differs compiles, beside the
# suites at nice 19; the wheel check below then finds the wheel built.
rm -rf target/wheel-build && mkdir -p target/wheel-build/release
for d in deps build .fingerprint; do cp -al "target/release/$d" target/wheel-build/release/; done
( CARGO_TARGET_DIR=target/wheel-build ACCEL_BIN=target/release/accel exec nice -n 19 scripts/wheel.sh ) \
  > target/wheel-build.log 2>&1 &
wheel_pid=$!
# The exporter under load and its soak minute (a minute and a half, mostly waiting on its own
# clients and the clock) beside the other suites, at normal priority: its bars (1,000 scrapes/s,
# p99 under 10 ms; it measures 55,000/s and 0.2 ms) leave room for a shared core.
( cd crates/cli && exec "$load_exe" serve_load:: --nocapture ) > target/serve-load.log 2>&1 &
load_pid=$!
# A failing suite ends the command: the jobs beside it end with it.
trap 'kill "$features_pid" "$archs_pid" "$fuzz_pid" "$load_pid" "$wheel_pid" ${rehearsal_pid:-} ${jax_pid:-} 2> /dev/null || true' EXIT
cargo test --locked --workspace --release --all-targets -- --nocapture --skip "$CUBIN_TEST" \
  --skip serve_load:: 2>&1 | tee target/test-output.log
echo "$(at)   the suites done; the doc tests"
cargo test --locked --workspace --release --doc 2>&1 | tee -a target/test-output.log
load_rc=0; wait "$load_pid" || load_rc=$?
echo "$(at)== serve_load (beside the suites)"
tee -a target/test-output.log < target/serve-load.log
[ "$load_rc" -eq 0 ] || { echo "error: serve_load failed (exit $load_rc)" >&2; exit 1; }
grep -q '^test result: ok. 5 passed' target/serve-load.log \
  || { echo "error: serve_load's five tests did not all run" >&2; exit 1; }
# The tail: the wheel's checks (its Python tests measure CPU use and start-up times, so at
# normal priority) while the GPU check rehearsal, the fuzz job and the CUBIN compile finish
# beside them at nice 19.
if [ -n "$jax_pid" ] && ! wait "$jax_pid"; then
  cat target/jax-install.log; echo "error: installing JAX (CPU) into .venv-jax failed" >&2; exit 1
fi
( JAX_PY="$PWD/.venv-jax/bin/python" exec nice -n 19 scripts/gpu_check.sh rehearse ) \
  > target/rehearsal.log 2>&1 &
rehearsal_pid=$!

echo "$(at)== the pip wheel: built, installed into fresh venvs, run from them (scripts/wheel_check.sh)"
wheel_rc=0; wait "$wheel_pid" || wheel_rc=$?
[ "$wheel_rc" -eq 0 ] || { cat target/wheel-build.log; echo "error: the wheel build failed" >&2; exit 1; }
rm -rf target/wheel-build
if [ -n "$chromium_pid" ] && ! wait "$chromium_pid"; then
  cat target/chromium-install.log; echo "error: installing chromium failed" >&2; exit 1
fi
WHEEL_BUILT=1 scripts/wheel_check.sh

archs_rc=0; wait "$archs_pid" || archs_rc=$?
echo "$(at)== $CUBIN_TEST (beside the suites)"
tee -a target/test-output.log < target/cuda-archs.log
[ "$archs_rc" -eq 0 ] || { echo "error: cuda_archs failed (exit $archs_rc)" >&2; exit 1; }
grep -q '^test result: ok. 1 passed' target/cuda-archs.log \
  || { echo "error: $CUBIN_TEST did not run (no test of that name)" >&2; exit 1; }

features_rc=0; wait "$features_pid" || features_rc=$?
echo "$(at)== every feature set builds without warnings, and the docs (beside the release build)"
cat target/feature-sets.log
[ "$features_rc" -eq 0 ] || { echo "error: a feature set or the docs failed (above)" >&2; exit 1; }

fuzz_rc=0; wait "$fuzz_pid" || fuzz_rc=$?
[ "$fuzz_rc" -ne 10 ] || { cat target/fuzz-build.log; echo "error: the fuzz build failed" >&2; exit 1; }
echo "$(at)== fuzzing: every cargo-fuzz target, a fixed number of runs from seed 1, with AddressSanitizer"
cat target/fuzz-run.log
[ "$fuzz_rc" -eq 0 ] || { echo "error: fuzzing failed (above; exit $fuzz_rc)" >&2; exit 1; }

rehearsal_rc=0; wait "$rehearsal_pid" || rehearsal_rc=$?
echo "$(at)== GPU check rehearsal: both calls of scripts/gpu_check.sh against this machine"
grep -E '^(bundle|rehearsal|result|FAIL|SKIP)' target/rehearsal.log || true
[ "$rehearsal_rc" -eq 0 ] || { tail -40 target/rehearsal.log; echo "error: the GPU check rehearsal failed" >&2; exit 1; }

echo "$(at)== tests per backend"
python3 scripts/test_counts.py target/test-output.log
echo "$(at)done"
