//! The AVX-512 loops of `thin_half`: dots of the many vectors with the few in bf16 pairs
//! with AVX512_BF16 (`dots_pairs`; widened in registers: `widened::dots_wide_avx512`), the
//! rows form's passes of B's rows over C's rows held in L1 (`rows_wide`, `rows_pairs`),
//! and bf16 C's tiles in registers for `x @ W` (`rows_tiles`).

use super::{Half, MatRef};

/// The sum of every lane of the U accumulators of few vector q.
///
/// # Safety
/// The CPU has AVX-512F.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn sum<const F: usize, const U: usize>(
    acc: &[[std::arch::x86_64::__m512; F]; U],
    q: usize,
) -> f32 {
    use std::arch::x86_64::*;
    let mut v = acc[0][q];
    for a in &acc[1..] {
        v = _mm512_add_ps(v, a[q]);
    }
    _mm512_reduce_add_ps(v)
}

/// `widened::dots_wide_avx512` for bf16 with AVX512_BF16: the few vectors kept in bf16 (`y`), 32 pairs of
/// products a `vdpbf16ps`, no widening (as the blocked path's AVX512_BF16 tiles multiply:
/// subnormal inputs count as zero); the last k % 32 values widened, one at a time.
///
/// # Safety
/// As for `widened::dots_wide_avx512`, with `y` bf16; the CPU has AVX-512F and AVX512_BF16.
#[inline]
#[target_feature(enable = "avx512f,avx512bf16,fma")]
pub(super) unsafe fn dots_pairs<const F: usize, const U: usize>(
    x: *const half::bf16,
    y: *const half::bf16,
    ld: usize,
    k: usize,
    out: &mut [f32],
) {
    use std::arch::x86_64::*;
    macro_rules! pairs {
        ($p:expr) => {
            std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512($p as *const __m512i))
        };
    }
    let mut acc = [[_mm512_setzero_ps(); F]; U];
    let mut p = 0;
    while p + 32 * U <= k {
        for (u, acc) in acc.iter_mut().enumerate() {
            let xu = pairs!(x.add(p + 32 * u));
            for (q, a) in acc.iter_mut().enumerate() {
                *a = _mm512_dpbf16_ps(*a, xu, pairs!(y.add(q * ld + p + 32 * u)));
            }
        }
        p += 32 * U;
    }
    while p + 32 <= k {
        let x0 = pairs!(x.add(p));
        for (q, a) in acc[0].iter_mut().enumerate() {
            *a = _mm512_dpbf16_ps(*a, x0, pairs!(y.add(q * ld + p)));
        }
        p += 32;
    }
    for (q, o) in out.iter_mut().enumerate().take(F) {
        let mut s = sum(&acc, q);
        for t in p..k {
            s = (*x.add(t))
                .to_f32()
                .mul_add((*y.add(q * ld + t)).to_f32(), s);
        }
        *o = s;
    }
}

/// `dots_pairs` for one few vector `y` and R many vectors from `x`, `ldx` apart (a Linear
/// layer on one token, a matrix times a vector): `out[r]` = x_r . y over k values. Each step
/// loads y once for R products, R x 2 accumulators in flight, and one call and one sum across
/// lanes serve R dot products (one many vector a call spent a third of the time outside the
/// loop: bf16 1 x 4096 by a transposed 4096 x 4096, Zen 4).
///
/// # Safety
/// `x` readable for R rows of k values `ldx` apart, `y` for k values; the CPU has AVX-512F and
/// AVX512_BF16.
#[inline]
#[target_feature(enable = "avx512f,avx512bf16,fma")]
pub(super) unsafe fn dots_pairs_many<const R: usize>(
    x: *const half::bf16,
    ldx: usize,
    y: *const half::bf16,
    k: usize,
    out: &mut [f32; R],
) {
    use std::arch::x86_64::*;
    macro_rules! pairs {
        ($p:expr) => {
            std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512($p as *const __m512i))
        };
    }
    let mut acc = [[_mm512_setzero_ps(); R]; 2];
    let mut p = 0;
    while p + 64 <= k {
        for (u, acc) in acc.iter_mut().enumerate() {
            let yu = pairs!(y.add(p + 32 * u));
            for (r, a) in acc.iter_mut().enumerate() {
                *a = _mm512_dpbf16_ps(*a, yu, pairs!(x.add(r * ldx + p + 32 * u)));
            }
        }
        p += 64;
    }
    if p + 32 <= k {
        let y0 = pairs!(y.add(p));
        for (r, a) in acc[0].iter_mut().enumerate() {
            *a = _mm512_dpbf16_ps(*a, y0, pairs!(x.add(r * ldx + p)));
        }
        p += 32;
    }
    for (r, o) in out.iter_mut().enumerate() {
        let mut s = _mm512_reduce_add_ps(_mm512_add_ps(acc[0][r], acc[1][r]));
        for t in p..k {
            s = (*x.add(r * ldx + t))
                .to_f32()
                .mul_add((*y.add(t)).to_f32(), s);
        }
        *o = s;
    }
}

