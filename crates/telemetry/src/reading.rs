//! What a telemetry reader reports and where it looks: `Roots` (sysfs, procfs, the TPU
//! metrics service), `Vendor`, one device's `Reading` (with its processes' `ProcessUse`),
//! and the `Reader` trait each vendor's file implements. The sampler (`Telemetry`, the crate root) runs the
//! readers; nothing here imports a reader.

use std::path::PathBuf;

use serde::Serialize;

pub use super::vendor::Vendor;

/// Where the readers look: the roots of sysfs and procfs (node_exporter's `--path.sysfs` and
/// `--path.procfs`, so an exporter in a container can read the host's, mounted elsewhere, and
/// tests can read fixture trees), and the TPU runtime's metrics service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roots {
    /// `/sys` on a normal machine.
    pub sysfs: PathBuf,
    /// `/proc` on a normal machine.
    pub procfs: PathBuf,
    /// The TPU runtime's gRPC metrics service, `localhost:8431` by default.
    pub tpu_metrics: String,
    /// The kubelet's pod-resources socket ([`DEFAULT_POD_RESOURCES_SOCKET`]); asked only
    /// where it exists.
    pub pod_resources: PathBuf,
}

impl Default for Roots {
    fn default() -> Roots {
        Roots {
            sysfs: PathBuf::from("/sys"),
            procfs: PathBuf::from("/proc"),
            tpu_metrics: "localhost:8431".to_string(),
            pod_resources: PathBuf::from(DEFAULT_POD_RESOURCES_SOCKET),
        }
    }
}

/// Where the kubelet serves the pod-resources API (`crate::kubelet`).
pub const DEFAULT_POD_RESOURCES_SOCKET: &str = "/var/lib/kubelet/pod-resources/kubelet.sock";

/// A container the kubelet gave a device.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[non_exhaustive]
pub struct Owner {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub pod: String,
    /// The container's name.
    pub container: String,
    /// The extended resource it was given the device as (`nvidia.com/gpu`, `amd.com/gpu`).
    pub resource: String,
}

impl Owner {
    /// `namespace/pod (container)` for tables and messages.
    pub fn short(&self) -> String {
        format!("{}/{} ({})", self.namespace, self.pod, self.container)
    }
}

/// One process using a device, with what the interface tells of it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ProcessUse {
    /// Process id (in the procfs the reader was given).
    pub pid: u32,
    /// The owner's user name (or uid as text when it has no name).
    pub user: Option<String>,
    /// The command (`/proc/PID/comm`).
    pub command: Option<String>,
    /// Device memory it holds.
    pub memory_bytes: Option<u64>,
    /// Its share of the device's engines since the previous sample, percent (DRM fdinfo:
    /// the difference of two cumulative engine times over the wall time between them).
    pub busy_percent: Option<f64>,
    /// The container, pod, Slurm job or systemd unit it runs in (`PROCFS/PID/cgroup`).
    pub workload: Option<crate::workload::Workload>,
    /// Why the rest is unknown, when it is: "not in this PID namespace" for a process NVML
    /// names by its host PID from inside a container.
    pub note: Option<String>,
}

/// A value a reader gave that no device can have.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct InvalidValue {
    /// The field's name in `Reading` (`temperature_c`; a process's as
    /// `processes[PID].memory_bytes`).
    pub field: String,
    /// The value as read.
    pub raw: String,
    /// Why it was refused ("outside -60 to 200").
    pub why: String,
}

