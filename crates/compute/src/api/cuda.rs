//! NVIDIA GPUs through the CUDA driver API, cuBLAS and NVRTC (PyTorch's `torch.cuda`).
//! Nothing here panics when the hardware or a library is missing: the probe reports why.

pub use crate::backend::cuda::FreeFailures;
pub use crate::backend::native::libs::{LibName, Library};
pub use crate::backend::native::major::MajorChoice;

use crate::backend::native::libs;

use crate::backend::registry;
use crate::base::probe::Probe;
use crate::{BackendKind, Device, Result};

/// What this backend's probe found, with the reason when it found nothing.
pub fn probe() -> Probe {
    registry::probe(BackendKind::Cuda).clone()
}

/// Whether at least one CUDA GPU is usable (`torch.cuda.is_available()`).
pub fn is_available() -> bool {
    device_count() > 0
}

/// How many CUDA GPUs are usable (`torch.cuda.device_count()`), after `CUDA_VISIBLE_DEVICES`.
pub fn device_count() -> usize {
    registry::probe(BackendKind::Cuda).devices().len()
}

/// The usable CUDA devices, by ordinal.
pub fn devices() -> Vec<Device> {
    registry::devices_of(BackendKind::Cuda)
}

/// The CUDA device new tensors go to by default (`torch.cuda.current_device()`): ordinal 0
/// when a GPU is usable, else the reason there is none.
pub fn current_device() -> Result<usize> {
    Device::Cuda(0).check().map(|_| 0)
}

/// Lets f32 matmul use TF32 tensor cores (`torch.backends.cuda.matmul.allow_tf32 = True`):
/// several times faster, with inputs rounded to 10 mantissa bits. Off by default. GPUs before
/// compute capability 8.0 (a T4, a V100) have no TF32 tensor cores: there it changes nothing
/// (`DeviceCaps::tensor_cores()` tells; `accel bench`'s peak says so).
pub fn set_allow_tf32(on: bool) {
    crate::backend::native::settings::set_allow_tf32(on)
}

/// Whether TF32 is allowed for f32 matmul.
pub fn allow_tf32() -> bool {
    crate::backend::native::settings::allow_tf32()
}

/// Frees the driver refused so far in this process (device memory and pinned host blocks):
/// memory it may still hold. Zero in a healthy process; `accel mem` prints it when not.
pub fn free_failures() -> crate::backend::cuda::FreeFailures {
    crate::backend::cuda::free_failures()
}

/// The CUDA libraries as found on this machine: path, version, or why each is missing
/// (`accel devices` prints them; users ask about driver / CUDA / cuDNN as one stack).
pub fn libraries() -> &'static [libs::Library] {
    crate::backend::cuda::libraries()
}

/// The CUDA major (12 or 13) whose libraries this process uses, and why: decided once, from
/// the driver's CUDA version, what is installed, PyTorch's or JAX's major and
/// `ACCEL_CUDA_MAJOR`. None in a build without the CUDA backend.
pub fn cuda_major() -> Option<&'static libs::MajorChoice> {
    cfg!(feature = "cuda").then(libs::cuda_major)
}

/// The CUDA version of the installed driver (`cuDriverGetVersion`: 12040 for CUDA 12.4, what
/// nvidia-smi shows as "CUDA Version"), None without a driver, before the CUDA probe has run,
/// or in a build without the CUDA backend. Never starts the probe itself.
pub fn driver_cuda_version() -> Option<u32> {
    if cfg!(feature = "cuda") {
        libs::driver_cuda_version()
    } else {
        None
    }
}

/// The `pip install` extra of JAX that matches a driver of this CUDA version
/// (`jax[cuda13]`, `jax[cuda12]`), for the hint beside an XLA backend without a GPU plugin.
pub fn jax_cuda_extra(driver: Option<u32>) -> &'static str {
    libs::jax_cuda_extra(driver)
}

/// The load of CUDA GPU `ordinal` through NVML (GPUtil's `getGPUs()`): utilisation, memory,
/// temperature, power, clocks, health and processes, as `accel monitor` reads every GPU.
pub fn utilization(ordinal: usize) -> Result<crate::telemetry::Reading> {
    let caps = Device::Cuda(ordinal).caps()?;
    #[cfg(feature = "cuda")]
    {
        crate::telemetry::nvidia::reading(caps.uuid.as_deref(), caps.pci_bus_id.as_deref())
            .map_err(|e| crate::Error::backend(BackendKind::Cuda, "NVML", e))
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = caps;
        Err(crate::Error::NotCompiled {
            backend: "cuda",
            feature: "cuda",
        })
    }
}
