//! What the doctor knows of the machine, read once from roots a test can move: `rootfs`
//! (`/dev`, `/etc`, `/lib/modules`, `/tmp`, `/var/log`, `/.dockerenv`, `/usr/lib/wsl`),
//! `sysfs` and `procfs` (as node_exporter's `--path.*`). Every read is size-limited and never
//! waits on a special file (`accelkit_core::files::read_limited`); walks are bounded.
//!
//! The causes (`causes` in the cuda, xla and wgpu backends, and the doctor's `frameworks`)
//! are pure functions of a [`Machine`], so each can be tested from a tree of files; nothing
//! here loads a driver library.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where the doctor reads the machine: `/`, `/sys` and `/proc` on a real one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roots {
    /// The file system root (`/dev`, `/etc`, `/lib/modules`, `/tmp`, `/var/log` are under it).
    pub rootfs: PathBuf,
    /// `/sys`.
    pub sysfs: PathBuf,
    /// `/proc`.
    pub procfs: PathBuf,
}

impl Default for Roots {
    fn default() -> Roots {
        Roots {
            rootfs: PathBuf::from("/"),
            sysfs: PathBuf::from("/sys"),
            procfs: PathBuf::from("/proc"),
        }
    }
}

impl Roots {
    /// An absolute path (`/dev/nvidia0`) under the root file system.
    pub(crate) fn at(&self, abs: &str) -> PathBuf {
        self.rootfs.join(abs.trim_start_matches('/'))
    }
}

/// A device node and whether this user can open it for reading and writing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Node {
    /// As the user knows it (`/dev/nvidia0`), whatever the root.
    pub path: String,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    /// Whether this process may open it read-write (by its mode, owner and groups).
    pub usable: bool,
}

/// An NVIDIA GPU on the PCI bus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PciGpu {
    pub address: String,
    pub device: u16,
    /// The kernel driver bound to it (`nvidia`, `nouveau`, `vfio-pci`), if any.
    pub driver: Option<String>,
}

/// A process holding a device open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Holder {
    pub pid: u32,
    pub name: String,
    pub device: String,
}

/// The machine as the doctor sees it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Machine {
    pub roots: Option<Roots>,
    pub pci_gpus: Vec<PciGpu>,
    /// PCI functions whose configuration space reads all ones (vendor 0xffff): a device that
    /// has fallen off the bus.
    pub lost_pci: Vec<String>,
    /// An NVSwitch on the bus or its nodes (`/dev/nvidia-nvswitch*`).
    pub nvswitch: bool,
    /// A Google TPU on the bus (vendor 0x1ae0).
    pub tpu_pci: bool,
    /// `/proc/driver/nvidia/version`'s first line, and the module's version in it.
    pub module_line: Option<String>,
    pub module_version: Option<String>,
    /// `/sys/module/nvidia` or `/proc/driver/nvidia` exists.
    pub nvidia_loaded: bool,
    pub nouveau_loaded: bool,
    /// The EFI variable's last byte: Some(true) when Secure Boot is on.
    pub secure_boot: Option<bool>,
    /// The running kernel (`/proc/sys/kernel/osrelease`).
    pub kernel: Option<String>,
    /// Kernels under `/lib/modules` that have an `nvidia.ko` (any compression).
    pub kernels_with_module: Vec<String>,
    /// The user-space driver's library files in the system's folders (`libcuda.so.580.95.05`,
    /// `libnvidia-ml.so.580.95.05`): path as the machine knows it, and version.
    pub driver_files: Vec<(String, String)>,
    /// Lines of the kernel log about the NVIDIA driver (`NVRM`, `Xid`, `nvidia`, `nouveau`).
    pub kernel_log: Vec<String>,
    /// `/dev/nvidia*` (control, uvm and GPU nodes).
    pub nvidia_nodes: Vec<Node>,
    pub render_nodes: Vec<Node>,
    pub kfd: Option<Node>,
    /// `/dev/accel*` and `/dev/vfio/<n>` (TPU VMs).
    pub tpu_nodes: Vec<Node>,
    pub dxg: bool,
    /// What shows that this runs in a container (`/.dockerenv`), if anything does.
    pub container: Option<String>,
    /// 1 or 2 under the Windows Subsystem for Linux.
    pub wsl: Option<u8>,
    /// `/usr/lib/wsl/lib/libcuda.so.1` exists (WSL2's driver libraries).
    pub wsl_libcuda: bool,
    /// MIG: GPU indices with MIG capabilities, and GPU instances (`gi*`) per GPU.
    pub mig_instances: BTreeMap<u32, usize>,
    /// The variables the causes read (`CUDA_VISIBLE_DEVICES`, `NVIDIA_*`, `SLURM_*` ...).
    pub vars: BTreeMap<String, String>,
    /// `/etc/os-release`'s ID (`ubuntu`), for the command that installs a driver.
    pub distro: Option<String>,
    /// `/tmp/libtpu_lockfile` exists.
    pub tpu_lock: bool,
    /// This process's effective user id.
    pub euid: u32,
    /// Group names by id (`/etc/group`).
    pub groups: BTreeMap<u32, String>,
}

