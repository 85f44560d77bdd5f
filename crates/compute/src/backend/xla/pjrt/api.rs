//! A loaded plugin (`Api`): dlopen, `GetPjrtApi`, `PJRT_Plugin_Initialize`, and the checked
//! call through its function table; PJRT's errors as values with their code and message.

use std::ffi::{c_char, c_void, CStr, CString};
use std::path::Path;
use std::sync::Arc;

use super::sys::args_size;
use super::sys::{self, slot};

/// A PJRT error: its code (`UNIMPLEMENTED` = 12 ...) and message.
#[derive(Debug, Clone)]
pub struct PjrtError {
    pub code: i32,
    pub message: String,
}

impl PjrtError {
    /// The plugin does not implement the call (`UNIMPLEMENTED`): a missing feature, not a fault.
    pub fn is_unimplemented(&self) -> bool {
        self.code == sys::ERROR_CODE_UNIMPLEMENTED
    }

    /// The device ran out of memory (`RESOURCE_EXHAUSTED`).
    pub fn is_resource_exhausted(&self) -> bool {
        self.code == sys::ERROR_CODE_RESOURCE_EXHAUSTED
    }
}

impl std::error::Error for PjrtError {}

impl std::fmt::Display for PjrtError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self.code {
            1 => "CANCELLED",
            2 => "UNKNOWN",
            3 => "INVALID_ARGUMENT",
            4 => "DEADLINE_EXCEEDED",
            5 => "NOT_FOUND",
            8 => "RESOURCE_EXHAUSTED",
            9 => "FAILED_PRECONDITION",
            12 => "UNIMPLEMENTED",
            13 => "INTERNAL",
            14 => "UNAVAILABLE",
            _ => "ERROR",
        };
        write!(f, "{name}: {}", self.message)
    }
}

pub type PResult<T> = std::result::Result<T, PjrtError>;

pub(crate) fn local(message: impl Into<String>) -> PjrtError {
    PjrtError {
        code: -1,
        message: message.into(),
    }
}

/// A loaded plugin's function table. The library is never unloaded (plugins do not support
/// it), so the table lives for the process.
pub struct Api {
    table: *const u8,
    /// `major.minor` of the plugin's PJRT API.
    pub(crate) version: (i32, i32),
    table_size: usize,
}

// SAFETY: `table` points into the plugin's static PJRT_Api, which the plugin never changes
// and never frees (the library is never dlclosed: `load` keeps the handle), so reading it
// from any thread is fine; the PJRT C API requires its functions to be thread safe.
unsafe impl Send for Api {}
// SAFETY: as for Send; Api has no interior mutability.
unsafe impl Sync for Api {}

impl Api {
    /// dlopens `path` and calls its `GetPjrtApi`, then `PJRT_Plugin_Initialize`.
    pub fn load(path: &Path) -> PResult<Arc<Api>> {
        let c =
            CString::new(path.to_string_lossy().as_bytes()).map_err(|e| local(e.to_string()))?;
        // SAFETY: `c` is a NUL-terminated CString alive for the call; loading runs the
        // plugin's initialisers (we trust the files accel's `xla::plugins::plugin_candidates`
        // found). The handle is never dlclosed, so code and data stay mapped for the process.
        let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if h.is_null() {
            // SAFETY: no arguments; glibc keeps the message per thread, so it is the error of
            // the dlopen just above.
            let e = unsafe { libc::dlerror() };
            let msg = if e.is_null() {
                "dlopen failed".to_string()
            } else {
                // SAFETY: non-null (checked); a NUL-terminated string valid until the next dl*
                // call on this thread; copied at once.
                unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
            };
            return Err(local(msg));
        }
        // SAFETY: `h` is the live handle from dlopen above; the name is a C string literal.
        let sym = unsafe { libc::dlsym(h, c"GetPjrtApi".as_ptr()) };
        if sym.is_null() {
            return Err(local(
                "the library has no GetPjrtApi symbol: not a PJRT plugin",
            ));
        }
        let get: unsafe extern "C" fn() -> *const sys::ApiHeader =
            // SAFETY: `sym` is non-null (checked) and is the PJRT plugin entry point, declared
            // in pjrt_c_api.h as `const PJRT_Api* GetPjrtApi(void)`, the type transmuted to
            // here (a data pointer and a function pointer have the same size on Linux).
            unsafe { std::mem::transmute(sym) };
        // SAFETY: calling it with its declared signature (above); it takes no arguments.
        let table = unsafe { get() };
        if table.is_null() {
            return Err(local("GetPjrtApi returned null"));
        }
        // SAFETY: non-null (checked); GetPjrtApi returns a pointer to the plugin's static,
        // suitably aligned PJRT_Api, which begins with the header sys::ApiHeader mirrors
        // (struct_size, extension_start, pjrt_api_version) and lives for the process (never
        // dlclosed). Only read.
        let header = unsafe { &*table };
        let api = Api {
            table: table as *const u8,
            version: (
                header.pjrt_api_version.major_version,
                header.pjrt_api_version.minor_version,
            ),
            table_size: header.struct_size,
        };
        if api.version.0 != 0 {
            return Err(local(format!(
                "PJRT API {}.{}: accel speaks major version 0",
                api.version.0, api.version.1
            )));
        }
        let mut args = sys::PluginInitializeArgs {
            struct_size: args_size!(sys::PluginInitializeArgs, extension_start),
            extension_start: std::ptr::null_mut(),
        };
        // Older plugins may lack it; that is fine.
        if api.has(slot::PLUGIN_INITIALIZE) {
            // SAFETY: PLUGIN_INITIALIZE takes PJRT_Plugin_Initialize_Args, which
            // sys::PluginInitializeArgs mirrors, with struct_size from args_size! (Api::call's
            // # Safety).
            unsafe { api.call(slot::PLUGIN_INITIALIZE, &mut args)? };
        }
        Ok(Arc::new(api))
    }

