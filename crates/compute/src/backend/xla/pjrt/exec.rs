//! The parts of the PJRT layer that live per operation: completion events (and the marks
//! that note when one fired), device buffers and compiled executables.

use std::ffi::{c_char, c_void};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::api::{local, Api, PResult};
use super::client::Client;
use super::sys::args_size;
use super::sys::{self, slot};

/// A completion event.
pub struct Event {
    pub(crate) api: Arc<Api>,
    pub(crate) raw: *mut sys::Event,
}

impl Event {
    /// Blocks until the event fires; its error, if any, is returned.
    pub fn wait(self) -> PResult<()> {
        if self.raw.is_null() {
            return Ok(());
        }
        let mut a = sys::EventArgs {
            struct_size: args_size!(sys::EventArgs, event),
            extension_start: std::ptr::null_mut(),
            event: self.raw,
        };
        // SAFETY: `self.api.call` (see Api::call's # Safety): the args struct is the one sys.rs
        // declares for that slot (mirroring pjrt_c_api.h 0.114), its struct_size set by args_size!;
        // `self.raw` is a live event (non-null, checked above),
        // destroyed only by Drop after this returns (`wait` takes `self`).
        unsafe { self.api.call(slot::EVENT_AWAIT, &mut a) }
    }
}

/// The moment an event fired, by the host's clock, noted by a callback the runtime calls on
/// its own thread as soon as the work is done (`PJRT_Event_OnReady`): the end of the work
/// without the waiting thread's wake-up.
#[derive(Default)]
pub struct ReadyMark {
    at: Mutex<Option<Instant>>,
    fired: Condvar,
}

impl ReadyMark {
    /// When the event fired, waiting up to `limit` for it.
    pub fn wait(&self, limit: Duration) -> Option<Instant> {
        let g = self.at.lock().unwrap_or_else(|e| e.into_inner());
        let (g, _) = self
            .fired
            .wait_timeout_while(g, limit, |at| at.is_none())
            .unwrap_or_else(|e| e.into_inner());
        *g
    }
}

/// What the runtime hands back to [`on_ready`].
struct OnReadyArg {
    api: Arc<Api>,
    mark: Arc<ReadyMark>,
}

/// The `PJRT_Event_OnReadyCallback` that `Event::mark_ready` registers.
///
/// # Safety
/// Only the PJRT runtime may call it, once per registration: `user_arg` must be the
/// `Box<OnReadyArg>` pointer `mark_ready` leaked for that registration (ownership passes to
/// this call), and `error` null or a live PJRT_Error of the same plugin that this call then
/// owns.
unsafe extern "C" fn on_ready(error: *mut sys::Error, user_arg: *mut c_void) {
    let now = Instant::now();
    // SAFETY: `user_arg` is the Box<OnReadyArg> that `Event::mark_ready` leaked for this
    // registration (# Safety above); the runtime calls the callback once, so the box is
    // reclaimed exactly once (mark_ready reclaims it itself only when registration failed, in
    // which case this never runs).
    let arg = unsafe { Box::from_raw(user_arg as *mut OnReadyArg) };
    if !error.is_null() {
        // The callback owns the error. A failed computation also fails the wait that follows
        // (`synchronize`), which reports it; here it is only destroyed.
        drop(arg.api.take_error(error));
    }
    *arg.mark.at.lock().unwrap_or_else(|e| e.into_inner()) = Some(now);
    arg.mark.fired.notify_all();
}

impl Event {
    /// Notes when the event fires (see [`ReadyMark`]). Keep the event until the mark is set:
    /// a plugin may keep its callbacks on the event itself.
    pub fn mark_ready(&self) -> PResult<Arc<ReadyMark>> {
        let mark = Arc::new(ReadyMark::default());
        if self.raw.is_null() {
            *mark.at.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
            return Ok(mark);
        }
        let user = Box::into_raw(Box::new(OnReadyArg {
            api: self.api.clone(),
            mark: mark.clone(),
        }));
        let mut a = sys::EventOnReadyArgs {
            struct_size: args_size!(sys::EventOnReadyArgs, user_arg),
            extension_start: std::ptr::null_mut(),
            event: self.raw,
            callback: on_ready,
            user_arg: user as *mut c_void,
        };
        // SAFETY: `self.api.call` (see Api::call's # Safety): the args struct is the one sys.rs
        // declares for that slot (mirroring pjrt_c_api.h 0.114), its struct_size set by args_size!;
        // `self.raw` is a live event (non-null, checked above);
        // `on_ready` has the PJRT_Event_OnReadyCallback C signature, and `user` is a leaked
        // Box<OnReadyArg> whose contents (Arc<Api>, Arc<ReadyMark>) are Send + Sync, so the
        // runtime may call back on any thread.
        if let Err(e) = unsafe { self.api.call(slot::EVENT_ON_READY, &mut a) } {
            // SAFETY: registration failed, so the runtime will never call `on_ready` with
            // `user`: we are its only owner and reclaim the Box leaked just above, once.
            drop(unsafe { Box::from_raw(user) });
            return Err(e);
        }
        Ok(mark)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            let mut a = sys::EventArgs {
                struct_size: args_size!(sys::EventArgs, event),
                extension_start: std::ptr::null_mut(),
                event: self.raw,
            };
            // SAFETY: `self.api.call` (see Api::call's # Safety): the args struct is the one sys.rs
            // declares for that slot (mirroring pjrt_c_api.h 0.114), its struct_size set by
            // args_size!; `self.raw` is non-null, from the plugin, and destroyed
            // only here (Event is not Clone).
            let _ = unsafe { self.api.call(slot::EVENT_DESTROY, &mut a) };
        }
    }
}

