//! NVIDIA GPUs through NVML, the driver's management library (`libnvidia-ml.so.1`), as
//! nvidia-smi, dcgm-exporter and nvtop read them. NVML never creates a CUDA context.
//!
//! Per GPU: utilisation (GPU and memory controller), memory used/total, temperature, power and
//! its limit, the energy counter, clocks, fan, why the clocks are held down, PCIe throughput,
//! volatile ECC error counts, and the processes on it (pid, user, command, memory). A GPU in
//! MIG mode also gives one row per MIG instance (`mig_parent` names the GPU).
//!
//! Found where the driver puts it: the loader's path, then the driver's usual folders (no
//! Python environment, no working directory: NVML ships with the driver, never in a wheel).
//! Under a `--path.sysfs` other than `/sys`, only the GPUs that tree holds (`not_of_this_sysfs`).
//! Unit conversions are plain functions, tested here without a GPU.

use super::reading::{Reader, Reading, Roots, Vendor};
use super::Error;

/// NVML's library is not on this machine.
#[cfg_attr(not(feature = "nvml"), allow(dead_code))]
const NO_NVML: Error = Error::NotInstalled {
    library: "libnvidia-ml.so.1",
    driver: "NVIDIA",
};

/// NVML's clocks-event ("throttle") reason bits (nvml.h, `nvmlClocksEventReason*`) and the
/// names accel shows for them.
pub(crate) const THROTTLE_REASONS: &[(u64, &str)] = &[
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
];

/// The names of the reasons set in NVML's bit mask; an unknown bit is named by its value.
pub(crate) fn throttle_names(bits: u64) -> Vec<String> {
    let mut out = Vec::new();
    let mut known = 0;
    for &(bit, name) in THROTTLE_REASONS {
        known |= bit;
        if bits & bit != 0 {
            out.push(name.to_string());
        }
    }
    let mut rest = bits & !known;
    while rest != 0 {
        let bit = rest & rest.wrapping_neg();
        out.push(format!("0x{bit:x}"));
        rest &= !bit;
    }
    out
}

/// NVML reports PCIe throughput in KB/s (`nvmlDeviceGetPcieThroughput`); bytes per second.
pub(crate) fn pcie_bytes_per_s(kb_per_s: u32) -> u64 {
    u64::from(kb_per_s) * 1024
}

/// NVML reports power in milliwatts; watts.
pub(crate) fn watts(milliwatts: u32) -> f64 {
    f64::from(milliwatts) / 1e3
}

/// NVML's energy counter is in millijoules since the driver loaded; joules.
pub(crate) fn joules(millijoules: u64) -> f64 {
    millijoules as f64 / 1e3
}

/// NVML's PCI bus id (`00000000:3B:00.0`, an 8-digit domain, upper case) in the form sysfs
/// and accel use (`0000:3b:00.0`).
pub fn normalize_bus_id(id: &str) -> String {
    let id = id.trim().to_ascii_lowercase();
    match id.split_once(':') {
        Some((domain, rest)) if domain.len() > 4 => {
            let d = u32::from_str_radix(domain, 16).unwrap_or(0);
            format!("{d:04x}:{rest}")
        }
        _ => id,
    }
}

/// Reads NVIDIA GPUs through NVML. Starting NVML is retried at most every 10 s while it
/// fails, so a driver that comes later (or comes back) is seen.
pub(crate) struct NvidiaReader {
    #[cfg(feature = "nvml")]
    nvml: Option<nvml_wrapper::Nvml>,
    /// XID events, counted by a watcher thread started with NVML (`xid::watch`).
    #[cfg(feature = "nvml")]
    xids: std::sync::Arc<super::xid::XidLog>,
    /// Reads so far: the XID watcher starts at the second, so a one-shot command (`accel
    /// pick`, `accel.snapshot()`) starts no thread and no second NVML.
    #[cfg(feature = "nvml")]
    xid_watch: u64,
    /// Why NVML is not running, and when that was found.
    problem: Option<(Error, std::time::Instant, bool)>,
    /// GPUs the last read left out as not of the `--path.sysfs` tree ([`not_of_this_sysfs`]),
    /// for the note.
    elsewhere: usize,
}

