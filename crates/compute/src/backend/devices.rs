//! What a `Device` answers by asking the backends: the best device, whether one is available
//! (and why not), its name and capabilities, waiting for its queue, and parsing `"cuda:1"`.
//! The values themselves (its backend, ordinal, display) are in `base/device.rs`, below every
//! backend; everything a `Device` asks of them is here, above the registry and the dispatch.

use std::str::FromStr;

use crate::base::probe::Probe;
use crate::{BackendKind, DType, Device, DeviceCaps, Error, Result};

use super::registry::{
    caps, check, devices_of, info, probe, probe_all, probe_side_by_side, unavailable_error,
    xla_platform_device,
};

impl Device {
    /// Waits until all work queued on this device has finished (PyTorch's
    /// `torch.cuda.synchronize()`, `torch.mps.synchronize()`, `torch_xla.sync()`).
    /// On the CPU, work is synchronous and this returns at once.
    pub fn synchronize(&self) -> Result<()> {
        super::dispatch::synchronize(*self)
    }

    /// The best available device: the first of CUDA, Apple GPU (mps), XLA, another GPU
    /// (wgpu), falling back to the CPU. The same choice as the seeds'
    /// `"cuda" if torch.cuda.is_available() else "mps" if ... else "cpu"`. A device that
    /// computes on the host's CPU again (XLA's CPU platform, a software adapter such as
    /// lavapipe) is never chosen over the CPU itself.
    pub fn best() -> Device {
        probe_side_by_side();
        BackendKind::BEST_ORDER
            .into_iter()
            .flat_map(|k| probe(k).devices())
            .find(|d| !d.caps.runs_on_host())
            .map_or(Device::Cpu, |d| d.device)
    }

    /// Whether tensors of `dtype` can live on this device in this version: every dtype on the
    /// CPU, CUDA and XLA; f32 and i32 on wgpu and mps, and f16 where the adapter has
    /// `shader-f16` (WGSL has no 64-bit or bf16 types). False for a device that does not exist.
    pub fn supports(&self, dtype: DType) -> bool {
        match caps(*self) {
            Some(c) => c.holds(dtype),
            // A device that does not exist here: what its backend can hold in general.
            None => match self.backend() {
                BackendKind::Cpu | BackendKind::Cuda | BackendKind::Xla => true,
                BackendKind::Mps | BackendKind::Wgpu => matches!(dtype, DType::F32 | DType::I32),
            },
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

    /// Whether tensors can be created on this device now.
    pub fn is_available(&self) -> bool {
        self.check().is_ok()
    }

    /// `Ok` when the device is usable, else the reason as an error value that also lists the
    /// devices that do exist.
    pub fn check(&self) -> Result<()> {
        check(*self)
    }

    /// A human-readable name ("AMD EPYC 7B13 (2 threads)", "NVIDIA H200"...).
    pub fn name(&self) -> Result<String> {
        info(*self)
            .map(|d| d.name.clone())
            .ok_or_else(|| unavailable_error(*self))
    }

    /// What the device is and can do, as its backend's probe found it; the reason it cannot
    /// be used otherwise.
    pub fn caps(&self) -> Result<&'static DeviceCaps> {
        caps(*self).ok_or_else(|| unavailable_error(*self))
    }

    /// The availability of every backend, as data: which devices exist and, for those that do
    /// not, why and how to fix it.
    pub fn probe_all() -> Vec<Probe> {
        probe_all().into_iter().cloned().collect()
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
                    xla_platform_device(platform, n).ok_or_else(|| {
                        let have = devices_of(BackendKind::Xla)
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
