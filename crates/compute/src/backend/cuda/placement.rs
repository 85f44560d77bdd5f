//! Where this runs, before anything about the driver: WSL 1 (no GPU), WSL 2 (the Windows
//! driver's libraries, and a Linux driver's copy hiding them), a hosted notebook's runtime
//! without a GPU, and a container started without the GPUs or without the driver's compute
//! libraries.

use crate::base::facts::Machine;
use crate::base::finding::{finding, Driver, Finding};

fn hosted(m: &Machine) -> Option<crate::base::system::Hosted> {
    crate::base::system::Hosted::from_vars(|k| {
        m.var(k).is_some_and(|v| !v.is_empty())
            || std::env::var_os(k).is_some_and(|v| !v.is_empty())
    })
}

/// The placement causes, in order, onto `v`. `gpu`: the machine shows an NVIDIA GPU.
pub(crate) fn placement(m: &Machine, d: &Driver, gpu: bool, v: &mut Vec<Finding>) {
    // ---- where this runs: WSL, a hosted notebook, a container ----
    if m.wsl == Some(1) {
        v.push(finding(
            "wsl.version1",
            "WSL 1 has no GPU",
            "/proc/version names Microsoft but not WSL2: this is WSL 1, which cannot reach a GPU",
            "convert the distribution to WSL 2 in Windows (`wsl -l -v` lists them; `wsl \
             --set-version <name> 2`), with the NVIDIA driver for Windows installed; never \
             install a Linux NVIDIA driver inside WSL",
        ));
    }
    if m.wsl == Some(2) {
        let linux_copy = d
            .libcuda
            .as_deref()
            .filter(|p| !p.starts_with("/usr/lib/wsl/"))
            .map(str::to_string)
            .or_else(|| {
                // Not loaded (or not loadable): a Linux driver's libcuda in the system's
                // folders is what the loader finds first.
                m.driver_files
                    .iter()
                    .find(|(p, _)| p.contains("/libcuda.so") && !p.starts_with("/usr/lib/wsl/"))
                    .map(|(p, _)| p.clone())
            });
        if let Some(p) = linux_copy.filter(|_| m.wsl_libcuda) {
            v.push(finding(
                "wsl.shadowed_driver",
                "a Linux driver's libcuda hides WSL's",
                format!(
                    "WSL 2: libcuda was loaded from {p}, a Linux driver's copy, not WSL's \
                     /usr/lib/wsl/lib/libcuda.so.1 (the Windows driver's bridge)"
                ),
                format!(
                    "remove the Linux driver inside WSL (`sudo apt remove --purge \
                     '^nvidia-driver-.*' '^libnvidia-.*'`), take {} off LD_LIBRARY_PATH, then \
                     `sudo ldconfig`: in WSL the driver comes from Windows only",
                    std::path::Path::new(&p)
                        .parent()
                        .map(|p| p.display().to_string())
                        .unwrap_or_default()
                ),
            ));
        } else if !m.wsl_libcuda {
            v.push(finding(
                "wsl.no_windows_driver",
                "WSL 2 without the Windows driver's libraries",
                "WSL 2, but /usr/lib/wsl/lib/libcuda.so.1 does not exist",
                "install (or update) the NVIDIA driver for Windows, which provides \
                 /usr/lib/wsl/lib, then run `wsl --shutdown` in Windows and open WSL again; \
                 do not install a Linux driver inside WSL",
            ));
        }
    }
    let gpu_nodes = m.gpu_nodes();
    if let (false, Some(h)) = (gpu || m.wsl.is_some(), hosted(m)) {
        v.push(finding(
            "hosted.no_gpu_runtime",
            "a notebook runtime without a GPU",
            format!(
                "{}: this runtime has no GPU (no NVIDIA GPU on the PCI bus, no /dev/nvidia*)",
                h.name()
            ),
            h.gpu_fix(),
        ));
    }
    let nvd = m.var("NVIDIA_VISIBLE_DEVICES");
    if let Some(c) = &m.container {
        let hidden = nvd.is_some_and(|v| {
            let v = v.trim();
            v.is_empty() || v == "void" || v == "none"
        });
        if gpu_nodes.is_empty() && (hidden || gpu || nvd.is_some()) {
            let k8s = c.contains("Kubernetes") || m.var("KUBERNETES_SERVICE_HOST").is_some();
            v.push(finding(
                "container.no_gpus",
                "a container started without the GPUs",
                format!(
                    "in a container ({c}) with no /dev/nvidia<N> inside{}",
                    nvd.map(|v| format!("; NVIDIA_VISIBLE_DEVICES={v:?}"))
                        .unwrap_or_default()
                ),
                if hidden {
                    format!(
                        "NVIDIA_VISIBLE_DEVICES={:?} hides the GPUs on purpose: start the \
                         container with NVIDIA_VISIBLE_DEVICES=all (or `--gpus all`)",
                        nvd.unwrap_or_default()
                    )
                } else if k8s {
                    "ask for a GPU in the pod spec (`resources: limits: nvidia.com/gpu: 1`), with \
                     the NVIDIA device plugin or GPU operator on the cluster"
                        .to_string()
                } else {
                    "start the container with the GPUs: `docker run --gpus all ...` (Podman: \
                     `--device nvidia.com/gpu=all`), with the NVIDIA Container Toolkit on the \
                     host (`sudo nvidia-ctk runtime configure --runtime=docker && sudo \
                     systemctl restart docker`)"
                        .to_string()
                },
            ));
        } else if !gpu_nodes.is_empty() && d.libcuda.is_none() {
            let caps = m.var("NVIDIA_DRIVER_CAPABILITIES");
            if caps.is_none_or(|c| !(c.contains("compute") || c.contains("all"))) {
                v.push(finding(
                    "container.no_compute_capability",
                    "the container has the GPUs but not the driver's CUDA library",
                    format!(
                        "in a container ({c}) with {} but no libcuda.so.1; \
                         NVIDIA_DRIVER_CAPABILITIES={}",
                        gpu_nodes
                            .iter()
                            .map(|n| n.path.as_str())
                            .collect::<Vec<_>>()
                            .join(" "),
                        caps.map(|c| format!("{c:?}"))
                            .unwrap_or_else(|| "unset (the runtime's default: utility)".into())
                    ),
                    "start it with the compute capability: `-e \
                     NVIDIA_DRIVER_CAPABILITIES=compute,utility` (or `--gpus \
                     'all,\"capabilities=compute,utility\"'`) so the runtime mounts libcuda",
                ));
            }
        }
    }
}
