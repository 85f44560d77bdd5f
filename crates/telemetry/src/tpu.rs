//! Google TPUs, watched without libtpu: a TPU is one process's device (libtpu takes the chips
//! for itself), so a monitor must never open it. Two sources, as Google's `tpu-info` does
//! (github.com/google/cloud-accelerator-diagnostics, `tpu_info/tpu_info/device.py` and
//! `tpu_info/tpu_info/metrics.py`):
//!
//! * **Which chips**: PCI devices of vendor `0x1ae0` (Google) under
//!   `<sysfs>/bus/pci/devices/`, their generation from the PCI device id (tpu-info's table
//!   below), grouped by PCI slot (`domain:bus:device`, the functions of one slot being the cores
//!   of one chip, as tpu-info's `get_actual_chips`). Google's other PCI functions (gVNIC,
//!   NVMe) are left out: an unknown device id counts only when its PCI class is `0x12`
//!   (processing accelerator). The device node is `/dev/accelN` (the kernel's accel class:
//!   `<pci dir>/accel/accelN` or `<sysfs>/class/accel/accelN`) or, for a chip bound to
//!   `vfio-pci` (v5e, v5p, v6e, 7x), `/dev/vfio/G` with G its IOMMU group. The processes that
//!   hold that node open (`<procfs>/PID/fd/*`) are the chip's processes.
//! * **How busy**: the TPU runtime's gRPC metrics service (`roots.tpu_metrics`,
//!   `localhost:8431`), served by libtpu inside the job's process, so it answers only while a
//!   framework runs: service `tpu.monitoring.runtime.RuntimeMetricService`, method
//!   `GetRuntimeMetric`, metrics `tpu.runtime.hbm.memory.usage.bytes` and
//!   `tpu.runtime.hbm.memory.total.bytes` (one value per device, attribute `device-id`) and
//!   `tpu.runtime.tensorcore.dutycycle.percent`. Messages from `tpu_metric_service.proto`
//!   (tpu-info's `tpu_info/proto/`), encoded and decoded by hand below. No answer is no error:
//!   the chips are listed with "idle / not reporting" and no numbers.
//!
//! tpu-info sorts each metric's values by device id and, when memory comes per core and duty
//! cycle per chip, repeats each chip's duty cycle for its cores (`devices_per_chip`: 2 for v2,
//! v3 and 7x, else 1); newer libtpu versions report duty cycle per core too. Here, values
//! sorted by device id are split evenly over the chips in PCI order: memory is summed over a
//! chip's devices, duty cycle averaged. A count that does not divide evenly leaves the numbers
//! out, with the reason in the status.
//!
//! The `/dev` nodes are looked for under `<sysfs>/../dev` (`/dev` for `/sys`), so a fixture
//! tree can carry its own.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::grpc::{self, CallError};
use super::proto::{fields, put_varint, Field};
use super::reading::{ProcessUse, Reader, Reading, Roots, Vendor};
use super::sysfs::{link_name, read_text};

/// Google's PCI vendor id.
pub const GOOGLE_PCI_VENDOR: &str = "0x1ae0";

/// The metrics service's method, as an HTTP/2 `:path`.
pub const METRIC_METHOD: &str = "/tpu.monitoring.runtime.RuntimeMetricService/GetRuntimeMetric";
/// HBM in use, bytes, per device.
pub const METRIC_HBM_USED: &str = "tpu.runtime.hbm.memory.usage.bytes";
/// HBM in all, bytes, per device.
pub const METRIC_HBM_TOTAL: &str = "tpu.runtime.hbm.memory.total.bytes";
/// TensorCore duty cycle, percent, per chip (per core in newer libtpu).
pub const METRIC_DUTY_CYCLE: &str = "tpu.runtime.tensorcore.dutycycle.percent";

/// How long one sample may wait for the metrics service, all calls together.
pub const METRICS_DEADLINE: Duration = Duration::from_secs(1);

/// A TPU generation, from its PCI ids (tpu-info's `TpuChip.from_pci_device_id`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Generation {
    /// `v2`, `v3`, `v4`, `v5e`, `v5p`, `v6e`, `7x`.
    pub name: &'static str,
    /// HBM per chip, GiB (tpu-info's `hbm_gib`; a specification, not a measurement).
    pub hbm_gib: u32,
    /// Devices (TensorCores seen by the runtime) per chip (tpu-info's `devices_per_chip`).
    pub devices_per_chip: u32,
}

