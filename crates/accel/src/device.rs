//! Devices: where a tensor lives.

use std::fmt;
use std::str::FromStr;

use serde::{Serialize, Serializer};

use crate::backend;
use crate::probe::Probe;
use crate::DType;
use crate::{Error, Result};

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

/// The search order of [`Device::best`], from the seeds: CUDA, then Apple's GPU, then XLA,
/// then any other GPU, then the CPU.
const BEST_ORDER: [&str; 5] = ["cuda", "mps", "xla", "wgpu", "cpu"];

impl Device {
    /// The best available device: the first of CUDA, Apple GPU (mps), XLA, another GPU
    /// (wgpu), falling back to the CPU. The same choice as the seeds'
    /// `"cuda" if torch.cuda.is_available() else "mps" if ... else "cpu"`.
    pub fn best() -> Device {
        for name in BEST_ORDER {
            if name == "xla" {
                // XLA's own CPU platform is the CPU again, behind a compiler: not an
                // accelerator. Its devices are numbered after every accelerator's.
                if let Some(d) = crate::xla::devices()
                    .into_iter()
                    .find(|d| !crate::xla::is_cpu_platform(*d))
                {
                    return d;
                }
                continue;
            }
            if name == "wgpu" {
                // Never a software adapter (lavapipe, SwiftShader): the CPU does better.
                if let Some(d) = crate::wgpu::devices()
                    .into_iter()
                    .find(|d| d.index().is_some_and(|i| !crate::wgpu::is_software(i)))
                {
                    return d;
                }
                continue;
            }
            if let Some(d) = backend::first_available(name) {
                return d;
            }
        }
        Device::Cpu
    }

    /// Whether tensors of `dtype` can live on this device in this version: every dtype on the
    /// CPU, CUDA and XLA; f32 and i32 on wgpu and mps, and f16 where the adapter has
    /// `shader-f16` (WGSL has no 64-bit or bf16 types).
    pub fn supports(&self, dtype: DType) -> bool {
        match self {
            Device::Cpu | Device::Cuda(_) | Device::Xla(_) => true,
            Device::Mps | Device::Wgpu(_) => {
                let adapter = match self {
                    Device::Mps => crate::backend::mps::wgpu_ordinal().map(Device::Wgpu),
                    d => Some(*d),
                };
                let f16 = adapter.and_then(|d| crate::backend::detail(d, "shader_f16"))
                    == Some("true".to_string());
                crate::backend::wgpu::holds(f16, dtype)
            }
        }
    }

    /// `cuda:i` when that GPU is usable, else the CPU.
    pub fn cuda_if_available(ordinal: usize) -> Device {
        let d = Device::Cuda(ordinal);
        if d.is_available() {
            d
        } else {
            Device::Cpu
        }
    }

