//! Which CPUs this process may use and how much of them: the affinity mask, the cgroup's CPU
//! quota and the cores' topology, read once. They decide how many threads the kernels split
//! work over (`threads::threads`) and where matmul's helper thread runs (`helper_cpus`).

/// A set of CPU numbers (below `MAX_CPUS`), as bits.
#[derive(Clone, Copy, PartialEq, Eq, Default, Debug)]
pub(crate) struct CpuSet([u64; MAX_CPUS / 64]);

/// CPUs past this are ignored (glibc's CPU_SETSIZE).
pub(crate) const MAX_CPUS: usize = 1024;

impl CpuSet {
    pub(crate) fn of(cpus: impl IntoIterator<Item = usize>) -> CpuSet {
        let mut s = CpuSet::default();
        for c in cpus {
            s.insert(c);
        }
        s
    }
    pub(crate) fn insert(&mut self, c: usize) {
        if c < MAX_CPUS {
            self.0[c / 64] |= 1 << (c % 64);
        }
    }
    pub(crate) fn contains(&self, c: usize) -> bool {
        c < MAX_CPUS && self.0[c / 64] & (1 << (c % 64)) != 0
    }
    pub(crate) fn len(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }
    pub(crate) fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        (0..MAX_CPUS).filter(|&c| self.contains(c))
    }
    pub(crate) fn minus(&self, other: &CpuSet) -> CpuSet {
        let mut s = *self;
        for (w, o) in s.0.iter_mut().zip(other.0) {
            *w &= !o;
        }
        s
    }
    pub(crate) fn and(&self, other: &CpuSet) -> CpuSet {
        let mut s = *self;
        for (w, o) in s.0.iter_mut().zip(other.0) {
            *w &= o;
        }
        s
    }
}

/// A kernel CPU list ("0-3,8,10-11", as in sysfs's topology files and cpuset.cpus); `None`
/// for anything else.
pub(crate) fn parse_list(s: &str) -> Option<CpuSet> {
    let mut set = CpuSet::default();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<usize>().ok()?, b.parse::<usize>().ok()?),
            None => {
                let c = part.parse::<usize>().ok()?;
                (c, c)
            }
        };
        if lo > hi || hi >= MAX_CPUS {
            return None;
        }
        (lo..=hi).for_each(|c| set.insert(c));
    }
    Some(set)
}

/// How many threads to split work over, given the CPUs allowed and the cgroup's quota in
/// CPUs: the quota rounded to the nearest whole CPU (a container given 1.5 CPUs gets two
/// threads: two threads throttled to 1.5 CPUs still do half again as much as one, where
/// std's `available_parallelism` rounds down to one), never more than the CPUs allowed,
/// never fewer than one.
pub(crate) fn threads_for(allowed: usize, quota: Option<f64>) -> usize {
    let by_quota = quota.map_or(usize::MAX, |q| (q + 0.5).floor().max(1.0) as usize);
    allowed.min(by_quota).max(1)
}

/// Where matmul's helper thread should run, decided once when it starts: the CPUs allowed
/// but the caller's own and its SMT siblings (two threads of one product on one core
/// share its FMA units), preferring the caller's package; the allowed CPUs but the
/// caller's where only siblings remain; `None` where no other CPU is allowed (one thread
/// is then faster than two taking turns on one CPU).
pub(crate) fn helper_cpus(
    allowed: &CpuSet,
    me: usize,
    siblings: &CpuSet,
    package: &CpuSet,
) -> Option<CpuSet> {
    let others = allowed.minus(&CpuSet::of([me]));
    if others.len() == 0 {
        return None;
    }
    let other_cores = others.minus(siblings);
    let near = other_cores.and(package);
    Some(if near.len() > 0 {
        near
    } else if other_cores.len() > 0 {
        other_cores
    } else {
        others
    })
}

#[cfg(target_os = "linux")]
pub(crate) use linux::*;

#[cfg(target_os = "linux")]
mod linux {
    use super::{parse_list, CpuSet, MAX_CPUS};
    use std::path::{Path, PathBuf};

    /// Small kernel files (cgroup and topology): well under this.
    const LIMIT: u64 = 64 << 10;

    fn read(path: &Path) -> Option<String> {
        accelkit_core::files::read_text_limited(path, LIMIT).ok()
    }

    fn to_libc(s: &CpuSet) -> libc::cpu_set_t {
        // SAFETY: cpu_set_t is plain bits (all-zero is the empty set); CPU_SET touches only
        // bit c, below CPU_SETSIZE (MAX_CPUS).
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for c in s.iter() {
            unsafe { libc::CPU_SET(c, &mut set) };
        }
        set
    }

