//! bf16 and f16 products with few rows or columns, accumulated in f32: `thin`'s two forms
//! (`thin::form`, the same shapes) for 16-bit floats, where they pay (`pays`). The blocked
//! path packs all of B (pairs for AVX512_BF16, or widened to f32) and runs tiles of 14 rows
//! of which one is wanted: a bf16 vector times a transposed 1024 x 1024 matrix (a Linear
//! layer on one token) ran at 13-16 GFLOP/s, PyTorch's at 42-47 (Zen 4, two threads). Here
//! the large operand is read once. With AVX-512, in the dots form (`Part::dots_blocked`)
//! each of its vectors meets the few vectors of the other side in L1: bf16 with AVX512_BF16
//! as it is, 32 pairs a `vdpbf16ps` (`dots_pairs`), else widened to f32 once, the large side
//! 16 values at a time in registers (`widened::dots_wide_avx512`); in the rows form B's rows are widened in
//! registers too (bf16 with AVX512_BF16: interleaved into pairs, `rows_pairs`) and added
//! into C's rows held in L1 (`rows_wide`). With AVX2 (and F16C) the dots form widens 8
//! values at a time in registers (`widened::dots_wide_avx2`); elsewhere, and in the rows form on
//! AVX2, the large side is widened a run at a time into a buffer in L1
//! (`PackInto::conv_run`: a shift for bf16, F16C for f16) and multiplied there by `thin`'s
//! f32 loops. A bf16 `x @ W.t()` on 3 to 128 rows goes to `dot_tiles::gemm_bf16` instead
//! (`pays`). `x @ W` (B's rows contiguous) on up to 32 rows, B at most a quarter of L3,
//! goes first to C's tiles in registers: bf16 with AVX512_BF16 (`gemm_rows`), else B
//! widened as it is read (`gemm_rows_widened`: f16, and bf16 without AVX512_BF16; f32 from
//! 4 rows; with AVX2 or AVX-512).

use super::helper;
use super::kernel::Caches;
use super::pack::{MatRef, OutPtr, PackInto};
use super::thin::{self, Form};

#[cfg(target_arch = "x86_64")]
mod avx512;
#[cfg(target_arch = "x86_64")]
mod widened;
#[cfg(target_arch = "x86_64")]
use avx512::{dots_pairs, dots_pairs_many, rows_pairs, rows_tiles, rows_wide, FEW_BYTES};

/// Values of a row of A or a column of B widened at a time in the dots form (1 KiB of f32,
/// in L1 beside the same pieces of the few f32 vectors it meets).
const RUN: usize = 256;
/// The rows form's block of B widened at a time: `ROWS_B` rows (the rows `thin::rows_body`
/// takes in one pass over C) of `COLS` columns (32 KiB of f32, beside C's rows, at most 16
/// KiB for the 2 rows `pays` lets through). Against 512 columns (8 KiB), bf16 1 x 4096 by
/// 4096 x 4096 read 12.5-15.4 GFLOP/s against 6.6-11.0: B's rows in longer pieces.
const ROWS_B: usize = 4;
const COLS: usize = 2048;

/// The element types of this path, bf16 and f16, and f32 for the rows form from 3 rows
/// (`Thin::rows_in_registers`): widened a run at a time (`PackInto::conv_run`), or, with
/// AVX-512, 16 at a time in a register (`load16`).
pub(super) trait Half: PackInto<f32> + Copy + Sync {
    /// Whether this is bf16 (which AVX512_BF16 multiplies in pairs as it is: `dots_pairs`).
    const BF16: bool;
    /// 16 values from `p` widened to f32.
    ///
    /// # Safety
    /// `p` readable for 16 values; the CPU has AVX-512F.
    #[cfg(target_arch = "x86_64")]
    unsafe fn load16(p: *const Self) -> std::arch::x86_64::__m512;
    /// 8 values from `p` widened to f32.
    ///
    /// # Safety
    /// `p` readable for 8 values; the CPU has AVX2 and F16C.
    #[cfg(target_arch = "x86_64")]
    unsafe fn load8(p: *const Self) -> std::arch::x86_64::__m256;
}

impl Half for half::bf16 {
    const BF16: bool = true;
    #[cfg(target_arch = "x86_64")]
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn load16(p: *const Self) -> std::arch::x86_64::__m512 {
        use std::arch::x86_64::*;
        let w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(p as *const __m256i));
        _mm512_castsi512_ps(_mm512_slli_epi32::<16>(w))
    }
    #[cfg(target_arch = "x86_64")]
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn load8(p: *const Self) -> std::arch::x86_64::__m256 {
        use std::arch::x86_64::*;
        let w = _mm256_cvtepu16_epi32(_mm_loadu_si128(p as *const __m128i));
        _mm256_castsi256_ps(_mm256_slli_epi32::<16>(w))
    }
}

