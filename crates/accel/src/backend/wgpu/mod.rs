//! Any GPU through wgpu: Vulkan on Linux (and Mesa's software lavapipe in tests), Metal on
//! macOS (the seeds' "mps"), DX12 on Windows. Kernels are WGSL compute shaders, compiled once
//! per shader text and cached.
//!
//! Tensors are f32 and i32 on every adapter, and f16 where the adapter has `shader-f16`;
//! WGSL has no 64-bit or bf16 types, so those are an "unsupported on this device" error value. Adapters of CPU type (lavapipe, SwiftShader) are
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

/// Whether an adapter (with or without `shader-f16`) holds tensors of `dtype`.
pub(crate) fn holds(has_f16: bool, dtype: crate::DType) -> bool {
    use crate::DType::*;
    match dtype {
        F32 | I32 => true,
        F16 => has_f16,
        F64 | I64 | BF16 => false,
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

/// The matmul kernel wgpu devices run, an index into KERNELS; u8::MAX = not read from the
/// environment yet.
static MATMUL_KERNEL: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(u8::MAX);
const KERNELS: [&str; 4] = ["auto", "blocked", "blocked128", "simple"];

/// Chooses the matmul kernel of wgpu devices: "auto" (the default: 128x128 blocks of C on
/// software adapters and for products of at least 1024x1024, else 64x64), "blocked" (64x64 blocks,
/// 4x4 per thread), "blocked128" (128x128 blocks, 8x8 per thread), or "simple" (one thread
/// per output, no workgroup memory: a reference to compare with). The environment variable
/// `ACCEL_WGPU_MATMUL` sets it too.
pub fn set_matmul_kernel(kernel: &str) -> crate::Result<()> {
    let i = KERNELS.iter().position(|k| *k == kernel).ok_or_else(|| {
        crate::Error::invalid(
            "set_matmul_kernel",
            format!("unknown kernel {kernel:?}; expected one of {KERNELS:?}"),
        )
    })?;
    MATMUL_KERNEL.store(i as u8, std::sync::atomic::Ordering::Relaxed);
    Ok(())
}

/// The matmul kernel chosen: one of the names [`set_matmul_kernel`] takes.
pub fn matmul_kernel() -> &'static str {
    use std::sync::atomic::Ordering::Relaxed;
    let mut i = MATMUL_KERNEL.load(Relaxed);
    if i == u8::MAX {
        let env = std::env::var("ACCEL_WGPU_MATMUL").unwrap_or_default();
        i = KERNELS.iter().position(|k| *k == env).unwrap_or(0) as u8;
        let _ = MATMUL_KERNEL.compare_exchange(u8::MAX, i, Relaxed, Relaxed);
    }
    KERNELS[MATMUL_KERNEL.load(Relaxed) as usize]
}
