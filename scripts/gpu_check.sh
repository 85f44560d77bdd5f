#!/usr/bin/env bash
# The GPU check: everything accel can only prove on a real NVIDIA GPU.
#
#   scripts/gpu_check.sh build   # here, with Rust: release binary + every test executable,
#                                # stripped, into .gpu-out/ (ignored by git; carry it)
#   scripts/gpu_check.sh run     # on the GPU machine (no Rust there): writes into $OUT
#
# `run` does, in order, each step's output in its own file under $OUT (or .gpu-out/results):
#   1. accel devices --json and the text listing, with every probe's reason; accel mem
#      (nothing is put on LD_LIBRARY_PATH: finding pip's CUDA libraries is accel's job);
#   2. every test executable with ACCEL_TEST_REQUIRE=cuda,xla (a missing GPU or XLA plugin
#      is a failure; XLA runs on JAX's CUDA plugin there);
#   3. bench/gpu_side_by_side.py: accel against PyTorch, same workloads, one run;
#   4. bench/xla_side_by_side.py: accel on XLA's CUDA plugin against JAX, bf16 N=8192;
#   5. accel bench matmul/elementwise/copy tables on cuda:0 with --explain (% of peak);
#   6. the wgpu backend on the same GPU through Vulkan: f32 matmul N=4096 beside cuBLAS (TF32
#      off) in one run (issue 6's bar: 40%). The GPU machine has no Vulkan loader: `build`
#      downloads Debian's into .gl/ (ignored by git), `run` unpacks it; carry .gl too.
# It keeps going after a failed step and exits non-zero if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
GPU_OUT=.gpu-out

build() {
  set -e
  rm -rf "$GPU_OUT" && mkdir -p "$GPU_OUT/bin" "$GPU_OUT/tests"
  cargo build --release -p accel-cli
  cp target/release/accel "$GPU_OUT/bin/accel"
  # Test executables: cargo names them in its JSON messages.
  cargo test --workspace --release --all-targets --no-run --message-format=json 2>/dev/null \
    | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    kinds = m.get("target", {}).get("kind", [])
    if (m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]
            and not set(kinds) & {"example", "bench"}):
        print(m["target"]["name"], m["executable"])
