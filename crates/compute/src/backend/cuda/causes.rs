//! Why CUDA cannot work on this machine: each known cause as a rule over the machine's facts
//! ([`Machine`]) and what the driver libraries said ([`Driver`]), in the order a cause
//! hides the next (WSL before the container, the container before the kernel module, the
//! module before the libraries, the libraries before the GPU's state). Each rule names
//! what it saw and the one fix; `nvidia` returns every rule that holds, the root cause
//! first. The rules are pure, so each is tested from a tree of files.

use crate::base::facts::{gpu_node, Machine};
use crate::base::finding::{branch, cu_error_in, finding, Driver, Finding};

/// How to install the driver on this distribution.
fn install_driver(m: &Machine, branch: u32) -> String {
    match m.distro.as_deref() {
        Some("ubuntu") | Some("pop") | Some("linuxmint") => format!(
            "`sudo ubuntu-drivers install` (or `sudo apt install nvidia-driver-{branch}`), then \
             reboot"
        ),
        Some("debian") => {
            "`sudo apt install nvidia-driver` (from the non-free repository), then reboot"
                .to_string()
        }
        Some("fedora") => "`sudo dnf install akmod-nvidia` (RPM Fusion), then reboot".to_string(),
        Some("rhel") | Some("rocky") | Some("almalinux") | Some("centos") => format!(
            "`sudo dnf module install nvidia-driver:{branch}-dkms` (NVIDIA's CUDA repository), \
             then reboot"
        ),
        Some("arch") | Some("manjaro") => "`sudo pacman -S nvidia-open`, then reboot".to_string(),
        _ => format!(
            "install the NVIDIA driver {branch} from your distribution or nvidia.com, then reboot"
        ),
    }
}

/// The scheduler that set `CUDA_VISIBLE_DEVICES`, and how to ask it for a GPU.
fn scheduler(m: &Machine) -> Option<(&'static str, &'static str)> {
    if m.vars.keys().any(|k| k.starts_with("SLURM_")) {
        Some((
            "Slurm",
            "ask Slurm for GPUs: `#SBATCH --gres=gpu:1` (or `srun --gpus=1 ...`); a job \
             without GPUs gets none",
        ))
    } else if m.vars.keys().any(|k| k.starts_with("RAY_")) {
        Some((
            "Ray",
            "ask Ray for a GPU: `@ray.remote(num_gpus=1)` (or `.options(num_gpus=1)`); a task \
             or actor without num_gpus gets an empty CUDA_VISIBLE_DEVICES",
        ))
    } else if m.var("KUBERNETES_SERVICE_HOST").is_some() {
        Some((
            "Kubernetes",
            "ask for a GPU in the pod spec: `resources: limits: nvidia.com/gpu: 1`",
        ))
    } else {
        None
    }
}