/// Bytes of the few vectors' pieces the dots form keeps in L1 while the many vectors stream
/// past (`Part::dots_blocked`): k is cut into blocks that fit.
pub(super) const FEW_BYTES: usize = 16 << 10;

/// Bytes of C's rows the rows form keeps in L1 with AVX-512 (`rows_wide`).
const C_ROWS_BYTES: usize = 16 << 10;

/// The rows form with AVX-512 for `M` rows of C and its columns `cols`: C's rows (f32, in
/// blocks of columns that keep M rows within C_ROWS_BYTES, in L1) += A's values times B's
/// rows, four rows of B a pass over C's block, each B vector widened in a register
/// (`Half::load16`); columns past the last whole vector one at a time. `a` holds A's M rows
/// in f32, k apart.
///
/// # Safety
/// `a` readable for M * k values, B's rows p < k readable at the columns `cols` (unit column
/// stride), C's rows i < M (`ldc` apart) writable at `cols` and not otherwise accessed
/// during the call; the CPU has AVX-512F and FMA.
#[inline]
#[target_feature(enable = "avx512f,fma")]
pub(super) unsafe fn rows_wide<S: Half, const M: usize>(
    k: usize,
    a: *const f32,
    b: MatRef<S>,
    c: *mut f32,
    ldc: usize,
    cols: std::ops::Range<usize>,
) {
    let block = (C_ROWS_BYTES / 4 / M).max(16) / 16 * 16;
    // C's block is built here, its rows a vector more than the block apart: C's own rows
    // are often a multiple of 4 KiB apart (n = 1024, 4096), and then each load of one row
    // waited on the store to the row before (4K aliasing: 8 x 1024 by 1024 x 1024 ran at a
    // third of 4 x 1024's rate).
    let ld = block + 16;
    let mut buf = vec![0f32; M * ld];
    let mut j0 = cols.start;
    while j0 < cols.end {
        let w = block.min(cols.end - j0);
        let (t, bb) = (
            buf.as_mut_ptr(),
            MatRef {
                ptr: b.ptr.add(j0),
                ..b
            },
        );
        let mut p = 0;
        while p + 4 <= k {
            rows_step::<S, M, 4>(p, k, a, bb, t, ld, 0..w);
            p += 4;
        }
        while p < k {
            rows_step::<S, M, 1>(p, k, a, bb, t, ld, 0..w);
            p += 1;
        }
        for (i, row) in buf.chunks_exact(ld).enumerate() {
            std::ptr::copy_nonoverlapping(row.as_ptr(), c.add(i * ldc + j0), w);
        }
        j0 += w;
    }
}

/// One pass of `rows_wide` over C's columns `cols`: B's rows p..p + R, written over C where
/// p is 0, else added.
///
/// # Safety
/// As for `rows_wide`, with p + R <= k.
#[inline]
#[target_feature(enable = "avx512f,fma")]
unsafe fn rows_step<S: Half, const M: usize, const R: usize>(
    p: usize,
    k: usize,
    a: *const f32,
    b: MatRef<S>,
    c: *mut f32,
    ldc: usize,
    cols: std::ops::Range<usize>,
) {
    use std::arch::x86_64::*;
    let mut av = [[_mm512_setzero_ps(); R]; M];
    for (i, row) in av.iter_mut().enumerate() {
        for (t, v) in row.iter_mut().enumerate() {
            *v = _mm512_set1_ps(*a.add(i * k + p + t));
        }
    }
    let whole = cols.start + cols.len() / 16 * 16;
    for j in (cols.start..whole).step_by(16) {
        let mut bv = [_mm512_setzero_ps(); R];
        for (t, v) in bv.iter_mut().enumerate() {
            *v = S::load16(b.ptr.add((p + t) * b.rs + j));
        }
        for (i, ar) in av.iter().enumerate() {
            let cp = c.add(i * ldc + j);
            let mut acc = if p == 0 {
                _mm512_setzero_ps()
            } else {
                _mm512_loadu_ps(cp)
            };
            for (x, y) in ar.iter().zip(&bv) {
                acc = _mm512_fmadd_ps(*x, *y, acc);
            }
            _mm512_storeu_ps(cp, acc);
        }
    }
    for j in whole..cols.end {
        for i in 0..M {
            let cp = c.add(i * ldc + j);
            let mut s = if p == 0 { 0.0 } else { *cp };
            for t in 0..R {
                s = (*b.ptr.add((p + t) * b.rs + j))
                    .conv()
                    .mul_add(*a.add(i * k + p + t), s);
            }
            *cp = s;
        }
    }
}

