//! Page-locked ("pinned") host memory, PyTorch's `pin_memory()`.
//!
//! The GPU's copy engines read and write pinned memory directly. Copies from pageable memory
//! go through a staging buffer instead (accel's own two pinned buffers from 4 MiB up, the
//! driver's below), which costs one extra host memcpy. A pinned tensor is CPU data in memory
//! from `cuMemHostAlloc` (portable: pinned for every context); `gpu.rs` sees that a copy's host
//! side lies in such a block and copies it in one DMA, without staging.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::Mutex;

use cudarc::driver::sys;

use super::gpu::ck;
use crate::backend::cpu::CpuStorage;
use crate::{DType, Result};

/// The live pinned blocks: start address -> length in bytes.
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

/// One block of pinned host memory, freed (`cuMemFreeHost`) on drop.
#[derive(Debug)]
pub(crate) struct PinnedBlock {
    ptr: *mut u8,
    bytes: usize,
}

// SAFETY: the block is plain host memory owned by this value.
unsafe impl Send for PinnedBlock {}
unsafe impl Sync for PinnedBlock {}

impl PinnedBlock {
    /// `bytes` (at least 1) of pinned memory, through the context of `cuda:device`.
    pub fn alloc(device: usize, bytes: usize) -> Result<PinnedBlock> {
        let gpu = super::gpu::gpu(device)?;
        gpu.bind()?;
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: out-pointer to a local; CU_MEMHOSTALLOC_PORTABLE = 1.
        let r = unsafe { sys::cuMemHostAlloc(&mut p, bytes.max(1), 1) };
        if r == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            return Err(crate::Error::OutOfMemory {
                device: crate::Device::Cpu,
                requested: bytes as u64,
                requested_h: crate::memory::human_bytes(bytes as u64),
                free: String::new(),
                held: 0,
                hint: "the driver could not page-lock that much host memory (pinned memory \
                       cannot be swapped out; the OS limits it): pin less, or copy from \
                       pageable memory"
                    .to_string(),
            });
        }
        ck(r, "cuMemHostAlloc (pin_memory)")?;
        blocks().insert(p as usize, bytes.max(1));
        Ok(PinnedBlock {
            ptr: p as *mut u8,
            bytes,
        })
    }

    /// A CPU storage of `len` elements of `dtype` in this block (which must hold them). The
    /// values are unspecified until written.
    ///
    /// # Safety
    /// The vector does not own its memory: it must be let go with `CpuStorage::forget` (never
    /// dropped, grown or shrunk) before this block is dropped.
    pub unsafe fn storage(&self, dtype: DType, len: usize) -> CpuStorage {
        assert!(len * dtype.size_in_bytes() <= self.bytes.max(1));
        macro_rules! vec_in {
            ($t:ty) => {
                // SAFETY: the block is page-aligned (more than any element's alignment) and
                // holds `len` elements; every bit pattern is a valid number. The caller keeps
                // the vector from freeing or reallocating foreign memory.
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
        blocks().remove(&(self.ptr as usize));
        // SAFETY: the block came from cuMemHostAlloc; no storage refers to it any more, and
        // no copy uses it (copies to or from pinned memory finish before their call returns).
        unsafe { sys::cuMemFreeHost(self.ptr as *mut c_void) };
    }
}
