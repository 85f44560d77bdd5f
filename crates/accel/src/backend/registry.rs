//! The registry: one probe per backend, made on first use and kept, indexed by
//! `BackendKind`, and every question about which devices exist (`Device::check`,
//! `Device::best`, device names such as `xla:tpu:0`) answered from the probes' typed
//! capabilities.
//!
//! Probes run one at a time, under one lock (drivers' own initialisation is not always safe
//! beside another's), and cannot deadlock: a probe is a backend's `Backend::probe`, and no
//! backend can reach this registry (backends sit below it in the layering that
//! `scripts/layers.py` checks), so no probe asks for another's result while the lock is held.
//! Probes read the environment but never change it; `crate::prepare_environment` does, once,
//! before threads start.

use std::str::FromStr;
use std::sync::{Mutex, OnceLock};

use crate::base::probe::{Availability, DeviceInfo, Probe};
use crate::{BackendKind, DType, Device, DeviceCaps, Error, Result};

use super::contract::Backend;
use super::{cpu, cuda, wgpu, xla};

/// Runs `$body` with `$b` as the type implementing `Backend` for `$kind`.
macro_rules! on_backend {
    ($kind:expr, $b:ident => $body:expr) => {
        match $kind {
            BackendKind::Cpu => {
                type $b = cpu::Cpu;
                $body
            }
            BackendKind::Cuda => {
                type $b = cuda::Cuda;
                $body
            }
            BackendKind::Mps => {
                type $b = wgpu::Mps;
                $body
            }
            BackendKind::Xla => {
                type $b = xla::Xla;
                $body
            }
            BackendKind::Wgpu => {
                type $b = wgpu::Wgpu;
                $body
            }
        }
    };
}
pub(crate) use on_backend;

/// One probe per backend, made on first use.
static PROBES: [OnceLock<Probe>; BackendKind::ALL.len()] =
    [const { OnceLock::new() }; BackendKind::ALL.len()];

/// The probe of `kind`, made on first use (so `--device cpu` loads no plugin) and kept:
/// availability does not change while we run, and probing can be slow.
pub(crate) fn probe(kind: BackendKind) -> &'static Probe {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    PROBES[kind as usize].get_or_init(|| {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        // Drivers that cannot be stopped inside this process are tried first in a helper
        // process killed at a deadline (when the program enabled one). XLA asks per plugin,
        // in its own loader, so one bad plugin does not hide the others.
        let task = match kind {
            BackendKind::Cuda | BackendKind::Wgpu if kind.is_compiled() => Some(kind.name()),
            _ => None,
        };
        if let Some(Err(r)) = task.map(crate::base::helper::canary) {
            return Probe::unavailable(kind, true, r.reason, r.hint);
        }
        let p = on_backend!(kind, B => {
            debug_assert_eq!(B::KIND, kind);
            B::probe()
        });
        debug_assert_eq!(p.backend, kind, "a probe answered for another backend");
        p
    })
}

/// The probe of `kind` if something already made it; never probes.
pub(crate) fn probed(kind: BackendKind) -> Option<&'static Probe> {
    PROBES[kind as usize].get()
}

/// Starts the probe helpers of every backend not yet probed side by side, before a question
/// that needs them all.
fn prestart_helpers() {
    let helpers: Vec<&'static str> = [BackendKind::Cuda, BackendKind::Xla, BackendKind::Wgpu]
        .into_iter()
        .filter(|k| k.is_compiled() && probed(*k).is_none())
        .map(BackendKind::name)
        .collect();
    crate::base::helper::prestart(&helpers);
}

/// Every backend's probe, in `BackendKind::ALL` order.
pub(crate) fn probe_all() -> Vec<&'static Probe> {
    prestart_helpers();
    BackendKind::ALL.into_iter().map(probe).collect()
}

/// What the probe found about `device`, if it lists it.
pub(crate) fn info(device: Device) -> Option<&'static DeviceInfo> {
    probe(device.backend())
        .devices()
        .iter()
        .find(|d| d.device == device)
}

/// The typed capabilities of `device`, if its probe lists it.
pub(crate) fn caps(device: Device) -> Option<&'static DeviceCaps> {
    info(device).map(|d| &d.caps)
}

/// The devices of one backend that its probe lists.
pub(crate) fn devices_of(kind: BackendKind) -> Vec<Device> {
    probe(kind).devices().iter().map(|d| d.device).collect()
}

fn available_list() -> String {
    probe_all()
        .iter()
        .flat_map(|p| p.devices().iter().map(|d| d.device.to_string()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The error for a device that does not exist here: the backend's reason and fix, and the
/// devices that do exist.
pub(crate) fn unavailable_error(device: Device) -> Error {
    let (reason, hint) = match &probe(device.backend()).availability {
        Availability::Unavailable { reason, hint } => (reason.clone(), hint.clone()),
        Availability::Available { devices } => (
            format!(
                "there {} {} {} device{}",
                if devices.len() == 1 { "is" } else { "are" },
                devices.len(),
                device.kind(),
                if devices.len() == 1 { "" } else { "s" }
            ),
            "run `accel devices` to see them".to_string(),
        ),
    };
    Error::DeviceUnavailable {
        device,
        reason,
        hint,
        available: available_list(),
    }
}

/// `Ok` when the probe lists `device`, else why not.
pub(crate) fn check(device: Device) -> Result<()> {
    match info(device) {
        Some(_) => Ok(()),
        None => Err(unavailable_error(device)),
    }
}

/// One device per piece of hardware, from `devices` in their order: every accelerator and
/// the CPU, plus the first device of XLA's CPU platform (XLA's compiler on the same CPU is
/// worth comparing), but no other device that computes on the host's CPU again (further XLA
/// CPU devices, software GPU adapters such as lavapipe). What `accel bench` measures when no
/// device is named. The one definition of "distinct hardware".
pub fn distinct_hardware(devices: &[Device]) -> Vec<Device> {
    let first_xla_cpu = xla_platform_device("cpu", 0);
    devices
        .iter()
        .copied()
        .filter(|d| {
            let Some(c) = caps(*d) else { return false };
            match c.hardware {
                crate::base::caps::Hardware::Accelerator | crate::base::caps::Hardware::HostCpu => {
                    true
                }
                crate::base::caps::Hardware::HostCpuEmulated => Some(*d) == first_xla_cpu,
            }
        })
        .collect()
}

/// The `n`-th XLA device of `platform` (`cpu`, `tpu`, `cuda`), as `xla:N`.
pub(crate) fn xla_platform_device(platform: &str, n: usize) -> Option<Device> {
    probe(BackendKind::Xla)
        .devices()
        .iter()
        .filter(|d| {
            d.caps
                .platform
                .as_deref()
                .is_some_and(|p| p.eq_ignore_ascii_case(platform))
        })
        .nth(n)
        .map(|d| d.device)
}

impl Device {
    /// The best available device: the first of CUDA, Apple GPU (mps), XLA, another GPU
    /// (wgpu), falling back to the CPU. The same choice as the seeds'
    /// `"cuda" if torch.cuda.is_available() else "mps" if ... else "cpu"`. A device that
    /// computes on the host's CPU again (XLA's CPU platform, a software adapter such as
    /// lavapipe) is never chosen over the CPU itself.
    pub fn best() -> Device {
        prestart_helpers();
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
