//! One CUDA device in use: its primary context, the stream every op of accel is queued on,
//! the loaded kernel modules, the cuBLAS handle, the memory pool and the pinned staging
//! buffers. Created on first use of `cuda:N` and kept for the life of the process.
//!
//! We call the driver API through cudarc's dynamically loaded `sys` bindings, only after
//! [`super::libs`] has loaded `libcuda.so.1` (cudarc would panic if it were missing).

use std::collections::HashMap;
use std::ffi::{c_void, CStr, CString};
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::sys;

use super::kernels::{self, Family};
use crate::backend::par_copy;
use crate::memory::human_bytes;
use crate::{Device, Error, Result};

/// A driver call's result as ours.
pub(crate) fn ck(r: sys::CUresult, what: &str) -> Result<()> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(Error::System(format!(
            "CUDA {what} failed: {}",
            err_name(r)
        )))
    }
}

pub(crate) fn err_name(r: sys::CUresult) -> String {
    let mut p: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: the driver is loaded; cuGetErrorName writes a static string.
    let ok = unsafe { sys::cuGetErrorName(r, &mut p) } == sys::CUresult::CUDA_SUCCESS;
    if ok && !p.is_null() {
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    } else {
        format!("{r:?}")
    }
}

/// Bytes staged per pinned buffer when copying between host and device.
const STAGE_BYTES: usize = 32 << 20;
/// Copies smaller than this go straight from pageable memory (the driver stages them).
const STAGE_ABOVE: usize = 4 << 20;

struct Staging {
    bufs: [*mut u8; 2],
    events: [sys::CUevent; 2],
}

pub(crate) struct Gpu {
    pub ordinal: usize,
    pub ctx: sys::CUcontext,
    pub stream: sys::CUstream,
    pub pool: sys::CUmemoryPool,
    /// `sm_90` for compute capability 9.0.
    pub arch: String,
    pub sm_count: u32,
    modules: Mutex<HashMap<Family, sys::CUmodule>>,
    functions: Mutex<HashMap<String, usize>>,
    blas: Mutex<Option<usize>>,
    staging: Mutex<Option<Staging>>,
}

// SAFETY: the raw handles are only used through the driver, which is thread safe; the maps
// and the staging buffers are behind mutexes.
unsafe impl Send for Gpu {}
unsafe impl Sync for Gpu {}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Gpu(cuda:{}, {})", self.ordinal, self.arch)
    }
}

static GPUS: OnceLock<Mutex<HashMap<usize, Arc<Gpu>>>> = OnceLock::new();

/// The `Gpu` of ordinal `i` if something already used it (memory queries must not create
/// a context).
pub(crate) fn opened(i: usize) -> Option<Arc<Gpu>> {
    let map = GPUS.get()?;
    let g = map.lock().unwrap_or_else(|e| e.into_inner());
    g.get(&i).cloned()
}

/// The `Gpu` of ordinal `i`, created on first use.
pub(crate) fn gpu(i: usize) -> Result<Arc<Gpu>> {
    let map = GPUS.get_or_init(|| Mutex::new(HashMap::new()));
    let mut g = map.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(x) = g.get(&i) {
        return Ok(x.clone());
    }
    crate::backend::check(Device::Cuda(i))?;
    let x = Arc::new(Gpu::open(i)?);
    g.insert(i, x.clone());
    Ok(x)
}

/// Device attribute, or 0 when the driver does not know it.
pub(crate) fn attr(dev: sys::CUdevice, a: sys::CUdevice_attribute) -> i32 {
    let mut v = 0;
    // SAFETY: plain query.
    unsafe { sys::cuDeviceGetAttribute(&mut v, a, dev) };
    v
}

