//! Load and memory of the whole machine, sampled again and again: the data behind
//! `accel monitor` and `accel serve` (nvidia-smi's, gpustat's and dcgm-exporter's numbers,
//! for every device accel knows, and the host's per-core CPU and RAM).
//!
//! A [`Sampler`] keeps the host's CPU counters between samples, so each sample's CPU use is
//! over the time since the previous one, and takes no time of its own.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use sysinfo::{CpuRefreshKind, MemoryRefreshKind, RefreshKind, System};

use crate::cuda::GpuProcess;
use crate::system::HostMemory;
use crate::{BackendKind, Device, Error, Result};

/// The host at one moment.
#[derive(Debug, Clone, Serialize)]
pub struct HostLoad {
    /// Whole-machine CPU use, percent, since the previous sample.
    pub cpu_percent: f32,
    /// Each logical core's use, percent.
    pub cpu_per_core_percent: Vec<f32>,
    /// RAM.
    pub memory: HostMemory,
    /// This process's resident memory, where the OS reports it.
    pub process_rss_bytes: Option<u64>,
}

/// One device at one moment; what its driver does not report is `None`. Units are in the
/// field names.
#[derive(Debug, Clone, Serialize)]
#[allow(missing_docs)]
pub struct DeviceLoad {
    pub device: Device,
    pub backend: BackendKind,
    pub name: String,
    pub uuid: Option<String>,
    pub pci_bus_id: Option<String>,
    pub utilization_percent: Option<u32>,
    pub memory_used_bytes: Option<u64>,
    pub memory_total_bytes: Option<u64>,
    /// What this process's live tensors hold on the device.
    pub accel_allocated_bytes: u64,
    /// What this process's allocator holds on the device.
    pub accel_reserved_bytes: u64,
    pub temperature_c: Option<u32>,
    pub power_w: Option<f64>,
    pub power_limit_w: Option<f64>,
    pub clock_sm_mhz: Option<u32>,
    pub clock_memory_mhz: Option<u32>,
    /// Processes using the device, where the driver tells (NVML).
    pub processes: Vec<GpuProcess>,
}

/// The machine at one moment.
#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    /// Seconds since the Unix epoch.
    pub time_unix_s: f64,
    /// The host.
    pub host: HostLoad,
    /// Every accelerator device accel found (the CPU is `host`).
    pub devices: Vec<DeviceLoad>,
}

/// Takes snapshots; keeps the CPU counters between them.
pub struct Sampler {
    sys: System,
    devices: Vec<Device>,
    last: Instant,
}

impl Sampler {
    /// A sampler over every accelerator device accel finds (probing each backend once).
    pub fn new() -> Result<Sampler> {
        let refresh = RefreshKind::nothing()
            .with_cpu(CpuRefreshKind::nothing().with_usage())
            .with_memory(MemoryRefreshKind::everything());
        let mut sys = System::new_with_specifics(refresh)
            .map_err(|e| Error::System(format!("cannot read host information: {e}")))?;
        sys.refresh_cpu_usage();
        let devices = crate::backend::registry::probe_all()
            .iter()
            .flat_map(|p| p.devices().iter().map(|d| d.device))
            .filter(|d| d.is_accelerator())
            .collect();
        Ok(Sampler {
            sys,
            devices,
            last: Instant::now(),
        })
    }

    /// The devices this sampler reports.
    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// The machine now. The CPU use is over the time since the previous sample (or since
    /// `new`); a first sample right after `new` waits the OS's minimum interval.
    pub fn sample(&mut self) -> Snapshot {
        std::thread::sleep(
            sysinfo::MINIMUM_CPU_UPDATE_INTERVAL.saturating_sub(self.last.elapsed()),
        );
        self.sys.refresh_cpu_usage();
        self.last = Instant::now();
        self.sys.refresh_memory();
        let host = HostLoad {
            cpu_percent: self.sys.global_cpu_usage(),
            cpu_per_core_percent: self.sys.cpus().iter().map(|c| c.usage()).collect(),
            memory: HostMemory::of(&self.sys),
            process_rss_bytes: crate::base::system::process_rss_in(&mut self.sys),
        };
        let devices = self.devices.iter().map(|d| device_load(*d)).collect();
        Snapshot {
            time_unix_s: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |t| t.as_secs_f64()),
            host,
            devices,
        }
    }
}

fn device_load(device: Device) -> DeviceLoad {
    let stats = crate::memory::stats(&device);
    let caps = device.caps().ok();
    let mut load = DeviceLoad {
        device,
        backend: device.backend(),
        name: device.name().unwrap_or_default(),
        uuid: caps.and_then(|c| c.uuid.clone()),
        pci_bus_id: caps.and_then(|c| c.pci_bus_id.clone()),
        utilization_percent: None,
        memory_used_bytes: stats
            .total_bytes
            .zip(stats.free_bytes)
            .map(|(t, f)| t.saturating_sub(f)),
        memory_total_bytes: stats.total_bytes,
        accel_allocated_bytes: stats.allocated_bytes,
        accel_reserved_bytes: stats.reserved_bytes,
        temperature_c: None,
        power_w: None,
        power_limit_w: None,
        clock_sm_mhz: None,
        clock_memory_mhz: None,
        processes: Vec::new(),
    };
    if let Device::Cuda(i) = device {
        if let Ok(g) = crate::cuda::utilization(i) {
            load.utilization_percent = g.utilization_gpu_percent;
            load.memory_used_bytes = g.memory_used_bytes.or(load.memory_used_bytes);
            load.memory_total_bytes = g.memory_total_bytes.or(load.memory_total_bytes);
            load.temperature_c = g.temperature_c;
            load.power_w = g.power_w;
            load.power_limit_w = g.power_limit_w;
            load.clock_sm_mhz = g.clock_sm_mhz;
            load.clock_memory_mhz = g.clock_memory_mhz;
            load.processes = g.processes;
        }
    }
    load
}
