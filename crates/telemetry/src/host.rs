//! The host: CPU use per core, RAM, swap and load average, as `psutil.cpu_percent(percpu=True)`,
//! `virtual_memory()`, `swap_memory()` and `getloadavg()` give them.
//!
//! On Linux everything comes from procfs under the given root (`/proc/stat`, `/proc/meminfo`,
//! `/proc/loadavg`; formats in the kernel's Documentation/filesystems/proc.rst), so an exporter
//! in a container reads the host's `/proc` mounted elsewhere. Elsewhere sysinfo reads them.
//! CPU use is the difference of two readings of the cumulative counters, over the time between
//! them, as psutil computes it.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;

use accelkit_core::system::HostMemory;

use super::error::Error;
use super::reading::Roots;

/// The host at one moment.
#[derive(Debug, Clone, Default, Serialize)]
#[non_exhaustive]
pub struct HostReading {
    /// Whole-machine CPU use since the previous reading, percent.
    pub cpu_percent: f32,
    /// Each logical core's use since the previous reading, percent, in CPU-number order (a
    /// core that went offline or came online in between is left out).
    pub cpu_per_core_percent: Vec<f32>,
    /// The seconds CPU use was measured over.
    pub cpu_interval_s: f64,
    /// RAM and swap.
    pub memory: HostMemory,
    /// The 1, 5 and 15 minute load averages, where the OS reports them.
    pub load_average: Option<[f64; 3]>,
    /// This process's resident memory, where the OS reports it.
    pub process_rss_bytes: Option<u64>,
    /// Energy of every CPU package since the reader started (Linux's RAPL powercap zones;
    /// Intel, and AMD Zen through the same driver).
    pub cpu_energy_joules: Option<f64>,
    /// Energy of the DRAM since the reader started, where RAPL has a DRAM zone.
    pub dram_energy_joules: Option<f64>,
    /// Why the energies are not known, when they are not (no zones in a VM; root only).
    pub energy_note: Option<String>,
}

/// One line of `/proc/stat`: busy and total jiffies since boot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTimes {
    /// Jiffies not idle (user, nice, system, irq, softirq, steal).
    pub busy: u64,
    /// Every jiffy (busy plus idle and iowait).
    pub total: u64,
}

impl CpuTimes {
    /// Percent busy between `earlier` and `self`; 0 when no time passed.
    pub fn percent_since(&self, earlier: &CpuTimes) -> f32 {
        let total = self.total.saturating_sub(earlier.total);
        if total == 0 {
            return 0.0;
        }
        let busy = self.busy.saturating_sub(earlier.busy).min(total);
        (busy as f64 * 100.0 / total as f64) as f32
    }
}

/// The `cpu` line (whole machine) and each `cpuN` line of `/proc/stat` with its number N
/// (only online CPUs are listed, so numbers can skip). Guest time is already counted in user
/// time, so it is left out; iowait counts as idle, as psutil and top count it.
pub fn parse_proc_stat(text: &str) -> (Option<CpuTimes>, Vec<(u32, CpuTimes)>) {
    let mut all = None;
    let mut cores = Vec::new();
    for line in text.lines() {
        let mut f = line.split_ascii_whitespace();
        let Some(name) = f.next() else { continue };
        if !name.starts_with("cpu") {
            continue;
        }
        let v: Vec<u64> = f.take(8).map_while(|x| x.parse().ok()).collect();
        if v.len() < 4 {
            continue;
        }
        let at = |i: usize| v.get(i).copied().unwrap_or(0);
        let idle = at(3) + at(4);
        let busy = at(0) + at(1) + at(2) + at(5) + at(6) + at(7);
        let t = CpuTimes {
            busy,
            total: busy + idle,
        };
        if name == "cpu" {
            all = Some(t);
        } else if let Some(n) = name.strip_prefix("cpu").and_then(|n| n.parse::<u32>().ok()) {
            cores.push((n, t));
        }
    }
    (all, cores)
}

