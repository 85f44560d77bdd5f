//! NVIDIA GPUs through the CUDA driver API, cuBLAS and NVRTC (PyTorch's `torch.cuda`).
//!
//! Not implemented in this version: the probe reports that, truthfully, and every call on a
//! `cuda:N` device returns an error value naming it. The CUDA issue fills this folder.

use crate::probe::Probe;
use crate::{Device, Result};

/// What this backend's probe found, with the reason when it found nothing.
pub fn probe() -> Probe {
    super::not_implemented("cuda", cfg!(feature = "cuda"), "cuda")
}

/// Whether at least one CUDA GPU is usable (`torch.cuda.is_available()`).
pub fn is_available() -> bool {
    device_count() > 0
}

/// How many CUDA GPUs are usable (`torch.cuda.device_count()`).
pub fn device_count() -> usize {
    super::probe_of("cuda").map_or(0, |p| p.devices().len())
}

/// The usable CUDA devices, by ordinal.
pub fn devices() -> Vec<Device> {
    super::probe_of("cuda")
        .map_or_else(Vec::new, |p| p.devices().iter().map(|d| d.device).collect())
}

/// The CUDA device new tensors go to by default (`torch.cuda.current_device()`): ordinal 0
/// when a GPU is usable, else the reason there is none.
pub fn current_device() -> Result<usize> {
    Device::Cuda(0).check().map(|_| 0)
}