impl Default for NvidiaReader {
    fn default() -> Self {
        NvidiaReader::new()
    }
}

impl NvidiaReader {
    /// A reader; NVML starts at the first read.
    pub fn new() -> NvidiaReader {
        NvidiaReader {
            #[cfg(feature = "nvml")]
            nvml: None,
            #[cfg(feature = "nvml")]
            xids: Default::default(),
            #[cfg(feature = "nvml")]
            xid_watch: 0,
            problem: None,
            elsewhere: 0,
        }
    }
}

/// Where `libnvidia-ml.so.1` is: the loader's bare-name lookup first, then the driver folders.
#[cfg(feature = "nvml")]
fn nvml_candidates() -> Vec<std::ffi::OsString> {
    let mut v = vec![std::ffi::OsString::from("libnvidia-ml.so.1")];
    for d in accelkit_core::system::NVIDIA_DRIVER_DIRS {
        let p = std::path::Path::new(d).join("libnvidia-ml.so.1");
        if p.is_file() {
            v.push(p.into_os_string());
        }
    }
    v
}

/// Starts NVML: `Ok(None)` when no NVML library exists (no NVIDIA driver), `Err` when the
/// library is there but fails (a driver not loaded, a version mismatch).
#[cfg(feature = "nvml")]
fn start_nvml() -> Result<Option<nvml_wrapper::Nvml>, Error> {
    use nvml_wrapper::error::NvmlError;
    let mut last = None;
    let candidates = nvml_candidates();
    // nvmlInit cannot be interrupted: where the program enabled the probe helper, a child
    // starts NVML first (once per process), and a hang or crash there keeps it out of here.
    if !candidates.is_empty() {
        accelkit_core::probe_child::canary("nvml").map_err(|r| Error::NotStarted {
            library: "NVML".to_string(),
            detail: r.reason,
        })?;
    }
    for lib in candidates {
        accelkit_core::probe_child::step(format!("nvmlInit ({})", lib.to_string_lossy()));
        match nvml_wrapper::Nvml::builder().lib_path(&lib).init() {
            Ok(n) => return Ok(Some(n)),
            Err(NvmlError::LibloadingError(_)) => continue,
            Err(e) => {
                last = Some(Error::NotStarted {
                    library: format!("NVML ({})", lib.to_string_lossy()),
                    detail: e.to_string(),
                })
            }
        }
    }
    match last {
        Some(e) => Err(e),
        None => Ok(None),
    }
}

/// The NVIDIA PCI vendor id.
const NVIDIA_VENDOR: u16 = 0x10de;

/// Leaves out of `rows` the GPUs that `roots.sysfs` does not hold, and returns how many.
/// NVML answers for the machine accel runs on, whatever the roots; where `--path.sysfs` names
/// another tree than `/sys` (the host's, mounted in a container; a fixture tree in tests),
/// the GPUs shown are those of that tree: an NVML GPU is kept where the tree has an NVIDIA
/// PCI device at its address (the host's own sysfs does). Under `/sys` every GPU is kept, as
/// is a row without a PCI address (a GPU NVML cannot open).
pub(crate) fn not_of_this_sysfs(rows: &mut Vec<Reading>, roots: &Roots) -> usize {
    if roots.sysfs == std::path::Path::new("/sys") {
        return 0;
    }
    let before = rows.len();
    rows.retain(|r| match r.pci_bus_id.as_deref() {
        Some(id) if !id.is_empty() && !id.contains('/') && id != "." && id != ".." => {
            let vendor = roots.sysfs.join("bus/pci/devices").join(id).join("vendor");
            super::sysfs::read_hex_u16(&vendor) == Some(NVIDIA_VENDOR)
        }
        _ => true,
    });
    before - rows.len()
}

/// Why a GPU that NVML reports lost is down.
pub(crate) const FELL_OFF_THE_BUS: &str =
    "fallen off the bus (NVML_ERROR_GPU_IS_LOST; the kernel log has Xid 79): \
     its processes are lost, and it needs a reset (nvidia-smi -r) or a reboot";

