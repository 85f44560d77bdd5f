//! Telemetry: what every accelerator on the machine is doing, read from the vendors'
//! *monitoring* interfaces (NVML, sysfs, DRM fdinfo, IOKit, the TPU runtime's metrics
//! service), never from the compute stack. Nothing here creates a CUDA context, a PJRT client
//! or a Vulkan device, so watching a device never disturbs the job that uses it (as nvidia-smi,
//! dcgm-exporter, nvtop and all-smi work).
//!
//! One reader per vendor, one file each (`nvidia.rs`, `amd.rs`, `intel.rs`, `apple.rs`,
//! `tpu.rs`), and the host (`host.rs`). A [`Telemetry`] runs each reader on its own thread with
//! a deadline, so one slow or failing source never holds up the others; it finds the devices
//! again on every sample and keeps a device that disappeared as a row marked down, with the
//! reason. This crate depends only on accelkit-core: accel's compute backends may call it, never
//! the other way round.

mod amd;
mod apple;
mod error;
mod fdinfo;
mod grpc;
mod host;
mod intel;
mod kubelet;
// Its unit helpers and tables serve the NVML reader, which the `nvml` feature builds.
#[cfg_attr(not(feature = "nvml"), allow(dead_code))]
pub mod nvidia;
mod pick;
mod plausible;
mod proto;
mod rapl;
mod reading;
mod sysfs;
mod tpu;
mod vendor;
mod workload;
// XID events come through NVML only.
#[cfg_attr(not(feature = "nvml"), allow(dead_code))]
mod xid;

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;

pub use error::Error;
pub use host::HostReading;
pub use kubelet::DEFAULT_SOCKET as DEFAULT_POD_RESOURCES_SOCKET;
pub use pick::{pick, visible_devices, Criteria};
pub(crate) use reading::Reader;
pub use reading::{InvalidValue, ProcessUse, Reading, Roots, Vendor};
pub use sysfs::{pci_devices, PciDevice};
pub use workload::Workload;

/// How one reader did in the last sample (node_exporter's `node_scrape_collector_success`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct CollectorStatus {
    /// The reader's name: its vendor's (`nvidia`), `host` for the host's procfs reader, or
    /// `kubelet` for the pod-resources API (listed only where its socket exists).
    pub collector: &'static str,
    /// False when it failed or missed its deadline.
    pub success: bool,
    /// Why it failed.
    pub error: Option<String>,
    /// How long it took (or how long it was waited for).
    pub duration_s: f64,
    /// Devices it reported.
    pub devices: usize,
    /// Why it found nothing, when that has a reason ("no NVIDIA driver is installed").
    pub note: Option<String>,
}

/// Everything read at one moment.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct Sample {
    /// Seconds since the Unix epoch.
    pub time_unix_s: f64,
    /// The host: CPU, RAM, swap, load average. When the host reader failed or missed its
    /// deadline (its collector says so), the last good reading (zeros before the first).
    pub host: HostReading,
    /// Every accelerator, vendor by vendor; devices gone since they were first seen stay,
    /// marked down.
    pub devices: Vec<Reading>,
    /// How each reader did.
    pub collectors: Vec<CollectorStatus>,
}

/// How long one reader may take before its sample goes on without it.
pub(crate) const DEFAULT_DEADLINE: Duration = Duration::from_secs(2);
/// The NVIDIA reader's first deadline: starting NVML on a machine of many GPUs without
/// persistence mode takes seconds, and a one-shot command (`accel pick`, `accel mem`) has only
/// that sample.
pub(crate) const FIRST_DEADLINE: Duration = Duration::from_secs(15);
/// How long a device that disappeared stays listed (down) before it is forgotten.
pub(crate) const FORGET_AFTER: Duration = Duration::from_secs(3600);

/// A reader's answer: its devices (or why it failed), how long it took, and its note.
/// The last field: files the read refused (a FIFO where a sysfs attribute should be).
struct Answer(
    Result<Vec<Reading>, Error>,
    Duration,
    Option<String>,
    Vec<String>,
);

/// A reader on its own thread: asked by a message, answering by another, so a reader stuck in
/// a kernel read (a hung GPU's sysfs file, a FIFO under `--path.procfs`) only makes its own
/// answer late. `A` is what it answers: a vendor's devices, or the host.
struct Worker<A> {
    name: &'static str,
    ask: mpsc::Sender<Roots>,
    answers: mpsc::Receiver<A>,
    /// When the answer still owed from an earlier sample was asked.
    owed_since: Option<Instant>,
}

