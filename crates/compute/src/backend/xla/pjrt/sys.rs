//! Thin `#[repr(C)]` bindings for the part of the PJRT C API accel uses, written from
//! `xla/pjrt/c/pjrt_c_api.h` version 0.114 (openxla/xla, as vendored in pedronahum/pypjrt).
//!
//! A plugin exports `GetPjrtApi()`, returning a `PJRT_Api` table: a header (struct_size,
//! extension_start, pjrt_api_version) followed by function pointers in a fixed order. We read
//! each pointer by its slot number, only if the table's `struct_size` says the plugin has it.
//! Every argument struct starts with its own `struct_size`, which must be the offset of its
//! last field plus that field's size in the header we were written from (see
//! `args_size!`); plugins accept sizes from older headers.

#![allow(non_camel_case_types, missing_docs, dead_code)] // the header's tables, used in part

use std::ffi::{c_char, c_int, c_void};

pub type Error = c_void;
pub type Client = c_void;
pub type Device = c_void;
pub type DeviceDescription = c_void;
pub type Buffer = c_void;
pub type Event = c_void;
pub type LoadedExecutable = c_void;

/// `struct_size` of an argument struct: offset of `$last` + its size.
macro_rules! args_size {
    ($t:ty, $last:ident) => {{
        let probe = std::mem::MaybeUninit::<$t>::uninit();
        let base = probe.as_ptr();
        // SAFETY: `base` points to a live (uninitialised) MaybeUninit<$t> on the stack, so
        // the place `(*base).$last` is in bounds; addr_of! takes its address without creating
        // a reference or reading the uninitialised memory.
        let field = unsafe { std::ptr::addr_of!((*base).$last) };
        fn size_of_pointee<T>(_: *const T) -> usize {
            std::mem::size_of::<T>()
        }
        std::mem::offset_of!($t, $last) + size_of_pointee(field)
    }};
}
pub(crate) use args_size;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ApiVersion {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub major_version: c_int,
    pub minor_version: c_int,
}

/// The table's header; function pointers follow it.
#[repr(C)]
pub struct ApiHeader {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub pjrt_api_version: ApiVersion,
}

/// Function slots in `PJRT_Api`, counted from the first function pointer (0).
pub mod slot {
    pub const ERROR_DESTROY: usize = 0;
    pub const ERROR_MESSAGE: usize = 1;
    pub const ERROR_GET_CODE: usize = 2;
    pub const PLUGIN_INITIALIZE: usize = 3;
    pub const EVENT_DESTROY: usize = 5;
    pub const EVENT_AWAIT: usize = 8;
    pub const EVENT_ON_READY: usize = 9;
    pub const CLIENT_CREATE: usize = 10;
    pub const CLIENT_DESTROY: usize = 11;
    pub const CLIENT_PLATFORM_NAME: usize = 12;
    pub const CLIENT_PLATFORM_VERSION: usize = 14;
    pub const CLIENT_ADDRESSABLE_DEVICES: usize = 16;
    pub const CLIENT_COMPILE: usize = 20;
    pub const CLIENT_BUFFER_FROM_HOST_BUFFER: usize = 22;
    pub const DEVICE_DESCRIPTION_ID: usize = 23;
    pub const DEVICE_DESCRIPTION_KIND: usize = 26;
    pub const DEVICE_DESCRIPTION_DEBUG_STRING: usize = 27;
    pub const DEVICE_GET_DESCRIPTION: usize = 29;
    pub const DEVICE_MEMORY_STATS: usize = 34;
    pub const LOADED_EXECUTABLE_DESTROY: usize = 50;
    pub const LOADED_EXECUTABLE_EXECUTE: usize = 55;
    pub const BUFFER_DESTROY: usize = 58;
    pub const BUFFER_TO_HOST_BUFFER: usize = 70;
    pub const BUFFER_READY_EVENT: usize = 72;
}

/// Offset of function slot `i` in the table.
pub const fn slot_offset(i: usize) -> usize {
    std::mem::size_of::<ApiHeader>() + i * std::mem::size_of::<usize>()
}

/// A PJRT function slot. Calling one is unsafe: the argument must point to the slot's own
/// `*_Args` struct, with `struct_size` set by `args_size!` and every input field valid as
/// the PJRT header describes; see `Api::call`.
pub type Fn = unsafe extern "C" fn(*mut c_void) -> *mut Error;

// PJRT_Buffer_Type values.
pub const BUFFER_TYPE_S32: c_int = 4;
pub const BUFFER_TYPE_S64: c_int = 5;
pub const BUFFER_TYPE_F16: c_int = 10;
pub const BUFFER_TYPE_F32: c_int = 11;
pub const BUFFER_TYPE_F64: c_int = 12;
pub const BUFFER_TYPE_BF16: c_int = 13;
// PJRT_HostBufferSemantics: the host data may be reused once the call returns.
pub const HOST_BUFFER_IMMUTABLE_ONLY_DURING_CALL: c_int = 0;
pub const ERROR_CODE_UNIMPLEMENTED: c_int = 12;
/// `RESOURCE_EXHAUSTED`: out of memory.
pub const ERROR_CODE_RESOURCE_EXHAUSTED: c_int = 8;

#[repr(C)]
pub struct ErrorDestroyArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub error: *mut Error,
}

#[repr(C)]
pub struct ErrorMessageArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub error: *const Error,
    pub message: *const c_char,
    pub message_size: usize,
}

#[repr(C)]
pub struct ErrorGetCodeArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub error: *const Error,
    pub code: c_int,
}

#[repr(C)]
pub struct PluginInitializeArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
}

#[repr(C)]
pub struct EventArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub event: *mut Event,
}