/// One device at one moment. What its interface does not report is `None`; units are in the
/// field names.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Reading {
    /// Who made it.
    pub vendor: Vendor,
    /// Its number among the vendor's devices (NVML's index, which is PCI order; the DRM card
    /// number; the TPU chip's place in PCI order). The row's name is `vendor:index`.
    pub index: u32,
    /// Marketing or chip name (`NVIDIA H200`, `AMD Radeon RX 7900 XTX`, `TPU v4`...).
    pub name: String,
    /// The kernel driver or interface (`nvidia`, `amdgpu`, `i915`, `xe`, `vfio-pci`...).
    pub driver: Option<String>,
    /// A stable unique id where the interface gives one (NVIDIA's `GPU-...`, MIG's `MIG-...`).
    pub uuid: Option<String>,
    /// PCI address, lower case with its domain (`0000:03:00.0`).
    pub pci_bus_id: Option<String>,
    /// False when the device was seen earlier and is gone now, or its reader failed.
    pub up: bool,
    /// Why the device is down, or why its numbers are missing ("not reporting").
    pub status: Option<String>,
    /// Busy percent of the main engine (graphics/compute; a TPU's TensorCore duty cycle).
    pub utilization_percent: Option<f64>,
    /// Busy percent of the memory controller, where reported.
    pub memory_busy_percent: Option<f64>,
    /// Device memory in use by every process (an APU: its VRAM carve-out plus GTT).
    pub memory_used_bytes: Option<u64>,
    /// Device memory in all (an APU: its VRAM carve-out plus GTT).
    pub memory_total_bytes: Option<u64>,
    /// System memory mapped for the device (AMD's GTT), in use.
    pub gtt_used_bytes: Option<u64>,
    /// System memory the device may map (AMD's GTT), in all.
    pub gtt_total_bytes: Option<u64>,
    /// Temperature of the main sensor (edge / GPU).
    pub temperature_c: Option<f64>,
    /// Power draw.
    pub power_w: Option<f64>,
    /// The power cap.
    pub power_limit_w: Option<f64>,
    /// Energy counter since the driver loaded.
    pub energy_joules: Option<f64>,
    /// Fan speed.
    pub fan_rpm: Option<u32>,
    /// Current core (graphics / SM) clock.
    pub clock_core_mhz: Option<u32>,
    /// Current memory clock.
    pub clock_memory_mhz: Option<u32>,
    /// Why the clocks are held down now (NVML's clocks-event reasons), empty when they are not.
    pub throttle_reasons: Vec<String>,
    /// PCIe throughput, device to host.
    pub pcie_tx_bytes_per_s: Option<u64>,
    /// PCIe throughput, host to device.
    pub pcie_rx_bytes_per_s: Option<u64>,
    /// Corrected memory errors since the driver loaded (NVIDIA: volatile ECC; AMD: every RAS
    /// block's count, `ras/*_err_count`).
    pub ecc_corrected_errors: Option<u64>,
    /// Uncorrected memory errors since the driver loaded (as the corrected ones).
    pub ecc_uncorrected_errors: Option<u64>,
    /// PCIe replays since the driver loaded: link-level retransmissions (NVML's replay
    /// counter); a count that keeps rising means a bad slot, riser or cable.
    pub pcie_replay_errors: Option<u64>,
    /// Memory taken out of service for errors: rows remapped (Ampere and later, NVML's
    /// remapped rows, corrected and uncorrected) or pages retired (earlier GPUs).
    pub retired_memory: Option<u64>,
    /// A remapped row or retired page waits for a GPU reset to take effect.
    pub memory_repair_pending: Option<bool>,
    /// Row remapping failed: the GPU has no spare rows left (a board for replacement).
    pub memory_repair_failed: Option<bool>,
    /// NVIDIA XID errors reported since the monitor started, by XID (`79`: fallen off the
    /// bus), from NVML's events; empty when none came (and left out of JSON).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub xid_errors: std::collections::BTreeMap<u64, u64>,
    /// The last XID error reported since the monitor started.
    pub last_xid: Option<u64>,
    /// For a MIG instance: the UUID of the GPU it is part of.
    pub mig_parent: Option<String>,
    /// For a MIG instance: its number on that GPU (the row's name is `nvidia:0/mig1`).
    pub mig_index: Option<u32>,
    /// Processes using the device.
    pub processes: Vec<ProcessUse>,
    /// The containers the kubelet gave this device (its pod-resources API), whether or not they
    /// run a process on it now; empty off Kubernetes.
    pub owners: Vec<Owner>,
    /// Values the reader gave that no device can have, taken out of the fields above
    /// ([`Reading::check_plausible`]); empty (and left out of JSON) when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub invalid: Vec<InvalidValue>,
}

impl Reading {
    /// A reading with nothing known but who and what the device is.
    pub fn new(vendor: Vendor, index: u32, name: impl Into<String>) -> Reading {
        Reading {
            vendor,
            index,
            name: name.into(),
            driver: None,
            uuid: None,
            pci_bus_id: None,
            up: true,
            status: None,
            utilization_percent: None,
            memory_busy_percent: None,
            memory_used_bytes: None,
            memory_total_bytes: None,
            gtt_used_bytes: None,
            gtt_total_bytes: None,
            temperature_c: None,
            power_w: None,
            power_limit_w: None,
            energy_joules: None,
            fan_rpm: None,
            clock_core_mhz: None,
            clock_memory_mhz: None,
            throttle_reasons: Vec::new(),
            pcie_tx_bytes_per_s: None,
            pcie_rx_bytes_per_s: None,
            ecc_corrected_errors: None,
            ecc_uncorrected_errors: None,
            pcie_replay_errors: None,
            retired_memory: None,
            memory_repair_pending: None,
            memory_repair_failed: None,
            xid_errors: std::collections::BTreeMap::new(),
            last_xid: None,
            mig_parent: None,
            mig_index: None,
            processes: Vec::new(),
            owners: Vec::new(),
            invalid: Vec::new(),
        }
    }

    /// The row's name: `nvidia:0`, `amd:1`, `tpu:3`, `nvidia:0/mig1` for a MIG instance.
    pub fn id(&self) -> String {
        match self.mig_index {
            Some(m) => format!("{}:{}/mig{m}", self.vendor, self.index),
            None => format!("{}:{}", self.vendor, self.index),
        }
    }

    /// What identifies the hardware across samples: the UUID, else the PCI address, else the
    /// row's name.
    pub fn key(&self) -> String {
        self.uuid
            .clone()
            .or_else(|| self.pci_bus_id.clone())
            .unwrap_or_else(|| self.id())
    }

    /// Device memory free, where used and total are known.
    pub fn memory_free_bytes(&self) -> Option<u64> {
        self.memory_total_bytes
            .zip(self.memory_used_bytes)
            .map(|(t, u)| t.saturating_sub(u))
    }
}

/// One vendor's reader: finds its devices and reads them, every time it is asked (so devices
/// that appear or disappear are seen at the next sample). It keeps what it needs between
/// samples (cumulative counters, a library handle).
pub(crate) trait Reader: Send {
    /// Its vendor.
    fn vendor(&self) -> Vendor;
    /// The devices now. `Err` when the source itself failed (its devices are then listed down,
    /// without numbers, with this reason); no device is `Ok(vec![])`.
    fn read(&mut self, roots: &Roots) -> Result<Vec<Reading>, crate::Error>;
    /// Why the last read found nothing, when that has a reason worth showing ("no NVIDIA
    /// driver is installed").
    fn note(&self) -> Option<String> {
        None
    }
}
