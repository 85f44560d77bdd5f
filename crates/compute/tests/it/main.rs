//! accelkit's integration tests: the library's public API against real devices.
//! One test binary per crate (a module per former file), so the test command links each
//! crate's tests once.

#[macro_use]
mod common;
mod bench;
mod conformance;
mod cuda;
mod device;
mod display;
mod examples;
mod matmul;
mod memory;
mod nn;
mod ops;
mod properties;
mod regressions;
mod wgpu;
mod wgpu_memory;
mod xla;
