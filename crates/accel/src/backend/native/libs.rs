//! Finding the CUDA libraries without a toolkit and without LD_LIBRARY_PATH.
//!
//! NVIDIA's libraries reach a machine in many ways: the driver package (libcuda, NVML), a CUDA
//! toolkit (`/usr/local/cuda*`, `CUDA_HOME`), conda, or Python wheels (`nvidia/cu13/lib` for
//! CUDA 13, `nvidia/<lib>/lib` for CUDA 12). Setting LD_LIBRARY_PATH inside a running process
//! has no effect, so we look in those places ourselves and `dlopen` each file by its absolute
//! path with `RTLD_GLOBAL`: the dynamic loader then answers cudarc's later bare-name lookups
//! (`libcublas.so.13`) with the copy already loaded, because it matches on the SONAME.
//!
//! Everything here is data: each library is found (path, version) or missing (what was
//! searched). Nothing panics.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::pyenv::glob_dirs;
pub use super::pyenv::{
    python_environments, site_packages_for_helper, SearchEnv, SITE_PACKAGES_VAR,
};

/// The CUDA major version this build's bindings speak (cudarc's `cuda-13000`).
pub const CUDA_MAJOR: u32 = 13;

/// One library accel looks for.
#[derive(Debug, Clone, Copy)]
pub struct Wanted {
    /// Short name: `cuda`, `nvml`, `cublas`...
    pub name: &'static str,
    /// The file to load, with its major-version suffix.
    pub file: &'static str,
    /// Python wheel folder of the CUDA 12 layout (`nvidia/<dir>/lib`).
    pub wheel_dir: &'static str,
    /// What the library is for, for messages.
    pub role: &'static str,
    /// Which pip package provides it (empty for the driver's libraries).
    pub pip: &'static str,
}

/// The libraries, in load order (cuBLASLt before cuBLAS, which needs it).
pub const WANTED: &[Wanted] = &[
    Wanted {
        name: "cuda",
        file: "libcuda.so.1",
        wheel_dir: "",
        role: "the NVIDIA driver's CUDA library",
        pip: "",
    },
    Wanted {
        name: "nvml",
        file: "libnvidia-ml.so.1",
        wheel_dir: "",
        role: "the driver's management library (load, temperature, power)",
        pip: "",
    },
    Wanted {
        name: "nvrtc",
        file: "libnvrtc.so.13",
        wheel_dir: "cuda_nvrtc",
        role: "the run-time CUDA C compiler for accel's kernels",
        pip: "nvidia-cuda-nvrtc",
    },
    Wanted {
        name: "cublaslt",
        file: "libcublasLt.so.13",
        wheel_dir: "cublas",
        role: "cuBLASLt, which cuBLAS uses",
        pip: "nvidia-cublas",
    },
    Wanted {
        name: "cublas",
        file: "libcublas.so.13",
        wheel_dir: "cublas",
        role: "cuBLAS, for matrix multiplication",
        pip: "nvidia-cublas",
    },
    Wanted {
        name: "cudnn",
        file: "libcudnn.so.9",
        wheel_dir: "cudnn",
        role: "cuDNN (reported only; accel does not use it)",
        pip: "nvidia-cudnn-cu13",
    },
];

/// What the search found for one library.
#[derive(Debug, Clone, Serialize)]
pub struct Library {
    /// Short name (`cublas`).
    pub name: &'static str,
    /// The file looked for (`libcublas.so.13`).
    pub file: &'static str,
    /// Where it was loaded from (None: not found).
    pub path: Option<PathBuf>,
    /// How it was found: `ACCEL_CUDA_LIB_DIR`, `loader path`, `CUDA_HOME`, `python wheel`...
    pub source: Option<String>,
    /// Its version as the library reports it (`13.0`, `9.10.2`).
    pub version: Option<String>,
    /// Why it is missing or unusable, with what was searched.
    pub problem: Option<String>,
    /// How to fix a problem.
    pub hint: Option<String>,
}

impl Library {
    /// Found and loaded.
    pub fn is_loaded(&self) -> bool {
        self.path.is_some() && self.problem.is_none()
    }
}