const SMALL: u64 = 64 * 1024;

fn text(p: &Path) -> Option<String> {
    accelkit_core::files::read_text_limited(p, SMALL).ok()
}

/// The variables a cause may read: these names, and every name with these prefixes.
const VARS: [&str; 12] = [
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "LD_LIBRARY_PATH",
    "PJRT_DEVICE",
    "TPU_LIBRARY_PATH",
    "KUBERNETES_SERVICE_HOST",
    "container",
    "ROCR_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL",
    "WSL_DISTRO_NAME",
];
const VAR_PREFIXES: [&str; 3] = ["SLURM_", "RAY_", "COLAB_"];

impl Machine {
    /// Reads the machine under `roots`.
    pub(crate) fn read(roots: &Roots) -> Machine {
        let mut m = Machine {
            roots: Some(roots.clone()),
            ..Machine::default()
        };
        for (k, v) in std::env::vars_os() {
            let (Some(k), Some(v)) = (k.to_str(), v.to_str()) else {
                continue;
            };
            if VARS.contains(&k) || VAR_PREFIXES.iter().any(|p| k.starts_with(p)) {
                m.vars.insert(k.to_string(), v.to_string());
            }
        }
        m.read_pci(roots);
        let version = roots.procfs.join("driver/nvidia/version");
        m.module_line = text(&version).and_then(|s| s.lines().next().map(|l| l.trim().to_string()));
        m.module_version = m.module_line.as_deref().and_then(module_version);
        m.nvidia_loaded = m.module_line.is_some()
            || roots.sysfs.join("module/nvidia").is_dir()
            || roots.procfs.join("driver/nvidia").is_dir();
        m.nouveau_loaded = roots.sysfs.join("module/nouveau").is_dir()
            || m.pci_gpus
                .iter()
                .any(|g| g.driver.as_deref() == Some("nouveau"));
        m.secure_boot = accelkit_core::files::read_limited(
            &roots
                .sysfs
                .join("firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"),
            64,
        )
        .ok()
        .and_then(|b| b.last().map(|&x| x == 1));
        m.kernel = text(&roots.procfs.join("sys/kernel/osrelease")).map(|s| s.trim().to_string());
        m.kernels_with_module = kernels_with_module(&roots.at("/lib/modules"));
        // DKMS's own tree: /var/lib/dkms/nvidia/<version>/<kernel>/<arch>/module/nvidia.ko*.
        for ver in std::fs::read_dir(roots.at("/var/lib/dkms/nvidia"))
            .into_iter()
            .flatten()
            .flatten()
            .take(16)
        {
            for k in std::fs::read_dir(ver.path())
                .into_iter()
                .flatten()
                .flatten()
                .take(64)
            {
                let name = k.file_name().to_string_lossy().into_owned();
                if k.path().is_dir()
                    && name != "source"
                    && has_nvidia_ko(&k.path(), 0, &mut 10_000)
                    && !m.kernels_with_module.contains(&name)
                {
                    m.kernels_with_module.push(name);
                }
            }
        }
        m.kernels_with_module.sort();
        m.driver_files = driver_files(roots);
        m.kernel_log = kernel_log(roots);
        m.euid = euid();
        m.groups = groups(&roots.at("/etc/group"));
        let user_groups = user_groups();
        let node = |p: &Path, shown: String| node(p, shown, m.euid, &user_groups);
        let dev = roots.at("/dev");
        let mut names: Vec<String> = std::fs::read_dir(&dev)
            .into_iter()
            .flatten()
            .flatten()
            .take(10_000)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        for n in &names {
            let p = dev.join(n);
            if n.starts_with("nvidia-nvswitch") {
                m.nvswitch = true;
            }
            if n.starts_with("nvidia") && !p.is_dir() {
                m.nvidia_nodes.extend(node(&p, format!("/dev/{n}")));
            } else if n.starts_with("accel") && !p.is_dir() {
                m.tpu_nodes.extend(node(&p, format!("/dev/{n}")));
            } else if n == "kfd" {
                m.kfd = node(&p, "/dev/kfd".into());
            } else if n == "dxg" {
                m.dxg = true;
            }
        }
        for sub in ["dri", "vfio"] {
            let mut names: Vec<String> = std::fs::read_dir(dev.join(sub))
                .into_iter()
                .flatten()
                .flatten()
                .take(1000)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            for n in names {
                let p = dev.join(sub).join(&n);
                let shown = format!("/dev/{sub}/{n}");
                if sub == "dri" && n.starts_with("renderD") {
                    m.render_nodes.extend(node(&p, shown));
                } else if sub == "vfio" && n.bytes().all(|b| b.is_ascii_digit()) {
                    m.tpu_nodes.extend(node(&p, shown));
                }
            }
        }
        m.nvswitch |= roots.procfs.join("driver/nvidia-nvswitch").is_dir();
        m.container = container(roots, &m.vars);
        let pv = text(&roots.procfs.join("version")).unwrap_or_default();
        m.wsl = if pv.contains("WSL2") || pv.contains("microsoft-standard") {
            Some(2)
        } else if pv.contains("Microsoft") {
            Some(1)
        } else if m.dxg {
            Some(2)
        } else {
            None
        };
        m.wsl_libcuda = roots.at("/usr/lib/wsl/lib/libcuda.so.1").exists();
        let caps = roots.procfs.join("driver/nvidia/capabilities");
        for e in std::fs::read_dir(&caps).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(ix) = name.strip_prefix("gpu").and_then(|i| i.parse::<u32>().ok()) else {
                continue;
            };
            let mig = e.path().join("mig");
            if mig.is_dir() {
                let gis = std::fs::read_dir(&mig)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .filter(|g| g.file_name().to_string_lossy().starts_with("gi"))
                    .count();
                m.mig_instances.insert(ix, gis);
            }
        }
        m.distro = text(&roots.at("/etc/os-release")).and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("ID="))
                .map(|v| v.trim_matches('"').to_string())
        });
        m.tpu_lock = roots.at("/tmp/libtpu_lockfile").exists();
        m
    }

    fn read_pci(&mut self, roots: &Roots) {
        let dir = roots.sysfs.join("bus/pci/devices");
        let hex = |p: PathBuf| {
            text(&p).and_then(|s| u32::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok())
        };
        let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .take(4096)
            .map(|e| e.path())
            .collect();
        entries.sort();
        for d in entries {
            let (Some(vendor), Some(class)) = (hex(d.join("vendor")), hex(d.join("class"))) else {
                continue;
            };
            if vendor == 0xffff {
                self.lost_pci.push(
                    d.file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                );
            }
            if vendor == 0x1ae0 {
                self.tpu_pci = true;
            }
            if vendor != 0x10de {
                continue;
            }
            // NVSwitch: a bridge (class 0x0680) from NVIDIA.
            if class >> 8 == 0x0680 {
                self.nvswitch = true;
            }
            if class >> 16 != 0x03 {
                continue;
            }
            self.pci_gpus.push(PciGpu {
                address: d
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                device: hex(d.join("device")).unwrap_or(0) as u16,
                driver: std::fs::read_link(d.join("driver"))
                    .ok()
                    .and_then(|t| t.file_name().map(|n| n.to_string_lossy().into_owned())),
            });
        }
    }

    /// A variable's value, if set.
    pub(crate) fn var(&self, k: &str) -> Option<&str> {
        self.vars.get(k).map(String::as_str)
    }

    /// Whether this machine shows an NVIDIA GPU anywhere: the bus, the driver, its nodes.
    pub(crate) fn nvidia_gpu(&self) -> bool {
        !self.pci_gpus.is_empty()
            || self.module_line.is_some()
            || self.nvidia_nodes.iter().any(|n| gpu_node(&n.path))
    }

    /// The GPUs' own device files (`/dev/nvidia0`), not the control or UVM nodes.
    pub(crate) fn gpu_nodes(&self) -> Vec<&Node> {
        self.nvidia_nodes
            .iter()
            .filter(|n| gpu_node(&n.path))
            .collect()
    }

    /// The command that gives this user a device file's group (`usermod -aG video`), where
    /// the group may open it and is not root's; None otherwise.
    pub(crate) fn join_group(&self, n: &Node) -> Option<String> {
        let group = self.group(n.gid);
        (n.mode & 0o060 == 0o060 && n.gid != 0).then(|| {
            format!("`sudo usermod -aG {group} $USER`, then log out and in (or `newgrp {group}`)")
        })
    }

    /// How many NVIDIA GPUs the machine has, from the best source there is.
    pub(crate) fn gpu_count(&self) -> usize {
        let nodes = self.gpu_nodes().len();
        self.pci_gpus.len().max(nodes)
    }

    /// The name of group `gid`, or the number.
    pub(crate) fn group(&self, gid: u32) -> String {
        self.groups
            .get(&gid)
            .cloned()
            .unwrap_or_else(|| format!("gid {gid}"))
    }

    /// Processes holding a device whose path `wanted` accepts, with their names: read from
    /// `/proc/<pid>/fd` (bounded; other users' processes show only to root).
    pub(crate) fn holders(&self, wanted: impl Fn(&str) -> bool) -> Vec<Holder> {
        let Some(roots) = &self.roots else {
            return Vec::new();
        };
        let own = std::process::id();
        let mut out = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(400);
        let mut pids: Vec<u32> = std::fs::read_dir(&roots.procfs)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .take(100_000)
            .collect();
        pids.sort_unstable();
        for pid in pids {
            if pid == own || std::time::Instant::now() > deadline {
                continue;
            }
            let fd = roots.procfs.join(pid.to_string()).join("fd");
            for e in std::fs::read_dir(&fd)
                .into_iter()
                .flatten()
                .flatten()
                .take(4096)
            {
                let Ok(t) = std::fs::read_link(e.path()) else {
                    continue;
                };
                let t = t.to_string_lossy().into_owned();
                if wanted(&t) && !out.iter().any(|h: &Holder| h.pid == pid && h.device == t) {
                    let name = text(&roots.procfs.join(pid.to_string()).join("comm"))
                        .map(|s| clean(s.trim()))
                        .unwrap_or_else(|| "?".into());
                    out.push(Holder {
                        pid,
                        name,
                        device: t,
                    });
                }
            }
        }
        out
    }
}

