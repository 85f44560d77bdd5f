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
    cuda_wheels, framework_majors, python_environments, site_packages_for_helper, wheel_major,
    CudaWheel, SearchEnv, SITE_PACKAGES_VAR,
};

/// The CUDA majors accel can use, newest first. cudarc's bindings are CUDA 13.0's, loaded at
/// run time symbol by symbol; every function accel calls exists, with the same signature, in
/// CUDA 12.0's driver API, NVRTC and cuBLAS (the driver-symbol floor test checks the driver's
/// against CUDA 12.0's `cuda.h`), so one build speaks either. One process uses one major:
/// [`cuda_major`] decides it once, before any versioned library is loaded.
pub const CUDA_MAJORS: [u32; 2] = [13, 12];

/// The oldest CUDA version of a driver accel runs on (R525).
pub const DRIVER_FLOOR: (u32, u32) = (12, 0);

/// One library accel looks for.
#[derive(Debug, Clone, Copy)]
pub struct Wanted {
    /// Short name: `cuda`, `nvml`, `cublas`...
    pub name: &'static str,
    /// The file to load, with its major-version suffix.
    pub file: &'static str,
    /// The folder under a wheel's `nvidia/` that holds it (`cu13` for CUDA 13, `cuda_nvrtc`,
    /// `cublas`... for CUDA 12), whose `lib/` is searched.
    pub wheel_dir: &'static str,
    /// What the library is for, for messages.
    pub role: &'static str,
    /// Which pip package provides it (empty for the driver's libraries).
    pub pip: &'static str,
    /// The CUDA major it belongs to (None: the driver's own, and cuDNN 9, built for either).
    pub major: Option<u32>,
}

const fn driver_lib(name: &'static str, file: &'static str, role: &'static str) -> Wanted {
    Wanted {
        name,
        file,
        wheel_dir: "",
        role,
        pip: "",
        major: None,
    }
}

const LIBCUDA: Wanted = driver_lib("cuda", "libcuda.so.1", "the NVIDIA driver's CUDA library");
const LIBNVML: Wanted = driver_lib(
    "nvml",
    "libnvidia-ml.so.1",
    "the driver's management library (load, temperature, power)",
);
const NVRTC_ROLE: &str = "the run-time CUDA C compiler for accel's kernels";
const CUDNN_ROLE: &str = "cuDNN (reported only; accel does not use it)";

/// CUDA 13's libraries, in load order (cuBLASLt before cuBLAS, which needs it).
const WANTED_13: &[Wanted] = &[
    LIBCUDA,
    LIBNVML,
    Wanted {
        name: "nvrtc",
        file: "libnvrtc.so.13",
        wheel_dir: "cu13",
        role: NVRTC_ROLE,
        pip: "nvidia-cuda-nvrtc",
        major: Some(13),
    },
    Wanted {
        name: "cublaslt",
        file: "libcublasLt.so.13",
        wheel_dir: "cu13",
        role: "cuBLASLt, which cuBLAS uses",
        pip: "nvidia-cublas",
        major: Some(13),
    },
    Wanted {
        name: "cublas",
        file: "libcublas.so.13",
        wheel_dir: "cu13",
        role: "cuBLAS, for matrix multiplication",
        pip: "nvidia-cublas",
        major: Some(13),
    },
    Wanted {
        name: "cudnn",
        file: "libcudnn.so.9",
        wheel_dir: "cudnn",
        role: CUDNN_ROLE,
        pip: "nvidia-cudnn-cu13",
        major: None,
    },
];

/// CUDA 12's libraries (the `nvidia-*-cu12` wheels, one folder a library), in load order.
const WANTED_12: &[Wanted] = &[
    LIBCUDA,
    LIBNVML,
    Wanted {
        name: "nvrtc",
        file: "libnvrtc.so.12",
        wheel_dir: "cuda_nvrtc",
        role: NVRTC_ROLE,
        pip: "nvidia-cuda-nvrtc-cu12",
        major: Some(12),
    },
    Wanted {
        name: "cublaslt",
        file: "libcublasLt.so.12",
        wheel_dir: "cublas",
        role: "cuBLASLt, which cuBLAS uses",
        pip: "nvidia-cublas-cu12",
        major: Some(12),
    },
    Wanted {
        name: "cublas",
        file: "libcublas.so.12",
        wheel_dir: "cublas",
        role: "cuBLAS, for matrix multiplication",
        pip: "nvidia-cublas-cu12",
        major: Some(12),
    },
    Wanted {
        name: "cudnn",
        file: "libcudnn.so.9",
        wheel_dir: "cudnn",
        role: CUDNN_ROLE,
        pip: "nvidia-cudnn-cu12",
        major: None,
    },
];

