#!/usr/bin/env bash
# The GPU check: everything accel can only prove on a real NVIDIA GPU, planned for a lease of
# 15 minutes in all (machine start included) and 10 minutes per command: two calls of at most
# 5 minutes each on one warm machine.
#
#   scripts/gpu_check.sh build            # here, with Rust: the release binary and every test
#                                         # executable, stripped, in .gpu-out/bundle.tar.xz, and
#                                         # the Vulkan loader's packages in .gl/ (carry both)
#   scripts/gpu_check.sh run call1        # there (~4 min): setup devices tests-cuda tests-other-major
#                                         # tests-xla tests-rest
#   scripts/gpu_check.sh run call2        # there (~4 min): setup torch bench python jax wgpu
#                                         # bench-other-major
#   scripts/gpu_check.sh run all          # there: both calls' steps in one, by priority (more than
#                                         # 8 files: pack $OUT into one archive to bring back)
#   scripts/gpu_check.sh run STEP...      # any steps by name, in the order given
#   scripts/gpu_check.sh rehearse         # here: build, then both calls from the bundle against
#                                         # what this machine has (XLA's CPU plugin, lavapipe, no
#                                         # CUDA), small sizes, same deadlines and files; fails
#                                         # when a step's output file is missing or malformed
#
# Every call has a deadline (GPU_CHECK_BUDGET seconds, default 290): a step whose estimate no
# longer fits is skipped and says so, and each command gets only the time left. Output goes
# to $OUT (default .gpu-out/results) as it is produced, at most 8 files per call (what the
# device tool brings back): summary.txt (every step and command, ok/FAIL/SKIP, seconds, and
# the failure counts), then per call:
#   call1: devices.json (stdout only), devices.txt (listing, stderr, accel mem, telemetry beside
#          nvidia-smi, nvidia-smi),
#          tests-cuda.txt, tests-other-major.txt, tests-xla.txt, tests-rest.txt
#   call2: torch.txt, jax.txt, bench.txt (both CUDA majors), python.txt, wgpu.txt
# CUDA's steps run twice: with the CUDA major accel picks by itself, then with the other one
# (ACCEL_CUDA_MAJOR=12 or 13), where this machine has that major's NVRTC and cuBLAS wheels;
# each run says which major it used and why.
# Nothing is put on LD_LIBRARY_PATH: finding pip's CUDA libraries is accel's own job.
set -uo pipefail
cd "$(dirname "$0")/.."
GPU_OUT="${GPU_OUT:-.gpu-out}"
REHEARSE="${REHEARSE:-0}"
BUDGET="${GPU_CHECK_BUDGET:-290}"
# What the Vulkan loader needs on the GPU machine (the device tool's README): the NVIDIA
# Vulkan driver there is loaded through libglvnd.
VULKAN_DEBS="libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2"

now() { date +%s; }

# ---- build (here) ---------------------------------------------------------------------------

build() {
  rm -rf "$GPU_OUT" && mkdir -p "$GPU_OUT/pack/bin" "$GPU_OUT/pack/tests" || return 1
  # The workspace's release build: the test executables and the `accel` they run (the same
  # build as the test command's; `cargo build --locked -p accelkit-cli` would resolve features on its own
  # and compile every crate again). Cargo names the executables in its JSON messages.
  cargo test --locked --workspace --release --all-targets --no-run -q || return 1
  cp target/release/accel "$GPU_OUT/pack/bin/accel" || return 1
  cargo test --locked --workspace --release --all-targets --no-run --message-format=json 2>/dev/null \
    | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    kinds = m.get("target", {}).get("kind", [])
    if (m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]
            and not set(kinds) & {"example", "bench"}):
        crate = m["manifest_path"].split("/")[-2]
        print(crate + "-" + m["target"]["name"], m["executable"])
