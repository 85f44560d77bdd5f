//! NVIDIA GPUs through the CUDA driver API, cuBLAS and NVRTC (PyTorch's `torch.cuda`).
//!
//! - `device`: the probe and the device side of the contract (`impl Backend for Cuda`).
//! - `context`: one device in use: context, stream, memory pool, kernels, cuBLAS handle,
//!   staging.
//! - `storage`: tensor data on a GPU and every op on it (`impl BackendStorage`).
//! - [`kernels`]: accel's CUDA C kernels, compiled by NVRTC to the device's architecture;
//!   [`kernel_cache`]: their compiled form on disk.
//! - `pinned`: page-locked host memory (`pin_memory()`, `Backend::pinned_host`), copied
//!   without staging; `locked`: which host ranges are page-locked.
//! - `failures`: frees the driver refused.
//!
//! The libraries are found by `backend::native::libs` (shared with XLA's plugins); load,
//! temperature, power and processes come from NVML through `crate::telemetry::nvidia`,
//! which never opens a CUDA context.
//!
//! Without the `cuda` feature, `off.rs` stands in with the same items. Nothing here panics
//! when the hardware or a library is missing: the probe reports why.

// Compiled in every build (the kernels' sources and the cache are tested without the `cuda`
// feature's driver code), used by the driver code only.
#[cfg_attr(not(feature = "cuda"), allow(dead_code, unused_imports))]
mod archs;
// The doctor's CUDA checklist and the rules naming why CUDA cannot work (every build: they
// read files and the libraries' answers, not the driver API).
pub(crate) mod causes;
pub(crate) mod doctor;
mod failures;
#[cfg_attr(not(feature = "cuda"), allow(dead_code, unused_imports))]
pub mod kernel_cache;
#[cfg_attr(not(feature = "cuda"), allow(dead_code, unused_imports))]
pub mod kernels;
mod placement;

#[cfg(feature = "cuda")]
pub(crate) mod context;
#[cfg(feature = "cuda")]
mod device;
#[cfg(feature = "cuda")]
mod driver_error;
pub(crate) mod gpu_peak;
#[cfg(feature = "cuda")]
mod locked;
#[cfg(not(feature = "cuda"))]
mod off;
#[cfg(feature = "cuda")]
pub(crate) mod pinned;
#[cfg(feature = "cuda")]
pub(crate) mod storage;
#[cfg(test)]
#[cfg(feature = "cuda")]
mod tests;

pub(crate) use failures::free_failures;

/// The CUDA libraries as found on this machine: path, version, or why each is missing; none
/// in a build without the `cuda` feature (`accelkit::cuda::libraries`, and the doctor's
/// checks, which then say the build has no CUDA).
pub(crate) fn libraries() -> &'static [crate::backend::native::libs::Library] {
    if cfg!(feature = "cuda") {
        crate::backend::native::libs::libraries()
    } else {
        &[]
    }
}
pub use failures::FreeFailures;
#[cfg(not(feature = "cuda"))]
pub(crate) use off::{Cuda, CudaStorage};
#[cfg(feature = "cuda")]
pub(crate) use {device::Cuda, storage::CudaStorage};
