//! DRM client usage stats from `/proc/PID/fdinfo/FD` (kernel
//! `Documentation/gpu/drm-usage-stats.rst`): which processes use which GPU, how much memory
//! each holds there and how busy each keeps its engines.
//!
//! A DRM file descriptor's fdinfo carries `drm-driver`, `drm-pdev` (the PCI address),
//! `drm-client-id`, cumulative engine times `drm-engine-<engine>: <ns> ns` (amdgpu, i915) or
//! cycle counters `drm-cycles-<engine>` with the GPU timestamp `drm-total-cycles-<engine>` (xe),
//! `drm-engine-capacity-<engine>` (identical engines in the group, 1 when absent) and memory
//! per region `drm-memory-<region>` / `drm-resident-<region>` / `drm-total-<region>`.
//!
//! **Counting.** One client (one `struct drm_file`) shows on every descriptor that shares it
//! (`dup`, fork, passing), so clients are keyed by (`drm-pdev`, `drm-client-id`) and counted
//! once, for the lowest pid that holds them. Several clients of one process on one device are
//! summed into one row.
//!
//! **Busy percent.** The counters are cumulative, so a share needs two samples: the
//! [`Scanner`] keeps each client's counters between calls and the first sample gives `None`.
//! Per engine, a client's share is `delta(engine ns) / (wall ns between the samples × capacity)`,
//! or for xe `delta(drm-cycles) / (delta(drm-total-cycles) × capacity)` (both in the GPU's
//! clock, no wall time needed). A process's (or a device's) shares are summed over its clients
//! engine by engine, and its busy percent is its **busiest engine**, capped at 100: one number
//! per row that is 100 when any engine class is saturated (nvtop shows each engine apart; a
//! sum over engines could pass 100, and a gfx-only figure would hide compute and video work).
//! A counter lower than the previous one (the spec allows that for a while) counts as no
//! progress, and the larger previous value is kept until the counter catches up.
//!
//! What this can see is what the reader may read: another user's `/proc/PID/fdinfo` needs the
//! same rights as ptrace, so an unprivileged exporter sees only its own user's processes.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::Path;
use std::time::Instant;

use super::host::describe_process;
use super::reading::ProcessUse;
use super::sysfs::read_text;

/// One DRM client as one fdinfo file describes it.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Client {
    /// `drm-driver`.
    pub driver: String,
    /// `drm-pdev`, lower case.
    pub pdev: Option<String>,
    /// `drm-client-id`.
    pub client_id: Option<u64>,
    /// `drm-engine-<e>`, nanoseconds busy, cumulative (a repeated key is summed: amdgpu names
    /// UVD and VCN decode both `dec`).
    pub engine_ns: BTreeMap<String, u64>,
    /// `drm-engine-capacity-<e>`.
    pub capacity: BTreeMap<String, u64>,
    /// `drm-cycles-<e>`, busy cycles, cumulative.
    pub cycles: BTreeMap<String, u64>,
    /// `drm-total-cycles-<e>`, the GPU timestamp the cycles are measured against.
    pub total_cycles: BTreeMap<String, u64>,
    /// Bytes per memory region: `drm-resident-<r>`, else `drm-memory-<r>` (its older alias),
    /// else `drm-total-<r>`.
    pub memory: BTreeMap<String, u64>,
}

/// A size as fdinfo writes it: `<n>`, `<n> B`, `<n> KiB`, `<n> MiB` (and `GiB`, to be safe).
pub(crate) fn parse_size(value: &str) -> Option<u64> {
    let mut parts = value.split_ascii_whitespace();
    let n: u64 = parts.next()?.parse().ok()?;
    let mult = match parts.next() {
        None | Some("B") => 1,
        Some("KiB") => 1 << 10,
        Some("MiB") => 1 << 20,
        Some("GiB") => 1 << 30,
        Some(_) => return None,
    };
    if parts.next().is_some() {
        return None;
    }
    n.checked_mul(mult)
}