' | while read -r name exe; do cp "$exe" "$GPU_OUT/pack/tests/$name"; done
  [ "$(ls "$GPU_OUT/pack/tests" | wc -l)" -gt 0 ] || { echo "error: no test executables" >&2; return 1; }
  strip "$GPU_OUT"/pack/bin/* "$GPU_OUT"/pack/tests/* || return 1
  # The CLI tests run the binary from the path cargo compiled into them.
  echo "$PWD/target/release/accel" > "$GPU_OUT/pack/accel_path"
  # One compressed bundle: what travels must stay well under the 64 MiB carry limit. The
  # test executables share most of their code (each links the library), so a dictionary
  # larger than the whole tar finds it again in each: 17 MiB in 18 s here, where xz -6 (an
  # 8 MiB dictionary) gave 34 MiB in 31 s. Unpacking needs 192 MiB of memory.
  tar -C "$GPU_OUT/pack" -cf - bin tests accel_path \
    | xz -T1 --lzma2=preset=2,dict=192MiB > "$GPU_OUT/bundle.tar.xz" || return 1
  rm -rf "$GPU_OUT/pack"
  # The pip wheel (the Python module and the same `accel`), for the seeds' Python beside
  # PyTorch there: built for a real run; a rehearsal takes the one the test command built, if any.
  if [ "$REHEARSE" != 1 ]; then ACCEL_BIN=target/release/accel scripts/wheel.sh > target/gpu-wheel.log 2>&1 || return 1; fi
  cp target/wheels/accelkit-*.whl "$GPU_OUT/" 2> /dev/null || echo "no wheel: the python step will skip"
  local mib=$(( $(stat -c %s "$GPU_OUT/bundle.tar.xz") / 1048576 ))
  echo "bundle: $GPU_OUT/bundle.tar.xz, ${mib} MiB"
  if [ "$mib" -ge 32 ]; then echo "error: the bundle is ${mib} MiB (limit 32)" >&2; return 1; fi
  # The Vulkan loader and libglvnd for the wgpu steps (the device README's recipe).
  if [ "$REHEARSE" != 1 ] && [ ! -d .gl ] && command -v apt-get > /dev/null; then
    local o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
    mkdir -p .gl /tmp/amd64/partial
    # shellcheck disable=SC2086
    { apt-get $o update -qq && (cd .gl && apt-get $o download -qq $VULKAN_DEBS); } \
      || { echo "could not download the Vulkan packages: the wgpu steps will find no GPU"; rm -rf .gl; }
  fi
  echo "carry .gpu-out and .gl; on the GPU machine: scripts/gpu_check.sh run call1, then run call2"
}

# ---- run (there) ----------------------------------------------------------------------------

log() { echo "$*" | tee -a "$OUT_DIR/summary.txt"; }

# run_cmd FILE LABEL CMD...: runs CMD with the time left, stdout and stderr appended to
# $OUT_DIR/FILE as they come; counts the command and its failure.
run_cmd() {
  local file=$1 label=$2; shift 2
  local left=$(( DEADLINE - $(now) ))
  # CMD_CAP: at most this many seconds for one command, so one slow command cannot take the
  # time of every step after it.
  if [ -n "${CMD_CAP:-}" ] && [ "$CMD_CAP" -lt "$left" ]; then left=$CMD_CAP; fi
  COMMANDS=$((COMMANDS + 1))
  if [ "$left" -lt 3 ]; then
    log "  SKIP $label: the deadline has passed"; SKIPS=$((SKIPS + 1)); return 0
  fi
  echo "--- $label" >> "$OUT_DIR/$file"
  local t0; t0=$(now)
  timeout -k 5 "$left" "$@" >> "$OUT_DIR/$file" 2>&1
  local rc=$?
  if [ "$rc" -eq 0 ]; then
    log "  ok   $label ($(( $(now) - t0 ))s)"
  else
    log "  FAIL $label (exit $rc$([ "$rc" -eq 124 ] && echo ', out of time'), $(( $(now) - t0 ))s)"
    STEP_FAILS=$((STEP_FAILS + 1)); COMMAND_FAILS=$((COMMAND_FAILS + 1))
  fi
}

# step NAME ESTIMATE_S: runs step_NAME if its estimate fits before the deadline.
step() {
  local name=$1 est=$2
  local left=$(( DEADLINE - $(now) ))
  if [ "$left" -lt "$est" ]; then
    log "SKIP $name: needs about ${est}s, ${left}s left before the deadline"
    SKIPS=$((SKIPS + 1)); return 0
  fi
  log "== $name (about ${est}s, ${left}s left)"
  local t0; t0=$(now)
  STEP_FAILS=0
  "step_$name"
  if [ "$STEP_FAILS" -eq 0 ]; then
    log "ok   $name ($(( $(now) - t0 ))s)"
  else
    log "FAIL $name: $STEP_FAILS command(s) failed ($(( $(now) - t0 ))s)"
    STEPS_FAILED=$((STEPS_FAILED + 1))
  fi
}

step_setup() {
  if [ -f "$GPU_OUT/bundle.tar.xz" ] && [ ! -x "$GPU_OUT/bin/accel" ]; then
    run_cmd summary.txt "unpack the bundle" tar -C "$GPU_OUT" -xJf "$GPU_OUT/bundle.tar.xz"
  fi
  # Where the CLI tests expect the binary.
  local want; want=$(cat "$GPU_OUT/accel_path" 2>/dev/null)
  if [ -n "$want" ] && [ ! -x "$want" ]; then mkdir -p "$(dirname "$want")" && cp "$ACCEL" "$want"; fi
  if ! ldconfig -p | grep -q libvulkan.so.1 && [ -d .gl ]; then
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
    log "  unpacked the Vulkan loader ($(ls .gl/*.deb | wc -l) packages)"
  fi
  [ -x "$ACCEL" ] || { log "  FAIL no accel binary at $ACCEL"; STEP_FAILS=$((STEP_FAILS + 1)); }
}

step_devices() {
  # stdout only: the JSON stays parseable; stderr goes to the text file.
  COMMANDS=$((COMMANDS + 1))
  if timeout -k 5 60 "$ACCEL" devices --json > "$OUT_DIR/devices.json" 2>> "$OUT_DIR/devices.txt"; then
    log "  ok   accel devices --json"
  else
    log "  FAIL accel devices --json"; STEP_FAILS=$((STEP_FAILS + 1)); COMMAND_FAILS=$((COMMAND_FAILS + 1))
  fi
  run_cmd devices.txt "accel devices" "$ACCEL" devices
  run_cmd devices.txt "accel mem" "$ACCEL" mem
  # Telemetry (NVML, no CUDA context) beside nvidia-smi at the same moment: monitor --json,
  # serve's DCGM series, accel pick. Says skipped: without nvidia-smi (a rehearsal).
  run_cmd devices.txt "telemetry beside nvidia-smi" "$PY" bench/telemetry_vs_nvidia_smi.py --accel "$ACCEL"
  if command -v nvidia-smi > /dev/null; then
    run_cmd devices.txt "nvidia-smi" nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,pcie.link.gen.max,pcie.link.width.max --format=csv
    # Health beside accel's reading of it (retired_memory, memory_repair_pending/failed,
    # pcie_replay_errors in mem --json): the row remapper, retired pages and PCIe replays.
    run_cmd devices.txt "nvidia-smi -q (health)" nvidia-smi -q
    run_cmd devices.txt "accel mem --json (health)" "$ACCEL" mem --json
  fi
  run_cmd devices.txt "accel (the walkthrough)" "$ACCEL"
}

# The test executables with a name filter, a requirement and extra environment.
run_tests() {
  local file=$1 require=$2; shift 2
  local t name skip only
  # One executable per crate's unit tests (`compute-accelkit`...) and per crate's integration
  # tests (`compute-it`, `cli-it`), a module per subject; what is left out is left out by name.
  for t in "$GPU_OUT"/tests/*; do
    name=$(basename "$t") skip=() only=()
    case "$name" in
      cli-it)
        # 500 random command lines exercise the host and the parser, not the GPU; the
        # hostile-input, load and soak suites of the exporter touch no GPU API and take a
        # minute and a half: never here. The exporter's and the fleet view's tests (a real
        # Prometheus, TLS, tmux), the doctor's corpus, the web configs (bcrypt) and the
        # dashboards' queries just ran in the test command. A rehearsal lists the tests and
        # runs one subject, the schemas (fixture trees and schema files read from the bundle's
        # layout); the test command has just run every one of them here.
        skip+=(--skip cli_random:: --skip hostile:: --skip serve_load::)
        if [ "$REHEARSE" = 1 ]; then
          run_cmd "$file" "$name $* --list" "$t" "$@" --list
          only=(schemas::)
        fi ;;
      compute-accelkit)
        # NVRTC's compile of every kernel for every architecture needs no GPU and both CUDA
        # majors' NVRTC (the GPU machine has CUDA 13's alone): the test command runs it.
        skip+=(--skip backend::cuda::tests::archs::cuda_every_kernel)
        # The unit tests of the PJRT bindings run XLA's CPU plugin, which the test command
        # installs and the GPU machine has not; the GPU plugin's turn is compute-it's xla::.
        [ "$file" = tests-xla.txt ] && skip+=(--skip backend::xla::pjrt::tests::
          --skip backend::xla::context::tests::a_client_option_the_plugin_rejects) ;;
      compute-it)
        # In a rehearsal the library's tests are listed, not run (the listing proves the
        # bundle's binary runs here): the test command has just run every one of them on this
        # machine with the same plugin and Vulkan device.
        if [ "$REHEARSE" = 1 ]; then
          run_cmd "$file" "$name $* --list" "$t" "$@" --list
          continue
        fi ;;
    esac
    run_cmd "$file" "$name $* ${skip[*]} ${only[*]}" env ACCEL_TEST_REQUIRE="$require" "$t" "$@" "${skip[@]}" "${only[@]}"
  done
}

step_tests_cuda() {
  # Every test function for CUDA (NAME::cuda, the cuda module): a missing GPU is a failure
  # (not in a rehearsal, which has none).
  CMD_CAP=150 run_tests tests-cuda.txt "$([ "$REHEARSE" = 1 ] && echo nvrtc || echo cuda)" cuda
}

# The CUDA major accel picks by itself here (doctor's cuda.major check), and the other one.
default_major() {
  "$ACCEL" doctor --json 2> /dev/null | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
for s in d["sections"]:
    for c in s["checks"]:
        if c["id"] == "cuda.major" and c["found"].startswith("CUDA "):
            print(c["found"].split(":")[0].split()[1]); sys.exit()
print(13)'
}
other_major() { [ "$(default_major)" = 12 ] && echo 13 || echo 12; }

# has_major M: whether NVRTC and cuBLAS of CUDA M are found here (both, by doctor).
has_major() {
  ACCEL_CUDA_MAJOR=$1 "$ACCEL" doctor --json 2> /dev/null | "$PY" -c '
import json, sys
m = sys.argv[1]
d = json.load(sys.stdin)
found = [c["found"] for s in d["sections"] for c in s["checks"] if c["id"] == "cuda.libraries"]
ok = found and f"nvrtc {m}." in found[0] and (f"cublas {m}." in found[0] or "no GPU" in found[0])
sys.exit(0 if ok else 1)' "$1"
}

step_tests_other_major() {
  # The same CUDA tests with the other CUDA major's libraries (CUDA 12 beside 13).
  local m; m=$(other_major)
  log "  accel picks CUDA $(default_major) here by itself; this step forces CUDA $m"
  if ! has_major "$m"; then
    log "  SKIP no CUDA $m NVRTC and cuBLAS on this machine"; SKIPS=$((SKIPS + 1)); return 0
  fi
  run_cmd tests-other-major.txt "accel devices (CUDA $m)" env ACCEL_CUDA_MAJOR="$m" "$ACCEL" devices
  ACCEL_CUDA_MAJOR=$m run_tests tests-other-major.txt \
    "$([ "$REHEARSE" = 1 ] && echo nvrtc || echo cuda)" cuda
}

step_bench_other_major() {
  local m; m=$(other_major)
  if ! has_major "$m"; then
    log "  SKIP no CUDA $m NVRTC and cuBLAS on this machine"; SKIPS=$((SKIPS + 1)); return 0
  fi
  local dev=cuda:0 size=4096 dts="f32 bf16"
  if [ "$REHEARSE" = 1 ]; then dev=cpu size=256 dts="f32"; fi
  for dt in $dts; do
    run_cmd bench.txt "matmul $dt $dev (CUDA $m)" env ACCEL_CUDA_MAJOR="$m" "$ACCEL" bench matmul \
      --device "$dev" --size "$size" --dtype "$dt" --warmup 2 --iters 10 --explain
  done
}

step_tests_xla() {
  # XLA's tests on its GPU plugin, apart from CUDA's so a plugin problem hides no CUDA result;
  # autotuning off: hundreds of small programs are compiled once each.
  local saved="${XLA_FLAGS:-}"
  export XLA_FLAGS="--xla_gpu_autotune_level=0 $saved"
  CMD_CAP=90 run_tests tests-xla.txt xla xla
  export XLA_FLAGS="$saved"
}

step_tests_rest() {
  # Everything else: CPU, wgpu (the GPU through Vulkan when the loader was carried), the CLI.
  CMD_CAP=150 run_tests tests-rest.txt "" --skip cuda --skip xla
}

step_torch() {
  if ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2> /dev/null; then
    if [ "$REHEARSE" = 1 ]; then log "  skip: no PyTorch with CUDA here (rehearsal)"; return 0; fi
    log "  FAIL no PyTorch with CUDA in $PY"; STEP_FAILS=$((STEP_FAILS + 1)); return 0
  fi
  CMD_CAP=170 run_cmd torch.txt "accel beside PyTorch" env PYTHONUNBUFFERED=1 "$PY" bench/gpu_side_by_side.py \
    --accel "$ACCEL" --rounds "$ROUNDS" $([ "$REHEARSE" = 1 ] && echo --quick)
}

step_jax() {
  local py=$PY
  [ -n "${JAX_PY:-}" ] && py=$JAX_PY
  if ! "$py" -c 'import jax' 2> /dev/null; then
    if [ "$REHEARSE" = 1 ]; then log "  skip: no JAX in $py (rehearsal)"; return 0; fi
    log "  FAIL no JAX in $py"; STEP_FAILS=$((STEP_FAILS + 1)); return 0
  fi
  # The first XLA device that is not the CPU platform (the GPU), else xla:0.
  local xdev; xdev=$("$ACCEL" devices --json 2> /dev/null | "$py" -c '
import json, sys
d = json.load(sys.stdin)
for b in d["backends"]:
    for x in b.get("devices", []):
        if b["backend"] == "xla" and x["details"].get("platform") != "cpu":
            print(x["device"]); sys.exit()
print("xla:0")')
  run_cmd jax.txt "accel on $xdev beside JAX" env PYTHONUNBUFFERED=1 "$py" bench/xla_side_by_side.py \
    --accel "$ACCEL" --device "$xdev" --size "$JAX_N" --dtype "$JAX_DTYPE" --rounds "$ROUNDS"
}

step_bench() {
  local dev=cuda:0 big=4096 dts="f32 bf16 f16 f64"
  if [ "$REHEARSE" = 1 ]; then dev=xla:0 big=256 dts="f32"; fi
  # The main job (`cargo run --release`) on the device: the CPU and it multiply the same
  # operands, and it prints how far apart the two results are.
  local n=2000
  [ "$REHEARSE" = 1 ] && n=256
  run_cmd bench.txt "walkthrough $dev" "$ACCEL" --device "$dev" --size "$n"
  # Fixed iteration counts: adaptive timing of fast cases would run to its 10,000-sample cap.
  for dt in $dts; do
    run_cmd bench.txt "matmul $dt $dev" "$ACCEL" bench matmul --device "$dev" --device cpu \
      --size "$((big / 4))" --size "$big" --dtype "$dt" --warmup 2 --iters 10 --explain
  done
  if [ "$REHEARSE" != 1 ]; then
    run_cmd bench.txt "matmul tf32 8192" "$ACCEL" bench matmul --device "$dev" --size 8192 --tf32 \
      --warmup 2 --iters 10 --explain
    run_cmd bench.txt "elementwise" "$ACCEL" bench elementwise --device "$dev" --size 1 \
      --size 1048576 --size 268435456 --warmup 5 --iters 50 --explain
    for d in h2d d2h d2d; do
      run_cmd bench.txt "copy $d" "$ACCEL" bench copy --device "$dev" --direction "$d" --size 1MiB \
        --size 64MiB --size 1GiB --host-memory both --warmup 2 --iters 10 --explain
    done
  else
    run_cmd bench.txt "elementwise" "$ACCEL" bench elementwise --device cpu --size 1048576 \
      --warmup 2 --iters 10 --explain
  fi
}

step_python() {
  # The wheel installed apart (pip's --target, no index), then the seeds' two scripts under
  # PyTorch and under accel in fresh processes, and the Python tests that compare with PyTorch.
  local whl; whl=$(ls "$GPU_OUT"/accelkit-*.whl 2> /dev/null | head -1)
  if [ -z "$whl" ]; then log "  skip: no wheel in the bundle"; return 0; fi
  if ! "$PY" -c 'import numpy, pytest' 2> /dev/null; then
    if [ "$REHEARSE" = 1 ]; then log "  skip: no numpy and pytest in $PY (rehearsal)"; return 0; fi
    log "  FAIL no numpy and pytest in $PY"; STEP_FAILS=$((STEP_FAILS + 1)); return 0
  fi
  local site="$PWD/$GPU_OUT/site"
  run_cmd python.txt "pip install the wheel" "$PY" -m pip install -q --no-index --no-deps \
    --no-compile --upgrade --target "$site" "$whl"
  local n=2000 require=torch
  if [ "$REHEARSE" = 1 ]; then n=256 require=; fi
  run_cmd python.txt "the seeds beside PyTorch" env PYTHONPATH="$site" PYTHONUNBUFFERED=1 \
    "$PY" bench/seeds_side_by_side.py --n "$n"
  run_cmd python.txt "python tests beside PyTorch" env PYTHONPATH="$site" PATH="$site/bin:$PATH" \
    ACCEL_TEST_REQUIRE="$require" "$PY" -m pytest -q -p no:cacheprovider \
    python/tests/test_torch_spelling.py
}

step_wgpu() {
  # The NVIDIA adapter through Vulkan (a software one in a rehearsal), beside cuBLAS.
  local vendor=0x10de
  [ "$REHEARSE" = 1 ] && vendor=0x10005
  local wdev; wdev=$("$ACCEL" devices 2> /dev/null | awk -v v="vendor=$vendor" '/^wgpu:/ { d = $1 } index($0, v) && d { print d; exit }')
  if [ -z "$wdev" ]; then
    log "  FAIL no wgpu adapter with $vendor (Vulkan loader or driver missing)"
    "$ACCEL" devices 2>&1 | grep -A2 '^wgpu' >> "$OUT_DIR/wgpu.txt"
    STEP_FAILS=$((STEP_FAILS + 1)); return 0
  fi
  if [ "$REHEARSE" = 1 ]; then
    run_cmd wgpu.txt "matmul f32 $wdev" "$ACCEL" bench matmul --device "$wdev" --size 128 --iters 3
    return 0
  fi
  run_cmd wgpu.txt "matmul f32 $wdev beside cuda:0" "$ACCEL" bench matmul --device "$wdev" \
    --device cuda:0 --size 1024 --size 4096 --dtype f32 --warmup 3 --iters 10
  run_cmd wgpu.txt "matmul f16 $wdev" "$ACCEL" bench matmul --device "$wdev" --size 4096 --dtype f16 --iters 10
  for k in blocked simple; do
    run_cmd wgpu.txt "ACCEL_WGPU_MATMUL=$k" env ACCEL_WGPU_MATMUL=$k "$ACCEL" bench matmul \
      --device "$wdev" --size 4096 --dtype f32 --iters 5
  done
}

run() {
  OUT_DIR="${OUT:-$GPU_OUT/results}"
  mkdir -p "$OUT_DIR"
  DEADLINE=$(( $(now) + BUDGET ))
  ACCEL="$GPU_OUT/bin/accel"
  PY=${GPU_CHECK_PY:-/opt/torch/.venv/bin/python}
  [ -x "$PY" ] || PY=python3
  ROUNDS=2 JAX_N=8192 JAX_DTYPE=bf16
  if [ "$REHEARSE" = 1 ]; then ROUNDS=1 JAX_N=256 JAX_DTYPE=f32; fi
  [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] \
    && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json \
              __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
  COMMANDS=0 COMMAND_FAILS=0 STEPS_FAILED=0 SKIPS=0
  local steps=()
  for a in "$@"; do
    case "$a" in
      call1) steps+=(setup devices tests_cuda tests_other_major tests_xla tests_rest) ;;
      call2) steps+=(setup torch bench python jax wgpu bench_other_major) ;;
      # One call for the whole lease, the steps in the order of what they prove: CUDA's
      # tests, then PyTorch beside accel, then the rest while the budget lasts.
      all) steps+=(setup devices tests_cuda torch bench python tests_xla jax wgpu tests_rest
                   tests_other_major bench_other_major) ;;
      *) steps+=("${a//-/_}") ;;
    esac
  done
  [ ${#steps[@]} -gt 0 ] || { echo "usage: $0 run call1|call2|STEP..." >&2; return 2; }
  log "gpu_check $* at $(date -u +%FT%TZ), budget ${BUDGET}s$([ "$REHEARSE" = 1 ] && echo ', rehearsal')"
  for s in "${steps[@]}"; do
    case "$s" in
      setup) step setup 5 ;;
      devices) step devices 20 ;;
      tests_cuda) step tests_cuda 60 ;;
      tests_other_major) step tests_other_major 40 ;;
      bench_other_major) step bench_other_major 20 ;;
      tests_xla) step tests_xla 60 ;;
      tests_rest) step tests_rest 60 ;;
      torch) step torch 120 ;;
      jax) step jax 60 ;;
      bench) step bench 60 ;;
      wgpu) step wgpu 30 ;;
      python) step python 40 ;;
      *) log "unknown step '$s' (steps: setup devices tests-cuda tests-other-major tests-xla tests-rest torch jax bench bench-other-major python wgpu)"; return 2 ;;
    esac
  done
  log "result: $STEPS_FAILED step(s) failed, $COMMAND_FAILS of $COMMANDS command(s) failed, $SKIPS skipped; $(( BUDGET - (DEADLINE - $(now)) ))s of ${BUDGET}s used"
  [ "$STEPS_FAILED" -eq 0 ]
}

# ---- rehearsal (here) ----------------------------------------------------------------------

# check_file FILE [json]: the file exists, is not empty and (json) parses.
check_file() {
  local f=$1
  if [ ! -s "$f" ]; then echo "rehearsal: $f is missing or empty" >&2; return 1; fi
  if [ "${2:-}" = json ] && ! python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$f"; then
    echo "rehearsal: $f is not JSON" >&2; return 1
  fi
}

rehearse() {
  export REHEARSE=1 GPU_OUT=target/gpu-rehearsal
  local out=$GPU_OUT-out t0 bad=0
  rm -rf "$out"
  t0=$(now); build || return 1
  echo "build: $(( $(now) - t0 ))s"
  for call in call1 call2; do
    t0=$(now)
    OUT="$out/$call" run "$call"; local rc=$?
    local took=$(( $(now) - t0 ))
    echo "rehearsal $call: exit $rc in ${took}s (budget ${BUDGET}s)"
    [ "$rc" -eq 0 ] || bad=1
    [ "$took" -lt "$BUDGET" ] || { echo "rehearsal: $call ran past its budget" >&2; bad=1; }
    [ "$(find "$out/$call" -type f | wc -l)" -le 8 ] || { echo "rehearsal: $call left more than 8 files" >&2; bad=1; }
    check_file "$out/$call/summary.txt" || bad=1
    grep -q '^result: ' "$out/$call/summary.txt" || { echo "rehearsal: no result line in $call" >&2; bad=1; }
  done
  check_file "$out/call1/devices.json" json || bad=1
  for f in devices.txt tests-cuda.txt tests-other-major.txt tests-xla.txt tests-rest.txt; do check_file "$out/call1/$f" || bad=1; done
  for f in bench.txt wgpu.txt; do check_file "$out/call2/$f" || bad=1; done
  if [ -n "${JAX_PY:-}" ]; then check_file "$out/call2/jax.txt" || bad=1; fi
  # What the tests said: every test binary ran and none failed.
  if grep -q 'test result: FAILED' "$out"/call1/tests-*.txt; then echo "rehearsal: a test failed" >&2; bad=1; fi
  [ "$bad" -eq 0 ] && echo "rehearsal passed: $out"
  return $bad
}

case "${1:-}" in
  build) build ;;
  run) shift; run "$@" ;;
  rehearse) rehearse ;;
  *) echo "usage: $0 build | run call1|call2|STEP... | rehearse" >&2; exit 2 ;;
esac