' | while read -r name exe; do cp "$exe" "$GPU_OUT/tests/$name"; done
  strip "$GPU_OUT"/bin/* "$GPU_OUT"/tests/*
  # The CLI tests run the binary from the path cargo compiled into them.
  echo "$PWD/target/release/accel" > "$GPU_OUT/accel_path"
  # One compressed bundle: what travels to the GPU machine must stay under 64 MiB.
  tar -C "$GPU_OUT" -cJf "$GPU_OUT.tar.xz" bin tests accel_path
  rm -rf "$GPU_OUT" && mkdir -p "$GPU_OUT" && mv "$GPU_OUT.tar.xz" "$GPU_OUT/bundle.tar.xz"
  # The Vulkan loader for step 6 (the device README's recipe), if apt can fetch it.
  if [ ! -d .gl ] && command -v apt-get > /dev/null; then
    local o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
    mkdir -p .gl /tmp/amd64/partial
    # shellcheck disable=SC2086
    { apt-get $o update -qq && (cd .gl && apt-get $o download -qq libvulkan1); } \
      || { echo "could not download the Vulkan loader: step 6 will skip"; rm -rf .gl; }
  fi
  ls -la "$GPU_OUT"
  echo "carry .gpu-out and .gl; on the GPU machine: scripts/gpu_check.sh run"
}

run() {
  local out="${OUT:-$GPU_OUT/results}"
  mkdir -p "$out"
  if [ -f "$GPU_OUT/bundle.tar.xz" ] && [ ! -x "$GPU_OUT/bin/accel" ]; then
    tar -C "$GPU_OUT" -xJf "$GPU_OUT/bundle.tar.xz"
  fi
  local accel="$GPU_OUT/bin/accel" failed=0
  local py=/opt/torch/.venv/bin/python
  [ -x "$py" ] || py=python3
  # Where the CLI tests expect the binary.
  local want; want=$(cat "$GPU_OUT/accel_path")
  if [ ! -x "$want" ]; then mkdir -p "$(dirname "$want")" && cp "$accel" "$want"; fi

  # The Vulkan loader (carried in .gl), so the device listing, the wgpu tests and step 6 reach the GPU too.
  if ! ldconfig -p | grep -q libvulkan.so.1 && [ -d .gl ]; then
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
  fi
  [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] \
    && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json

  echo "== 1. devices" | tee "$out/summary.txt"
  { nvidia-smi -L; nvidia-smi --query-gpu=driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv; } >> "$out/summary.txt" 2>&1
  "$accel" devices --json > "$out/devices.json" 2>&1 || failed=1
  "$accel" devices >> "$out/summary.txt" 2>&1 || failed=1
  "$accel" mem >> "$out/summary.txt" 2>&1 || failed=1
  ( time "$accel" ) >> "$out/summary.txt" 2>&1 || failed=1

  echo "== 2. tests (ACCEL_TEST_REQUIRE=cuda,xla)" | tee -a "$out/summary.txt"
  : > "$out/tests.txt"
  for t in "$GPU_OUT"/tests/*; do
    echo "--- $(basename "$t")" >> "$out/tests.txt"
    # Tests read nothing from the crate folder at run time; one thread keeps GPU memory
    # numbers per test exact.
    if ACCEL_TEST_REQUIRE=cuda,xla timeout 300 "$t" --test-threads=1 >> "$out/tests.txt" 2>&1; then
      echo "ok   $(basename "$t")" >> "$out/summary.txt"
    else
      echo "FAIL $(basename "$t")" >> "$out/summary.txt"; failed=1
    fi
  done

  echo "== 3. side by side with PyTorch" | tee -a "$out/summary.txt"
  PYTHONUNBUFFERED=1 timeout 400 "$py" bench/gpu_side_by_side.py --accel "$accel" --rounds 3 \
    > "$out/side_by_side.txt" 2>&1 || failed=1
  tail -n 12 "$out/side_by_side.txt" >> "$out/summary.txt"

  echo "== 4. XLA beside JAX" | tee -a "$out/summary.txt"
  local xdev; xdev=$("$accel" devices --json | "$py" -c '
import json, sys
d = json.load(sys.stdin)
for b in d["backends"]:
    for x in b.get("devices", []):
        if b["backend"] == "xla" and x["details"].get("platform") != "cpu":
            print(x["device"]); sys.exit()
print("xla:0")')
  PYTHONUNBUFFERED=1 timeout 300 "$py" bench/xla_side_by_side.py --accel "$accel" --device "$xdev" \
    --size 8192 --dtype bf16 --rounds 3 > "$out/xla_side_by_side.txt" 2>&1 || failed=1
  tail -n 5 "$out/xla_side_by_side.txt" >> "$out/summary.txt"

  echo "== 5. accel bench tables" | tee -a "$out/summary.txt"
  {
    for dt in f32 bf16 f16 f64; do
      "$accel" bench matmul --device cuda:0 --device cpu --size 1024 --size 4096 --dtype "$dt" --explain
    done
    "$accel" bench matmul --device cuda:0 --size 8192 --dtype f32 --tf32 --explain
    "$accel" bench elementwise --device cuda:0 --size 1 --size 1048576 --size 268435456 --explain
    for d in h2d d2h d2d; do
      "$accel" bench copy --device cuda:0 --direction "$d" --size 1KiB --size 1MiB --size 64MiB --size 1GiB --explain
    done
  } > "$out/bench.txt" 2>&1 || failed=1
  echo "== 6. wgpu through Vulkan beside cuBLAS" | tee -a "$out/summary.txt"
  local wdev; wdev=$("$accel" devices | awk '/^wgpu:/ { d = $1 } /vendor=0x10de/ && d { print d; exit }')
  if [ -n "$wdev" ]; then
    "$accel" bench matmul --device "$wdev" --device cuda:0 --size 1024 --size 4096 --dtype f32 \
      --warmup 3 --iters 10 > "$out/wgpu.txt" 2>&1 || failed=1
    "$accel" bench matmul --device "$wdev" --size 4096 --dtype f16 --iters 10 >> "$out/wgpu.txt" 2>&1 || failed=1
    for k in blocked simple; do
      echo "ACCEL_WGPU_MATMUL=$k" >> "$out/wgpu.txt"
      ACCEL_WGPU_MATMUL=$k "$accel" bench matmul --device "$wdev" --size 4096 --dtype f32 --iters 5 \
        >> "$out/wgpu.txt" 2>&1 || failed=1
    done
    cat "$out/wgpu.txt" >> "$out/summary.txt"
  else
    echo "no NVIDIA Vulkan adapter (loader or driver missing):" >> "$out/summary.txt"
    "$accel" devices | grep -A2 '^wgpu' >> "$out/summary.txt"
  fi
  echo "failed=$failed" | tee -a "$out/summary.txt"
  return $failed
}

case "${1:-}" in
  build) build ;;
  run) run ;;
  *) echo "usage: $0 build|run" >&2; exit 2 ;;
esac