/// A counter: `<n>` or `<n> ns`.
fn parse_count(value: &str, unit: &str) -> Option<u64> {
    let mut parts = value.split_ascii_whitespace();
    let n = parts.next()?.parse().ok()?;
    match (parts.next(), parts.next()) {
        (None, _) => Some(n),
        (Some(u), None) if u == unit => Some(n),
        _ => None,
    }
}

/// Parses one fdinfo file. `None` when it is not a DRM client (no `drm-driver`). Lines it does
/// not understand are skipped; a garbled value loses that value only.
pub(crate) fn parse(text: &str) -> Option<Client> {
    let mut c = Client::default();
    let mut driver = None;
    // Per region: (resident, memory, total).
    let mut regions: BTreeMap<String, [Option<u64>; 3]> = BTreeMap::new();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let key = key.trim();
        let value = value.trim();
        let Some(k) = key.strip_prefix("drm-") else {
            continue;
        };
        if k == "driver" {
            if !value.is_empty() {
                driver = Some(value.to_string());
            }
        } else if k == "pdev" {
            c.pdev = Some(value.to_ascii_lowercase()).filter(|v| !v.is_empty());
        } else if k == "client-id" {
            c.client_id = value.parse().ok();
        } else if let Some(e) = k.strip_prefix("engine-capacity-") {
            if let Some(n) = parse_count(value, "").filter(|n| *n > 0) {
                c.capacity.insert(e.to_string(), n);
            }
        } else if let Some(e) = k.strip_prefix("engine-") {
            if let Some(n) = parse_count(value, "ns") {
                let slot = c.engine_ns.entry(e.to_string()).or_insert(0);
                *slot = slot.saturating_add(n);
            }
        } else if let Some(e) = k.strip_prefix("total-cycles-") {
            if let Some(n) = parse_count(value, "") {
                c.total_cycles.insert(e.to_string(), n);
            }
        } else if let Some(e) = k.strip_prefix("cycles-") {
            if let Some(n) = parse_count(value, "") {
                c.cycles.insert(e.to_string(), n);
            }
        } else {
            let (slot, region) = if let Some(r) = k.strip_prefix("resident-") {
                (0, r)
            } else if let Some(r) = k.strip_prefix("memory-") {
                (1, r)
            } else if let Some(r) = k.strip_prefix("total-") {
                (2, r)
            } else {
                continue;
            };
            if let Some(bytes) = parse_size(value) {
                regions.entry(region.to_string()).or_default()[slot] = Some(bytes);
            }
        }
    }
    c.driver = driver?;
    c.memory = regions
        .into_iter()
        .filter_map(|(r, [res, mem, tot])| Some((r, res.or(mem).or(tot)?)))
        .collect();
    Some(c)
}

/// Identifies one client across samples.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum ClientKey {
    /// The spec's identity: device and client id.
    Id(Option<String>, u64),
    /// No client id: the descriptor itself.
    Fd(u32, u64),
}

/// A client's counters at one sample.
#[derive(Debug, Clone, Default)]
struct ClientCounters {
    engine_ns: BTreeMap<String, u64>,
    cycles: BTreeMap<String, u64>,
    total_cycles: BTreeMap<String, u64>,
}

/// One process's use of one device, summed over its clients there.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ProcessClients {
    /// Process id.
    pub pid: u32,
    /// Bytes per memory region, summed over the process's clients on the device.
    pub memory: BTreeMap<String, u64>,
    /// Its busiest engine's share since the previous sample, percent; `None` when none of its
    /// clients was seen at the previous sample.
    pub busy_percent: Option<f64>,
}

/// Every visible client of one device.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct DeviceClients {
    /// By pid.
    pub processes: Vec<ProcessClients>,
    /// The device's busiest engine, summed over every visible client, percent; `None` when no
    /// client had a previous sample.
    pub busy_percent: Option<f64>,
}

/// Engine shares, summed engine by engine.
#[derive(Debug, Clone, Default)]
struct Shares {
    by_engine: BTreeMap<String, f64>,
    known: bool,
}

impl Shares {
    fn add(&mut self, other: &BTreeMap<String, f64>) {
        self.known = true;
        for (e, f) in other {
            *self.by_engine.entry(e.clone()).or_insert(0.0) += f;
        }
    }