/// `rows_wide` for bf16 with AVX512_BF16 (A's M rows kept in bf16, k apart): B's rows p and
/// p + 1 interleaved in registers into pairs (`vpunpcklwd`/`vpunpckhwd`: within each 128-bit
/// lane, columns 0-3 into the low vector and 4-7 into the high one) and multiplied with A's
/// pair (p, p + 1) by `vdpbf16ps`, twice A's rate widened to f32. C's block is built in that
/// order, 32 columns a group, and put back in order as it is copied out; the columns past
/// the last group one at a time, a last odd row of B paired with zeros. Against `rows_wide`
/// (Zen 4, two threads, calls alternated in one process, median ratio): 1 x 1024 by 1024 x
/// 1024 1.05x, 2 x 1024 1.19x, 4 x 1024 1.23x, 8 x 1024 1.15x, 3 x 2048 by 2048 x 2048
/// 1.08x, 1 x 4096 by 4096 x 4096 1.10x, 8 x 4096 0.97x (bound by memory).
///
/// # Safety
/// As for `rows_wide`, `a` bf16; the CPU has AVX-512F, AVX512BW and AVX512_BF16.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
pub(super) unsafe fn rows_pairs<const M: usize>(
    k: usize,
    a: *const half::bf16,
    b: MatRef<half::bf16>,
    c: *mut f32,
    ldc: usize,
    cols: std::ops::Range<usize>,
) {
    use std::arch::x86_64::*;
    let block = (C_ROWS_BYTES / 4 / M).max(32) / 32 * 32;
    let ld = block + 16;
    let mut buf = vec![0f32; M * ld];
    let t = buf.as_mut_ptr();
    // Macros, not closures: a closure is compiled without this function's target features
    // (`thin::dots_body`'s note), and each intrinsic in it would be a call.
    // A's pair (p, p + 1) of row i as one 32-bit value, the second zero past k.
    macro_rules! pair {
        ($i:expr, $p:expr) => {{
            let (i, p) = ($i, $p);
            let lo = (*a.add(i * k + p)).to_bits() as u32;
            let hi = if p + 1 < k {
                (*a.add(i * k + p + 1)).to_bits() as u32
            } else {
                0
            };
            lo | hi << 16
        }};
    }
    // B's row q at column j, zeros past k.
    macro_rules! row {
        ($q:expr, $j:expr) => {{
            let q = $q;
            if q < k {
                _mm512_loadu_si512(b.ptr.add(q * b.rs + $j) as *const __m512i)
            } else {
                _mm512_setzero_si512()
            }
        }};
    }
    let mut j0 = cols.start;
    while j0 < cols.end {
        let w = block.min(cols.end - j0);
        let groups = w / 32 * 32;
        let mut p = 0;
        while p < k {
            // Two pairs of B's rows a pass over C's block (the last may be short).
            let mut av = [[_mm512_setzero_si512(); 2]; M];
            for (i, row) in av.iter_mut().enumerate() {
                for (s, v) in row.iter_mut().enumerate().filter(|(s, _)| p + 2 * s < k) {
                    *v = _mm512_set1_epi32(pair!(i, p + 2 * s) as i32);
                }
            }
            for j in (0..groups).step_by(32) {
                let mut lo = [_mm512_setzero_si512(); 2];
                let mut hi = [_mm512_setzero_si512(); 2];
                for s in 0..2 {
                    let (r0, r1) = (row!(p + 2 * s, j0 + j), row!(p + 2 * s + 1, j0 + j));
                    lo[s] = _mm512_unpacklo_epi16(r0, r1);
                    hi[s] = _mm512_unpackhi_epi16(r0, r1);
                }
                for (i, ar) in av.iter().enumerate() {
                    let cp = t.add(i * ld + j);
                    let (mut cl, mut ch) = if p == 0 {
                        (_mm512_setzero_ps(), _mm512_setzero_ps())
                    } else {
                        (_mm512_loadu_ps(cp), _mm512_loadu_ps(cp.add(16)))
                    };
                    for s in 0..2 {
                        let x = std::mem::transmute::<__m512i, __m512bh>(ar[s]);
                        cl = _mm512_dpbf16_ps(
                            cl,
                            std::mem::transmute::<__m512i, __m512bh>(lo[s]),
                            x,
                        );
                        ch = _mm512_dpbf16_ps(
                            ch,
                            std::mem::transmute::<__m512i, __m512bh>(hi[s]),
                            x,
                        );
                    }
                    _mm512_storeu_ps(cp, cl);
                    _mm512_storeu_ps(cp.add(16), ch);
                }
            }
            for j in groups..w {
                for i in 0..M {
                    let cp = t.add(i * ld + j);
                    let mut v = if p == 0 { 0.0 } else { *cp };
                    for q in p..(p + 4).min(k) {
                        let x = (*a.add(i * k + q)).to_f32();
                        v = x.mul_add((*b.ptr.add(q * b.rs + j0 + j)).to_f32(), v);
                    }
                    *cp = v;
                }
            }
            p += 4;
        }
        // Back in order: in a group, column 8 L + e (e < 4) is at 4 L + e, 8 L + 4 + e at
        // 16 + 4 L + e.
        for (i, r) in buf.chunks_exact(ld).enumerate() {
            let out = c.add(i * ldc + j0);
            for g in (0..groups).step_by(32) {
                for l in 0..4 {
                    for e in 0..4 {
                        *out.add(g + 8 * l + e) = r[g + 4 * l + e];
                        *out.add(g + 8 * l + 4 + e) = r[g + 16 + 4 * l + e];
                    }
                }
            }
            std::ptr::copy_nonoverlapping(r.as_ptr().add(groups), out.add(groups), w - groups);
        }
        j0 += w;
    }
}