impl Generation {
    /// The chip's display name: `TPU v4`, `TPU7x` (Google writes 7x without the `v`).
    pub fn display_name(&self) -> String {
        if self.name == "7x" {
            "TPU7x".to_string()
        } else {
            format!("TPU {}", self.name)
        }
    }
}

/// The generation of a TPU from its PCI `device` and `subsystem_device` ids (`0x005e`...),
/// per tpu-info's table (google/cloud-accelerator-diagnostics, `tpu_info/tpu_info/device.py`):
/// v2 and v3 share device `0x0027` and differ by subsystem (`0x004e`, `0x004f`); v4 `0x005e`,
/// v5e `0x0063`, v5p `0x0062`, v6e `0x006f`, 7x `0x0076`.
pub fn generation(device: &str, subsystem_device: &str) -> Option<Generation> {
    let g = |name, hbm_gib, devices_per_chip| {
        Some(Generation {
            name,
            hbm_gib,
            devices_per_chip,
        })
    };
    match (
        device.trim().to_ascii_lowercase().as_str(),
        subsystem_device.trim().to_ascii_lowercase().as_str(),
    ) {
        ("0x0027", "0x004e") => g("v2", 8, 2),
        ("0x0027", "0x004f") => g("v3", 16, 2),
        ("0x005e", _) => g("v4", 32, 1),
        ("0x0063", _) => g("v5e", 16, 1),
        ("0x0062", _) => g("v5p", 95, 1),
        ("0x006f", _) => g("v6e", 32, 1),
        ("0x0076", _) => g("7x", 192, 2),
        _ => None,
    }
}

/// One TPU chip found in sysfs.
#[derive(Debug, Clone, PartialEq)]
pub struct Chip {
    /// PCI address of its first function (`0000:00:04.0`).
    pub pci_bus_id: String,
    /// The generation, when the device id is known.
    pub generation: Option<Generation>,
    /// The PCI device id as sysfs writes it (`0x005e`).
    pub device_id: String,
    /// The kernel driver bound to it (the `driver` link's name).
    pub driver: Option<String>,
    /// Its device node as processes see it (`/dev/accel0`, `/dev/vfio/3`), when found.
    pub dev_node: Option<String>,
    /// Whether that node exists (under the `/dev` beside the sysfs root).
    pub dev_node_present: bool,
}

impl Chip {
    /// `TPU v4`, or `TPU (device 0x....)` for an unknown generation.
    pub fn name(&self) -> String {
        match &self.generation {
            Some(g) => g.display_name(),
            None => format!("TPU (device {})", self.device_id),
        }
    }
}

/// A sysfs attribute's text (bounded, through the one sysfs reader), empty when unreadable.
fn attr(p: &Path) -> String {
    read_text(p).unwrap_or_default()
}

/// The `/dev` that goes with a sysfs root: `<sysfs>/../dev`.
pub fn dev_root(sysfs: &Path) -> PathBuf {
    match sysfs.parent() {
        Some(p) => p.join("dev"),
        None => PathBuf::from("/dev"),
    }
}

/// The TPU chips under `sysfs`, in PCI-address order.
pub fn find_chips(sysfs: &Path) -> Vec<Chip> {
    let devices = sysfs.join("bus/pci/devices");
    let Ok(entries) = fs::read_dir(&devices) else {
        return Vec::new();
    };
    // PCI functions by slot (domain:bus:device), each slot one chip.
    let mut slots: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in entries.flatten() {
        let addr = e.file_name().to_string_lossy().into_owned();
        let dir = devices.join(&addr);
        if attr(&dir.join("vendor")).to_ascii_lowercase() != GOOGLE_PCI_VENDOR {
            continue;
        }
        let device = attr(&dir.join("device"));
        let subsystem = attr(&dir.join("subsystem_device"));
        let class = attr(&dir.join("class"));
        let accelerator_class = class.to_ascii_lowercase().starts_with("0x12");
        if generation(&device, &subsystem).is_none() && !accelerator_class {
            continue; // gVNIC, NVMe, or something else of Google's
        }
        let slot = match addr.rsplit_once('.') {
            Some((s, _)) => s.to_string(),
            None => addr.clone(),
        };
        slots.entry(slot).or_default().push(addr);
    }
    let accel_class = accel_class_links(sysfs);
    let dev = dev_root(sysfs);
    let mut chips = Vec::new();
    for (_, mut functions) in slots {
        functions.sort();
        let Some(first) = functions.first().cloned() else {
            continue;
        };
        let dir = devices.join(&first);
        let device_id = attr(&dir.join("device"));
        let subsystem = attr(&dir.join("subsystem_device"));
        let driver = link_name(&dir.join("driver"));
        let mut dev_node = None;
        // The kernel's accel class: <pci dir>/accel/accelN.
        if let Ok(rd) = fs::read_dir(dir.join("accel")) {
            let mut names: Vec<String> = rd
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("accel"))
                .collect();
            names.sort();
            dev_node = names.first().map(|n| format!("/dev/{n}"));
        }
        if dev_node.is_none() {
            dev_node = accel_class
                .iter()
                .find(|(_, pci)| pci == &first)
                .map(|(n, _)| format!("/dev/{n}"));
        }
        if dev_node.is_none() && driver.as_deref() == Some("vfio-pci") {
            dev_node = link_name(&dir.join("iommu_group")).map(|g| format!("/dev/vfio/{g}"));
        }
        let dev_node_present = dev_node
            .as_deref()
            .and_then(|n| n.strip_prefix("/dev/"))
            .is_some_and(|rel| dev.join(rel).exists());
        chips.push(Chip {
            pci_bus_id: first.to_ascii_lowercase(),
            generation: generation(&device_id, &subsystem),
            device_id,
            driver,
            dev_node,
            dev_node_present,
        });
    }
    chips
}