/// `PJRT_Event_OnReadyCallback`: called once with the event's error (owned by the callback,
/// which must destroy it) and the caller's argument. Unsafe to call: `user_arg` must be what
/// the callback's registrant passed (see `on_ready` in exec.rs).
pub type OnReadyCallback = unsafe extern "C" fn(error: *mut Error, user_arg: *mut c_void);

#[repr(C)]
pub struct EventOnReadyArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub event: *mut Event,
    pub callback: OnReadyCallback,
    pub user_arg: *mut c_void,
}

/// `PJRT_NamedValue` holding a bool (type 4, `kBool`): a client creation option.
#[repr(C)]
pub struct NamedBool {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub name: *const c_char,
    pub name_size: usize,
    pub type_: c_int,
    /// The union's 8 bytes; a bool is its first byte.
    pub value: u64,
    pub value_size: usize,
}
pub const NAMED_VALUE_BOOL: c_int = 4;

#[repr(C)]
pub struct ClientCreateArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub create_options: *const c_void,
    pub num_options: usize,
    pub kv_get_callback: *mut c_void,
    pub kv_get_user_arg: *mut c_void,
    pub kv_put_callback: *mut c_void,
    pub kv_put_user_arg: *mut c_void,
    pub client: *mut Client,
    pub kv_try_get_callback: *mut c_void,
    pub kv_try_get_user_arg: *mut c_void,
}

#[repr(C)]
pub struct ClientArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub client: *mut Client,
}

/// PlatformName, PlatformVersion: a string out.
#[repr(C)]
pub struct ClientStringArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub client: *mut Client,
    pub value: *const c_char,
    pub value_size: usize,
}

#[repr(C)]
pub struct ClientDevicesArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub client: *mut Client,
    pub devices: *const *mut Device,
    pub num_devices: usize,
}

#[repr(C)]
pub struct Program {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub code: *mut c_char,
    pub code_size: usize,
    pub format: *const c_char,
    pub format_size: usize,
}

#[repr(C)]
pub struct ClientCompileArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub client: *mut Client,
    pub program: *const Program,
    pub compile_options: *const c_char,
    pub compile_options_size: usize,
    pub executable: *mut LoadedExecutable,
}

#[repr(C)]
pub struct BufferFromHostBufferArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub client: *mut Client,
    pub data: *const c_void,
    pub type_: c_int,
    pub dims: *const i64,
    pub num_dims: usize,
    pub byte_strides: *const i64,
    pub num_byte_strides: usize,
    pub host_buffer_semantics: c_int,
    pub device: *mut Device,
    pub memory: *mut c_void,
    pub device_layout: *mut c_void,
    pub done_with_host_buffer: *mut Event,
    pub buffer: *mut Buffer,
}

#[repr(C)]
pub struct DeviceDescriptionIdArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub device_description: *mut DeviceDescription,
    pub id: c_int,
}

/// Kind, DebugString: a string out.
#[repr(C)]
pub struct DeviceDescriptionStringArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub device_description: *mut DeviceDescription,
    pub value: *const c_char,
    pub value_size: usize,
}

#[repr(C)]
pub struct DeviceGetDescriptionArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub device: *mut Device,
    pub device_description: *mut DeviceDescription,
}

#[repr(C)]
#[derive(Default)]
pub struct MemoryStat {
    pub value: i64,
    pub is_set: bool,
}

#[repr(C)]
pub struct DeviceMemoryStatsArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub device: *mut Device,
    pub bytes_in_use: i64,
    pub peak_bytes_in_use: MemoryStat,
    pub num_allocs: MemoryStat,
    pub largest_alloc_size: MemoryStat,
    pub bytes_limit: MemoryStat,
    pub bytes_reserved: MemoryStat,
    pub peak_bytes_reserved: MemoryStat,
    pub bytes_reservable_limit: MemoryStat,
    pub largest_free_block_bytes: MemoryStat,
    pub pool_bytes: MemoryStat,
    pub peak_pool_bytes: MemoryStat,
    pub peak_allocated_bytes_value: i64,
    pub peak_allocated_bytes_is_set: bool,
}

#[repr(C)]
pub struct LoadedExecutableDestroyArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub executable: *mut LoadedExecutable,
}

#[repr(C)]
pub struct ExecuteOptions {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub send_callbacks: *mut c_void,
    pub recv_callbacks: *mut c_void,
    pub num_send_ops: usize,
    pub num_recv_ops: usize,
    pub launch_id: c_int,
    pub non_donatable_input_indices: *const i64,
    pub num_non_donatable_input_indices: usize,
    pub context: *mut c_void,
    pub call_location: *const c_char,
    pub num_tasks: usize,
    pub task_ids: *mut c_int,
    pub incarnation_ids: *mut i64,
    pub multi_slice_config: *mut c_void,
    pub use_major_to_minor_data_layout_for_callbacks: bool,
    pub hlo_output_callbacks: *mut c_void,
    pub num_hlo_output_callbacks: usize,
}

#[repr(C)]
pub struct LoadedExecutableExecuteArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub executable: *mut LoadedExecutable,
    pub options: *mut ExecuteOptions,
    pub argument_lists: *const *const *mut Buffer,
    pub num_devices: usize,
    pub num_args: usize,
    pub output_lists: *const *mut *mut Buffer,
    pub device_complete_events: *mut *mut Event,
    pub execute_device: *mut Device,
}

#[repr(C)]
pub struct BufferArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub buffer: *mut Buffer,
}

#[repr(C)]
pub struct BufferToHostBufferArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub src: *mut Buffer,
    pub host_layout: *mut c_void,
    pub dst: *mut c_void,
    pub dst_size: usize,
    pub event: *mut Event,
}

#[repr(C)]
pub struct BufferReadyEventArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub buffer: *mut Buffer,
    pub event: *mut Event,
}
