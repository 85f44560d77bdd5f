//! Products with few rows or few columns: a row vector times a matrix, a matrix times a
//! vector, a Linear layer on a batch of a few rows. Each element of the large operand is
//! used a few times at most, so such a product is bound by reading that operand from
//! memory, and tiles of 14 x 32 (which compute 7 or 14 rows where 1 is wanted) or packing
//! (which reads and writes the whole operand once more) only slow it down. Measured on the
//! Emerald Rapids VM of bench/README.md (f32, two threads, GFLOP/s, accel before this path
//! against PyTorch's oneMKL): 1 x 4096 by 4096 x 4096 3.4 against 18; 4096 x 4096 by a
//! vector 3.4 against 19; 8 rows 23-27 against 66-70.
//!
//! Two forms, chosen from the operands' strides and B's size (`form`):
//! - **rows** (B's rows contiguous, up to `ROWS_MAX` rows of C, B larger than half of L2):
//!   C's rows are built as sums of B's rows scaled by A's values, four rows of B at a time,
//!   over column blocks small enough that C's rows stay in L1 while B streams past once, in
//!   order (f32 from 3 rows with AVX-512: `thin_half`'s loop, `Thin::rows_in_registers`).
//!   `gemm_float` offers `x @ W` to C's tiles in registers first (`Thin::rows_widened`:
//!   f32 from 4 rows, f64 from 2 or 3), so this form keeps 1 to 3 rows there.
//! - **dots** (A's rows and B's columns contiguous, up to `DOTS_MAX` rows or columns of C):
//!   every element of C is one dot product of two contiguous vectors (`x @ W.t()` of a
//!   Linear layer, a matrix times a vector), in four AVX-512 accumulators (`dot_wide`), or
//!   64 lanes of plain Rust elsewhere. With AVX-512 or AVX2, `gemm_float` offers a
//!   transposed B with 3 to 96 rows (AVX2: up to 192) to `dot_tiles` first (tiles of dot
//!   products, faster there); this form keeps what it declines (1 or 2 rows, k below 64,
//!   at most 6 columns, neither AVX-512 nor AVX2).
//!
//! Two or more threads split the dimension that is large, in whole vectors.

use super::pack::{MatRef, OutPtr};
use super::{helper, Accum};

/// Most rows of C the rows form takes (C's block of rows x `block` columns stays in L1).
const ROWS_MAX: usize = 8;
/// Most rows or columns of C the dots form takes.
pub(super) const DOTS_MAX: usize = 8;
/// Fewer multiply-adds than this run on the calling thread alone.
const SPLIT_FLOPS: usize = 1 << 16;
/// Bytes of C's rows the rows form keeps in L1 while it streams B.
const C_BLOCK_BYTES: usize = 16 << 10;

/// The element types of the thin path: `fma` multiplies and adds in one rounding where
/// `FUSED` (compiled with the FMA feature), else in two.
pub(crate) trait Thin: Accum {
    fn fma<const FUSED: bool>(a: Self, b: Self, c: Self) -> Self;
    const ZERO: Self;
    /// x . y over k elements with AVX-512 (`dot_wide`).
    ///
    /// # Safety
    /// x and y readable for k elements; the CPU has AVX-512F and FMA.
    #[cfg(target_arch = "x86_64")]
    unsafe fn dot_wide(x: *const Self, y: *const Self, k: usize) -> Self;
    /// The rows form through `thin_half`'s AVX-512 loop (`rows_wide`: B's rows in
    /// registers, C's rows in a padded block in L1) where that is faster, with the loops
    /// compiled for `level`; false, touching nothing, where it is not.
    ///
    /// # Safety
    /// As for `gemm_thin_as` with the rows form, and `level` at most `level()`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn rows_in_registers(
        _m: usize,
        _n: usize,
        _k: usize,
        _a: MatRef<Self>,
        _b: MatRef<Self>,
        _c: &mut [Self],
        _threads: usize,
        _level: u8,
    ) -> bool {
        false
    }

    /// C = A B through `thin_half::gemm_rows_widened` (f32) or `gemm_rows_f64` (B's rows
    /// contiguous, up to 32 rows, with AVX2 or AVX-512) where it takes the product: returns
    /// false, touching nothing, where not.
    ///
    /// # Safety
    /// As for `gemm_thin`.
    unsafe fn rows_widened(
        _m: usize,
        _n: usize,
        _k: usize,
        _a: MatRef<Self>,
        _b: MatRef<Self>,
        _c: &mut [Self],
        _threads: usize,
    ) -> bool {
        false
    }
}

