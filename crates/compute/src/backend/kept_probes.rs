//! The probe helpers' answers, kept between runs in the runtime folder (`native::kept`'s
//! trust rules), so that `accel devices` and `import accelkit as accel; accel.best()` do not start a
//! Vulkan enumeration and an XLA plugin in helpers on every call (26 and 30 ms of a 44 ms
//! `accel devices` on a 2-core Zen 4 with lavapipe and XLA's CPU plugin installed).
//!
//! Only answers that cannot change while what they depend on stays the same are kept:
//! - `wgpu`: the adapters Vulkan (and GL) list, only when every one is a CPU adapter
//!   (lavapipe) or none was found: a GPU's driver can hang after it answered once, and its
//!   helper is what keeps a hung driver out of this process. The key holds the Vulkan
//!   loader's and EGL's manifest folders with every file in them (drivers, layers and loader settings: an
//!   upgraded or added driver rewrites its manifest) and the driver library each manifest
//!   names, the dynamic linker's cache (`ldconfig` runs when a library such as the Vulkan
//!   loader is installed), the GPU device nodes (`/dev/dri/*`, `/dev/nvidia*`, `/dev/kfd`: a
//!   driver module loaded since makes them), the variables the loader, its layers, EGL and
//!   Mesa read (`VK_*`, `MESA_*`, `ENABLE_*`/`DISABLE_*`, `DRI_PRIME`...), and the boot.
//! - `xla`: only when every plugin that answered is a CPU plugin (or none was found). A TPU
//!   or GPU plugin's answer depends on whether another process holds the chip, so it is asked
//!   every time.
//!   The key holds every plugin file accel would load (path, how it was found, identity and
//!   times), each Python environment's folder (it changes when a package is added or removed)
//!   and the variables the plugins read.
//!
//! Both keys hold accel's version and the helper program's identity and times. CUDA is never
//! kept: a GPU's state (another process, a reset, MIG) must be read as it is now.

use crate::backend::native::kept::{self, env_lines, stamp};
use crate::base::probe_child::Answer;
use std::path::{Path, PathBuf};

/// The most a kept answer may hold.
const MAX_BYTES: u64 = 256 * 1024;

/// Plugged into `probe_child`, which asks it before starting a helper.
pub(crate) const KEEPER: crate::base::probe_child::Keeper =
    crate::base::probe_child::Keeper { key, read, write };

fn file(task: &str) -> String {
    format!("accel-probe-{task}.json")
}

/// What `task`'s answer depends on; `None` for tasks never kept or where nothing can be kept.
fn key(task: &str) -> Option<Vec<String>> {
    if !cfg!(target_os = "linux") || !matches!(task, "wgpu" | "xla") {
        return None;
    }
    kept::folder()?;
    let mut k = vec![format!("accel {} probe {task}", env!("CARGO_PKG_VERSION"))];
    let program = crate::base::probe_child::program()?;
    k.push(format!("program {} {}", program.display(), stamp(program)));
    let boot =
        accelkit_core::files::read_text_limited(Path::new("/proc/sys/kernel/random/boot_id"), 256)
            .ok()?;
    k.push(format!("boot {}", boot.trim()));
    // Who asks: a device node's permissions answer a user by its groups (joining `render` or
    // `video` makes a GPU usable without any file changing).
    k.push(identity());
    match task {
        "wgpu" => {
            k.extend(env_lines(
                &[
                    "VK_", "WGPU_", "MESA_", "LP_", "GALLIUM_", "__EGL", "__GLX", "LIBGL_", "XDG_",
                    "EGL_", "DRI_", "ENABLE_", "DISABLE_", "NODEVICE", "LD_",
                ],
                &["HOME", "DISPLAY", "WAYLAND_DISPLAY"],
            ));
            for dir in manifest_folders() {
                folder_lines(&dir, &mut k);
            }
            // The files and folders the loader's variables name (a driver manifest fixed in
            // place under `VK_DRIVER_FILES` changes no folder above).
            for p in named_by_vulkan_variables() {
                if p.is_dir() {
                    folder_lines(&p, &mut k);
                } else {
                    k.push(format!("named {} {}", p.display(), stamp(&p)));
                    if let Some(lib) = manifest_library(&p) {
                        k.push(format!("    {} {}", lib.display(), stamp(&lib)));
                    }
                }
            }
            k.push(format!(
                "/etc/ld.so.cache {}",
                stamp(Path::new("/etc/ld.so.cache"))
            ));
            folder_lines(Path::new("/dev/dri"), &mut k);
            let mut nodes: Vec<String> = std::fs::read_dir("/dev")
                .into_iter()
                .flatten()
                .flatten()
                .take(4096)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("nvidia") || n == "kfd")
                .collect();
            nodes.sort();
            k.push(format!("/dev {}", nodes.join(" ")));
        }
        _ => {
            k.extend(env_lines(
                &["ACCEL_", "PJRT_", "XLA_", "TPU_", "JAX_", "LD_"],
                &[
                    "CUDA_VISIBLE_DEVICES",
                    "HOME",
                    "VIRTUAL_ENV",
                    "CONDA_PREFIX",
                ],
            ));
            let env = crate::backend::native::libs::SearchEnv::from_process();
            for (sp, src) in crate::backend::native::pyenv::python_environments(&env) {
                k.push(format!("python {} ({src}) {}", sp.display(), stamp(&sp)));
            }
            for (p, src) in crate::backend::xla::plugin_candidates(&env) {
                k.push(format!("plugin {} ({src}) {}", p.display(), stamp(&p)));
            }
        }
    }
    Some(k)
}