/// A GPU's own node (`/dev/nvidia0`), not the control or UVM nodes.
pub(crate) fn gpu_node(path: &str) -> bool {
    path.strip_prefix("/dev/nvidia")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// `580.82.07` from `NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.82.07  Tue ...`
/// (and the open modules' `NVIDIA UNIX Open Kernel Module for x86_64  580.82.07  Release ...`).
pub(crate) fn module_version(line: &str) -> Option<String> {
    let after = line.split("Kernel Module").nth(1)?;
    after
        .split_whitespace()
        .find(|w| w.contains('.') && w.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
        .map(str::to_string)
}

fn kernels_with_module(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .take(64)
    {
        let k = e.file_name().to_string_lossy().into_owned();
        // A kernel's tree holds thousands of modules: at most 30,000 entries looked at.
        let mut budget = 30_000u32;
        if has_nvidia_ko(&e.path(), 0, &mut budget) {
            out.push(k);
        }
    }
    out.sort();
    out
}

/// Whether `nvidia.ko` (or `.ko.zst`, `.ko.xz`, `.ko.gz`) is under `dir`, at most 6 folders
/// deep (`updates/dkms`, `kernel/drivers/video`, `extra`, `nvidia`), within `budget` entries.
fn has_nvidia_ko(dir: &Path, depth: u32, budget: &mut u32) -> bool {
    if depth > 6 {
        return false;
    }
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if *budget == 0 {
            return false;
        }
        *budget -= 1;
        let n = e.file_name();
        let n = n.to_string_lossy();
        if n == "build" || n == "source" {
            continue;
        }
        let found = match e.file_type() {
            Ok(t) if t.is_dir() => has_nvidia_ko(&e.path(), depth + 1, budget),
            _ => n == "nvidia.ko" || n.starts_with("nvidia.ko."),
        };
        if found {
            return true;
        }
    }
    false
}

/// The driver's library files in the folders a distribution or the container toolkit puts
/// them (WSL's included), with the versions their names carry.
fn driver_files(roots: &Roots) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for &dir in accelkit_core::system::NVIDIA_DRIVER_DIRS {
        let mut names: Vec<String> = std::fs::read_dir(roots.at(dir))
            .into_iter()
            .flatten()
            .flatten()
            .take(20_000)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("libcuda.so") || n.starts_with("libnvidia-ml.so"))
            .collect();
        names.sort();
        for n in names {
            // `libcuda.so.1` carries the version of the file it points to (the one the loader
            // takes), where it is a link.
            let target = std::fs::read_link(roots.at(dir).join(&n))
                .ok()
                .and_then(|t| t.file_name().map(|f| f.to_string_lossy().into_owned()))
                .unwrap_or_else(|| n.clone());
            let v = target.split_once(".so.").map(|x| x.1).unwrap_or("");
            let version = if v.matches('.').count() >= 1
                && v.bytes().all(|b| b.is_ascii_digit() || b == b'.')
            {
                v.to_string()
            } else {
                String::new()
            };
            out.push((format!("{dir}/{n}"), version));
        }
    }
    out
}

