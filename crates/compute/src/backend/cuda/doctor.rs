//! NVIDIA: the GPU on the PCI bus, the kernel driver, device nodes, libcuda and the CUDA
//! libraries, compute capability, `ACCEL_CUDA_LIB_DIR`, `CUDA_VISIBLE_DEVICES` and the CUDA
//! major the Python wheels expect.

use std::path::Path;

use crate::backend::native::libs::{self, SearchEnv};
use crate::base::check::{check, Check, Status};
use crate::base::facts::Machine;
use crate::probe::{Availability, Probe};

// ---- NVIDIA ---------------------------------------------------------------------------------

/// The CUDA checklist, after `probe` (CUDA's, from `backend::registry::probe`).
pub(crate) fn cuda_checks(env: &SearchEnv, m: &Machine, probe: &Probe) -> Vec<Check> {
    let mut v = Vec::new();
    let pci: Vec<String> = m.pci_gpus.iter().map(|g| g.address.clone()).collect();
    let proc_version = m.module_line.clone();
    let nodes: Vec<String> = m.nvidia_nodes.iter().map(|n| n.path.clone()).collect();
    let no_gpu_here = !m.nvidia_gpu() && !m.dxg;
    let hosted = crate::base::system::Hosted::detect();
    v.push(if let (true, Some(h)) = (no_gpu_here, hosted) {
        check(
            "cuda.gpu_present",
            "an NVIDIA GPU on this machine",
            Status::Fail,
            format!(
                "{}: a runtime without a GPU (no NVIDIA GPU on the PCI bus, no /dev/nvidia*)",
                h.name()
            ),
            h.gpu_fix(),
        )
    } else if no_gpu_here {
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
                format!(
                    "PCI {}{}",
                    pci.join(", "),
                    hosted
                        .map(|h| format!(" ({} GPU runtime)", h.name()))
                        .unwrap_or_default()
                )
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
        v.push(major_check(false));
        v.extend(wheel_checks(env));
        return v;
    }
    v.push(match &proc_version {
        Some(s) => check(
            "cuda.kernel_driver",
            "kernel driver loaded",
            Status::Pass,
            s.clone(),
            "",
        ),
        None => check(
            "cuda.kernel_driver",
            "kernel driver loaded",
            Status::Fail,
            "/proc/driver/nvidia/version does not exist: the nvidia kernel module is not loaded",
            "install the NVIDIA driver (525 or newer for CUDA 12, 580 or newer for CUDA 13) and \
             reboot, or `modprobe nvidia`; in a container this file comes from the host",
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
    v.push(match find_lib(libs::LibName::Cuda) {
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
    v.push(major_check(true));
    let visible = std::env::var("CUDA_VISIBLE_DEVICES").ok();
    v.push(match &probe.availability {
        Availability::Available { devices } => {
            let major = libs::cuda_major().major;
            let old: Vec<String> = devices
                .iter()
                .filter_map(|d| {
                    let cc = d.caps.compute_capability?;
                    super::kernels::arch_supported(cc, major)
                        .err()
                        .map(|e| format!("{}: {e}", d.device))
                })
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
                    format!("{list}; {}", old.join("; ")),
                    "CUDA 13 builds for compute capability 7.5 (Turing) and newer; a Volta \
                     (7.0) GPU needs the CUDA 12 libraries (`pip install nvidia-cuda-nvrtc-cu12 \
                     nvidia-cublas-cu12`, ACCEL_CUDA_MAJOR=12)",
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

fn find_lib(name: libs::LibName) -> Option<&'static libs::Library> {
    super::libraries().iter().find(|l| l.name == name)
}

/// NVRTC, cuBLAS(Lt), cuDNN and NVML: found, with versions and where, or missing and why.
/// `gpu`: whether this machine has an NVIDIA GPU (without one, nothing here is a failure).
fn library_check(gpu: bool) -> Check {
    const ID: &str = "cuda.libraries";
    const TITLE: &str = "NVRTC, cuBLAS, cuDNN, NVML";
    let mut found = Vec::new();
    let mut missing: Vec<&'static libs::Library> = Vec::new();
    use libs::LibName;
    for name in [
        LibName::Nvrtc,
        LibName::Cublas,
        LibName::CublasLt,
        LibName::Cudnn,
        LibName::Nvml,
    ] {
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
    if super::libraries().is_empty() {
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
    let mut pips: Vec<&str> = libs::wanted_now()
        .iter()
        .filter(|w| !w.pip.is_empty() && names.contains(&w.file))
        .map(|w| w.pip)
        .collect();
    pips.dedup();
    let mut fix = Vec::new();
    if !pips.is_empty() {
        fix.push(format!(
            "`pip install {}` in any Python environment (accel searches them), or install \
             the CUDA {} toolkit, or point ACCEL_CUDA_LIB_DIR at the folder holding them",
            pips.join(" "),
            libs::cuda_major().major
        ));
    }
    if missing
        .iter()
        .any(|l| l.name == crate::backend::native::libs::LibName::Nvml)
    {
        fix.push("NVML comes with the NVIDIA driver: reinstall the driver".to_string());
    }
    let needed = missing.iter().any(|l| {
        l.name == crate::backend::native::libs::LibName::Nvrtc
            || l.name == crate::backend::native::libs::LibName::Cublas
    });
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
    let all = || {
        libs::wanted(13)
            .iter()
            .chain(libs::wanted(12))
            .filter(|w| w.name != crate::backend::native::libs::LibName::Cudnn)
    };
    let have: Vec<&str> = all()
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
                all().map(|w| w.file).collect::<Vec<_>>().join(", ")
            ),
            "point ACCEL_CUDA_LIB_DIR at the folder holding the CUDA 12 or 13 libraries (a \
             toolkit's lib64, a wheel's nvidia/cu13/lib or nvidia/cublas/lib), or unset it to \
             search the usual places",
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
    let wheels = libs::cuda_wheels(env);
    let major = libs::cuda_major().major;
    let frameworks: Vec<&libs::CudaWheel> = wheels.iter().filter(|w| w.framework).collect();
    let other: Vec<&libs::CudaWheel> = frameworks
        .iter()
        .copied()
        .filter(|w| w.major != major)
        .collect();
    let listed = |w: &[&libs::CudaWheel]| {
        w.iter()
            .map(|w| format!("{} in {}", w.what, w.site_packages.display()))
            .collect::<Vec<_>>()
            .join("; ")
    };
    let nvidia: Vec<String> = wheels
        .iter()
        .filter(|w| !w.framework)
        .map(|w| w.what.clone())
        .collect();
    let nvidia_note = if nvidia.is_empty() {
        String::new()
    } else {
        format!("; NVIDIA's wheels: {}", nvidia.join(", "))
    };
    const ID: &str = "cuda.python_wheels";
    const TITLE: &str = "CUDA versions the Python environments' wheels expect";
    v.push(if wheels.is_empty() {
        check(
            ID,
            TITLE,
            Status::Skip,
            "no PyTorch, JAX or NVIDIA CUDA wheels in the Python environments searched",
            "",
        )
    } else if other.is_empty() {
        check(
            ID,
            TITLE,
            Status::Pass,
            format!(
                "{}{nvidia_note}; accel uses CUDA {major}",
                if frameworks.is_empty() {
                    "no PyTorch or JAX CUDA build".to_string()
                } else {
                    listed(&frameworks)
                }
            ),
            "",
        )
    } else {
        check(
            ID,
            TITLE,
            Status::Warn,
            format!(
                "{}: not CUDA {major}, which accel uses here{nvidia_note}",
                listed(&other),
            ),
            format!(
                "in one Python process accel and {} would load two CUDA majors: install the \
                 CUDA {m} libraries beside them (`pip install {}`), and accel picks their major",
                if other.iter().any(|w| w.what.starts_with("PyTorch")) {
                    "PyTorch"
                } else {
                    "JAX"
                },
                libs::pips(other[0].major),
                m = other[0].major
            ),
        )
    });
    v
}

/// Which CUDA major this process uses and why; a failure when nothing installed can work
/// with this driver (libraries too new for it, NVRTC and cuBLAS of different majors).
fn major_check(gpu: bool) -> Check {
    const ID: &str = "cuda.major";
    const TITLE: &str = "the CUDA major accel uses (12 or 13)";
    if super::libraries().is_empty() {
        return check(
            ID,
            TITLE,
            Status::Skip,
            "this build of accel has no CUDA backend",
            "",
        );
    }
    let c = libs::cuda_major();
    match &c.problem {
        None => check(
            ID,
            TITLE,
            Status::Pass,
            format!("CUDA {}: {}", c.major, c.why),
            "",
        ),
        Some(p) => check(
            ID,
            TITLE,
            if gpu { Status::Fail } else { Status::Warn },
            format!("CUDA {}: {}; {p}", c.major, c.why),
            c.hint.clone().unwrap_or_default(),
        ),
    }
}
