//! The public per-backend modules (`accelkit::cuda`, `accelkit::mps`, `accelkit::xla`, `accelkit::wgpu`):
//! PyTorch's `torch.cuda.is_available()` and friends. They answer from the registry's probes
//! and hand settings to the backends; the backends themselves stay below the registry.

pub mod cuda;
pub mod mps;
pub mod wgpu;
pub mod xla;