/// What NVML says of a GPU's memory repairs. `None` where the GPU does not say (no ECC, a
/// consumer board, a driver without the call).
#[derive(Debug, Default, PartialEq, Eq)]
#[cfg_attr(not(feature = "nvml"), allow(dead_code))]
struct MemoryHealth {
    retired: Option<u64>,
    pending: Option<bool>,
    failed: Option<bool>,
}

/// Row remapping's answer (`nvmlDeviceGetRemappedRows`: corrected rows, uncorrected rows,
/// pending, failure) as [`MemoryHealth`], else the retired pages' (both causes, and whether
/// any waits for a reset).
#[cfg_attr(not(feature = "nvml"), allow(dead_code))]
fn memory_health_from(
    remapped: Option<(u32, u32, u32, u32)>,
    retired: Option<u64>,
    retire_pending: Option<bool>,
) -> MemoryHealth {
    match remapped {
        Some((corr, unc, pending, failed)) => MemoryHealth {
            retired: Some(u64::from(corr) + u64::from(unc)),
            pending: Some(pending != 0),
            failed: Some(failed != 0),
        },
        None => MemoryHealth {
            retired,
            pending: retire_pending,
            failed: None,
        },
    }
}

#[cfg(feature = "nvml")]
fn memory_health(dev: &nvml_wrapper::Device<'_>) -> MemoryHealth {
    use nvml_wrapper::enum_wrappers::device::RetirementCause;
    // nvml-wrapper has no call for remapped rows; the symbol is looked up in the loaded
    // library (drivers before R450 lack it) and called with the device's handle.
    let remapped = match dev.nvml().lib().nvmlDeviceGetRemappedRows.as_ref() {
        Ok(f) => {
            let (mut corr, mut unc, mut pending, mut failed) = (0u32, 0u32, 0u32, 0u32);
            // SAFETY: `f` is NVML's nvmlDeviceGetRemappedRows from the library this `Nvml`
            // loaded and keeps loaded; the handle is a live device of that library; the four
            // pointers are to locals that outlive the call.
            let rc = unsafe { f(dev.handle(), &mut corr, &mut unc, &mut pending, &mut failed) };
            // NVML_SUCCESS is 0 (nvml.h); NOT_SUPPORTED on GPUs before Ampere.
            (rc == 0).then_some((corr, unc, pending, failed))
        }
        Err(_) => None,
    };
    let retired = if remapped.is_none() {
        let count = |c| dev.retired_pages(c).ok().map(|p| p.len() as u64);
        match (
            count(RetirementCause::MultipleSingleBitEccErrors),
            count(RetirementCause::DoubleBitEccError),
        ) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        }
    } else {
        None
    };
    memory_health_from(remapped, retired, dev.are_pages_pending_retired().ok())
}