/// The libraries for CUDA `major` (12 or 13; anything else gets 13's), in load order.
pub fn wanted(major: u32) -> &'static [Wanted] {
    if major == 12 {
        WANTED_12
    } else {
        WANTED_13
    }
}

/// The libraries of the CUDA major this process uses ([`cuda_major`]), in load order.
pub fn wanted_now() -> &'static [Wanted] {
    wanted(cuda_major().major)
}

/// Which of a major's two needed libraries were found (without loading them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Have {
    /// NVRTC (`libnvrtc.so.N`).
    pub nvrtc: bool,
    /// cuBLAS and cuBLASLt (`libcublas.so.N`, `libcublasLt.so.N`), both.
    pub cublas: bool,
}

impl Have {
    fn count(self) -> u8 {
        self.nvrtc as u8 + self.cublas as u8
    }
}

/// The CUDA major a process uses, and why: a pure function of the driver's CUDA version,
/// `ACCEL_CUDA_MAJOR`, which libraries of each major were found, and the major PyTorch or
/// JAX in the same environment uses ([`choose_major`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MajorChoice {
    /// 12 or 13: whose libraries are loaded.
    pub major: u32,
    /// Why this one, in words.
    pub why: String,
    /// Why CUDA cannot work with what is installed, when it cannot (the driver too old for
    /// every library found, a forced major the driver lacks, NVRTC of one major and cuBLAS of
    /// the other).
    pub problem: Option<String>,
    /// The fix for `problem`.
    pub hint: Option<String>,
}

/// Names a CUDA version `12040` as `12.4`.
pub fn cuda_version_text(v: u32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

/// What to install for CUDA `major`'s libraries.
fn pips(major: u32) -> &'static str {
    if major == 12 {
        "nvidia-cuda-nvrtc-cu12 nvidia-cublas-cu12"
    } else {
        "nvidia-cuda-nvrtc nvidia-cublas"
    }
}

/// The driver release a CUDA major needs (R525 for 12.0, R580 for 13.0).
pub fn driver_for(major: u32) -> &'static str {
    if major >= 13 {
        "580"
    } else {
        "525"
    }
}

