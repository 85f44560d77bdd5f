//! `accel doctor`: why a device is or is not usable, step by step. For every backend an
//! ordered checklist; each check is PASS / FAIL / WARN / SKIP with what was found (paths,
//! versions, environment variables) and, for every FAIL and WARN, the fix in a sentence or two.
//!
//! Every check reads files, the environment and the probes' results; the probes themselves
//! are time-limited (PJRT plugins: `ACCEL_PJRT_TIMEOUT`), so the doctor never hangs.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use crate::backend::cuda::libs::{self, SearchEnv};
use crate::probe::Availability;
use crate::Hardware;
use crate::{BackendKind, Device, Tensor};

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Fine.
    Pass,
    /// Broken: this backend cannot work until it is fixed.
    Fail,
    /// Works, but not as well as it could, or a trap is set.
    Warn,
    /// Does not apply here.
    Skip,
}

/// One check.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// Stable key (`cuda.kernel_driver`), for scripts.
    pub id: &'static str,
    /// What is checked, in a few words.
    pub title: &'static str,
    /// The outcome.
    pub status: Status,
    /// What was found: paths, versions, variables.
    pub found: String,
    /// What to do, for every FAIL and WARN; empty otherwise.
    pub fix: String,
}

/// One backend's checklist.
#[derive(Debug, Clone, Serialize)]
pub struct Section {
    /// The backend.
    pub backend: BackendKind,
    /// Seconds its probe took (the first time it ran in this process).
    pub probe_seconds: f64,
    /// The checks, in order.
    pub checks: Vec<Check>,
}

/// The whole diagnosis.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Every backend's checklist, in `BackendKind::ALL` order (mps under wgpu's Metal).
    pub sections: Vec<Section>,
    /// The device `Device::best()` picks.
    pub best_device: Device,
    /// Whether a small computation on the best device gave the right answer.
    pub best_device_works: bool,
    /// Seconds the diagnosis took.
    pub seconds: f64,
}

fn check(
    id: &'static str,
    title: &'static str,
    status: Status,
    found: impl Into<String>,
    fix: impl Into<String>,
) -> Check {
    Check {
        id,
        title,
        status,
        found: found.into(),
        fix: fix.into(),
    }
}

/// Runs every check.
pub fn diagnose() -> Report {
    let t0 = Instant::now();
    let env = SearchEnv::from_process();
    let mut sections = Vec::new();
    for kind in [
        BackendKind::Cpu,
        BackendKind::Cuda,
        BackendKind::Xla,
        BackendKind::Wgpu,
    ] {
        let t = Instant::now();
        crate::backend::registry::probe(kind);
        let probe_seconds = t.elapsed().as_secs_f64();
        let checks = match kind {
            BackendKind::Cpu => cpu_checks(),
            BackendKind::Cuda => cuda_checks(&env),
            BackendKind::Xla => xla_checks(probe_seconds),
            _ => gpu_api_checks(),
        };
        sections.push(Section {
            backend: kind,
            probe_seconds,
            checks,
        });
    }
    // Checks about accel's own settings go with the first section (they apply to every
    // backend), after the probes, which is when untrusted folders have been met.
    if let Some(first) = sections.first_mut() {
        first.checks.extend(environment_checks());
    }
    let best_device = Device::best();
    let best_device_works = Tensor::ones((2, 2), crate::DType::F32, &best_device)
        .and_then(|t| t.matmul(&t))
        .and_then(|t| t.sum_all())
        .and_then(|t| t.to_vec_f64())
        .is_ok_and(|v| v == [8.0]);
    Report {
        sections,
        best_device,
        best_device_works,
        seconds: t0.elapsed().as_secs_f64(),
    }
}

// ---- CPU ------------------------------------------------------------------------------------

