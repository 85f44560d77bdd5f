//! Causes outside CUDA: TPUs (libtpu's lock file, a TPU VM without libtpu, torch_xla without
//! `PJRT_DEVICE`), the device files of the GPU APIs (DRM render nodes, AMD's `/dev/kfd`), and
//! Apple's GPU (macOS too old for PyTorch's MPS, an x86 Python under Rosetta, Intel Macs).

use super::frameworks::Python;
use crate::base::facts::{Machine, Node};
use crate::base::finding::{finding, Finding};

/// Whether libtpu is installed where a framework finds it.
fn has_libtpu(m: &Machine, py: &Python) -> bool {
    py.dist("libtpu").is_some()
        || py.dist("libtpu_nightly").is_some()
        || py
            .site_packages
            .as_deref()
            .is_some_and(|sp| sp.join("libtpu/libtpu.so").is_file())
        || m.var("TPU_LIBRARY_PATH").is_some()
}

/// TPU and torch_xla causes, the root cause first.
/// `libtpu_plugin`: the XLA backend found libtpu as a PJRT plugin.
pub(super) fn tpu(m: &Machine, py: &Python, libtpu_plugin: bool) -> Vec<Finding> {
    let mut v = Vec::new();
    let tpu_vm = !m.tpu_nodes.is_empty() || m.tpu_pci;
    let libtpu = libtpu_plugin || has_libtpu(m, py);
    if m.tpu_lock && (tpu_vm || libtpu) {
        let holders = m.holders(|p| p.starts_with("/dev/accel") || p.starts_with("/dev/vfio/"));
        if holders.is_empty() {
            v.push(finding(
                "tpu.lock_stale",
                "a stale libtpu lock file",
                "/tmp/libtpu_lockfile exists, and no process holds a TPU (/dev/accel*, \
                 /dev/vfio/*): a process that used the TPU ended without removing it, and \
                 libtpu now refuses to start (\"TPU in use\")",
                "`rm /tmp/libtpu_lockfile`, then start the program again",
            ));
        } else {
            let pids: Vec<String> = holders.iter().map(|h| h.pid.to_string()).collect();
            v.push(finding(
                "tpu.lock_held",
                "another process holds the TPU",
                format!(
                    "/tmp/libtpu_lockfile is held: {} (libtpu allows one process per TPU)",
                    holders
                        .iter()
                        .map(|h| format!("PID {} ({}) has {} open", h.pid, h.name, h.device))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                format!(
                    "stop it first (`kill {}`; a notebook: shut its kernel down), then run \
                     yours; do not remove the lock file while it runs",
                    pids.join(" ")
                ),
            ));
        }
    }
    if tpu_vm && !libtpu {
        v.push(finding(
            "tpu.no_libtpu",
            "a TPU VM without libtpu",
            format!(
                "TPU devices are here ({}), but no libtpu is installed in the Python \
                 environment{}",
                if m.tpu_nodes.is_empty() {
                    "a Google TPU on the PCI bus".to_string()
                } else {
                    m.tpu_nodes
                        .iter()
                        .map(|n| n.path.as_str())
                        .collect::<Vec<_>>()
                        .join(" ")
                },
                py.site_packages
                    .as_deref()
                    .map(|p| format!(" ({})", p.display()))
                    .unwrap_or_default()
            ),
            if py.dist("torch_xla").is_some() {
                "`pip install \"torch_xla[tpu]\"` (it brings libtpu)"
            } else {
                "`pip install -U \"jax[tpu]\"` (JAX with libtpu), or `pip install libtpu`"
            },
        ));
    }
    if let Some(x) = py.dist("torch_xla") {
        if m.var("PJRT_DEVICE").is_none_or(|d| d.trim().is_empty()) {
            v.push(finding(
                "torchxla.no_pjrt_device",
                "torch_xla without PJRT_DEVICE",
                format!(
                    "torch_xla {} is installed and PJRT_DEVICE is not set: torch_xla does not \
                     know which device to use",
                    x.version
                ),
                format!(
                    "`export PJRT_DEVICE={}` before starting Python (or \
                     `os.environ[\"PJRT_DEVICE\"] = \"{0}\"` before `import torch_xla`)",
                    if tpu_vm {
                        "TPU"
                    } else if m.nvidia_gpu() {
                        "CUDA"
                    } else {
                        "CPU"
                    }
                ),
            ));
        }
    }
    v
}

fn blocked<'a>(nodes: impl Iterator<Item = &'a Node>) -> Vec<&'a Node> {
    nodes.filter(|n| !n.usable).collect()
}

fn join_group(m: &Machine, n: &Node) -> String {
    m.join_group(n).unwrap_or_else(|| {
        format!(
            "{} is mode {:o} for group {}: a udev rule should give it to group render with \
             mode 660 (`/etc/udev/rules.d/70-render.rules`)",
            n.path,
            n.mode,
            m.group(n.gid)
        )
    })
}

