//! Loops written once and compiled for AVX2 and for AVX-512. C's tiles in registers for
//! `x @ W` (B's rows contiguous, B k x n) with B widened to f32 as it is read
//! (`Half::load8`, `Half::load16`), or f64 as it is (`Wide64`), `widened_rows!`: AVX2 (8 f32
//! or 4 f64 lanes, up to 6 rows a group in the 16 registers) and AVX-512 (16 or 8 lanes, up
//! to 8 rows in the 32), for `gemm_rows_widened` and `gemm_rows_f64`. And the dots form's
//! loop over a many vector widened in registers (`widened_dots!`: `dots_wide_avx2`,
//! `dots_wide_avx512`), for `Part::dots_blocked`.

use super::super::pack::PackInto;
use super::{Half, MatRef};
use std::arch::x86_64::*;

/// f64, the element type of `rows_tiles_f64_avx2` and `_avx512`: B's values loaded as they
/// are, 8 or 4 at a time.
pub(in super::super) trait Wide64: PackInto<f64> + Copy + Sync {
    /// 8 values from `p`.
    ///
    /// # Safety
    /// `p` readable for 8 values; the CPU has AVX-512F.
    unsafe fn load8d(p: *const Self) -> __m512d;
    /// 4 values from `p`.
    ///
    /// # Safety
    /// `p` readable for 4 values; the CPU has AVX.
    unsafe fn load4d(p: *const Self) -> __m256d;
}

impl Wide64 for f64 {
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn load8d(p: *const f64) -> __m512d {
        _mm512_loadu_pd(p)
    }
    #[inline]
    #[target_feature(enable = "avx")]
    unsafe fn load4d(p: *const f64) -> __m256d {
        _mm256_loadu_pd(p)
    }
}