#[cfg(feature = "nvml")]
fn read_device(dev: &nvml_wrapper::Device<'_>, index: u32, roots: &Roots) -> Reading {
    use nvml_wrapper::enum_wrappers::device::{
        Clock, EccCounter, MemoryError, PcieUtilCounter, TemperatureSensor,
    };
    use nvml_wrapper::enums::device::UsedGpuMemory;
    use nvml_wrapper::error::NvmlError;

    let mut r = Reading::new(Vendor::Nvidia, index, dev.name().unwrap_or_default());
    r.driver = Some("nvidia".to_string());
    r.uuid = dev.uuid().ok();
    r.pci_bus_id = dev.pci_info().ok().map(|p| normalize_bus_id(&p.bus_id));
    if let Ok(u) = dev.utilization_rates() {
        r.utilization_percent = Some(f64::from(u.gpu));
        r.memory_busy_percent = Some(f64::from(u.memory));
    }
    if let Ok(m) = dev.memory_info() {
        r.memory_used_bytes = Some(m.used);
        r.memory_total_bytes = Some(m.total);
    }
    r.temperature_c = dev.temperature(TemperatureSensor::Gpu).ok().map(f64::from);
    r.power_w = dev.power_usage().ok().map(watts);
    r.power_limit_w = dev
        .enforced_power_limit()
        .or_else(|_| dev.power_management_limit())
        .ok()
        .map(watts);
    r.energy_joules = dev.total_energy_consumption().ok().map(joules);
    r.fan_rpm = None; // NVML gives fan speed in percent of maximum, not rpm.
    r.clock_core_mhz = dev.clock_info(Clock::SM).ok();
    r.clock_memory_mhz = dev.clock_info(Clock::Memory).ok();
    r.throttle_reasons = dev
        .current_throttle_reasons()
        .map(|t| throttle_names(t.bits()))
        .unwrap_or_default();
    r.pcie_tx_bytes_per_s = dev
        .pcie_throughput(PcieUtilCounter::Send)
        .ok()
        .map(pcie_bytes_per_s);
    r.pcie_rx_bytes_per_s = dev
        .pcie_throughput(PcieUtilCounter::Receive)
        .ok()
        .map(pcie_bytes_per_s);
    r.ecc_corrected_errors = dev
        .total_ecc_errors(MemoryError::Corrected, EccCounter::Volatile)
        .ok();
    r.ecc_uncorrected_errors = dev
        .total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile)
        .ok();
    r.pcie_replay_errors = dev.pcie_replay_counter().ok().map(u64::from);
    let health = memory_health(dev);
    r.retired_memory = health.retired;
    r.memory_repair_pending = health.pending;
    r.memory_repair_failed = health.failed;
    if matches!(dev.utilization_rates(), Err(NvmlError::GpuLost)) {
        r.up = false;
        r.status = Some(FELL_OFF_THE_BUS.to_string());
    }
    let mut procs: Vec<super::reading::ProcessUse> = Vec::new();
    let compute = dev.running_compute_processes().unwrap_or_default();
    let graphics = dev.running_graphics_processes().unwrap_or_default();
    for p in compute.into_iter().chain(graphics) {
        let bytes = match p.used_gpu_memory {
            UsedGpuMemory::Used(b) => Some(b),
            UsedGpuMemory::Unavailable => None,
        };
        if let Some(q) = procs.iter_mut().find(|q| q.pid == p.pid) {
            // A process both computing and drawing is listed twice with the same memory.
            q.memory_bytes = q.memory_bytes.max(bytes);
            continue;
        }
        let (user, command) = super::host::describe_process(&roots.procfs, p.pid);
        // NVML names processes by the host's PIDs; inside a container most have no entry.
        let visible = roots.procfs.join(p.pid.to_string()).exists();
        procs.push(super::reading::ProcessUse {
            pid: p.pid,
            user,
            command,
            memory_bytes: bytes,
            busy_percent: None,
            workload: super::workload::of_process(&roots.procfs, p.pid),
            note: (!visible).then(|| {
                "not in this PID namespace (the host's PID, from NVML): run the monitor \
                 with the host's PID namespace (`--pid=host`, `hostPID: true`) to see it"
                    .to_string()
            }),
        });
    }
    r.processes = procs;
    r
}

#[cfg(feature = "nvml")]
impl NvidiaReader {
    fn read_nvml(nvml: &nvml_wrapper::Nvml, roots: &Roots) -> Result<Vec<Reading>, Error> {
        let count = nvml.device_count().map_err(|e| Error::Query {
            interface: "NVML",
            detail: format!("cannot count GPUs: {e}"),
        })?;
        let mut out = Vec::new();
        for i in 0..count {
            let dev = match nvml.device_by_index(i) {
                Ok(d) => d,
                Err(e) => {
                    // A GPU that fell off the bus answers GpuLost here: a row, marked down.
                    let mut r = Reading::new(Vendor::Nvidia, i, "NVIDIA GPU");
                    r.up = false;
                    r.status = Some(match e {
                        nvml_wrapper::error::NvmlError::GpuLost => FELL_OFF_THE_BUS.to_string(),
                        e => format!("NVML cannot open GPU {i}: {e}"),
                    });
                    out.push(r);
                    continue;
                }
            };
            let parent = read_device(&dev, i, roots);
            let parent_uuid = parent.uuid.clone();
            out.push(parent);
            let mig_on = dev.mig_mode().is_ok_and(|m| m.current == 1);
            if !mig_on {
                continue;
            }
            let max = dev.mig_device_count().unwrap_or(0);
            for m in 0..max {
                if let Ok(mig) = dev.mig_device_by_index(m) {
                    let mut r = read_device(&mig, i, roots);
                    r.mig_parent = parent_uuid.clone();
                    r.mig_index = Some(m);
                    out.push(r);
                }
            }
        }
        Ok(out)
    }
}