/// The GPU APIs' device files (Vulkan, Metal's cousins, ROCm): render nodes and `/dev/kfd`.
pub(super) fn gpu_api(m: &Machine) -> Vec<Finding> {
    let mut v = Vec::new();
    let render = blocked(m.render_nodes.iter());
    if let Some(n) = render.first() {
        let group = m.group(n.gid);
        v.push(finding(
            "gpu.render_permission",
            "this user cannot open the GPU's render node",
            format!(
                "{} cannot be opened read-write by uid {} (mode {:o}, group {group}): Vulkan \
                 and ROCm see no GPU",
                render
                    .iter()
                    .map(|n| n.path.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                m.euid,
                n.mode
            ),
            join_group(m, n),
        ));
    }
    if let Some(n) = m.kfd.as_ref().filter(|n| !n.usable) {
        let group = m.group(n.gid);
        v.push(finding(
            "amd.kfd_permission",
            "this user cannot open /dev/kfd (ROCm)",
            format!(
                "/dev/kfd cannot be opened read-write by uid {} (mode {:o}, group {group}): \
                 ROCm and PyTorch's ROCm build see no GPU",
                m.euid, n.mode
            ),
            join_group(m, n),
        ));
    }
    v
}

/// What the doctor knows of a Mac.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Mac {
    /// `sw_vers -productVersion` as (major, minor).
    pub macos: (u32, u32),
    /// `hw.optional.arm64`: the machine is Apple silicon.
    pub apple_silicon: bool,
    /// `sysctl.proc_translated`: this process runs under Rosetta.
    pub translated: bool,
    /// The installed PyTorch's version, if any.
    pub torch: Option<String>,
}

/// Apple's GPU through PyTorch's MPS.
pub(super) fn apple(mac: &Mac) -> Vec<Finding> {
    let mut v = Vec::new();
    if mac.translated {
        v.push(finding(
            "apple.rosetta",
            "an x86 Python under Rosetta",
            "this process is an x86_64 binary translated by Rosetta on Apple silicon: \
             PyTorch's x86 wheels have no MPS",
            "install an arm64 Python (python.org's universal installer, `brew install python` \
             under /opt/homebrew, or Miniforge arm64), then `pip install torch` in it; \
             `python -c \"import platform; print(platform.machine())\"` must say arm64",
        ));
    } else if !mac.apple_silicon {
        v.push(finding(
            "apple.intel_mac",
            "an Intel Mac",
            "this Mac has an Intel CPU: PyTorch's MPS needs Apple silicon (M1 or newer); \
             PyTorch stopped building for Intel Macs after 2.2",
            "run on the CPU here, or use Apple silicon, or a CUDA machine (Colab)",
        ));
    }
    let need = match mac.torch.as_deref().map(|t| {
        let mut p = t.split('.').map(|x| x.parse::<u32>().unwrap_or(0));
        (p.next().unwrap_or(0), p.next().unwrap_or(0))
    }) {
        Some(t) if t >= (2, 9) => (14, 0),
        _ => (12, 3),
    };
    if mac.apple_silicon && mac.macos < need {
        v.push(finding(
            "apple.macos_too_old",
            "macOS is older than PyTorch's MPS needs",
            format!(
                "macOS {}.{}; PyTorch {} needs macOS {}.{} or newer for MPS",
                mac.macos.0,
                mac.macos.1,
                mac.torch.as_deref().unwrap_or("(any)"),
                need.0,
                need.1
            ),
            format!(
                "update macOS to {}.{} or newer (System Settings → General → Software Update)",
                need.0, need.1
            ),
        ));
    }
    v
}

/// This Mac, from `sysctl -n` and `sw_vers` (each a process start of a few milliseconds).
#[cfg(target_os = "macos")]
pub(super) fn this_mac(py: &Python) -> Option<Mac> {
    let ask = |prog: &str, args: &[&str]| -> Option<String> {
        let o = std::process::Command::new(prog)
            .args(args)
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .ok()?;
        Some(String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let ver = ask("sw_vers", &["-productVersion"])?;
    let mut p = ver.split('.').map(|x| x.parse::<u32>().unwrap_or(0));
    let flag = |name: &str| ask("sysctl", &["-n", name]).is_some_and(|v| v == "1");
    Some(Mac {
        macos: (p.next().unwrap_or(0), p.next().unwrap_or(0)),
        apple_silicon: flag("hw.optional.arm64"),
        translated: flag("sysctl.proc_translated"),
        torch: py.torch.as_ref().map(|t| t.0.clone()),
    })
}

#[cfg(not(target_os = "macos"))]
pub(super) fn this_mac(_: &Python) -> Option<Mac> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[Finding]) -> Vec<&str> {
        v.iter().map(|f| f.cause).collect()
    }

    #[test]
    fn a_mac_is_judged_by_its_cpu_its_translation_and_its_version() {
        let ok = Mac {
            macos: (15, 2),
            apple_silicon: true,
            translated: false,
            torch: Some("2.9.1".into()),
        };
        assert!(apple(&ok).is_empty());
        // pytorch/pytorch#77764: an x86 Python on an M1 reports mps unavailable.
        let rosetta = Mac {
            translated: true,
            ..ok.clone()
        };
        assert_eq!(ids(&apple(&rosetta)), ["apple.rosetta"]);
        let intel = Mac {
            apple_silicon: false,
            ..ok.clone()
        };
        assert_eq!(ids(&apple(&intel)), ["apple.intel_mac"]);
        // MPS needs macOS 12.3 (pytorch/pytorch#77748: 12.2 says "not available").
        let old = Mac {
            macos: (12, 2),
            torch: Some("2.1.0".into()),
            ..ok.clone()
        };
        let f = apple(&old);
        assert_eq!(ids(&f), ["apple.macos_too_old"]);
        assert!(f[0].fix.contains("12.3"), "{f:?}");
        let newer_torch = Mac {
            macos: (13, 6),
            ..ok
        };
        assert_eq!(ids(&apple(&newer_torch)), ["apple.macos_too_old"]);
    }
}
