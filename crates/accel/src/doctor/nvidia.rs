//! NVIDIA: the GPU on the PCI bus, the kernel driver, device nodes, libcuda and the CUDA
//! libraries, compute capability, `ACCEL_CUDA_LIB_DIR`, `CUDA_VISIBLE_DEVICES` and the CUDA
//! major the Python wheels expect.

use std::path::{Path, PathBuf};

use super::check::{check, Check, Status};
use crate::backend::native::libs::{self, SearchEnv};
use crate::probe::Availability;
use crate::BackendKind;

// ---- NVIDIA ---------------------------------------------------------------------------------

/// NVIDIA devices on the PCI bus (vendor 0x10de), from sysfs.
fn nvidia_pci_devices() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/sys/bus/pci/devices")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            std::fs::read_to_string(e.path().join("vendor")).is_ok_and(|s| s.trim() == "0x10de")
                && std::fs::read_to_string(e.path().join("class"))
                    .is_ok_and(|c| c.starts_with("0x03"))
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// (where, what, CUDA major it expects) for PyTorch and JAX CUDA wheels in Python environments.
fn python_cuda_wheels(env: &SearchEnv) -> Vec<(PathBuf, String, u32)> {
    let mut out = Vec::new();
    for (sp, _) in libs::python_environments(env) {
        if let Ok(v) = std::fs::read_to_string(sp.join("torch/version.py")) {
            let get = |key: &str| {
                v.lines()
                    .find(|l| l.trim_start().starts_with(key))
                    .and_then(|l| l.split(['\'', '"']).nth(1))
                    .map(str::to_string)
            };
            if let Some(cuda) = get("cuda") {
                let major = cuda.split('.').next().and_then(|m| m.parse().ok());
                if let Some(major) = major {
                    let ver = get("__version__").unwrap_or_default();
                    out.push((sp.clone(), format!("PyTorch {ver} (CUDA {cuda})"), major));
                }
            }
        }
        for d in std::fs::read_dir(sp.join("jax_plugins"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = d.file_name().to_string_lossy().into_owned();
            if let Some(major) = name
                .strip_prefix("xla_cuda")
                .and_then(|m| m.parse::<u32>().ok())
            {
                out.push((
                    sp.clone(),
                    format!("JAX's CUDA {major} plugin ({name})"),
                    major,
                ));
            }
        }
    }
    out
}

pub(super) fn cuda_checks(env: &SearchEnv) -> Vec<Check> {
    let mut v = Vec::new();
    let pci = nvidia_pci_devices();
    let proc_version = std::fs::read_to_string("/proc/driver/nvidia/version").ok();
    let nodes: Vec<String> = std::fs::read_dir("/dev")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("nvidia"))
        .collect();
    let no_gpu_here = pci.is_empty() && proc_version.is_none() && nodes.is_empty();
    v.push(if no_gpu_here {
        check(
            "cuda.gpu_present",
            "an NVIDIA GPU on this machine",
            Status::Skip,
            "no NVIDIA GPU on the PCI bus (/sys/bus/pci/devices), no /proc/driver/nvidia, \
             no /dev/nvidia*: this machine has none, so CUDA does not apply",
            "",
        )
    } else {
        check(
            "cuda.gpu_present",
            "an NVIDIA GPU on this machine",
            Status::Pass,
            if pci.is_empty() {
                "no NVIDIA device visible on the PCI bus here (a container often hides it)"
                    .to_string()
            } else {
                format!("PCI {}", pci.join(", "))
            },
            "",
        )
    });
    let skip = |id, title| check(id, title, Status::Skip, "no NVIDIA GPU on this machine", "");
    v.extend(lib_dir_check(env));
    if no_gpu_here {
        for (id, title) in [
            ("cuda.kernel_driver", "kernel driver loaded"),
            ("cuda.device_nodes", "/dev/nvidia* device nodes"),
            ("cuda.libcuda", "libcuda loadable, and its CUDA version"),
            ("cuda.devices", "devices the driver lists"),
        ] {
            v.push(skip(id, title));
        }
        // The libraries still matter: NVRTC compiles accel's kernels ahead of a GPU, and
        // they are what a GPU here would need.
        v.push(library_check(false));
        v.extend(wheel_checks(env));
        return v;
    }
    v.push(match &proc_version {
        Some(s) => check(
            "cuda.kernel_driver",
            "kernel driver loaded",
            Status::Pass,
            s.lines().next().unwrap_or_default().trim().to_string(),
            "",
        ),
        None => check(
            "cuda.kernel_driver",
            "kernel driver loaded",
            Status::Fail,
            "/proc/driver/nvidia/version does not exist: the nvidia kernel module is not loaded",
            "install the NVIDIA driver (580 or newer for CUDA 13) and reboot, or `modprobe nvidia`; \
             in a container this file comes from the host",
        ),
    });
    v.push(if nodes.is_empty() {
        check(
            "cuda.device_nodes",
            "/dev/nvidia* device nodes",
            Status::Fail,
            "no /dev/nvidia* device nodes",
            "in a container, start it with the GPUs (`docker run --gpus all`, or the NVIDIA \
             container toolkit); on a host, load the driver (`nvidia-smi` creates the nodes)",
        )
    } else {
        check(
            "cuda.device_nodes",
            "/dev/nvidia* device nodes",
            Status::Pass,
            nodes.join(" "),
            "",
        )
    });
    v.push(match find_lib("cuda") {
        Some(l) if l.is_loaded() => check(
            "cuda.libcuda",
            "libcuda loadable, and its CUDA version",
            Status::Pass,
            format!(
                "{} ({}), {}",
                l.path
                    .as_deref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
                l.source.clone().unwrap_or_default(),
                l.version.clone().unwrap_or_default()
            ),
            "",
        ),
        Some(l) => check(
            "cuda.libcuda",
            "libcuda loadable, and its CUDA version",
            Status::Fail,
            l.problem.clone().unwrap_or_default(),
            l.hint
                .clone()
                .unwrap_or_else(|| "install the NVIDIA driver".into()),
        ),
        None => check(
            "cuda.libcuda",
            "libcuda loadable, and its CUDA version",
            Status::Fail,
            "this build of accel has no CUDA backend",
            "rebuild with `--features cuda`",
        ),
    });
    v.push(library_check(true));
    let probe = crate::backend::registry::probe(BackendKind::Cuda);
    let visible = std::env::var("CUDA_VISIBLE_DEVICES").ok();
    v.push(match &probe.availability {
        Availability::Available { devices } => {
            let old: Vec<String> = devices
                .iter()
                .filter(|d| d.caps.compute_capability.is_some_and(|cc| cc < (7, 5)))
                .map(|d| d.device.to_string())
                .collect();
            let list = devices
                .iter()
                .map(|d| {
                    let cc = d.caps.compute_capability.unwrap_or_default();
                    format!(
                        "{} {} (compute capability {}.{})",
                        d.device, d.name, cc.0, cc.1
                    )
                })
                .collect::<Vec<_>>()
                .join(", ");
            if old.is_empty() {
                check(
                    "cuda.devices",
                    "devices the driver lists",
                    Status::Pass,
                    list,
                    "",
                )
            } else {
                check(
                    "cuda.devices",
                    "devices the driver lists",
                    Status::Warn,
                    format!("{list}; {} below compute capability 7.5", old.join(", ")),
                    "CUDA 13 builds for compute capability 7.5 (Turing) and newer; older GPUs \
                     need an older CUDA and cannot run accel's kernels",
                )
            }
        }
        Availability::Unavailable { reason, hint } => check(
            "cuda.devices",
            "devices the driver lists",
            Status::Fail,
            format!(
                "{reason}{}",
                visible
                    .as_ref()
                    .map(|v| format!(" (CUDA_VISIBLE_DEVICES={v:?})"))
                    .unwrap_or_default()
            ),
            hint.clone(),
        ),
    });
    v.extend(wheel_checks(env));
    v
}

