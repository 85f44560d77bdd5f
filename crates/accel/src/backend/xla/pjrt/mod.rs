//! A safe layer over [`super::sys`]: a loaded plugin (`Api`), its client, devices, buffers,
//! compiled executables and events, each released on `Drop`. Errors carry PJRT's code and
//! message.

use std::ffi::{c_char, c_void, CStr, CString};
use std::path::Path;
use std::sync::Arc;

use super::sys::{self, slot};
use crate::args_size;

mod exec;
pub use exec::{Buffer, Event, Executable, ReadyMark};

/// A PJRT error: its code (`UNIMPLEMENTED` = 12 ...) and message.
#[derive(Debug, Clone)]
pub struct PjrtError {
    pub code: i32,
    pub message: String,
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

fn local(message: impl Into<String>) -> PjrtError {
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
    pub version: (i32, i32),
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
        // plugin's initialisers (we trust the plugin files `plugin_candidates` found, in
        // xla/mod.rs). The handle is never dlclosed, so code and data stay mapped for the
        // process.
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

    /// Whether the plugin's table reaches function slot `i`.
    pub fn has(&self, i: usize) -> bool {
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
    pub unsafe fn call<A>(&self, i: usize, args: &mut A) -> PResult<()> {
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

    fn take_error(&self, err: *mut sys::Error) -> PjrtError {
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
unsafe fn str_of(p: *const c_char, n: usize) -> String {
    if p.is_null() {
        return String::new();
    }
    let bytes = std::slice::from_raw_parts(p as *const u8, n);
    String::from_utf8_lossy(bytes).into_owned()
}

/// One PJRT client (one per plugin) and its addressable devices.
pub struct Client {
    pub api: Arc<Api>,
    raw: *mut sys::Client,
    pub devices: Vec<DeviceDesc>,
    pub platform: String,
    pub platform_version: String,
}

// SAFETY: the PJRT C API requires a client (and the device handles in `devices`, owned by
// it) to be usable from any thread concurrently; `raw` is destroyed only in Drop, which
// needs ownership. The other fields are ordinary Send + Sync data.
unsafe impl Send for Client {}
// SAFETY: as for Send.
unsafe impl Sync for Client {}

/// What a device says about itself.
#[derive(Debug, Clone)]
pub struct DeviceDesc {
    pub raw: usize,
    pub id: i32,
    pub kind: String,
    pub debug: String,
}

impl Client {
    /// Starts the plugin's client with boolean creation options (`preallocate`...).
    pub fn create(api: Arc<Api>, options: &[(&str, bool)]) -> PResult<Client> {
        let opts: Vec<sys::NamedBool> = options
            .iter()
            .map(|(name, v)| sys::NamedBool {
                struct_size: args_size!(sys::NamedBool, value_size),
                extension_start: std::ptr::null_mut(),
                name: name.as_ptr() as *const c_char,
                name_size: name.len(),
                type_: sys::NAMED_VALUE_BOOL,
                value: u64::from(*v),
                value_size: 1,
            })
            .collect();
        let mut a = sys::ClientCreateArgs {
            struct_size: args_size!(sys::ClientCreateArgs, kv_try_get_user_arg),
            extension_start: std::ptr::null_mut(),
            create_options: if opts.is_empty() {
                std::ptr::null()
            } else {
                opts.as_ptr() as *const c_void
            },
            num_options: opts.len(),
            kv_get_callback: std::ptr::null_mut(),
            kv_get_user_arg: std::ptr::null_mut(),
            kv_put_callback: std::ptr::null_mut(),
            kv_put_user_arg: std::ptr::null_mut(),
            client: std::ptr::null_mut(),
            kv_try_get_callback: std::ptr::null_mut(),
            kv_try_get_user_arg: std::ptr::null_mut(),
        };
        // SAFETY: `self.api.call` (see Api::call's # Safety): the args struct is the one sys.rs
        // declares for that slot (mirroring pjrt_c_api.h 0.114), its struct_size set by args_size!;
        // `create_options` points to `opts.len()` PJRT_NamedValue
        // mirrors (NamedBool, struct_size from args_size!) whose names point into the caller's
        // &str values, all alive until the call returns (the plugin copies options); the
        // key-value callbacks are null (single process).
        unsafe { api.call(slot::CLIENT_CREATE, &mut a)? };
        let mut c = Client {
            api,
            raw: a.client,
            devices: Vec::new(),
            platform: String::new(),
            platform_version: String::new(),
        };
        c.platform = c.string(slot::CLIENT_PLATFORM_NAME)?;
        c.platform_version = c.string(slot::CLIENT_PLATFORM_VERSION).unwrap_or_default();
        c.devices = c.list_devices()?;
        Ok(c)
    }

    fn string(&self, s: usize) -> PResult<String> {
        let mut a = sys::ClientStringArgs {
            struct_size: args_size!(sys::ClientStringArgs, value_size),
            extension_start: std::ptr::null_mut(),
            client: self.raw,
            value: std::ptr::null(),
            value_size: 0,
        };
        // SAFETY: callers pass s = CLIENT_PLATFORM_NAME or CLIENT_PLATFORM_VERSION, both of
        // which take PJRT_Client_Platform{Name,Version}_Args = sys::ClientStringArgs (built
        // above with args_size!); `self.raw` is the live client (destroyed only in Drop). The
        // returned string is owned by the client, alive while `self` is, and copied by str_of.
        unsafe {
            self.api.call(s, &mut a)?;
            Ok(str_of(a.value, a.value_size))
        }
    }

    fn list_devices(&self) -> PResult<Vec<DeviceDesc>> {
        let mut a = sys::ClientDevicesArgs {
            struct_size: args_size!(sys::ClientDevicesArgs, num_devices),
            extension_start: std::ptr::null_mut(),
            client: self.raw,
            devices: std::ptr::null(),
            num_devices: 0,
        };
        // SAFETY: `self.api.call` (see Api::call's # Safety): the args struct is the one sys.rs
        // declares for that slot (mirroring pjrt_c_api.h 0.114), its struct_size set by args_size!;
        // `self.raw` is the live client.
        unsafe { self.api.call(slot::CLIENT_ADDRESSABLE_DEVICES, &mut a)? };
        let raw: Vec<*mut sys::Device> = if a.devices.is_null() {
            Vec::new()
        } else {
            // SAFETY: non-null (checked: from_raw_parts needs that even for 0 elements); on
            // success PJRT sets `devices` to an array of `num_devices` device pointers owned
            // by the client, alive while it is; we copy them out at once.
            unsafe { std::slice::from_raw_parts(a.devices, a.num_devices) }.to_vec()
        };
        raw.into_iter()
            .map(|d| {
                let mut g = sys::DeviceGetDescriptionArgs {
                    struct_size: args_size!(sys::DeviceGetDescriptionArgs, device_description),
                    extension_start: std::ptr::null_mut(),
                    device: d,
                    device_description: std::ptr::null_mut(),
                };
                // SAFETY: `self.api.call` (see Api::call's # Safety): the args struct is the one
                // sys.rs declares for that slot (mirroring pjrt_c_api.h 0.114), its struct_size set
                // by args_size!; `d` is a device of this live client (just listed).
                unsafe { self.api.call(slot::DEVICE_GET_DESCRIPTION, &mut g)? };
                let desc = g.device_description;
                let mut id = sys::DeviceDescriptionIdArgs {
                    struct_size: args_size!(sys::DeviceDescriptionIdArgs, id),
                    extension_start: std::ptr::null_mut(),
                    device_description: desc,
                    id: 0,
                };
                // SAFETY: `self.api.call` (see Api::call's # Safety): the args struct is the one
                // sys.rs declares for that slot (mirroring pjrt_c_api.h 0.114), its struct_size set
                // by args_size!; `desc` is the description the device returned,
                // owned by the device (alive with the client).
                unsafe { self.api.call(slot::DEVICE_DESCRIPTION_ID, &mut id)? };
                let string = |s: usize| -> PResult<String> {
                    let mut a = sys::DeviceDescriptionStringArgs {
                        struct_size: args_size!(sys::DeviceDescriptionStringArgs, value_size),
                        extension_start: std::ptr::null_mut(),
                        device_description: desc,
                        value: std::ptr::null(),
                        value_size: 0,
                    };
                    // SAFETY: s is DEVICE_DESCRIPTION_KIND or _DEBUG_STRING, both taking
                    // sys::DeviceDescriptionStringArgs (args_size! above) with the live `desc`;
                    // the string is owned by the description and copied by str_of.
                    unsafe {
                        self.api.call(s, &mut a)?;
                        Ok(str_of(a.value, a.value_size))
                    }
                };
                Ok(DeviceDesc {
                    raw: d as usize,
                    id: id.id,
                    kind: string(slot::DEVICE_DESCRIPTION_KIND)?,
                    debug: string(slot::DEVICE_DESCRIPTION_DEBUG_STRING).unwrap_or_default(),
                })
            })
            .collect()
    }

    /// (bytes in use, bytes limit) of a device, where the plugin reports them.
    pub fn memory_stats(&self, device: usize) -> PResult<(i64, Option<i64>)> {
        let mut a = sys::DeviceMemoryStatsArgs {
            struct_size: args_size!(sys::DeviceMemoryStatsArgs, peak_allocated_bytes_is_set),
            extension_start: std::ptr::null_mut(),
            device: self.devices[device].raw as *mut sys::Device,
            bytes_in_use: 0,
            peak_bytes_in_use: Default::default(),
            num_allocs: Default::default(),
            largest_alloc_size: Default::default(),
            bytes_limit: Default::default(),
            bytes_reserved: Default::default(),
            peak_bytes_reserved: Default::default(),
            bytes_reservable_limit: Default::default(),
            largest_free_block_bytes: Default::default(),
            pool_bytes: Default::default(),
            peak_pool_bytes: Default::default(),
            peak_allocated_bytes_value: 0,
            peak_allocated_bytes_is_set: false,
        };
        // SAFETY: `self.api.call` (see Api::call's # Safety): the args struct is the one sys.rs
        // declares for that slot (mirroring pjrt_c_api.h 0.114), its struct_size set by args_size!;
        // the device handle is one of this live client's
        // (`self.devices[device]`, bounds-checked indexing); the rest are out-fields.
        unsafe { self.api.call(slot::DEVICE_MEMORY_STATS, &mut a)? };
        Ok((
            a.bytes_in_use,
            a.bytes_limit.is_set.then_some(a.bytes_limit.value),
        ))
    }

    /// Compiles StableHLO MLIR text for one device.
    pub fn compile(&self, mlir: &str) -> PResult<Executable> {
        // CompileOptionsProto { executable_build_options { num_replicas: 1, num_partitions: 1 },
        // compile_portable_executable: true }: empty options make some plugins abort the
        // process; a portable executable runs on whichever device `execute` names.
        const OPTIONS: [u8; 8] = [0x1a, 0x04, 0x20, 0x01, 0x28, 0x01, 0x20, 0x01];
        let mut code = mlir.as_bytes().to_vec();
        let format = b"mlir";
        let program = sys::Program {
            struct_size: args_size!(sys::Program, format_size),
            extension_start: std::ptr::null_mut(),
            code: code.as_mut_ptr() as *mut c_char,
            code_size: code.len(),
            format: format.as_ptr() as *const c_char,
            format_size: format.len(),
        };
        let mut a = sys::ClientCompileArgs {
            struct_size: args_size!(sys::ClientCompileArgs, executable),
            extension_start: std::ptr::null_mut(),
            client: self.raw,
            program: &program,
            compile_options: OPTIONS.as_ptr() as *const c_char,
            compile_options_size: OPTIONS.len(),
            executable: std::ptr::null_mut(),
        };
        // SAFETY: `self.api.call` (see Api::call's # Safety): the args struct is the one sys.rs
        // declares for that slot (mirroring pjrt_c_api.h 0.114), its struct_size set by args_size!;
        // `program` (with `code` and `format`) and OPTIONS live
        // until the call returns, which is all PJRT_Client_Compile needs; `self.raw` is live.
        unsafe { self.api.call(slot::CLIENT_COMPILE, &mut a)? };
        Ok(Executable {
            api: self.api.clone(),
            raw: a.executable,
        })
    }

    /// Copies host data into a new device buffer of `dims`; returns once the host data may
    /// be reused.
    /// A device buffer of `dims` elements of `type_` (`elem_size` bytes each) copied from
    /// `data`, which must hold exactly that many bytes.
    pub fn buffer_from_host(
        &self,
        data: &[u8],
        type_: i32,
        elem_size: usize,
        dims: &[i64],
        device: usize,
    ) -> PResult<Buffer> {
        let want = dims.iter().try_fold(elem_size, |acc, &d| {
            acc.checked_mul(usize::try_from(d).ok()?)
        });
        if want != Some(data.len()) {
            return Err(local(format!(
                "{} bytes of host data for a buffer of dims {dims:?} of {elem_size}-byte elements",
                data.len()
            )));
        }
        if device >= self.devices.len() {
            return Err(local(format!("no device {device} in this client")));
        }
        let mut a = sys::BufferFromHostBufferArgs {
            struct_size: args_size!(sys::BufferFromHostBufferArgs, buffer),
            extension_start: std::ptr::null_mut(),
            client: self.raw,
            data: data.as_ptr() as *const c_void,
            type_,
            dims: dims.as_ptr(),
            num_dims: dims.len(),
            byte_strides: std::ptr::null(),
            num_byte_strides: 0,
            host_buffer_semantics: sys::HOST_BUFFER_IMMUTABLE_ONLY_DURING_CALL,
            device: self.devices[device].raw as *mut sys::Device,
            memory: std::ptr::null_mut(),
            device_layout: std::ptr::null_mut(),
            done_with_host_buffer: std::ptr::null_mut(),
            buffer: std::ptr::null_mut(),
        };
        // SAFETY: `self.api.call` (see Api::call's # Safety): the args struct is the one sys.rs
        // declares for that slot (mirroring pjrt_c_api.h 0.114), its struct_size set by args_size!.
        // `data` holds the product of `dims` elements of
        // `type_` (checked at the top of this function, given the caller's `elem_size` for
        // `type_`). With HOST_BUFFER_IMMUTABLE_ONLY_DURING_CALL the plugin is done with
        // `data` when the call returns, and we also wait for `done_with_host_buffer` below
        // before the borrow ends. `dims` and the device handle (this client's) live through
        // the call.
        unsafe {
            self.api
                .call(slot::CLIENT_BUFFER_FROM_HOST_BUFFER, &mut a)?
        };
        // Owned first, so that a failed wait below destroys the buffer and the event instead
        // of leaking them.
        let done = Event {
            api: self.api.clone(),
            raw: a.done_with_host_buffer,
        };
        if a.buffer.is_null() {
            return Err(local(
                "the plugin returned no buffer for a host-to-device copy".to_string(),
            ));
        }
        let buffer = Buffer {
            api: self.api.clone(),
            raw: a.buffer,
        };
        done.wait()?;
        Ok(buffer)
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let mut a = sys::ClientArgs {
            struct_size: args_size!(sys::ClientArgs, client),
            extension_start: std::ptr::null_mut(),
            client: self.raw,
        };
        // SAFETY: `self.api.call` (see Api::call's # Safety): the args struct is the one sys.rs
        // declares for that slot (mirroring pjrt_c_api.h 0.114), its struct_size set by args_size!;
        // `self.raw` was created by CLIENT_CREATE and is destroyed
        // only here. Its buffers and executables must already be gone: they hold only
        // Arc<Api>, so this relies on every XlaStorage/compile-cache entry keeping the Client
        // alive (XlaDevice holds Arc<Client>, and clients live in the static Runtime in
        // xla/storage.rs, dropped only when they have no devices, i.e. no buffers).
        let _ = unsafe { self.api.call(slot::CLIENT_DESTROY, &mut a) };
    }
}
