//! Apple GPUs (PyTorch's `torch.backends.mps`), reached through wgpu's Metal backend.

use crate::backend::registry;
use crate::BackendKind;

/// Whether this build can drive Apple GPUs (`torch.backends.mps.is_built()`): a macOS build
/// with the wgpu backend.
pub fn is_built() -> bool {
    cfg!(all(feature = "wgpu", target_os = "macos"))
}

/// Whether an Apple GPU is usable now (`torch.backends.mps.is_available()`).
pub fn is_available() -> bool {
    registry::probe(BackendKind::Mps).is_available()
}