fn find_lib(name: &str) -> Option<&'static libs::Library> {
    crate::cuda::libraries().iter().find(|l| l.name == name)
}

/// NVRTC, cuBLAS(Lt), cuDNN and NVML: found, with versions and where, or missing and why.
/// `gpu`: whether this machine has an NVIDIA GPU (without one, nothing here is a failure).
fn library_check(gpu: bool) -> Check {
    const ID: &str = "cuda.libraries";
    const TITLE: &str = "NVRTC, cuBLAS, cuDNN, NVML";
    let mut found = Vec::new();
    let mut missing: Vec<&'static libs::Library> = Vec::new();
    for name in ["nvrtc", "cublas", "cublaslt", "cudnn", "nvml"] {
        match find_lib(name) {
            Some(l) if l.is_loaded() => found.push(format!(
                "{name} {} ({})",
                l.version.clone().unwrap_or_default(),
                l.source.clone().unwrap_or_default()
            )),
            Some(l) => missing.push(l),
            None => {}
        }
    }
    if crate::cuda::libraries().is_empty() {
        return check(
            ID,
            TITLE,
            if gpu { Status::Fail } else { Status::Skip },
            "this build of accel has no CUDA backend",
            if gpu {
                "rebuild with `--features cuda`"
            } else {
                ""
            },
        );
    }
    let found_text = if found.is_empty() {
        "none found".to_string()
    } else {
        found.join(", ")
    };
    let only_python = !found.is_empty() && found.iter().all(|f| f.contains("python wheel"));
    if missing.is_empty() {
        return if only_python {
            check(
                ID,
                TITLE,
                Status::Warn,
                format!("only inside a Python environment: {found_text}"),
                "accel finds them there; other programs need LD_LIBRARY_PATH or a CUDA toolkit",
            )
        } else {
            check(ID, TITLE, Status::Pass, found_text, "")
        };
    }
    let names: Vec<&str> = missing.iter().map(|l| l.file).collect();
    let found_text = format!("{found_text}; not found: {}", names.join(", "));
    if !gpu {
        return check(
            ID,
            TITLE,
            Status::Skip,
            format!("{found_text} (no GPU here to use them; NVRTC alone compiles the kernels)"),
            "",
        );
    }
    let pips: Vec<&str> = libs::WANTED
        .iter()
        .filter(|w| !w.pip.is_empty() && names.contains(&w.file))
        .map(|w| w.pip)
        .collect();
    let mut fix = Vec::new();
    if !pips.is_empty() {
        fix.push(format!(
            "`pip install {}` in any Python environment (accel searches them), or install \
             the CUDA {} toolkit, or point ACCEL_CUDA_LIB_DIR at the folder holding them",
            pips.join(" "),
            libs::CUDA_MAJOR
        ));
    }
    if missing.iter().any(|l| l.name == "nvml") {
        fix.push("NVML comes with the NVIDIA driver: reinstall the driver".to_string());
    }
    let needed = missing
        .iter()
        .any(|l| l.name == "nvrtc" || l.name == "cublas");
    check(
        ID,
        TITLE,
        if needed { Status::Fail } else { Status::Warn },
        found_text,
        fix.join("; "),
    )
}