impl Thin for f32 {
    #[inline(always)]
    fn fma<const FUSED: bool>(a: f32, b: f32, c: f32) -> f32 {
        if FUSED {
            a.mul_add(b, c)
        } else {
            a * b + c
        }
    }
    const ZERO: f32 = 0.0;
    #[cfg(target_arch = "x86_64")]
    unsafe fn dot_wide(x: *const f32, y: *const f32, k: usize) -> f32 {
        dot_wide_f32(x, y, k)
    }
    /// From 3 rows with AVX-512. Zen 4, two threads, fresh processes, 2 runs, GFLOP/s, this
    /// against `rows_body` (PyTorch's): 1 x 1024 by 1024 x 1024 46-49 against 50-51 (19), 2 x
    /// 1024 34-63 against 55 (21), 4 x 1024 82-99 against 64-69 (31), 8 x 1024 142 against
    /// 53-59 (54), 8 x 4096 by 4096 x 4096 52-55 against 39-41 (36); 1 x 4096 level (16-17).
    unsafe fn rows_in_registers(
        m: usize,
        n: usize,
        k: usize,
        a: MatRef<f32>,
        b: MatRef<f32>,
        c: &mut [f32],
        threads: usize,
        level: u8,
    ) -> bool {
        if level < 2 || m < 3 {
            return false;
        }
        // SAFETY: the caller's contract, which is `thin_half::gemm_as`'s for the rows form.
        unsafe { super::thin_half::gemm_as(Form::Rows, m, n, k, a, b, c, threads, level) };
        true
    }

    unsafe fn rows_widened(
        m: usize,
        n: usize,
        k: usize,
        a: MatRef<f32>,
        b: MatRef<f32>,
        c: &mut [f32],
        threads: usize,
    ) -> bool {
        // SAFETY: the caller's contract.
        unsafe { super::thin_half::gemm_rows_widened(m, n, k, a, b, c, threads, false) }
    }
}

impl Thin for f64 {
    #[inline(always)]
    fn fma<const FUSED: bool>(a: f64, b: f64, c: f64) -> f64 {
        if FUSED {
            a.mul_add(b, c)
        } else {
            a * b + c
        }
    }
    const ZERO: f64 = 0.0;
    #[cfg(target_arch = "x86_64")]
    unsafe fn dot_wide(x: *const f64, y: *const f64, k: usize) -> f64 {
        dot_wide_f64(x, y, k)
    }

    unsafe fn rows_widened(
        m: usize,
        n: usize,
        k: usize,
        a: MatRef<f64>,
        b: MatRef<f64>,
        c: &mut [f64],
        threads: usize,
    ) -> bool {
        // SAFETY: the caller's contract.
        unsafe { super::thin_half::gemm_rows_f64(m, n, k, a, b, c, threads) }
    }
}

/// Which form of the thin path a product takes, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Form {
    /// C's rows as sums of B's rows (B's rows contiguous).
    Rows,
    /// Every element a dot product (A's rows and B's columns contiguous).
    Dots,
}