fn cpu_checks() -> Vec<Check> {
    let info = crate::system::cpu_info();
    let has = |f: &str| info.simd.iter().any(|s| s == f);
    let mut v = vec![if has("avx2") && has("fma") {
        check(
            "cpu.simd",
            "vector instructions the kernels use",
            Status::Pass,
            format!("{}: {}", info.brand, info.simd.join(" ")),
            "",
        )
    } else if cfg!(target_arch = "x86_64") {
        check(
            "cpu.simd",
            "vector instructions the kernels use",
            Status::Warn,
            format!("{}: {} (no AVX2+FMA)", info.brand, info.simd.join(" ")),
            "the matmul runs its portable kernel, several times slower; a CPU with AVX2 and \
             FMA (Intel since 2013, AMD since 2015) runs the fast one",
        )
    } else {
        check(
            "cpu.simd",
            "vector instructions the kernels use",
            Status::Pass,
            format!("{} (the portable kernels, auto-vectorised)", info.brand),
            "",
        )
    }];
    let threads = rayon::current_num_threads();
    let env = std::env::var("RAYON_NUM_THREADS").ok();
    v.push(if threads < info.logical_cores {
        check(
            "cpu.threads",
            "cores and threads in use",
            Status::Warn,
            format!(
                "{threads} threads on {} logical cores ({} physical){}",
                info.logical_cores,
                info.physical_cores,
                env.map(|e| format!("; RAYON_NUM_THREADS={e}"))
                    .unwrap_or_default()
            ),
            "unset RAYON_NUM_THREADS (or raise it) to compute on every core",
        )
    } else {
        check(
            "cpu.threads",
            "cores and threads in use",
            Status::Pass,
            format!(
                "{threads} threads on {} logical cores ({} physical)",
                info.logical_cores, info.physical_cores
            ),
            "",
        )
    });
    v
}

/// The `ACCEL_*` variables (every one range-checked by `base::env`) and the folders and
/// programs the library search refused to take native code from.
fn environment_checks() -> Vec<Check> {
    let problems = crate::base::env::problems();
    let mut v = vec![if problems.is_empty() {
        let set: Vec<String> = crate::base::env::KNOWN
            .iter()
            .filter_map(|(k, _)| {
                std::env::var_os(k).map(|v| format!("{k}={}", v.to_string_lossy()))
            })
            .collect();
        check(
            "env.accel_variables",
            "accel's environment variables",
            Status::Pass,
            if set.is_empty() {
                "none set".to_string()
            } else {
                set.join(", ")
            },
            "",
        )
    } else {
        check(
            "env.accel_variables",
            "accel's environment variables",
            Status::Fail,
            problems.join("; "),
            "correct or unset the variables named",
        )
    }];
    v.push(match crate::runtime_dir_refused() {
        Some(why) => check(
            "env.runtime_dir",
            "the runtime folder (XDG_RUNTIME_DIR)",
            Status::Warn,
            why,
            "remove that folder (it was not made by you, or others can enter it), or set \
             XDG_RUNTIME_DIR to a private folder of yours",
        ),
        None => check(
            "env.runtime_dir",
            "the runtime folder (XDG_RUNTIME_DIR)",
            Status::Pass,
            std::env::var_os("XDG_RUNTIME_DIR")
                .map_or("unset".to_string(), |v| v.to_string_lossy().into_owned()),
            "",
        ),
    });
    let skipped = crate::backend::cuda::libs::trust::skipped_so_far();
    v.push(if skipped.is_empty() {
        check(
            "env.untrusted_folders",
            "folders and programs refused as sources of native code",
            Status::Pass,
            "none",
            "",
        )
    } else {
        check(
            "env.untrusted_folders",
            "folders and programs refused as sources of native code",
            Status::Warn,
            skipped
                .iter()
                .map(|(p, why)| format!("{}: {why}", p.display()))
                .collect::<Vec<_>>()
                .join("; "),
            "accel loads libraries and plugins only from folders you own that no one else may \
             write (as git's safe.directory); fix the owner or mode (chown, chmod go-w), or point \
             VIRTUAL_ENV or ACCEL_PJRT_PLUGIN at the environment explicitly",
        )
    });
    v
}

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