impl Reader for NvidiaReader {
    fn vendor(&self) -> Vendor {
        Vendor::Nvidia
    }

    fn read(&mut self, roots: &Roots) -> Result<Vec<Reading>, crate::Error> {
        #[cfg(feature = "nvml")]
        {
            if self.nvml.is_none() {
                let retry = self
                    .problem
                    .as_ref()
                    .is_none_or(|(_, at, _)| at.elapsed().as_secs() >= 10);
                if retry {
                    match start_nvml() {
                        Ok(Some(n)) => {
                            self.nvml = Some(n);
                            self.problem = None;
                        }
                        Ok(None) => {
                            self.problem = Some((NO_NVML, std::time::Instant::now(), false))
                        }
                        Err(e) => self.problem = Some((e, std::time::Instant::now(), true)),
                    }
                }
            }
            match (&self.nvml, &self.problem) {
                (Some(n), _) => {
                    self.xid_watch += 1;
                    if self.xid_watch == 2 {
                        super::xid::watch(&self.xids, || start_nvml().ok().flatten());
                    }
                    let mut r = Self::read_nvml(n, roots);
                    if let Ok(rows) = &mut r {
                        self.elsewhere = not_of_this_sysfs(rows, roots);
                        for row in rows.iter_mut().filter(|row| row.mig_index.is_none()) {
                            self.xids.apply(row);
                        }
                    }
                    if let Err(e) = &r {
                        // A driver unloaded or reloaded under us: start NVML again (at most
                        // every 10 s) instead of failing until the exporter restarts.
                        self.nvml = None;
                        self.problem = Some((e.clone(), std::time::Instant::now(), true));
                    }
                    r
                }
                (None, Some((e, _, true))) => Err(e.clone()),
                _ => Ok(Vec::new()),
            }
        }
        #[cfg(not(feature = "nvml"))]
        {
            let _ = roots;
            self.problem = Some((
                Error::NotCompiled { feature: "nvml" },
                std::time::Instant::now(),
                false,
            ));
            Ok(Vec::new())
        }
    }

    fn note(&self) -> Option<String> {
        self.problem
            .as_ref()
            .map(|(e, _, _)| e.to_string())
            .or_else(|| {
                (self.elsewhere > 0).then(|| {
                    format!(
                        "NVML lists {} GPU(s) that --path.sysfs has no NVIDIA PCI device for: \
                     another machine's, left out",
                        self.elsewhere
                    )
                })
            })
    }
}

/// What the CUDA backend asks NVML about a GPU it describes, without opening a context:
/// NVML's index, memory (the free memory before any context of ours exists), and what the
/// GPU is capable of. Fields the GPU does not report are None.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct GpuLimits {
    /// nvidia-smi's index (PCI order; CUDA's ordinal may differ).
    pub nvml_index: Option<u32>,
    /// Free device memory now.
    pub memory_free_bytes: Option<u64>,
    /// Device memory in all.
    pub memory_total_bytes: Option<u64>,
    /// The SM clock's maximum.
    pub max_clock_sm_mhz: Option<u32>,
    /// The memory clock's maximum.
    pub max_clock_memory_mhz: Option<u32>,
    /// The PCIe link the GPU is capable of (generation, lanes); the link may train lower
    /// at idle to save power.
    pub pcie_max_link: Option<(u32, u32)>,
}

/// The probe helper's `nvml` task: start NVML (and stop, by exiting).
#[doc(hidden)]
pub fn start_for_helper() {
    #[cfg(feature = "nvml")]
    let _ = start_nvml();
}