/// ACCEL_CUDA_LIB_DIR, when set, must hold the CUDA libraries.
fn lib_dir_check(env: &SearchEnv) -> Option<Check> {
    let dir = env.accel_cuda_lib_dir.as_ref()?;
    let have: Vec<&str> = libs::WANTED
        .iter()
        .filter(|w| Path::new(dir).join(w.file).exists())
        .map(|w| w.file)
        .collect();
    Some(if have.is_empty() {
        check(
            "cuda.lib_dir",
            "ACCEL_CUDA_LIB_DIR",
            Status::Warn,
            format!(
                "ACCEL_CUDA_LIB_DIR={dir} holds none of {}",
                libs::WANTED
                    .iter()
                    .map(|w| w.file)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "point ACCEL_CUDA_LIB_DIR at the folder holding the CUDA 13 libraries (a toolkit's \
             lib64, or a wheel's nvidia/cu13/lib), or unset it to search the usual places",
        )
    } else {
        check(
            "cuda.lib_dir",
            "ACCEL_CUDA_LIB_DIR",
            Status::Pass,
            format!("ACCEL_CUDA_LIB_DIR={dir}: {}", have.join(", ")),
            "",
        )
    })
}

/// CUDA_VISIBLE_DEVICES, and the CUDA major the Python environments' wheels expect.
fn wheel_checks(env: &SearchEnv) -> Vec<Check> {
    let mut v = Vec::new();
    v.push(match std::env::var("CUDA_VISIBLE_DEVICES") {
        Ok(s) if s.trim().is_empty() || s.trim() == "-1" => check(
            "cuda.visible_devices",
            "CUDA_VISIBLE_DEVICES",
            Status::Warn,
            format!("CUDA_VISIBLE_DEVICES={s:?} hides every GPU from CUDA"),
            "unset CUDA_VISIBLE_DEVICES, or list the GPUs to use (indices or UUIDs from \
             `nvidia-smi -L`)",
        ),
        Ok(s) => check(
            "cuda.visible_devices",
            "CUDA_VISIBLE_DEVICES",
            Status::Pass,
            format!("CUDA_VISIBLE_DEVICES={s:?}: only these GPUs, renumbered from 0"),
            "",
        ),
        Err(_) => check(
            "cuda.visible_devices",
            "CUDA_VISIBLE_DEVICES",
            Status::Pass,
            "unset: every GPU is visible",
            "",
        ),
    });
    let wheels = python_cuda_wheels(env);
    let other: Vec<&(PathBuf, String, u32)> = wheels
        .iter()
        .filter(|(_, _, m)| *m != libs::CUDA_MAJOR)
        .collect();
    let listed = |w: &[&(PathBuf, String, u32)]| {
        w.iter()
            .map(|(sp, what, _)| format!("{what} in {}", sp.display()))
            .collect::<Vec<_>>()
            .join("; ")
    };
    v.push(if wheels.is_empty() {
        check(
            "cuda.python_wheels",
            "CUDA versions the Python environments' wheels expect",
            Status::Skip,
            "no PyTorch or JAX CUDA wheels in the Python environments searched",
            "",
        )
    } else if other.is_empty() {
        check(
            "cuda.python_wheels",
            "CUDA versions the Python environments' wheels expect",
            Status::Pass,
            listed(&wheels.iter().collect::<Vec<_>>()),
            "",
        )
    } else {
        check(
            "cuda.python_wheels",
            "CUDA versions the Python environments' wheels expect",
            Status::Warn,
            format!(
                "{}: not CUDA {}, which accel is built for",
                listed(&other),
                libs::CUDA_MAJOR
            ),
            format!(
                "accel needs CUDA {m} libraries (`pip install nvidia-cuda-nvrtc nvidia-cublas` \
                 gives the cu{m} wheels, which can sit beside the others); the driver must \
                 support the newest CUDA any of them uses",
                m = libs::CUDA_MAJOR
            ),
        )
    });
    v
}