/// RAM and swap from `/proc/meminfo` (kB values). Used is total minus available, as
/// sysinfo and `free`'s "available" column count it.
pub(crate) fn parse_meminfo(text: &str) -> Option<HostMemory> {
    let get = |key: &str| -> Option<u64> {
        text.lines().find_map(|l| {
            let rest = l.strip_prefix(key)?.strip_prefix(':')?;
            let kb: u64 = rest.split_ascii_whitespace().next()?.parse().ok()?;
            kb.checked_mul(1024)
        })
    };
    let total = get("MemTotal")?;
    let available = get("MemAvailable").or_else(|| {
        // Kernels before 3.14 lack MemAvailable: free + buffers + cached is the old estimate.
        Some(get("MemFree")? + get("Buffers").unwrap_or(0) + get("Cached").unwrap_or(0))
    })?;
    let swap_total = get("SwapTotal").unwrap_or(0);
    let swap_free = get("SwapFree").unwrap_or(0);
    let mut m = HostMemory::default();
    m.total_bytes = total;
    m.used_bytes = total.saturating_sub(available);
    m.available_bytes = available.min(total);
    m.swap_total_bytes = swap_total;
    m.swap_used_bytes = swap_total.saturating_sub(swap_free);
    Some(m)
}

/// The three load averages of `/proc/loadavg`.
pub fn parse_loadavg(text: &str) -> Option<[f64; 3]> {
    let mut f = text.split_ascii_whitespace().map(|x| x.parse::<f64>().ok());
    let la = [f.next()??, f.next()??, f.next()??];
    // `nan` and `inf` parse as f64; no kernel writes them, and JSON cannot carry them.
    la.iter().all(|v| v.is_finite() && *v >= 0.0).then_some(la)
}

/// Reads a small procfs file (at most 1 MiB: `/proc/stat` of a large machine is ~100 KiB),
/// only when it is a regular file (`accelkit_core::files::read_limited`).
fn read_small(path: &Path) -> Option<String> {
    accelkit_core::files::read_text_limited(path, 1 << 20).ok()
}

/// The owner's name and the command of a process, from `PROCFS/PID/status` (`Uid:`) and
/// `PROCFS/PID/comm`.
pub(crate) fn describe_process(procfs: &Path, pid: u32) -> (Option<String>, Option<String>) {
    let dir = procfs.join(pid.to_string());
    let command = read_small(&dir.join("comm"))
        .map(|c| c.trim().to_string())
        .filter(|c| !c.is_empty());
    let uid = read_small(&dir.join("status")).and_then(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|r| r.split_ascii_whitespace().next()?.parse::<u32>().ok())
    });
    (uid.map(user_name), command)
}

/// The name of a user id, or the id as text when it has none.
pub(crate) fn user_name(uid: u32) -> String {
    #[cfg(target_os = "linux")]
    {
        let mut buf = vec![0 as libc::c_char; 4096];
        // SAFETY: `pwd` and `result` are plain out-values on the stack; `buf` is a live buffer
        // whose length is passed; getpwuid_r writes only inside them and, on success, points
        // `pw_name` into `buf`, which is alive while we read it.
        unsafe {
            let mut pwd: libc::passwd = std::mem::zeroed();
            let mut result: *mut libc::passwd = std::ptr::null_mut();
            let rc = libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut result);
            if rc == 0 && !result.is_null() && !pwd.pw_name.is_null() {
                if let Ok(s) = std::ffi::CStr::from_ptr(pwd.pw_name).to_str() {
                    return s.to_string();
                }
            }
        }
    }
    uid.to_string()
}

/// This process's resident memory, from `/proc/self/statm` (the real procfs: it is about us).
pub fn own_rss_bytes() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        let s = read_small(Path::new("/proc/self/statm"))?;
        let pages: u64 = s.split_ascii_whitespace().nth(1)?.parse().ok()?;
        // SAFETY: sysconf takes a constant and touches no memory.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        Some(pages * u64::try_from(page).ok()?)
    }
    #[cfg(not(target_os = "linux"))]
    {
        accelkit_core::system::process_rss_bytes()
    }
}

