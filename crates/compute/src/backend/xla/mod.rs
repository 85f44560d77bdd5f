//! XLA devices through PJRT plugins: Google TPUs (`libtpu`), GPUs (JAX's CUDA plugin) and the
//! CPU (PyTorch's `torch_xla`).
//!
//! The PJRT C API itself is `pjrt/` (C structs, then a safe layer; it imports nothing else
//! of the crate); here:
//!
//! - `device`: the probe and the device side of the contract (`impl Backend for Xla`).
//! - `context`: the plugins loaded (once, with a time limit), their clients and devices.
//! - `storage`: tensors on an XLA device and every op on it (`impl BackendStorage`).
//! - `hlo`: StableHLO programs for each op, as MLIR text (the generated code);
//!   `programs`: compiled once per (op, shapes, dtypes), cached.
//! - `plugins`: where plugins are found; `listing`: what a device listing shows, from the
//!   probe helper's answer (no client started here only to list).
//!
//! Without the `xla` feature (or off Linux), `off.rs` stands in with the same items.
//!
//! Plugins are found like the CUDA libraries: `ACCEL_PJRT_PLUGIN` (paths separated by `:`),
//! `PJRT_NAMES_AND_LIBRARY_PATHS` (`name:path,name:path`), then the plugins pip installs in
//! any Python environment (`jax_plugins/*/`, `libtpu/libtpu.so`, `*/pjrt_c_api_*plugin.so`).
//! Each is loaded with a time limit. Devices are numbered `xla:0`, `xla:1`... across plugins,
//! accelerators first (TPU, then GPU), the CPU platform last; `xla:cpu:0` / `xla:tpu:0` /
//! `xla:cuda:0` pick the n-th device of one platform.

mod plugins;
// The doctor's XLA checklist, and the rules naming why it cannot work.
pub(crate) mod causes;
pub(crate) mod doctor;

#[cfg(all(feature = "xla", target_os = "linux"))]
mod context;
#[cfg(all(feature = "xla", target_os = "linux"))]
mod device;
#[cfg(all(feature = "xla", target_os = "linux"))]
pub(crate) mod hlo;
#[cfg(all(feature = "xla", target_os = "linux"))]
mod listing;
#[cfg(not(all(feature = "xla", target_os = "linux")))]
mod off;
#[cfg(all(feature = "xla", target_os = "linux"))]
mod pjrt;
#[cfg(all(feature = "xla", target_os = "linux"))]
mod programs;
#[cfg(all(feature = "xla", target_os = "linux"))]
pub(crate) mod storage;

#[cfg(all(feature = "xla", target_os = "linux"))]
pub(crate) use device::Xla;
#[cfg(not(all(feature = "xla", target_os = "linux")))]
pub(crate) use off::{Xla, XlaStorage};
pub(crate) use plugins::skip_in_helper;
pub use plugins::{plugin_candidates, plugin_preloads, Plugin};
#[cfg(all(feature = "xla", target_os = "linux"))]
pub(crate) use storage::XlaStorage;

/// Every plugin found, loaded or not (`accel devices` lists them).
pub(crate) fn plugins() -> Vec<Plugin> {
    #[cfg(all(feature = "xla", target_os = "linux"))]
    {
        listing::listing().plugins.clone()
    }
    #[cfg(not(all(feature = "xla", target_os = "linux")))]
    {
        Vec::new()
    }
}

/// The plugins whose load did not finish in time, for the probe helper's answer (the parent
/// then leaves them alone).
#[cfg(all(feature = "xla", target_os = "linux"))]
pub(crate) fn stalled_plugins() -> Vec<std::path::PathBuf> {
    plugins()
        .into_iter()
        .filter(|p| p.stalled)
        .map(|p| p.path)
        .collect()
}

/// In the probe helper: whether XLA is available, the plugins whose load did not finish in
/// time (the parent then leaves them alone), and every plugin's and device's facts for the
/// parent's listing.
#[cfg(all(feature = "xla", target_os = "linux"))]
pub(crate) use listing::helper_answer;

/// In the probe helper, in a build without XLA: whether it is available (never).
#[cfg(not(all(feature = "xla", target_os = "linux")))]
pub(crate) fn helper_answer(available: bool) -> crate::backend::off::Available {
    crate::backend::off::Available { available }
}

/// How many programs accel has compiled for XLA devices in this process (a second identical
/// op does not compile again).
pub(crate) fn compile_count() -> usize {
    #[cfg(all(feature = "xla", target_os = "linux"))]
    {
        programs::compile_count()
    }
    #[cfg(not(all(feature = "xla", target_os = "linux")))]
    {
        0
    }
}

/// Seconds spent compiling XLA programs in this process (kept apart from execution time).
pub(crate) fn compile_seconds() -> f64 {
    #[cfg(all(feature = "xla", target_os = "linux"))]
    {
        programs::compile_seconds()
    }
    #[cfg(not(all(feature = "xla", target_os = "linux")))]
    {
        0.0
    }
}
