//! Why a TPU cannot be used: libtpu's lock file held or stale, a TPU VM without libtpu,
//! torch_xla without `PJRT_DEVICE`. Pure rules over the machine's facts and the Python
//! environment's (`backend::native::pyfacts`), as CUDA's are (`backend::cuda::causes`).

use crate::backend::native::pyfacts::Python;
use crate::base::facts::Machine;
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
pub(crate) fn tpu(m: &Machine, py: &Python, libtpu_plugin: bool) -> Vec<Finding> {
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