/// A device buffer.
pub struct Buffer {
    pub(crate) api: Arc<Api>,
    pub(crate) raw: *mut sys::Buffer,
}

// SAFETY: the PJRT C API requires buffer functions (to-host copies, ready events, destroy) to
// be thread safe, so `raw` may be used from any thread and from several at once; it is
// destroyed only in Drop (needs ownership). `api` is Send + Sync.
unsafe impl Send for Buffer {}
// SAFETY: as for Send.
unsafe impl Sync for Buffer {}

impl Buffer {
    /// Copies the whole buffer into `dst` (exactly its size) and waits.
    pub fn to_host(&self, dst: &mut [u8]) -> PResult<()> {
        let mut a = sys::BufferToHostBufferArgs {
            struct_size: args_size!(sys::BufferToHostBufferArgs, event),
            extension_start: std::ptr::null_mut(),
            src: self.raw,
            host_layout: std::ptr::null_mut(),
            dst: dst.as_mut_ptr() as *mut c_void,
            dst_size: dst.len(),
            event: std::ptr::null_mut(),
        };
        // SAFETY: `self.api.call` (see Api::call's # Safety): the args struct is the one sys.rs
        // declares for that slot (mirroring pjrt_c_api.h 0.114), its struct_size set by args_size!;
        // `self.raw` is live; `dst` is a live &mut slice of
        // dst.len() bytes and dst_size says so, so the plugin writes at most that (it fails the
        // call if the buffer needs more). The write is asynchronous: the returned event is
        // awaited below before the `dst` borrow ends (a null event, with which nothing could
        // be awaited, is refused below).
        unsafe { self.api.call(slot::BUFFER_TO_HOST_BUFFER, &mut a)? };
        if a.event.is_null() {
            return Err(local(
                "the plugin started a copy to the host without an event to wait for",
            ));
        }
        Event {
            api: self.api.clone(),
            raw: a.event,
        }
        .wait()
    }

    /// The event that fires when the buffer's contents are computed.
    pub fn ready_event(&self) -> PResult<Event> {
        let mut a = sys::BufferReadyEventArgs {
            struct_size: args_size!(sys::BufferReadyEventArgs, event),
            extension_start: std::ptr::null_mut(),
            buffer: self.raw,
            event: std::ptr::null_mut(),
        };
        // SAFETY: `self.api.call` (see Api::call's # Safety): the args struct is the one sys.rs
        // declares for that slot (mirroring pjrt_c_api.h 0.114), its struct_size set by args_size!;
        // `self.raw` is a live buffer; the returned event is
        // owned by the Event made below and destroyed in its Drop.
        unsafe { self.api.call(slot::BUFFER_READY_EVENT, &mut a)? };
        Ok(Event {
            api: self.api.clone(),
            raw: a.event,
        })
    }

    /// Waits until the buffer's contents are computed.
    pub fn ready(&self) -> PResult<()> {
        self.ready_event()?.wait()
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if self.raw.is_null() {
            return;
        }
        let mut a = sys::BufferArgs {
            struct_size: args_size!(sys::BufferArgs, buffer),
            extension_start: std::ptr::null_mut(),
            buffer: self.raw,
        };
        // SAFETY: `self.api.call` (see Api::call's # Safety): the args struct is the one sys.rs
        // declares for that slot (mirroring pjrt_c_api.h 0.114), its struct_size set by args_size!;
        // `self.raw` came from the plugin (buffer_from_host or
        // execute) and is destroyed only here. PJRT frees the device memory only after queued
        // computations reading it finish, so dropping an input of an in-flight execute is
        // fine. The client is still alive (see Client's Drop).
        let _ = unsafe { self.api.call(slot::BUFFER_DESTROY, &mut a) };
    }
}

/// A compiled, loaded program.
pub struct Executable {
    pub(crate) api: Arc<Api>,
    pub(crate) raw: *mut sys::LoadedExecutable,
}

// SAFETY: the PJRT C API requires loaded executables to be executable from any thread,
// concurrently; `raw` is destroyed only in Drop (needs ownership). `api` is Send + Sync.
unsafe impl Send for Executable {}
// SAFETY: as for Send.
unsafe impl Sync for Executable {}

