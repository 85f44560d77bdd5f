//! Page-locked ("pinned") host memory, PyTorch's `pin_memory()`: `Backend::pinned_host` for
//! CUDA.
//!
//! The GPU's copy engines read and write pinned memory directly. Copies from pageable memory
//! go through a staging buffer instead (accel's own two pinned buffers from 4 MiB up, the
//! driver's below), which costs one extra host memcpy. A pinned tensor is an ordinary CPU
//! storage (a vector from the global allocator, freed like any other) a page-aligned window
//! of which `cuMemHostRegister` has page-locked (portable: for every context);
//! `CudaContext::htod`/`dtoh` see (`locked::contains`) that a copy's host side lies in such a
//! window and copy it in one DMA, without staging.
//!
//! Why a window: the driver locks whole pages, and a page may be locked once. The vector is
//! allocated a page longer than the window (rounded up to whole pages), and the window starts
//! at its first page boundary, so every locked page lies inside this vector alone and no
//! other allocation (another pinned tensor's, say) can share one ([`window`]).
//!
//! Page-locking memory is slow (the OS pins every page: tens of ms for 1 GiB), so storages
//! given back stay locked and are handed to the next request of the same dtype and length,
//! as PyTorch's caching host allocator does; `memory::empty_cache(&Device::Cpu)` unlocks and
//! frees them.

use std::ffi::c_void;
use std::sync::Mutex;

use cudarc::driver::sys;

use super::context::ck;
use super::failures::record_free_failure;
use super::locked;
use crate::backend::contract::{HostLock, PinnedHost};
use crate::base::dtype::CpuStorage;
use crate::{DType, Result};

/// A locked window: where it starts, its bytes, and the device whose context locked it.
#[derive(Debug)]
struct Lock {
    start: usize,
    bytes: usize,
    device: usize,
    /// The window's element offset in its storage, and its length in elements.
    offset: usize,
    len: usize,
}

/// Storages given back, still locked, kept for reuse (oldest first).
static CACHE: Mutex<Vec<(CpuStorage, Lock)>> = Mutex::new(Vec::new());

/// The most the cache keeps; the oldest storages are unlocked and freed beyond it.
const CACHE_LIMIT_BYTES: usize = 4 << 30;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Bytes of pinned memory cached for reuse.
pub(crate) fn cached_bytes() -> u64 {
    lock(&CACHE).iter().map(|(_, l)| l.bytes as u64).sum()
}

/// Unlocks and frees every cached storage.
pub(crate) fn empty_cache() {
    let kept = std::mem::take(&mut *lock(&CACHE));
    for (storage, l) in kept {
        unlock(storage, &l);
    }
}

/// The host's page size in bytes (4 KiB on x86-64; 64 KiB on some Arm servers).
fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions; it returns -1 for a name it does not know.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

/// Where the locked window of `len` elements of `size` bytes lies in a storage of `total`
/// elements whose first element is at address `addr`: (the window's first element, its bytes
/// rounded up to whole pages), when the window and its whole pages fit inside the storage.
/// [`elements_for`] says how long to make the storage so that they do.
pub(crate) fn window(
    addr: usize,
    size: usize,
    len: usize,
    total: usize,
    page: usize,
) -> Option<(usize, usize)> {
    let skip = (page - addr % page) % page;
    if !skip.is_multiple_of(size) {
        return None;
    }
    let bytes = (len.max(1) * size).div_ceil(page) * page;
    (skip + bytes <= total * size).then_some((skip / size, bytes))
}

/// The storage length for a window of `len` elements of `size` bytes: its whole pages, and
/// one page more, so that a page boundary lies in the first page whatever address the
/// allocator gives.
pub(crate) fn elements_for(size: usize, len: usize, page: usize) -> usize {
    ((len.max(1) * size).div_ceil(page) * page + page) / size
}

