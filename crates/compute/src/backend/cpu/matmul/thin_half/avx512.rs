//! The AVX-512 loops of `thin_half`: dots of the many vectors with the few (widened in
//! registers, `dots_wide`; bf16 pairs with AVX512_BF16, `dots_pairs`) and the rows form's
//! passes of B's rows over C's rows held in L1 (`rows_wide`, `rows_pairs`).

use super::{Half, MatRef};

/// The dots of `x` (k values) with the `F` f32 vectors at `y`, `ld` apart: `x` widened
/// 16 x `U` values at a time in registers and multiplied into `U` accumulators a vector
/// (F x U <= 16: the accumulators, the widened values and the loads fit the 32 registers;
/// U chains of FMAs hide their latency), the last k % 16 values one at a time.
///
/// # Safety
/// `x` readable for k values, `y + q * ld` for k values (q < F); the CPU has AVX-512F and
/// FMA.
#[inline]
#[target_feature(enable = "avx512f,fma")]
pub(super) unsafe fn dots_wide<S: Half, const F: usize, const U: usize>(
    x: *const S,
    y: *const f32,
    ld: usize,
    k: usize,
    out: &mut [f32],
) {
    use std::arch::x86_64::*;
    let mut acc = [[_mm512_setzero_ps(); F]; U];
    let mut p = 0;
    while p + 16 * U <= k {
        for (u, acc) in acc.iter_mut().enumerate() {
            let xu = S::load16(x.add(p + 16 * u));
            for (q, a) in acc.iter_mut().enumerate() {
                *a = _mm512_fmadd_ps(xu, _mm512_loadu_ps(y.add(q * ld + p + 16 * u)), *a);
            }
        }
        p += 16 * U;
    }
    while p + 16 <= k {
        let x0 = S::load16(x.add(p));
        for (q, a) in acc[0].iter_mut().enumerate() {
            *a = _mm512_fmadd_ps(x0, _mm512_loadu_ps(y.add(q * ld + p)), *a);
        }
        p += 16;
    }
    for (q, o) in out.iter_mut().enumerate().take(F) {
        let mut s = sum(&acc, q);
        for t in p..k {
            s = (*x.add(t)).conv().mul_add(*y.add(q * ld + t), s);
        }
        *o = s;
    }
}

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

/// `dots_wide` for bf16 with AVX512_BF16: the few vectors kept in bf16 (`y`), 32 pairs of
/// products a `vdpbf16ps`, no widening (as the blocked path's AVX512_BF16 tiles multiply:
/// subnormal inputs count as zero); the last k % 32 values widened, one at a time.
///
/// # Safety
/// As for `dots_wide`, with `y` bf16; the CPU has AVX-512F and AVX512_BF16.
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