/// Decides the CUDA major: `forced` (`ACCEL_CUDA_MAJOR`) when set; otherwise, among the
/// majors the driver supports (all, when there is no driver), the one with the most of NVRTC
/// and cuBLAS found, ties going to `framework`'s major (PyTorch's or JAX's in the same
/// environment), then to the newest. `driver` is `cuDriverGetVersion`'s number (12040 for
/// 12.4). `found` lists, per major, what was found.
pub fn choose_major(
    driver: Option<u32>,
    forced: Option<u32>,
    found: &[(u32, Have)],
    framework: Option<u32>,
) -> MajorChoice {
    let have = |m: u32| {
        found
            .iter()
            .find(|(x, _)| *x == m)
            .map_or(Have::default(), |(_, h)| *h)
    };
    let driver_major = driver.map(|v| v / 1000);
    let driver_text = driver.map(cuda_version_text);
    let supports = |m: u32| driver_major.is_none_or(|d| m <= d);
    if let Some(m) = forced {
        let (problem, hint) = match (&driver_text, supports(m)) {
            (Some(d), false) => (
                Some(format!(
                    "ACCEL_CUDA_MAJOR={m}, but the driver supports CUDA {d}: CUDA {m} needs \
                     driver {} or newer",
                    driver_for(m)
                )),
                Some(format!(
                    "unset ACCEL_CUDA_MAJOR (or set it to {}), or update the NVIDIA driver to \
                     {} or newer",
                    driver_major.unwrap_or(12),
                    driver_for(m)
                )),
            ),
            _ => (None, None),
        };
        return MajorChoice {
            major: m,
            why: format!("ACCEL_CUDA_MAJOR={m}"),
            problem,
            hint,
        };
    }
    let usable: Vec<u32> = CUDA_MAJORS
        .iter()
        .copied()
        .filter(|&m| supports(m))
        .collect();
    let best_count = usable.iter().map(|&m| have(m).count()).max().unwrap_or(0);
    let tied: Vec<u32> = usable
        .iter()
        .copied()
        .filter(|&m| have(m).count() == best_count)
        .collect();
    let major = framework
        .filter(|f| tied.contains(f))
        .or(tied.first().copied())
        .unwrap_or(12);
    let driver_note = driver_text.as_ref().map_or_else(
        || "no NVIDIA driver here, so any major".to_string(),
        |d| format!("the driver supports CUDA {d}"),
    );
    let complete = best_count == 2;
    let mut why = match (complete, tied.len()) {
        (true, 1) => format!("{driver_note}; CUDA {major}'s NVRTC and cuBLAS were found"),
        (true, _) if framework == Some(major) => format!(
            "{driver_note}; CUDA 12 and 13 libraries were both found, and PyTorch or JAX here \
             uses CUDA {major}"
        ),
        (true, _) => format!(
            "{driver_note}; CUDA 12 and 13 libraries were both found: the newest the driver \
             supports"
        ),
        (false, _) if best_count == 0 => {
            format!("{driver_note}; no CUDA {major} NVRTC or cuBLAS found yet")
        }
        (false, _) => format!("{driver_note}; only part of CUDA {major}'s libraries found"),
    };
    if !complete && tied.len() > 1 && framework == Some(major) {
        why.push_str(&format!(" (PyTorch or JAX here uses CUDA {major})"));
    }
    let mut problem = None;
    let mut hint = None;
    // Libraries the driver is too old for, when nothing it supports was found.
    let too_new: Vec<u32> = CUDA_MAJORS
        .iter()
        .copied()
        .filter(|&m| !supports(m) && have(m).count() > 0)
        .collect();
    if let (Some(d), Some(&new), 0) = (&driver_text, too_new.first(), best_count) {
        problem = Some(format!(
            "the driver supports CUDA {d}; the libraries found are CUDA {new}, which needs \
             driver {} or newer",
            driver_for(new)
        ));
        hint = Some(format!(
            "`pip install {}` (the CUDA {major} wheels, which this driver runs), or update the \
             NVIDIA driver to {} or newer for CUDA {new}",
            pips(major),
            driver_for(new)
        ));
    } else if !complete && best_count > 0 {
        // NVRTC of one major and cuBLAS of another: never both majors in one process.
        let h = have(major);
        let other = usable.iter().copied().find(|&m| {
            m != major && ((!h.nvrtc && have(m).nvrtc) || (!h.cublas && have(m).cublas))
        });
        if let Some(o) = other {
            let (mine, theirs) = if h.nvrtc {
                ("NVRTC", "cuBLAS")
            } else {
                ("cuBLAS", "NVRTC")
            };
            problem = Some(format!(
                "{mine} was found for CUDA {major} and {theirs} only for CUDA {o}: accel uses \
                 one CUDA major in a process, and it has no complete set"
            ));
            hint = Some(format!(
                "install the missing one of the same major: `pip install {}` (CUDA {major}) or \
                 `pip install {}` (CUDA {o}); or set ACCEL_CUDA_MAJOR",
                pips(major),
                pips(o)
            ));
            why.push_str(&format!(" (and part of CUDA {o}'s)"));
        }
    }
    MajorChoice {
        major,
        why,
        problem,
        hint,
    }
}