impl<A: Send + 'static> Worker<A> {
    fn spawn(
        name: &'static str,
        mut read: impl FnMut(&Roots) -> A + Send + 'static,
    ) -> Option<Self> {
        let (ask, asked) = mpsc::channel::<Roots>();
        let (answer, answers) = mpsc::channel();
        std::thread::Builder::new()
            .name(format!("accelkit-telemetry-{name}"))
            .spawn(move || {
                for roots in asked {
                    if answer.send(read(&roots)).is_err() {
                        return;
                    }
                }
            })
            .ok()?;
        Some(Worker {
            name,
            ask,
            answers,
            owed_since: None,
        })
    }

    /// Asks for a reading, unless one is still owed; an answer that came after its sample's
    /// deadline is old now and dropped, so a slow reader is never reported with stale
    /// numbers. Returns how long the owed read has been running when one is.
    fn ask(&mut self, roots: &Roots) -> Option<Duration> {
        while self.answers.try_recv().is_ok() {
            self.owed_since = None;
        }
        if let Some(t) = self.owed_since {
            return Some(t.elapsed());
        }
        if self.ask.send(roots.clone()).is_ok() {
            self.owed_since = Some(Instant::now());
        }
        None
    }

    /// The answer, waited for until `until`.
    fn answer(&mut self, until: Instant) -> Result<A, mpsc::RecvTimeoutError> {
        let a = self
            .answers
            .recv_timeout(until.saturating_duration_since(Instant::now()))?;
        self.owed_since = None;
        Ok(a)
    }
}

/// How long a vendor's reader is waited for: the sample's deadline, and for NVIDIA's first
/// reading at least [`FIRST_DEADLINE`] (starting NVML on a machine of many GPUs without
/// persistence mode takes seconds). The sysfs readers and the host get no such grace: a file
/// that blocks under `--path.sysfs` costs a one-shot command 2 s, not 15.
fn reader_deadline(vendor: Vendor, first: bool, deadline: Duration) -> Duration {
    if first && vendor == Vendor::Nvidia {
        deadline.max(FIRST_DEADLINE)
    } else {
        deadline
    }
}

/// A vendor reader's thread, answering its devices, how long the read took and its note.
fn vendor_worker(mut reader: Box<dyn Reader>) -> Option<(Vendor, Worker<Answer>)> {
    let vendor = reader.vendor();
    let w = Worker::spawn(vendor.name(), move |roots| {
        let t = Instant::now();
        let _ = sysfs::take_refusals();
        let r = reader.read(roots);
        Answer(r, t.elapsed(), reader.note(), sysfs::take_refusals())
    })?;
    Some((vendor, w))
}

type KubeletAnswer = Option<(Result<Vec<kubelet::Allocation>, String>, Duration)>;

/// Samples the host and every vendor's devices, again and again. Devices are found again at
/// every sample; one seen earlier and missing now stays as a row with `up: false` and the
/// reason.
pub struct Telemetry {
    roots: Roots,
    deadline: Duration,
    /// The host reader on its own thread (procfs can block too), and its last good reading.
    host: Worker<(Result<HostReading, Error>, Duration)>,
    last_host: HostReading,
    workers: Vec<(Vendor, Worker<Answer>)>,
    /// The kubelet's pod-resources API on its own thread: `None` where its socket does not
    /// exist, else the allocations (or why not) and how long the call took.
    kubelet: Worker<KubeletAnswer>,
    /// Every device seen in the last hour, by [`Reading::key`], with its last reading and
    /// when it was last there.
    seen: BTreeMap<(Vendor, String), (Reading, Instant)>,
    /// Samples taken so far (the first one gets a longer deadline: starting NVML on a machine
    /// of many GPUs takes seconds).
    samples: u64,
}

impl Telemetry {
    /// Telemetry over the readers this platform has (Linux: NVIDIA, AMD, Intel, TPU; macOS:
    /// Apple), reading under `roots`.
    pub fn new(roots: Roots) -> Telemetry {
        let mut readers: Vec<Box<dyn Reader>> = Vec::new();
        if cfg!(target_os = "macos") {
            readers.push(Box::new(apple::AppleReader::new()));
        } else {
            readers.push(Box::new(nvidia::NvidiaReader::new()));
            readers.push(Box::new(amd::AmdReader::new()));
            readers.push(Box::new(intel::IntelReader::new()));
            readers.push(Box::new(tpu::TpuReader::new()));
        }
        Telemetry::with_readers(roots, readers)
    }

