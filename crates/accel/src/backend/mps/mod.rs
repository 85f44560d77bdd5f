//! Apple GPUs (PyTorch's `torch.backends.mps`), reached through wgpu's Metal backend.
//!
//! Not implemented in this version: the probe says so, and `mps` tensors return an error
//! value naming it. The portable-GPU issue fills this folder.

use crate::probe::Probe;

/// What this backend's probe found, with the reason when it found nothing.
pub fn probe() -> Probe {
    super::not_implemented("mps", cfg!(feature = "wgpu"), "wgpu")
}

/// Whether this build can drive Apple GPUs (`torch.backends.mps.is_built()`). False until
/// the Metal path is implemented: a build that cannot run `mps` tensors does not claim to.
pub fn is_built() -> bool {
    cfg!(all(feature = "wgpu", target_os = "macos")) && is_available()
}

/// Whether an Apple GPU is usable now (`torch.backends.mps.is_available()`).
pub fn is_available() -> bool {
    super::probe_of("mps").is_some_and(|p| p.is_available())
}
