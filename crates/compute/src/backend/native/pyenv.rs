//! The Python environments accel searches for CUDA wheels and PJRT plugins: the prefix accel
//! was installed into, `VIRTUAL_ENV`, conda, `python3` on PATH (asked once, with a time limit,
//! only when it is the user's; its answer kept between runs by `pycache`), and common places.
//! Shared by the CUDA and XLA searches.

use std::path::{Path, PathBuf};

use super::trust;

/// The `site-packages` folders of every Python environment accel looks in, with why: the
/// prefix accel itself was installed into, `VIRTUAL_ENV` (and conda's), `python3` on PATH
/// (when none of those gave one), then common places (`.venv`, `~/.local`, pyenv,
/// `/opt/*/.venv`, `/usr/local`). Shared with the XLA backend's plugin search.
pub fn python_environments(env: &SearchEnv) -> Vec<(PathBuf, &'static str)> {
    let mut sps: Vec<(PathBuf, &'static str)> = Vec::new();
    if let Some(v) = &env.own_prefix {
        for sp in site_packages(Path::new(v)) {
            sps.push((sp, "python wheel (accel's own environment)"));
        }
    }
    if let Some(v) = &env.virtual_env {
        for sp in site_packages(Path::new(v)) {
            sps.push((sp, "python wheel (VIRTUAL_ENV)"));
        }
    }
    if let Some(v) = &env.conda_prefix {
        for sp in site_packages(Path::new(v)) {
            sps.push((sp, "python wheel (CONDA_PREFIX)"));
        }
    }
    // `python3` on PATH is, in practice, the environment already found (an activated venv's
    // or the one accel was installed into); asking it costs a process start (0.1 s and more
    // behind pyenv's shims), so only when no environment was found yet.
    if env.ask_python && sps.is_empty() {
        for sp in python_site_packages() {
            sps.push((sp, "python wheel (python3 on PATH)"));
        }
    }
    if env.system_dirs {
        let mut roots: Vec<PathBuf> = Vec::new();
        // `./.venv` and `./venv` of the working directory only when the user owns them: a
        // cloned repository's `.venv` is someone else's native code.
        if let Ok(cwd) = std::env::current_dir() {
            for name in [".venv", "venv"] {
                let dir = cwd.join(name);
                if !dir.is_dir() {
                    continue;
                }
                match trust::owned_and_private(&dir, &cwd) {
                    Ok(()) => roots.push(dir),
                    Err(why) => trust::skipped(&dir, &why),
                }
            }
        }
        if let Some(h) = &env.home {
            let h = Path::new(h);
            roots.extend([h.join(".venv"), h.join("venv"), h.join(".local")]);
            roots.extend(glob_dirs(&h.join(".pyenv/versions"), ""));
            roots.extend(glob_dirs(&h.join("miniconda3/envs"), ""));
        }
        for opt in glob_dirs(Path::new("/opt"), "") {
            roots.extend([opt.join(".venv"), opt.join("venv"), opt.clone()]);
        }
        roots.extend([PathBuf::from("/usr/local"), PathBuf::from("/usr")]);
        for r in roots {
            for sp in site_packages(&r) {
                sps.push((sp, "python wheel"));
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    sps.retain(|(p, _)| seen.insert(std::fs::canonicalize(p).unwrap_or_else(|_| p.clone())));
    // One rule for every root, however it was found (`trust::safe_folder`): a site-packages
    // another user (or a group) could have written never supplies native code.
    sps.retain(|(p, _)| trust::search(p));
    sps
}

/// `python3 -c ...`'s site-packages, asked once per process (a process start costs tens of
/// milliseconds, and both the CUDA and the XLA searches want it).
static PYTHON_SP: std::sync::OnceLock<Vec<PathBuf>> = std::sync::OnceLock::new();

fn python_site_packages() -> Vec<PathBuf> {
    PYTHON_SP
        .get_or_init(|| {
            // A probe helper takes its parent's answer: python3 is asked once per command.
            match std::env::var_os(SITE_PACKAGES_VAR) {
                Some(v) if crate::base::probe_child::is_helper() => std::env::split_paths(&v)
                    .filter(|p| !p.as_os_str().is_empty())
                    .collect(),
                _ => ask_python(),
            }
        })
        .clone()
}

/// `VIRTUAL_ENV` for a probe helper: the running Python's environment, where this process
/// has no `VIRTUAL_ENV` of its own (the helper then searches the same environments).
pub fn python_prefix_for_helper() -> Option<(&'static str, std::ffi::OsString)> {
    match (std::env::var_os("VIRTUAL_ENV"), trust::python_prefix()) {
        (None, Some(p)) => Some(("VIRTUAL_ENV", p.as_os_str().to_owned())),
        _ => None,
    }
}

/// The variable that carries `python3`'s site-packages to a probe helper.
pub const SITE_PACKAGES_VAR: &str = "ACCEL_HELPER_SITE_PACKAGES";

/// `python3`'s site-packages for a probe helper's environment, when this process asks python3
/// at all (it does only where no Python environment is found otherwise; the helper, with the
/// same environment, then does not ask either).
pub fn site_packages_for_helper() -> Option<std::ffi::OsString> {
    static SEARCHED: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    SEARCHED.get_or_init(|| drop(python_environments(&SearchEnv::from_process())));
    PYTHON_SP
        .get()
        .map(|sp| std::env::join_paths(sp).unwrap_or_default())
}

fn ask_python() -> Vec<PathBuf> {
    // The python3 on PATH only when it and its folder are the user's or root's and nobody
    // else may write them (its answer decides which native code accel loads).
    let Some(python) = accelkit_core::env::on_path("python3") else {
        return Vec::new();
    };
    if let Err(why) = trust::safe_program(&python) {
        trust::skipped(&python, &why);
        return Vec::new();
    }
    // Its answer from an earlier run, where nothing it depends on has changed since.
    let kept = super::pycache::folder().map(|dir| (super::pycache::key(&python), dir));
    if let Some(sps) = kept
        .as_ref()
        .and_then(|(key, dir)| super::pycache::read(dir, key))
    {
        return sps;
    }
    // A time limit: a python3 that hangs (a broken shim, a network home folder) must not
    // hang `accel devices` or doctor; it is killed and named instead.
    let child = std::process::Command::new(&python)
        .args([
            "-c",
            "import site,sys;print('\\n'.join(site.getsitepackages()+[site.getusersitepackages()]))",
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn();
    let Ok(mut child) = child else {
        return Vec::new();
    };
    let t0 = std::time::Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if t0.elapsed() < PYTHON_LIMIT => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                trust::skipped(
                    &python,
                    &format!(
                        "did not answer within {:.0} s when asked for its site-packages (killed)",
                        PYTHON_LIMIT.as_secs_f64()
                    ),
                );
                return Vec::new();
            }
        }
    }
    match child.wait_with_output() {
        Ok(o) if o.status.success() => {
            let sps: Vec<PathBuf> = String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(PathBuf::from)
                .filter(|p| p.is_absolute() && p.is_dir())
                .collect();
            if let Some((key, dir)) = &kept {
                super::pycache::write(dir, key, &sps);
            }
            sps
        }
        _ => Vec::new(),
    }
}

/// How long `python3` may take to name its site-packages.
const PYTHON_LIMIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Environment a search depends on, gathered once so tests can pass their own.
#[derive(Debug, Clone, Default)]
#[allow(missing_docs)]
pub struct SearchEnv {
    pub accel_cuda_lib_dir: Option<String>,
    pub ld_library_path: Option<String>,
    pub cuda_home: Option<String>,
    pub cuda_path: Option<String>,
    pub conda_prefix: Option<String>,
    pub virtual_env: Option<String>,
    pub home: Option<String>,
    /// Ask `python3` on PATH for its site-packages (slow: a process start); tests turn it off.
    pub ask_python: bool,
    /// Search the system's fixed locations (/usr/local/cuda*, /opt/*/.venv ...).
    pub system_dirs: bool,
    /// The prefix this program was installed into (`<prefix>/bin/accel`, as `pip install`
    /// puts it in a virtual environment, `~/.local` or Colab's `/usr/local`): its
    /// site-packages hold the wheels installed beside it, even without `VIRTUAL_ENV`.
    pub own_prefix: Option<String>,
}

impl SearchEnv {
    /// The real environment of this process.
    pub fn from_process() -> SearchEnv {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        SearchEnv {
            accel_cuda_lib_dir: var("ACCEL_CUDA_LIB_DIR"),
            ld_library_path: var("LD_LIBRARY_PATH"),
            cuda_home: var("CUDA_HOME"),
            cuda_path: var("CUDA_PATH"),
            conda_prefix: var("CONDA_PREFIX"),
            virtual_env: var("VIRTUAL_ENV")
                .or_else(|| trust::python_prefix().map(|p| p.display().to_string())),
            home: var("HOME"),
            ask_python: true,
            system_dirs: true,
            own_prefix: own_prefix(),
        }
    }
}

/// `<prefix>` when this executable is `<prefix>/bin/<name>` (`trust::own_prefix`).
fn own_prefix() -> Option<String> {
    trust::own_prefix().map(|p| p.display().to_string())
}

/// Folders matching `prefix*` inside `parent`, newest name first (`cuda-13.0` before
/// `cuda-12.4`).
pub(crate) fn glob_dirs(parent: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(parent)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    v.sort();
    v.reverse();
    v
}

/// The `site-packages` folders of a Python environment rooted at `root`.
pub(crate) fn site_packages(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for lib in ["lib", "lib64"] {
        for py in glob_dirs(&root.join(lib), "python3") {
            for sp in ["site-packages", "dist-packages"] {
                let p = py.join(sp);
                if p.is_dir() {
                    out.push(p);
                }
            }
        }
    }
    out
}

/// A Python package in an environment that is built for one CUDA major: PyTorch, JAX's CUDA
/// plugin, or one of NVIDIA's library wheels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaWheel {
    /// The `site-packages` it is in.
    pub site_packages: PathBuf,
    /// What it is, in words (`PyTorch 2.8.0+cu126 (CUDA 12.6)`, `jax-cuda12-plugin 0.7.1`).
    pub what: String,
    /// The CUDA major it is built for.
    pub major: u32,
    /// PyTorch or JAX (whose major accel prefers), not one of NVIDIA's library wheels.
    pub framework: bool,
}

/// The CUDA major a distribution's name and version say it is built for: `nvidia-cublas-cu12`
/// (12), `nvidia-cublas` 13.x (13: CUDA 13's wheels dropped the suffix), `jax-cuda12-plugin`,
/// `jax-cuda13-pjrt`. None for anything else (`nvidia-nccl-cu12` counts; `nvidia-ml-py`,
/// which is NVML's Python binding for any driver, does not).
pub fn wheel_major(dist: &str, version: &str) -> Option<u32> {
    let d = dist.to_ascii_lowercase().replace('_', "-");
    if let Some(rest) = d.strip_prefix("jax-cuda") {
        let (m, kind) = rest.split_once('-')?;
        return (["plugin", "pjrt"].contains(&kind)).then(|| m.parse().ok())?;
    }
    let rest = d.strip_prefix("nvidia-")?;
    if rest.starts_with("ml-py") || rest.is_empty() {
        return None;
    }
    if let Some((_, m)) = rest.rsplit_once("-cu") {
        if !m.is_empty() && m.bytes().all(|c| c.is_ascii_digit()) {
            return m.parse().ok().filter(|m| (10..=20).contains(m));
        }
    }
    // CUDA 13's wheels (`nvidia-cublas`, `nvidia-cuda-nvrtc`): the version's major.
    let m: u32 = version.split('.').next()?.parse().ok()?;
    ([
        "cublas",
        "cuda-nvrtc",
        "cuda-runtime",
        "cudnn",
        "cufft",
        "cusparse",
        "cusolver",
        "curand",
        "nvjitlink",
        "cuda-cupti",
        "nccl",
        "nvtx",
    ]
    .contains(&rest)
        && (12..=20).contains(&m))
    .then_some(m)
}

/// Every CUDA-built Python package in the Python environments searched: PyTorch
/// (`torch/version.py`'s `cuda`), JAX's CUDA plugins and NVIDIA's wheels (by their
/// `.dist-info` names), in the order of the environments, frameworks first.
pub fn cuda_wheels(env: &SearchEnv) -> Vec<CudaWheel> {
    let mut out = Vec::new();
    for (sp, _) in python_environments(env) {
        if let Ok(v) = read_small(&sp.join("torch/version.py")) {
            let get = |key: &str| {
                v.lines()
                    .find(|l| l.trim_start().starts_with(key))
                    .and_then(|l| l.split(['\'', '"']).nth(1))
                    .map(str::to_string)
            };
            if let Some(cuda) = get("cuda").filter(|c| plain(c)) {
                if let Some(major) = cuda.split('.').next().and_then(|m| m.parse().ok()) {
                    let ver = get("__version__").filter(|v| plain(v)).unwrap_or_default();
                    out.push(CudaWheel {
                        site_packages: sp.clone(),
                        what: format!("PyTorch {ver} (CUDA {cuda})"),
                        major,
                        framework: true,
                    });
                }
            }
        }
        // JAX's CUDA plugins register as `jax_plugins/xla_cuda12` (the package) beside their
        // `.dist-info`.
        let mut plugins: Vec<String> = std::fs::read_dir(sp.join("jax_plugins"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        plugins.sort();
        for name in plugins {
            if let Some(major) = name.strip_prefix("xla_cuda").and_then(|m| m.parse().ok()) {
                out.push(CudaWheel {
                    site_packages: sp.clone(),
                    what: format!("JAX's CUDA {major} plugin ({name})"),
                    major,
                    framework: true,
                });
            }
        }
        let mut dists: Vec<String> = std::fs::read_dir(&sp)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter_map(|n| n.strip_suffix(".dist-info").map(str::to_string))
            .collect();
        dists.sort();
        for d in dists {
            let Some((name, version)) = d.split_once('-').filter(|(n, v)| plain(n) && plain(v))
            else {
                continue;
            };
            if let Some(major) = wheel_major(name, version) {
                if name.starts_with("jax")
                    && out
                        .iter()
                        .any(|w| w.site_packages == sp && w.what.starts_with("JAX's CUDA"))
                {
                    continue;
                }
                out.push(CudaWheel {
                    site_packages: sp.clone(),
                    what: format!("{} {version}", name.replace('_', "-")),
                    major,
                    framework: name.starts_with("jax"),
                });
            }
        }
    }
    out.sort_by_key(|w| !w.framework);
    out
}

/// The PyTorch and JAX builds among [`cuda_wheels`].
pub fn framework_majors(env: &SearchEnv) -> Vec<CudaWheel> {
    cuda_wheels(env)
        .into_iter()
        .filter(|w| w.framework)
        .collect()
}

/// A small text file (a `version.py`), read with a size limit; anything but a regular file
/// (a FIFO, a device) is refused without waiting on it (`accelkit_core::files::read_limited`).
fn read_small(p: &Path) -> std::io::Result<String> {
    accelkit_core::files::read_text_limited(p, 64 * 1024).map_err(std::io::Error::other)
}

/// Whether a package name or version read from disk is plain (`2.8.0+cu126`,
/// `nvidia_cublas_cu12`): anything else (terminal escapes, spaces) is not shown or used.
pub(crate) fn plain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 100
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"._+-".contains(&c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wheels_name_their_cuda_major() {
        for (dist, version, want) in [
            ("nvidia_cublas_cu12", "12.9.3.13", Some(12)),
            ("nvidia_cuda_nvrtc_cu12", "12.9.86", Some(12)),
            ("nvidia_cudnn_cu13", "9.13.0.50", Some(13)),
            ("nvidia_cublas", "13.1.0.3", Some(13)),
            ("nvidia_cuda_nvrtc", "13.0.88", Some(13)),
            ("nvidia_cuda_cupti", "13.0.85", Some(13)),
            ("jax_cuda12_plugin", "0.7.1", Some(12)),
            ("jax_cuda13_pjrt", "0.8.0", Some(13)),
            ("jax_cuda12_pjrt", "0.7.1", Some(12)),
            // Not built for a CUDA major: NVML's binding, JAX itself, other packages.
            ("nvidia_ml_py", "13.580.65", None),
            ("jax", "0.7.1", None),
            ("jaxlib", "0.7.1", None),
            ("numpy", "2.3.0", None),
            ("nvidia_cuda_nvrtc", "1.0", None),
        ] {
            assert_eq!(wheel_major(dist, version), want, "{dist} {version}");
        }
    }

    #[test]
    fn pytorch_and_jax_builds_are_read_from_a_site_packages() {
        let root = std::env::temp_dir().join(format!("accel-wheels-{}", std::process::id()));
        let sp = root.join("lib/python3.11/site-packages");
        std::fs::create_dir_all(sp.join("torch")).unwrap();
        std::fs::write(
            sp.join("torch/version.py"),
            "__version__ = '2.8.0+cu126'\ncuda: Optional[str] = '12.6'\n",
        )
        .unwrap();
        for d in [
            "jax_cuda12_plugin-0.7.1.dist-info",
            "jax_cuda12_pjrt-0.7.1.dist-info",
            "nvidia_cublas_cu12-12.9.3.13.dist-info",
            "numpy-2.3.0.dist-info",
        ] {
            std::fs::create_dir_all(sp.join(d)).unwrap();
        }
        let env = SearchEnv {
            virtual_env: Some(root.display().to_string()),
            ..SearchEnv::default()
        };
        let got = cuda_wheels(&env);
        let what: Vec<(&str, u32, bool)> = got
            .iter()
            .map(|w| (w.what.as_str(), w.major, w.framework))
            .collect();
        assert_eq!(
            what,
            [
                ("PyTorch 2.8.0+cu126 (CUDA 12.6)", 12, true),
                ("jax-cuda12-pjrt 0.7.1", 12, true),
                ("jax-cuda12-plugin 0.7.1", 12, true),
                ("nvidia-cublas-cu12 12.9.3.13", 12, false),
            ]
        );
        assert_eq!(framework_majors(&env).len(), 3);
        // With the plugin's package there, it is named once, as the plugin.
        std::fs::create_dir_all(sp.join("jax_plugins/xla_cuda12")).unwrap();
        let what: Vec<String> = cuda_wheels(&env).into_iter().map(|w| w.what).collect();
        assert_eq!(what[1], "JAX's CUDA 12 plugin (xla_cuda12)", "{what:?}");
        assert_eq!(what.len(), 3, "{what:?}");
        // A dist-info name carrying a terminal escape is not shown, and a version.py that is a
        // FIFO is refused at once rather than waited on.
        std::fs::create_dir_all(sp.join("nvidia_evil\x1b[2J_cu12-1.0.dist-info")).unwrap();
        assert_eq!(cuda_wheels(&env).len(), 3);
        std::fs::remove_file(sp.join("torch/version.py")).unwrap();
        let fifo = std::ffi::CString::new(sp.join("torch/version.py").to_str().unwrap()).unwrap();
        // SAFETY: `fifo` is a NUL-terminated path alive for the call.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let t = std::time::Instant::now();
        let what: Vec<String> = cuda_wheels(&env).into_iter().map(|w| w.what).collect();
        assert!(t.elapsed() < std::time::Duration::from_secs(2));
        assert!(!what.iter().any(|w| w.starts_with("PyTorch")), "{what:?}");
        let _ = std::fs::remove_dir_all(&root);
    }
}
