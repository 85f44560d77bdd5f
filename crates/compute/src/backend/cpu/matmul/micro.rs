//! The micro-kernels: one MR x NR tile of C from a packed micro-panel of A and of B. The
//! portable one in plain Rust; AVX2+FMA (6x16 f32, 6x8 f64); AVX-512 (14x32 f32, 14x16 f64,
//! and 14x32 bf16 pairs through AVX512_BF16). `CpuKernel` (kernel.rs) says which may run here.

// Micro-kernels take the tile's operands, its C pointer and stride, and its valid extent:
// eight scalars that belong in registers, not in a struct.
#![allow(clippy::too_many_arguments)]

#[cfg(target_arch = "x86_64")]
use super::pack::Bf16Pair;

/// Cache lines to prefetch into L2 while a micro-kernel runs: `lines` lines of 64 bytes
/// from `ptr` (a hint: a prefetch never faults, whatever the address).
#[derive(Clone, Copy)]
pub(crate) struct Prefetch {
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(super) ptr: *const i8,
    pub(super) lines: usize,
}

impl Prefetch {
    pub(super) const NONE: Prefetch = Prefetch {
        ptr: std::ptr::null(),
        lines: 0,
    };

    /// Issues the lines `from..` of the hint at once.
    #[inline(always)]
    pub(super) fn burst(self, from: usize) {
        for l in from..self.lines {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: _mm_prefetch only needs SSE (baseline on x86_64) and never faults or
            // reads memory architecturally; `wrapping_add` makes the address without UB.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(
                    self.ptr.wrapping_add(l * 64),
                )
            };
            #[cfg(not(target_arch = "x86_64"))]
            let _ = l;
        }
    }
}

/// The portable micro-kernel: the same tile shape in plain Rust, for CPUs without AVX2+FMA.
///
/// # Safety
/// As for `kernel::MicroKernel`: `a` valid for reads of ks * MR elements, `b` of ks * NR, `c` valid
/// for reads and writes of rows 0..mr, columns 0..nr at stride `ldc` (mr <= MR, nr <= NR),
/// with no other access to that block during the call.
pub(super) unsafe fn generic_kernel<D, const MR: usize, const NR: usize>(
    ks: usize,
    a: *const D,
    b: *const D,
    c: *mut D,
    ldc: usize,
    accumulate: bool,
    mr: usize,
    nr: usize,
    next: Prefetch,
) where
    D: Copy + Default + std::ops::Add<Output = D> + std::ops::Mul<Output = D>,
{
    next.burst(0);
    let mut acc = [[D::default(); NR]; MR];
    for p in 0..ks {
        let ap = a.add(p * MR);
        let bp = b.add(p * NR);
        for (i, row) in acc.iter_mut().enumerate() {
            let av = *ap.add(i);
            for (j, v) in row.iter_mut().enumerate() {
                *v = *v + av * *bp.add(j);
            }
        }
    }
    for (i, row) in acc.iter().enumerate().take(mr) {
        for (j, v) in row.iter().enumerate().take(nr) {
            let dst = c.add(i * ldc + j);
            *dst = if accumulate { *dst + *v } else { *v };
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(super) mod avx512;

#[cfg(target_arch = "x86_64")]
pub(super) mod avx2;