    /// The backend's short name: `cpu`, `cuda`, `mps`, `xla`, `wgpu` (PyTorch's `device.type`).
    pub fn kind(&self) -> &'static str {
        match self {
            Device::Cpu => "cpu",
            Device::Cuda(_) => "cuda",
            Device::Mps => "mps",
            Device::Xla(_) => "xla",
            Device::Wgpu(_) => "wgpu",
        }
    }

    /// The ordinal (PyTorch's `device.index`); `None` for the CPU and mps.
    pub fn index(&self) -> Option<usize> {
        match self {
            Device::Cpu | Device::Mps => None,
            Device::Cuda(i) | Device::Xla(i) | Device::Wgpu(i) => Some(*i),
        }
    }

    /// True for everything but the CPU.
    pub fn is_accelerator(&self) -> bool {
        !matches!(self, Device::Cpu)
    }

    /// Whether tensors can be created on this device now.
    pub fn is_available(&self) -> bool {
        self.check().is_ok()
    }

    /// `Ok` when the device is usable, else the reason as an error value that also lists the
    /// devices that do exist.
    pub fn check(&self) -> Result<()> {
        backend::check(*self)
    }

    /// A human-readable name ("AMD EPYC 7B13 (2 threads)", "NVIDIA H200"...).
    pub fn name(&self) -> Result<String> {
        self.check()?;
        backend::device_name(*self)
    }

    /// Waits until all work queued on this device has finished (PyTorch's
    /// `torch.cuda.synchronize()`, `torch.mps.synchronize()`, `torch_xla.sync()`).
    /// On the CPU, work is synchronous and this returns at once.
    pub fn synchronize(&self) -> Result<()> {
        self.check()?;
        backend::synchronize(*self)
    }

    /// The availability of every backend, as data: which devices exist and, for those that do
    /// not, why and how to fix it.
    pub fn probe_all() -> Vec<Probe> {
        backend::probe_all().into_iter().cloned().collect()
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

const ACCEPTED: &str =
    "expected cpu, cuda, cuda:N, mps, xla, xla:N, xla:PLATFORM:N (xla:tpu:0, xla:cpu:0) or wgpu:N";

impl FromStr for Device {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let unknown = |hint: String| Error::UnknownDevice {
            name: s.to_string(),
            hint,
        };
        let lower = s.trim().to_ascii_lowercase();
        let (kind, index) = match lower.split_once(':') {
            Some((k, i)) => (k, Some(i)),
            None => (lower.as_str(), None),
        };
        let ordinal = |i: Option<&str>| -> Result<usize> {
            match i {
                None => Ok(0),
                Some(i) => i.parse::<usize>().map_err(|_| {
                    unknown(format!(
                        "'{i}' is not a device index (a number such as 0 or 1); {ACCEPTED}"
                    ))
                }),
            }
        };
        match kind {
            "cpu" => match index {
                None | Some("0") => Ok(Device::Cpu),
                Some(_) => Err(unknown(format!(
                    "there is one cpu device, written 'cpu'; {ACCEPTED}"
                ))),
            },
            "cuda" => Ok(Device::Cuda(ordinal(index)?)),
            "mps" => match index {
                None | Some("0") => Ok(Device::Mps),
                Some(_) => Err(unknown(format!(
                    "there is one mps device (the first Apple GPU); for other GPUs use wgpu:N; {ACCEPTED}"
                ))),
            },
            "xla" => match index.and_then(|i| i.split_once(':')) {
                // xla:tpu:0, xla:cpu:1: the n-th device of one PJRT platform.
                Some((platform, n)) => {
                    let n = ordinal(Some(n))?;
                    crate::xla::platform_device(platform, n).ok_or_else(|| {
                        let have = crate::xla::devices()
                            .iter()
                            .map(|d| d.to_string())
                            .collect::<Vec<_>>()
                            .join(", ");
                        unknown(format!(
                            "no {platform} device number {n} among the XLA devices ({}); run `accel devices`",
                            if have.is_empty() { "none".to_string() } else { have }
                        ))
                    })
                }
                None => Ok(Device::Xla(ordinal(index)?)),
            },
            "wgpu" => Ok(Device::Wgpu(ordinal(index)?)),
            "tpu" => Err(unknown(format!(
                "TPUs are reached through XLA: use xla or xla:N; {ACCEPTED}"
            ))),
            "gpu" => Err(unknown(format!(
                "say which kind of GPU: cuda (NVIDIA), mps (Apple) or wgpu:N (any GPU through Vulkan/Metal/DX12), or run `accel devices`; {ACCEPTED}"
            ))),
            "metal" | "vulkan" | "dx12" | "rocm" | "hip" => Err(unknown(format!(
                "{kind} GPUs are reached through wgpu: use wgpu:N (mps for the first Apple GPU); {ACCEPTED}"
            ))),
            "" => Err(unknown(format!("empty device name; {ACCEPTED}"))),
            _ => Err(unknown(ACCEPTED.to_string())),
        }
    }
}

impl TryFrom<&str> for Device {
    type Error = Error;
    fn try_from(s: &str) -> Result<Self> {
        s.parse()
    }
}