/// Defines `$tiles`, C = A B (A and C of `$t`, B's values converted to it) for C's columns `cols`, and `$regs`, its loop over
/// all of k for one group of M rows and V vectors of columns: for each slab of C's columns
/// (`slab` columns, whose k rows of B stay in L2), each group of A's rows (`lda`
/// apart; the groups and their V from `$table`) in turn, so that groups after the first
/// read B's slab from L2; whole groups of V vectors, then single vectors, then the last
/// columns (fewer than a vector) widened into a buffer padded with zeros and run through
/// the same loop. In `$regs`, each row of B is widened V vectors at a time and multiplied
/// by A's value, broadcast, into M x V accumulators that are stored once.
macro_rules! widened_rows {
    ($tiles:ident, $regs:ident, $t:ty, $bound:ident, $feat:literal, $vec:ty, $lanes:expr,
     $zero:ident, $fma:ident, $bcast:ident, $store:ident, $load:ident, $most:expr,
     [$($r:literal => $v:literal),*]) => {
        /// `widened_rows!`'s slabs and groups (module doc).
        ///
        /// # Safety
        /// `a` readable for m rows of k values, `lda` apart; B's rows p < k readable at
        /// `cols` (unit column stride); C's rows i < m (`ldc` apart) writable at `cols` and
        /// not otherwise accessed during the call; the CPU has the features named.
        #[allow(clippy::too_many_arguments)]
        #[target_feature(enable = $feat)]
        pub(super) unsafe fn $tiles<S: $bound>(
            m: usize,
            k: usize,
            a: *const $t,
            lda: usize,
            b: MatRef<S>,
            c: *mut $t,
            ldc: usize,
            cols: std::ops::Range<usize>,
            slab: usize,
        ) {
            type Run<T> = unsafe fn(usize, *const $t, usize, MatRef<T>, *mut $t, usize, usize);
            const L: usize = $lanes;
            let whole = cols.start + cols.len() / L * L;
            let mut j0 = cols.start;
            while j0 < whole {
                let w = slab.min(whole - j0);
                let mut i0 = 0;
                while i0 < m {
                    let rows = (m - i0).min($most);
                    let (wide, one, v): (Run<S>, Run<S>, usize) = match rows {
                        $($r => ($regs::<S, $r, $v>, $regs::<S, $r, 1>, $v),)*
                        _ => unreachable!("groups of 1 to {} rows", $most),
                    };
                    let (ai, ci) = (a.add(i0 * lda), c.add(i0 * ldc));
                    let mut j = j0;
                    while j + L * v <= j0 + w {
                        wide(k, ai, lda, b, ci, ldc, j);
                        j += L * v;
                    }
                    while j < j0 + w {
                        one(k, ai, lda, b, ci, ldc, j);
                        j += L;
                    }
                    i0 += rows;
                }
                j0 += w;
            }
            if whole < cols.end {
                // The last columns, widened into a vector with zeros beyond.
                let left = cols.end - whole;
                let mut pad: Vec<$t> = vec![0.0; k * L];
                for (p, row) in pad.chunks_exact_mut(L).enumerate() {
                    for (e, x) in row.iter_mut().take(left).enumerate() {
                        *x = (*b.ptr.add(p * b.rs + whole + e)).conv();
                    }
                }
                let pb = MatRef { ptr: pad.as_ptr(), rs: L, cs: 1 };
                let mut out: [$t; $most * L] = [0.0; $most * L];
                let mut i0 = 0;
                while i0 < m {
                    let rows = (m - i0).min($most);
                    let run: Run<$t> = match rows {
                        $($r => $regs::<$t, $r, 1>,)*
                        _ => unreachable!("groups of 1 to {} rows", $most),
                    };
                    run(k, a.add(i0 * lda), lda, pb, out.as_mut_ptr(), L, 0);
                    for (i, r) in out.chunks_exact(L).take(rows).enumerate() {
                        let to = c.add((i0 + i) * ldc + whole);
                        std::ptr::copy_nonoverlapping(r.as_ptr(), to, left);
                    }
                    i0 += rows;
                }
            }
        }

        /// `widened_rows!`'s loop for one group: C's M rows at columns j..j + V vectors.
        ///
        /// # Safety
        /// As for the slabs' function, for those columns.
        #[inline]
        #[target_feature(enable = $feat)]
        unsafe fn $regs<S: $bound, const M: usize, const V: usize>(
            k: usize,
            a: *const $t,
            lda: usize,
            b: MatRef<S>,
            c: *mut $t,
            ldc: usize,
            j: usize,
        ) {
            const L: usize = $lanes;
            let mut acc: [[$vec; V]; M] = [[$zero(); V]; M];
            let bp = b.ptr.add(j);
            for p in 0..k {
                let mut bv: [$vec; V] = [$zero(); V];
                for (v, x) in bv.iter_mut().enumerate() {
                    *x = S::$load(bp.add(p * b.rs + L * v));
                }
                for (i, row) in acc.iter_mut().enumerate() {
                    let x = $bcast(*a.add(i * lda + p));
                    for (r, y) in row.iter_mut().zip(&bv) {
                        *r = $fma(x, *y, *r);
                    }
                }
            }
            for (i, row) in acc.iter().enumerate() {
                for (v, r) in row.iter().enumerate() {
                    $store(c.add(i * ldc + j + L * v), *r);
                }
            }
        }
    };
}

// AVX2: M rows of V vectors of accumulators, at most 12, beside V of B's and A's broadcast
// value in the 16 registers.
widened_rows!(rows_tiles_avx2, rows_regs_avx2, f32, Half, "avx2,fma,f16c", __m256, 8,
    _mm256_setzero_ps, _mm256_fmadd_ps, _mm256_set1_ps, _mm256_storeu_ps, load8, 6,
    [1 => 4, 2 => 4, 3 => 2, 4 => 2, 5 => 2, 6 => 2]);

// AVX-512: at most 16 accumulators beside V of B's in the 32 registers.
widened_rows!(rows_tiles_avx512, rows_regs_avx512, f32, Half, "avx512f,fma", __m512,
    16, _mm512_setzero_ps, _mm512_fmadd_ps, _mm512_set1_ps, _mm512_storeu_ps, load16, 8,
    [1 => 4, 2 => 4, 3 => 4, 4 => 4, 5 => 2, 6 => 2, 7 => 2, 8 => 2]);

