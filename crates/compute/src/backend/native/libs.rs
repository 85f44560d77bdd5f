//! Finding the CUDA libraries without a toolkit and without LD_LIBRARY_PATH.
//!
//! NVIDIA's libraries reach a machine in many ways: the driver package (libcuda, NVML), a CUDA
//! toolkit (`/usr/local/cuda*`, `CUDA_HOME`), conda, or Python wheels (`nvidia/cu13/lib` for
//! CUDA 13, `nvidia/<lib>/lib` for CUDA 12). Setting LD_LIBRARY_PATH inside a running process
//! has no effect, so we look in those places ourselves and `dlopen` each file by its absolute
//! path with `RTLD_GLOBAL`: the dynamic loader then answers cudarc's later bare-name lookups
//! (`libcublas.so.13`) with the copy already loaded, because it matches on the SONAME.
//!
//! All is data: each library is found (path, version) or missing (what was searched).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use serde::Serialize;

#[cfg(target_os = "linux")]
use super::dl;
pub(crate) use super::found::other_majors;
use super::found::toolkit_libs;
pub(crate) use super::major::{
    choose_major, cuda_version_text, jax_cuda_extra, pips, Have, MajorChoice, CUDA_MAJORS,
    DRIVER_FLOOR,
};
use super::pyenv::glob_dirs;
pub(crate) use super::pyenv::{cuda_wheels, python_environments, CudaWheel, SearchEnv};
pub use super::wanted::LibName;
pub(crate) use super::wanted::{wanted, Wanted};
use super::wanted::{WANTED_12, WANTED_13};

/// The libraries of the CUDA major this process uses ([`cuda_major`]), in load order.
pub fn wanted_now() -> &'static [Wanted] {
    wanted(cuda_major().major)
}

/// What the search found for one library.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct Library {
    /// Which library.
    pub name: LibName,
    /// The file looked for (`libcublas.so.13`).
    pub file: &'static str,
    /// The CUDA major of that file (None: the driver's libraries and cuDNN).
    pub major: Option<u32>,
    /// Where it was loaded from (None: not found).
    pub path: Option<PathBuf>,
    /// How it was found: `ACCEL_CUDA_LIB_DIR`, `loader path`, `CUDA_HOME`, `python wheel`...
    pub source: Option<String>,
    /// Its version as the library reports it (`13.0`, `9.10.2`); where it was found but
    /// not loaded, as its file or its Python wheel names it (`13.4.1.3`).
    pub version: Option<String>,
    /// Whether this process loaded it: without a driver they are only found (PyTorch's
    /// wheels cost 300 MB and 0.2 s to load), unless `load_without_driver` was called.
    pub loaded: bool,
    /// Why it is missing or unusable, with what was searched.
    pub problem: Option<String>,
    /// How to fix a problem.
    pub hint: Option<String>,
}

impl Library {
    /// Found and loaded.
    pub(crate) fn is_loaded(&self) -> bool {
        self.loaded && self.path.is_some() && self.problem.is_none()
    }