impl Gpu {
    fn open(ordinal: usize) -> Result<Gpu> {
        use sys::CUdevice_attribute as A;
        let mut dev: sys::CUdevice = 0;
        let mut ctx: sys::CUcontext = std::ptr::null_mut();
        let mut stream: sys::CUstream = std::ptr::null_mut();
        let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
        // SAFETY: driver calls with out-pointers to locals.
        unsafe {
            ck(sys::cuInit(0), "cuInit")?;
            ck(sys::cuDeviceGet(&mut dev, ordinal as i32), "cuDeviceGet")?;
            ck(
                sys::cuDevicePrimaryCtxRetain(&mut ctx, dev),
                "cuDevicePrimaryCtxRetain",
            )?;
            ck(sys::cuCtxSetCurrent(ctx), "cuCtxSetCurrent")?;
            // A non-blocking stream: it does not wait on the legacy default stream.
            ck(sys::cuStreamCreate(&mut stream, 1), "cuStreamCreate")?;
            ck(
                sys::cuDeviceGetDefaultMemPool(&mut pool, dev),
                "cuDeviceGetDefaultMemPool",
            )?;
            // Keep freed memory in the pool (PyTorch's caching allocator does the same);
            // `empty_cache` trims it.
            let mut keep: u64 = u64::MAX;
            ck(
                sys::cuMemPoolSetAttribute(
                    pool,
                    sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                    &mut keep as *mut u64 as *mut c_void,
                ),
                "cuMemPoolSetAttribute",
            )?;
        }
        let major = attr(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
        let minor = attr(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
        Ok(Gpu {
            ordinal,
            ctx,
            stream,
            pool,
            arch: format!("sm_{major}{minor}"),
            sm_count: attr(dev, A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT).max(1) as u32,
            modules: Mutex::new(HashMap::new()),
            functions: Mutex::new(HashMap::new()),
            blas: Mutex::new(None),
            staging: Mutex::new(None),
        })
    }

    pub fn device(&self) -> Device {
        Device::Cuda(self.ordinal)
    }

    /// Makes this device's context current on the calling thread.
    pub fn bind(&self) -> Result<()> {
        // SAFETY: a context we retained.
        ck(unsafe { sys::cuCtxSetCurrent(self.ctx) }, "cuCtxSetCurrent")
    }

    /// Waits for every op queued on the stream (`torch.cuda.synchronize`).
    pub fn synchronize(&self) -> Result<()> {
        self.bind()?;
        // SAFETY: our stream.
        let r = unsafe { sys::cuStreamSynchronize(self.stream) };
        ck(r, "synchronize (an earlier kernel may have failed)")
    }

    // ---- memory ----------------------------------------------------------------------------

    /// Device memory from the stream-ordered pool. On failure the pool's cache is returned to
    /// the driver and the allocation tried once more, as PyTorch does.
    pub fn alloc(&self, bytes: usize) -> Result<sys::CUdeviceptr> {
        if bytes == 0 {
            return Ok(0);
        }
        self.bind()?;
        let mut p: sys::CUdeviceptr = 0;
        // SAFETY: out-pointer to a local; our stream.
        let mut r = unsafe { sys::cuMemAllocAsync(&mut p, bytes, self.stream) };
        if r == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            self.empty_cache();
            r = unsafe { sys::cuMemAllocAsync(&mut p, bytes, self.stream) };
        }
        if r == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            let (free, total) = self.mem_info().unwrap_or((0, 0));
            return Err(Error::OutOfMemory {
                device: self.device(),
                requested: bytes as u64,
                requested_h: human_bytes(bytes as u64),
                free: format!(
                    "{} free of {} total; ",
                    human_bytes(free as u64),
                    human_bytes(total as u64)
                ),
                held: crate::memory::stats(&self.device()).allocated_bytes,
                hint: "free tensors you no longer need, call accel::memory::empty_cache, use \
                       smaller batches or f16/bf16, or check `accel mem` for other processes \
                       on this GPU"
                    .to_string(),
            });
        }
        ck(r, "cuMemAllocAsync")?;
        Ok(p)
    }

    /// Frees stream-ordered: the memory returns to the pool once queued work is done.
    pub fn free(&self, p: sys::CUdeviceptr) {
        if p != 0 && self.bind().is_ok() {
            // SAFETY: p came from alloc on this stream.
            unsafe { sys::cuMemFreeAsync(p, self.stream) };
        }
    }

    /// (free, total) bytes of the whole device, from the driver.
    pub fn mem_info(&self) -> Result<(usize, usize)> {
        self.bind()?;
        let (mut f, mut t) = (0usize, 0usize);
        // SAFETY: out-pointers to locals.
        ck(
            unsafe { sys::cuMemGetInfo_v2(&mut f, &mut t) },
            "cuMemGetInfo",
        )?;
        Ok((f, t))
    }