/// The form for an m x k by k x n product of `size`-byte elements, with L2 of `l2` bytes:
/// - rows, for up to `ROWS_MAX` rows of C where B's rows are contiguous and B is larger
///   than half of L2 (so read from memory, once: smaller, the tiles of the small path,
///   which keep C in registers, are faster: 1 x 512 by 512 x 512 85 GFLOP/s against 35);
/// - dots, for up to `DOTS_MAX` rows or columns of C where A's rows and B's columns are
///   contiguous, whatever the size: a transposed B otherwise goes through packing, which
///   gathers it column by column (8 x 512 by a transposed 512 x 512: 8 GFLOP/s).
pub(super) fn form<D>(
    m: usize,
    n: usize,
    k: usize,
    a: MatRef<D>,
    b: MatRef<D>,
    l2: usize,
) -> Option<Form> {
    let size = std::mem::size_of::<D>();
    if m == 0 || n == 0 || k == 0 {
        None
    } else if b.cs == 1 && m <= ROWS_MAX && k * n * size > l2 / 2 {
        Some(Form::Rows)
    } else if a.cs == 1 && b.rs == 1 && (m <= DOTS_MAX || n <= DOTS_MAX) {
        Some(Form::Dots)
    } else {
        None
    }
}

/// C = A B through the thin path where it applies (returns false, touching nothing,
/// where it does not): m x k by k x n, C row-major m x n.
///
/// # Safety
/// As for `gemm_with`: `a.at(i, p)` valid for i < m, p < k, `b.at(p, j)` for p < k, j < n,
/// `c` holds m * n elements; A and B are not written during the call.
pub(super) unsafe fn gemm_thin<D: Thin>(
    m: usize,
    n: usize,
    k: usize,
    a: MatRef<D>,
    b: MatRef<D>,
    c: &mut [D],
    threads: usize,
) -> bool {
    match form(m, n, k, a, b, super::kernel::Caches::of_this_machine().l2) {
        Some(f) => {
            gemm_thin_as(f, m, n, k, a, b, c, threads);
            true
        }
        None => false,
    }
}

/// C = A B in form `f`, on up to `threads` threads.
///
/// # Safety
/// As for `gemm_thin`, with m, n, k > 0 and the strides `form` asks for `f`: b.cs == 1 and
/// m <= ROWS_MAX for rows; unit column stride for A and unit row stride for B, and m or n
/// at most DOTS_MAX, for dots.
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_thin_as<D: Thin>(
    f: Form,
    m: usize,
    n: usize,
    k: usize,
    a: MatRef<D>,
    b: MatRef<D>,
    c: &mut [D],
    threads: usize,
) {
    let level = level();
    if f == Form::Rows && D::rows_in_registers(m, n, k, a, b, c, threads, level) {
        return;
    }
    let (by_cols, mut ranges) = parts(f, m, n, k, threads);
    let cp = OutPtr(c.as_mut_ptr());
    helper::for_each_part(&mut ranges, |_, r| {
        let r = r.clone();
        // SAFETY: the caller's contract covers A, B and C; each part writes only its own
        // columns (rows form, or dots with few rows) or rows (dots with few columns) of C,
        // which no other part writes, and nothing reads C until every part has returned.
        unsafe {
            match (f, by_cols) {
                (Form::Rows, _) => run_rows(level, m, k, a, b, cp.get(), n, r),
                (Form::Dots, true) => run_dots(level, 0..m, r, k, a, b, cp.get(), n),
                (Form::Dots, false) => run_dots(level, r, 0..n, k, a, b, cp.get(), n),
            }
        }
    });
}

/// How form `f` splits an m x k by k x n product between up to `threads` threads: whether by
/// C's columns (the rows form, and dots with few rows) or rows, and one range of them a
/// thread (whole vectors of 16 columns).
pub(super) fn parts(
    f: Form,
    m: usize,
    n: usize,
    k: usize,
    threads: usize,
) -> (bool, Vec<std::ops::Range<usize>>) {
    let by_cols = f == Form::Rows || m <= DOTS_MAX;
    let (large, unit) = if by_cols { (n, 16) } else { (m, 1) };
    let parts = if threads > 1 && m * n * k >= SPLIT_FLOPS {
        threads.min(large.div_ceil(unit)).max(1)
    } else {
        1
    };
    let per = large.div_ceil(parts).next_multiple_of(unit);
    let ranges = (0..parts)
        .map(|t| (t * per).min(large)..((t + 1) * per).min(large))
        .filter(|r| !r.is_empty())
        .collect();
    (by_cols, ranges)
}