/// `<sysfs>/class/accel/accelN` → the PCI address its `device` link points at.
fn accel_class_links(sysfs: &Path) -> Vec<(String, String)> {
    let Ok(rd) = fs::read_dir(sysfs.join("class/accel")) else {
        return Vec::new();
    };
    let mut out: Vec<(String, String)> = rd
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let pci = link_name(&e.path().join("device"))?;
            Some((name, pci))
        })
        .collect();
    out.sort();
    out
}

/// The processes holding `node` (`/dev/accel0`) open, from `<procfs>/PID/fd/*` links.
fn holders(procfs: &Path, nodes: &[String]) -> BTreeMap<String, Vec<u32>> {
    let mut out: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    if nodes.is_empty() {
        return out;
    }
    let Ok(rd) = fs::read_dir(procfs) else {
        return out;
    };
    for e in rd.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(fds) = fs::read_dir(e.path().join("fd")) else {
            continue; // gone, or not ours to read
        };
        for fd in fds.flatten() {
            let Ok(target) = fs::read_link(fd.path()) else {
                continue;
            };
            let target = target.to_string_lossy();
            if let Some(n) = nodes.iter().find(|n| **n == target) {
                let pids = out.entry(n.clone()).or_default();
                if !pids.contains(&pid) {
                    pids.push(pid);
                }
            }
        }
    }
    out
}

fn process_use(procfs: &Path, pid: u32) -> ProcessUse {
    let (user, command) = super::host::describe_process(procfs, pid);
    ProcessUse {
        pid,
        user,
        command,
        memory_bytes: None,
        busy_percent: None,
        workload: super::workload::of_process(procfs, pid),
        note: None,
    }
}

// ---- protobuf, by hand -------------------------------------------------------------------

/// One value of a metric: the device it is about and its number.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetricPoint {
    /// The attribute's key (`device-id`).
    pub key: Option<String>,
    /// The attribute's integer value (or a string value holding an integer).
    pub device_id: Option<i64>,
    /// A gauge's or counter's integer value.
    pub int_value: Option<i64>,
    /// A gauge's or counter's floating-point value.
    pub double_value: Option<f64>,
}

impl MetricPoint {
    /// The value as a float, whichever form it came in.
    pub fn value(&self) -> Option<f64> {
        self.double_value.or(self.int_value.map(|v| v as f64))
    }
}

/// A `MetricRequest` (`metric_name = 1`), serialized. Not API (for the tests against a real
/// gRPC server).
#[doc(hidden)]
pub fn encode_metric_request(metric_name: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(metric_name.len() + 4);
    out.push(0x0a); // field 1, length-delimited
    put_varint(&mut out, metric_name.len() as u64);
    out.extend_from_slice(metric_name.as_bytes());
    out
}

/// Decodes a `MetricResponse` { TPUMetric metric = 1 { string name = 1; string description = 2;
/// repeated Metric metrics = 3 } } into its points. Unknown fields are skipped; malformed bytes
/// are an error. Not API (for the tests against a real gRPC server).
#[doc(hidden)]
pub fn decode_metric_response(buf: &[u8]) -> Result<Vec<MetricPoint>, String> {
    let mut points = Vec::new();
    let mut f = fields(buf);
    while let Some(r) = f.next_field() {
        if let (1, Field::Bytes(metric)) = r? {
            let mut g = fields(metric);
            while let Some(r) = g.next_field() {
                if let (3, Field::Bytes(m)) = r? {
                    points.push(decode_metric(m)?);
                }
            }
        }
    }
    Ok(points)
}

