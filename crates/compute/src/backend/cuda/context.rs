//! One CUDA device in use: its primary context, the stream every op of accel is queued on,
//! the loaded kernel modules, the cuBLAS handle, the memory pool and the pinned staging
//! buffers. Created on first use of `cuda:N` and kept for the life of the process.
//!
//! We call the driver API through cudarc's dynamically loaded `sys` bindings, only after
//! [`crate::backend::native::libs`] has loaded `libcuda.so.1` (cudarc would panic if it were missing).

use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::sys;

pub(crate) use super::driver_error::{ck, err_name};
use super::kernel_cache;
use super::kernels::{self, Family, Kernel};
use crate::backend::ops::par_copy;
use crate::base::error::Room;
use crate::{Device, Error, Result};

/// Bytes staged per pinned buffer when copying between host and device.
const STAGE_BYTES: usize = 32 << 20;
/// Copies smaller than this go straight from pageable memory (the driver stages them).
const STAGE_ABOVE: usize = 4 << 20;

struct Staging {
    bufs: [*mut u8; 2],
    events: [sys::CUevent; 2],
}

pub(crate) struct CudaContext {
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

// SAFETY: the raw handles (primary context, stream, pool, modules, functions, cuBLAS handle)
// are process-wide driver objects that the driver API allows any thread to use once the
// context is current, and every method that needs a context calls `bind` first. The mutable
// parts (module/function maps, the cuBLAS handle slot, the staging buffers and events) are
// behind mutexes, and the staging buffers are used only while `staging` is locked
// (`with_staging`). The CudaContext is never dropped (kept in GPUS for the process), so no handle is
// destroyed while another thread uses it. cuBLAS allows one handle on several threads as
// long as its configuration is not changed concurrently: `blas` sets the stream once, under
// the `blas` mutex, before the handle is published.
unsafe impl Send for CudaContext {}
// SAFETY: as for Send.
unsafe impl Sync for CudaContext {}

impl std::fmt::Debug for CudaContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaContext(cuda:{}, {})", self.ordinal, self.arch)
    }
}

static GPUS: OnceLock<Mutex<HashMap<usize, Arc<CudaContext>>>> = OnceLock::new();

/// The `CudaContext` of ordinal `i` if something already used it (memory queries must not create
/// a context).
pub(crate) fn opened(i: usize) -> Option<Arc<CudaContext>> {
    let map = GPUS.get()?;
    let g = map.lock().unwrap_or_else(|e| e.into_inner());
    g.get(&i).cloned()
}

/// The `CudaContext` of ordinal `i`, created on first use.
pub(crate) fn gpu(i: usize) -> Result<Arc<CudaContext>> {
    let map = GPUS.get_or_init(|| Mutex::new(HashMap::new()));
    let mut g = map.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(x) = g.get(&i) {
        return Ok(x.clone());
    }
    let x = Arc::new(CudaContext::open(i)?);
    g.insert(i, x.clone());
    Ok(x)
}

/// Device attribute, or 0 when the driver does not know it.
pub(crate) fn attr(dev: sys::CUdevice, a: sys::CUdevice_attribute) -> i32 {
    let mut v = 0;
    // SAFETY: callers pass a CUdevice from cuDeviceGet (CudaContext::open, cuda::probe), so libcuda is
    // loaded and initialised; `v` is a local out-pointer. On error `v` keeps 0.
    unsafe { sys::cuDeviceGetAttribute(&mut v, a, dev) };
    v
}