/// A folder to search, and why it is on the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchDir {
    /// The folder.
    pub path: PathBuf,
    /// Why it is searched (`CUDA_HOME`, `python wheel (VIRTUAL_ENV)`...).
    pub source: String,
}

fn push(dirs: &mut Vec<SearchDir>, path: PathBuf, source: &str) {
    if !dirs.iter().any(|d| d.path == path) {
        dirs.push(SearchDir {
            path,
            source: source.to_string(),
        });
    }
}

/// The wheel folders inside one `site-packages`: CUDA 13's single `nvidia/cu13/lib`, then
/// CUDA 12's per-library `nvidia/<lib>/lib`.
fn wheel_dirs(sp: &Path) -> Vec<PathBuf> {
    let nv = sp.join("nvidia");
    let mut v = vec![nv.join(format!("cu{CUDA_MAJOR}")).join("lib")];
    for w in WANTED.iter().filter(|w| !w.wheel_dir.is_empty()) {
        let p = nv.join(w.wheel_dir).join("lib");
        if !v.contains(&p) {
            v.push(p);
        }
    }
    v.into_iter().filter(|p| p.is_dir()).collect()
}

fn toolkit_libs(root: &Path) -> Vec<PathBuf> {
    [
        root.join("lib64"),
        root.join("lib"),
        root.join("targets/x86_64-linux/lib"),
        root.join("targets/sbsa-linux/lib"),
    ]
    .into_iter()
    .filter(|p| p.is_dir())
    .collect()
}

/// Every folder searched after the loader path, in order. The override comes first and is
/// searched even before the loader path (see `locate`).
pub fn search_dirs(env: &SearchEnv) -> Vec<SearchDir> {
    let mut dirs = Vec::new();
    if let Some(v) = &env.accel_cuda_lib_dir {
        for p in v.split(':').filter(|p| !p.is_empty()) {
            push(&mut dirs, PathBuf::from(p), "ACCEL_CUDA_LIB_DIR");
        }
    }
    for (name, v) in [("CUDA_HOME", &env.cuda_home), ("CUDA_PATH", &env.cuda_path)] {
        if let Some(v) = v {
            for p in toolkit_libs(Path::new(v)) {
                push(&mut dirs, p, name);
            }
        }
    }
    if env.system_dirs {
        for root in std::iter::once(PathBuf::from("/usr/local/cuda"))
            .chain(glob_dirs(Path::new("/usr/local"), "cuda-"))
            .chain(glob_dirs(Path::new("/opt"), "cuda"))
        {
            for p in toolkit_libs(&root) {
                push(&mut dirs, p, "CUDA toolkit");
            }
        }
    }
    if let Some(v) = &env.conda_prefix {
        push(&mut dirs, Path::new(v).join("lib"), "CONDA_PREFIX");
    }
    let sps = python_environments(env);
    for (sp, src) in sps {
        for p in wheel_dirs(&sp) {
            push(&mut dirs, p, src);
        }
    }
    if env.system_dirs {
        for p in [
            "/usr/lib/x86_64-linux-gnu",
            "/usr/lib64",
            "/usr/lib",
            "/usr/lib/wsl/lib",
            "/usr/local/nvidia/lib64",
        ] {
            push(&mut dirs, PathBuf::from(p), "system");
        }
    }
    dirs
}

/// Other major versions of `file` present in `dir` (`libcublas.so.12` when we want `.13`).
pub fn other_majors(dir: &Path, file: &str) -> Vec<String> {
    let stem = file.rsplit_once(".so.").map_or(file, |(s, _)| s);
    let prefix = format!("{stem}.so.");
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&prefix) && n != file)
        .collect();
    v.sort();
    v
}

/// Where `w` is, without loading it: the first search folder that holds the file.
pub fn locate(w: &Wanted, dirs: &[SearchDir]) -> Option<(PathBuf, String)> {
    dirs.iter()
        .map(|d| (d.path.join(w.file), d.source.clone()))
        .find(|(p, _)| p.is_file())
}

