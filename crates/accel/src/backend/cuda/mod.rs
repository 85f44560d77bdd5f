//! NVIDIA GPUs through the CUDA driver API, cuBLAS and NVRTC (PyTorch's `torch.cuda`).
//!
//! - [`libs`]: finds the driver, NVML, NVRTC, cuBLAS(Lt) and cuDNN wherever they are installed
//!   (toolkit, conda, Python wheels) and loads them by absolute path.
//! - `backend`: the probe and the device side of the contract (`impl Backend for Cuda`).
//! - `gpu`: one device in use: context, stream, memory pool, kernels, cuBLAS handle, staging.
//! - `storage`: tensor data on a GPU and every op on it (`impl BackendStorage`).
//! - [`kernels`]: accel's CUDA C kernels, compiled by NVRTC to the device's architecture.
//! - `pinned`: page-locked host memory (`pin_memory()`), copied without staging.
//!
//! Load, temperature, power and processes come from NVML through [`crate::telemetry::nvidia`],
//! which never opens a CUDA context.
//!
//! Without the `cuda` feature, `off.rs` stands in with the same items. Nothing here panics
//! when the hardware or a library is missing: the probe reports why.

pub mod kernel_cache;
pub mod kernels;
pub mod libs;
mod pyenv;
pub mod trust;

#[cfg(feature = "cuda")]
mod backend;
#[cfg(feature = "cuda")]
pub(crate) mod gpu;
#[cfg(feature = "cuda")]
pub(crate) mod pinned;
#[cfg(feature = "cuda")]
pub(crate) mod storage;

#[cfg(not(feature = "cuda"))]
pub(crate) use off::{Cuda, CudaStorage, PinnedBlock};
#[cfg(feature = "cuda")]
pub(crate) use {backend::Cuda, pinned::PinnedBlock, storage::CudaStorage};

use crate::Result;

pub use crate::telemetry::nvidia::{GpuLoad, GpuProcess};

/// Frees the driver refused: memory it may still hold for this process. A drop cannot return
/// an error, so each failure is counted here instead of vanishing (`accel::cuda::free_failures`,
/// `accel mem`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FreeFailures {
    /// How many frees failed.
    pub count: u64,
    /// Bytes those frees should have returned.
    pub bytes: u64,
    /// The last failure: which device or block, which call, the driver's error.
    pub last: Option<String>,
}

static FREE_FAILURES: std::sync::Mutex<FreeFailures> = std::sync::Mutex::new(FreeFailures {
    count: 0,
    bytes: 0,
    last: None,
});

/// Counts one failed free of `bytes` bytes.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn record_free_failure(bytes: u64, what: String) {
    let mut f = FREE_FAILURES.lock().unwrap_or_else(|e| e.into_inner());
    f.count += 1;
    f.bytes += bytes;
    f.last = Some(what);
}

/// Every failed free so far in this process.
pub(crate) fn free_failures() -> FreeFailures {
    FREE_FAILURES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
}

/// Lets f32 matmul use TF32 tensor cores (`torch.backends.cuda.matmul.allow_tf32 = True`):
/// several times faster, with inputs rounded to 10 mantissa bits. Off by default.
pub(crate) fn set_allow_tf32(on: bool) {
    #[cfg(feature = "cuda")]
    storage::set_allow_tf32(on);
    #[cfg(not(feature = "cuda"))]
    let _ = on;
}

/// Whether TF32 is allowed for f32 matmul.
pub(crate) fn allow_tf32() -> bool {
    #[cfg(feature = "cuda")]
    {
        storage::allow_tf32()
    }
    #[cfg(not(feature = "cuda"))]
    {
        false
    }
}

/// The CUDA libraries as found on this machine: path, version, or why each is missing.
pub(crate) fn libraries() -> &'static [libs::Library] {
    if cfg!(feature = "cuda") {
        libs::libraries()
    } else {
        &[]
    }
}

/// The load of the GPU with this UUID / PCI bus id through NVML.
pub(crate) fn load(uuid: Option<&str>, pci_bus_id: Option<&str>) -> Result<GpuLoad> {
    #[cfg(feature = "cuda")]
    {
        crate::telemetry::nvidia::gpu_load(uuid, pci_bus_id)
            .map_err(|e| crate::Error::backend(crate::BackendKind::Cuda, "NVML", e))
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = (uuid, pci_bus_id);
        Err(crate::Error::NotCompiled {
            backend: "cuda",
            feature: "cuda",
        })
    }
}

#[cfg(not(feature = "cuda"))]
mod off {
    use crate::base::dtype::CpuStorage;
    use crate::{BackendKind, DType, Result};

    crate::backend::off::compiled_out!(Cuda, CudaStorage, TimingEvent, BackendKind::Cuda);

    /// Page-locked host memory, which only the CUDA driver makes: no value exists here.
    #[derive(Debug)]
    pub(crate) enum PinnedBlock {}

    impl PinnedBlock {
        pub fn alloc(_: usize, _: usize) -> Result<PinnedBlock> {
            not_compiled()
        }
        pub fn bytes_mut(&mut self) -> &mut [u8] {
            match *self {}
        }
        /// # Safety
        /// Never callable: no `PinnedBlock` exists in this build.
        pub unsafe fn storage(&self, _: DType, _: usize) -> CpuStorage {
            match *self {}
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn failed_frees_are_counted_with_their_bytes_and_the_last_error() {
        let before = super::free_failures();
        super::record_free_failure(4096, "cuda:0: first".into());
        super::record_free_failure(100, "pinned host block of 100 bytes: second".into());
        let after = super::free_failures();
        assert_eq!(after.count - before.count, 2);
        assert_eq!(after.bytes - before.bytes, 4196);
        assert_eq!(
            after.last.as_deref(),
            Some("pinned host block of 100 bytes: second")
        );
    }
}