    fn percent(&self) -> Option<f64> {
        if !self.known {
            return None;
        }
        let max = self.by_engine.values().copied().fold(0.0_f64, f64::max);
        Some((max * 100.0).clamp(0.0, 100.0))
    }
}

/// `now - before` where counters may stall: a lower value is no progress (and `None` when
/// there is no earlier value).
fn progress(now: u64, before: Option<&u64>) -> Option<u64> {
    before.map(|b| now.saturating_sub(*b))
}

/// Keeps each client's counters between samples, to turn cumulative counters into shares.
#[derive(Debug, Default)]
pub(crate) struct Scanner {
    prev: HashMap<ClientKey, ClientCounters>,
    prev_at: Option<Instant>,
}

impl Scanner {
    /// Reads every process's DRM clients of the given drivers under `procfs` at `now`, and
    /// groups them by `drm-pdev` (clients without one cannot be matched to a card and are
    /// left out).
    pub fn scan(
        &mut self,
        procfs: &Path,
        drivers: &[&str],
        now: Instant,
    ) -> BTreeMap<String, DeviceClients> {
        let wall_ns = self
            .prev_at
            .map(|t| now.saturating_duration_since(t).as_nanos() as f64)
            .filter(|ns| *ns > 0.0);
        let mut next: HashMap<ClientKey, ClientCounters> = HashMap::new();
        // (pdev, pid) -> (memory, shares)
        let mut per_process: BTreeMap<(String, u32), (BTreeMap<String, u64>, Shares)> =
            BTreeMap::new();
        let mut per_device: BTreeMap<String, Shares> = BTreeMap::new();
        for (pid, fd, client) in clients(procfs) {
            if !drivers.contains(&client.driver.as_str()) {
                continue;
            }
            let Some(pdev) = client.pdev.clone() else {
                continue;
            };
            let key = match client.client_id {
                Some(id) => ClientKey::Id(Some(pdev.clone()), id),
                None => ClientKey::Fd(pid, fd),
            };
            if next.contains_key(&key) {
                // The same client on another descriptor: counted once, where first seen.
                continue;
            }
            let before = self.prev.get(&key);
            let mut kept = ClientCounters::default();
            let mut fractions = BTreeMap::new();
            for (e, &v) in &client.engine_ns {
                let prev = before.and_then(|b| b.engine_ns.get(e));
                kept.engine_ns
                    .insert(e.clone(), v.max(prev.copied().unwrap_or(0)));
                if let (Some(d), Some(w)) = (progress(v, prev), wall_ns) {
                    let cap = client.capacity.get(e).copied().unwrap_or(1) as f64;
                    fractions.insert(e.clone(), d as f64 / (w * cap));
                }
            }
            for (e, &v) in &client.cycles {
                let prev = before.and_then(|b| b.cycles.get(e));
                kept.cycles
                    .insert(e.clone(), v.max(prev.copied().unwrap_or(0)));
                let Some(&total) = client.total_cycles.get(e) else {
                    continue;
                };
                let prev_total = before.and_then(|b| b.total_cycles.get(e));
                kept.total_cycles
                    .insert(e.clone(), total.max(prev_total.copied().unwrap_or(0)));
                if let (Some(d), Some(dt)) = (progress(v, prev), progress(total, prev_total)) {
                    if dt > 0 {
                        let cap = client.capacity.get(e).copied().unwrap_or(1) as f64;
                        fractions.insert(e.clone(), d as f64 / (dt as f64 * cap));
                    }
                }
            }
            let known = before.is_some() && (wall_ns.is_some() || !client.cycles.is_empty());
            next.insert(key, kept);

            let (memory, shares) = per_process.entry((pdev.clone(), pid)).or_default();
            for (r, b) in &client.memory {
                *memory.entry(r.clone()).or_insert(0) += b;
            }
            let device = per_device.entry(pdev).or_default();
            if known {
                shares.add(&fractions);
                device.add(&fractions);
            }
        }
        self.prev = next;
        self.prev_at = Some(now);

        let mut out: BTreeMap<String, DeviceClients> = BTreeMap::new();
        for ((pdev, pid), (memory, shares)) in per_process {
            out.entry(pdev).or_default().processes.push(ProcessClients {
                pid,
                memory,
                busy_percent: shares.percent(),
            });
        }
        for (pdev, shares) in per_device {
            out.entry(pdev).or_default().busy_percent = shares.percent();
        }
        out
    }
}