/// This process's user and groups, real and effective, with the supplementary groups sorted.
fn identity() -> String {
    #[cfg(unix)]
    {
        let mut groups = vec![0 as libc::gid_t; 1024];
        // SAFETY: getgroups writes at most `groups.len()` ids into the buffer we own and
        // returns how many it wrote, or -1 (then none are used).
        let n = unsafe { libc::getgroups(groups.len() as libc::c_int, groups.as_mut_ptr()) };
        groups.truncate(usize::try_from(n).unwrap_or(0));
        groups.sort_unstable();
        // SAFETY: these take no arguments and cannot fail.
        let ids = unsafe {
            (
                libc::getuid(),
                libc::geteuid(),
                libc::getgid(),
                libc::getegid(),
            )
        };
        format!(
            "identity uid {} {} gid {} {} groups {groups:?}",
            ids.0, ids.1, ids.2, ids.3
        )
    }
    #[cfg(not(unix))]
    {
        String::new()
    }
}

/// The manifest files and folders the Vulkan loader's variables name (`VK_DRIVER_FILES`,
/// `VK_ICD_FILENAMES`, `VK_ADD_DRIVER_FILES`, `VK_LAYER_PATH`, `VK_ADD_LAYER_PATH`,
/// `VK_IMPLICIT_LAYER_PATH`, `VK_ADD_IMPLICIT_LAYER_PATH`), at most 64 of them.
fn named_by_vulkan_variables() -> Vec<PathBuf> {
    [
        "VK_DRIVER_FILES",
        "VK_ICD_FILENAMES",
        "VK_ADD_DRIVER_FILES",
        "VK_LAYER_PATH",
        "VK_ADD_LAYER_PATH",
        "VK_IMPLICIT_LAYER_PATH",
        "VK_ADD_IMPLICIT_LAYER_PATH",
    ]
    .iter()
    .filter_map(std::env::var_os)
    .flat_map(|v| std::env::split_paths(&v).collect::<Vec<_>>())
    .filter(|p| p.is_absolute())
    .take(64)
    .collect()
}

/// The Vulkan loader's driver and implicit-layer manifest folders (its search order: the
/// XDG config and data folders, /etc) and EGL's vendor folders.
fn manifest_folders() -> Vec<PathBuf> {
    let var = |v: &str| std::env::var_os(v).filter(|s| !s.is_empty());
    let home = var("HOME").map(PathBuf::from);
    let mut roots: Vec<PathBuf> = Vec::new();
    roots.extend(
        var("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".config"))),
    );
    roots.extend(std::env::split_paths(
        &var("XDG_CONFIG_DIRS").unwrap_or_else(|| "/etc/xdg".into()),
    ));
    roots.push("/etc".into());
    roots.extend(
        var("XDG_DATA_HOME")
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".local/share"))),
    );
    roots.extend(std::env::split_paths(
        &var("XDG_DATA_DIRS").unwrap_or_else(|| "/usr/local/share:/usr/share".into()),
    ));
    let mut out = Vec::new();
    for r in roots.iter().filter(|r| r.is_absolute()) {
        for sub in [
            "vulkan/icd.d",
            "vulkan/implicit_layer.d",
            "vulkan/explicit_layer.d",
            "vulkan/loader_settings.d",
            "glvnd/egl_vendor.d",
        ] {
            out.push(r.join(sub));
        }
    }
    out
}