    /// Telemetry over the given readers (tests pick theirs).
    pub(crate) fn with_readers(roots: Roots, readers: Vec<Box<dyn Reader>>) -> Telemetry {
        let mut host_reader = host::HostReader::new(&roots);
        let host = Worker::spawn("host", move |roots| {
            let t = Instant::now();
            let r = host_reader.read(roots);
            (r, t.elapsed())
        })
        .expect("a thread for the host reader");
        let kubelet = Worker::spawn("kubelet", |roots: &Roots| {
            if !roots.pod_resources.exists() {
                return None;
            }
            let t = Instant::now();
            let r = kubelet::list_pod_resources(&roots.pod_resources, kubelet::DEADLINE);
            Some((r, t.elapsed()))
        })
        .expect("a thread for the kubelet's pod-resources API");
        Telemetry {
            kubelet,
            host,
            last_host: HostReading::default(),
            roots,
            deadline: DEFAULT_DEADLINE,
            workers: readers.into_iter().filter_map(vendor_worker).collect(),
            seen: BTreeMap::new(),
            samples: 0,
        }
    }

    /// How long each reader may take in one sample (2 s by default): the tests' shorter ones.
    #[cfg(test)]
    fn set_deadline(&mut self, d: Duration) {
        self.deadline = d;
    }

    /// The roots the readers read under.
    pub fn roots(&self) -> &Roots {
        &self.roots
    }

