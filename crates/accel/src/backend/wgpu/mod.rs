//! Any GPU through wgpu: Vulkan on Linux (and Mesa's software lavapipe in tests), Metal on
//! macOS (the seeds' "mps"), DX12 on Windows. Kernels are WGSL compute shaders, compiled once
//! per shader text and cached.
//!
//! This version runs f32 tensors (the dtype every adapter has); other dtypes are an
//! "unsupported on this device" error value. Adapters of CPU type (lavapipe, SwiftShader) are
//! listed and usable as `wgpu:N` but never chosen by `Device::best()`.

#[cfg(feature = "wgpu")]
pub(crate) mod storage;

use crate::probe::Probe;

/// What this backend's probe found, with the reason when it found nothing.
pub fn probe() -> Probe {
    #[cfg(feature = "wgpu")]
    {
        storage::probe()
    }
    #[cfg(not(feature = "wgpu"))]
    {
        super::not_implemented("wgpu", false, "wgpu")
    }
}

/// Whether `wgpu:N` is a software (CPU-type) adapter, such as lavapipe.
pub fn is_software(ordinal: usize) -> bool {
    super::detail(crate::Device::Wgpu(ordinal), "device_type").as_deref() == Some("Cpu")
}

/// The usable wgpu adapters, by index.
pub fn devices() -> Vec<crate::Device> {
    super::probe_of("wgpu")
        .map_or_else(Vec::new, |p| p.devices().iter().map(|d| d.device).collect())
}