/// Which compiled copy of the loops this CPU runs: 2 AVX-512, 1 AVX2 and FMA, 0 neither
/// (`kernel::usable`, so `ACCEL_CPU_KERNEL` holds here too).
pub(in crate::backend::cpu) fn level() -> u8 {
    static L: std::sync::OnceLock<u8> = std::sync::OnceLock::new();
    *L.get_or_init(|| {
        if super::kernel::usable("avx512") {
            2
        } else if super::kernel::usable("avx2") {
            1
        } else {
            0
        }
    })
}

/// The rows form for C's columns `cols`: C[i][j] = sum over p of A[i][p] B[p][j], i < m.
///
/// # Safety
/// As for `gemm_thin`, with b.cs == 1, m <= ROWS_MAX, `cols` inside 0..n and C's rows `ldc`
/// apart; no one else writes those columns of C during the call.
#[allow(clippy::too_many_arguments)]
unsafe fn run_rows<D: Thin>(
    level: u8,
    m: usize,
    k: usize,
    a: MatRef<D>,
    b: MatRef<D>,
    c: *mut D,
    ldc: usize,
    cols: std::ops::Range<usize>,
) {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f,avx512vl,fma")]
        #[allow(clippy::too_many_arguments)]
        unsafe fn wide<D: Thin>(
            m: usize,
            k: usize,
            a: MatRef<D>,
            b: MatRef<D>,
            c: *mut D,
            ldc: usize,
            cols: std::ops::Range<usize>,
        ) {
            rows_body::<D, true>(m, k, a, b, c, ldc, cols, true)
        }
        #[target_feature(enable = "avx2,fma")]
        #[allow(clippy::too_many_arguments)]
        unsafe fn avx2<D: Thin>(
            m: usize,
            k: usize,
            a: MatRef<D>,
            b: MatRef<D>,
            c: *mut D,
            ldc: usize,
            cols: std::ops::Range<usize>,
        ) {
            rows_body::<D, true>(m, k, a, b, c, ldc, cols, true)
        }
        match level {
            2 => return wide(m, k, a, b, c, ldc, cols),
            1 => return avx2(m, k, a, b, c, ldc, cols),
            _ => {}
        }
    }
    let _ = level;
    rows_body::<D, false>(m, k, a, b, c, ldc, cols, true)
}

/// The loops of the rows form (see `run_rows`), inlined into each compiled copy; with `zero`
/// false they add to C's values rather than replace them.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn rows_body<D: Thin, const FUSED: bool>(
    m: usize,
    k: usize,
    a: MatRef<D>,
    b: MatRef<D>,
    c: *mut D,
    ldc: usize,
    cols: std::ops::Range<usize>,
    zero: bool,
) {
    let block = (C_BLOCK_BYTES / std::mem::size_of::<D>() / m.max(1)).max(16) / 16 * 16;
    let mut j0 = cols.start;
    while j0 < cols.end {
        let w = block.min(cols.end - j0);
        for i in (0..m).filter(|_| zero) {
            std::slice::from_raw_parts_mut(c.add(i * ldc + j0), w).fill(D::ZERO);
        }
        // A macro, not a closure (see `dots_body`).
        macro_rules! brow {
            ($p:expr) => {
                std::slice::from_raw_parts(b.ptr.add($p * b.rs + j0), w)
            };
        }
        let mut p = 0;
        while p + 4 <= k {
            let (b0, b1, b2, b3) = (brow!(p), brow!(p + 1), brow!(p + 2), brow!(p + 3));
            for i in 0..m {
                let (a0, a1, a2, a3) = (a.at(i, p), a.at(i, p + 1), a.at(i, p + 2), a.at(i, p + 3));
                let crow = std::slice::from_raw_parts_mut(c.add(i * ldc + j0), w);
                for j in 0..w {
                    let s = D::fma::<FUSED>(a0, b0[j], crow[j]);
                    let s = D::fma::<FUSED>(a1, b1[j], s);
                    let s = D::fma::<FUSED>(a2, b2[j], s);
                    crow[j] = D::fma::<FUSED>(a3, b3[j], s);
                }
            }
            p += 4;
        }
        while p < k {
            let b0 = brow!(p);
            for i in 0..m {
                let a0 = a.at(i, p);
                let crow = std::slice::from_raw_parts_mut(c.add(i * ldc + j0), w);
                for j in 0..w {
                    crow[j] = D::fma::<FUSED>(a0, b0[j], crow[j]);
                }
            }
            p += 1;
        }
        j0 += w;
    }
}

