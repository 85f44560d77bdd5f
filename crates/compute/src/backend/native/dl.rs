//! `dlopen` by absolute path, `dlsym`, and which file holds an address (`dladdr`): the loader
//! calls the library search (`libs::load`) and its checks (`libs::check_bound`) are made of.

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
    // A file named by path passes the one rule for native code (`trust::safe_file`) right
    // before it is loaded; a bare name is the loader's own search.
    if Path::new(name).is_absolute() {
        super::trust::safe_file(Path::new(name)).inspect_err(|why| {
            super::trust::skipped(Path::new(name), why);
        })?;
    }
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
