#!/usr/bin/env bash
# Runs every test, after installing what the tests need. The one command for developers and CI.
#
# Tests that need hardware this machine lacks print `skipped: <backend>: <reason>` and pass;
# set ACCEL_TEST_REQUIRE=cuda,xla,wgpu (any subset) to make a missing backend a failure.
set -euo pipefail
cd "$(dirname "$0")/.."

# What the tests need beyond the Rust toolchain. The CPU backend needs nothing; accelerator
# backends add their runtime pieces here (Vulkan's lavapipe, the PJRT CPU plugin, NVRTC) as
# they land.
command -v cargo >/dev/null || { echo "error: cargo not found; install Rust from rustup.rs" >&2; exit 1; }

echo "== accel devices (what this machine offers the tests)"
cargo run --release -q -p accel-cli -- devices

echo "== tests"
# Release mode: the kernels run at real sizes, and the build is shared with `cargo run --release`.
# --nocapture lets each test binary's `skipped:` lines through (tests print nothing else).
cargo test --workspace --release --all-targets -- --nocapture
cargo test --workspace --release --doc