/// The row of one process: who it is (`PROCFS/PID/status`'s `Uid:` and `PROCFS/PID/comm`),
/// the memory the reader counts for it, and its busy percent.
pub(crate) fn process_use(
    procfs: &Path,
    p: &ProcessClients,
    memory_bytes: Option<u64>,
) -> ProcessUse {
    let (user, command) = describe_process(procfs, p.pid);
    ProcessUse {
        pid: p.pid,
        user,
        command,
        memory_bytes,
        busy_percent: p.busy_percent,
        workload: super::workload::of_process(procfs, p.pid),
        note: None,
    }
}

/// The sum of the given regions' bytes, `None` when none of them is reported.
pub(crate) fn sum_regions(
    memory: &BTreeMap<String, u64>,
    pick: impl Fn(&str) -> bool,
) -> Option<u64> {
    memory
        .iter()
        .filter(|(r, _)| pick(r))
        .map(|(_, b)| *b)
        .reduce(u64::saturating_add)
}

/// Every DRM client under `procfs`: (pid, fd, parsed fdinfo), pids and fds in numeric order.
/// Where `PID/fd/FD` is a readable link, only descriptors of `/dev/dri/*` are read; where it
/// is not (no such link, no permission), the fdinfo is read and judged by its `drm-driver`.
fn clients(procfs: &Path) -> Vec<(u32, u64, Client)> {
    let mut out = Vec::new();
    for pid in numbered(procfs) {
        let dir = procfs.join(pid.to_string());
        for fd in numbered(&dir.join("fdinfo")) {
            if let Ok(target) = fs::read_link(dir.join("fd").join(fd.to_string())) {
                if !target.starts_with("/dev/dri") {
                    continue;
                }
            }
            let Some(text) = read_text(&dir.join("fdinfo").join(fd.to_string())) else {
                continue;
            };
            if let (Ok(pid), Some(client)) = (u32::try_from(pid), parse(&text)) {
                out.push((pid, fd, client));
            }
        }
    }
    out
}

/// The entries of `dir` whose names are all digits, as numbers, sorted.
fn numbered(dir: &Path) -> Vec<u64> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<u64> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let name = name.to_str()?;
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            name.parse().ok()
        })
        .collect();
    v.sort_unstable();
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The example of `drivers/gpu/drm/xe/xe_drm_client.c` (MIT), which the kernel's
    /// `Documentation/gpu/xe/xe-drm-usage-stats.rst` includes as the xe implementation of
    /// drm-usage-stats.rst (that file itself has no example), with its leading tabs.
    const XE_DOC_EXAMPLE: &str = "\tpos:    0
\tflags:  0100002
\tmnt_id: 26
\tino:    685
\tdrm-driver:     xe
\tdrm-client-id:  3
\tdrm-pdev:       0000:03:00.0
\tdrm-total-system:       0
\tdrm-shared-system:      0
\tdrm-active-system:      0
\tdrm-resident-system:    0
\tdrm-purgeable-system:   0
\tdrm-total-gtt:  192 KiB
\tdrm-shared-gtt: 0
\tdrm-active-gtt: 0
\tdrm-resident-gtt:       192 KiB
\tdrm-total-vram0:        23992 KiB
\tdrm-shared-vram0:       16 MiB
\tdrm-active-vram0:       0
\tdrm-resident-vram0:     23992 KiB
\tdrm-total-stolen:       0
\tdrm-shared-stolen:      0
\tdrm-active-stolen:      0
\tdrm-resident-stolen:    0
\tdrm-cycles-rcs: 28257900
\tdrm-total-cycles-rcs:   7655183225
\tdrm-cycles-bcs: 0
\tdrm-total-cycles-bcs:   7655183225
\tdrm-cycles-vcs: 0
\tdrm-total-cycles-vcs:   7655183225
\tdrm-engine-capacity-vcs:        2
\tdrm-cycles-vecs:        0
\tdrm-total-cycles-vecs:  7655183225
\tdrm-engine-capacity-vecs:       2
\tdrm-cycles-ccs: 0
\tdrm-total-cycles-ccs:   7655183225
\tdrm-engine-capacity-ccs:        4
";

    /// The example of the kernel's `Documentation/gpu/i915.rst` ("i915 DRM client usage stats
    /// implementation"), with its indentation.
    const I915_DOC_EXAMPLE: &str = "      pos:    0
      flags:  0100002
      mnt_id: 21
      drm-driver: i915
      drm-pdev:   0000:00:02.0
      drm-client-id:      7
      drm-engine-render:  9288864723 ns
      drm-engine-copy:    2035071108 ns
      drm-engine-video:   0 ns
      drm-engine-capacity-video:   2
      drm-engine-video-enhance:   0 ns