/// bf16 C = A B for B's rows contiguous (k x n, `x @ W`) with AVX512_BF16, C's tiles in
/// registers (`rows_regs`) along all of k, B read in place: for each slab of C's columns
/// (`slab`, a multiple of 32, sized by the caller so that k rows of it stay in L2; all of
/// `cols` for up to 8 rows) each group of up to 8 of A's rows in turn, so that groups after
/// the first read B's slab from L2. Against `rows_pairs` (C's rows built in L1, loaded and stored for every 4 rows of B)
/// and the blocked path, see `gemm_rows`.
///
/// # Safety
/// `a` readable for m rows of k values, `lda` apart; B's rows p < k readable at `cols`;
/// C's rows i < m (`ldc` apart) writable at `cols` and not otherwise accessed during the
/// call; the CPU has AVX-512F, AVX512BW and AVX512_BF16.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
pub(super) unsafe fn rows_tiles(
    m: usize,
    k: usize,
    a: *const half::bf16,
    lda: usize,
    b: MatRef<half::bf16>,
    c: *mut f32,
    ldc: usize,
    cols: std::ops::Range<usize>,
    slab: usize,
) {
    type Run = unsafe fn(
        usize,
        *const half::bf16,
        usize,
        MatRef<half::bf16>,
        *mut f32,
        usize,
        usize,
        usize,
    );
    // One group of rows reads B once whatever the slab: all of `cols` in one, so that a
    // narrow slab (64 columns at k = 4096) does not leave 1 or 2 rows with the single
    // 32-column tiles (two chains of `vdpbf16ps`) instead of G = 4. Zen 4, calls alternated
    // in one process: 1 x 1024 by 4096 x 1024 3.7x (83 GFLOP/s), 2 x 1024 2.4x, 1 x 512 by
    // 4096 x 512 1.6x; 4 and 8 rows and k = 1024 level.
    let slab = if m <= 8 { cols.len() } else { slab };
    let mut j0 = cols.start;
    while j0 < cols.end {
        let w = slab.min(cols.end - j0);
        let mut i0 = 0;
        while i0 < m {
            // M rows of 2 G accumulators each, at most 16.
            let rows = (m - i0).min(8);
            let (run, one, g): (Run, Run, usize) = match rows {
                1 => (rows_regs::<1, 4>, rows_regs::<1, 1>, 4),
                2 => (rows_regs::<2, 4>, rows_regs::<2, 1>, 4),
                3 => (rows_regs::<3, 2>, rows_regs::<3, 1>, 2),
                4 => (rows_regs::<4, 2>, rows_regs::<4, 1>, 2),
                5 => (rows_regs::<5, 1>, rows_regs::<5, 1>, 1),
                6 => (rows_regs::<6, 1>, rows_regs::<6, 1>, 1),
                7 => (rows_regs::<7, 1>, rows_regs::<7, 1>, 1),
                _ => (rows_regs::<8, 1>, rows_regs::<8, 1>, 1),
            };
            let (ai, ci) = (a.add(i0 * lda), c.add(i0 * ldc));
            // Whole groups of G x 32 columns, then 32 at a time, the last one masked.
            let mut j = j0;
            while j + 32 * g <= j0 + w {
                run(k, ai, lda, b, ci, ldc, j, 32 * g);
                j += 32 * g;
            }
            while j < j0 + w {
                let cw = 32.min(j0 + w - j);
                one(k, ai, lda, b, ci, ldc, j, cw);
                j += cw;
            }
            i0 += rows;
        }
        j0 += w;
    }
}

