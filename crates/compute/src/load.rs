//! Load and memory of the whole machine, sampled again and again: the data behind
//! `accel monitor`, `accel serve`, `accel mem` and the walkthrough's memory section
//! (nvidia-smi's, gpustat's, nvtop's and dcgm-exporter's numbers, for every vendor).
//!
//! The numbers come from [`crate::telemetry`], which reads the vendors' monitoring interfaces
//! and never opens a compute context, PJRT client or Vulkan device. This module only adds what
//! this process itself holds: for each device the process has used (and only those: nothing
//! is probed here), its allocator's counters, matched to the telemetry row of the same
//! hardware by UUID or PCI address.

use serde::Serialize;

use crate::memory::MemoryStats;
use crate::telemetry::{CollectorStatus, HostReading, Reading, Roots, Telemetry};
use crate::{Device, Result};

/// One device at one moment: what its monitoring interface reports, plus what this process
/// holds on it when it uses it. JSON: the reading's fields, flattened, then these.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceLoad {
    /// The monitoring interface's numbers.
    #[serde(flatten)]
    pub reading: Reading,
    /// The device's compute name in this process (`cuda:0`), when this process uses it.
    pub accel_device: Option<Device>,
    /// What this process's live tensors hold on the device.
    pub accel_allocated_bytes: u64,
    /// What this process's allocator holds on the device.
    pub accel_reserved_bytes: u64,
    /// The most this process's live tensors have held on it.
    pub accel_peak_bytes: u64,
}

/// The machine at one moment.
#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    /// Seconds since the Unix epoch.
    pub time_unix_s: f64,
    /// The machine's name.
    pub hostname: String,
    /// The host: CPU per core, RAM, swap, load average, this process's resident memory.
    pub host: HostReading,
    /// Every accelerator found, vendor by vendor (the CPU is `host`); devices that
    /// disappeared stay, with `up: false` and the reason.
    pub devices: Vec<DeviceLoad>,
    /// What this process's allocators hold on each device it has used, the CPU included.
    pub accel_memory: Vec<MemoryStats>,
    /// How each vendor's reader did.
    pub collectors: Vec<CollectorStatus>,
}

/// Takes snapshots; keeps the counters between them.
pub struct Sampler {
    telemetry: Telemetry,
    hostname: String,
}

impl Sampler {
    /// A sampler over every device the vendors' monitoring interfaces show, read under the
    /// usual `/sys` and `/proc`.
    pub fn new() -> Result<Sampler> {
        Ok(Sampler::with_roots(Roots::default()))
    }

    /// A sampler reading under other roots (a container with the host's `/sys` and `/proc`
    /// mounted elsewhere; fixture trees in tests).
    pub fn with_roots(roots: Roots) -> Sampler {
        Sampler {
            telemetry: Telemetry::new(roots),
            hostname: sysinfo::System::host_name().unwrap_or_else(|_| "localhost".to_string()),
        }
    }

    /// The machine now. CPU use is over the time since the previous sample (or since `new`;
    /// at least 0.2 s: a sample sooner than that waits).
    pub fn sample(&mut self) -> Snapshot {
        let s = self.telemetry.sample();
        let accel_memory = used_devices();
        let devices = s
            .devices
            .into_iter()
            .map(|reading| {
                let mine = accel_memory
                    .iter()
                    .find(|m| same_hardware(&m.device, &reading));
                DeviceLoad {
                    accel_device: mine.map(|m| m.device),
                    accel_allocated_bytes: mine.map_or(0, |m| m.allocated_bytes),
                    accel_reserved_bytes: mine.map_or(0, |m| m.reserved_bytes),
                    accel_peak_bytes: mine.map_or(0, |m| m.peak_allocated_bytes),
                    reading,
                }
            })
            .collect();
        Snapshot {
            time_unix_s: s.time_unix_s,
            hostname: self.hostname.clone(),
            host: s.host,
            devices,
            accel_memory,
            collectors: s.collectors,
        }
    }
}

/// The memory statistics of every device this process has used: those the ledger has seen
/// and whose backend is already probed (asking about any other would probe it).
pub(crate) fn used_devices() -> Vec<MemoryStats> {
    let mut devices = crate::base::ledger::with_counters(|m| m.keys().copied().collect::<Vec<_>>());
    devices
        .retain(|d| *d == Device::Cpu || crate::backend::registry::probed(d.backend()).is_some());
    devices.sort_by_key(|d| d.to_string());
    devices.iter().map(crate::memory::stats).collect()
}

/// Whether the compute device `d` is the hardware the telemetry row describes: the same UUID,
/// else the same PCI address.
fn same_hardware(d: &Device, r: &Reading) -> bool {
    if *d == Device::Cpu {
        return false;
    }
    let Some(caps) = crate::backend::registry::probed(d.backend())
        .and_then(|p| p.devices().iter().find(|i| i.device == *d))
        .map(|i| &i.caps)
    else {
        return false;
    };
    // CUDA writes `GPU-<hex>`, NVML a MIG instance as `MIG-<hex>`; a failed UUID query is
    // all zeros, which names nothing.
    let hex = |u: &str| -> Option<String> {
        let h = u
            .trim_start_matches("GPU-")
            .trim_start_matches("MIG-")
            .to_ascii_lowercase();
        (!h.chars().all(|c| c == '0' || c == '-')).then_some(h)
    };
    if let (Some(a), Some(b)) = (
        caps.uuid.as_deref().and_then(hex),
        r.uuid.as_deref().and_then(hex),
    ) {
        return a == b;
    }
    match (&caps.pci_bus_id, &r.pci_bus_id) {
        (Some(a), Some(b)) => {
            crate::telemetry::nvidia::normalize_bus_id(a)
                == crate::telemetry::nvidia::normalize_bus_id(b)
        }
        _ => false,
    }
}

impl std::ops::Deref for DeviceLoad {
    type Target = Reading;
    fn deref(&self) -> &Reading {
        &self.reading
    }
}