/// What the search found for one library.
#[derive(Debug, Clone, Serialize)]
pub struct Library {
    /// Short name (`cublas`).
    pub name: &'static str,
    /// The file looked for (`libcublas.so.13`).
    pub file: &'static str,
    /// The CUDA major of that file (None: the driver's libraries and cuDNN).
    pub major: Option<u32>,
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
            file_of(self.sym(symbol)?)
        }
    }

    /// The file of the loaded object holding address `p`, canonical.
    pub fn file_of(p: *const c_void) -> Option<PathBuf> {
        {
            // SAFETY: Dl_info is a #[repr(C)] struct of raw pointers, for which all-zero
            // (null) is a valid value.
            let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
            // SAFETY: dladdr only looks `p` up in the loader's tables (any address is allowed;
            // it fails for one in no object); `info` is a local out-pointer.
            if unsafe { libc::dladdr(p, &mut info) } == 0 || info.dli_fname.is_null() {
                return None;
            }
            // SAFETY: dladdr succeeded and dli_fname is non-null (checked): it points to the
            // NUL-terminated path of the object, owned by the loader and valid while the
            // object stays loaded (the CUDA libraries: forever, never dlclosed); we copy it at
            // once, before any other loader call on this thread.
            let s = unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy();
            let path = Path::new(s.as_ref());
            Some(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()))
        }
    }
}

