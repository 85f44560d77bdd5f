//! GPUs through wgpu: Vulkan (AMD, Intel, NVIDIA), Metal (Apple) and DX12.
//!
//! Not implemented in this version: the probe says so, and `wgpu:N` tensors return an error
//! value naming it. The portable-GPU issue fills this folder.

use crate::probe::Probe;
use crate::Device;

/// What this backend's probe found, with the reason when it found nothing.
pub fn probe() -> Probe {
    super::not_implemented("wgpu", cfg!(feature = "wgpu"), "wgpu")
}

/// The usable wgpu adapters, by index.
pub fn devices() -> Vec<Device> {
    super::probe_of("wgpu")
        .map_or_else(Vec::new, |p| p.devices().iter().map(|d| d.device).collect())
}