/// The kernel log's lines about NVIDIA GPUs: `/dev/kmsg` (readable by root) and
/// `/var/log/kern.log`'s last 512 KiB, at most 400 lines.
fn kernel_log(roots: &Roots) -> Vec<String> {
    let mut lines = Vec::new();
    let keep = |l: &str| {
        l.contains("NVRM")
            || l.contains("nvidia")
            || l.contains("nouveau")
            || l.contains("Xid")
            || l.contains("NVIDIA")
    };
    #[cfg(target_os = "linux")]
    {
        use std::io::Read;
        use std::os::unix::fs::OpenOptionsExt;
        let kmsg = roots.at("/dev/kmsg");
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&kmsg)
        {
            let mut buf = vec![0u8; 8192];
            let mut total = 0usize;
            let mut records = 0;
            // One record per read on the device (ends with EAGAIN); a file ends at 0.
            while total < 4 << 20 && records < 20_000 {
                match f.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        total += n;
                        records += 1;
                        for l in String::from_utf8_lossy(&buf[..n]).lines() {
                            // `6,1234,5678,-;message`: the message follows the first ';'.
                            let msg = l.split_once(';').map_or(l, |(_, m)| m);
                            if keep(msg) {
                                lines.push(msg.to_string());
                            }
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) if e.raw_os_error() == Some(libc::EPIPE) => {}
                    Err(_) => break,
                }
            }
        }
    }
    let log = roots.at("/var/log/kern.log");
    // A FIFO or a device in its place is refused without waiting on it.
    if let Ok(f) = accelkit_core::files::open_regular(&log) {
        use std::io::{Read, Seek, SeekFrom};
        let mut f = f;
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        {
            let _ = f.seek(SeekFrom::Start(len.saturating_sub(512 * 1024)));
            let mut b = Vec::new();
            let _ = f.take(512 * 1024).read_to_end(&mut b);
            lines.extend(
                String::from_utf8_lossy(&b)
                    .lines()
                    .filter(|l| keep(l))
                    .map(str::to_string),
            );
        }
    }
    let n = lines.len();
    lines.drain(..n.saturating_sub(400));
    lines
}

