//! Page-locked ("pinned") host memory, PyTorch's `pin_memory()`.
//!
//! The GPU's copy engines read and write pinned memory directly. Copies from pageable memory
//! go through a staging buffer instead (accel's own two pinned buffers from 4 MiB up, the
//! driver's below), which costs one extra host memcpy. A pinned tensor is CPU data in memory
//! from `cuMemHostAlloc` (portable: pinned for every context); `CudaContext::htod`/`dtoh` see (`locked::contains`) that a copy's host
//! side lies in such a block and copies it in one DMA, without staging.
//!
//! Page-locking memory is slow (the OS pins every page: tens of ms for 1 GiB), so freed
//! blocks are cached and handed to the next request of the same size, as PyTorch's caching
//! host allocator does; `memory::empty_cache(&Device::Cpu)` gives them back.

use std::ffi::c_void;
use std::sync::Mutex;

use cudarc::driver::sys;

use super::context::ck;
use super::failures::record_free_failure;
use super::locked;
use crate::base::dtype::CpuStorage;
use crate::{DType, Result};

/// Freed blocks kept for reuse: (address, bytes, the device whose context made them).
static CACHE: Mutex<Vec<(usize, usize, usize)>> = Mutex::new(Vec::new());

/// The most the cache keeps; the oldest blocks are freed beyond it.
const CACHE_LIMIT_BYTES: usize = 4 << 30;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Bytes of pinned memory cached for reuse.
pub(crate) fn cached_bytes() -> u64 {
    lock(&CACHE).iter().map(|&(_, b, _)| b as u64).sum()
}

/// Frees every cached block.
pub(crate) fn empty_cache() {
    let blocks = std::mem::take(&mut *lock(&CACHE));
    for (p, _, device) in blocks {
        free(p, device);
    }
}

/// Gives a block back to the driver, through its device's context.
fn free(p: usize, device: usize) {
    let bytes = locked::remove(p);
    if let Some(g) = super::context::opened(device) {
        // A thread that never used CUDA has no current context; cuMemFreeHost needs one.
        let _ = g.bind();
    }
    // SAFETY: `p` is a block start that `PinnedBlock::alloc` got from cuMemHostAlloc (only
    // those enter CACHE), taken out of CACHE by the caller (`empty_cache` or
    // `PinnedBlock::drop`), so no PinnedBlock and hence no pinned tensor's vector uses it, and
    // it is freed once. Removing it from BLOCKS first means `contains` no longer treats it as
    // pinned. A failure leaves the memory pinned until the process ends: counted, since a
    // drop cannot return it.
    let r = unsafe { sys::cuMemFreeHost(p as *mut c_void) };
    if let Err(e) = ck(r, "cuMemFreeHost") {
        record_free_failure(
            bytes as u64,
            format!("pinned host block of {bytes} bytes: {e}"),
        );
    }
}

/// One block of pinned host memory, given back to the cache on drop.
#[derive(Debug)]
pub(crate) struct PinnedBlock {
    ptr: *mut u8,
    bytes: usize,
    device: usize,
}

// SAFETY: the block is plain host memory owned by this value alone (taken out of CACHE or
// freshly allocated in `alloc`); cuMemFreeHost/the cache accept it from any thread (`free`
// binds the owning device's context first). Through `&PinnedBlock` only `storage` (unsafe,
// whose caller owns the aliasing) reads the pointer; writes need `&mut` (`bytes_mut`).
unsafe impl Send for PinnedBlock {}
// SAFETY: as for Send.
unsafe impl Sync for PinnedBlock {}