/// The dots form for C's rows `rows` and columns `cols`: C[i][j] = A's row i . B's column j,
/// both contiguous (unit column stride for A, unit row stride for B).
///
/// # Safety
/// As for `gemm_thin`, with those strides, the ranges inside m and n, C's rows `ldc` apart;
/// no one else writes that block of C during the call.
#[allow(clippy::too_many_arguments)]
unsafe fn run_dots<D: Thin>(
    level: u8,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
    k: usize,
    a: MatRef<D>,
    b: MatRef<D>,
    c: *mut D,
    ldc: usize,
) {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f,avx512vl,fma")]
        #[allow(clippy::too_many_arguments)]
        unsafe fn wide<D: Thin>(
            rows: std::ops::Range<usize>,
            cols: std::ops::Range<usize>,
            k: usize,
            a: MatRef<D>,
            b: MatRef<D>,
            c: *mut D,
            ldc: usize,
        ) {
            dots_body::<D, true, true>(rows, cols, k, a, b, c, ldc)
        }
        #[target_feature(enable = "avx2,fma")]
        #[allow(clippy::too_many_arguments)]
        unsafe fn avx2<D: Thin>(
            rows: std::ops::Range<usize>,
            cols: std::ops::Range<usize>,
            k: usize,
            a: MatRef<D>,
            b: MatRef<D>,
            c: *mut D,
            ldc: usize,
        ) {
            dots_body::<D, true, false>(rows, cols, k, a, b, c, ldc)
        }
        match level {
            2 => return wide(rows, cols, k, a, b, c, ldc),
            1 => return avx2(rows, cols, k, a, b, c, ldc),
            _ => {}
        }
    }
    let _ = level;
    dots_body::<D, false, false>(rows, cols, k, a, b, c, ldc)
}

/// The loops of the dots form (see `run_dots`), inlined into each compiled copy. With few
/// columns, each row of A is read once from memory and its dots with the columns come from
/// L1; with few rows, each column of B the same way.
#[inline(always)]
unsafe fn dots_body<D: Thin, const FUSED: bool, const WIDE: bool>(
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
    k: usize,
    a: MatRef<D>,
    b: MatRef<D>,
    c: *mut D,
    ldc: usize,
) {
    // No closure here: a closure is compiled without its function's target features, and
    // `mul_add` outside an FMA context is a call into libm for every element.
    let few_cols = cols.len() <= rows.len();
    let (outer, inner) = if few_cols { (rows, cols) } else { (cols, rows) };
    for o in outer {
        for q in inner.clone() {
            let (i, j) = if few_cols { (o, q) } else { (q, o) };
            let (x, y) = (a.ptr.add(i * a.rs), b.ptr.add(j * b.cs));
            #[cfg(target_arch = "x86_64")]
            if WIDE {
                *c.add(i * ldc + j) = D::dot_wide(x, y, k);
                continue;
            }
            let (x, y) = (
                std::slice::from_raw_parts(x, k),
                std::slice::from_raw_parts(y, k),
            );
            *c.add(i * ldc + j) = dot::<D, FUSED>(x, y);
        }
    }
}