    /// The machine now. Readers run in parallel; one that misses the deadline is reported
    /// failed ("timed out") and its devices are listed down, without numbers, until it
    /// answers in time again.
    pub fn sample(&mut self) -> Sample {
        let start = Instant::now();
        let deadline = self.deadline;
        let first = self.samples == 0;
        self.samples += 1;
        let until = start + deadline;
        let host_owed = self.host.ask(&self.roots);
        let kubelet_owed = self.kubelet.ask(&self.roots);
        let owed: Vec<Option<Duration>> = self
            .workers
            .iter_mut()
            .map(|(_, w)| w.ask(&self.roots))
            .collect();
        let mut collectors = Vec::new();
        // The host first: its first reading sleeps until MIN_INTERVAL has passed (later ones
        // sooner than that repeat the last window's CPU use), while the vendors read in
        // parallel. A host read that is stuck or late leaves the last good
        // reading in the sample and its collector failed.
        let (host, took) = match host_owed {
            Some(since) => (Err(Error::Stuck { since }), Duration::ZERO),
            // The host's reading waits out MIN_INTERVAL on purpose: that is not lateness.
            None => match self.host.answer(until + host::MIN_INTERVAL) {
                Ok(a) => a,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    (Err(Error::Timeout { deadline }), start.elapsed())
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    (Err(Error::ReaderStopped), start.elapsed())
                }
            },
        };
        collectors.push(CollectorStatus {
            collector: self.host.name,
            success: host.is_ok(),
            error: host.as_ref().err().map(Error::to_string),
            duration_s: took.as_secs_f64(),
            devices: 0,
            note: None,
        });
        if let Ok(h) = host {
            self.last_host = h;
        }
        let mut results = Vec::new();
        for ((vendor, w), owed) in self.workers.iter_mut().zip(owed) {
            let (result, took, note, refused) = match owed {
                // Still in a read from an earlier sample: reported at once, not waited for
                // again (a reader stuck once would make every later sample wait its deadline).
                Some(since) => (
                    Err(Error::Stuck { since }),
                    Duration::ZERO,
                    None,
                    Vec::new(),
                ),
                None => match w.answer(start + reader_deadline(*vendor, first, deadline)) {
                    Ok(Answer(r, took, note, refused)) => (r, took, note, refused),
                    Err(mpsc::RecvTimeoutError::Timeout) => (
                        Err(Error::Timeout {
                            deadline: reader_deadline(*vendor, first, deadline),
                        }),
                        start.elapsed(),
                        None,
                        Vec::new(),
                    ),
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        (Err(Error::ReaderStopped), start.elapsed(), None, Vec::new())
                    }
                },
            };
            let vendor = *vendor;
            // Files refused in the read (a FIFO where an attribute should be) fail the
            // collector, naming them; the devices it read are still listed.
            let refused =
                (!refused.is_empty()).then(|| format!("refused to read {}", refused.join("; ")));
            collectors.push(CollectorStatus {
                collector: vendor.name(),
                success: result.is_ok() && refused.is_none(),
                error: result.as_ref().err().map(Error::to_string).or(refused),
                duration_s: took.as_secs_f64(),
                devices: result.as_ref().map_or(0, Vec::len),
                note,
            });
            results.push((vendor, result));
        }
        let mut devices = Vec::new();
        for (vendor, result) in results {
            devices.extend(self.merge(vendor, result));
        }
        let kubelet = match kubelet_owed {
            Some(since) => Some((Err(Error::Stuck { since }.to_string()), Duration::ZERO)),
            None => match self.kubelet.answer(until) {
                Ok(a) => a,
                Err(_) => Some((
                    Err(Error::Timeout { deadline }.to_string()),
                    start.elapsed(),
                )),
            },
        };
        if let Some((result, took)) = kubelet {
            if let Ok(allocations) = &result {
                kubelet::attribute(&mut devices, allocations);
            }
            collectors.push(CollectorStatus {
                collector: self.kubelet.name,
                success: result.is_ok(),
                note: result
                    .as_ref()
                    .ok()
                    .map(|a| format!("{} containers hold devices", a.len())),
                error: result.err(),
                duration_s: took.as_secs_f64(),
                devices: 0,
            });
        }
        Sample {
            time_unix_s: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |t| t.as_secs_f64()),
            host: self.last_host.clone(),
            devices,
            collectors,
        }
    }

    /// This vendor's rows: what was read now, and every device seen before but missing now,
    /// marked down with the reason (for an hour, then forgotten). A device counts as present
    /// when a row read now has its UUID, its PCI address or its key, so a GPU that comes back
    /// under another name (NVML's index row for a GPU it cannot open) is one device.
    fn merge(&mut self, vendor: Vendor, result: Result<Vec<Reading>, Error>) -> Vec<Reading> {
        let now_t = Instant::now();
        let (now, why_missing) = match result {
            Ok(v) => (v, None),
            Err(e) => (Vec::new(), Some(e.to_string())),
        };
        let present = |last: &Reading| {
            now.iter().any(|r| {
                r.key() == last.key()
                    || (last.uuid.is_some() && r.uuid == last.uuid)
                    || (last.pci_bus_id.is_some()
                        && r.pci_bus_id == last.pci_bus_id
                        && r.mig_index == last.mig_index)
            })
        };
        self.seen.retain(|(v, _), (last, at)| {
            *v != vendor || (!present(last) && at.elapsed() < FORGET_AFTER)
        });
        let mut rows = Vec::new();
        for ((v, _), (last, _)) in &self.seen {
            if *v != vendor {
                continue;
            }
            let mut gone = Reading::new(vendor, last.index, last.name.clone());
            gone.driver = last.driver.clone();
            gone.uuid = last.uuid.clone();
            gone.pci_bus_id = last.pci_bus_id.clone();
            gone.mig_parent = last.mig_parent.clone();
            gone.mig_index = last.mig_index;
            gone.up = false;
            gone.status = Some(match &why_missing {
                Some(e) => format!("{vendor} reader failed: {e}"),
                None => "no longer found".to_string(),
            });
            rows.push(gone);
        }
        for mut r in now {
            r.check_plausible();
            self.seen.insert((vendor, r.key()), (r.clone(), now_t));
            rows.push(r);
        }
        rows.sort_by_key(|r| (r.index, r.mig_index, r.key()));
        rows
    }
}