// The same two for f64, half the lanes.
widened_rows!(rows_tiles_f64_avx2, rows_regs_f64_avx2, f64, Wide64, "avx2,fma", __m256d, 4,
    _mm256_setzero_pd, _mm256_fmadd_pd, _mm256_set1_pd, _mm256_storeu_pd, load4d, 6,
    [1 => 4, 2 => 4, 3 => 2, 4 => 2, 5 => 2, 6 => 2]);

widened_rows!(rows_tiles_f64_avx512, rows_regs_f64_avx512, f64, Wide64, "avx512f,fma",
    __m512d, 8, _mm512_setzero_pd, _mm512_fmadd_pd, _mm512_set1_pd, _mm512_storeu_pd,
    load8d, 8, [1 => 4, 2 => 4, 3 => 4, 4 => 4, 5 => 2, 6 => 2, 7 => 2, 8 => 2]);

/// Defines `$name`, the dots of `x` (k values) with the `F` f32 vectors at `y`, `ld` apart:
/// `x` widened `$lanes` x `U` values at a time in registers (`Half::$load`) and multiplied
/// into `U` accumulators a few vector (F x U at most 8 with AVX2, 16 with AVX-512: with the
/// U widened values and a load they fit the registers; U chains of FMAs hide their
/// latency), the last k % `$lanes` values one at a time.
macro_rules! widened_dots {
    ($name:ident, $feat:literal, $zero:ident, $fma:ident, $add:ident, $loadu:ident,
     $load:ident, $lanes:expr, $hsum:ident) => {
        /// `widened_dots!`'s loop (its doc).
        ///
        /// # Safety
        /// `x` readable for k values, `y + q * ld` for k values (q < F), `out` at least F
        /// long; the CPU has the features named.
        #[inline]
        #[target_feature(enable = $feat)]
        pub(super) unsafe fn $name<S: Half, const F: usize, const U: usize>(
            x: *const S,
            y: *const f32,
            ld: usize,
            k: usize,
            out: &mut [f32],
        ) {
            const L: usize = $lanes;
            let mut acc = [[$zero(); F]; U];
            let mut p = 0;
            while p + L * U <= k {
                for (u, acc) in acc.iter_mut().enumerate() {
                    let xu = S::$load(x.add(p + L * u));
                    for (q, a) in acc.iter_mut().enumerate() {
                        *a = $fma(xu, $loadu(y.add(q * ld + p + L * u)), *a);
                    }
                }
                p += L * U;
            }
            while p + L <= k {
                let x0 = S::$load(x.add(p));
                for (q, a) in acc[0].iter_mut().enumerate() {
                    *a = $fma(x0, $loadu(y.add(q * ld + p)), *a);
                }
                p += L;
            }
            for (q, o) in out.iter_mut().enumerate().take(F) {
                let mut v = acc[0][q];
                for a in &acc[1..] {
                    v = $add(v, a[q]);
                }
                let mut s = $hsum(v);
                for t in p..k {
                    s = (*x.add(t)).conv().mul_add(*y.add(q * ld + t), s);
                }
                *o = s;
            }
        }
    };
}

/// The sum of the 8 lanes of `v`.
///
/// # Safety
/// The CPU has AVX.
#[inline]
#[target_feature(enable = "avx")]
unsafe fn sum8(v: __m256) -> f32 {
    let h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)))
}

widened_dots!(
    dots_wide_avx2,
    "avx2,fma,f16c",
    _mm256_setzero_ps,
    _mm256_fmadd_ps,
    _mm256_add_ps,
    _mm256_loadu_ps,
    load8,
    8,
    sum8
);
widened_dots!(
    dots_wide_avx512,
    "avx512f,fma",
    _mm512_setzero_ps,
    _mm512_fmadd_ps,
    _mm512_add_ps,
    _mm512_loadu_ps,
    load16,
    16,
    _mm512_reduce_add_ps
);