/// x . y in 64 lanes, summed in pairs at the end: the portable and AVX2 copies (LLVM keeps
/// the lanes on the stack here; the AVX-512 copy uses `Thin::dot_wide`).
#[inline(always)]
pub(super) fn dot<D: Thin, const FUSED: bool>(x: &[D], y: &[D]) -> D {
    const L: usize = 64;
    let mut acc = [D::ZERO; L];
    let (xc, yc) = (x.chunks_exact(L), y.chunks_exact(L));
    let mut tail = D::ZERO;
    for (&xv, &yv) in xc.remainder().iter().zip(yc.remainder()) {
        tail = D::fma::<FUSED>(xv, yv, tail);
    }
    for (xs, ys) in xc.zip(yc) {
        for l in 0..L {
            acc[l] = D::fma::<FUSED>(xs[l], ys[l], acc[l]);
        }
    }
    let mut w = L;
    while w > 1 {
        w /= 2;
        for l in 0..w {
            acc[l] = acc[l] + acc[l + w];
        }
    }
    acc[0] + tail
}

/// x . y for k elements in four AVX-512 accumulators, the tail one element at a time: the
/// generic `dot` left its lanes on the stack, and each FMA waited for the store of the one
/// before (a vector times a 4096 x 4096 matrix, transposed: 9-13 GFLOP/s).
macro_rules! dot_wide {
    ($name:ident, $t:ty, $lanes:expr, $zero:ident, $load:ident, $fma:ident, $add:ident, $reduce:ident) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx512f,fma")]
        pub(super) unsafe fn $name(x: *const $t, y: *const $t, k: usize) -> $t {
            use std::arch::x86_64::*;
            const V: usize = $lanes;
            let (mut a0, mut a1, mut a2, mut a3) = ($zero(), $zero(), $zero(), $zero());
            let mut p = 0;
            while p + 4 * V <= k {
                a0 = $fma($load(x.add(p)), $load(y.add(p)), a0);
                a1 = $fma($load(x.add(p + V)), $load(y.add(p + V)), a1);
                a2 = $fma($load(x.add(p + 2 * V)), $load(y.add(p + 2 * V)), a2);
                a3 = $fma($load(x.add(p + 3 * V)), $load(y.add(p + 3 * V)), a3);
                p += 4 * V;
            }
            while p + V <= k {
                a0 = $fma($load(x.add(p)), $load(y.add(p)), a0);
                p += V;
            }
            let mut s = $reduce($add($add(a0, a1), $add(a2, a3)));
            while p < k {
                s = (*x.add(p)).mul_add(*y.add(p), s);
                p += 1;
            }
            s
        }
    };
}
dot_wide!(
    dot_wide_f32,
    f32,
    16,
    _mm512_setzero_ps,
    _mm512_loadu_ps,
    _mm512_fmadd_ps,
    _mm512_add_ps,
    _mm512_reduce_add_ps
);
dot_wide!(
    dot_wide_f64,
    f64,
    8,
    _mm512_setzero_pd,
    _mm512_loadu_pd,
    _mm512_fmadd_pd,
    _mm512_add_pd,
    _mm512_reduce_add_pd
);

#[cfg(test)]
mod tests {
    use super::super::tests::values;
    use super::*;