/// Checks that the code at `addr` (a function cudarc resolved in the library it opened by
/// its own list of names, which tries `.so.13` before `.so.12`) lies in the file this process
/// chose for `name`: never the other CUDA major, never a second copy.
pub fn check_bound(name: &str, addr: *const std::ffi::c_void) -> Result<(), String> {
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
pub fn load(w: &Wanted, dirs: &[SearchDir]) -> Library {
    let mut lib = Library {
        name: w.name,
        file: w.file,
        major: w.major,
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
        if let (Some(d), "nvrtc", Some(m)) = (dir, w.name, w.major) {
            preload_nvrtc_builtins(d, m);
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
pub fn load(w: &Wanted, _dirs: &[SearchDir]) -> Library {
    Library {
        name: w.name,
        file: w.file,
        major: w.major,
        path: None,
        source: None,
        version: None,
        problem: Some("the CUDA backend supports Linux in this version".to_string()),
        hint: Some("use the cpu device".to_string()),
    }
}

fn hint_for(w: &Wanted) -> String {
    match w.name {
        "cuda" | "nvml" => "install the NVIDIA driver (525 or newer for CUDA 12, 580 or \
             newer for CUDA 13), e.g. `apt install nvidia-driver` or your distribution's \
             package; in a container, start it with `--gpus all`"
            .to_string(),
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
            let at = |name: &str| {
                wanted(m)
                    .iter()
                    .find(|w| w.name == name)
                    .is_some_and(|w| locate(w, dirs).is_some())
            };
            (
                m,
                Have {
                    nvrtc: at("nvrtc"),
                    cublas: at("cublas") && at("cublaslt"),
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
        .find(|l| l.name == "cuda" && l.is_loaded())
        .and_then(driver_number)
}

/// The libraries and the major, once the search has run ([`state`]).
static STATE: std::sync::OnceLock<(Vec<Library>, MajorChoice)> = std::sync::OnceLock::new();

/// The JAX extra whose CUDA plugin fits a driver that supports CUDA `driver` (12040 for
/// 12.4): `jax[cuda12]` below CUDA 13, `jax[cuda13]` from it; both named when the driver is
/// unknown.
pub fn jax_cuda_extra(driver: Option<u32>) -> &'static str {
    match driver {
        Some(v) if v < 13000 => "`pip install \"jax[cuda12]\"`",
        Some(_) => "`pip install \"jax[cuda13]\"`",
        None => {
            "`pip install \"jax[cuda12]\"` (driver 525 to 575) or `\"jax[cuda13]\"` (580 and newer)"
        }
    }
}

/// Every library and the major chosen, once per process.
fn state() -> &'static (Vec<Library>, MajorChoice) {
    STATE.get_or_init(|| {
        let forced = crate::base::env::choice("ACCEL_CUDA_MAJOR", &["12", "13"])
            .ok()
            .flatten()
            .and_then(|m| m.parse::<u32>().ok());
        // A driver library whose load hung or crashed the probe helper is not loaded here.
        if let Err(r) = crate::base::helper::canary("cuda") {
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
            let lib = load(w, &quick_dirs);
            if lib.is_loaded() {
                return lib;
            }
            let all = dirs.get_or_insert_with(|| search_dirs(&env));
            load(w, all)
        };
        // The driver's libraries first: its CUDA version bounds the major.
        let mut libs: Vec<Library> = WANTED_13
            .iter()
            .filter(|w| w.major.is_none() && w.name != "cudnn")
            .map(|w| load_one(w, &mut dirs))
            .collect();
        let driver = libs
            .iter()
            .find(|l| l.name == "cuda" && l.is_loaded())
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
        // PyTorch's or JAX's major only breaks a tie (both complete, or neither found), so it
        // is looked up only then.
        let counts: Vec<u8> = found
            .iter()
            .filter(|(m, _)| driver.is_none_or(|d| *m <= d / 1000))
            .map(|(_, h)| h.count())
            .collect();
        let tie = counts.len() > 1 && counts.windows(2).all(|w| w[0] == w[1]);
        let framework = if tie && forced.is_none() {
            super::pyenv::framework_majors(&env)
                .first()
                .map(|f| f.major)
        } else {
            None
        };
        let choice = choose_major(driver, forced, &found, framework);
        for w in wanted(choice.major)
            .iter()
            .filter(|w| w.major.is_some() || w.name == "cudnn")
        {
            libs.push(load_one(w, &mut dirs));
        }
        (libs, choice)
    })
}

/// Driver functions newer than the floor ([`DRIVER_FLOOR`]) that accel calls, each only after
/// [`driver_symbol`] found it, with a fallback to an older function otherwise. The
/// driver-symbol floor test allows these and no others beyond CUDA 12.0's `cuda.h`.
pub const GUARDED_DRIVER_SYMBOLS: &[&str] = &["cuEventElapsedTime_v2"];

/// The address of `symbol` in the loaded libcuda (a function newer than the driver floor is
/// used only when this finds it). None without a driver.
pub fn driver_symbol(symbol: &str) -> Option<*mut std::ffi::c_void> {
    #[cfg(target_os = "linux")]
    {
        let cuda = library("cuda").filter(|l| l.is_loaded())?;
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

/// The library called `name` (`cublas`), as found.
pub fn library(name: &str) -> Option<&'static Library> {
    libraries().iter().find(|l| l.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOTH: Have = Have {
        nvrtc: true,
        cublas: true,
    };
    const NVRTC: Have = Have {
        nvrtc: true,
        cublas: false,
    };
    const CUBLAS: Have = Have {
        nvrtc: false,
        cublas: true,
    };
    const NONE: Have = Have {
        nvrtc: false,
        cublas: false,
    };

    fn pick(driver: Option<u32>, f: &[(u32, Have)], fw: Option<u32>) -> MajorChoice {
        choose_major(driver, None, f, fw)
    }

    #[test]
    fn the_major_follows_the_driver_and_what_is_installed() {
        let all = [(13, BOTH), (12, BOTH)];
        let only12 = [(13, NONE), (12, BOTH)];
        let only13 = [(13, BOTH), (12, NONE)];
        // (driver, found, framework) -> (major, a problem?)
        type Row<'a> = (Option<u32>, &'a [(u32, Have)], Option<u32>, u32, bool);
        let table: &[Row] = &[
            // R525 (12.0), Colab's R550 (12.4), R570 (12.8): CUDA 12 only, however new the
            // libraries installed beside them.
            (Some(12000), &all, None, 12, false),
            (Some(12040), &all, None, 12, false),
            (Some(12080), &all, Some(13), 12, false),
            (Some(12040), &only12, None, 12, false),
            // R580 (13.0) and later: the newest complete set, unless PyTorch/JAX here uses
            // the other and both are complete.
            (Some(13000), &all, None, 13, false),
            (Some(13010), &all, Some(12), 12, false),
            (Some(13010), &only12, None, 12, false),
            (Some(13000), &only13, Some(12), 13, false),
            // No driver (a CPU machine compiling kernels): any major.
            (None, &only12, None, 12, false),
            (None, &all, None, 13, false),
            (None, &[(13, NVRTC), (12, NONE)], None, 13, false),
            // The driver is too old for everything found.
            (Some(12040), &only13, None, 12, true),
            // NVRTC of one major and cuBLAS of the other.
            (Some(13000), &[(13, CUBLAS), (12, NVRTC)], None, 13, true),
            (Some(12040), &[(13, CUBLAS), (12, NVRTC)], None, 12, false),
            (None, &[(13, NVRTC), (12, CUBLAS)], None, 13, true),
            // Nothing at all: the newest the driver supports, and no problem beyond the
            // missing libraries themselves.
            (Some(12040), &[], None, 12, false),
            (Some(13000), &[], None, 13, false),
        ];
        for (i, (driver, found, fw, want, problem)) in table.iter().enumerate() {
            let c = pick(*driver, found, *fw);
            assert_eq!(c.major, *want, "row {i}: {c:?}");
            assert_eq!(c.problem.is_some(), *problem, "row {i}: {c:?}");
            assert_eq!(c.problem.is_some(), c.hint.is_some(), "row {i}: {c:?}");
        }
    }

    #[test]
    fn the_refusals_say_both_versions_and_both_fixes() {
        let c = pick(Some(12040), &[(13, BOTH), (12, NONE)], None);
        let p = c.problem.unwrap();
        assert!(p.contains("the driver supports CUDA 12.4"), "{p}");
        assert!(p.contains("CUDA 13") && p.contains("580"), "{p}");
        let h = c.hint.unwrap();
        assert!(
            h.contains("nvidia-cuda-nvrtc-cu12 nvidia-cublas-cu12"),
            "{h}"
        );
        assert!(h.contains("580"), "{h}");

        let c = pick(Some(13000), &[(13, CUBLAS), (12, NVRTC)], None);
        let p = c.problem.unwrap();
        assert!(
            p.contains("cuBLAS was found for CUDA 13 and NVRTC only for CUDA 12"),
            "{p}"
        );
        assert!(c
            .hint
            .unwrap()
            .contains("pip install nvidia-cuda-nvrtc nvidia-cublas"));

        // A forced major the driver lacks is refused with both versions; one it has is used.
        let c = choose_major(Some(12040), Some(13), &[(13, BOTH), (12, BOTH)], None);
        assert_eq!(c.major, 13);
        assert!(c
            .problem
            .unwrap()
            .contains("ACCEL_CUDA_MAJOR=13, but the driver supports CUDA 12.4"));
        let c = choose_major(Some(13000), Some(12), &[(13, BOTH), (12, BOTH)], None);
        assert_eq!((c.major, c.problem), (12, None));
        assert_eq!(c.why, "ACCEL_CUDA_MAJOR=12");
    }

    #[test]
    fn each_majors_files_and_wheel_folders() {
        let files = |m| wanted(m).iter().map(|w| w.file).collect::<Vec<_>>();
        assert!(files(12).contains(&"libcublas.so.12") && files(12).contains(&"libnvrtc.so.12"));
        assert!(files(13).contains(&"libcublasLt.so.13"));
        // cuBLASLt loads before cuBLAS, the driver's libraries first, in both.
        for m in CUDA_MAJORS {
            let names: Vec<&str> = wanted(m).iter().map(|w| w.name).collect();
            assert_eq!(
                names,
                ["cuda", "nvml", "nvrtc", "cublaslt", "cublas", "cudnn"]
            );
        }
        assert_eq!(cuda_version_text(12040), "12.4");
        assert_eq!(cuda_version_text(13010), "13.1");
        let sp = std::env::temp_dir().join(format!("accel-wheeldirs-{}", std::process::id()));
        for d in [
            "nvidia/cu13/lib",
            "nvidia/cuda_nvrtc/lib",
            "nvidia/cublas/lib",
        ] {
            std::fs::create_dir_all(sp.join(d)).unwrap();
        }
        let got = wheel_dirs(&sp);
        assert_eq!(
            got,
            [
                sp.join("nvidia/cu13/lib"),
                sp.join("nvidia/cuda_nvrtc/lib"),
                sp.join("nvidia/cublas/lib")
            ]
        );
        let _ = std::fs::remove_dir_all(&sp);
    }

    #[test]
    fn the_jax_hint_names_the_plugin_the_driver_runs() {
        assert!(jax_cuda_extra(Some(12040)).contains("jax[cuda12]"));
        assert!(!jax_cuda_extra(Some(12040)).contains("cuda13"));
        assert!(jax_cuda_extra(Some(13000)).contains("jax[cuda13]"));
        let both = jax_cuda_extra(None);
        assert!(both.contains("cuda12") && both.contains("cuda13"), "{both}");
    }
}
