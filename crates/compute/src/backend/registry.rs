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

use std::sync::{Mutex, OnceLock};

use crate::base::probe::{Availability, DeviceInfo, Probe};
use crate::{BackendKind, Device, DeviceCaps, Error, Result};

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
        if let Some(Err(r)) = task.map(crate::base::probe_child::canary) {
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

/// Probes every backend not yet probed, side by side, before a question that needs them all:
/// the probe helpers start at once, and each backend's own probe runs as soon as its helper
/// has answered, so the whole costs about the slowest helper and its backend, not the sum of
/// them all. CUDA and XLA probe one after the other on one thread (an XLA plugin may load
/// CUDA libraries of its own environment: which library is loaded first must not depend on
/// a race); wgpu (and mps, one of its adapters) and the CPU on threads of their own.
pub(super) fn probe_side_by_side() {
    let helpers: Vec<&'static str> = [BackendKind::Cuda, BackendKind::Xla, BackendKind::Wgpu]
        .into_iter()
        .filter(|k| k.is_compiled() && probed(*k).is_none())
        .map(BackendKind::name)
        .collect();
    if !crate::base::probe_child::active() || helpers.is_empty() {
        return;
    }
    std::thread::scope(|s| {
        for &t in &helpers {
            s.spawn(move || drop(crate::base::probe_child::canary(t)));
        }
        s.spawn(|| {
            probe(BackendKind::Cuda);
            probe(BackendKind::Xla);
        });
        s.spawn(|| {
            probe(BackendKind::Mps);
            probe(BackendKind::Wgpu);
        });
        probe(BackendKind::Cpu);
    });
}

/// Every backend's probe, in `BackendKind::ALL` order.
pub(crate) fn probe_all() -> Vec<&'static Probe> {
    probe_side_by_side();
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

fn available_list() -> Vec<Device> {
    probe_all()
        .iter()
        .flat_map(|p| p.devices().iter().map(|d| d.device))
        .collect()
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
