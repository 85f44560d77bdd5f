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
/// Implementors must be plain numbers (no padding, no drop glue, no pointers) for which every
/// bit pattern, all-zero bytes included, is a valid, initialised value. `output` hands out
/// zeroed memory and recycled buffers of another element type with the same `Layout` as
/// values of `Self`, and `CpuStorage::as_bytes_mut` lets devices write arbitrary bytes into
/// them; both rely on this.
pub(crate) unsafe trait ZeroBits: Copy {}
// SAFETY: f32, f64, i32 and i64 are primitive numbers: no padding, every bit pattern valid.
unsafe impl ZeroBits for f32 {}
// SAFETY: as for f32.
unsafe impl ZeroBits for f64 {}
// SAFETY: as for f32.
unsafe impl ZeroBits for i32 {}
// SAFETY: as for f32.
unsafe impl ZeroBits for i64 {}
// SAFETY: half::f16 is #[repr(transparent)] over u16: every bit pattern is some f16 (NaNs
// included).
unsafe impl ZeroBits for half::f16 {}
// SAFETY: half::bf16 is #[repr(transparent)] over u16, as f16.
unsafe impl ZeroBits for half::bf16 {}

/// Buffers from this size up are cached when freed. From 64 KiB, not 1 MiB: a product of f32
/// N=256 on two threads (a 256 KiB result) ran 1.09x faster (1.08-1.10, 8 interleaved rounds,
/// Emerald Rapids VM) with its result taken from the cache. `alloc_zeroed` zeroed a reused
/// heap block on the caller's core (`memset`, 3.6% of the profile), pulling the lines the
/// helper thread had written back from its core, and the helper then pulled them back again.
/// A cached block keeps each thread's lines in that thread's cache.
const CACHE_FROM_BYTES: usize = 64 << 10;
/// The most the cache keeps; the oldest blocks are freed beyond it.
const CACHE_LIMIT_BYTES: usize = 1 << 30;
/// The most blocks it keeps (each `output` looks through them): the oldest are freed beyond.
const CACHE_LIMIT_BLOCKS: usize = 256;

/// A freed allocation: what `Vec<T>` held, with the layout it was allocated with.
struct Block {
    ptr: *mut u8,
    layout: Layout,
}
// SAFETY: a Block is an owned, unaliased heap allocation (the Vec it came from was forgotten
// in `recycle`), reachable only through the CACHE mutex; moving it to another thread moves
// that ownership, and the global allocator may free it from any thread.
unsafe impl Send for Block {}

static CACHE: Mutex<Vec<Block>> = Mutex::new(Vec::new());

fn cache() -> std::sync::MutexGuard<'static, Vec<Block>> {
    CACHE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Bytes held in the cache.
pub(crate) fn cached_bytes() -> u64 {
    cache().iter().map(|b| b.layout.size() as u64).sum()
}

/// Blocks held in the cache.
#[cfg(test)]
fn cached_blocks() -> usize {
    cache().len()
}

/// Frees every cached block.
pub(crate) fn empty_cache() {
    let blocks = std::mem::take(&mut *cache());
    for b in blocks {
        // SAFETY: every Block is made only in `recycle`, from a Vec's own allocation (global
        // allocator, `b.layout` = Layout::array::<T>(capacity), the layout Vec allocated
        // with); `recycle` forgot that Vec and `mem::take` removed the block from the cache,
        // so this is the only owner and nothing else can still use or free the pointer.
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
    while total > CACHE_LIMIT_BYTES || c.len() > CACHE_LIMIT_BLOCKS {
        let b = c.remove(0);
        total -= b.layout.size();
        // SAFETY: as in `empty_cache`: the block came from a forgotten Vec pushed above (or
        // earlier) with its allocation layout, and `c.remove(0)` took the cache's only
        // reference to it, under the CACHE lock.
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
            // SAFETY: `recycle` caches only Vecs with len == capacity (fully initialised) and
            // records Layout::array::<U>(capacity) of their element type U; `b.layout ==
            // layout` (= Layout::array::<T>(n)) means same byte size and same alignment, so
            // the allocation fits exactly n elements of T with T's alignment, as
            // Vec::from_raw_parts requires. The bytes are initialised and every bit pattern
            // is a valid T (ZeroBits). `swap_remove` took the only reference out of the cache.
            return unsafe { Vec::from_raw_parts(b.ptr.cast::<T>(), n, n) };
        }
    }
    // SAFETY: layout.size() != 0 (checked above), as alloc_zeroed requires; a null return is
    // diverted to handle_alloc_error before use. The pointer comes from the global allocator
    // with Layout::array::<T>(n), exactly what Vec<T> with capacity n deallocates with, and
    // its n elements are zero bytes, which are valid values of T (ZeroBits). The madvise in
    // `hint_huge_pages` stays inside this allocation and does not change its contents.
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
        // SAFETY: [start, end) is rounded inwards to whole pages of [p, p + len), the live
        // allocation `output` made just above and still owns; MADV_HUGEPAGE only changes how
        // the kernel backs those pages, never their contents (unlike MADV_DONTNEED/FREE).
        // Failure (THP disabled) only loses the speed-up.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn hint_huge_pages(_p: *mut u8, _len: usize) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freed_buffers_from_64_kib_come_back_and_the_cache_keeps_at_most_its_blocks() {
        // Odd sizes no other test of this process asks for, so that none takes our blocks.
        let n = (CACHE_FROM_BYTES + 7 * 4096 + 8) / 8;
        let mut v = output::<f64>(n);
        v[n - 1] = 2.5;
        let p = v.as_ptr();
        recycle(v);
        let again = output::<f64>(n);
        assert_eq!(
            again.as_ptr(),
            p,
            "a freed block of {} bytes was not reused",
            n * 8
        );
        assert_eq!(again[n - 1], 2.5, "a reused block holds what it held");
        recycle(again);
        // Below the threshold nothing is kept: the block goes back to the allocator.
        let n_small = CACHE_FROM_BYTES / 4 - 1;
        recycle(output::<f32>(n_small));
        let small = Layout::array::<f32>(n_small).unwrap();
        assert!(
            cache().iter().all(|b| b.layout != small),
            "a block below 64 KiB was cached"
        );
        // Many freed blocks: the oldest go, the count stays bounded.
        for i in 0..CACHE_LIMIT_BLOCKS + 40 {
            recycle(output::<f32>(CACHE_FROM_BYTES / 4 + 17 + i));
        }
        assert!(
            cached_blocks() <= CACHE_LIMIT_BLOCKS,
            "{} blocks",
            cached_blocks()
        );
    }
}