    /// Found, loaded or not.
    pub(crate) fn is_found(&self) -> bool {
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
/// CUDA 12's per-library `nvidia/<lib>/lib` (both majors: which one is used is decided later,
/// by [`choose_major`]).
fn wheel_dirs(sp: &Path) -> Vec<PathBuf> {
    let nv = sp.join("nvidia");
    let mut v = Vec::new();
    for w in WANTED_13
        .iter()
        .chain(WANTED_12)
        .filter(|w| !w.wheel_dir.is_empty())
    {
        let p = nv.join(w.wheel_dir).join("lib");
        if !v.contains(&p) {
            v.push(p);
        }
    }
    v.into_iter().filter(|p| p.is_dir()).collect()
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
    // The loader's own folders, listed so that the choice of major sees what a bare-name
    // load would find there (the loader path itself is still tried first, by name).
    if let Some(v) = &env.ld_library_path {
        for p in v.split(':').filter(|p| !p.is_empty()) {
            push(&mut dirs, PathBuf::from(p), "LD_LIBRARY_PATH");
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
        for &p in accelkit_core::system::NVIDIA_DRIVER_DIRS {
            push(&mut dirs, PathBuf::from(p), "system");
        }
    }
    // One rule for every folder, however it was named (`trust::safe_folder`); a folder that
    // does not exist holds nothing to refuse.
    dirs.retain(|d| !d.path.exists() || super::trust::search(&d.path));
    dirs
}

/// Where `w` is, without loading it: the first search folder that holds the file.
pub fn locate(w: &Wanted, dirs: &[SearchDir]) -> Option<(PathBuf, String)> {
    dirs.iter()
        .map(|d| (d.path.join(w.file), d.source.clone()))
        .find(|(p, _)| p.is_file() && super::trust::loadable(p))
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

/// Checks that the code at `addr` (a function cudarc resolved in the library it opened by
/// its own list of names, which tries `.so.13` before `.so.12`) lies in the file this process
/// chose for `name`: never the other CUDA major, never a second copy.
pub fn check_bound(name: LibName, addr: *const std::ffi::c_void) -> Result<(), String> {
    let Some(lib) = library(name).filter(|l| l.is_loaded()) else {
        return Err(format!("{name} is not loaded"));
    };
    let want = lib
        .path
        .as_ref()
        .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()));
    #[cfg(target_os = "linux")]
    let got = dl::file_of(addr);
    #[cfg(not(target_os = "linux"))]
    let got: Option<PathBuf> = {
        let _ = addr;
        None
    };
    match (got, want) {
        (Some(g), Some(w)) if g != w => Err(format!(
            "cudarc bound {} for {name}, not {} which accel chose (CUDA {}): two copies of one \
             library, maybe of two CUDA majors, would be in this process",
            g.display(),
            w.display(),
            cuda_major().major
        )),
        _ => Ok(()),
    }
}

/// A symbol every library exports, to find its path and version.
fn probe_symbol(name: LibName) -> &'static str {
    match name {
        LibName::Cuda => "cuDriverGetVersion",
        LibName::Nvml => "nvmlInit_v2",
        LibName::Nvrtc => "nvrtcVersion",
        LibName::CublasLt => "cublasLtGetVersion",
        LibName::Cublas => "cublasGetProperty",
        LibName::Cudnn => "cudnnGetVersion",
    }
}

/// The version a loaded library reports about itself.
#[cfg(target_os = "linux")]
fn version_of(name: LibName, h: &dl::Handle) -> Option<String> {
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
            LibName::Cuda => {
                let f: extern "C" fn(*mut c_int) -> c_int = std::mem::transmute(p);
                let mut v = 0;
                (f(&mut v) == 0).then(|| format!("{}.{}", v / 1000, (v % 1000) / 10))
            }
            LibName::Nvrtc => {
                let f: extern "C" fn(*mut c_int, *mut c_int) -> c_int = std::mem::transmute(p);
                let (mut a, mut b) = (0, 0);
                (f(&mut a, &mut b) == 0).then(|| format!("{a}.{b}"))
            }
            LibName::CublasLt | LibName::Cudnn => {
                let f: extern "C" fn() -> usize = std::mem::transmute(p);
                let v = f();
                // cuBLASLt: major*10000 + minor*100 + patch; cuDNN 9: major*10000 + minor*100 +
                // patch.
                Some(format!("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100))
            }
            LibName::Cublas => {
                let f: extern "C" fn(c_int, *mut c_int) -> c_int = std::mem::transmute(p);
                let mut v = [0; 3];
                for (i, x) in v.iter_mut().enumerate() {
                    if f(i as c_int, x) != 0 {
                        return None;
                    }
                }
                Some(format!("{}.{}.{}", v[0], v[1], v[2]))
            }
            LibName::Nvml => {
                // The version needs nvmlInit: the caller reads it from the file's name.
                None
            }
        }
    }
}

/// NVRTC needs its builtins library beside it; load it first by absolute path.
#[cfg(target_os = "linux")]
fn preload_nvrtc_builtins(dir: &Path, major: u32) {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("libnvrtc-builtins.so.{major}.")))
        .collect();
    names.sort();
    if let Some(n) = names.last() {
        let _ = dl::open(&dir.join(n).to_string_lossy());
    }
}

