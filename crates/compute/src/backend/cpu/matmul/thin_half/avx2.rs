//! The AVX2 loop of `thin_half` for B's rows contiguous (`x @ W`, B k x n): C's tiles in
//! registers (`rows_regs`) along all of k, B widened to f32 8 values at a time as it is read
//! (`Half::load8`), for f32, bf16 and f16 on CPUs without AVX-512 (`gemm_rows_avx2`).

use super::{Half, MatRef};

/// C = A B (C in f32) for C's columns `cols`: for each slab of them (`slab` columns, whose
/// k rows of B stay in L2) each group of up to 6 of A's rows (f32, `lda` apart) in turn,
/// so that groups after the first read B's slab from L2; whole vectors of 8 columns through
/// `rows_regs`, the last few columns (fewer than 8) widened into a buffer padded with
/// zeros and run through the same loop.
///
/// # Safety
/// `a` readable for m rows of k values, `lda` apart; B's rows p < k readable at `cols`
/// (unit column stride); C's rows i < m (`ldc` apart) writable at `cols` and not otherwise
/// accessed during the call; the CPU has AVX2, FMA and F16C.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn rows_tiles<S: Half>(
    m: usize,
    k: usize,
    a: *const f32,
    lda: usize,
    b: MatRef<S>,
    c: *mut f32,
    ldc: usize,
    cols: std::ops::Range<usize>,
    slab: usize,
) {
    type Run<T> = unsafe fn(usize, *const f32, usize, MatRef<T>, *mut f32, usize, usize);
    let whole = cols.start + cols.len() / 8 * 8;
    let mut j0 = cols.start;
    while j0 < whole {
        let w = slab.min(whole - j0);
        let mut i0 = 0;
        while i0 < m {
            // M rows of V vectors of accumulators: at most 12, beside V of B's and a
            // broadcast value of A's in the 16 registers.
            let rows = (m - i0).min(6);
            let (wide, one, v): (Run<S>, Run<S>, usize) = match rows {
                1 => (rows_regs::<S, 1, 4>, rows_regs::<S, 1, 1>, 4),
                2 => (rows_regs::<S, 2, 4>, rows_regs::<S, 2, 1>, 4),
                3 => (rows_regs::<S, 3, 2>, rows_regs::<S, 3, 1>, 2),
                4 => (rows_regs::<S, 4, 2>, rows_regs::<S, 4, 1>, 2),
                5 => (rows_regs::<S, 5, 2>, rows_regs::<S, 5, 1>, 2),
                _ => (rows_regs::<S, 6, 2>, rows_regs::<S, 6, 1>, 2),
            };
            let (ai, ci) = (a.add(i0 * lda), c.add(i0 * ldc));
            let mut j = j0;
            while j + 8 * v <= j0 + w {
                wide(k, ai, lda, b, ci, ldc, j);
                j += 8 * v;
            }
            while j < j0 + w {
                one(k, ai, lda, b, ci, ldc, j);
                j += 8;
            }
            i0 += rows;
        }
        j0 += w;
    }
    if whole < cols.end {
        // The last columns, widened into 8 with zeros beyond.
        let left = cols.end - whole;
        let mut pad = vec![0f32; k * 8];
        for (p, row) in pad.chunks_exact_mut(8).enumerate() {
            for (e, x) in row.iter_mut().take(left).enumerate() {
                *x = (*b.ptr.add(p * b.rs + whole + e)).conv();
            }
        }
        let pb = MatRef {
            ptr: pad.as_ptr(),
            rs: 8,
            cs: 1,
        };
        let mut out = [0f32; 6 * 8];
        let mut i0 = 0;
        while i0 < m {
            let rows = (m - i0).min(6);
            let run: Run<f32> = match rows {
                1 => rows_regs::<f32, 1, 1>,
                2 => rows_regs::<f32, 2, 1>,
                3 => rows_regs::<f32, 3, 1>,
                4 => rows_regs::<f32, 4, 1>,
                5 => rows_regs::<f32, 5, 1>,
                _ => rows_regs::<f32, 6, 1>,
            };
            run(k, a.add(i0 * lda), lda, pb, out.as_mut_ptr(), 8, 0);
            for (i, r) in out.chunks_exact(8).take(rows).enumerate() {
                std::ptr::copy_nonoverlapping(r.as_ptr(), c.add((i0 + i) * ldc + whole), left);
            }
            i0 += rows;
        }
    }
}