fn container(roots: &Roots, vars: &BTreeMap<String, String>) -> Option<String> {
    if roots.at("/.dockerenv").exists() {
        return Some("/.dockerenv exists (Docker)".into());
    }
    if roots.at("/run/.containerenv").exists() {
        return Some("/run/.containerenv exists (Podman)".into());
    }
    if let Some(c) = vars.get("container").filter(|c| !c.is_empty()) {
        return Some(format!("container={c}"));
    }
    let cg = text(&roots.procfs.join("1/cgroup")).unwrap_or_default();
    for (word, what) in [
        ("kubepods", "Kubernetes"),
        ("docker", "Docker"),
        ("containerd", "containerd"),
        ("libpod", "Podman"),
        ("lxc", "LXC"),
    ] {
        if cg.contains(word) {
            return Some(format!("/proc/1/cgroup names {word} ({what})"));
        }
    }
    vars.get("KUBERNETES_SERVICE_HOST")
        .map(|_| "KUBERNETES_SERVICE_HOST is set (a Kubernetes pod)".into())
}

#[cfg(target_os = "linux")]
fn euid() -> u32 {
    // SAFETY: geteuid takes nothing and cannot fail.
    unsafe { libc::geteuid() }
}
#[cfg(not(target_os = "linux"))]
fn euid() -> u32 {
    0
}

