//! PJRT, the C API through which XLA's backends (CPU, CUDA, TPU) are loaded as plugins, in
//! two layers as cudarc does for CUDA:
//!
//! - `sys` (private): `#[repr(C)]` structs and the function-table slots, written from
//!   `pjrt_c_api.h` 0.114; every argument struct's `struct_size` from `args_size!`.
//! - the safe layer: [`Api`] (a loaded plugin: dlopen, `GetPjrtApi`, initialise, checked
//!   calls), [`Client`] (its devices and memory statistics), and per-operation values:
//!   [`Executable`] (compiled StableHLO), [`Buffer`] (device memory), [`Event`] and
//!   [`ReadyMark`] (completion). Each is released on `Drop`; errors are [`PjrtError`] values
//!   with PJRT's code and message.
//!
//! It knows nothing of accel: the `accel` crate's XLA backend builds tensors and programs on
//! top of it. A crate of its own so that the compiler, not a script, keeps the C layer apart
//! and so that `cargo test -p accelkit-pjrt` checks the bindings against a real plugin alone.
//!
//! Unix only (plugins are shared objects opened with `dlopen`).

#![cfg(unix)]

mod api;
mod client;
mod exec;
mod sys;
#[cfg(test)]
mod tests;

pub use api::{Api, PResult, PjrtError};
pub use client::{Client, DeviceDesc};
pub use exec::{Buffer, ElementType, Event, Executable, ReadyMark};
