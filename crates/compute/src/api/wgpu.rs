//! Any GPU through wgpu: Vulkan on Linux (and Mesa's software lavapipe in tests), Metal on
//! macOS, DX12 on Windows. Tensors are f32 and i32 on every adapter, and f16 where the
//! adapter has `shader-f16`. Adapters of CPU type (lavapipe, SwiftShader) are listed and
//! usable as `wgpu:N` but never chosen by `Device::best()`.

use crate::backend::registry;
use crate::base::caps::Hardware;
use crate::{BackendKind, Device};

/// Whether `wgpu:N` is a software (CPU-type) adapter, such as lavapipe.
pub fn is_software(ordinal: usize) -> bool {
    registry::caps(Device::Wgpu(ordinal)).is_some_and(|c| c.hardware == Hardware::HostCpuEmulated)
}

/// The usable wgpu adapters, by index.
pub fn devices() -> Vec<Device> {
    registry::devices_of(BackendKind::Wgpu)
}

/// Chooses the matmul kernel of wgpu devices: "auto" (the default: 128x128 blocks of C on
/// software adapters and for products of at least 1024x1024, else 64x64), "blocked" (64x64
/// blocks, 4x4 per thread), "blocked128" (128x128 blocks, 8x8 per thread), or "simple" (one
/// thread per output, no workgroup memory: a reference to compare with). The environment
/// variable `ACCEL_WGPU_MATMUL` sets it too.
pub fn set_matmul_kernel(kernel: &str) -> crate::Result<()> {
    crate::backend::wgpu::set_matmul_kernel(kernel)
}

/// The matmul kernel chosen: one of the names [`set_matmul_kernel`] takes.
pub fn matmul_kernel() -> &'static str {
    crate::backend::wgpu::matmul_kernel()
}
