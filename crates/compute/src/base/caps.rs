//! Typed capabilities of one device, filled in by its backend's probe. The library decides
//! with these fields; the `details` of a [`crate::DeviceInfo`] are only their rendering for
//! people (`accel devices`) and JSON.

use serde::Serialize;

use crate::DType;

/// What one device is and can do, as far as its backend's probe could tell. Fields a backend
/// cannot know stay `None` / `false`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DeviceCaps {
    /// The dtypes tensors on this device can have.
    pub dtypes: Vec<DType>,
    /// Where the arithmetic really runs: an accelerator, or this host's CPU again behind
    /// another API (XLA's CPU platform, a software GPU adapter such as lavapipe).
    pub hardware: Hardware,
    /// The platform or graphics API the device is reached through: `cpu`, `cuda`, `tpu` for
    /// XLA; `Vulkan`, `Metal`, `Dx12` for wgpu.
    pub platform: Option<String>,
    /// Whether shaders can compute in f16 (wgpu's `shader-f16`).
    pub shader_f16: bool,
    /// Whether the device can timestamp its own queue (CUDA events, wgpu timestamp queries).
    pub timestamp_queries: bool,
    /// CUDA compute capability (major, minor).
    pub compute_capability: Option<(u32, u32)>,
    /// Streaming multiprocessors (CUDA).
    pub sm_count: Option<u32>,
    /// The highest SM clock, MHz.
    pub max_clock_sm_mhz: Option<u32>,
    /// The highest memory clock, MHz.
    pub max_clock_memory_mhz: Option<u32>,
    /// Width of the memory bus, bits.
    pub memory_bus_width_bits: Option<u32>,
    /// The PCIe link the device is capable of: (generation, lanes).
    pub pcie_max_link: Option<(u32, u32)>,
    /// The driver's unique id (`GPU-...` for NVIDIA GPUs).
    pub uuid: Option<String>,
    /// PCI bus id (`00000000:01:00.0`).
    pub pci_bus_id: Option<String>,
}

/// Where a device's arithmetic runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Hardware {
    /// Its own processor: a GPU, a TPU.
    #[default]
    Accelerator,
    /// The host CPU itself (the `cpu` device).
    HostCpu,
    /// The host CPU behind another API: XLA's CPU platform, a software GPU adapter.
    HostCpuEmulated,
}

impl DeviceCaps {
    /// Whether tensors of `dtype` can live on the device.
    pub fn holds(&self, dtype: DType) -> bool {
        self.dtypes.contains(&dtype)
    }

    /// Whether the device computes on the host's CPU (the CPU itself, or through XLA's CPU
    /// platform or a software adapter).
    pub(crate) fn runs_on_host(&self) -> bool {
        self.hardware != Hardware::Accelerator
    }
}

/// Which matrix units an NVIDIA GPU has, by compute capability (NVIDIA's architecture
/// whitepapers: Volta 7.0 brought f16 tensor cores, Turing 7.5 kept f16 only, Ampere 8.0 added
/// bf16 and TF32; every later architecture has all three).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TensorCores {
    /// f16 inputs (7.0 and newer).
    pub f16: bool,
    /// bf16 inputs (8.0 and newer). Without them cuBLAS still multiplies bf16, computing in
    /// f32 on the CUDA cores (as PyTorch's bf16 matmul does on a T4).
    pub bf16: bool,
    /// TF32 for f32 products when allowed (8.0 and newer): without them `allow_tf32` changes
    /// nothing.
    pub tf32: bool,
}

impl TensorCores {
    /// The tensor cores of compute capability `cc`.
    pub fn of(cc: (u32, u32)) -> TensorCores {
        TensorCores {
            f16: cc >= (7, 0),
            bf16: cc >= (8, 0),
            tf32: cc >= (8, 0),
        }
    }

    /// `f16, bf16, tf32` (the ones it has), or `none`.
    pub fn describe(self) -> String {
        let v: Vec<&str> = [(self.f16, "f16"), (self.bf16, "bf16"), (self.tf32, "tf32")]
            .into_iter()
            .filter(|(h, _)| *h)
            .map(|(_, n)| n)
            .collect();
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join(", ")
        }
    }
}

impl DeviceCaps {
    /// The tensor cores of a CUDA device (None for other devices).
    pub fn tensor_cores(&self) -> Option<TensorCores> {
        self.compute_capability.map(TensorCores::of)
    }
}
