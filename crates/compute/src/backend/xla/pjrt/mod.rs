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
//! It knows nothing of tensors: the XLA backend around it builds tensors and programs on top,
//! and this folder imports nothing from the rest of the crate (`scripts/layers.py` holds
//! that). Its unit tests check the structs against the header and run a program on XLA's CPU
//! plugin alone. A module, not a crate: no user of accelkit needs the bindings, and a crate of
//! its own would have to be published with them as API.
//!
//! Linux only, as the XLA backend (plugins are shared objects opened with `dlopen`).

mod api;
mod client;
mod exec;
mod sys;
#[cfg(test)]
mod tests;

pub(crate) use api::{Api, PjrtError};
pub(crate) use client::Client;
pub(crate) use exec::{Buffer, ElementType, Event, Executable, ReadyMark};
