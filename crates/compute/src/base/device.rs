//! Devices: where a tensor lives.

use std::fmt;

use serde::{Serialize, Serializer};

/// A device a tensor can live on. Every variant exists in every build; a backend that is not
/// available (or not compiled in) answers with an error value that says why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Device {
    /// The host CPU (always available).
    Cpu,
    /// An NVIDIA GPU by CUDA ordinal (`cuda:0`).
    Cuda(usize),
    /// The first Apple GPU through Metal (PyTorch's `mps`).
    Mps,
    /// An XLA device through a PJRT plugin: TPU, GPU or CPU (`xla:0`).
    Xla(usize),
    /// A GPU adapter through wgpu: Vulkan, Metal or DX12 (`wgpu:0`).
    Wgpu(usize),
}

/// A backend: the library and kernels behind one kind of device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// The host CPU.
    Cpu,
    /// NVIDIA GPUs through the CUDA driver.
    Cuda,
    /// The first Apple GPU through Metal (run by the wgpu backend).
    Mps,
    /// XLA devices through PJRT plugins.
    Xla,
    /// Any GPU through wgpu (Vulkan, Metal, DX12).
    Wgpu,
}

impl BackendKind {
    /// Every backend, in the order `accel devices` lists them.
    pub const ALL: [BackendKind; 5] = [
        BackendKind::Cpu,
        BackendKind::Cuda,
        BackendKind::Mps,
        BackendKind::Xla,
        BackendKind::Wgpu,
    ];

    /// The search order of [`Device::best`], from the seeds: CUDA, then Apple's GPU, then
    /// XLA, then any other GPU, then the CPU.
    pub(crate) const BEST_ORDER: [BackendKind; 5] = [
        BackendKind::Cuda,
        BackendKind::Mps,
        BackendKind::Xla,
        BackendKind::Wgpu,
        BackendKind::Cpu,
    ];

    /// The short name: `cpu`, `cuda`, `mps`, `xla`, `wgpu` (PyTorch's `device.type`).
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Cpu => "cpu",
            BackendKind::Cuda => "cuda",
            BackendKind::Mps => "mps",
            BackendKind::Xla => "xla",
            BackendKind::Wgpu => "wgpu",
        }
    }

    /// Whether this build has the backend compiled in.
    pub fn is_compiled(self) -> bool {
        match self {
            BackendKind::Cpu => true,
            BackendKind::Cuda => cfg!(feature = "cuda"),
            BackendKind::Mps => cfg!(all(feature = "wgpu", target_os = "macos")),
            BackendKind::Xla => cfg!(all(feature = "xla", target_os = "linux")),
            BackendKind::Wgpu => cfg!(feature = "wgpu"),
        }
    }

    /// The cargo feature that compiles the backend in (`None`: always compiled).
    pub fn feature(self) -> Option<&'static str> {
        match self {
            BackendKind::Cpu => None,
            BackendKind::Cuda => Some("cuda"),
            BackendKind::Mps | BackendKind::Wgpu => Some("wgpu"),
            BackendKind::Xla => Some("xla"),
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

impl PartialEq<&str> for BackendKind {
    fn eq(&self, other: &&str) -> bool {
        self.name() == *other
    }
}

impl Device {
    /// The backend that runs this device.
    pub fn backend(&self) -> BackendKind {
        match self {
            Device::Cpu => BackendKind::Cpu,
            Device::Cuda(_) => BackendKind::Cuda,
            Device::Mps => BackendKind::Mps,
            Device::Xla(_) => BackendKind::Xla,
            Device::Wgpu(_) => BackendKind::Wgpu,
        }
    }

    /// The backend's short name: `cpu`, `cuda`, `mps`, `xla`, `wgpu` (PyTorch's `device.type`).
    pub fn kind(&self) -> &'static str {
        self.backend().name()
    }

    /// The ordinal (PyTorch's `device.index`); `None` for the CPU and mps.
    pub fn index(&self) -> Option<usize> {
        match self {
            Device::Cpu | Device::Mps => None,
            Device::Cuda(i) | Device::Xla(i) | Device::Wgpu(i) => Some(*i),
        }
    }

    /// The backend's own index of this device: the ordinal, 0 for the CPU and mps (one device
    /// each). What the backend contract's calls take.
    pub(crate) fn ordinal(&self) -> usize {
        self.index().unwrap_or(0)
    }

    /// True for everything but the CPU.
    pub fn is_accelerator(&self) -> bool {
        !matches!(self, Device::Cpu)
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.index() {
            Some(i) => write!(f, "{}:{i}", self.kind()),
            None => f.write_str(self.kind()),
        }
    }
}

impl Serialize for Device {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}