fn cuda_checks(env: &SearchEnv) -> Vec<Check> {
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

// ---- XLA ------------------------------------------------------------------------------------

fn xla_checks(probe_seconds: f64) -> Vec<Check> {
    let mut v = Vec::new();
    let plugins = crate::xla::plugins();
    if plugins.is_empty() {
        v.push(check(
            "xla.plugins",
            "PJRT plugins found",
            Status::Warn,
            "no PJRT plugin in ACCEL_PJRT_PLUGIN, PJRT_NAMES_AND_LIBRARY_PATHS or any Python \
             environment",
            "for XLA on the CPU `pip install lammps-jax-pjrt-cpu`; on NVIDIA GPUs \
             `pip install jax[cuda13]`; on a TPU VM `pip install libtpu`",
        ));
    }
    for p in &plugins {
        let what = format!(
            "{} ({}; {:.2} s)",
            p.path.display(),
            p.source,
            probe_seconds
        );
        v.push(match &p.problem {
            None => check(
                "xla.plugin",
                "a PJRT plugin loads and lists devices",
                if p.notes.is_empty() {
                    Status::Pass
                } else {
                    Status::Warn
                },
                format!(
                    "{what}: platform {}{}, {} device(s), PJRT {}{}{}",
                    p.platform.as_deref().unwrap_or("?"),
                    if p.platform.as_deref() == Some("cpu") {
                        " (XLA's compiler on this CPU: not an accelerator, never the best device)"
                    } else {
                        ""
                    },
                    p.devices,
                    p.pjrt_api_version.as_deref().unwrap_or("?"),
                    if p.preloaded.is_empty() {
                        String::new()
                    } else {
                        format!(", {} CUDA libraries loaded first", p.preloaded.len())
                    },
                    p.notes.iter().map(|n| format!("; {n}")).collect::<String>()
                ),
                if p.notes.is_empty() {
                    ""
                } else {
                    "see the note: the plugin runs, but not as accel asked"
                },
            ),
            Some(why) => check(
                "xla.plugin",
                "a PJRT plugin loads and lists devices",
                Status::Fail,
                format!("{what}: {why}"),
                "reinstall the plugin's wheel into this environment, or point \
                 ACCEL_PJRT_PLUGIN at a working one; ACCEL_PJRT_TIMEOUT waits longer",
            ),
        });
    }
    let tpu = plugins
        .iter()
        .any(|p| p.path.file_name().is_some_and(|n| n == "libtpu.so"));
    let lock = Path::new("/tmp/libtpu_lockfile");
    v.push(if !tpu {
        check(
            "xla.libtpu_traps",
            "libtpu's metadata server and lock file",
            Status::Skip,
            "no libtpu found",
            "",
        )
    } else if lock.exists() {
        check(
            "xla.libtpu_traps",
            "libtpu's metadata server and lock file",
            Status::Warn,
            "/tmp/libtpu_lockfile exists: another process may hold the TPU",
            "stop the other TPU process, or remove the file if it is stale (libtpu allows one \
             process per TPU)",
        )
    } else if std::env::var_os("TPU_SKIP_MDS_QUERY").is_none() {
        check(
            "xla.libtpu_traps",
            "libtpu's metadata server and lock file",
            Status::Warn,
            "TPU_SKIP_MDS_QUERY is unset: off a TPU VM libtpu retries a metadata server for \
             minutes",
            "the accel command sets it itself; in your own program call \
             accel::prepare_environment() first, or export TPU_SKIP_MDS_QUERY=1",
        )
    } else {
        check(
            "xla.libtpu_traps",
            "libtpu's metadata server and lock file",
            Status::Pass,
            "TPU_SKIP_MDS_QUERY set, no lock file",
            "",
        )
    });
    v
}

// ---- Vulkan / Metal (wgpu, mps) -------------------------------------------------------------

/// Vulkan driver manifests (ICDs): the override variables, else the standard folders.
fn vulkan_icds() -> (Vec<PathBuf>, Option<String>) {
    for var in ["VK_DRIVER_FILES", "VK_ICD_FILENAMES"] {
        if let Ok(v) = std::env::var(var) {
            let files = v
                .split(':')
                .filter(|s| !s.is_empty())
                .map(PathBuf::from)
                .filter(|p| p.is_file())
                .collect();
            return (files, Some(format!("{var}={v}")));
        }
    }
    let mut files = Vec::new();
    for dir in [
        "/usr/share/vulkan/icd.d",
        "/etc/vulkan/icd.d",
        "/usr/local/share/vulkan/icd.d",
    ] {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if e.path().extension().is_some_and(|x| x == "json") {
                files.push(e.path());
            }
        }
    }
    files.sort();
    (files, None)
}