impl CudaContext {
    fn open(ordinal: usize) -> Result<CudaContext> {
        use sys::CUdevice_attribute as A;
        let mut dev: sys::CUdevice = 0;
        let mut ctx: sys::CUcontext = std::ptr::null_mut();
        let mut stream: sys::CUstream = std::ptr::null_mut();
        let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
        // SAFETY: libcuda is loaded (the CUDA probe, `probe_driver`, checks `libs` found it
        // before any CudaContext exists, and `gpu()` calls backend::check first); every call gets
        // out-pointers to locals of the right types, each later call uses only handles the
        // earlier ones returned successfully (`?` stops at the first failure), and
        // CU_MEMPOOL_ATTR_RELEASE_THRESHOLD takes a cuuint64_t, which `keep` is.
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
        Ok(CudaContext {
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
        // SAFETY: `self.ctx` is the primary context CudaContext::open retained and never releases (the
        // CudaContext lives for the process in GPUS), so it is valid on every thread.
        ck(unsafe { sys::cuCtxSetCurrent(self.ctx) }, "cuCtxSetCurrent")
    }

    /// Waits for every op queued on the stream (`torch.cuda.synchronize`).
    pub fn synchronize(&self) -> Result<()> {
        self.bind()?;
        // SAFETY: `self.stream` was created by CudaContext::open in this context (bound just above)
        // and is never destroyed.
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
        // SAFETY: context bound above; `p` is a local out-pointer; `self.stream` lives for the
        // process (CudaContext::open). bytes > 0 (checked above).
        let mut r = unsafe { sys::cuMemAllocAsync(&mut p, bytes, self.stream) };
        if r == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            self.empty_cache();
            // SAFETY: as above.
            r = unsafe { sys::cuMemAllocAsync(&mut p, bytes, self.stream) };
        }
        if r == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            let (free, total) = self.mem_info().unwrap_or((0, 0));
            return Err(Error::out_of_memory(
                self.device(),
                bytes as u64,
                Room::Free {
                    free: free as u64,
                    total: total as u64,
                },
                "free tensors you no longer need, call accelkit::memory::empty_cache, use \
                 smaller batches or f16/bf16, or check `accel mem` for other processes \
                 on this GPU",
            ));
        }
        ck(r, "cuMemAllocAsync")?;
        Ok(p)
    }

    /// Frees `bytes` at `p` stream-ordered: the memory returns to the pool once queued work
    /// is done. A failure (no context on this thread, a driver error) is counted in
    /// `cuda::free_failures`, since a drop cannot return it.
    pub fn free(&self, p: sys::CUdeviceptr, bytes: usize) {
        if p == 0 {
            return;
        }
        if let Err(e) = self.bind() {
            super::failures::record_free_failure(
                bytes as u64,
                format!("cuda:{}: a free of {bytes} bytes: {e}", self.ordinal),
            );
            return;
        }
        // SAFETY: callers pass only pointers from `CudaContext::alloc` of this CudaContext (CudaStorage::drop,
        // the one owner of each allocation, calls this once); the free is ordered after
        // all work queued on `self.stream`, the only stream accel queues work on, so
        // kernels and copies still using `p` finish first. Cross-device readers synchronise
        // before returning (`dtod`).
        let r = unsafe { sys::cuMemFreeAsync(p, self.stream) };
        if let Err(e) = ck(r, "cuMemFreeAsync") {
            super::failures::record_free_failure(
                bytes as u64,
                format!("cuda:{}: a free of {bytes} bytes: {e}", self.ordinal),
            );
        }
    }

    /// (free, total) bytes of the whole device, from the driver.
    pub fn mem_info(&self) -> Result<(usize, usize)> {
        self.bind()?;
        let (mut f, mut t) = (0usize, 0usize);
        ck(
            // SAFETY: context bound above (cuMemGetInfo reports for the current context's
            // device); out-pointers to local usizes (size_t).
            unsafe { sys::cuMemGetInfo_v2(&mut f, &mut t) },
            "cuMemGetInfo",
        )?;
        Ok((f, t))
    }

