//! Apple GPUs (PyTorch's `torch.backends.mps`), reached through wgpu's Metal backend: `mps`
//! is the first Metal adapter, run by the wgpu backend's storage and kernels.

use crate::probe::{Availability, DeviceInfo, Probe};
use crate::Device;

/// What this backend's probe found, with the reason when it found nothing.
pub fn probe() -> Probe {
    if !cfg!(feature = "wgpu") {
        return super::not_implemented("mps", false, "wgpu");
    }
    match metal_adapter() {
        Some(info) => Probe {
            backend: "mps",
            compiled: true,
            availability: Availability::Available {
                devices: vec![DeviceInfo {
                    device: Device::Mps,
                    ..info
                }],
            },
        },
        None => Probe::unavailable(
            "mps",
            true,
            if cfg!(target_os = "macos") {
                "no Metal adapter found"
            } else {
                "mps is Apple's GPU (Metal); this is not macOS"
            },
            "on a Mac with Apple silicon or an AMD GPU, Metal needs nothing to install; \
             other GPUs are reached as wgpu:N or cuda:N",
        ),
    }
}

/// The wgpu adapter behind `mps`: the first one whose backend is Metal.
pub(crate) fn metal_adapter() -> Option<DeviceInfo> {
    // Asked of the wgpu backend directly: this runs while the probe list is being built.
    #[cfg(feature = "wgpu")]
    {
        super::wgpu::storage::adapter_infos().into_iter().find(|d| {
            d.details
                .iter()
                .any(|(k, v)| k == "backend" && v == "Metal")
        })
    }
    #[cfg(not(feature = "wgpu"))]
    {
        None
    }
}

/// The wgpu ordinal that runs `mps` tensors.
pub(crate) fn wgpu_ordinal() -> Option<usize> {
    metal_adapter().and_then(|d| d.device.index())
}

/// Whether this build can drive Apple GPUs (`torch.backends.mps.is_built()`): a macOS build
/// with the wgpu backend.
pub fn is_built() -> bool {
    cfg!(all(feature = "wgpu", target_os = "macos"))
}

/// Whether an Apple GPU is usable now (`torch.backends.mps.is_available()`).
pub fn is_available() -> bool {
    super::probe_of("mps").is_some_and(|p| p.is_available())
}