/// C's M rows at columns j..j + w (w <= 32 G) = A's M rows (`lda` apart, bf16) times B's
/// rows: B's rows p and p + 1 interleaved in registers into pairs (`vpunpcklwd` and
/// `vpunpckhwd`: within each 128-bit lane, columns 0-3 into the low vector and 4-7 into the
/// high one) and multiplied with A's pair (p, p + 1), broadcast, by `vdpbf16ps` into M x 2G
/// accumulators (at most 16: with the G pairs of B's vectors they fit the 32 registers),
/// which are put back in column order (`vpermt2ps`) and stored once. The columns past w
/// (in the last group only: w > 32 (G - 1)) are masked out of the loads and stores; a last
/// odd row of B is paired with zeros.
///
/// # Safety
/// As for `rows_tiles`, for columns j..j + w, with 32 (G - 1) < w <= 32 G.
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
unsafe fn rows_regs<const M: usize, const G: usize>(
    k: usize,
    a: *const half::bf16,
    lda: usize,
    b: MatRef<half::bf16>,
    c: *mut f32,
    ldc: usize,
    j: usize,
    w: usize,
) {
    use std::arch::x86_64::*;
    let mut masks = [0u32; G];
    for (g, mk) in masks.iter_mut().enumerate() {
        let left = w.saturating_sub(32 * g).min(32);
        *mk = if left == 32 {
            u32::MAX
        } else {
            (1u32 << left) - 1
        };
    }
    let bp = b.ptr.add(j);
    let mut accs = [[[_mm512_setzero_ps(); 2]; G]; M];
    macro_rules! step {
        ($p:expr, $odd:expr) => {{
            let p: usize = $p;
            let mut lo = [_mm512_setzero_si512(); G];
            let mut hi = [_mm512_setzero_si512(); G];
            for g in 0..G {
                let r0 =
                    _mm512_maskz_loadu_epi16(masks[g], bp.add(p * b.rs + 32 * g) as *const i16);
                let r1 = if $odd {
                    _mm512_setzero_si512()
                } else {
                    _mm512_maskz_loadu_epi16(
                        masks[g],
                        bp.add((p + 1) * b.rs + 32 * g) as *const i16,
                    )
                };
                lo[g] = _mm512_unpacklo_epi16(r0, r1);
                hi[g] = _mm512_unpackhi_epi16(r0, r1);
            }
            for (i, row) in accs.iter_mut().enumerate() {
                let x = if $odd {
                    (*a.add(i * lda + p)).to_bits() as i32
                } else {
                    (a.add(i * lda + p) as *const i32).read_unaligned()
                };
                let x = std::mem::transmute::<__m512i, __m512bh>(_mm512_set1_epi32(x));
                for (g, v) in row.iter_mut().enumerate() {
                    v[0] =
                        _mm512_dpbf16_ps(v[0], std::mem::transmute::<__m512i, __m512bh>(lo[g]), x);
                    v[1] =
                        _mm512_dpbf16_ps(v[1], std::mem::transmute::<__m512i, __m512bh>(hi[g]), x);
                }
            }
        }};
    }
    let mut p = 0;
    while p + 2 <= k {
        step!(p, false);
        p += 2;
    }
    if p < k {
        step!(p, true);
    }
    // Lanes of the low vector hold columns 8 L + e, of the high one 8 L + 4 + e (e < 4).
    let first = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
    let second = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
    for (i, row) in accs.iter().enumerate() {
        for (g, v) in row.iter().enumerate() {
            let out = c.add(i * ldc + j + 32 * g);
            let (m0, m1) = (masks[g] as u16, (masks[g] >> 16) as u16);
            let x0 = _mm512_permutex2var_ps(v[0], first, v[1]);
            let x1 = _mm512_permutex2var_ps(v[0], second, v[1]);
            _mm512_mask_storeu_ps(out, m0, x0);
            if m1 != 0 {
                // Only then is out + 16 inside C's row.
                _mm512_mask_storeu_ps(out.add(16), m1, x1);
            }
        }
    }
}
