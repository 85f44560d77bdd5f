//! Output buffers for CPU kernels: a caching allocator for large buffers, and huge pages.
//!
//! Like PyTorch's CUDA allocator, freed large buffers are kept (up to `CACHE_LIMIT_BYTES`) and
//! handed to the next request of the same size, so a loop of same-shaped ops touches no new
//! memory; `memory::stats` reports them as reserved and `memory::empty_cache` returns them.
//! Fresh large buffers are asked to be backed by transparent huge pages (`madvise(MADV_HUGEPAGE)`)
//! before anything touches them: a freshly allocated 40 MB result otherwise costs ten thousand
//! 4 KiB page faults, which take longer than adding two vectors of that size. NumPy does the
//! same for its arrays.

use std::alloc::Layout;
use std::sync::Mutex;

/// Buffers from this size up get the huge-page hint.
const HUGE_FROM_BYTES: usize = 4 << 20;

/// Plain numbers: every bit pattern is a valid value, and all-zero bytes are zero.
///
/// # Safety
/// Implementors must be plain numbers for which every bit pattern is valid.
pub(crate) unsafe trait ZeroBits: Copy {}
unsafe impl ZeroBits for f32 {}
unsafe impl ZeroBits for f64 {}
unsafe impl ZeroBits for i32 {}
unsafe impl ZeroBits for i64 {}
unsafe impl ZeroBits for half::f16 {}
unsafe impl ZeroBits for half::bf16 {}

/// Buffers from this size up are cached when freed.
const CACHE_FROM_BYTES: usize = 1 << 20;
/// The most the cache keeps; the oldest blocks are freed beyond it.
const CACHE_LIMIT_BYTES: usize = 1 << 30;

/// A freed allocation: what `Vec<T>` held, with the layout it was allocated with.
struct Block {
    ptr: *mut u8,
    layout: Layout,
}
// SAFETY: a cached block is owned by the cache alone.
unsafe impl Send for Block {}

static CACHE: Mutex<Vec<Block>> = Mutex::new(Vec::new());

fn cache() -> std::sync::MutexGuard<'static, Vec<Block>> {
    CACHE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Bytes held in the cache.
pub(crate) fn cached_bytes() -> u64 {
    cache().iter().map(|b| b.layout.size() as u64).sum()
}

/// Frees every cached block.
pub(crate) fn empty_cache() {
    let blocks = std::mem::take(&mut *cache());
    for b in blocks {
        // SAFETY: the block came from the global allocator with this layout and nobody uses it.
        unsafe { std::alloc::dealloc(b.ptr, b.layout) };
    }
}

/// Takes back a freed vector: large ones go to the cache, others to the allocator.
pub(crate) fn recycle<T: ZeroBits>(v: Vec<T>) {
    let Ok(layout) = Layout::array::<T>(v.capacity()) else {
        return;
    };
    // Only fully initialised buffers may be handed out again as `Vec`s of values.
    if layout.size() < CACHE_FROM_BYTES || v.len() != v.capacity() {
        return;
    }
    let mut v = std::mem::ManuallyDrop::new(v);
    let mut c = cache();
    c.push(Block {
        ptr: v.as_mut_ptr().cast(),
        layout,
    });
    let mut total: usize = c.iter().map(|b| b.layout.size()).sum();
    while total > CACHE_LIMIT_BYTES {
        let b = c.remove(0);
        total -= b.layout.size();
        // SAFETY: as in empty_cache.
        unsafe { std::alloc::dealloc(b.ptr, b.layout) };
    }
}

/// A buffer of `n` elements whose values are unspecified (zeros, or what a freed buffer of
/// the same size held): the caller overwrites every element. Large buffers come from the
/// cache when one fits exactly, else from memory the OS hands over already zeroed, with the
/// huge-page hint.
pub(crate) fn output<T: ZeroBits>(n: usize) -> Vec<T> {
    let Ok(layout) = Layout::array::<T>(n) else {
        // Callers check sizes against memory first; an impossible size is a bug.
        panic!("buffer of {n} elements overflows the address space");
    };
    if layout.size() == 0 {
        return Vec::new();
    }
    if layout.size() >= CACHE_FROM_BYTES {
        let mut c = cache();
        if let Some(i) = c.iter().rposition(|b| b.layout == layout) {
            let b = c.swap_remove(i);
            // SAFETY: the block was a fully initialised Vec allocation with this exact layout;
            // every bit pattern is a valid value of a ZeroBits type.
            return unsafe { Vec::from_raw_parts(b.ptr.cast::<T>(), n, n) };
        }
    }
    // SAFETY: the layout is non-zero; the pointer comes from the global allocator with the
    // layout Vec will free it with; all-zero bytes are valid values of T (ZeroBits).
    unsafe {
        let p = std::alloc::alloc_zeroed(layout);
        if p.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        hint_huge_pages(p, layout.size());
        Vec::from_raw_parts(p.cast::<T>(), n, n)
    }
}

#[cfg(target_os = "linux")]
fn hint_huge_pages(p: *mut u8, len: usize) {
    if len < HUGE_FROM_BYTES {
        return;
    }
    // madvise needs a page-aligned start; advise the whole pages inside the buffer.
    let page = 4096usize;
    let start = (p as usize).next_multiple_of(page);
    let end = (p as usize + len) & !(page - 1);
    if end > start {
        // SAFETY: the range lies inside a live allocation; the advice changes no contents.
        // Failure (THP disabled) only loses the speed-up.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn hint_huge_pages(_p: *mut u8, _len: usize) {}