/// `n` elements of `dtype` page-locked through the context of `cuda:device`: a cached storage
/// of that dtype and length, else a new one.
pub(crate) fn pinned_host(device: usize, dtype: DType, n: usize) -> Result<PinnedHost> {
    let reuse = {
        let mut c = lock(&CACHE);
        c.iter()
            .rposition(|(s, l)| s.dtype() == dtype && l.len == n)
            .map(|i| c.remove(i))
    };
    if let Some((storage, l)) = reuse {
        let (offset, len) = (l.offset, l.len);
        return Ok(PinnedHost::new(storage, offset, len, Box::new(l)));
    }
    let size = dtype.size_in_bytes();
    let page = page_size();
    let total = elements_for(size, n, page);
    // Zeros, not recycled bytes: the window's padding is never read, but it is a tensor's
    // memory and holds no earlier tensor's data.
    let storage = CpuStorage::full(dtype, total, 0.0);
    let addr = storage.as_bytes().as_ptr() as usize;
    let Some((offset, bytes)) = window(addr, size, n, total, page) else {
        // Only an allocator that aligned the vector below its element size could do this.
        return Err(crate::Error::invalid(
            "pin_memory",
            format!("the host allocator gave a {dtype} buffer at {addr:#x}, not aligned to its elements"),
        ));
    };
    let start = addr + offset * size;
    let gpu = super::context::gpu(device)?;
    gpu.bind()?;
    // SAFETY: libcuda is loaded and initialised (`context::gpu` above returned a CudaContext,
    // which only `CudaContext::open` makes, after cuInit), its context is current (`bind`
    // above), and [start, start + bytes) lies inside `storage`'s live allocation (`window`
    // checked it), which stays allocated until `unlock` unregisters it: the storage travels
    // with its `Lock` (in the PinnedHost, the Buffer, or CACHE) and only `unlock` frees it.
    // CU_MEMHOSTREGISTER_PORTABLE = 1.
    let mut r = unsafe { sys::cuMemHostRegister_v2(start as *mut c_void, bytes, 1) };
    if r == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY && cached_bytes() > 0 {
        empty_cache();
        // SAFETY: as above (empty_cache may have bound another device's context, which is
        // fine: the registration is portable).
        r = unsafe { sys::cuMemHostRegister_v2(start as *mut c_void, bytes, 1) };
    }
    if r == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
        return Err(crate::Error::out_of_memory(
            crate::Device::Cpu,
            bytes as u64,
            crate::base::error::Room::Unknown,
            "the driver could not page-lock that much host memory (pinned memory cannot be \
             swapped out; the OS limits it): pin less, or copy from pageable memory",
        ));
    }
    ck(r, "cuMemHostRegister (pin_memory)")?;
    locked::insert(start, bytes);
    let l = Lock {
        start,
        bytes,
        device,
        offset,
        len: n,
    };
    Ok(PinnedHost::new(storage, offset, n, Box::new(l)))
}

impl HostLock for Lock {
    fn give_back(self: Box<Self>, storage: CpuStorage) {
        // No copy uses the window: copies to or from pinned memory finish before their call
        // returns. Keep it locked for the next request of this size.
        let mut c = lock(&CACHE);
        c.push((storage, *self));
        let mut total: usize = c.iter().map(|(_, l)| l.bytes).sum();
        let mut evicted = Vec::new();
        while total > CACHE_LIMIT_BYTES && !c.is_empty() {
            let (s, l) = c.remove(0);
            total -= l.bytes;
            evicted.push((s, l));
        }
        drop(c);
        for (s, l) in evicted {
            unlock(s, &l);
        }
    }
}

/// Unlocks the window, through its device's context, then frees the storage around it.
fn unlock(storage: CpuStorage, l: &Lock) {
    locked::remove(l.start);
    if let Some(g) = super::context::opened(l.device) {
        // A thread that never used CUDA has no current context; cuMemHostUnregister needs one.
        let _ = g.bind();
    }
    // SAFETY: `l.start` is a window that `pinned_host` registered (only those make a Lock),
    // inside `storage`, which is still allocated (it is freed below, after this call); the
    // Lock was taken out of CACHE or given back by its holder, so no tensor uses the storage
    // and it is unregistered once. Removing it from `locked` first means `contains` no longer
    // treats it as pinned.
    let r = unsafe { sys::cuMemHostUnregister(l.start as *mut c_void) };
    match ck(r, "cuMemHostUnregister") {
        Ok(()) => storage.release(),
        // Still locked: freeing it would hand locked pages back to the allocator. Kept until
        // the process ends, and counted, since a drop cannot return the error.
        Err(e) => {
            record_free_failure(
                l.bytes as u64,
                format!("pinned host memory of {} bytes: {e}", l.bytes),
            );
            std::mem::forget(storage);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_is_whole_pages_inside_the_storage_whatever_the_address() {
        for page in [4096usize, 65536] {
            for size in [2usize, 4, 8] {
                for len in [1usize, 3, 1000, 4096, 1 << 20] {
                    let total = elements_for(size, len, page);
                    // Every address the allocator could give for this element size.
                    for addr in (0..3 * page).step_by(size).map(|a| a + 10 * page) {
                        let (off, bytes) = window(addr, size, len, total, page).unwrap();
                        let start = addr + off * size;
                        assert_eq!(start % page, 0, "page {page} size {size} addr {addr:#x}");
                        assert_eq!(bytes % page, 0);
                        assert!(bytes >= len * size, "the window holds the elements");
                        assert!(
                            bytes < len * size + page,
                            "no more than one page of padding"
                        );
                        assert!(off + len <= total, "the elements lie in the storage");
                        assert!(
                            start + bytes <= addr + total * size,
                            "every locked page lies in the storage"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_window_that_does_not_fit_is_none() {
        // Too short a storage, and an address not aligned to the element size.
        assert_eq!(window(4096 + 8, 4, 1024, 1024, 4096), None);
        assert_eq!(
            window(4096 + 2, 4, 10, elements_for(4, 10, 4096), 4096),
            None
        );
        assert_eq!(window(8192, 4, 1024, 1024, 4096), Some((0, 4096)));
    }
}
