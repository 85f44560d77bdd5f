//! A client of a loaded plugin: its devices, platform and memory statistics, released on
//! `Drop`. Compiling and buffers are in `exec.rs`.

use std::ffi::{c_char, c_void};
use std::sync::Arc;

use super::api::{str_of, Api, PResult};
use super::sys::args_size;
use super::sys::{self, slot};

/// One PJRT client (one per plugin) and its addressable devices.
pub struct Client {
    pub api: Arc<Api>,
    pub(crate) raw: *mut sys::Client,
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
        // alive (XlaDevice holds Arc<Client>, and clients live in the static Runtime of
        // accel's `xla::context::runtime`, dropped only when they have no devices, i.e. no
        // buffers).
        let _ = unsafe { self.api.call(slot::CLIENT_DESTROY, &mut a) };
    }
}
