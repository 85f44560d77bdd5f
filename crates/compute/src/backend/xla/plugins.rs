//! Finding PJRT plugins, as the CUDA libraries are found (`backend::native`): the paths in
//! `ACCEL_PJRT_PLUGIN` and `PJRT_NAMES_AND_LIBRARY_PATHS`, then what pip installed in any
//! Python environment; and the CUDA wheels a JAX CUDA plugin needs loaded first. Compiled in
//! every build (`accel doctor` lists plugins even where the backend is left out).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::backend::native::libs::SearchEnv;

/// One PJRT plugin as found and loaded (or why it could not be).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plugin {
    /// The shared library.
    pub path: PathBuf,
    /// How it was found (`ACCEL_PJRT_PLUGIN`, `python wheel (VIRTUAL_ENV)`...).
    pub source: String,
    /// The client's platform (`cpu`, `cuda`, `tpu`), once loaded.
    pub platform: Option<String>,
    /// The platform's version string.
    pub platform_version: Option<String>,
    /// The plugin's PJRT C API version (`0.115`).
    pub pjrt_api_version: Option<String>,
    /// Addressable devices.
    pub devices: usize,
    /// Why it failed to load or start, if it did.
    pub problem: Option<String>,
    /// Its load or client start did not finish within `ACCEL_PJRT_TIMEOUT` (here or in the
    /// probe helper); it is not tried again in this process.
    pub stalled: bool,
    /// Libraries loaded first, by absolute path, because the plugin needs them and its own
    /// Python package would have loaded them (JAX's CUDA plugin: the CUDA wheels beside it).
    pub preloaded: Vec<PathBuf>,
    /// What did not go as asked although the plugin started: a preload that failed, a
    /// client option the plugin rejected (then it runs with its defaults).
    pub notes: Vec<String>,
}

/// The plugin files named by the environment or installed in Python environments, in search
/// order, each with how it was found.
pub fn plugin_candidates(env: &SearchEnv) -> Vec<(PathBuf, String)> {
    let mut out: Vec<(PathBuf, String)> = Vec::new();
    let mut add = |p: PathBuf, src: &str| {
        let name = p.file_name().map(|n| n.to_os_string());
        // One copy per plugin file name: two copies of one plugin in a process conflict.
        if p.is_file()
            && crate::backend::native::trust::loadable(&p)
            && !out
                .iter()
                .any(|(q, _)| q.file_name().map(|n| n.to_os_string()) == name)
        {
            out.push((p, src.to_string()));
        }
    };
    for p in crate::base::env::paths("ACCEL_PJRT_PLUGIN", &[':', ',']) {
        add(p, "ACCEL_PJRT_PLUGIN");
    }
    if let Ok(v) = std::env::var("PJRT_NAMES_AND_LIBRARY_PATHS") {
        for pair in v.split(',').filter(|s| !s.is_empty()) {
            let path = pair.split_once(':').map_or(pair, |(_, p)| p);
            add(PathBuf::from(path), "PJRT_NAMES_AND_LIBRARY_PATHS");
        }
    }
    for (sp, src) in crate::backend::native::pyenv::python_environments(env) {
        let mut files: Vec<PathBuf> = Vec::new();
        let read = |d: PathBuf| -> Vec<PathBuf> {
            std::fs::read_dir(d)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .collect()
        };
        for d in read(sp.join("jax_plugins")) {
            files.extend(read(d).into_iter().filter(|f| {
                f.extension().is_some_and(|e| e == "so")
                    && f.file_name()
                        .is_some_and(|n| n.to_string_lossy().contains("plugin"))
            }));
        }
        files.push(sp.join("libtpu").join("libtpu.so"));
        for d in read(sp.clone()) {
            files.extend(read(d).into_iter().filter(|f| {
                f.file_name().is_some_and(|n| {
                    let n = n.to_string_lossy();
                    n.starts_with("pjrt_c_api_") && n.ends_with("plugin.so")
                })
            }));
        }
        for f in files {
            add(f, src);
        }
    }
    out
}

/// The CUDA libraries JAX's CUDA plugin needs and does not find by itself: JAX's Python
/// package loads them by path from the `nvidia` wheels of its own environment before it
/// registers the plugin. (folder under site-packages, file-name prefixes, in load order:
/// dependencies first.) CUDA 13's wheels share one folder; CUDA 12's have one each.
const CUDA13_WHEEL_LIBS: &[(&str, &[&str])] = &[
    (
        "nvidia/cu13/lib",
        &[
            "libcudart.so.13",
            "libnvJitLink.so.13",
            "libnvrtc.so.13",
            "libcublasLt.so.13",
            "libcublas.so.13",
            "libcupti.so.13",
            "libcusparse.so.12",
            "libcusolver.so.12",
            "libcufft.so.12",
        ],
    ),
    ("nvidia/nccl/lib", &["libnccl.so"]),
    ("nvidia/nvshmem/lib", &["libnvshmem_host.so"]),
    ("nvidia/cudnn/lib", &["libcudnn.so"]),
    ("nvidia/cuda_nvcc/nvvm/lib64", &["libnvvm.so"]),
];