/// Loads the library at `path` for good, with `RTLD_GLOBAL`, so libraries loaded later find
/// its symbols and its SONAME (how a PJRT plugin finds the CUDA wheels' libraries).
#[cfg_attr(not(all(feature = "xla", target_os = "linux")), allow(dead_code))]
pub(crate) fn preload(path: &std::path::Path) -> Result<(), String> {
    #[cfg(target_os = "linux")]
    {
        dl::open(&path.to_string_lossy()).map(|_| ())
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err(format!(
            "{}: loading by path is Linux-only here",
            path.display()
        ))
    }
}

#[cfg(target_os = "linux")]
mod dl {
    use std::ffi::{c_void, CStr, CString};
    use std::path::{Path, PathBuf};

    pub struct Handle(*mut c_void);
    // SAFETY: a Handle is a dlopen handle that is never dlclosed (see `open`), so it stays
    // valid for the process on every thread; it is only passed to dlsym/dladdr, which glibc
    // makes thread safe (the loader takes its own lock).
    unsafe impl Send for Handle {}
    // SAFETY: as for Send; no method mutates through the handle.
    unsafe impl Sync for Handle {}

    fn last_error() -> String {
        // SAFETY: dlerror takes no arguments; glibc keeps its message per thread, so this reads
        // the error of the dlopen/dlsym this thread just made.
        let e = unsafe { libc::dlerror() };
        if e.is_null() {
            "unknown error".to_string()
        } else {
            // SAFETY: non-null (checked); dlerror returns a NUL-terminated string that stays
            // valid until the next dl* call on this thread, and we copy it out immediately.
            unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
        }
    }

    /// Loads a library for good (never closed: cudarc keeps using it).
    pub fn open(name: &str) -> Result<Handle, String> {
        let c = CString::new(name).map_err(|_| "the name holds a NUL byte".to_string())?;
        // SAFETY: `c` is a NUL-terminated CString alive for the call. Loading runs the
        // library's initialisers: we only open the NVIDIA libraries `locate` found by file
        // name in the search folders (libs.rs), and trust them as the process's CUDA stack.
        // RTLD_GLOBAL so later lookups by SONAME (cudarc's) find this copy. Never dlclosed.
        let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
        if h.is_null() {
            Err(last_error())
        } else {
            Ok(Handle(h))
        }
    }

    impl Handle {
        pub fn sym(&self, name: &str) -> Option<*mut c_void> {
            let c = CString::new(name).ok()?;
            // SAFETY: self.0 is a live dlopen handle (never closed, see `open`); `c` is a
            // NUL-terminated CString alive for the call.
            let p = unsafe { libc::dlsym(self.0, c.as_ptr()) };
            (!p.is_null()).then_some(p)
        }

        /// The file the loader picked, found through one of its symbols.
        pub fn path_of(&self, symbol: &str) -> Option<PathBuf> {
            let p = self.sym(symbol)?;
            // SAFETY: Dl_info is a #[repr(C)] struct of raw pointers, for which all-zero
            // (null) is a valid value.
            let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
            // SAFETY: `p` is a symbol address dlsym returned from a library that is never
            // unloaded; `info` is a local out-pointer.
            if unsafe { libc::dladdr(p, &mut info) } == 0 || info.dli_fname.is_null() {
                return None;
            }
            // SAFETY: dladdr succeeded and dli_fname is non-null (checked): it points to the
            // NUL-terminated path of the object, owned by the loader and valid while the
            // object stays loaded (forever: never dlclosed); we copy it at once.
            let s = unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy();
            let path = Path::new(s.as_ref());
            Some(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()))
        }
    }
}

/// A symbol every library exports, to find its path and version.
fn probe_symbol(name: &str) -> &'static str {
    match name {
        "cuda" => "cuDriverGetVersion",
        "nvml" => "nvmlInit_v2",
        "nvrtc" => "nvrtcVersion",
        "cublaslt" => "cublasLtGetVersion",
        "cublas" => "cublasGetProperty",
        "cudnn" => "cudnnGetVersion",
        _ => "",
    }
}