/// Reads the host, keeping the CPU counters between readings.
pub struct HostReader {
    last: Option<(CpuTimes, Vec<(u32, CpuTimes)>)>,
    at: Instant,
    /// The last window's CPU use (whole, per core, its seconds), which a reading sooner than
    /// [`MIN_INTERVAL`] after it repeats.
    window: Option<(f32, Vec<f32>, f64)>,
    #[cfg(target_os = "linux")]
    rapl: super::rapl::Rapl,
    #[cfg(not(target_os = "linux"))]
    sys: Option<sysinfo::System>,
}

/// The shortest interval CPU use is measured over: the kernel counts in jiffies (10 ms), so a
/// shorter one is mostly rounding.
pub const MIN_INTERVAL: Duration = Duration::from_millis(200);

impl HostReader {
    /// Starts the CPU counters now; the first reading's CPU use is over the time since.
    pub fn new(roots: &Roots) -> HostReader {
        #[cfg(target_os = "linux")]
        {
            HostReader {
                last: read_small(&roots.procfs.join("stat")).map(|t| {
                    let (a, c) = parse_proc_stat(&t);
                    (a.unwrap_or_default(), c)
                }),
                at: Instant::now(),
                window: None,
                rapl: super::rapl::Rapl::default(),
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = roots;
            use sysinfo::{CpuRefreshKind, MemoryRefreshKind, RefreshKind};
            let mut sys = sysinfo::System::new_with_specifics(
                RefreshKind::nothing()
                    .with_cpu(CpuRefreshKind::nothing().with_usage())
                    .with_memory(MemoryRefreshKind::everything()),
            )
            .ok();
            if let Some(s) = sys.as_mut() {
                s.refresh_cpu_usage();
            }
            HostReader {
                last: None,
                at: Instant::now(),
                window: None,
                sys,
            }
        }
    }

    /// The host now; CPU use is over the time since the window before (at least
    /// [`MIN_INTERVAL`]). A reading sooner than that after a window repeats that window's CPU
    /// use (`cpu_interval_s` says its length) and reads the rest anew, so a recorder sampling
    /// every 20 ms is not slowed to one sample in 0.2 s, nor its stop held up by a wait; only
    /// the first reading, with no window yet, waits for one. On Linux, an error when `stat` or
    /// `meminfo` under the procfs root cannot be read (missing, not a regular file, too
    /// large) or parsed; a missing `loadavg` only leaves the load average out.
    pub fn read(&mut self, roots: &Roots) -> Result<HostReading, Error> {
        let kept = match &self.window {
            Some(w) if self.at.elapsed() < MIN_INTERVAL => Some(w.clone()),
            _ => None,
        };
        if kept.is_none() {
            std::thread::sleep(MIN_INTERVAL.saturating_sub(self.at.elapsed()));
        }
        let cpu_interval_s = self.at.elapsed().as_secs_f64();
        if kept.is_none() {
            self.at = Instant::now();
        }
        #[cfg(target_os = "linux")]
        {
            let procfs_file = |name: &str| -> Result<String, Error> {
                let p = roots.procfs.join(name);
                accelkit_core::files::read_text_limited(&p, 1 << 20).map_err(|e| Error::Query {
                    interface: "procfs",
                    detail: format!("{}: {e}", p.display()),
                })
            };
            let unparsed = |name: &str| Error::Query {
                interface: "procfs",
                detail: format!(
                    "{}: not in the kernel's format",
                    roots.procfs.join(name).display()
                ),
            };
            let stat = match kept {
                Some(_) => None,
                None => Some(procfs_file("stat")?),
            };
            let memory =
                parse_meminfo(&procfs_file("meminfo")?).ok_or_else(|| unparsed("meminfo"))?;
            let (cpu_percent, cpu_per_core_percent, cpu_interval_s) = match (kept, stat) {
                (Some(w), _) => w,
                (None, stat) => {
                    let (p, cores, s) =
                        self.new_window(stat.as_deref().unwrap_or_default(), cpu_interval_s);
                    p.map(|p| (p, cores, s)).ok_or_else(|| unparsed("stat"))?
                }
            };
            let energy = self.rapl.read(&roots.sysfs);
            Ok(HostReading {
                cpu_percent,
                cpu_per_core_percent,
                cpu_interval_s,
                memory,
                load_average: read_small(&roots.procfs.join("loadavg"))
                    .and_then(|t| parse_loadavg(&t)),
                process_rss_bytes: own_rss_bytes(),
                cpu_energy_joules: energy.cpu_package_joules,
                dram_energy_joules: energy.dram_joules,
                energy_note: energy.note,
            })
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = roots;
            let zero = HostMemory {
                total_bytes: 0,
                used_bytes: 0,
                available_bytes: 0,
                swap_total_bytes: 0,
                swap_used_bytes: 0,
            };
            let Some(s) = self.sys.as_mut() else {
                return Ok(HostReading {
                    cpu_percent: 0.0,
                    cpu_per_core_percent: Vec::new(),
                    cpu_interval_s,
                    memory: zero,
                    load_average: None,
                    process_rss_bytes: None,
                    ..HostReading::default()
                });
            };
            let (cpu_percent, cpu_per_core_percent, cpu_interval_s) = match kept {
                Some(w) => w,
                None => {
                    s.refresh_cpu_usage();
                    let w = (
                        s.global_cpu_usage(),
                        s.cpus().iter().map(|c| c.usage()).collect(),
                        cpu_interval_s,
                    );
                    self.window = Some(w.clone());
                    w
                }
            };
            s.refresh_memory();
            let l = sysinfo::System::load_average();
            Ok(HostReading {
                cpu_percent,
                cpu_per_core_percent,
                cpu_interval_s,
                memory: HostMemory::of(s),
                load_average: Some([l.one, l.five, l.fifteen]),
                process_rss_bytes: own_rss_bytes(),
                ..HostReading::default()
            })
        }
    }

    /// The CPU use since the last window, from `stat` (the procfs file's text) read now, over
    /// `seconds`; it becomes the window later readings repeat. `None` for the whole when
    /// `stat` is not in the kernel's format.
    #[cfg(target_os = "linux")]
    fn new_window(&mut self, stat: &str, seconds: f64) -> (Option<f32>, Vec<f32>, f64) {
        let (all, cores) = parse_proc_stat(stat);
        let Some(all) = all else {
            return (None, Vec::new(), seconds);
        };
        let (whole, per_core) = match &self.last {
            Some((a0, c0)) => (
                all.percent_since(a0),
                cores
                    .iter()
                    .filter_map(|(n, now)| {
                        let (_, before) = c0.iter().find(|(m, _)| m == n)?;
                        Some(now.percent_since(before))
                    })
                    .collect(),
            ),
            None => (0.0, Vec::new()),
        };
        self.last = Some((all, cores));
        self.window = Some((whole, per_core.clone(), seconds));
        (Some(whole), per_core, seconds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // /proc/stat as Documentation/filesystems/proc.rst (1.8) shows it: user nice system idle
    // iowait irq softirq steal guest guest_nice, in jiffies.
    const STAT0: &str = "cpu  100 0 50 800 50 0 0 0 0 0\n\
cpu0 60 0 20 400 20 0 0 0 0 0\n\
cpu1 40 0 30 400 30 0 0 0 0 0\n\
intr 1 2 3\nctxt 5\n";
    const STAT1: &str = "cpu  250 0 100 900 50 0 0 0 0 0\n\
cpu0 160 0 70 400 20 0 0 0 0 0\n\
cpu1 90 0 30 500 30 0 0 0 0 0\n";

    #[test]
    fn cpu_use_is_the_difference_of_two_readings() {
        let (a0, c0) = parse_proc_stat(STAT0);
        let (a1, c1) = parse_proc_stat(STAT1);
        // Whole machine: busy 150+50 = 200 of 200+100 = 300 jiffies.
        let p = a1.unwrap().percent_since(&a0.unwrap());
        assert!((p - 66.666_67).abs() < 1e-3, "{p}");
        // cpu0: busy 100+50 = 150, idle 0: 100 %. cpu1: busy 50, idle 100: 33.3 %.
        assert_eq!(c1[0].0, 0);
        assert_eq!(c1[1].0, 1);
        assert_eq!(c1[0].1.percent_since(&c0[0].1), 100.0);
        assert!((c1[1].1.percent_since(&c0[1].1) - 33.333_33).abs() < 1e-3);
        // Counters that went backwards (a wrapped or reset reading) are 0, not a panic.
        assert_eq!(c0[0].1.percent_since(&c1[0].1), 0.0);
        // An offline CPU is not listed: numbers skip.
        let (_, c) = parse_proc_stat("cpu  1 0 1 1\ncpu0 1 0 1 1\ncpu2 1 0 1 1\ncpufreq 9\n");
        assert_eq!(c.iter().map(|x| x.0).collect::<Vec<_>>(), [0, 2]);
    }

    /// A reading sooner than MIN_INTERVAL after a window repeats it without waiting; the first
    /// waits for one, and one after MIN_INTERVAL measures a new window from the last.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_reading_within_the_interval_repeats_the_window_without_waiting() {
        let dir = std::env::temp_dir().join(format!("accel-host-window-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let meminfo = "MemTotal: 1000 kB\nMemAvailable: 500 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n";
        std::fs::write(dir.join("meminfo"), meminfo).unwrap();
        std::fs::write(dir.join("stat"), STAT0).unwrap();
        let roots = Roots {
            procfs: dir.clone(),
            ..Roots::default()
        };
        // The first reading waits until a window has passed since the reader was made (timed
        // from before it: the write between them can take long on a busy machine).
        let t = Instant::now();
        let mut r = HostReader::new(&roots);
        std::fs::write(dir.join("stat"), STAT1).unwrap();
        let first = r.read(&roots).unwrap();
        assert!(
            t.elapsed() >= MIN_INTERVAL,
            "the first reading waits for a window"
        );
        assert!(
            (first.cpu_percent - 66.666_67).abs() < 1e-3,
            "{}",
            first.cpu_percent
        );
        assert!(first.cpu_interval_s >= MIN_INTERVAL.as_secs_f64());
        // The counters move (all busy), but within the interval the window is repeated.
        let busy = "cpu  350 0 100 900 50 0 0 0 0 0\ncpu0 210 0 70 400 20 0 0 0 0 0\n\
cpu1 140 0 30 500 30 0 0 0 0 0\n";
        std::fs::write(dir.join("stat"), busy).unwrap();
        let t = Instant::now();
        let soon = r.read(&roots).unwrap();
        // Waiting would take most of MIN_INTERVAL (the window began just before `first`).
        assert!(t.elapsed() < MIN_INTERVAL * 3 / 4, "took {:?}", t.elapsed());
        assert_eq!(soon.cpu_percent, first.cpu_percent);
        assert_eq!(soon.cpu_per_core_percent, first.cpu_per_core_percent);
        assert_eq!(soon.cpu_interval_s, first.cpu_interval_s);
        assert_eq!(
            soon.memory.available_bytes,
            500 * 1024,
            "the rest is read anew"
        );
        // After the interval: a new window, from STAT1 to `busy` (100 busy jiffies of 100).
        std::thread::sleep(MIN_INTERVAL);
        let later = r.read(&roots).unwrap();
        assert_eq!(later.cpu_percent, 100.0);
        assert!(later.cpu_interval_s >= MIN_INTERVAL.as_secs_f64());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn meminfo_and_loadavg() {
        let m = parse_meminfo(
            "MemTotal:       16384000 kB\nMemFree:         1000000 kB\n\
MemAvailable:    4096000 kB\nBuffers: 1 kB\nSwapTotal:       2048000 kB\nSwapFree:        1024000 kB\n",
        )
        .unwrap();
        assert_eq!(m.total_bytes, 16_384_000 * 1024);
        assert_eq!(m.available_bytes, 4_096_000 * 1024);
        assert_eq!(m.used_bytes, (16_384_000 - 4_096_000) * 1024);
        assert_eq!(m.swap_used_bytes, 1_024_000 * 1024);
        assert_eq!(parse_meminfo("garbage"), None);
        assert_eq!(
            parse_loadavg("0.50 1.25 2.00 1/123 4567\n"),
            Some([0.5, 1.25, 2.0])
        );
        assert_eq!(parse_loadavg("0.5"), None);
        assert_eq!(parse_loadavg("nan 1 1 1/1 1"), None);
        assert_eq!(parse_loadavg("1 -inf 1 1/1 1"), None);
    }
}
