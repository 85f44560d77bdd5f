//! XLA devices through PJRT plugins: Google TPUs (`libtpu`), GPUs and the CPU (PyTorch's
//! `torch_xla`).
//!
//! Not implemented in this version: the probe says so, and `xla:N` tensors return an error
//! value naming it. The XLA issue fills this folder.

use crate::probe::Probe;
use crate::{Device, Result};

/// What this backend's probe found, with the reason when it found nothing.
pub fn probe() -> Probe {
    super::not_implemented("xla", cfg!(feature = "xla"), "xla")
}

/// Every usable XLA device (`torch_xla.devices()`); empty when none.
pub fn devices() -> Vec<Device> {
    super::probe_of("xla").map_or_else(Vec::new, |p| p.devices().iter().map(|d| d.device).collect())
}

/// The first XLA device (`torch_xla.device()`), or the reason there is none.
pub fn device() -> Result<Device> {
    let d = Device::Xla(0);
    d.check().map(|_| d)
}