/// The version a loaded library reports about itself.
#[cfg(target_os = "linux")]
fn version_of(name: &str, h: &dl::Handle) -> Option<String> {
    use std::ffi::c_int;
    let p = h.sym(probe_symbol(name))?;
    // SAFETY: `p` is the non-null address of `probe_symbol(name)` in library `name`, loaded
    // for good (dl::open never closes), and each transmute gives it the C signature NVIDIA's
    // headers declare for that symbol: cuDriverGetVersion(int*) -> CUresult,
    // nvrtcVersion(int*, int*) -> nvrtcResult, cublasLtGetVersion(void) -> size_t,
    // cudnnGetVersion(void) -> size_t, cublasGetProperty(libraryPropertyType (a C enum,
    // int-sized), int*) -> cublasStatus_t (all status types are int-sized C enums). Function
    // and data pointers have the same size on the supported (Linux) targets. The out-pointers
    // are locals.
    unsafe {
        match name {
            "cuda" => {
                let f: extern "C" fn(*mut c_int) -> c_int = std::mem::transmute(p);
                let mut v = 0;
                (f(&mut v) == 0).then(|| format!("{}.{}", v / 1000, (v % 1000) / 10))
            }
            "nvrtc" => {
                let f: extern "C" fn(*mut c_int, *mut c_int) -> c_int = std::mem::transmute(p);
                let (mut a, mut b) = (0, 0);
                (f(&mut a, &mut b) == 0).then(|| format!("{a}.{b}"))
            }
            "cublaslt" | "cudnn" => {
                let f: extern "C" fn() -> usize = std::mem::transmute(p);
                let v = f();
                // cuBLASLt: major*10000 + minor*100 + patch; cuDNN 9: major*10000 + minor*100 +
                // patch.
                Some(format!("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100))
            }
            "cublas" => {
                let f: extern "C" fn(c_int, *mut c_int) -> c_int = std::mem::transmute(p);
                let mut v = [0; 3];
                for (i, x) in v.iter_mut().enumerate() {
                    if f(i as c_int, x) != 0 {
                        return None;
                    }
                }
                Some(format!("{}.{}.{}", v[0], v[1], v[2]))
            }
            "nvml" => {
                // The driver version needs nvmlInit; read it from NVML later.
                None
            }
            _ => None,
        }
    }
}

/// NVRTC needs its builtins library beside it; load it first by absolute path.
#[cfg(target_os = "linux")]
fn preload_nvrtc_builtins(dir: &Path) {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("libnvrtc-builtins.so.{CUDA_MAJOR}")))
        .collect();
    names.sort();
    if let Some(n) = names.last() {
        let _ = dl::open(&dir.join(n).to_string_lossy());
    }
}