    fn pool_attr(&self, a: sys::CUmemPool_attribute) -> u64 {
        let mut v: u64 = 0;
        // SAFETY: these attributes are 64-bit values.
        unsafe { sys::cuMemPoolGetAttribute(self.pool, a, &mut v as *mut u64 as *mut c_void) };
        v
    }

    /// Bytes the pool holds beyond live allocations.
    pub fn cached_bytes(&self) -> u64 {
        use sys::CUmemPool_attribute as P;
        let reserved = self.pool_attr(P::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
        let used = self.pool_attr(P::CU_MEMPOOL_ATTR_USED_MEM_CURRENT);
        reserved.saturating_sub(used)
    }

    /// Returns the pool's unused memory to the driver.
    pub fn empty_cache(&self) {
        if self.synchronize().is_ok() {
            // SAFETY: our pool.
            unsafe { sys::cuMemPoolTrimTo(self.pool, 0) };
        }
    }

    // ---- kernels ---------------------------------------------------------------------------

    fn module(&self, family: Family) -> Result<sys::CUmodule> {
        let mut m = self.modules.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(x) = m.get(&family) {
            return Ok(*x);
        }
        let cubin = kernels::cubin(family, &self.arch).map_err(|e| Error::DeviceUnavailable {
            device: self.device(),
            reason: e,
            hint: "accel compiles its kernels with NVRTC: `pip install nvidia-cuda-nvrtc` or \
                   set ACCEL_CUDA_LIB_DIR to a folder holding libnvrtc.so.13"
                .to_string(),
            available: String::new(),
        })?;
        self.bind()?;
        let mut module: sys::CUmodule = std::ptr::null_mut();
        // SAFETY: a CUBIN image that lives through the call.
        let load = |image: &[u8], module: &mut sys::CUmodule| unsafe {
            sys::cuModuleLoadData(module, image.as_ptr() as *const c_void)
        };
        let mut r = load(&cubin, &mut module);
        if r != sys::CUresult::CUDA_SUCCESS {
            // A damaged cache file: compile afresh once.
            let fresh = kernels::compile(&family.source(), family.name(), &self.arch)
                .map_err(Error::System)?;
            kernels::store(family, &self.arch, &fresh);
            r = load(&fresh, &mut module);
        }
        ck(
            r,
            &format!("loading the {} kernels for {}", family.name(), self.arch),
        )?;
        m.insert(family, module);
        Ok(module)
    }

    fn function(&self, family: Family, name: &str) -> Result<sys::CUfunction> {
        if let Some(&f) = self
            .functions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
        {
            return Ok(f as sys::CUfunction);
        }
        let module = self.module(family)?;
        let c = CString::new(name).map_err(|e| Error::System(e.to_string()))?;
        let mut f: sys::CUfunction = std::ptr::null_mut();
        // SAFETY: a loaded module and a C string.
        ck(
            unsafe { sys::cuModuleGetFunction(&mut f, module, c.as_ptr()) },
            &format!("finding kernel {name}"),
        )?;
        self.functions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_string(), f as usize);
        Ok(f)
    }

