//! XLA devices through PJRT plugins: Google TPUs (`libtpu`), GPUs (JAX's CUDA plugin) and the
//! CPU (PyTorch's `torch_xla`). Devices are numbered `xla:0`, `xla:1`... across plugins,
//! accelerators first (TPU, then GPU), the CPU platform last; `xla:cpu:0` / `xla:tpu:0` /
//! `xla:cuda:0` pick the n-th device of one platform.

pub use crate::backend::xla::{plugin_candidates, plugin_preloads, Plugin};

use crate::backend::registry;
use crate::base::caps::Hardware;
use crate::base::probe::Probe;
use crate::{BackendKind, Device, Result};

/// What this backend's probe found, with the reason when it found nothing.
pub fn probe() -> Probe {
    registry::probe(BackendKind::Xla).clone()
}

/// Every plugin found, loaded or not (`accel devices` lists them).
pub fn plugins() -> Vec<Plugin> {
    crate::backend::xla::plugins()
}

/// How many programs accel has compiled for XLA devices in this process (a second identical
/// op does not compile again).
pub fn compile_count() -> usize {
    crate::backend::xla::compile_count()
}

/// Seconds spent compiling XLA programs in this process (kept apart from execution time).
pub fn compile_seconds() -> f64 {
    crate::backend::xla::compile_seconds()
}

/// Every usable XLA device (`torch_xla.devices()`); empty when none.
pub fn devices() -> Vec<Device> {
    registry::devices_of(BackendKind::Xla)
}

/// The first XLA device (`torch_xla.device()`), or the reason there is none.
pub fn device() -> Result<Device> {
    let d = Device::Xla(0);
    d.check().map(|_| d)
}

/// The `n`-th XLA device of `platform` (`cpu`, `tpu`, `cuda`), as `xla:N`: what `xla:cpu:0`
/// means.
pub fn platform_device(platform: &str, n: usize) -> Option<Device> {
    registry::xla_platform_device(platform, n)
}

/// Whether `device` is a device of XLA's own CPU platform (the CPU again, behind XLA's
/// compiler: never "the accelerator", and one piece of hardware however many devices it shows).
pub fn is_cpu_platform(device: Device) -> bool {
    matches!(device, Device::Xla(_))
        && registry::caps(device).is_some_and(|c| c.hardware == Hardware::HostCpuEmulated)
}