/// Finds and loads one library: the override folders, then the loader's own path, then the
/// other folders.
#[cfg(target_os = "linux")]
pub fn load(w: &Wanted, dirs: &[SearchDir]) -> Library {
    let mut lib = Library {
        name: w.name,
        file: w.file,
        path: None,
        source: None,
        version: None,
        problem: None,
        hint: None,
    };
    let (overrides, rest): (Vec<SearchDir>, Vec<SearchDir>) = dirs
        .iter()
        .cloned()
        .partition(|d| d.source == "ACCEL_CUDA_LIB_DIR");
    let mut tried: Vec<String> = Vec::new();
    let mut errors: Vec<String> = Vec::new();
    let mut attempt = |path: &str, source: &str, dir: Option<&Path>| -> Option<dl::Handle> {
        if let (Some(d), "nvrtc") = (dir, w.name) {
            preload_nvrtc_builtins(d);
        }
        crate::base::helper::step(format!("dlopen {path}"));
        match dl::open(path) {
            Ok(h) => Some((h, source.to_string())),
            Err(e) => {
                if dir.is_some() {
                    errors.push(e);
                }
                None
            }
        }
        .map(|(h, s)| {
            lib.source = Some(s);
            h
        })
    };
    let mut handle = None;
    for d in &overrides {
        let p = d.path.join(w.file);
        tried.push(d.path.display().to_string());
        if p.is_file() {
            handle = attempt(&p.to_string_lossy(), &d.source, Some(&d.path));
            if handle.is_some() {
                break;
            }
        }
    }
    if handle.is_none() {
        tried.push("the loader path".to_string());
        handle = attempt(w.file, "loader path", None);
    }
    if handle.is_none() {
        for d in &rest {
            let p = d.path.join(w.file);
            if p.is_file() {
                handle = attempt(&p.to_string_lossy(), &d.source, Some(&d.path));
                if handle.is_some() {
                    break;
                }
            }
        }
        tried.push(format!("{} more folders", rest.len()));
    }
    match handle {
        Some(h) => {
            lib.path = h.path_of(probe_symbol(w.name));
            lib.version = version_of(w.name, &h);
            if lib.path.is_none() {
                lib.path = Some(PathBuf::from(w.file));
            }
        }
        None => {
            let others: Vec<String> = overrides
                .iter()
                .chain(rest.iter())
                .flat_map(|d| {
                    other_majors(&d.path, w.file)
                        .into_iter()
                        .map(move |f| d.path.join(f).display().to_string())
                })
                .collect();
            let mut problem = if let Some(o) = others.first() {
                format!(
                    "{} not found; found {o}, a different major version (this build speaks CUDA {CUDA_MAJOR})",
                    w.file
                )
            } else {
                format!("{} not found (searched {})", w.file, tried.join(", "))
            };
            if let Some(e) = errors.first() {
                problem.push_str(&format!("; a copy failed to load: {e}"));
            }
            lib.problem = Some(problem);
            lib.hint = Some(hint_for(w));
        }
    }
    lib
}

#[cfg(not(target_os = "linux"))]
pub fn load(w: &Wanted, _dirs: &[SearchDir]) -> Library {
    Library {
        name: w.name,
        file: w.file,
        path: None,
        source: None,
        version: None,
        problem: Some("the CUDA backend supports Linux in this version".to_string()),
        hint: Some("use the cpu device".to_string()),
    }
}

fn hint_for(w: &Wanted) -> String {
    match w.name {
        "cuda" | "nvml" => "install the NVIDIA driver (580 or newer for CUDA 13), e.g. \
             `apt install nvidia-driver` or your distribution's package; in a container, \
             start it with `--gpus all`"
            .to_string(),
        _ => format!(
            "`pip install {}` (in any Python environment: accel searches them), or install \
             the CUDA {CUDA_MAJOR} toolkit, or point ACCEL_CUDA_LIB_DIR at the folder holding {}",
            w.pip, w.file
        ),
    }
}

/// Finds and loads every library, once per process.
pub fn libraries() -> &'static [Library] {
    static LIBS: std::sync::OnceLock<Vec<Library>> = std::sync::OnceLock::new();
    LIBS.get_or_init(|| {
        // A driver library whose load hung or crashed the probe helper is not loaded here.
        if let Err(r) = crate::base::helper::canary("cuda") {
            return WANTED
                .iter()
                .map(|w| Library {
                    name: w.name,
                    file: w.file,
                    path: None,
                    source: None,
                    version: None,
                    problem: Some(format!("not loaded: {}", r.reason)),
                    hint: Some(r.hint.clone()),
                })
                .collect();
        }
        let env = SearchEnv::from_process();
        // The override and the loader path are tried before the folder list, which costs a
        // python3 start; build that list only when something is missing from both.
        let quick = SearchEnv {
            ask_python: false,
            system_dirs: false,
            ..env.clone()
        };
        let quick_dirs = search_dirs(&quick);
        let mut dirs: Option<Vec<SearchDir>> = None;
        WANTED
            .iter()
            .map(|w| {
                let lib = load(w, &quick_dirs);
                if lib.is_loaded() {
                    return lib;
                }
                let all = dirs.get_or_insert_with(|| search_dirs(&env));
                load(w, all)
            })
            .collect()
    })
}

/// The library called `name` (`cublas`), as found.
pub fn library(name: &str) -> Option<&'static Library> {
    libraries().iter().find(|l| l.name == name)
}