/// JAX's CUDA 12 plugin's libraries: the `nvidia-*-cu12` wheels, a folder each.
const CUDA12_WHEEL_LIBS: &[(&str, &[&str])] = &[
    ("nvidia/cuda_runtime/lib", &["libcudart.so.12"]),
    ("nvidia/nvjitlink/lib", &["libnvJitLink.so.12"]),
    ("nvidia/cuda_nvrtc/lib", &["libnvrtc.so.12"]),
    (
        "nvidia/cublas/lib",
        &["libcublasLt.so.12", "libcublas.so.12"],
    ),
    ("nvidia/cuda_cupti/lib", &["libcupti.so.12"]),
    ("nvidia/cusparse/lib", &["libcusparse.so.12"]),
    ("nvidia/cusolver/lib", &["libcusolver.so.11"]),
    ("nvidia/cufft/lib", &["libcufft.so.11"]),
    ("nvidia/nccl/lib", &["libnccl.so"]),
    ("nvidia/nvshmem/lib", &["libnvshmem_host.so"]),
    ("nvidia/cudnn/lib", &["libcudnn.so"]),
    ("nvidia/cuda_nvcc/nvvm/lib64", &["libnvvm.so"]),
];

/// The CUDA major a JAX CUDA plugin is built for, from its path (`jax_plugins/xla_cuda12/`,
/// `jax_cuda12_plugin`): None for a plugin that names no CUDA major.
pub fn plugin_cuda_major(plugin: &std::path::Path) -> Option<u32> {
    // The last `cudaNN` in the path (`xla_cuda12/xla_cuda_plugin.so`: the folder's).
    let s = plugin.to_string_lossy().to_ascii_lowercase();
    s.match_indices("cuda")
        .filter_map(|(i, _)| {
            let digits: String = s[i + 4..]
                .chars()
                .take_while(|c| c.is_ascii_digit())
                .collect();
            digits.parse().ok().filter(|m| (11..=20).contains(m))
        })
        .last()
}

/// The libraries to load, by absolute path and in order, before the PJRT plugin `plugin`:
/// for a plugin inside a Python environment's `jax_plugins/` (JAX's CUDA plugin), the CUDA
/// libraries of the `nvidia` wheels of the plugin's own CUDA major in that same
/// site-packages; nothing for other plugins. Found by file name (`libcublas.so.13`), so only
/// what is installed is listed.
pub fn plugin_preloads(plugin: &std::path::Path) -> Vec<PathBuf> {
    let Some(site) = plugin
        .ancestors()
        .find(|d| d.file_name().is_some_and(|n| n == "jax_plugins"))
        .and_then(|d| d.parent())
    else {
        return Vec::new();
    };
    let is_cuda = plugin
        .to_string_lossy()
        .to_ascii_lowercase()
        .contains("cuda");
    if !is_cuda {
        return Vec::new();
    }
    let table = if plugin_cuda_major(plugin) == Some(12) {
        CUDA12_WHEEL_LIBS
    } else {
        CUDA13_WHEEL_LIBS
    };
    let mut out = Vec::new();
    for (dir, prefixes) in table {
        let dir = site.join(dir);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .collect();
        files.sort();
        for prefix in prefixes.iter() {
            // `libcublas.so.13` but not `libcublasLt.so.13` for the prefix `libcublas.so`.
            if let Some(f) = files.iter().find(|f| {
                f.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
            }) {
                out.push(f.clone());
            }
        }
    }
    out
}

pub(crate) static SKIP_IN_HELPER: std::sync::OnceLock<Vec<PathBuf>> = std::sync::OnceLock::new();

/// In the probe helper: plugins not to load (they stalled or crashed an earlier helper).
pub(crate) fn skip_in_helper(paths: Vec<PathBuf>) {
    let _ = SKIP_IN_HELPER.set(paths);
}

/// The step name of a plugin's load, as the probe helper reports it.
#[cfg_attr(not(all(feature = "xla", target_os = "linux")), allow(dead_code))]
pub(crate) const LOAD_STEP: &str = "load the PJRT plugin ";