/// Finds and loads one library: the override folders, then the loader's own path, then the
/// other folders.
#[cfg(target_os = "linux")]
pub fn load_library(w: &Wanted, dirs: &[SearchDir]) -> Library {
    let mut lib = Library {
        name: w.name,
        file: w.file,
        major: w.major,
        path: None,
        source: None,
        version: None,
        loaded: false,
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
        if let (Some(d), LibName::Nvrtc, Some(m)) = (dir, w.name, w.major) {
            preload_nvrtc_builtins(d, m);
        }
        crate::base::probe_child::step(format!("dlopen {path}"));
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
            lib.loaded = true;
            lib.path = h.path_of(probe_symbol(w.name));
            lib.version = version_of(w.name, &h);
            if lib.version.is_none() && w.name == LibName::Nvml {
                // NVML says its version only after nvmlInit; its file is named for the driver
                // (`libnvidia-ml.so.580.159.04`: "nvml ?" in the H100 run's listing).
                lib.version = lib
                    .path
                    .as_deref()
                    .and_then(|p| super::found::version_on_disk(p, w.name, w.major));
            }
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
                    "{} not found; found {o}, of another major version (this process uses CUDA {})",
                    w.file,
                    w.major.unwrap_or(CUDA_MAJORS[0])
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
pub fn load_library(w: &Wanted, _dirs: &[SearchDir]) -> Library {
    Library {
        name: w.name,
        file: w.file,
        major: w.major,
        path: None,
        source: None,
        version: None,
        loaded: false,
        problem: Some("the CUDA backend supports Linux in this version".to_string()),
        hint: Some("use the cpu device".to_string()),
    }
}

fn hint_for(w: &Wanted) -> String {
    match w.name {
        LibName::Cuda | LibName::Nvml => {
            "install the NVIDIA driver (525 or newer for CUDA 12, 580 or \
             newer for CUDA 13), e.g. `apt install nvidia-driver` or your distribution's \
             package; in a container, start it with `--gpus all`"
                .to_string()
        }
        _ => format!(
            "`pip install {}` (in any Python environment: accel searches them), or install \
             the CUDA {} toolkit, or point ACCEL_CUDA_LIB_DIR at the folder holding {}",
            w.pip,
            w.major.unwrap_or(CUDA_MAJORS[0]),
            w.file
        ),
    }
}

/// What was found of NVRTC and cuBLAS for each CUDA major in `dirs`, without loading any.
pub fn inventory(dirs: &[SearchDir]) -> Vec<(u32, Have)> {
    CUDA_MAJORS
        .iter()
        .map(|&m| {
            let at = |name: LibName| {
                wanted(m)
                    .iter()
                    .find(|w| w.name == name)
                    .is_some_and(|w| locate(w, dirs).is_some())
            };
            (
                m,
                Have {
                    nvrtc: at(LibName::Nvrtc),
                    cublas: at(LibName::Cublas) && at(LibName::CublasLt),
                },
            )
        })
        .collect()
}

/// The driver's CUDA version as `cuDriverGetVersion` gives it (12040), from a loaded libcuda.
fn driver_number(cuda: &Library) -> Option<u32> {
    let v = cuda.version.as_deref()?;
    let (a, b) = v.split_once('.')?;
    Some(a.parse::<u32>().ok()? * 1000 + b.parse::<u32>().ok()? * 10)
}

/// The CUDA version the loaded driver supports (12040 for 12.4): None without a driver, and
/// None when the library search has not run in this process. It never starts the search
/// itself: hints are written where a PJRT plugin may still hold the loader's lock (one whose
/// constructor hangs inside dlopen), and a dlopen there would wait forever.
pub fn driver_cuda_version() -> Option<u32> {
    STATE
        .get()?
        .0
        .iter()
        .find(|l| l.name == LibName::Cuda && l.is_loaded())
        .and_then(driver_number)
}

static LOAD_WITHOUT_DRIVER: AtomicBool = AtomicBool::new(false);

/// Makes the library search (if it has not run yet in this process) load every library it
/// finds even without a driver, so that a broken or mismatched file shows: `accel doctor`
/// asks for this; listing devices does not.
pub fn load_without_driver() {
    LOAD_WITHOUT_DRIVER.store(true, Relaxed);
}

/// A library found at `path` and left unloaded, with the version its file or wheel names.
fn found_only(w: &Wanted, path: PathBuf, source: String) -> Library {
    Library {
        name: w.name,
        file: w.file,
        major: w.major,
        version: super::found::version_on_disk(&path, w.name, w.major),
        path: Some(path),
        source: Some(source),
        loaded: false,
        problem: None,
        hint: None,
    }
}

/// The libraries and the major, once the search has run ([`state`]).
static STATE: std::sync::OnceLock<(Vec<Library>, MajorChoice)> = std::sync::OnceLock::new();

/// Every library and the major chosen, once per process.
fn state() -> &'static (Vec<Library>, MajorChoice) {
    STATE.get_or_init(|| {
        let forced = crate::base::env::choice("ACCEL_CUDA_MAJOR", &["12", "13"])
            .ok()
            .flatten()
            .and_then(|m| m.parse::<u32>().ok());
        // A driver library whose load hung or crashed the probe helper is not loaded here.
        if let Err(r) = crate::base::probe_child::canary("cuda") {
            let major = forced.unwrap_or(CUDA_MAJORS[0]);
            let libs = wanted(major)
                .iter()
                .map(|w| Library {
                    name: w.name,
                    file: w.file,
                    major: w.major,
                    path: None,
                    source: None,
                    version: None,
                    loaded: false,
                    problem: Some(format!("not loaded: {}", r.reason)),
                    hint: Some(r.hint.clone()),
                })
                .collect();
            let choice = MajorChoice {
                major,
                why: "nothing loaded (the driver's library failed in the probe helper)".into(),
                problem: None,
                hint: None,
            };
            return (libs, choice);
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
        let load_one = |w: &Wanted, dirs: &mut Option<Vec<SearchDir>>| {
            let lib = load_library(w, &quick_dirs);
            if lib.is_loaded() {
                return lib;
            }
            let all = dirs.get_or_insert_with(|| search_dirs(&env));
            load_library(w, all)
        };
        // The driver's libraries first: its CUDA version bounds the major.
        let mut libs: Vec<Library> = WANTED_13
            .iter()
            .filter(|w| w.major.is_none() && w.name != LibName::Cudnn)
            .map(|w| load_one(w, &mut dirs))
            .collect();
        let driver = libs
            .iter()
            .find(|l| l.name == LibName::Cuda && l.is_loaded())
            .and_then(driver_number);
        // What each major has: in the quick folders, then everywhere when no major the driver
        // supports is complete there.
        let mut found = inventory(&quick_dirs);
        let complete = |f: &[(u32, Have)]| {
            f.iter()
                .any(|(m, h)| h.count() == 2 && driver.is_none_or(|d| *m <= d / 1000))
        };
        if forced.is_none() && !complete(&found) {
            found = inventory(dirs.get_or_insert_with(|| search_dirs(&env)));
        }
        // PyTorch's or JAX's major only breaks a tie, so `choose_major` asks for it only then.
        let choice = choose_major(driver, forced, &found, || {
            super::pyenv::framework_majors(&env)
                .first()
                .map(|f| f.major)
        });
        let load = driver.is_some() || LOAD_WITHOUT_DRIVER.load(Relaxed);
        for w in wanted(choice.major)
            .iter()
            .filter(|w| w.major.is_some() || w.name == LibName::Cudnn)
        {
            let found = (!load)
                .then(|| {
                    locate(w, &quick_dirs)
                        .or_else(|| locate(w, dirs.get_or_insert_with(|| search_dirs(&env))))
                })
                .flatten();
            libs.push(match found {
                Some((path, source)) => found_only(w, path, source),
                None => load_one(w, &mut dirs),
            });
        }
        (libs, choice)
    })
}

/// Driver functions newer than the floor ([`DRIVER_FLOOR`]) that accel calls, each only after
/// [`driver_symbol`] found it, with a fallback to an older function otherwise. The
/// driver-symbol floor test allows these and no others beyond CUDA 12.0's `cuda.h`.
#[cfg(test)]
pub const GUARDED_DRIVER_SYMBOLS: &[&str] = &["cuEventElapsedTime_v2"];

/// The address of `symbol` in the loaded libcuda (a function newer than the driver floor is
/// used only when this finds it). None without a driver.
pub fn driver_symbol(symbol: &str) -> Option<*mut std::ffi::c_void> {
    #[cfg(target_os = "linux")]
    {
        let cuda = library(LibName::Cuda).filter(|l| l.is_loaded())?;
        let path = cuda.path.as_ref()?;
        // Opening a loaded library again returns the same handle (its count goes up; it is
        // never closed, as every library here).
        dl::open(&path.to_string_lossy()).ok()?.sym(symbol)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = symbol;
        None
    }
}

/// Finds and loads every library of the CUDA major this process uses, once per process.
pub fn libraries() -> &'static [Library] {
    &state().0
}

/// The CUDA major this process uses, and why (decided once, with the libraries).
pub fn cuda_major() -> &'static MajorChoice {
    &state().1
}

