//! # accelkit-core
//!
//! The ground floor of accel, shared by the monitoring crate (`accelkit-telemetry`) and the
//! compute crate (`accelkit`): nothing here knows a device, a tensor or a vendor library.
//!
//! - `env` (hidden, for accelkit's crates): every `ACCEL_*` environment variable accel reads,
//!   parsed and range-checked in one place, so `accel doctor` can name a misspelt or
//!   out-of-range one.
//! - `files` (hidden): every file read from the machine, with a size limit and only when it is
//!   a regular file (a FIFO or a device is refused without waiting on it).
//! - `probe_child` (hidden): a driver's start that cannot be cancelled (`cuInit`, `nvmlInit`, a PJRT
//!   plugin, Vulkan enumeration) tried first in a child process killed at a deadline.
//! - [`system`]: the host's CPU, RAM and hosting service (psutil's role in the PyTorch notes
//!   this project started from).
//! - [`units`]: quantities written for people.
//!
//! Users reach what is theirs through `accelkit` (`accelkit::system`); this crate exists so that a
//! monitoring-only build needs no compute dependency.
#![warn(missing_docs)]

// Plumbing between accelkit's own crates (the ACCEL_* variables, bounded file reads, the
// probe child): public because three crates share it, hidden because it is not for users,
// who get the host's facts through `system` (re-exported as `accelkit::system`).
#[doc(hidden)]
pub mod env;
#[doc(hidden)]
pub mod files;
#[doc(hidden)]
pub mod probe_child;
pub mod system;
pub mod units;
