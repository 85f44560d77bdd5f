#!/usr/bin/env bash
# Sets up a Python venv with numpy and PyTorch (CPU use only), builds accel, and runs the
# side-by-side CPU comparison. Arguments go to side_by_side.py (e.g. --rounds 3 --quick).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-bench
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q numpy threadpoolctl torch
fi
cargo build --release -q -p accelkit-cli
# This workplace sets OPENBLAS_CORETYPE (and OPENBLAS_L2_SIZE) for old OpenBLAS builds; they
# hold a current numpy to older kernels, so the comparison runs without them.
exec env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$venv/bin/python" bench/side_by_side.py "$@"