    /// Queues kernel `name` of `family`. `args` point at each argument's value.
    pub fn launch(
        &self,
        family: Family,
        name: &str,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        args: &mut [*mut c_void],
    ) -> Result<()> {
        self.bind()?;
        let f = self.function(family, name)?;
        // SAFETY: the caller passes arguments matching the kernel's C signature.
        let r = unsafe {
            sys::cuLaunchKernel(
                f,
                grid.0,
                grid.1,
                grid.2,
                block.0,
                block.1,
                block.2,
                0,
                self.stream,
                args.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        ck(r, &format!("launching {name}"))
    }

    /// Blocks for a grid-stride loop over `n` items: enough to fill every SM, no more.
    pub fn grid_for(&self, n: usize) -> u32 {
        let want = n.div_ceil(kernels::BLOCK as usize).max(1);
        want.min(self.sm_count as usize * 32) as u32
    }

    // ---- cuBLAS ----------------------------------------------------------------------------

    /// The cuBLAS handle, bound to our stream, created on first use.
    pub fn blas(&self) -> Result<cudarc::cublas::sys::cublasHandle_t> {
        let mut b = self.blas.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(h) = *b {
            return Ok(h as cudarc::cublas::sys::cublasHandle_t);
        }
        let lib = super::libs::library("cublas");
        if !lib.is_some_and(|l| l.is_loaded()) {
            let l = lib.cloned();
            return Err(Error::DeviceUnavailable {
                device: self.device(),
                reason: l
                    .as_ref()
                    .and_then(|l| l.problem.clone())
                    .unwrap_or_else(|| "cuBLAS was not found".into()),
                hint: l.and_then(|l| l.hint).unwrap_or_default(),
                available: String::new(),
            });
        }
        self.bind()?;
        let h = cudarc::cublas::result::create_handle()
            .map_err(|e| Error::System(format!("cublasCreate failed: {e:?}")))?;
        // SAFETY: a fresh handle and our stream (the two bindings name the same C type).
        unsafe { cudarc::cublas::result::set_stream(h, self.stream as *mut _) }
            .map_err(|e| Error::System(format!("cublasSetStream failed: {e:?}")))?;
        *b = Some(h as usize);
        Ok(h)
    }

    // ---- copies ----------------------------------------------------------------------------

    fn with_staging<R>(&self, f: impl FnOnce(&Staging) -> Result<R>) -> Result<R> {
        let mut s = self.staging.lock().unwrap_or_else(|e| e.into_inner());
        if s.is_none() {
            self.bind()?;
            let mut bufs = [std::ptr::null_mut::<u8>(); 2];
            let mut events = [std::ptr::null_mut(); 2];
            for i in 0..2 {
                let mut p: *mut c_void = std::ptr::null_mut();
                // SAFETY: out-pointers to locals.
                unsafe {
                    ck(
                        sys::cuMemHostAlloc(&mut p, STAGE_BYTES, 0),
                        "cuMemHostAlloc (pinned staging)",
                    )?;
                    ck(
                        sys::cuEventCreate(&mut events[i], 2), // CU_EVENT_DISABLE_TIMING
                        "cuEventCreate",
                    )?;
                    ck(sys::cuEventRecord(events[i], self.stream), "cuEventRecord")?;
                }
                bufs[i] = p as *mut u8;
            }
            *s = Some(Staging { bufs, events });
        }
        f(s.as_ref().expect("set above"))
    }

    /// Copies host bytes to device memory. Large copies go through two pinned buffers: the CPU
    /// fills one while the copy engine drains the other.
    pub fn htod(&self, dst: sys::CUdeviceptr, src: &[u8]) -> Result<()> {
        if src.is_empty() {
            return Ok(());
        }
        self.bind()?;
        let pinned = super::pinned::contains(src.as_ptr(), src.len());
        if pinned || src.len() < STAGE_ABOVE {
            // One DMA from pinned memory. From pageable memory the call returns once the
            // driver has staged the source; from pinned memory it does not, so wait: the
            // caller may free the source at once.
            // SAFETY: the source stays borrowed until the call (and the wait) returns.
            let r = unsafe {
                sys::cuMemcpyHtoDAsync_v2(
                    dst,
                    src.as_ptr() as *const c_void,
                    src.len(),
                    self.stream,
                )
            };
            ck(r, "copy to device")?;
            return if pinned { self.synchronize() } else { Ok(()) };
        }
        self.with_staging(|st| {
            for (i, chunk) in src.chunks(STAGE_BYTES).enumerate() {
                let b = i % 2;
                // SAFETY: the event marks the end of the last copy out of this buffer.
                unsafe {
                    ck(sys::cuEventSynchronize(st.events[b]), "staging wait")?;
                    let stage = std::slice::from_raw_parts_mut(st.bufs[b], chunk.len());
                    par_copy(stage, chunk);
                    ck(
                        sys::cuMemcpyHtoDAsync_v2(
                            dst + (i * STAGE_BYTES) as u64,
                            st.bufs[b] as *const c_void,
                            chunk.len(),
                            self.stream,
                        ),
                        "copy to device",
                    )?;
                    ck(
                        sys::cuEventRecord(st.events[b], self.stream),
                        "cuEventRecord",
                    )?;
                }
            }
            Ok(())
        })
    }

    /// Copies device memory to the host and waits for it (`x.cpu()` is synchronous).
    pub fn dtoh(&self, dst: &mut [u8], src: sys::CUdeviceptr) -> Result<()> {
        if dst.is_empty() {
            return Ok(());
        }
        self.bind()?;
        if dst.len() < STAGE_ABOVE || super::pinned::contains(dst.as_ptr(), dst.len()) {
            // Small, or pinned (one DMA, no staging).
            // SAFETY: dst is valid for its length; we wait before returning.
            unsafe {
                ck(
                    sys::cuMemcpyDtoHAsync_v2(
                        dst.as_mut_ptr() as *mut c_void,
                        src,
                        dst.len(),
                        self.stream,
                    ),
                    "copy to host",
                )?;
            }
            return self.synchronize();
        }
        self.with_staging(|st| {
            let total = dst.len();
            let n = total.div_ceil(STAGE_BYTES);
            let issue = |i: usize| -> Result<()> {
                let b = i % 2;
                let len = STAGE_BYTES.min(total - i * STAGE_BYTES);
                // SAFETY: the buffer's previous contents were consumed (copied out) already.
                unsafe {
                    ck(
                        sys::cuMemcpyDtoHAsync_v2(
                            st.bufs[b] as *mut c_void,
                            src + (i * STAGE_BYTES) as u64,
                            len,
                            self.stream,
                        ),
                        "copy to host",
                    )?;
                    ck(
                        sys::cuEventRecord(st.events[b], self.stream),
                        "cuEventRecord",
                    )
                }
            };
            issue(0)?;
            for (i, out) in dst.chunks_mut(STAGE_BYTES).enumerate() {
                if i + 1 < n {
                    issue(i + 1)?;
                }
                let b = i % 2;
                // SAFETY: after the event, the pinned buffer holds chunk i.
                unsafe {
                    ck(sys::cuEventSynchronize(st.events[b]), "staging wait")?;
                    let stage = std::slice::from_raw_parts(st.bufs[b], out.len());
                    par_copy(out, stage);
                }
            }
            Ok(())
        })
    }

    /// Copies between two devices' memory (or within one), queued on this device's stream.
    pub fn dtod(
        &self,
        dst: sys::CUdeviceptr,
        src_gpu: &Gpu,
        src: sys::CUdeviceptr,
        bytes: usize,
    ) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        // The source's pending work must finish before the copy reads it.
        if src_gpu.ordinal != self.ordinal {
            src_gpu.synchronize()?;
        }
        self.bind()?;
        // SAFETY: both ranges are live allocations of at least `bytes`.
        let r = unsafe {
            if src_gpu.ordinal == self.ordinal {
                sys::cuMemcpyDtoDAsync_v2(dst, src, bytes, self.stream)
            } else {
                sys::cuMemcpyPeerAsync(dst, self.ctx, src, src_gpu.ctx, bytes, self.stream)
            }
        };
        ck(r, "device-to-device copy")?;
        if src_gpu.ordinal != self.ordinal {
            // The source is freed on its own stream, which does not wait for ours: finish the
            // copy before the caller may drop it.
            self.synchronize()?;
        }
        Ok(())
    }

    // ---- timing ----------------------------------------------------------------------------

    /// Records an event with timing on the stream.
    pub fn record_timing_event(&self) -> Result<TimingEvent> {
        self.bind()?;
        let mut e: sys::CUevent = std::ptr::null_mut();
        // SAFETY: out-pointer; our stream.
        unsafe {
            ck(sys::cuEventCreate(&mut e, 0), "cuEventCreate")?;
            ck(sys::cuEventRecord(e, self.stream), "cuEventRecord")?;
        }
        Ok(TimingEvent(e))
    }
}

/// A CUDA event recorded with timing enabled.
pub(crate) struct TimingEvent(sys::CUevent);

impl TimingEvent {
    /// Seconds between two recorded events (waits for the later one).
    pub fn elapsed_since(&self, start: &TimingEvent) -> Result<f64> {
        let mut ms = 0f32;
        // SAFETY: two recorded events of one context.
        unsafe {
            ck(sys::cuEventSynchronize(self.0), "cuEventSynchronize")?;
            ck(
                sys::cuEventElapsedTime_v2(&mut ms, start.0, self.0),
                "cuEventElapsedTime",
            )?;
        }
        Ok(ms as f64 / 1e3)
    }
}

impl Drop for TimingEvent {
    fn drop(&mut self) {
        // SAFETY: created by cuEventCreate.
        unsafe { sys::cuEventDestroy_v2(self.0) };
    }
}