/// The library called `name` (`cublas`), loaded: one the search only found (no driver:
/// `found_only`) is loaded now, from the file found, once per process (NVRTC compiles
/// kernels without a GPU).
pub fn library(name: LibName) -> Option<&'static Library> {
    let lib = libraries().iter().find(|l| l.name == name)?;
    if lib.loaded || !lib.is_found() {
        return Some(lib);
    }
    static LATE: std::sync::Mutex<Vec<&'static Library>> = std::sync::Mutex::new(Vec::new());
    let mut late = LATE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(l) = late.iter().find(|l| l.name == name) {
        return Some(l);
    }
    let w = wanted(lib.major.unwrap_or(cuda_major().major))
        .iter()
        .find(|w| w.name == name)?;
    let dir = lib.path.as_deref().and_then(Path::parent)?;
    // The found file's folder, tried first (as an override): no other copy is taken.
    let only = [SearchDir {
        path: dir.to_path_buf(),
        source: "ACCEL_CUDA_LIB_DIR".to_string(),
    }];
    let mut l = load_library(w, &only);
    l.source.clone_from(&lib.source);
    let l: &'static Library = Box::leak(Box::new(l));
    late.push(l);
    Some(l)
}

#[cfg(test)]
#[path = "libs_tests.rs"]
mod tests;
