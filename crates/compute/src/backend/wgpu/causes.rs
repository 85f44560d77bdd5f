//! Causes for the GPU APIs (Vulkan, Metal; ROCm's device files): DRM render nodes and AMD's
//! `/dev/kfd` this user cannot open, and Apple's GPU (macOS too old for PyTorch's MPS, an x86
//! Python under Rosetta, Intel Macs). Pure rules over the machine's facts and the Python
//! environment's (`backend::native::pyfacts`).

use crate::backend::native::pyfacts::Python;
use crate::base::facts::{Machine, Node};
use crate::base::finding::{finding, Finding};

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
pub(crate) fn gpu_api(m: &Machine) -> Vec<Finding> {
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
pub(crate) struct Mac {
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
pub(crate) fn apple(mac: &Mac) -> Vec<Finding> {
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
pub(crate) fn this_mac(py: &Python) -> Option<Mac> {
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
pub(crate) fn this_mac(_: &Python) -> Option<Mac> {
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