/// This process's group ids: its effective group and its supplementary groups.
#[cfg(target_os = "linux")]
fn user_groups() -> Vec<u32> {
    let mut g = vec![0 as libc::gid_t; 256];
    // SAFETY: `g` holds 256 gid_t; getgroups writes at most that many and returns the count
    // (or -1, with nothing written, when there are more).
    let n = unsafe { libc::getgroups(256, g.as_mut_ptr()) };
    g.truncate(n.max(0) as usize);
    // SAFETY: getegid takes nothing and cannot fail.
    g.push(unsafe { libc::getegid() });
    g
}
#[cfg(not(target_os = "linux"))]
fn user_groups() -> Vec<u32> {
    Vec::new()
}

#[cfg(target_os = "linux")]
fn node(p: &Path, shown: String, euid: u32, groups: &[u32]) -> Option<Node> {
    use std::os::unix::fs::MetadataExt;
    let md = std::fs::metadata(p).ok()?;
    let mode = md.mode() & 0o7777;
    let bits = if euid == 0 {
        0o6
    } else if md.uid() == euid {
        mode >> 6
    } else if groups.contains(&md.gid()) {
        mode >> 3
    } else {
        mode
    };
    Some(Node {
        path: shown,
        mode,
        uid: md.uid(),
        gid: md.gid(),
        usable: bits & 0o6 == 0o6,
    })
}
#[cfg(not(target_os = "linux"))]
fn node(_: &Path, shown: String, _: u32, _: &[u32]) -> Option<Node> {
    Some(Node {
        path: shown,
        mode: 0o666,
        uid: 0,
        gid: 0,
        usable: true,
    })
}

/// A name read from a file, kept short and printable (escaping for the terminal or JSON is
/// the renderer's).
fn clean(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).take(64).collect()
}

fn groups(p: &Path) -> BTreeMap<u32, String> {
    text(p)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?;
            let gid = f.nth(1)?.parse().ok()?;
            Some((gid, clean(name)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_module_version_is_read_from_both_module_flavours() {
        assert_eq!(
            module_version(
                "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 \
                 19:39:15 UTC 2024"
            )
            .as_deref(),
            Some("535.183.01")
        );
        assert_eq!(
            module_version(
                "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.82.07  Release \
                 Build  (dvs-builder@U16-I3-B03-4-3)  Wed Aug 27 2025"
            )
            .as_deref(),
            Some("580.82.07")
        );
        assert_eq!(module_version("garbage"), None);
    }

    #[test]
    fn only_numbered_nodes_are_gpus() {
        assert!(gpu_node("/dev/nvidia0"));
        assert!(gpu_node("/dev/nvidia12"));
        assert!(!gpu_node("/dev/nvidiactl"));
        assert!(!gpu_node("/dev/nvidia-uvm"));
        assert!(!gpu_node("/dev/nvidia"));
    }
}