impl Half for f32 {
    const BF16: bool = false;
    #[cfg(target_arch = "x86_64")]
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn load16(p: *const Self) -> std::arch::x86_64::__m512 {
        std::arch::x86_64::_mm512_loadu_ps(p)
    }
    #[cfg(target_arch = "x86_64")]
    #[inline]
    #[target_feature(enable = "avx")]
    unsafe fn load8(p: *const Self) -> std::arch::x86_64::__m256 {
        std::arch::x86_64::_mm256_loadu_ps(p)
    }
}

impl Half for half::f16 {
    const BF16: bool = false;
    #[cfg(target_arch = "x86_64")]
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn load16(p: *const Self) -> std::arch::x86_64::__m512 {
        use std::arch::x86_64::*;
        _mm512_cvtph_ps(_mm256_loadu_si256(p as *const __m256i))
    }
    #[cfg(target_arch = "x86_64")]
    #[inline]
    #[target_feature(enable = "avx,f16c")]
    unsafe fn load8(p: *const Self) -> std::arch::x86_64::__m256 {
        use std::arch::x86_64::*;
        _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i))
    }
}

/// Whether this path is faster here than the blocked one for form `f` (which the shape
/// takes), `native` where the blocked one multiplies 16-bit values as they are (AVX512_BF16
/// or AMX) rather than widened to f32, with the loops compiled for `level`.
///
/// Measured on Zen 4 (two threads, GFLOP/s; this path against the blocked one, calls of
/// each alternated in one process, median ratio; PyTorch's in brackets where timed):
/// - rows form (B k x n), with AVX-512 (`rows_wide`) every shape it takes (up to 8 rows):
///   bf16 1 x 1024 by 1024 x 1024 80-83 against 10 (PyTorch 49), 2 x 1024 83-102 against
///   19-21 (62), 1 x 4096 by 4096 x 4096 49 against 7-12 (18); against the blocked path
///   (AVX512_BF16) alternated in one process: 3 x 1024 4.8x, 4 x 1024 0.95x and 1.56x (two
///   sessions of calls), 5 x 1024 1.62x, 6 x 1024 1.36x, 8 x 1024 1.24x, 4 x 4096 1.61x,
///   8 x 4096 1.35x; f16 4 x 1024 4.0x, 8 x 1024 2.7x, 8 x 4096 2.5x. Elsewhere (the run
///   widened into L1, `thin::rows_body`) up to 2 rows: bf16 1 x 1024 24-35 against 10, 2 x
///   1024 41-49 against 19-21; 4 x 1024 lost (73 against 78).
/// - dots form (B transposed, as a Linear layer's weight), bf16 with AVX512_BF16
///   (`dots_pairs`): 1 x 1024 by 1024 x 1024 76-93 against 13-14 (42-44), 2 x 1024 111-175
///   against 29 (46-48), 1 x 4096 by 4096 x 4096 21-54 against 8-10 (45-54), 1024 x 1024 by a
///   vector 63-79 against 7 (55-62); few rows: 3 x 1024 3.9x, 4 x 1024 1.35x, 5 x 1024 1.20x,
///   6 x 1024 1.05x, 8 x 1024 0.92x, 4 x 4096 1.78x, 6 x 4096 1.13x, 8 x 4096 0.97x, 8 x 2048
///   1.12x; few columns (B's, the many vectors A's rows): 4096 x 3 by 3 x 4096 1.66x, 2048 x
///   4 1.00x, 1024 x 8 by 8 x 4096 0.99x, 4096 x 8 0.63x. So up to 4 columns there, and
///   2 rows: from 3 rows `dot_tiles::gemm_bf16`'s tiles take them, faster still (3 x 1024
///   1.70x this path, 4 x 1024 2.02x, 6 x 1024 1.63x, 3 x 4096 2.28x, 6 x 4096 2.01x).
/// - f16 (no native kernel: the blocked one widens to f32): 8 x 4096 2.28x, 4 x 4096 4.6x,
///   4096 x 8 1.18x, 8 x 1024 1.00x: every shape the form takes.
/// - With AVX2 (`level` 1, `ACCEL_CPU_KERNEL=avx2` on Zen 4; the blocked path widens to
///   f32 there): the dots form widened 8 at a time in registers (`widened::dots_wide_avx2`) against
///   the run widened into L1 and `thin`'s loops (1-2 few vectors): bf16 1 x 1024 by a
///   transposed 1024 x 1024 4.98x, 2 x 1024 4.09x, 1 x 4096 by 4096 x 4096 2.20x, 1024 x
///   1024 by a vector 4.64x; f16 6.47x, 5.85x, 2.69x, 5.08x; and against the blocked path
///   (3-8 few vectors): bf16 4 x 1024 5.97x, 8 x 1024 2.92x, 8 x 4096 2.22x, 1024 x 8 by
///   1024 4.15x; f16 8.43x, 3.43x, 2.43x, 3.47x. So every count of few vectors there.
fn pays(f: Form, m: usize, n: usize, native: bool, level: u8) -> bool {
    let few_rows = m <= thin::DOTS_MAX;
    let few = if few_rows { m } else { n };
    // `widened::dots_wide_avx2` widens f16 with F16C.
    let vector = level == 2 || (level == 1 && f16c());
    match f {
        Form::Rows => m <= 2 || level == 2,
        Form::Dots => few <= 2 || (vector && (!native || (!few_rows && few <= 4))),
    }
}