    /// The PJRT C API version the plugin implements (major, minor).
    pub fn version(&self) -> (i32, i32) {
        self.version
    }

    /// Whether the plugin's table reaches function slot `i`.
    pub(crate) fn has(&self, i: usize) -> bool {
        sys::slot_offset(i) + std::mem::size_of::<usize>() <= self.table_size
            && self.fn_at(i).is_some()
    }

    fn fn_at(&self, i: usize) -> Option<sys::Fn> {
        if sys::slot_offset(i) + std::mem::size_of::<usize>() > self.table_size {
            return None;
        }
        // SAFETY: slot_offset(i) + size_of::<usize>() <= table_size (checked above), and
        // table_size is the table's own struct_size (Api::load), so the read is inside the
        // plugin's static PJRT_Api, which lives for the process; the slot is a function
        // pointer field of a C struct of pointers, hence pointer-aligned (the table pointer
        // is aligned for PJRT_Api).
        let p = unsafe { *(self.table.add(sys::slot_offset(i)) as *const *const c_void) };
        if p.is_null() {
            None
        } else {
            // SAFETY: non-null (checked); every PJRT_Api function slot has the C type
            // `PJRT_Error* (*)(Args*)`, which sys::Fn mirrors with `*mut c_void` for the
            // args; fn pointers and data pointers have the same size on Linux. The slot
            // numbers in sys::slot match pjrt_c_api.h 0.114.
            Some(unsafe { std::mem::transmute::<*const c_void, sys::Fn>(p) })
        }
    }

    /// Calls function slot `i` with `args`; a returned PJRT_Error becomes ours.
    ///
    /// # Safety
    /// - `A` must be the `#[repr(C)]` argument struct that sys.rs declares for slot `i` (the
    ///   `PJRT_*_Args` of that function in pjrt_c_api.h 0.114), with `struct_size` set by
    ///   `args_size!` and `extension_start` null or valid.
    /// - Every input field must be valid as the header requires: handles (client, device,
    ///   buffer, event, executable) alive and from this plugin; pointer/length pairs covering
    ///   live memory that stays valid for as long as the plugin may use it (for the call,
    ///   unless the header says longer); out-fields may be anything.
    /// - Handles the call destroys must not be used again.
    pub(crate) unsafe fn call<A>(&self, i: usize, args: &mut A) -> PResult<()> {
        let f = self
            .fn_at(i)
            .ok_or_else(|| local(format!("the plugin lacks PJRT function slot {i}")))?;
        // (Inside an unsafe fn: the caller's # Safety obligations make this call sound.)
        let err = f(args as *mut A as *mut c_void);
        if err.is_null() {
            Ok(())
        } else {
            Err(self.take_error(err))
        }
    }

    pub(crate) fn take_error(&self, err: *mut sys::Error) -> PjrtError {
        let mut m = sys::ErrorMessageArgs {
            struct_size: args_size!(sys::ErrorMessageArgs, message_size),
            extension_start: std::ptr::null_mut(),
            error: err,
            message: std::ptr::null(),
            message_size: 0,
        };
        let mut c = sys::ErrorGetCodeArgs {
            struct_size: args_size!(sys::ErrorGetCodeArgs, code),
            extension_start: std::ptr::null_mut(),
            error: err,
            code: 2,
        };
        // SAFETY: `err` is a non-null PJRT_Error the plugin returned (Api::call) or handed to
        // `on_ready`, not yet destroyed (we destroy it below, once). ERROR_MESSAGE and
        // ERROR_GET_CODE take sys::ErrorMessageArgs / sys::ErrorGetCodeArgs, built above with
        // args_size!; ERROR_MESSAGE sets `message`/`message_size` to a buffer owned by the
        // error, which `str_of` copies before ERROR_DESTROY frees it (or leaves it null).
        let message = unsafe {
            if let Some(f) = self.fn_at(slot::ERROR_MESSAGE) {
                f(&mut m as *mut _ as *mut c_void);
            }
            if let Some(f) = self.fn_at(slot::ERROR_GET_CODE) {
                f(&mut c as *mut _ as *mut c_void);
            }
            str_of(m.message, m.message_size)
        };
        let mut d = sys::ErrorDestroyArgs {
            struct_size: args_size!(sys::ErrorDestroyArgs, error),
            extension_start: std::ptr::null_mut(),
            error: err,
        };
        if let Some(f) = self.fn_at(slot::ERROR_DESTROY) {
            // SAFETY: ERROR_DESTROY takes sys::ErrorDestroyArgs (built above); `err` is live
            // and destroyed only here; its message was already copied into `message`.
            unsafe { f(&mut d as *mut _ as *mut c_void) };
        }
        PjrtError {
            code: c.code,
            message,
        }
    }
}

/// A copy of the `n` bytes at `p` as text (lossy UTF-8); empty when `p` is null.
///
/// # Safety
/// When `p` is non-null it must be valid for reads of `n` initialised bytes (in one
/// allocation, n <= isize::MAX) for the duration of the call: PJRT out-strings satisfy this
/// while the object that owns them (error, client, device description) is alive.
pub(crate) unsafe fn str_of(p: *const c_char, n: usize) -> String {
    if p.is_null() {
        return String::new();
    }
    let bytes = std::slice::from_raw_parts(p as *const u8, n);
    String::from_utf8_lossy(bytes).into_owned()
}
