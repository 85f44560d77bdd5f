//! Peaks for the "% peak" columns, reached through the backends (each turns its devices'
//! capabilities into a matmul peak); the tables themselves live with what they describe
//! (`base::cpu_peak` for the host CPU and the bandwidth formulas, the CUDA backend for GPUs).

use serde::{Deserialize, Serialize};

pub use crate::backend::cuda::gpu_peak::cuda_peak;
pub use crate::base::cpu_peak::{
    cpu_core, cpu_peak, gpu_memory_peak, measured_cpu_clock_mhz, pcie_peak, CpuCore, MemoryPeak,
    Peak,
};
use crate::{DType, Device};

/// The peak floating-point rate of `device` for matmul in `dtype`, where its backend can
/// derive one (the CPU, at the clock measured under load; CUDA GPUs; XLA's CPU platform).
pub fn peak(device: &Device, dtype: DType) -> Option<Peak> {
    crate::backend::dispatch::matmul_peak(*device, dtype)
}

/// The peak of a copy in direction `kind` on `device`, where its capabilities give one (CUDA GPUs report their link and memory bus):
/// the PCIe link between host and GPU, or the GPU's memory (a copy within it reads and
/// writes every byte, so its peak in bytes copied is half the memory bandwidth).
pub fn copy_peak(device: &Device, kind: CopyKind) -> Option<MemoryPeak> {
    match kind {
        CopyKind::H2d | CopyKind::D2h => {
            let (generation, lanes) = device.caps().ok()?.pcie_max_link?;
            pcie_peak(generation, lanes)
        }
        CopyKind::D2d => memory_peak(device).map(|m| MemoryPeak {
            gb_per_s: m.gb_per_s / 2.0,
            formula: format!(
                "({}) / 2: each byte copied is read once and written once",
                m.formula
            ),
        }),
    }
}

/// The peak memory bandwidth of `device`, where its capabilities give the bus width and
/// memory clock (CUDA GPUs).
pub fn memory_peak(device: &Device) -> Option<MemoryPeak> {
    let caps = device.caps().ok()?;
    Some(gpu_memory_peak(
        caps.memory_bus_width_bits?,
        caps.max_clock_memory_mhz?,
    ))
}

/// The CPU matmul kernels in use (f32, f64, bf16: the micro-kernel, its tile and blocking)
/// and the caches the blocking was derived from.
pub fn cpu_kernels() -> Vec<(&'static str, String)> {
    crate::backend::dispatch::kernels(Device::Cpu)
}

/// The direction of a copy benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CopyKind {
    /// Host memory to the device (`x.to(device)`).
    H2d,
    /// Device memory to the host (`x.cpu()`), synchronous.
    D2h,
    /// Within the device (`x.clone()`).
    D2d,
}