fn vulkan_loader() -> Option<String> {
    #[cfg(target_os = "linux")]
    {
        let name = c"libvulkan.so.1";
        // SAFETY: `name` is a NUL-terminated literal; RTLD_LAZY | RTLD_NOLOAD loads nothing
        // new: it only answers whether the loader is already in the process.
        let h = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
        if !h.is_null() {
            return Some("libvulkan.so.1 (loaded)".into());
        }
        [
            "/usr/lib/x86_64-linux-gnu",
            "/usr/lib64",
            "/usr/lib",
            "/usr/local/lib",
        ]
        .iter()
        .map(|d| Path::new(d).join("libvulkan.so.1"))
        .find(|p| p.exists())
        .map(|p| p.display().to_string())
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

fn gpu_api_checks() -> Vec<Check> {
    let mut v = Vec::new();
    if cfg!(target_os = "macos") {
        let mps = crate::backend::registry::probe(BackendKind::Mps);
        v.push(if mps.is_available() {
            check(
                "mps.metal",
                "Metal (Apple GPU)",
                Status::Pass,
                "a Metal adapter is `mps`",
                "",
            )
        } else {
            check(
                "mps.metal",
                "Metal (Apple GPU)",
                Status::Fail,
                match &mps.availability {
                    Availability::Unavailable { reason, .. } => reason.clone(),
                    _ => String::new(),
                },
                "Metal needs nothing to install on macOS 11+; check that the build has the \
                 `wgpu` feature",
            )
        });
    } else {
        v.push(check(
            "mps.metal",
            "Metal (Apple GPU)",
            Status::Skip,
            "not macOS",
            "",
        ));
        let loader = vulkan_loader();
        v.push(match &loader {
            Some(p) => check(
                "wgpu.vulkan_loader",
                "Vulkan loader",
                Status::Pass,
                p.clone(),
                "",
            ),
            None => check(
                "wgpu.vulkan_loader",
                "Vulkan loader",
                Status::Fail,
                "libvulkan.so.1 not found",
                "install the Vulkan loader (Debian/Ubuntu: `apt install libvulkan1`)",
            ),
        });
        let (icds, var) = vulkan_icds();
        v.push(if icds.is_empty() {
            check(
                "wgpu.vulkan_icd",
                "Vulkan drivers (ICDs)",
                Status::Fail,
                match var {
                    Some(var) => format!("{var} names no existing driver manifest"),
                    None => "no driver manifest in /usr/share/vulkan/icd.d or /etc/vulkan/icd.d"
                        .to_string(),
                },
                "install your GPU's Vulkan driver (NVIDIA: the driver package's Vulkan part; \
                 AMD/Intel: `apt install mesa-vulkan-drivers`, which also gives the lavapipe \
                 software device), or fix VK_DRIVER_FILES / VK_ICD_FILENAMES",
            )
        } else {
            check(
                "wgpu.vulkan_icd",
                "Vulkan drivers (ICDs)",
                Status::Pass,
                format!(
                    "{}{}",
                    var.map(|v| format!("{v}: ")).unwrap_or_default(),
                    icds.iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                "",
            )
        });
    }
    let probe = crate::backend::registry::probe(BackendKind::Wgpu);
    v.push(match &probe.availability {
        Availability::Unavailable { reason, hint } => check(
            "wgpu.adapters",
            "GPU adapters",
            if probe.compiled {
                Status::Fail
            } else {
                Status::Skip
            },
            reason.clone(),
            hint.clone(),
        ),
        Availability::Available { devices } => {
            let list = devices
                .iter()
                .map(|d| {
                    format!(
                        "{} {} ({})",
                        d.device,
                        d.name,
                        d.caps.platform.as_deref().unwrap_or("?")
                    )
                })
                .collect::<Vec<_>>()
                .join(", ");
            if devices
                .iter()
                .all(|d| d.caps.hardware == Hardware::HostCpuEmulated)
            {
                check(
                    "wgpu.adapters",
                    "GPU adapters",
                    Status::Warn,
                    format!("only software adapters, which compute on the CPU: {list}"),
                    "install your GPU's Vulkan driver for a hardware adapter; without a GPU the \
                     `cpu` device is faster than a software one",
                )
            } else {
                check("wgpu.adapters", "GPU adapters", Status::Pass, list, "")
            }
        }
    });
    v
}