/// A folder's stamp and, sorted, each entry's (at most 256 entries), with the library a
/// manifest among them names by absolute path (`ICD.library_path`, `layer.library_path`).
fn folder_lines(dir: &Path, k: &mut Vec<String>) {
    let s = stamp(dir);
    k.push(format!("folder {} {s}", dir.display()));
    if s == "absent" {
        return;
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .take(256)
        .map(|e| e.path())
        .collect();
    entries.sort();
    for e in entries {
        k.push(format!("  {} {}", e.display(), stamp(&e)));
        if e.extension().is_some_and(|x| x == "json") {
            if let Some(lib) = manifest_library(&e) {
                k.push(format!("    {} {}", lib.display(), stamp(&lib)));
            }
        }
    }
}

/// The absolute library path a Vulkan or EGL manifest names, if any (read at most 64 KiB).
fn manifest_library(manifest: &Path) -> Option<PathBuf> {
    let text = accelkit_core::files::read_text_limited(manifest, 64 * 1024).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    let lib = ["ICD", "layer"]
        .iter()
        .find_map(|s| v[*s]["library_path"].as_str())
        .or_else(|| v["library_path"].as_str())?;
    let p = PathBuf::from(lib);
    p.is_absolute().then_some(p)
}

fn read(task: &str, key: &[String]) -> Option<Answer> {
    let dir = kept::folder()?;
    let answer: Answer = kept::read(&dir, &file(task), key, MAX_BYTES)?;
    keepable(task, &answer).then_some(answer)
}

fn write(task: &str, key: &[String], answer: &Answer) {
    if let Some(dir) = kept::folder().filter(|_| keepable(task, answer)) {
        kept::write(&dir, &file(task), key, answer, MAX_BYTES);
    }
}

/// Whether an answer may be kept: it says whether the backend is available, and every
/// adapter in it is a CPU one (lavapipe) or every XLA plugin a CPU plugin that started, none
/// stalled (no adapter or plugin found is kept too). It reads the fields of the backends'
/// answer types (`wgpu::HelperAnswer`, `xla::HelperAnswer`) from the document, so a build
/// without a backend reads them too.
fn keepable(task: &str, answer: &Answer) -> bool {
    let d = &answer.0;
    if !d["available"].is_boolean() {
        return false;
    }
    let all = |k: &str, ok: fn(&serde_json::Value) -> bool| {
        d.get(k)
            .is_none_or(|v| v.as_array().is_some_and(|v| v.iter().all(ok)))
    };
    match task {
        "wgpu" => all("adapters", |a| a["device_type"] == "Cpu"),
        "xla" => {
            d.get("stalled")
                .is_none_or(|s| s.as_array().is_some_and(|s| s.is_empty()))
                && all("plugins", |p| {
                    p["platform"] == "cpu" && p["problem"].is_null() && p["stalled"] == false
                })
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::keepable;
    use crate::base::probe_child::Answer;

    #[test]
    fn only_cpu_adapters_and_cpu_plugins_that_started_are_kept() {
        let cpu = r#"{"path":"/p/cpu.so","platform":"cpu","problem":null,"stalled":false}"#;
        let tpu = r#"{"path":"/p/libtpu.so","platform":"tpu","problem":null,"stalled":false}"#;
        let bad = r#"{"path":"/p/x.so","platform":null,"problem":"dlopen failed","stalled":false}"#;
        let lavapipe = r#"{"name":"llvmpipe","device_type":"Cpu"}"#;
        let gpu = r#"{"name":"NVIDIA H200","device_type":"DiscreteGpu"}"#;
        let xla = |available: bool, plugins: &[&str], stalled: &str| {
            format!(
                r#"{{"available":{available},"stalled":[{stalled}],"plugins":[{}],"devices":[]}}"#,
                plugins.join(",")
            )
        };
        let wgpu = |available: bool, adapters: &[&str]| {
            format!(
                r#"{{"available":{available},"adapters":[{}],"problem":null}}"#,
                adapters.join(",")
            )
        };
        // (task, answer, kept?, why)
        let cases: Vec<(&str, String, bool, &str)> = vec![
            ("xla", xla(true, &[cpu], ""), true, "CPU plugin"),
            (
                "xla",
                xla(true, &[cpu, tpu], ""),
                false,
                "a TPU plugin beside it",
            ),
            ("xla", xla(false, &[bad], ""), false, "a broken plugin"),
            (
                "xla",
                xla(true, &[cpu], r#""/p/y.so""#),
                false,
                "a stalled plugin",
            ),
            ("xla", xla(false, &[], ""), true, "no plugin found"),
            (
                "xla",
                format!(r#"{{"plugins":[{cpu}]}}"#),
                false,
                "no availability",
            ),
            ("wgpu", wgpu(false, &[]), true, "no adapter found"),
            ("wgpu", wgpu(true, &[lavapipe]), true, "lavapipe"),
            (
                "wgpu",
                wgpu(true, &[lavapipe, gpu]),
                false,
                "a GPU beside lavapipe",
            ),
            ("wgpu", "null".to_string(), false, "an empty answer"),
            (
                "wgpu",
                r#"{"available":true,"adapters":7}"#.into(),
                false,
                "another shape",
            ),
            (
                "cuda",
                r#"{"available":true}"#.into(),
                false,
                "CUDA is never kept",
            ),
        ];
        for (task, answer, kept, why) in cases {
            let a = Answer(serde_json::from_str(&answer).unwrap());
            assert_eq!(keepable(task, &a), kept, "{task}: {why}");
        }
    }
}