/// C = A B (C in f32) through the thin path where `thin::form` takes the shape and it `pays`
/// (returns false, touching nothing, where not): m x k by k x n, C row-major m x n; `native`
/// as for `pays`.
///
/// # Safety
/// As for `thin::gemm_thin`.
pub(super) unsafe fn gemm<S: Half>(
    m: usize,
    n: usize,
    k: usize,
    a: MatRef<S>,
    b: MatRef<S>,
    c: &mut [f32],
    threads: usize,
    native: bool,
) -> bool {
    let f = thin::form(m, n, k, a, b, Caches::of_this_machine().l2);
    let level = thin::level();
    let Some(f) = f.filter(|&f| pays(f, m, n, native, level)) else {
        return false;
    };
    gemm_as(f, m, n, k, a, b, c, threads, level);
    true
}

/// Most rows of C `gemm_rows` takes.
const ROWS_TILES_MAX: usize = 32;

/// Whether `gemm_rows` takes an m x k by k x n bf16 product with B's rows contiguous here:
/// AVX512_BF16 (with AVX512BW and AVX-512 allowed), up to ROWS_TILES_MAX rows (8 where
/// `amx`, the blocked path on AMX's tiles: untimed, so only where the product reads B once
/// either way), B at most a quarter of L3, and, beyond 8 rows, at least 128 columns. Zen 4,
/// two threads, calls alternated in one process, median ratio (GFLOP/s):
/// - against the rows form's `rows_pairs` (C's rows in L1): 1 x 1024 by 1024 x 1024 1.18x,
///   2 x 1024 1.38x, 4 x 1024 2.23x (232 against 101), 8 x 1024 1.45x (260 against 188),
///   4 x 2048 by 2048 x 2048 1.80x, 8 x 4096 by 4096 x 1024 1.21x, 8 x 1024 by 1024 x 4096
///   1.25x; B of 32 MiB (from memory rather than L3) lost: 1 x 4096 by 4096 x 4096 0.67x,
///   2 x 4096 0.67x, 4 x 4096 0.87x, 8 x 4096 0.96x (B's slab walked down k, 128 bytes a
///   row 8 KiB apart, against `rows_pairs`' long runs of B's rows; nor did 4-64 rows of B
///   at a time with C added to between them win);
/// - against the blocked path (B packed into pairs): 4 x 256 by 256 x 256 2.91x, 8 x 512
///   3.63x, 16 x 1024 1.46x-1.51x, 24 x 1024 1.32x, 32 x 1024 1.02x, 64 x 1024 0.83x, 16 x
///   2048 0.98x, 16 x 4096 0.77x (B 32 MiB), 16 x 128 by 128 x 128 1.06x, 24 x 256 1.38x;
///   with few columns, 16 x 64 by 64 x 64 0.65x, 16 x 64 by 1024 x 64 0.69x.
fn rows_takes(m: usize, n: usize, k: usize, b: MatRef<half::bf16>, amx: bool) -> bool {
    rows_shape(m, n, k, b, amx) && thin::level() == 2 && super::dot_tiles::bf16_pairs_usable()
}

/// The shape both kinds of C's tiles in registers take (`rows_takes`,
/// `rows_widened_takes`): B's rows contiguous, 1 to ROWS_TILES_MAX rows (8 where `native`,
/// the blocked path on AMX's tiles), beyond 8 rows at least 128 columns, B at most a
/// quarter of L3.
fn rows_shape<S>(m: usize, n: usize, k: usize, b: MatRef<S>, native: bool) -> bool {
    let most = if native {
        thin::DOTS_MAX
    } else {
        ROWS_TILES_MAX
    };
    let l3 = Caches::of_this_machine().l3;
    b.cs == 1
        && (1..=most).contains(&m)
        && (m <= thin::DOTS_MAX || n >= 128)
        && n > 0
        && k > 0
        && k * n * std::mem::size_of::<S>() <= l3 / 4
}

/// Runs `tiles(a, c, cols, slab)` on each thread's share of C's columns (`thin::parts`),
/// `a` A's m rows copied together k apart (converted by `to`), `slab` the columns whose k
/// rows of B (`size` bytes a value) take half of L2.
///
/// # Safety
/// As for `thin::gemm_thin`; `tiles` may write C only at the columns it is given.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
unsafe fn split_columns<S: Copy, T: Sync, D: Send + Copy>(
    m: usize,
    n: usize,
    k: usize,
    a: MatRef<S>,
    c: &mut [D],
    threads: usize,
    size: usize,
    to: impl Fn(S) -> T,
    tiles: impl Fn(*const T, *mut D, std::ops::Range<usize>, usize) + Sync,
) {
    let rows: Vec<T> = (0..m * k).map(|e| to(a.at(e / k, e % k))).collect();
    let (_, mut ranges) = thin::parts(Form::Rows, m, n, k, threads);
    let slab = (Caches::of_this_machine().l2 / 2 / (size * k)).clamp(32, 1024) / 32 * 32;
    let cp = OutPtr(c.as_mut_ptr());
    helper::for_each_part(&mut ranges, |_, r| {
        tiles(rows.as_ptr(), cp.get(), r.clone(), slab)
    });
}