#[cfg(test)]
mod fixture_tests;
#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    type Script = Arc<Mutex<Vec<Result<Vec<Reading>, Error>>>>;

    /// A reader that answers what the test scripted, one answer per sample.
    struct Scripted(Script, Duration);

    impl Reader for Scripted {
        fn vendor(&self) -> Vendor {
            Vendor::Amd
        }
        fn read(&mut self, _: &Roots) -> Result<Vec<Reading>, Error> {
            std::thread::sleep(self.1);
            let mut v = self.0.lock().unwrap();
            if v.is_empty() {
                Ok(Vec::new())
            } else {
                v.remove(0)
            }
        }
    }

    fn gpu(i: u32, pci: &str) -> Reading {
        let mut r = Reading::new(Vendor::Amd, i, "GPU");
        r.pci_bus_id = Some(pci.to_string());
        r.utilization_percent = Some(10.0);
        r
    }

    fn rows(s: &Sample) -> Vec<(String, bool)> {
        s.devices.iter().map(|r| (r.id(), r.up)).collect()
    }

    #[test]
    fn a_vanished_device_stays_down_and_comes_back_as_one_row() {
        let script = Arc::new(Mutex::new(vec![
            Ok(vec![gpu(0, "0000:03:00.0"), gpu(1, "0000:04:00.0")]),
            Ok(vec![gpu(0, "0000:03:00.0")]),
            Err(Error::Query {
                interface: "sysfs",
                detail: "unreadable".to_string(),
            }),
            // Back, under another card number: the same PCI address, one row.
            Ok(vec![gpu(0, "0000:03:00.0"), gpu(2, "0000:04:00.0")]),
        ]));
        let mut t = Telemetry::with_readers(
            Roots::default(),
            vec![Box::new(Scripted(script, Duration::ZERO))],
        );
        let s = t.sample();
        assert_eq!(rows(&s), [("amd:0".into(), true), ("amd:1".into(), true)]);
        let s = t.sample();
        assert_eq!(rows(&s), [("amd:0".into(), true), ("amd:1".into(), false)]);
        assert_eq!(s.devices[1].status.as_deref(), Some("no longer found"));
        assert_eq!(s.devices[1].utilization_percent, None);
        let s = t.sample();
        assert!(!s.collectors[1].success);
        assert_eq!(rows(&s), [("amd:0".into(), false), ("amd:1".into(), false)]);
        assert_eq!(
            s.devices[0].status.as_deref(),
            Some("amd reader failed: sysfs unreadable")
        );
        let s = t.sample();
        assert_eq!(rows(&s), [("amd:0".into(), true), ("amd:2".into(), true)]);
    }

    #[test]
    fn a_reader_stuck_in_a_read_is_not_waited_for_again() {
        let script = Arc::new(Mutex::new(vec![Ok(vec![gpu(0, "a")])]));
        let mut t = Telemetry::with_readers(
            Roots::default(),
            vec![Box::new(Scripted(script, Duration::from_secs(4)))],
        );
        t.set_deadline(Duration::from_secs(1));
        let t0 = Instant::now();
        let s = t.sample();
        assert!(t0.elapsed() >= Duration::from_secs(1));
        assert!(!s.collectors[1].success);
        // The next sample does not wait another second for the same stuck read (the host's
        // own reading takes its 0.2 s): it says the read has not returned.
        let t1 = Instant::now();
        let s = t.sample();
        assert!(
            t1.elapsed() < Duration::from_millis(800),
            "{:?}",
            t1.elapsed()
        );
        let e = s.collectors[1].error.as_deref().unwrap();
        assert!(e.starts_with("timed out: its read asked"), "{e}");
        // The host is its own collector, and it answered.
        assert_eq!(s.collectors[0].collector, "host");
        assert!(s.collectors[0].success, "{:?}", s.collectors[0]);
    }

    #[test]
    fn a_slow_reader_misses_its_deadline_and_its_late_answer_is_dropped() {
        let script = Arc::new(Mutex::new(vec![
            Ok(vec![gpu(0, "a")]),
            Ok(vec![gpu(1, "b")]),
            Ok(vec![gpu(2, "c")]),
        ]));
        let mut t = Telemetry::with_readers(
            Roots::default(),
            vec![Box::new(Scripted(script, Duration::from_millis(300)))],
        );
        let s = t.sample();
        assert_eq!(rows(&s), [("amd:0".into(), true)]);
        // 50 ms: timed out, the device listed down.
        t.set_deadline(Duration::from_millis(50));
        let s = t.sample();
        assert!(!s.collectors[1].success);
        assert!(s.collectors[1]
            .error
            .as_deref()
            .unwrap()
            .starts_with("timed out"));
        assert_eq!(rows(&s), [("amd:0".into(), false)]);
        // The answer to that sample (amd:1) arrives late and is dropped, not shown as now.
        std::thread::sleep(Duration::from_millis(400));
        t.set_deadline(Duration::from_secs(5));
        let s = t.sample();
        assert!(s.collectors[1].success);
        assert!(
            s.devices.iter().any(|r| r.id() == "amd:2" && r.up),
            "{:?}",
            rows(&s)
        );
        assert!(
            !s.devices.iter().any(|r| r.id() == "amd:1"),
            "{:?}",
            rows(&s)
        );
    }
}
