//! Which host memory is page-locked: every pinned block (`pinned.rs`), live or cached, by
//! address. `context.rs` asks it to copy pinned memory in one DMA, without staging.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// Every pinned block, live or cached: start address -> length in bytes.
static BLOCKS: Mutex<BTreeMap<usize, usize>> = Mutex::new(BTreeMap::new());

fn blocks() -> std::sync::MutexGuard<'static, BTreeMap<usize, usize>> {
    BLOCKS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether `len` bytes at `p` lie inside one pinned block.
pub(crate) fn contains(p: *const u8, len: usize) -> bool {
    let p = p as usize;
    blocks()
        .range(..=p)
        .next_back()
        .is_some_and(|(&start, &n)| p + len <= start + n)
}

/// Records a new pinned block of `bytes` at `p`.
pub(super) fn insert(p: usize, bytes: usize) {
    blocks().insert(p, bytes);
}

/// Forgets the block at `p` (about to be freed); its length, 0 if it was not one.
pub(super) fn remove(p: usize) -> usize {
    blocks().remove(&p).unwrap_or(0)
}