/// Every NVIDIA cause that holds, the root cause first.
pub(crate) fn nvidia(m: &Machine, d: &Driver) -> Vec<Finding> {
    let mut v = Vec::new();
    let gpu = m.nvidia_gpu();
    let module = m.module_version.clone();
    let branch_now = module
        .as_deref()
        .or(d.user_version())
        .and_then(branch)
        .unwrap_or(580);
    super::placement::placement(m, d, gpu, &mut v);
    let gpu_nodes = m.gpu_nodes();
    // ---- the kernel module ----
    let on_bus = !m.pci_gpus.is_empty();
    let log_has = |w: &str| m.kernel_log.iter().find(|l| l.contains(w));
    if on_bus && !m.nvidia_loaded && m.container.is_none() {
        let running = m.kernel.clone().unwrap_or_else(|| "?".into());
        let for_running = m.kernels_with_module.contains(&running);
        let rejected = log_has("Key was rejected")
            .or_else(|| log_has("module verification failed"))
            .or_else(|| log_has("Lockdown"));
        if m.nouveau_loaded {
            v.push(finding(
                "nvidia.nouveau",
                "nouveau, the open-source driver, holds the GPU",
                format!(
                    "the GPU ({}) is bound to nouveau, and the nvidia module is not loaded",
                    m.pci_gpus
                        .iter()
                        .map(|g| format!(
                            "{} driver {}",
                            g.address,
                            g.driver.as_deref().unwrap_or("none")
                        ))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                format!(
                    "turn nouveau off and install NVIDIA's driver: `echo -e 'blacklist \
                     nouveau\\noptions nouveau modeset=0' | sudo tee \
                     /etc/modprobe.d/blacklist-nouveau.conf && sudo update-initramfs -u`, then {}",
                    install_driver(m, branch_now)
                ),
            ));
        } else if m.secure_boot == Some(true) && (for_running || rejected.is_some()) {
            v.push(finding(
                "nvidia.secure_boot",
                "Secure Boot refuses the unsigned nvidia module",
                format!(
                    "Secure Boot is on (EFI variable SecureBoot = 1), an nvidia module is built \
                     for kernel {running}{}, and it is not loaded{}",
                    if for_running { "" } else { " (or was tried)" },
                    rejected
                        .map(|l| format!("; the kernel log: {:?}", l.trim()))
                        .unwrap_or_default()
                ),
                "enroll the key the module was signed with (`sudo mokutil --import \
                 /var/lib/shim-signed/mok/MOK.der`, reboot, choose \"Enroll MOK\"; DKMS signs \
                 with it), or turn Secure Boot off in the firmware settings",
            ));
        } else if !m.kernels_with_module.is_empty() && !for_running {
            v.push(finding(
                "nvidia.no_module_for_kernel",
                "the nvidia module is built for another kernel",
                format!(
                    "the running kernel is {running}; an nvidia module exists only for {}",
                    m.kernels_with_module.join(", ")
                ),
                "build it for this kernel: `sudo apt install linux-headers-$(uname -r) && sudo \
                 dkms autoinstall` (Fedora: `sudo akmods --force`), then `sudo modprobe nvidia`; \
                 or boot the kernel it was built for",
            ));
        } else if for_running {
            v.push(finding(
                "nvidia.module_not_loaded",
                "the nvidia module is installed but not loaded",
                format!("an nvidia module exists for kernel {running} but is not loaded"),
                "`sudo modprobe nvidia`; if that fails, `sudo dmesg | grep -i -e nvrm -e nvidia` \
                 says why",
            ));
        } else {
            v.push(finding(
                "nvidia.driver_not_installed",
                "no NVIDIA driver is installed",
                format!(
                    "an NVIDIA GPU is on the PCI bus ({}), but no nvidia module exists for any \
                     kernel{}",
                    m.pci_gpus
                        .iter()
                        .map(|g| g.address.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                    if d.libcuda.is_some() {
                        " (libcuda is installed: the user-space half only)"
                    } else {
                        ""
                    }
                ),
                install_driver(m, branch_now),
            ));
        }
    }
    // ---- the user-space driver against the kernel module ----
    let compat = d
        .libcuda
        .as_deref()
        .filter(|p| p.contains("/compat/") || p.contains("cuda-compat"));
    let err = d.cu_error();
    if let Some(p) = compat.filter(|_| {
        err == Some("CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE") || d.unavailable.is_some()
    }) {
        let dir = std::path::Path::new(p)
            .parent()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        v.push(finding(
            "nvidia.forward_compat",
            "a forward-compatibility libcuda on a GPU that does not support it",
            format!(
                "libcuda was loaded from {p} (CUDA's forward-compatibility package){}: it runs \
                 only on data-center GPUs{}",
                err.map(|e| format!(", and cuInit says {e}"))
                    .unwrap_or_default(),
                module
                    .as_deref()
                    .map(|m| format!("; the driver's own is {m}"))
                    .unwrap_or_default()
            ),
            format!(
                "take {dir} off LD_LIBRARY_PATH (and out of /etc/ld.so.conf.d, then `sudo \
                 ldconfig`), or remove the cuda-compat package, so the driver's own libcuda \
                 loads"
            ),
        ));
    } else if err == Some("CUDA_ERROR_STUB_LIBRARY")
        || d.libcuda.as_deref().is_some_and(|p| p.contains("/stubs/"))
    {
        let p = d.libcuda.clone().unwrap_or_else(|| "a stub".into());
        v.push(finding(
            "nvidia.stub_libcuda",
            "the toolkit's stub libcuda was loaded instead of the driver's",
            format!("libcuda is {p}, the CUDA toolkit's link-time stub, which cannot run anything"),
            "take the toolkit's `lib64/stubs` folder off LD_LIBRARY_PATH (it is for linking \
             only); the driver's libcuda.so.1 then loads",
        ));
    } else {
        let log_versions = log_has("API mismatch").map(|l| l.trim().to_string());
        let mismatch_code = err == Some("CUDA_ERROR_SYSTEM_DRIVER_MISMATCH")
            || d.nvml_error
                .as_deref()
                .is_some_and(|e| e.contains("mismatch") || e.contains("Mismatch"));
        // NVML's version is never evidence of a mismatch: NVML that starts matches its module.
        let user = d
            .libcuda_version
            .clone()
            .or_else(|| {
                let found = |p: &str, v: &str| {
                    p.contains("libcuda.so.") && !v.is_empty() && !p.contains("/wsl/")
                };
                // The file `libcuda.so.1` points to, else any versioned copy.
                m.driver_files
                    .iter()
                    .find(|(p, v)| found(p, v) && p.ends_with("libcuda.so.1"))
                    .or_else(|| m.driver_files.iter().find(|(p, v)| found(p, v)))
                    .or_else(|| {
                        // NVML's library is the same driver's, and often versioned where
                        // libcuda is not.
                        m.driver_files.iter().find(|(p, v)| {
                            p.contains("libnvidia-ml.so.") && !v.is_empty() && !p.contains("/wsl/")
                        })
                    })
                    .map(|(_, v)| v.clone())
            })
            .or_else(|| d.nvml_version.clone().filter(|_| mismatch_code));
        let differ = match (&module, &user) {
            (Some(k), Some(u)) => k != u,
            _ => false,
        };
        // A forward-compatibility libcuda differs from its module by design.
        if (differ && compat.is_none()) || mismatch_code || log_versions.is_some() {
            let k = module.clone().unwrap_or_else(|| "unknown".into());
            let u = user.clone().unwrap_or_else(|| "unknown".into());
            v.push(finding(
                "nvidia.version_mismatch",
                "the kernel module and the user-space driver are different versions",
                format!(
                    "kernel module {k} (/proc/driver/nvidia/version), user-space driver {u}{}{}{}",
                    d.libcuda
                        .as_deref()
                        .map(|p| format!(" ({p})"))
                        .unwrap_or_default(),
                    [
                        err.filter(|e| e.contains("MISMATCH"))
                            .map(|e| format!("cuInit: {e}")),
                        d.nvml_error.clone().map(|e| format!("NVML: {e}")),
                        log_versions.map(|l| format!("kernel log: {l:?}")),
                    ]
                    .into_iter()
                    .flatten()
                    .map(|s| format!("; {s}"))
                    .collect::<String>(),
                    if m.container.is_some() {
                        " (in a container)"
                    } else {
                        ""
                    }
                ),
                if m.container.is_some() {
                    format!(
                        "the image carries its own driver libraries ({u}) while the host runs \
                         {k}: remove them from the image (no `libnvidia-compute-*`, \
                         `cuda-drivers` or `cuda-compat` packages; no libcuda on \
                         LD_LIBRARY_PATH) and let the NVIDIA Container Toolkit mount the \
                         host's"
                    )
                } else {
                    format!(
                        "the driver was upgraded to {u} while module {k} stays loaded: reboot \
                         (or `sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && sudo \
                         modprobe nvidia`); if the versions still differ, reinstall one driver \
                         (`sudo apt install --reinstall nvidia-dkms-{}`)",
                        user.as_deref().and_then(branch).unwrap_or(branch_now)
                    )
                },
            ));
        }
    }
    // ---- who may open the devices ----
    let blocked: Vec<_> = m.nvidia_nodes.iter().filter(|n| !n.usable).collect();
    if let Some(n) = blocked.first() {
        let group = m.group(n.gid);
        let group_can = n.mode & 0o060 == 0o060;
        v.push(finding(
            "nvidia.device_permission",
            "this user cannot open the GPU's device files",
            format!(
                "{} cannot be opened read-write by uid {} (mode {:o}, group {group}){}",
                blocked
                    .iter()
                    .map(|n| n.path.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                m.euid,
                n.mode,
                if group_can {
                    format!(": uid {} is not in group {group}", m.euid)
                } else {
                    String::new()
                }
            ),
            m.join_group(n).unwrap_or_else(|| {
                "the nodes should be mode 666 (the driver's default, `NVreg_DeviceFileMode`): \
                 `sudo chmod 666 /dev/nvidia*`, and remove the udev rule or modprobe option \
                 that narrowed them"
                    .to_string()
            }),
        ));
    }
    let has_uvm = m.nvidia_nodes.iter().any(|n| n.path == "/dev/nvidia-uvm");
    // cuInit says CUDA_ERROR_UNKNOWN without the UVM node; any more specific code has
    // another cause.
    let unknown =
        err.is_none_or(|e| e == "CUDA_ERROR_UNKNOWN" || e == "CUDA_ERROR_NOT_INITIALIZED");
    if !gpu_nodes.is_empty() && !has_uvm && !d.cuda_works() && m.container.is_none() && unknown {
        v.push(finding(
            "nvidia.uvm_missing",
            "the nvidia-uvm module (CUDA's memory manager) is not loaded",
            format!(
                "{} exist but /dev/nvidia-uvm does not{}",
                gpu_nodes
                    .iter()
                    .map(|n| n.path.as_str())
                    .collect::<Vec<_>>()
                    .join(" "),
                err.map(|e| format!("; cuInit says {e}"))
                    .unwrap_or_default()
            ),
            "`sudo modprobe nvidia-uvm` (or `sudo nvidia-modprobe -u -c=0`); after a suspend, \
             `sudo rmmod nvidia_uvm && sudo modprobe nvidia_uvm`",
        ));
    }
    // ---- which GPUs this process may see ----
    if let Some(cvd) = m.var("CUDA_VISIBLE_DEVICES").filter(|_| gpu || m.dxg) {
        let t = cvd.trim();
        let count = m.gpu_count();
        let first = t.split(',').next().unwrap_or("").trim();
        let bad_index = |s: &str| match s.parse::<i64>() {
            Ok(i) => i < 0 || (count > 0 && i as usize >= count),
            Err(_) => !s.starts_with("GPU-") && !s.starts_with("MIG-"),
        };
        let why = if t.is_empty() {
            Some("is empty: it hides every GPU".to_string())
        } else if t == "NoDevFiles" {
            Some("is NoDevFiles: the scheduler gave this job no GPU".to_string())
        } else if bad_index(first) {
            Some(format!(
                "starts with {first:?}, which is no GPU of this machine ({count} GPU(s), 0 to \
                 {}): CUDA stops at the first invalid entry, so it sees none",
                count.saturating_sub(1)
            ))
        } else {
            None
        };
        if let Some(why) = why {
            // A scheduler empties the variable or writes NoDevFiles; `-1` or a wrong index
            // is someone's setting, undone by unsetting it.
            let sched = scheduler(m).filter(|_| t.is_empty() || t == "NoDevFiles");
            v.push(finding(
                "cuda.visible_devices",
                "CUDA_VISIBLE_DEVICES hides the GPUs",
                format!(
                    "CUDA_VISIBLE_DEVICES={cvd:?} {why}{}",
                    sched
                        .map(|(s, _)| format!(" (set by {s}: its variables are here)"))
                        .unwrap_or_default()
                ),
                match sched {
                    Some((_, how)) => how.to_string(),
                    None => format!(
                        "unset CUDA_VISIBLE_DEVICES (`unset CUDA_VISIBLE_DEVICES`, or \
                         `os.environ.pop(\"CUDA_VISIBLE_DEVICES\")` before importing torch), or \
                         list GPUs that exist: 0 to {} (`nvidia-smi -L`)",
                        count.saturating_sub(1)
                    ),
                },
            ));
        }
    }
    // ---- the GPU's own state ----
    if err == Some("CUDA_ERROR_SYSTEM_NOT_READY") || (m.nvswitch && !d.cuda_works() && gpu) {
        let b = branch_now;
        v.push(finding(
            "nvidia.fabric_manager",
            "an NVSwitch system without the fabric manager",
            format!(
                "{}{}: the GPUs wait for NVIDIA's fabric manager to set up NVLink",
                err.map(|e| format!("cuInit says {e}")).unwrap_or_default(),
                if m.nvswitch {
                    "; NVSwitches are on this machine"
                } else {
                    ""
                }
            ),
            format!(
                "install and start the fabric manager of the same version as the driver{}: \
                 `sudo apt install nvidia-fabricmanager-{b} && sudo systemctl enable --now \
                 nvidia-fabricmanager` (`systemctl status nvidia-fabricmanager` says whether it \
                 runs)",
                module
                    .as_deref()
                    .map(|m| format!(" ({m})"))
                    .unwrap_or_default()
            ),
        ));
    }
    let mig_gpus: Vec<u32> = m.mig_instances.keys().copied().collect();
    let no_instances = m.mig_instances.values().all(|&n| n == 0);
    if (d.mig_enabled || !mig_gpus.is_empty())
        && no_instances
        && !d.cuda_works()
        && (d.mig_enabled || err == Some("CUDA_ERROR_NO_DEVICE") || err.is_none())
        && gpu
    {
        v.push(finding(
            "nvidia.mig_no_instances",
            "MIG is on, with no GPU instances",
            format!(
                "MIG mode is enabled{} and no GPU instance exists, so CUDA sees no device",
                if mig_gpus.is_empty() {
                    String::new()
                } else {
                    format!(
                        " (GPU {})",
                        mig_gpus
                            .iter()
                            .map(u32::to_string)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            ),
            "create instances: `sudo nvidia-smi mig -cgi 1g.10gb -C` (profiles: `nvidia-smi mig \
             -lgip`), then use them by UUID (`nvidia-smi -L`, CUDA_VISIBLE_DEVICES=MIG-...); \
             or turn MIG off: `sudo nvidia-smi -i 0 -mig 0` and reset the GPU",
        ));
    }
    let xid79 =
        m.kernel_log.iter().rev().find(|l| {
            l.contains("fallen off the bus") || (l.contains("Xid") && l.contains(": 79,"))
        });
    let lost = d
        .nvml_error
        .as_deref()
        .is_some_and(|e| e.contains("fell off the bus") || e.contains("GPU is lost"));
    let gone = !m.lost_pci.is_empty() && m.nvidia_loaded;
    if xid79.is_some() || lost || gone {
        v.push(finding(
            "nvidia.fell_off_bus",
            "the GPU has fallen off the bus (Xid 79)",
            format!(
                "{}{}{}",
                xid79
                    .map(|l| format!("the kernel log: {:?}", l.trim()))
                    .unwrap_or_default(),
                if gone {
                    format!(
                        "; PCI {} reads all ones (vendor 0xffff)",
                        m.lost_pci.join(", ")
                    )
                } else {
                    String::new()
                },
                d.nvml_error
                    .as_deref()
                    .filter(|_| lost)
                    .map(|e| format!("; NVML: {e}"))
                    .unwrap_or_default()
            )
            .trim_start_matches("; ")
            .to_string(),
            "the GPU needs a reset (`sudo nvidia-smi -r -i <index>`) or a reboot; if it comes \
             back, check power (PSU and cables), cooling and the PCIe slot or riser, and keep \
             `sudo nvidia-bug-report.sh`'s output for the vendor",
        ));
    }
    let ce = d.compute_error.as_deref().and_then(cu_error_in).or(err);
    if ce == Some("CUDA_ERROR_OUT_OF_MEMORY") || ce == Some("CUDA_ERROR_DEVICES_UNAVAILABLE") {
        let holders = m.holders(gpu_node);
        let listed = if holders.is_empty() {
            "no holder visible to this user (`sudo fuser -v /dev/nvidia*` shows them)".to_string()
        } else {
            holders
                .iter()
                .map(|h| format!("PID {} ({}) holds {}", h.pid, h.name, h.device))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let pids = holders
            .iter()
            .map(|h| h.pid.to_string())
            .collect::<Vec<_>>()
            .join(" ");
        v.push(if ce == Some("CUDA_ERROR_OUT_OF_MEMORY") {
            finding(
                "nvidia.memory_held",
                "another process holds the GPU's memory",
                format!(
                    "a context on cuda:0 fails with {}; {listed}",
                    ce.unwrap_or("")
                ),
                format!(
                    "stop {}: `kill {}` (a notebook: restart its kernel); `nvidia-smi \
                     --query-compute-apps=pid,used_memory --format=csv` lists what each holds",
                    if holders.is_empty() {
                        "the holder"
                    } else {
                        "it"
                    },
                    if pids.is_empty() { "<pid>" } else { &pids }
                ),
            )
        } else {
            finding(
                "nvidia.exclusive_process",
                "the GPU is in exclusive-process mode and taken",
                format!(
                    "a context on cuda:0 fails with {}; {listed}",
                    ce.unwrap_or("")
                ),
                format!(
                    "the GPU admits one process (compute mode EXCLUSIVE_PROCESS): wait for {} or \
                     stop it, or allow sharing: `sudo nvidia-smi -i 0 -c DEFAULT`",
                    if pids.is_empty() {
                        "the holder".to_string()
                    } else {
                        format!("PID {pids}")
                    }
                ),
            )
        });
    }
    // ---- the driver's libraries ----
    if v.is_empty() && gpu && m.nvidia_loaded && d.libcuda.is_none() && m.container.is_none() {
        v.push(finding(
            "nvidia.libcuda_missing",
            "the kernel module is loaded, its user-space libraries are not installed",
            format!(
                "module {} is loaded, but libcuda.so.1 is not found{}",
                module.as_deref().unwrap_or("?"),
                d.libcuda_problem
                    .as_deref()
                    .map(|p| format!(" ({p})"))
                    .unwrap_or_default()
            ),
            format!(
                "install the driver's compute libraries of the same version: `sudo apt install \
                 libnvidia-compute-{branch_now}` (or the full driver package, {})",
                install_driver(m, branch_now)
            ),
        ));
    }
    if let Some(cv) = d.cuda_version.filter(|&c| c < 12000) {
        v.push(finding(
            "nvidia.driver_too_old",
            "the driver is older than CUDA 12",
            format!(
                "the driver supports CUDA {}.{} (driver {})",
                cv / 1000,
                (cv % 1000) / 10,
                module.as_deref().or(d.user_version()).unwrap_or("?")
            ),
            format!(
                "update the driver to 525 or newer (580 for CUDA 13): {}",
                install_driver(m, 580)
            ),
        ));
    }
    // No known cause: the probe's own reason, so the verdict says why CUDA does not start.
    if v.is_empty() && (gpu || m.dxg) {
        if let Some(r) = &d.unavailable {
            v.push(finding(
                "cuda.unavailable",
                "CUDA does not start",
                r.clone(),
                d.unavailable_hint
                    .clone()
                    .filter(|h| !h.is_empty())
                    .unwrap_or_else(|| "check `nvidia-smi` and `sudo dmesg | grep -i nvrm`".into()),
            ));
        }
    }
    v
}