    /// The CPUs the calling thread may run on.
    pub(crate) fn allowed() -> Option<CpuSet> {
        // SAFETY: as in `to_libc`; sched_getaffinity writes at most size_of::<cpu_set_t>()
        // bytes into `set`, and CPU_ISSET reads bit c < CPU_SETSIZE.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let ok =
            unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
        (ok == 0)
            .then(|| CpuSet::of((0..MAX_CPUS).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })))
    }

    /// Restricts thread `tid` (0: the calling one) to `cpus`; false if the kernel refused.
    pub(crate) fn restrict(tid: libc::pid_t, cpus: &CpuSet) -> bool {
        let set = to_libc(cpus);
        // SAFETY: sched_setaffinity reads size_of::<cpu_set_t>() bytes of `set`.
        unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0 }
    }

    /// The CPU the calling thread runs on now.
    pub(crate) fn current() -> Option<usize> {
        // SAFETY: sched_getcpu has no preconditions (a vDSO call).
        usize::try_from(unsafe { libc::sched_getcpu() }).ok()
    }

    /// CPU `cpu`'s SMT siblings and package from sysfs (each holds `cpu` itself; just `cpu`
    /// where sysfs does not say).
    pub(crate) fn topology(cpu: usize) -> (CpuSet, CpuSet) {
        let dir = PathBuf::from(format!("/sys/devices/system/cpu/cpu{cpu}/topology"));
        let list = |name: &str| {
            let mut s = read(&dir.join(name))
                .and_then(|t| parse_list(&t))
                .unwrap_or_default();
            s.insert(cpu);
            s
        };
        (list("thread_siblings_list"), list("package_cpus_list"))
    }

    /// This process's CPU quota in CPUs from its cgroup (v2 `cpu.max`, v1
    /// `cpu.cfs_quota_us` / `cpu.cfs_period_us`), the tightest of its cgroup and the
    /// parents visible here; `None` without one.
    pub(crate) fn quota() -> Option<f64> {
        let cgroups = read(Path::new("/proc/self/cgroup"))?;
        let mounts = read(Path::new("/proc/self/mountinfo"))?;
        quota_in(&cgroups, &mounts, &|p| read(p))
    }

    /// `quota` from the texts of /proc/self/cgroup and /proc/self/mountinfo, reading the
    /// cgroup files through `read`.
    pub(crate) fn quota_in(
        cgroups: &str,
        mounts: &str,
        read: &dyn Fn(&Path) -> Option<String>,
    ) -> Option<f64> {
        let mut best: Option<f64> = None;
        for line in cgroups.lines() {
            let mut f = line.splitn(3, ':');
            let (Some(id), Some(ctrls), Some(path)) = (f.next(), f.next(), f.next()) else {
                continue;
            };
            let v2 = id == "0" && ctrls.is_empty();
            if !v2 && !ctrls.split(',').any(|c| c == "cpu") {
                continue;
            }
            let Some((root, point)) = mount_of(mounts, v2) else {
                continue;
            };
            // The cgroup's path relative to the mount's root (a container sees "/").
            let rel = path
                .strip_prefix(root.trim_end_matches('/'))
                .unwrap_or(path);
            let mut dir = PathBuf::from(&point);
            dir.extend(rel.split('/').filter(|s| !s.is_empty() && *s != ".."));
            loop {
                let q = if v2 {
                    read(&dir.join("cpu.max")).and_then(|t| {
                        let mut w = t.split_whitespace();
                        let (q, p) = (w.next()?, w.next()?);
                        ratio(q.parse().ok()?, p.parse().ok()?)
                    })
                } else {
                    let num = |name: &str| read(&dir.join(name))?.trim().parse::<i64>().ok();
                    num("cpu.cfs_quota_us")
                        .zip(num("cpu.cfs_period_us"))
                        .and_then(|(q, p)| ratio(q, p))
                };
                if let Some(q) = q {
                    best = Some(best.map_or(q, |b: f64| b.min(q)));
                }
                if dir == Path::new(&point) || !dir.pop() {
                    break;
                }
            }
        }
        best
    }

    /// quota / period in CPUs; `None` for no quota (-1, "max") or nonsense.
    fn ratio(quota: i64, period: i64) -> Option<f64> {
        (quota > 0 && period > 0).then(|| quota as f64 / period as f64)
    }

    /// The root and mount point of the cgroup2 mount (`v2`) or of the v1 mount holding the
    /// `cpu` controller, from /proc/self/mountinfo.
    fn mount_of(mounts: &str, v2: bool) -> Option<(String, String)> {
        mounts.lines().find_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let pre: Vec<&str> = pre.split(' ').collect();
            let mut post = post.split(' ');
            let fstype = post.next()?;
            let _source = post.next();
            let opts = post.next().unwrap_or("");
            let ok = if v2 {
                fstype == "cgroup2"
            } else {
                fstype == "cgroup" && opts.split(',').any(|o| o == "cpu")
            };
            (ok && pre.len() >= 5).then(|| (pre[3].to_string(), pre[4].to_string()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_as_the_kernel_writes_them() {
        assert_eq!(
            parse_list("0-3,8,10-11\n"),
            Some(CpuSet::of([0, 1, 2, 3, 8, 10, 11]))
        );
        assert_eq!(parse_list("5"), Some(CpuSet::of([5])));
        assert_eq!(parse_list(""), Some(CpuSet::default()));
        for bad in ["3-1", "a", "1-", "0-2000", "-"] {
            assert_eq!(parse_list(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn threads_follow_the_mask_and_the_quota_rounded() {
        assert_eq!(threads_for(2, None), 2);
        assert_eq!(threads_for(2, Some(1.5)), 2);
        assert_eq!(threads_for(16, Some(1.2)), 1);
        assert_eq!(threads_for(16, Some(0.25)), 1);
        assert_eq!(threads_for(1, Some(8.0)), 1);
        assert_eq!(threads_for(16, Some(3.6)), 4);
        assert_eq!(threads_for(0, None), 1);
    }

    #[test]
    fn the_helper_goes_to_another_core_of_the_callers_package() {
        // 2 packages x 2 cores x 2 SMT threads: cpu n and n+4 are siblings; 0-1,4-5 package 0.
        let all = CpuSet::of(0..8);
        let sib0 = CpuSet::of([0, 4]);
        let pkg0 = CpuSet::of([0, 1, 4, 5]);
        assert_eq!(helper_cpus(&all, 0, &sib0, &pkg0), Some(CpuSet::of([1, 5])));
        // Only the caller's package's other core is excluded by the mask: the other package.
        let mask = CpuSet::of([0, 4, 2, 3]);
        assert_eq!(
            helper_cpus(&mask, 0, &sib0, &pkg0),
            Some(CpuSet::of([2, 3]))
        );
        // Only the caller's sibling is left: better than nothing.
        assert_eq!(helper_cpus(&sib0, 0, &sib0, &pkg0), Some(CpuSet::of([4])));
        // One CPU: no helper.
        assert_eq!(
            helper_cpus(&CpuSet::of([3]), 3, &CpuSet::of([3]), &pkg0),
            None
        );
        // Two plain vCPUs, as on this workplace's VMs.
        let two = CpuSet::of([0, 1]);
        assert_eq!(
            helper_cpus(&two, 1, &CpuSet::of([1]), &two),
            Some(CpuSet::of([0]))
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn quotas_are_read_from_v1_and_v2_cgroups_as_containers_mount_them() {
        use std::collections::HashMap;
        use std::path::Path;
        let files: HashMap<&str, &str> = HashMap::from([
            ("/sys/fs/cgroup/kubepods/pod1/cpu.max", "150000 100000\n"),
            ("/sys/fs/cgroup/kubepods/cpu.max", "max 100000\n"),
            ("/sys/fs/cgroup/cpu/job/cpu.cfs_quota_us", "250000\n"),
            ("/sys/fs/cgroup/cpu/job/cpu.cfs_period_us", "100000\n"),
            ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n"),
            ("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n"),
            ("/sys/fs/cgroup/cpu.max", "400000 100000\n"),
        ]);
        let read = |p: &Path| files.get(p.to_str().unwrap()).map(|s| s.to_string());
        let v2_mounts = "30 25 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw\n";
        // On the host: the pod's 1.5 CPUs, tighter than its parents'.
        let q = linux::quota_in("0::/kubepods/pod1\n", v2_mounts, &read);
        assert_eq!(q, Some(1.5));
        // Inside the container's namespace the cgroup is "/" and the mount shows it at the
        // mount point: the cgroup at /sys/fs/cgroup itself (here 4 CPUs).
        assert_eq!(linux::quota_in("0::/\n", v2_mounts, &read), Some(4.0));
        let v1_mounts = "31 25 0:27 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n\
                         32 25 0:28 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";
        let v1 = "4:memory:/job\n1:cpu:/job\n0::/\n";
        assert_eq!(linux::quota_in(v1, v1_mounts, &read), Some(2.5));
        // No quota anywhere, or no cgroup file at all.
        assert_eq!(linux::quota_in("1:cpu:/\n", v1_mounts, &read), None);
        assert_eq!(linux::quota_in("0::/other\n", v2_mounts, &|_| None), None);
        // A path that tries to climb out of the mount stays inside it.
        assert_eq!(
            linux::quota_in("0::/../../etc\n", v2_mounts, &read),
            Some(4.0)
        );
    }
}