    fn pool_attr(&self, a: sys::CUmemPool_attribute) -> u64 {
        let mut v: u64 = 0;
        // SAFETY: `self.pool` is the device's default pool from CudaContext::open (never destroyed);
        // callers pass only the RESERVED_MEM_CURRENT / USED_MEM_CURRENT attributes, which the
        // driver writes as a cuuint64_t, i.e. into the 8 bytes of the local `v`.
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
            // SAFETY: `self.pool` is the device's default pool (CudaContext::open); trimming releases
            // only memory not backing live allocations, so nothing in use is affected.
            unsafe { sys::cuMemPoolTrimTo(self.pool, 0) };
        }
    }

    // ---- kernels ---------------------------------------------------------------------------

    fn module(&self, family: Family) -> Result<sys::CUmodule> {
        let mut m = self.modules.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(x) = m.get(&family) {
            return Ok(*x);
        }
        let cubin =
            kernel_cache::cubin(family, &self.arch).map_err(|e| Error::DeviceUnavailable {
                device: self.device(),
                reason: e,
                hint: {
                    let m = crate::backend::native::libs::cuda_major().major;
                    let w = crate::backend::native::libs::wanted(m)
                        .iter()
                        .find(|w| w.name == crate::backend::native::libs::LibName::Nvrtc);
                    format!(
                        "accel compiles its kernels with NVRTC (this process uses CUDA {m}): \
                         `pip install {}` or set ACCEL_CUDA_LIB_DIR to a folder holding {}",
                        w.map_or("nvidia-cuda-nvrtc", |w| w.pip),
                        w.map_or("libnvrtc.so", |w| w.file)
                    )
                },
                available: Vec::new(),
            })?;
        self.bind()?;
        let mut module: sys::CUmodule = std::ptr::null_mut();
        // SAFETY: context bound above; `image` is a borrowed byte buffer alive for the call
        // (cuModuleLoadData copies it); `module` is a valid out-pointer. The driver parses the
        // image; a cached image is handed over only when its length and FNV-1a hash match
        // the header written with it (kernel_cache::unframe), so a truncated file is never read
        // past its end.
        let load = |image: &[u8], module: &mut sys::CUmodule| unsafe {
            sys::cuModuleLoadData(module, image.as_ptr() as *const c_void)
        };
        let mut r = load(&cubin, &mut module);
        if r != sys::CUresult::CUDA_SUCCESS {
            // A damaged cache file: compile afresh once.
            let fresh =
                kernels::compile(&family.source(), family.name(), &self.arch).map_err(|e| {
                    Error::backend(
                        crate::BackendKind::Cuda,
                        format!("NVRTC could not compile {}", family.name()),
                        e,
                    )
                })?;
            kernel_cache::store(family, &self.arch, &fresh);
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
        let c = CString::new(name).map_err(|e| Error::internal(format!("a kernel name: {e}")))?;
        let mut f: sys::CUfunction = std::ptr::null_mut();
        ck(
            // SAFETY: `module` was loaded by `self.module` in this context and is never
            // unloaded; `c` is a NUL-terminated CString alive for the call; `f` is a local
            // out-pointer.
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
    ///
    /// # Safety
    /// Each pointer in `args` must point at a live value of the type the kernel's C
    /// signature (kernels.rs) has at that position, and every device pointer and size among
    /// them must cover all the memory the kernel reads and writes for this grid: allocations
    /// of this GPU that stay alive until the kernel has run (stream-ordered frees do).
    pub unsafe fn launch(
        &self,
        kernel: Kernel,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        args: &mut [*mut c_void],
    ) -> Result<()> {
        self.bind()?;
        let f = self.function(kernel.family(), &kernel.name())?;
        // SAFETY: context bound above; `f` is a function of a module loaded in it; `args`
        // outlives the call (the driver copies the values during cuLaunchKernel). That each
        // pointer in `args` points at a value of the type the kernel's C signature expects,
        // and that every device pointer/size covers what the kernel touches, is this unsafe
        // fn's contract (# Safety), stated at each call in cuda/storage.rs.
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
        ck(r, &format!("launching {}", kernel.name()))
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
        let lib =
            crate::backend::native::libs::library(crate::backend::native::libs::LibName::Cublas);
        if !lib.is_some_and(|l| l.is_loaded()) {
            let l = lib.cloned();
            return Err(Error::DeviceUnavailable {
                device: self.device(),
                reason: l
                    .as_ref()
                    .and_then(|l| l.problem.clone())
                    .unwrap_or_else(|| "cuBLAS was not found".into()),
                hint: l.and_then(|l| l.hint).unwrap_or_default(),
                available: Vec::new(),
            });
        }
        self.bind()?;
        // cudarc opens cuBLAS by its own list of names: check it bound the file accel chose
        // (the chosen major's) before any cuBLAS function runs.
        // SAFETY: libcublas is loaded (checked above), so culib() finds it and does not
        // panic; the symbol is only looked up, never called here.
        let bound = unsafe {
            cudarc::cublas::sys::culib()
                .get::<*const c_void>("cublasGetProperty")
                .ok()
                .map(|s| *s)
        };
        if let Some(addr) = bound {
            crate::backend::native::libs::check_bound(
                crate::backend::native::libs::LibName::Cublas,
                addr,
            )
            .map_err(|e| Error::DeviceUnavailable {
                device: self.device(),
                reason: e,
                hint: "remove the other copy from the loader path, or point \
                           ACCEL_CUDA_LIB_DIR at the one to use"
                    .to_string(),
                available: Vec::new(),
            })?;
        }
        let h = cudarc::cublas::result::create_handle()
            .map_err(|e| Error::backend(crate::BackendKind::Cuda, "cublasCreate failed", e))?;
        // SAFETY: `h` was just created (no other thread has it: it is published only below,
        // under the `blas` lock) in this context; `self.stream` lives for the process; the
        // cublas and driver bindings' CUstream types are both pointers to the same C struct.
        unsafe { cudarc::cublas::result::set_stream(h, self.stream as *mut _) }
            .map_err(|e| Error::backend(crate::BackendKind::Cuda, "cublasSetStream failed", e))?;
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
                // SAFETY: context bound above; `p` and `events[i]` are local out-pointers;
                // the event is recorded on `self.stream` (CudaContext::open) only after it was created
                // (the `?` stops otherwise).
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
                    // Initialised once, so the `&mut [u8]` views of it below are over
                    // initialised bytes (the driver does not promise zeroed memory); `p` is
                    // valid for STAGE_BYTES bytes (cuMemHostAlloc succeeded above).
                    std::ptr::write_bytes(p as *mut u8, 0, STAGE_BYTES);
                }
                bufs[i] = p as *mut u8;
            }
            *s = Some(Staging { bufs, events });
        }
        f(s.as_ref().expect("set above"))
    }

    /// Copies host bytes to device memory. Large copies go through two pinned buffers: the CPU
    /// fills one while the copy engine drains the other.
    ///
    /// # Safety
    /// `dst` must be device memory of this GPU, alive and writable for `src.len()` bytes.
    pub unsafe fn htod(&self, dst: sys::CUdeviceptr, src: &[u8]) -> Result<()> {
        if src.is_empty() {
            return Ok(());
        }
        self.bind()?;
        let pinned = super::locked::contains(src.as_ptr(), src.len());
        if pinned || src.len() < STAGE_ABOVE {
            // One DMA from pinned memory. From pageable memory the call returns once the
            // driver has staged the source; from pinned memory it does not, so wait: the
            // caller may free the source at once.
            // SAFETY: `dst` must cover src.len() bytes of a live device allocation (the
            // callers pass CudaStorage::alloc'd memory of the same byte size, e.g.
            // CudaStorage::from_cpu); `src` is a live borrowed slice. The source must stay
            // valid until the DMA has read it: from pageable memory cuMemcpyHtoDAsync returns
            // only once the driver has staged it; from a pinned block (pinned::contains) the
            // DMA is asynchronous, so we `synchronize` before returning. AUDIT: memory pinned
            // by someone other than accel (cuMemHostRegister elsewhere) is not in BLOCKS and
            // would be treated as pageable.
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
                // SAFETY: the staging mutex is held (with_staging), so only this thread uses
                // bufs/events. `st.events[b]` was recorded after the last copy out of
                // bufs[b] (or at creation), so after cuEventSynchronize no DMA reads bufs[b]
                // and we may overwrite it. bufs[b] is a cuMemHostAlloc block of STAGE_BYTES
                // >= chunk.len() (chunks(STAGE_BYTES)). The async copy reads the staging
                // buffer, not `src`, so `src` may be freed on return; the event recorded
                // after it guards the next reuse. `dst + i*STAGE_BYTES .. + chunk.len()` lies
                // inside dst's src.len() bytes (caller's obligation, as above).
                // The buffer's bytes are initialised: zeroed when it was made (with_staging).
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
    ///
    /// # Safety
    /// `src` must be device memory of this GPU, alive and readable for `dst.len()` bytes.
    pub unsafe fn dtoh(&self, dst: &mut [u8], src: sys::CUdeviceptr) -> Result<()> {
        if dst.is_empty() {
            return Ok(());
        }
        self.bind()?;
        if dst.len() < STAGE_ABOVE || super::locked::contains(dst.as_ptr(), dst.len()) {
            // Small, or pinned (one DMA, no staging).
            // SAFETY: `dst` is a live &mut slice, valid for writes of dst.len() bytes and not
            // accessed by anyone else until we return, and we `synchronize` before returning
            // (also on the error path nothing was queued). `src` must cover dst.len() bytes of
            // live device memory: callers (CudaStorage::to_host) pass a dense view's address
            // with dst sized to that view (in bounds by Layout::check_in_bounds, which
            // Tensor::view and Tensor::from_storage run on every tensor).
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
                // SAFETY: staging mutex held (with_staging). Chunk i lands in bufs[i % 2]; the
                // loop below issues chunk i + 1 only after it has copied chunk i - 1 out of
                // that same buffer (par_copy of the previous iteration), so the DMA never
                // overwrites unread data. `len` <= STAGE_BYTES (buffer size) and
                // src + i * STAGE_BYTES + len <= src + total, inside the device range the
                // caller guarantees.
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
                // SAFETY: staging mutex held; events[b] was recorded right after chunk i's copy
                // into bufs[b] (issue(i)), so after cuEventSynchronize the DMA has written
                // out.len() <= STAGE_BYTES initialised bytes there, and chunk i + 2 (the next
                // write into bufs[b]) is issued only after this read.
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
    ///
    /// # Safety
    /// `dst` must be memory of this GPU writable for `bytes` bytes and `src` memory of
    /// `src_gpu` readable for `bytes` bytes, both alive until the copy has run.
    pub unsafe fn dtod(
        &self,
        dst: sys::CUdeviceptr,
        src_gpu: &CudaContext,
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
        // SAFETY: callers (CudaStorage::to_gpu) pass `src` = a dense view of a live
        // CudaStorage of src_gpu with `bytes` = its element count * dtype size (in bounds by
        // Layout::check_in_bounds, run by Tensor::view and Tensor::from_storage), and `dst` =
        // a fresh CudaStorage::alloc of that size; both stay alive until the copy is done: a
        // same-device copy is on the same stream as the stream-ordered free (CudaContext::free),
        // and a peer copy is waited for below before returning. This CudaContext's context is
        // bound; `src_gpu.ctx` is its retained context.
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
        // SAFETY: context bound above; `e` is a local out-pointer, recorded only after
        // cuEventCreate succeeded (`?`); `self.stream` lives for the process (CudaContext::open).
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
        // SAFETY: both are TimingEvents, which only `record_timing_event` makes: created with
        // timing enabled (flags 0) and recorded on a CudaContext's stream, alive while borrowed here.
        // AUDIT: nothing checks that `start` comes from the same context (device) as `self`;
        // the driver then returns an error (not UB).
        unsafe {
            ck(sys::cuEventSynchronize(self.0), "cuEventSynchronize")?;
            ck(elapsed_time(&mut ms, start.0, self.0), "cuEventElapsedTime")?;
        }
        Ok(ms as f64 / 1e3)
    }
}

impl Drop for TimingEvent {
    fn drop(&mut self) {
        // SAFETY: self.0 was created by cuEventCreate in `record_timing_event` and is
        // destroyed only here, once; the driver defers the release if the event is still
        // pending.
        unsafe { sys::cuEventDestroy_v2(self.0) };
    }
}

/// `cuEventElapsedTime`: the `_v2` symbol from driver 12.8 on (CUDA 13's header names it so),
/// the original before; both take the same arguments and, for two events recorded on one
/// stream, give the same answer. Looked up once.
///
/// # Safety
/// As for `cuEventElapsedTime`: `ms` is a valid out-pointer; both events are live.
unsafe fn elapsed_time(ms: *mut f32, start: sys::CUevent, end: sys::CUevent) -> sys::CUresult {
    type Elapsed = unsafe extern "C" fn(*mut f32, sys::CUevent, sys::CUevent) -> sys::CUresult;
    // The address as usize: raw pointers are not Sync.
    static V1: std::sync::OnceLock<Option<(bool, usize)>> = std::sync::OnceLock::new();
    let found = *V1.get_or_init(|| {
        use crate::backend::native::libs::driver_symbol;
        if driver_symbol("cuEventElapsedTime_v2").is_some() {
            Some((true, 0))
        } else {
            driver_symbol("cuEventElapsedTime").map(|p| (false, p as usize))
        }
    });
    match found {
        // SAFETY: forwarded from the caller; the `_v2` symbol exists (checked above), so
        // cudarc's lazy lookup of it does not panic.
        Some((true, _)) => unsafe { sys::cuEventElapsedTime_v2(ms, start, end) },
        // SAFETY: `p` is the non-null address of `cuEventElapsedTime` in the loaded libcuda
        // (never unloaded), whose C signature in every `cuda.h` up to 12.x is
        // `CUresult (float*, CUevent, CUevent)`, the type transmuted to; arguments forwarded.
        Some((false, p)) => unsafe {
            let f: Elapsed = std::mem::transmute::<usize, Elapsed>(p);
            f(ms, start, end)
        },
        None => sys::CUresult::CUDA_ERROR_NOT_FOUND,
    }
}
