//! The XLA backend's device side: the probe (every plugin's devices, or why there are none)
//! and `impl Backend for Xla`.

use crate::backend::contract::Backend;
use crate::base::caps::Hardware;
use crate::base::dtype::HostSlice;
use crate::base::probe::{Availability, DeviceInfo, Probe};
use crate::{BackendKind, DType, DeviceCaps, Result};

use super::context::{device, device_memory, runtime};
use super::programs::forget_programs;
use super::storage::{synchronize, TimingPoint, XlaStorage};

pub(crate) fn probe() -> Probe {
    let rt = super::listing::listing();
    if rt.devices.is_empty() {
        let reason = if rt.plugins.is_empty() {
            "no PJRT plugin found".to_string()
        } else {
            rt.plugins
                .iter()
                .map(|p| {
                    format!(
                        "{}: {}",
                        p.path.display(),
                        p.problem.as_deref().unwrap_or("no devices")
                    )
                })
                .collect::<Vec<_>>()
                .join("; ")
        };
        return Probe::unavailable(
            BackendKind::Xla,
            true,
            reason,
            format!(
                "install a plugin: `pip install lammps-jax-pjrt-cpu` (XLA on the CPU), {} \
                 (NVIDIA GPUs) or `pip install libtpu` (on a TPU VM); or set \
                 ACCEL_PJRT_PLUGIN=/path/to/plugin.so{}",
                crate::backend::native::libs::jax_cuda_extra(
                    crate::backend::native::libs::driver_cuda_version()
                ),
                crate::system::Hosted::tpu_note()
            ),
        );
    }
    let devices = rt
        .devices
        .iter()
        .enumerate()
        .map(|(n, d)| {
            let plugin = rt
                .plugins
                .iter()
                .find(|p| p.platform.as_deref() == Some(d.platform.as_str()));
            let mut details = vec![
                ("platform".to_string(), d.platform.clone()),
                ("kind".to_string(), d.kind.clone()),
                ("id".to_string(), d.id.to_string()),
                ("debug".to_string(), d.debug.clone()),
            ];
            if let Some(p) = plugin {
                details.push(("plugin".to_string(), p.path.display().to_string()));
                if !p.preloaded.is_empty() {
                    details.push((
                        "preloaded_libraries".to_string(),
                        p.preloaded.len().to_string(),
                    ));
                }
                for note in &p.notes {
                    details.push(("plugin_note".to_string(), note.clone()));
                }
                details.push((
                    "pjrt_api_version".to_string(),
                    p.pjrt_api_version.clone().unwrap_or_default(),
                ));
            }
            if !d.platform_version.is_empty() {
                details.push(("platform_version".to_string(), d.platform_version.clone()));
            }
            if let Some(why) = &d.memory_note {
                details.push(("memory_stats".to_string(), why.clone()));
            }
            let cpu = d.platform.eq_ignore_ascii_case("cpu");
            DeviceInfo {
                device: crate::Device::Xla(n),
                name: format!("{} {}", d.platform, d.kind),
                memory_total_bytes: d.memory_total,
                caps: DeviceCaps {
                    dtypes: DType::ALL.to_vec(),
                    hardware: if cpu {
                        Hardware::HostCpuEmulated
                    } else {
                        Hardware::Accelerator
                    },
                    platform: Some(d.platform.clone()),
                    ..DeviceCaps::default()
                },
                details,
            }
        })
        .collect();
    Probe {
        backend: BackendKind::Xla,
        compiled: true,
        availability: Availability::Available { devices },
    }
}

/// The XLA backend.
pub(crate) struct Xla;

impl Backend for Xla {
    type Storage = XlaStorage;
    type Event = TimingPoint;
    const KIND: BackendKind = BackendKind::Xla;

    fn probe() -> Probe {
        probe()
    }
    fn synchronize(ordinal: usize) -> Result<()> {
        synchronize(ordinal)
    }
    fn device_memory(ordinal: usize) -> Option<(u64, u64)> {
        device_memory(runtime().devices.get(ordinal)?)
    }
    fn empty_cache(ordinal: usize) {
        if let Ok(dev) = device(ordinal) {
            forget_programs(&dev);
        }
    }
    fn record_event(ordinal: usize) -> Result<Option<TimingPoint>> {
        TimingPoint::record(ordinal)
    }
    fn seconds_between(start: &TimingPoint, end: &TimingPoint) -> Result<f64> {
        end.seconds_since(start)
    }
    fn timer_name(_: usize) -> &'static str {
        "PJRT ready events (host clock at completion)"
    }
    // XLA's CPU platform computes on this CPU: its peak is the host's.
    fn matmul_peak(caps: &DeviceCaps, dtype: DType) -> Option<crate::base::cpu_peak::Peak> {
        if caps.hardware == Hardware::HostCpuEmulated {
            crate::base::cpu_peak::host_matmul_peak(dtype, true)
        } else {
            None
        }
    }
    fn upload(ordinal: usize, data: HostSlice<'_>) -> Result<XlaStorage> {
        XlaStorage::from_cpu(&device(ordinal)?, data)
    }
    // full, arange, random: made on the host and uploaded (the defaults).
}