    /// Every shape, both layouts of A and of B, one and two threads, and every compiled
    /// copy this CPU runs, against a naive loop in f64.
    fn check<D: Thin + Into<f64>>(to: impl Fn(f64) -> D, tol: f64) {
        let shapes = [
            (1, 1, 1),
            (1, 4096, 300),
            (1, 37, 1000),
            (3, 70, 5),
            (4, 300, 129),
            (8, 33, 64),
            (8, 1000, 7),
            (5, 17, 3),
            (300, 1, 1000),
            (129, 3, 70),
            (700, 4, 64),
        ];
        for (m, n, k) in shapes {
            let (af, bf) = (values(m * k, 1), values(k * n, 2));
            let (a, b): (Vec<D>, Vec<D>) = (
                af.iter().map(|&x| to(x)).collect(),
                bf.iter().map(|&x| to(x)).collect(),
            );
            let (af, bf): (Vec<f64>, Vec<f64>) = (
                a.iter().map(|&x| x.into()).collect(),
                b.iter().map(|&x| x.into()).collect(),
            );
            for (ars, acs) in [(k, 1), (1, m)] {
                for (brs, bcs) in [(n, 1), (1, k)] {
                    let want: Vec<f64> = (0..m * n)
                        .map(|e| {
                            (0..k)
                                .map(|p| af[(e / n) * ars + p * acs] * bf[p * brs + (e % n) * bcs])
                                .sum()
                        })
                        .collect();
                    let ar = MatRef {
                        ptr: a.as_ptr(),
                        rs: ars,
                        cs: acs,
                    };
                    let br = MatRef {
                        ptr: b.as_ptr(),
                        rs: brs,
                        cs: bcs,
                    };
                    let rows = bcs == 1 && m <= ROWS_MAX;
                    let dots = acs == 1 && brs == 1 && (m <= DOTS_MAX || n <= DOTS_MAX);
                    // Which form `form` picks: rows only where B is larger than half of L2.
                    let l2 = 64 << 10;
                    let want_form = if rows && k * n * std::mem::size_of::<D>() > l2 / 2 {
                        Some(Form::Rows)
                    } else if dots {
                        Some(Form::Dots)
                    } else {
                        None
                    };
                    assert_eq!(
                        form(m, n, k, ar, br, l2),
                        want_form,
                        "{m}x{n}x{k} a ({ars}, {acs}) b ({brs}, {bcs})"
                    );
                    // Each form that applies, on one and two threads.
                    for f in [Form::Rows, Form::Dots] {
                        if (f == Form::Rows && !rows) || (f == Form::Dots && !dots) {
                            continue;
                        }
                        for threads in [1, 2] {
                            let mut c = vec![to(7.0); m * n];
                            // SAFETY: the views cover the m x k and k x n values above; c holds
                            // m * n; the strides are those form `f` needs (checked above).
                            unsafe { gemm_thin_as(f, m, n, k, ar, br, &mut c, threads) };
                            for (e, (g, w)) in c.iter().zip(&want).enumerate() {
                                let g: f64 = (*g).into();
                                assert!(
                                    (g - w).abs() <= tol * k as f64,
                                    "{f:?} {m}x{n}x{k} a ({ars}, {acs}) b ({brs}, {bcs}) threads {threads} at {e}: {g}, naive {w}"
                                );
                            }
                        }
                    }
                    // gemm_thin takes a product exactly where `form` says, and leaves C alone
                    // where it does not.
                    let mut c = vec![to(7.0); m * n];
                    // SAFETY: as above.
                    let took = unsafe { gemm_thin(m, n, k, ar, br, &mut c, 2) };
                    let l2 = super::super::kernel::Caches::of_this_machine().l2;
                    assert_eq!(took, form(m, n, k, ar, br, l2).is_some());
                    if !took {
                        assert!(
                            c.iter().all(|&x| x.into() == 7.0),
                            "a refused product wrote C"
                        );
                    }
                    // Every compiled copy this CPU can run, on one thread.
                    for lv in 0..=level() {
                        let mut c = vec![to(7.0); m * n];
                        // SAFETY: as above; level lv's features are on this CPU (lv <= level()).
                        unsafe {
                            if dots {
                                run_dots(lv, 0..m, 0..n, k, ar, br, c.as_mut_ptr(), n);
                            } else if rows {
                                run_rows(lv, m, k, ar, br, c.as_mut_ptr(), n, 0..n);
                            } else {
                                continue;
                            }
                        }
                        for (g, w) in c.iter().zip(&want) {
                            let g: f64 = (*g).into();
                            assert!(
                                (g - w).abs() <= tol * k as f64,
                                "level {lv} {m}x{n}x{k}: {g}, naive {w}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn thin_products_match_the_naive_loop() {
        check::<f32>(|x| x as f32, 1e-6);
        check::<f64>(|x| x, 1e-14);
    }
}