/// `Metric { Attribute attribute = 1; Timestamp timestamp = 2; oneof measure { Gauge gauge = 3;
/// Counter counter = 4; Distribution distribution = 5; Summary summary = 6 } }`.
fn decode_metric(buf: &[u8]) -> Result<MetricPoint, String> {
    let mut p = MetricPoint::default();
    let mut f = fields(buf);
    while let Some(r) = f.next_field() {
        match r? {
            (1, Field::Bytes(attr)) => decode_attribute(attr, &mut p)?,
            // Gauge { double as_double = 1; int64 as_int = 2; string as_string = 3;
            // bool as_bool = 4 } and Counter { double as_double = 1; uint64 as_int = 2; ... }.
            (3 | 4, Field::Bytes(v)) => {
                let mut g = fields(v);
                while let Some(r) = g.next_field() {
                    match r? {
                        (1, Field::Fixed64(b)) => p.double_value = Some(f64::from_le_bytes(b)),
                        (2, Field::Varint(v)) => p.int_value = Some(v as i64),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    Ok(p)
}

/// `Attribute { string key = 1; AttrValue value = 2 }`, `AttrValue { oneof attr { string
/// string_attr = 1; bool bool_attr = 2; int64 int_attr = 3; double double_attr = 4; ... } }`.
fn decode_attribute(buf: &[u8], p: &mut MetricPoint) -> Result<(), String> {
    let mut f = fields(buf);
    while let Some(r) = f.next_field() {
        match r? {
            (1, Field::Bytes(k)) => p.key = Some(String::from_utf8_lossy(k).into_owned()),
            (2, Field::Bytes(v)) => {
                let mut g = fields(v);
                while let Some(r) = g.next_field() {
                    match r? {
                        (3, Field::Varint(v)) => p.device_id = Some(v as i64),
                        (1, Field::Bytes(s)) => {
                            if let Ok(n) = String::from_utf8_lossy(s).trim().parse::<i64>() {
                                p.device_id = Some(n);
                            }
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

// ---- the reader ----------------------------------------------------------------------------

/// The three metrics, each per chip (in PCI order), or why not.
#[derive(Debug, Default)]
struct PerChip {
    used: Option<Vec<u64>>,
    total: Option<Vec<u64>>,
    duty: Option<Vec<f64>>,
    notes: Vec<String>,
}

/// Splits `points` (sorted by device id) evenly over `chips` chips and folds each share.
fn split<T>(
    what: &str,
    mut points: Vec<MetricPoint>,
    chips: usize,
    fold: impl Fn(&[f64]) -> T,
    notes: &mut Vec<String>,
) -> Option<Vec<T>> {
    if chips == 0 {
        return None;
    }
    if points.is_empty() {
        notes.push(format!("{what}: no values"));
        return None;
    }
    points.sort_by_key(|p| p.device_id.unwrap_or(i64::MAX));
    if !points.len().is_multiple_of(chips) {
        notes.push(format!("{what}: {} values for {chips} chips", points.len()));
        return None;
    }
    let per = points.len() / chips;
    let mut out = Vec::with_capacity(chips);
    for share in points.chunks(per) {
        let values: Option<Vec<f64>> = share.iter().map(MetricPoint::value).collect();
        match values {
            Some(v) => out.push(fold(&v)),
            None => {
                notes.push(format!("{what}: a value without a number"));
                return None;
            }
        }
    }
    Some(out)
}

fn bytes_sum(v: &[f64]) -> u64 {
    v.iter()
        .map(|x| x.max(0.0) as u64)
        .fold(0u64, u64::saturating_add)
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// Asks the metrics service at `addr` for the three metrics, split over `chips` chips.
fn fetch(addr: &str, chips: usize) -> Result<PerChip, CallError> {
    let names = [METRIC_HBM_USED, METRIC_HBM_TOTAL, METRIC_DUTY_CYCLE];
    let requests: Vec<Vec<u8>> = names.iter().map(|n| encode_metric_request(n)).collect();
    let answers = grpc::unary_calls(
        grpc::Endpoint::Tcp(addr),
        METRIC_METHOD,
        &requests,
        Instant::now() + METRICS_DEADLINE,
    )?;
    let mut out = PerChip::default();
    let mut decoded: Vec<Option<Vec<MetricPoint>>> = Vec::new();
    for (name, answer) in names.iter().zip(answers) {
        match answer.and_then(|m| decode_metric_response(&m)) {
            Ok(points) => decoded.push(Some(points)),
            Err(e) => {
                out.notes.push(format!("{name}: {e}"));
                decoded.push(None);
            }
        }
    }
    if decoded.iter().all(Option::is_none) {
        return Err(CallError::Protocol(out.notes.join("; ")));
    }
    // A metric whose call failed is already in the notes; the others are split over the chips.
    let mut it = decoded.into_iter();
    let mut next = || it.next().flatten();
    let (used, total, duty) = (next(), next(), next());
    let notes = &mut out.notes;
    out.used = used.and_then(|p| split("HBM used", p, chips, bytes_sum, notes));
    out.total = total.and_then(|p| split("HBM total", p, chips, bytes_sum, notes));
    out.duty = duty.and_then(|p| split("duty cycle", p, chips, mean, notes));
    Ok(out)
}

/// Reads Google TPUs: chips from sysfs, numbers from the TPU runtime's metrics service.
#[derive(Default)]
pub struct TpuReader {}

impl TpuReader {
    /// A reader with nothing remembered yet.
    pub fn new() -> TpuReader {
        TpuReader::default()
    }
}

impl Reader for TpuReader {
    fn vendor(&self) -> Vendor {
        Vendor::Tpu
    }

    fn read(&mut self, roots: &Roots) -> Result<Vec<Reading>, crate::Error> {
        let chips = find_chips(&roots.sysfs);
        if chips.is_empty() {
            return Ok(Vec::new());
        }
        let nodes: Vec<String> = chips.iter().filter_map(|c| c.dev_node.clone()).collect();
        let held = holders(&roots.procfs, &nodes);
        let addr = roots.tpu_metrics.as_str();
        let (metrics, status) = match fetch(addr, chips.len()) {
            Ok(m) => {
                let status = (!m.notes.is_empty()).then(|| m.notes.join("; "));
                (Some(m), status)
            }
            Err(CallError::NoAnswer(why)) => (None, {
                let _ = why; // refused or timed out: the normal state when no job runs
                Some(format!(
                    "idle / not reporting (no TPU runtime metrics on {addr})"
                ))
            }),
            Err(CallError::Protocol(why)) => (
                None,
                Some(format!("TPU runtime metrics on {addr} unreadable: {why}")),
            ),
        };
        let mut out = Vec::with_capacity(chips.len());
        for (i, chip) in chips.iter().enumerate() {
            let mut r = Reading::new(Vendor::Tpu, i as u32, chip.name());
            r.pci_bus_id = Some(chip.pci_bus_id.clone());
            r.driver = chip.driver.clone();
            r.status = status.clone();
            if let Some(m) = &metrics {
                r.memory_used_bytes = m.used.as_ref().and_then(|v| v.get(i).copied());
                r.memory_total_bytes = m.total.as_ref().and_then(|v| v.get(i).copied());
                r.utilization_percent = m.duty.as_ref().and_then(|v| v.get(i).copied());
            }
            if let Some(node) = &chip.dev_node {
                if let Some(pids) = held.get(node) {
                    r.processes = pids
                        .iter()
                        .map(|&p| process_use(&roots.procfs, p))
                        .collect();
                }
            }
            out.push(r);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_sums_memory_and_averages_duty_cycle() {
        let pts = |v: &[(i64, f64)]| {
            v.iter()
                .map(|&(d, x)| MetricPoint {
                    device_id: Some(d),
                    double_value: Some(x),
                    ..Default::default()
                })
                .collect::<Vec<_>>()
        };
        let mut notes = Vec::new();
        let got = split(
            "m",
            pts(&[(3, 4.0), (0, 1.0), (2, 3.0), (1, 2.0)]),
            2,
            bytes_sum,
            &mut notes,
        );
        assert_eq!(got, Some(vec![3, 7]));
        let got = split("d", pts(&[(1, 50.0), (0, 10.0)]), 1, mean, &mut notes);
        assert_eq!(got, Some(vec![30.0]));
        assert_eq!(
            split(
                "x",
                pts(&[(0, 1.0), (1, 1.0), (2, 1.0)]),
                2,
                mean,
                &mut notes
            ),
            None
        );
        assert_eq!(notes.len(), 1);
    }
}