impl Executable {
    /// Runs on one device with `args`; returns its one output without waiting for it.
    pub fn execute(
        &self,
        args: &[&Buffer],
        device: Option<usize>,
        client: &Client,
    ) -> PResult<Buffer> {
        let mut opts = sys::ExecuteOptions {
            struct_size: args_size!(sys::ExecuteOptions, num_hlo_output_callbacks),
            extension_start: std::ptr::null_mut(),
            send_callbacks: std::ptr::null_mut(),
            recv_callbacks: std::ptr::null_mut(),
            num_send_ops: 0,
            num_recv_ops: 0,
            launch_id: 0,
            non_donatable_input_indices: std::ptr::null(),
            num_non_donatable_input_indices: 0,
            context: std::ptr::null_mut(),
            call_location: std::ptr::null(),
            num_tasks: 0,
            task_ids: std::ptr::null_mut(),
            incarnation_ids: std::ptr::null_mut(),
            multi_slice_config: std::ptr::null_mut(),
            use_major_to_minor_data_layout_for_callbacks: false,
            hlo_output_callbacks: std::ptr::null_mut(),
            num_hlo_output_callbacks: 0,
        };
        let arg_ptrs: Vec<*mut sys::Buffer> = args.iter().map(|b| b.raw).collect();
        let arg_list: [*const *mut sys::Buffer; 1] = [arg_ptrs.as_ptr()];
        let mut outputs: [*mut sys::Buffer; 1] = [std::ptr::null_mut()];
        let output_list: [*mut *mut sys::Buffer; 1] = [outputs.as_mut_ptr()];
        let mut a = sys::LoadedExecutableExecuteArgs {
            struct_size: args_size!(sys::LoadedExecutableExecuteArgs, execute_device),
            extension_start: std::ptr::null_mut(),
            executable: self.raw,
            options: &mut opts,
            argument_lists: arg_list.as_ptr(),
            num_devices: 1,
            num_args: args.len(),
            output_lists: output_list.as_ptr(),
            device_complete_events: std::ptr::null_mut(),
            execute_device: device.map_or(std::ptr::null_mut(), |d| {
                client.devices[d].raw as *mut sys::Device
            }),
        };
        // SAFETY: `self.api.call` (see Api::call's # Safety): the args struct is the one sys.rs
        // declares for that slot (mirroring pjrt_c_api.h 0.114), its struct_size set by args_size!
        // (ExecuteOptions likewise). `opts`, `arg_ptrs`, `arg_list`,
        // `outputs` and `output_list` are locals alive until the call returns, which is as
        // long as PJRT needs them; the argument buffers are live (`&Buffer` borrows) and of
        // this plugin; `outputs` has room for the one output every accel program has (accel's
        // `hlo::Program` builds single-result programs); the device, when given, is one of `client`'s
        // (bounds-checked index). AUDIT: nothing checks that `client` is the client that
        // compiled this executable.
        unsafe { self.api.call(slot::LOADED_EXECUTABLE_EXECUTE, &mut a)? };
        if outputs[0].is_null() {
            return Err(local("the program produced no output"));
        }
        Ok(Buffer {
            api: self.api.clone(),
            raw: outputs[0],
        })
    }
}

impl Drop for Executable {
    fn drop(&mut self) {
        let mut a = sys::LoadedExecutableDestroyArgs {
            struct_size: args_size!(sys::LoadedExecutableDestroyArgs, executable),
            extension_start: std::ptr::null_mut(),
            executable: self.raw,
        };
        // SAFETY: `self.api.call` (see Api::call's # Safety): the args struct is the one sys.rs
        // declares for that slot (mirroring pjrt_c_api.h 0.114), its struct_size set by args_size!;
        // `self.raw` came from CLIENT_COMPILE and is destroyed only
        // here; executions already queued keep what they need alive inside the runtime.
        let _ = unsafe { self.api.call(slot::LOADED_EXECUTABLE_DESTROY, &mut a) };
    }
}

impl Client {
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
    /// A device buffer of `dims` elements of `ty` copied from
    /// `data`, which must hold exactly that many bytes.
    pub fn buffer_from_host(
        &self,
        data: &[u8],
        ty: ElementType,
        dims: &[i64],
        device: usize,
    ) -> PResult<Buffer> {
        let (type_, elem_size) = (ty.code(), ty.size());
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

/// The element types of the buffers accel makes (PJRT_Buffer_Type).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElementType {
    /// IEEE half precision.
    F16,
    /// bfloat16.
    BF16,
    /// IEEE single precision.
    F32,
    /// IEEE double precision.
    F64,
    /// 32-bit signed integers.
    S32,
    /// 64-bit signed integers.
    S64,
}

impl ElementType {
    fn code(self) -> std::ffi::c_int {
        match self {
            ElementType::F16 => sys::BUFFER_TYPE_F16,
            ElementType::BF16 => sys::BUFFER_TYPE_BF16,
            ElementType::F32 => sys::BUFFER_TYPE_F32,
            ElementType::F64 => sys::BUFFER_TYPE_F64,
            ElementType::S32 => sys::BUFFER_TYPE_S32,
            ElementType::S64 => sys::BUFFER_TYPE_S64,
        }
    }

    /// Bytes per element.
    fn size(self) -> usize {
        match self {
            ElementType::F16 | ElementType::BF16 => 2,
            ElementType::F32 | ElementType::S32 => 4,
            ElementType::F64 | ElementType::S64 => 8,
        }
    }
}
