//! Vulkan and Metal (wgpu, mps): the loader, the drivers (ICDs), software-only adapters.

use std::path::{Path, PathBuf};

use crate::base::check::{check, Check, Status};
use crate::probe::{Availability, Probe};
use crate::Hardware;

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

/// The Vulkan/Metal checklist, after wgpu's probe and (on a Mac) mps's, each from
/// `backend::registry::probe`; `mps` is asked only on macOS.
pub(crate) fn gpu_api_checks(probe: &Probe, mps: impl FnOnce() -> &'static Probe) -> Vec<Check> {
    let mut v = Vec::new();
    if cfg!(target_os = "macos") {
        let mps = mps();
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
