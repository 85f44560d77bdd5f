//! The Python environments accel searches for CUDA wheels and PJRT plugins: the prefix accel
//! was installed into, `VIRTUAL_ENV`, conda, `python3` on PATH (asked once, with a time limit,
//! only when it is the user's), and common places. Shared by the CUDA and XLA searches.

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
                Some(v) if crate::base::helper::is_helper() => std::env::split_paths(&v)
                    .filter(|p| !p.as_os_str().is_empty())
                    .collect(),
                _ => ask_python(),
            }
        })
        .clone()
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
    let Some(python) = trust::on_path("python3") else {
        return Vec::new();
    };
    if let Err(why) = trust::safe_program(&python) {
        trust::skipped(&python, &why);
        return Vec::new();
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
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(PathBuf::from)
            .filter(|p| p.is_dir())
            .collect(),
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
            cuda_home: var("CUDA_HOME"),
            cuda_path: var("CUDA_PATH"),
            conda_prefix: var("CONDA_PREFIX"),
            virtual_env: var("VIRTUAL_ENV"),
            home: var("HOME"),
            ask_python: true,
            system_dirs: true,
            own_prefix: own_prefix(),
        }
    }
}

/// `<prefix>` when this executable is `<prefix>/bin/<name>`.
fn own_prefix() -> Option<String> {
    let exe = std::env::current_exe().ok()?;
    let bin = exe.parent()?;
    if bin.file_name()? != "bin" {
        return None;
    }
    Some(bin.parent()?.display().to_string())
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