";

    /// What `drivers/gpu/drm/amd/amdgpu/amdgpu_fdinfo.c` prints (its `seq_printf` formats,
    /// including the space before the tab of `drm-memory-gtt: \t`), with made-up numbers.
    const AMDGPU_FORMAT: &str = "pos:\t0
flags:\t02100002
mnt_id:\t24
ino:\t1119
pasid:\t32770
drm-driver:\tamdgpu
drm-pdev:\t0000:03:00.0
drm-client-id:\t101
drm-memory-vram:\t1048576 KiB
drm-memory-gtt: \t2048 KiB
drm-memory-cpu: \t0 KiB
amd-memory-visible-vram:\t1048576 KiB
amd-evicted-vram:\t0 KiB
drm-engine-gfx:\t5000000000 ns
drm-engine-compute:\t2000000000 ns
";

    #[test]
    fn parses_the_xe_documentation_example() {
        let c = parse(XE_DOC_EXAMPLE).expect("a DRM client");
        assert_eq!(c.driver, "xe");
        assert_eq!(c.client_id, Some(3));
        assert_eq!(c.pdev.as_deref(), Some("0000:03:00.0"));
        // resident wins over total; 23992 KiB = 24_567_808 B, 192 KiB = 196_608 B.
        assert_eq!(c.memory.get("vram0"), Some(&(23992 * 1024)));
        assert_eq!(c.memory.get("gtt"), Some(&(192 * 1024)));
        assert_eq!(c.memory.get("system"), Some(&0));
        assert_eq!(c.memory.get("stolen"), Some(&0));
        assert_eq!(c.memory.len(), 4);
        assert_eq!(c.cycles.get("rcs"), Some(&28_257_900));
        assert_eq!(c.total_cycles.get("rcs"), Some(&7_655_183_225));
        assert_eq!(c.cycles.len(), 5);
        assert_eq!(c.total_cycles.len(), 5);
        assert_eq!(c.capacity.get("ccs"), Some(&4));
        assert_eq!(c.capacity.get("vcs"), Some(&2));
        assert_eq!(c.capacity.get("rcs"), None);
        assert!(c.engine_ns.is_empty());
    }

    #[test]
    fn parses_the_i915_documentation_example() {
        let c = parse(I915_DOC_EXAMPLE).expect("a DRM client");
        assert_eq!(c.driver, "i915");
        assert_eq!(c.pdev.as_deref(), Some("0000:00:02.0"));
        assert_eq!(c.client_id, Some(7));
        assert_eq!(c.engine_ns.get("render"), Some(&9_288_864_723));
        assert_eq!(c.engine_ns.get("copy"), Some(&2_035_071_108));
        assert_eq!(c.engine_ns.get("video"), Some(&0));
        assert_eq!(c.engine_ns.get("video-enhance"), Some(&0));
        assert_eq!(c.engine_ns.len(), 4);
        assert_eq!(c.capacity.get("video"), Some(&2));
        assert!(c.memory.is_empty() && c.cycles.is_empty());
    }

    #[test]
    fn parses_the_amdgpu_format() {
        let c = parse(AMDGPU_FORMAT).expect("a DRM client");
        assert_eq!(c.driver, "amdgpu");
        assert_eq!(c.client_id, Some(101));
        assert_eq!(c.memory.get("vram"), Some(&(1 << 30)));
        assert_eq!(c.memory.get("gtt"), Some(&(2 << 20)));
        assert_eq!(c.engine_ns.get("gfx"), Some(&5_000_000_000));
        assert_eq!(c.engine_ns.get("compute"), Some(&2_000_000_000));
    }

    #[test]
    fn not_a_drm_client_and_garbled_values() {
        assert_eq!(
            parse("pos:\t0\nflags:\t02\nmnt_id:\t15\nino:\t4242\n"),
            None
        );
        assert_eq!(parse(""), None);
        let c = parse(
            "drm-driver: i915\ndrm-client-id: x\ndrm-engine-render: lots ns\n\
             drm-engine-copy: 5 us\ndrm-memory-local0: 12 TB\ndrm-resident-system0: 4 KiB\n\
             no colon here\ndrm-engine-video: 7 ns\n",
        )
        .expect("a client");
        assert_eq!(c.client_id, None);
        assert!(!c.engine_ns.contains_key("render"));
        assert!(!c.engine_ns.contains_key("copy"));
        assert_eq!(c.engine_ns.get("video"), Some(&7));
        assert!(!c.memory.contains_key("local0"));
        assert_eq!(c.memory.get("system0"), Some(&4096));
        assert_eq!(parse_size("3 MiB"), Some(3 << 20));
        assert_eq!(parse_size("3"), Some(3));
        assert_eq!(parse_size("3 B"), Some(3));
        assert_eq!(parse_size("3 KiB extra"), None);
    }

    fn write(dir: &Path, rel: &str, text: &str) {
        let p = dir.join(rel);
        fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        fs::write(p, text).expect("write");
    }

    #[test]
    fn shares_from_two_samples_and_stalled_counters() {
        let dir = std::env::temp_dir().join(format!("accel-fdinfo-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let client = |render: u64, video: u64, cyc: u64, tot: u64| {
            format!(
                "drm-driver: i915\ndrm-pdev: 0000:03:00.0\ndrm-client-id: 9\n\
                 drm-engine-render: {render} ns\ndrm-engine-video: {video} ns\n\
                 drm-engine-capacity-video: 2\ndrm-cycles-ccs: {cyc}\n\
                 drm-total-cycles-ccs: {tot}\n"
            )
        };
        let mut s = Scanner::default();
        let t0 = Instant::now();
        write(
            &dir,
            "7/fdinfo/3",
            &client(1_000, 4_000_000_000, 100, 1_000),
        );
        let first = s.scan(&dir, &["i915"], t0);
        assert_eq!(first["0000:03:00.0"].processes[0].busy_percent, None);
        assert_eq!(first["0000:03:00.0"].busy_percent, None);
        // 2 s later: render +500 ms (25 %); video went *down* (stalled: 0 %);
        // ccs +300 of 1000 cycles (30 %).
        write(
            &dir,
            "7/fdinfo/3",
            &client(500_001_000, 3_000_000_000, 400, 2_000),
        );
        let second = s.scan(&dir, &["i915"], t0 + Duration::from_secs(2));
        let busy = second["0000:03:00.0"].processes[0]
            .busy_percent
            .expect("busy");
        assert!((busy - 30.0).abs() < 1e-9, "{busy}");
        // Video catches up to 4.5e9: progress is measured from the kept 4e9, over 1 s and
        // 2 engines: 0.5e9 / (1e9 * 2) = 25 %; render and ccs did not move.
        write(
            &dir,
            "7/fdinfo/3",
            &client(500_001_000, 4_500_000_000, 400, 3_000),
        );
        let third = s.scan(&dir, &["i915"], t0 + Duration::from_secs(3));
        let busy = third["0000:03:00.0"].busy_percent.expect("busy");
        assert!((busy - 25.0).abs() < 1e-9, "{busy}");
        // Another driver's clients are not this scanner's.
        assert!(s
            .scan(&dir, &["amdgpu"], t0 + Duration::from_secs(4))
            .is_empty());
        let _ = fs::remove_dir_all(&dir);
    }
}