/// bf16 C = A B for B's rows contiguous (k x n, `x @ W`) with AVX512_BF16 where
/// `rows_takes` says so (returns false, touching nothing, where not), on up to `threads`
/// threads (`amx` as for `rows_takes`): A's rows copied together, C's columns split between
/// the threads, each share through `rows_tiles` in slabs whose k rows of B take half of L2
/// (a quarter, an eighth or all of it: within the noise at 8 to 64 x 1024 by 1024 x 1024).
///
/// # Safety
/// As for `thin::gemm_thin`.
pub(super) unsafe fn gemm_rows(
    m: usize,
    n: usize,
    k: usize,
    a: MatRef<half::bf16>,
    b: MatRef<half::bf16>,
    c: &mut [f32],
    threads: usize,
    amx: bool,
) -> bool {
    if !rows_takes(m, n, k, b, amx) {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    {
        let tiles = |a, c, cols, slab| {
            // SAFETY: `a` holds m rows of k values; the caller's contract covers B and C;
            // each part writes only its own columns of C, which no other part touches; the
            // CPU has what `rows_tiles` needs (`rows_takes`).
            unsafe { rows_tiles(m, k, a, k, b, c, n, cols, slab) }
        };
        split_columns(m, n, k, a, c, threads, 2, |x| x, tiles);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (a, c, threads);
    true
}

/// Whether the CPU has F16C (every x86 CPU with AVX2 we know of; checked all the same,
/// since `widened::dots_wide_avx2` and `widened::rows_tiles_avx2` widen f16 with it and are
/// compiled with it).
fn f16c() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether `gemm_rows_widened` takes an m x k by k x n product with B's rows contiguous
/// here: up to ROWS_TILES_MAX rows (8 where `native`, the blocked path on AMX's tiles:
/// untimed), B at most a quarter of L3, and, beyond 8 rows, at least 128 columns; f32 from
/// 4 rows with AVX2 or AVX-512; bf16 and f16 from 1 row where AVX2 is the best this process
/// runs (`thin::level` 1, and F16C), from 3 with AVX-512 (bf16 only where AVX512_BF16 is
/// missing: else `gemm_rows` takes it first). Against the paths before (Zen 4, two threads,
/// calls alternated in one process, median ratio; AVX2 with `ACCEL_CPU_KERNEL=avx2`, the
/// blocked path widening to f32 there):
/// - AVX2, against `thin`'s and `thin_half`'s rows form (up to 8 rows) or the blocked
///   path: f32 4 x 1024 by 1024 x 1024 1.24x, 8 x 1024 1.27x, 16 x 1024 1.35x, 32 x 1024
///   1.35x, 4 x 1000 by 1000 x 1000 1.49x, 4 x 256 by 256 x 256 1.35x; from 1 to 3 rows
///   f32 lost (1 x 1024 0.25x, 2 x 1024 0.81x, 3 x 2048 by 512 x 2048 0.68x: B's rows 4 or
///   8 KiB apart, walked down k in pieces of a vector or four, against long runs of them);
///   bf16 1 x 1024 1.79x, 4 x 1024 2.37x, 8 x 1024 1.65x, 16 x 1024 1.11x, 32 x 1024 1.00x,
///   1 x 2048 by 2048 x 2048 1.36x; f16 1 x 1024 4.36x, 4 x 1024 3.93x, 8 x 1024 2.41x, 16 x
///   1024 1.53x, 32 x 1024 1.13x; 1 x 4096 by 4096 x 4096 (B of 32 MiB, not taken) level.
/// - AVX-512, against `Thin::rows_in_registers` and `rows_wide` (C's rows in L1, up to 8
///   rows) or the blocked path: f32 4 x 1024 by 1024 x 1024 2.17x (146 GFLOP/s against 67),
///   8 x 1024 1.26x, 12 x 1024 2.23x, 16 x 1024 2.40x, 32 x 1024 1.22x, 4 x 1000 by 1000 x
///   1000 2.15x, 16 x 256 by 256 x 256 1.40x, 32 x 512 by 512 x 2048 1.22x; 3 x 1024 0.91x
///   but 3 x 512 1.30x; f16 2 x 1024 1.14x, 4 x 1024 1.07x, 8 x 1024 1.03x, 16 x 1024
///   1.53x, 32 x 1024 1.04x, 4 x 256 by 256 x 256 1.99x; 1 x 1024 0.96x and 1 x 2048 by
///   2048 x 2048 0.78x (so from 3 rows).
/// - AVX2, f32 from 13 rows with B's rows a multiple of 4 KiB apart: not taken. Each group
///   of 6 rows reads B's slab again, and such rows fall into a few sets of L2 as well as L1,
///   so from L3, a line of a row (a page further) at a time: B packed by the blocked path
///   (`small::takes`) read 1.10-1.38x this path at 13 to 32 x 1024 by 1024 x 1024 and 32 x
///   2048 by 1024 x 2048 (calls alternated in one process); at 4 to 12 rows this path
///   stays ahead (1.16-1.51x, 10 rows level).
fn rows_widened_takes<S>(m: usize, n: usize, k: usize, b: MatRef<S>, native: bool) -> bool {
    let f16c = f16c();
    let here = match (thin::level(), std::mem::size_of::<S>()) {
        (1, 2) => f16c,
        (2, 2) => m >= 3,
        (1, 4) => m >= 4 && f16c && (m <= 12 || !(b.rs * 4).is_multiple_of(4096)),
        (2, 4) => m >= 4 && f16c,
        _ => false,
    };
    here && rows_shape(m, n, k, b, native)
}

/// C = A B (C in f32) for B's rows contiguous (k x n, `x @ W`) with B widened as it is read
/// where `rows_widened_takes` says so (returns false, touching nothing, where not), on up
/// to `threads` threads: A's rows widened to f32 together, C's columns split between the
/// threads, each share through `widened::rows_tiles_avx512` (or `_avx2`) in slabs whose k
/// rows of B take half of L2.
///
/// # Safety
/// As for `thin::gemm_thin`.
pub(super) unsafe fn gemm_rows_widened<S: Half>(
    m: usize,
    n: usize,
    k: usize,
    a: MatRef<S>,
    b: MatRef<S>,
    c: &mut [f32],
    threads: usize,
    native: bool,
) -> bool {
    if !rows_widened_takes(m, n, k, b, native) {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    {
        let copies = [widened::rows_tiles_avx2, widened::rows_tiles_avx512];
        // SAFETY: the caller's contract; the CPU has AVX-512F (level 2) or AVX2, FMA and
        // F16C (`rows_widened_takes`).
        unsafe { run_widened(m, n, k, a, b, c, threads, |x: S| x.conv(), copies) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (a, c, threads);
    true
}

/// One compiled copy of `widened_rows!`'s slabs and groups (`widened::rows_tiles_avx2`
/// and the like): (m, k, A, lda, B, C, ldc, C's columns, slab).
#[cfg(target_arch = "x86_64")]
type Widened<S, T> = unsafe fn(
    usize,
    usize,
    *const T,
    usize,
    MatRef<S>,
    *mut T,
    usize,
    std::ops::Range<usize>,
    usize,
);

/// C = A B through `split_columns` and one of `copies` (AVX2, AVX-512): the AVX-512 one
/// where `thin::level` is 2; A's values converted by `to`.
///
/// # Safety
/// As for `thin::gemm_thin` with B's rows contiguous, and the CPU has the features of the
/// copy `thin::level` picks.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
unsafe fn run_widened<S: Copy + Sync, T: Copy + Send + Sync>(
    m: usize,
    n: usize,
    k: usize,
    a: MatRef<S>,
    b: MatRef<S>,
    c: &mut [T],
    threads: usize,
    to: impl Fn(S) -> T,
    copies: [Widened<S, T>; 2],
) {
    let tiles = copies[usize::from(thin::level() == 2)];
    let size = std::mem::size_of::<S>();
    split_columns(m, n, k, a, c, threads, size, to, |a, c, cols, slab| {
        // SAFETY: `a` holds m rows of k values (`split_columns`); the caller's contract
        // covers B, C and the CPU's features; each part writes only its own columns of C,
        // which no other part touches.
        unsafe { tiles(m, k, a, k, b, c, n, cols, slab) }
    });
}

/// Whether `gemm_rows_f64` takes an m x k by k x n f64 product with B's rows contiguous:
/// with AVX-512 3 to 32 rows, with AVX2 (and FMA) 2 to 10, and `rows_shape`. Before, up
/// to 8 rows took `thin`'s rows form (C's rows in L1, B's rows added in 4 at a time) and
/// more the blocked path. Measured on Zen 4, two threads, calls alternated in one process
/// (median ratio against the paths before): AVX-512 3 x 1024 by 1024 x 1024 2.9x, 4 x 1024
/// 2.0x, 8 x 1024 1.95x, 16 x 1024 1.65x, 24 x 1000 by 1000 x 1000 2.4x, 32 x 1024 1.25x,
/// 4 x 1000 2.3x, 16 x 512 by 512 x 512 1.44x; 2 x 1024 level, 1 x 1024 0.42x; AVX2
/// (`ACCEL_CPU_KERNEL=avx2`, 6 rows a group against 8) 2 x 1024 1.41x, 4 x 1024 2.1x, 8 x
/// 1000 1.26x, 10 x 1000 1.36x; 12 x 1000 0.67x, 16 x 1024 0.83x, 32 x 1024 0.71x.
fn rows_f64_takes(m: usize, n: usize, k: usize, b: MatRef<f64>) -> bool {
    let rows = match thin::level() {
        2 => 3..=32,
        1 => 2..=10,
        _ => return false,
    };
    rows.contains(&m) && rows_shape(m, n, k, b, false)
}

/// C = A B for f64 with B's rows contiguous (k x n, `x @ W`) where `rows_f64_takes` says
/// so (returns false, touching nothing, where not), on up to `threads` threads: A's rows
/// copied together, C's columns split between the threads, each share through
/// `widened::rows_tiles_f64_avx512` (or `_avx2`) in slabs whose k rows of B take half of L2.
///
/// # Safety
/// As for `thin::gemm_thin`.
pub(super) unsafe fn gemm_rows_f64(
    m: usize,
    n: usize,
    k: usize,
    a: MatRef<f64>,
    b: MatRef<f64>,
    c: &mut [f64],
    threads: usize,
) -> bool {
    if !rows_f64_takes(m, n, k, b) {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    {
        let copies = [widened::rows_tiles_f64_avx2, widened::rows_tiles_f64_avx512];
        // SAFETY: the caller's contract; the CPU has AVX-512F (level 2) or AVX2 and FMA
        // (`rows_f64_takes`).
        unsafe { run_widened(m, n, k, a, b, c, threads, |x| x, copies) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (a, c, threads);
    true
}

/// C = A B in form `f` on up to `threads` threads, with the loops compiled for `level`
/// (`thin::level`'s numbering).
///
/// # Safety
/// As for `thin::gemm_thin_as`, and `level` at most `thin::level()`.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn gemm_as<S: Half>(
    f: Form,
    m: usize,
    n: usize,
    k: usize,
    a: MatRef<S>,
    b: MatRef<S>,
    c: &mut [f32],
    threads: usize,
    level: u8,
) {
    let (by_cols, mut ranges) = thin::parts(f, m, n, k, threads);
    // The few vectors, widened once, k values each: A's rows where the threads split C's
    // columns (the rows form, dots with few rows), else B's columns.
    // SAFETY (both): v < m and p < k for A, p < k and v < n for B: the caller's contract.
    let (count, at): (usize, &dyn Fn(usize, usize) -> S) = if by_cols {
        (m, &|v, p| unsafe { a.at(v, p) })
    } else {
        (n, &|v, p| unsafe { b.at(p, v) })
    };
    // bf16 with AVX512_BF16 keeps them as they are (`dots_pairs`, `rows_pairs`).
    let pairs = S::BF16
        && level == 2
        && match f {
            Form::Dots => super::kernel::bf16_dot_usable(),
            Form::Rows => super::dot_tiles::bf16_pairs_usable(),
        };
    let (mut few, mut few16) = (Vec::new(), Vec::new());
    if pairs {
        few16 = (0..count * k).map(|e| at(e / k, e % k)).collect();
    } else {
        few = (0..count * k).map(|e| at(e / k, e % k).conv()).collect();
    }
    let few = MatRef {
        ptr: few.as_ptr(),
        rs: k,
        cs: 1,
    };
    let few16 = MatRef {
        ptr: few16.as_ptr(),
        rs: k,
        cs: 1,
    };
    let cp = OutPtr(c.as_mut_ptr());
    helper::for_each_part(&mut ranges, |_, r| {
        let part = Part {
            f,
            by_cols,
            range: r.clone(),
            m,
            n,
            k,
            a,
            b,
            few,
            few16,
            pairs,
            c: cp.get(),
        };
        // SAFETY: the caller's contract covers A, B and C; `few` (or `few16` with `pairs`)
        // holds count * k values and lives until every part has returned; each part writes
        // only its own columns (by
        // columns) or rows of C, which no other part writes, and nothing reads C until
        // every part has returned.
        unsafe { part.run(level) };
    });
}

/// One thread's share of a product: C's columns (`by_cols`) or rows `range`.
struct Part<S> {
    f: Form,
    by_cols: bool,
    range: std::ops::Range<usize>,
    m: usize,
    n: usize,
    k: usize,
    a: MatRef<S>,
    b: MatRef<S>,
    /// The few vectors in f32 (`gemm_as`), k apart; with `pairs`, in bf16 (`few16`, S is
    /// bf16, and `few` is empty).
    few: MatRef<f32>,
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    few16: MatRef<S>,
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pairs: bool,
    /// C's first element, rows n apart.
    c: *mut f32,
}

impl<S: Half> Part<S> {
    /// # Safety
    /// As for `gemm_as`, for this part; `level` at most `thin::level()`.
    unsafe fn run(&self, level: u8) {
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx512f,avx512vl,fma")]
            unsafe fn wide<S: Half>(p: &Part<S>) {
                p.body::<true, true>()
            }
            #[target_feature(enable = "avx2,fma")]
            unsafe fn avx2<S: Half>(p: &Part<S>) {
                p.body::<true, false>()
            }
            match level {
                2 => return wide(self),
                1 => return avx2(self),
                _ => {}
            }
        }
        let _ = level;
        self.body::<false, false>()
    }

    /// The loops, inlined into each compiled copy (`thin::dots_body`'s note on closures
    /// holds here too).
    #[inline(always)]
    unsafe fn body<const FUSED: bool, const WIDE: bool>(&self) {
        let Part {
            m,
            n,
            k,
            a,
            b,
            few,
            c,
            ..
        } = *self;
        if self.f == Form::Rows {
            #[cfg(target_arch = "x86_64")]
            if WIDE && self.pairs {
                let r = self.range.clone();
                // S is bf16 (`gemm_as` sets `pairs` only then).
                let (a, ld) = (self.few16.ptr as *const half::bf16, n);
                let b = MatRef {
                    ptr: b.ptr as *const half::bf16,
                    rs: b.rs,
                    cs: b.cs,
                };
                return match m {
                    1 => rows_pairs::<1>(k, a, b, c, ld, r),
                    2 => rows_pairs::<2>(k, a, b, c, ld, r),
                    3 => rows_pairs::<3>(k, a, b, c, ld, r),
                    4 => rows_pairs::<4>(k, a, b, c, ld, r),
                    5 => rows_pairs::<5>(k, a, b, c, ld, r),
                    6 => rows_pairs::<6>(k, a, b, c, ld, r),
                    7 => rows_pairs::<7>(k, a, b, c, ld, r),
                    _ => rows_pairs::<8>(k, a, b, c, ld, r),
                };
            }
            #[cfg(target_arch = "x86_64")]
            if WIDE {
                let r = self.range.clone();
                let (a, ld) = (few.ptr, n);
                return match m {
                    1 => rows_wide::<S, 1>(k, a, b, c, ld, r),
                    2 => rows_wide::<S, 2>(k, a, b, c, ld, r),
                    3 => rows_wide::<S, 3>(k, a, b, c, ld, r),
                    4 => rows_wide::<S, 4>(k, a, b, c, ld, r),
                    5 => rows_wide::<S, 5>(k, a, b, c, ld, r),
                    6 => rows_wide::<S, 6>(k, a, b, c, ld, r),
                    7 => rows_wide::<S, 7>(k, a, b, c, ld, r),
                    _ => rows_wide::<S, 8>(k, a, b, c, ld, r),
                };
            }
            // B's rows are contiguous (`thin::form`): widen a block of them, then add its
            // products to C's columns with the f32 loop.
            let mut buf = [0f32; ROWS_B * COLS];
            let mut j0 = self.range.start;
            while j0 < self.range.end {
                let w = COLS.min(self.range.end - j0);
                let mut p0 = 0;
                while p0 < k {
                    let kb = ROWS_B.min(k - p0);
                    for (t, out) in buf.chunks_exact_mut(w).take(kb).enumerate() {
                        let src = std::slice::from_raw_parts(b.ptr.add((p0 + t) * b.rs + j0), w);
                        S::conv_run(src, out);
                    }
                    let ar = MatRef {
                        ptr: few.ptr.add(p0),
                        ..few
                    };
                    let br = MatRef {
                        ptr: buf.as_ptr(),
                        rs: w,
                        cs: 1,
                    };
                    thin::rows_body::<f32, FUSED>(m, kb, ar, br, c.add(j0), n, 0..w, p0 == 0);
                    p0 += kb;
                }
                j0 += w;
            }
            return;
        }
        // Dots: each of the many vectors (B's columns by columns, else A's rows; contiguous)
        // widened a run at a time, its dot with each few vector summed over the runs.
        let (inner, ldx) = if self.by_cols { (m, b.cs) } else { (n, a.rs) };
        let base = if self.by_cols { b.ptr } else { a.ptr };
        #[cfg(target_arch = "x86_64")]
        if WIDE {
            return self.dots_blocked::<false>();
        }
        #[cfg(target_arch = "x86_64")]
        if FUSED && f16c() {
            return self.dots_blocked::<true>();
        }
        let mut buf = [0f32; RUN];
        for o in self.range.clone() {
            let x = base.add(o * ldx);
            let mut sums = [0f32; thin::DOTS_MAX];
            let mut p0 = 0;
            while p0 < k {
                let len = RUN.min(k - p0);
                S::conv_run(std::slice::from_raw_parts(x.add(p0), len), &mut buf[..len]);
                for (q, s) in sums.iter_mut().enumerate().take(inner) {
                    let y = std::slice::from_raw_parts(few.ptr.add(q * k + p0), len);
                    *s += thin::dot::<f32, FUSED>(&buf[..len], y);
                }
                p0 += len;
            }
            for (q, &s) in sums.iter().enumerate().take(inner) {
                let (i, j) = if self.by_cols { (q, o) } else { (o, q) };
                *c.add(i * n + j) = s;
            }
        }
    }

    /// The dots form with AVX-512 (or AVX2, `AVX2`): k in blocks whose pieces of the few
    /// vectors stay in L1 (`FEW_BYTES`), and for each block every many vector's piece
    /// widened in registers (`widened::dots_wide_avx512`, `_avx2`) or, with `pairs`,
    /// multiplied in bf16 pairs (`dots_pairs`); C holds the sums over the blocks so far. One
    /// block of k in all (8 x 4096 by a transposed 4096 x 4096 read its few vectors' 128 KiB
    /// from L2 for every column).
    ///
    /// # Safety
    /// As for `run` with level 2, or with `AVX2` level 1 and a CPU with F16C.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn dots_blocked<const AVX2: bool>(&self) {
        let Part {
            m, n, k, a, b, c, ..
        } = *self;
        let (inner, ldx) = if self.by_cols { (m, b.cs) } else { (n, a.rs) };
        let base = if self.by_cols { b.ptr } else { a.ptr };
        let bytes = if self.pairs { 2 } else { 4 };
        let kb = if inner * k * bytes <= FEW_BYTES {
            k
        } else {
            (FEW_BYTES / (inner * bytes)).max(256) / 64 * 64
        };
        type Widened<S> = unsafe fn(*const S, *const f32, usize, usize, &mut [f32]);
        type Pairs = unsafe fn(*const half::bf16, *const half::bf16, usize, usize, &mut [f32]);
        let narrow: Widened<S> = match inner {
            1 => widened::dots_wide_avx2::<S, 1, 4>,
            2 => widened::dots_wide_avx2::<S, 2, 4>,
            3 => widened::dots_wide_avx2::<S, 3, 2>,
            4 => widened::dots_wide_avx2::<S, 4, 2>,
            5 => widened::dots_wide_avx2::<S, 5, 1>,
            6 => widened::dots_wide_avx2::<S, 6, 1>,
            7 => widened::dots_wide_avx2::<S, 7, 1>,
            _ => widened::dots_wide_avx2::<S, 8, 1>,
        };
        let (widened, pairs): (Widened<S>, Pairs) = match inner {
            1 => (widened::dots_wide_avx512::<S, 1, 4>, dots_pairs::<1, 4>),
            2 => (widened::dots_wide_avx512::<S, 2, 4>, dots_pairs::<2, 4>),
            3 => (widened::dots_wide_avx512::<S, 3, 2>, dots_pairs::<3, 2>),
            4 => (widened::dots_wide_avx512::<S, 4, 2>, dots_pairs::<4, 2>),
            5 => (widened::dots_wide_avx512::<S, 5, 2>, dots_pairs::<5, 2>),
            6 => (widened::dots_wide_avx512::<S, 6, 2>, dots_pairs::<6, 2>),
            7 => (widened::dots_wide_avx512::<S, 7, 2>, dots_pairs::<7, 2>),
            _ => (widened::dots_wide_avx512::<S, 8, 2>, dots_pairs::<8, 2>),
        };
        let widened = if AVX2 { narrow } else { widened };
        let mut p0 = 0;
        while p0 < k {
            let len = kb.min(k - p0);
            // One few vector in bf16 pairs: four many vectors a call (`dots_pairs_many`),
            // where the many side fits in half of L3. From memory, four rows read in step
            // ran slower than one after another: 1 x 4096 by a transposed 4096 x 4096 (32
            // MiB) 0.66 ms against 0.52, 1 x 8192 x 2048 0.81 against 0.66 (Zen 4, 32 MiB of
            // L3); in cache faster: 1 x 1024 x 1024 20 us against 26, 1 x 2048 x 2048 58
            // against 83, 1 x 1024 x 4096 125 against 144, 1 x 4096 x 1024 111 against 120.
            let mut first = self.range.start;
            let many = if self.by_cols { n } else { m };
            let cached = many * k * 2 <= Caches::of_this_machine().l3 / 2;
            if self.pairs && inner == 1 && cached {
                const R: usize = 4;
                let y = self.few16.ptr.add(p0) as *const half::bf16;
                while first + R <= self.range.end {
                    let x = base.add(first * ldx + p0) as *const half::bf16;
                    let mut sums = [0f32; R];
                    dots_pairs_many::<R>(x, ldx, y, len, &mut sums);
                    for (r, &s) in sums.iter().enumerate() {
                        let o = first + r;
                        let (i, j) = if self.by_cols { (0, o) } else { (o, 0) };
                        let e = c.add(i * n + j);
                        *e = if p0 == 0 { s } else { *e + s };
                    }
                    first += R;
                }
            }
            for o in first..self.range.end {
                let x = base.add(o * ldx + p0);
                let mut sums = [0f32; thin::DOTS_MAX];
                if self.pairs {
                    // S is bf16 (`gemm_as` sets `pairs` only then).
                    let y = self.few16.ptr.add(p0) as *const half::bf16;
                    pairs(x as *const half::bf16, y, k, len, &mut sums);
                } else {
                    widened(x, self.few.ptr.add(p0), k, len, &mut sums);
                }
                for (q, &s) in sums.iter().enumerate().take(inner) {
                    let (i, j) = if self.by_cols { (q, o) } else { (o, q) };
                    let e = c.add(i * n + j);
                    *e = if p0 == 0 { s } else { *e + s };
                }
            }
            p0 += len;
        }
    }
}

#[cfg(test)]
mod tests;