/// C's M rows at columns j..j + 8 V = A's M rows (f32, `lda` apart) times B's rows, each
/// row of B widened 8 values a register (`Half::load8`) and multiplied by A's value,
/// broadcast, into M x V accumulators that are stored once.
///
/// # Safety
/// As for `rows_tiles`, for columns j..j + 8 V.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn rows_regs<S: Half, const M: usize, const V: usize>(
    k: usize,
    a: *const f32,
    lda: usize,
    b: MatRef<S>,
    c: *mut f32,
    ldc: usize,
    j: usize,
) {
    use std::arch::x86_64::*;
    let mut acc = [[_mm256_setzero_ps(); V]; M];
    let bp = b.ptr.add(j);
    for p in 0..k {
        let mut bv = [_mm256_setzero_ps(); V];
        for (v, x) in bv.iter_mut().enumerate() {
            *x = S::load8(bp.add(p * b.rs + 8 * v));
        }
        for (i, row) in acc.iter_mut().enumerate() {
            let x = _mm256_broadcast_ss(&*a.add(i * lda + p));
            for (r, y) in row.iter_mut().zip(&bv) {
                *r = _mm256_fmadd_ps(x, *y, *r);
            }
        }
    }
    for (i, row) in acc.iter().enumerate() {
        for (v, r) in row.iter().enumerate() {
            _mm256_storeu_ps(c.add(i * ldc + j + 8 * v), *r);
        }
    }
}

/// The dots of `x` (k values) with the `F` f32 vectors at `y`, `ld` apart: `x` widened
/// 8 x `U` values at a time in registers (`Half::load8`) and multiplied into `U`
/// accumulators a few vector (F x U <= 8: with the U widened values and a load they fit
/// the 16 registers; U chains of FMAs hide their latency), the last k % 8 values one at a
/// time. AVX2's form of `avx512::dots_wide`.
///
/// # Safety
/// `x` readable for k values, `y + q * ld` for k values (q < F), `out` at least F long; the
/// CPU has AVX2, FMA and F16C.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dots_wide<S: Half, const F: usize, const U: usize>(
    x: *const S,
    y: *const f32,
    ld: usize,
    k: usize,
    out: &mut [f32],
) {
    use std::arch::x86_64::*;
    let mut acc = [[_mm256_setzero_ps(); F]; U];
    let mut p = 0;
    while p + 8 * U <= k {
        for (u, acc) in acc.iter_mut().enumerate() {
            let xu = S::load8(x.add(p + 8 * u));
            for (q, a) in acc.iter_mut().enumerate() {
                *a = _mm256_fmadd_ps(xu, _mm256_loadu_ps(y.add(q * ld + p + 8 * u)), *a);
            }
        }
        p += 8 * U;
    }
    while p + 8 <= k {
        let x0 = S::load8(x.add(p));
        for (q, a) in acc[0].iter_mut().enumerate() {
            *a = _mm256_fmadd_ps(x0, _mm256_loadu_ps(y.add(q * ld + p)), *a);
        }
        p += 8;
    }
    for (q, o) in out.iter_mut().enumerate().take(F) {
        let mut v = acc[0][q];
        for a in &acc[1..] {
            v = _mm256_add_ps(v, a[q]);
        }
        let h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let h = _mm_add_ps(h, _mm_movehl_ps(h, h));
        let h = _mm_add_ss(h, _mm_movehdup_ps(h));
        let mut s = _mm_cvtss_f32(h);
        for t in p..k {
            s = (*x.add(t)).conv().mul_add(*y.add(q * ld + t), s);
        }
        *o = s;
    }
}