/// NVML for one-off questions (the CUDA backend's probe, [`reading`], [`limits`]), started
/// once per process. A [`NvidiaReader`] keeps its own, restarted while it fails.
#[cfg(feature = "nvml")]
fn shared() -> Result<&'static nvml_wrapper::Nvml, Error> {
    static N: std::sync::OnceLock<Result<nvml_wrapper::Nvml, Error>> = std::sync::OnceLock::new();
    N.get_or_init(|| start_nvml()?.ok_or(NO_NVML))
        .as_ref()
        .map_err(Clone::clone)
}

/// The driver version NVML reports (`580.65.06`).
#[cfg(feature = "nvml")]
pub fn driver_version() -> Option<String> {
    shared().ok()?.sys_driver_version().ok()
}

/// NVML's start, for `accel doctor`: the driver version it reports, `Ok(None)` where there is
/// no NVML library (no NVIDIA driver), or its error (`RM detects a driver/library version
/// mismatch`).
pub fn nvml_state() -> Result<Option<String>, Error> {
    #[cfg(feature = "nvml")]
    {
        match shared() {
            Ok(n) => Ok(n.sys_driver_version().ok()),
            Err(Error::NotInstalled { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }
    #[cfg(not(feature = "nvml"))]
    Ok(None)
}

/// Whether NVML reports any GPU with MIG mode on (for `accel doctor`); false without NVML.
pub fn mig_enabled() -> bool {
    #[cfg(feature = "nvml")]
    {
        let Ok(n) = shared() else {
            return false;
        };
        let count = n.device_count().unwrap_or(0).min(64);
        (0..count).any(|i| {
            n.device_by_index(i)
                .and_then(|d| d.mig_mode())
                .is_ok_and(|m| m.current == 1)
        })
    }
    #[cfg(not(feature = "nvml"))]
    false
}

/// The GPU with this UUID (`GPU-...`) or, failing that, this PCI bus id.
#[cfg(feature = "nvml")]
fn device_of(
    n: &'static nvml_wrapper::Nvml,
    uuid: Option<&str>,
    pci_bus_id: Option<&str>,
) -> Result<nvml_wrapper::Device<'static>, Error> {
    let by_uuid = uuid.map(|u| n.device_by_uuid(u));
    match (by_uuid, pci_bus_id) {
        (Some(Ok(d)), _) => Ok(d),
        (_, Some(p)) => n.device_by_pci_bus_id(p),
        (Some(Err(e)), None) => Err(e),
        (None, None) => return Err(Error::NoIdentity),
    }
    .map_err(|e| Error::UnknownDevice {
        detail: e.to_string(),
    })
}

/// The reading of the GPU with this UUID (`GPU-...`) or, failing that, this PCI bus id: the
/// same [`Reading`] `accel monitor` shows for it (utilisation, memory, temperature, power,
/// clocks, health, processes), for one-off questions (`accelkit::cuda::utilization`).
#[cfg(feature = "nvml")]
pub fn reading(uuid: Option<&str>, pci_bus_id: Option<&str>) -> Result<Reading, Error> {
    let dev = device_of(shared()?, uuid, pci_bus_id)?;
    let index = dev.index().unwrap_or(0);
    let mut r = read_device(&dev, index, &Roots::default());
    // As every sample's readings: a value no device can have is marked invalid, not shown.
    r.check_plausible();
    Ok(r)
}

/// [`GpuLimits`] of the GPU with this UUID or, failing that, this PCI bus id.
#[cfg(feature = "nvml")]
pub fn limits(uuid: Option<&str>, pci_bus_id: Option<&str>) -> Result<GpuLimits, Error> {
    use nvml_wrapper::enum_wrappers::device::Clock;
    let dev = device_of(shared()?, uuid, pci_bus_id)?;
    let mem = dev.memory_info().ok();
    Ok(GpuLimits {
        nvml_index: dev.index().ok(),
        memory_free_bytes: mem.as_ref().map(|m| m.free),
        memory_total_bytes: mem.as_ref().map(|m| m.total),
        max_clock_sm_mhz: dev.max_clock_info(Clock::SM).ok(),
        max_clock_memory_mhz: dev.max_clock_info(Clock::Memory).ok(),
        pcie_max_link: dev
            .max_pcie_link_gen()
            .ok()
            .zip(dev.max_pcie_link_width().ok()),
    })
}

#[cfg(test)]
mod tests {
    use super::{memory_health_from, MemoryHealth};

    #[test]
    fn row_remapping_wins_over_retired_pages_and_flags_keep_their_meaning() {
        // Ampere and later: 3 corrected + 1 uncorrected rows remapped, one pending a reset.
        assert_eq!(
            memory_health_from(Some((3, 1, 1, 0)), Some(9), Some(false)),
            MemoryHealth {
                retired: Some(4),
                pending: Some(true),
                failed: Some(false)
            }
        );
        assert_eq!(
            memory_health_from(Some((0, 0, 0, 1)), None, None).failed,
            Some(true)
        );
        // Earlier GPUs: the retired pages, and no remapping to fail.
        assert_eq!(
            memory_health_from(None, Some(2), Some(true)),
            MemoryHealth {
                retired: Some(2),
                pending: Some(true),
                failed: None
            }
        );
        // A consumer board says nothing.
        assert_eq!(
            memory_health_from(None, None, None),
            MemoryHealth::default()
        );
    }
    use super::*;

    #[test]
    fn conversions() {
        // sw_power_cap | hw_thermal_slowdown, and one bit nvml.h does not define yet.
        assert_eq!(
            throttle_names(0x4 | 0x40 | 0x1000),
            ["sw_power_cap", "hw_thermal_slowdown", "0x1000"]
        );
        assert!(throttle_names(0).is_empty());
        assert_eq!(pcie_bytes_per_s(1_000), 1_024_000);
        assert_eq!(watts(700_000), 700.0);
        assert_eq!(joules(1_234_567), 1_234.567);
        assert_eq!(normalize_bus_id("00000000:3B:00.0"), "0000:3b:00.0");
        assert_eq!(normalize_bus_id("0000:3b:00.0"), "0000:3b:00.0");
    }

    #[test]
    fn under_another_sysfs_only_the_gpus_it_holds_are_kept() {
        let fixtures =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/telemetry");
        let gpu = |i: u32, pci: Option<&str>| {
            let mut r = Reading::new(Vendor::Nvidia, i, "NVIDIA H100 80GB HBM3");
            r.pci_bus_id = pci.map(str::to_string);
            r
        };
        let rows = || {
            vec![
                gpu(0, Some("0000:03:00.0")),
                gpu(1, Some("0000:3b:00.0")),
                gpu(2, None),
            ]
        };
        let at = |sysfs: std::path::PathBuf| Roots {
            sysfs,
            ..Roots::default()
        };
        // The machine's own /sys: NVML's GPUs, whatever /sys holds.
        let mut r = rows();
        assert_eq!(not_of_this_sysfs(&mut r, &Roots::default()), 0);
        assert_eq!(r.len(), 3);
        // A tree whose 0000:03:00.0 is an AMD GPU, and that has no 0000:3b:00.0: neither is
        // this tree's (the GPU NVML cannot open, without an address, stays).
        let mut r = rows();
        assert_eq!(
            not_of_this_sysfs(&mut r, &at(fixtures.join("mixed/sys"))),
            2
        );
        assert_eq!(r.iter().map(|r| r.index).collect::<Vec<_>>(), [2]);
        // The host's sysfs mounted elsewhere: its NVIDIA device at that address is kept.
        let host = std::env::temp_dir().join(format!("accel-nvml-sysfs-{}", std::process::id()));
        let dev = host.join("bus/pci/devices/0000:3b:00.0");
        std::fs::create_dir_all(&dev).unwrap();
        std::fs::write(dev.join("vendor"), "0x10de\n").unwrap();
        let mut r = rows();
        assert_eq!(not_of_this_sysfs(&mut r, &at(host.clone())), 1);
        assert_eq!(r.iter().map(|r| r.index).collect::<Vec<_>>(), [1, 2]);
        let _ = std::fs::remove_dir_all(&host);
    }
}
