#!/usr/bin/env bash
# Builds the `accel` wheel into target/wheels/ with maturin (installed into .venv-wheel from
# PyPI on first use): the Python module (`import accelkit`: the PyO3 extension, abi3 for CPython
# 3.9+, and python/accelkit) and the native `accel` command (the release binary, stripped, in
# the wheel's .data/scripts, so pip puts it on PATH as it did before), tagged manylinux for
# the oldest glibc their symbols allow.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-wheel
if [ ! -x "$VENV/bin/maturin" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check "maturin>=1.5,<2"
fi
rm -f target/wheels/accelkit-*.whl
# ACCEL_BIN: a release `accel` built already (the test command's, from its workspace build).
bin="${ACCEL_BIN:-}"
if [ -z "$bin" ]; then
  cargo build --locked --release -q -p accelkit-cli
  bin=target/release/accel
fi
rm -rf target/wheel-data && mkdir -p target/wheel-data/scripts
cp "$bin" target/wheel-data/scripts/accel
strip target/wheel-data/scripts/accel
"$VENV/bin/maturin" build --locked --release --out target/wheels "$@"
ls -la target/wheels/accelkit-*.whl
