#!/usr/bin/env bash
# Builds the `accel` wheel into target/wheels/ with maturin (installed into .venv-wheel from
# PyPI on first use): the release binary, stripped, tagged manylinux for the oldest glibc its
# symbols allow.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-wheel
if [ ! -x "$VENV/bin/maturin" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check "maturin>=1.5,<2"
fi
rm -f target/wheels/accel-*.whl
"$VENV/bin/maturin" build --release --out target/wheels "$@"
ls -la target/wheels/accel-*.whl