impl PinnedBlock {
    /// `bytes` (at least 1) of pinned memory: a cached block of that size, else a new one made
    /// through the context of `cuda:device`.
    pub fn alloc(device: usize, bytes: usize) -> Result<PinnedBlock> {
        let bytes = bytes.max(1);
        {
            let mut c = lock(&CACHE);
            if let Some(i) = c.iter().rposition(|&(_, b, _)| b == bytes) {
                let (p, _, device) = c.swap_remove(i);
                return Ok(PinnedBlock {
                    ptr: p as *mut u8,
                    bytes,
                    device,
                });
            }
        }
        let gpu = super::context::gpu(device)?;
        gpu.bind()?;
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: libcuda is loaded and initialised (`context::gpu` above returned a CudaContext, which
        // only `CudaContext::open` makes, after cuInit), its context is current (`bind` above), and
        // `p` is a local out-pointer; CU_MEMHOSTALLOC_PORTABLE = 1.
        let mut r = unsafe { sys::cuMemHostAlloc(&mut p, bytes, 1) };
        if r == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY && cached_bytes() > 0 {
            empty_cache();
            // SAFETY: as above (empty_cache may have bound another device's context, which
            // is fine: the allocation is portable).
            r = unsafe { sys::cuMemHostAlloc(&mut p, bytes, 1) };
        }
        if r == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            return Err(crate::Error::out_of_memory(
                crate::Device::Cpu,
                bytes as u64,
                crate::base::error::Room::Said(String::new()),
                "the driver could not page-lock that much host memory (pinned memory \
                 cannot be swapped out; the OS limits it): pin less, or copy from \
                 pageable memory",
            ));
        }
        ck(r, "cuMemHostAlloc (pin_memory)")?;
        // Initialised once, so every later `&mut [u8]` over the block (`bytes_mut`) is over
        // initialised bytes: the driver does not promise zeroed memory.
        // SAFETY: cuMemHostAlloc succeeded, so `p` is valid for writes of `bytes` bytes, and
        // nothing else refers to the new block yet.
        unsafe { std::ptr::write_bytes(p as *mut u8, 0, bytes) };
        locked::insert(p as usize, bytes);
        Ok(PinnedBlock {
            ptr: p as *mut u8,
            bytes,
            device,
        })
    }

    /// The block's bytes, to fill before [`PinnedBlock::storage`] puts a vector over them.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: `ptr` is non-null (cuMemHostAlloc succeeded in `alloc`, or it came from
        // CACHE, which holds only such blocks) and valid for `self.bytes` bytes (the size it
        // was allocated with; cached blocks are reused only for an equal size), owned by this
        // value and borrowed mutably, so no vector from `storage` can be alive over it (that
        // needs `&self` for as long as the vector lives: see `Buffer`'s `Drop`).
        // Its bytes are initialised: `alloc` zeroes every new block, and cached blocks keep
        // the bytes they were last given.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.bytes) }
    }

    /// A CPU storage of `len` elements of `dtype` over this block (which must hold them).
    ///
    /// # Safety
    /// - The first `len * dtype.size_in_bytes()` bytes of the block must be initialised (the
    ///   caller fills them through `bytes_mut` first, as `Tensor::pinned_copy` does).
    /// - The vector does not own its memory (it is not from the global allocator): it must be
    ///   let go with `CpuStorage::forget` before this block is dropped and must never be
    ///   dropped, recycled (`CpuStorage::release`), grown or shrunk, not even on a panic
    ///   path. `Buffer::drop` does this once `Buffer::pinned` holds the block.
    /// - No `&mut` to the block (`bytes_mut`) may be used while the vector is alive.
    pub unsafe fn storage(&self, dtype: DType, len: usize) -> CpuStorage {
        assert!(len
            .checked_mul(dtype.size_in_bytes())
            .is_some_and(|b| b <= self.bytes));
        macro_rules! vec_in {
            ($t:ty) => {
                // SAFETY: the pointer is non-null (see `bytes_mut`), and cuMemHostAlloc
                // returns page-aligned memory (not promised by the docs, but true of its
                // mmap-backed allocations), more than any element's alignment; the assert
                // above checks the block holds `len` elements, initialised by the caller
                // (# Safety) and valid for every bit pattern (ZeroBits types). The caller
                // keeps the vector from freeing or reallocating this foreign memory.
                // AUDIT: Vec::from_raw_parts documents memory from the global allocator as
                // a requirement, so this relies on the Vec never touching its allocator;
                // see the audit notes on panic safety in `Tensor::pinned_copy`.
                unsafe { Vec::from_raw_parts(self.ptr as *mut $t, len, len) }
            };
        }
        match dtype {
            DType::F16 => CpuStorage::F16(vec_in!(half::f16)),
            DType::BF16 => CpuStorage::BF16(vec_in!(half::bf16)),
            DType::F32 => CpuStorage::F32(vec_in!(f32)),
            DType::F64 => CpuStorage::F64(vec_in!(f64)),
            DType::I32 => CpuStorage::I32(vec_in!(i32)),
            DType::I64 => CpuStorage::I64(vec_in!(i64)),
        }
    }
}

impl Drop for PinnedBlock {
    fn drop(&mut self) {
        // No copy uses the block: copies to or from pinned memory finish before their call
        // returns. Keep it for the next request of this size.
        let mut c = lock(&CACHE);
        c.push((self.ptr as usize, self.bytes, self.device));
        let mut total: usize = c.iter().map(|&(_, b, _)| b).sum();
        let mut evicted = Vec::new();
        while total > CACHE_LIMIT_BYTES && !c.is_empty() {
            let (p, b, d) = c.remove(0);
            total -= b;
            evicted.push((p, d));
        }
        drop(c);
        for (p, d) in evicted {
            free(p, d);
        }
    }
}
