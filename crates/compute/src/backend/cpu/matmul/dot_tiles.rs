//! A times a transposed B with 3 to 96 rows (AVX-512; with AVX2 up to 192, as A's chunk
//! fits in L2): `x @ W.t()` of a Linear layer on a batch, where A's rows and B's columns
//! (W's rows) are both contiguous in k.
//!
//! The packed path gathers such a B column by column into k-major panels, which for a batch
//! of 64 rows cost as much as the product (f32 64 x 512 by a transposed 512 x 512 on the
//! Emerald Rapids VM of bench/README.md: packing 42% of the time, 97-122 GFLOP/s against
//! PyTorch's 237). Here nothing is packed: a tile of C of `TR` rows by `TC` columns is `TR`
//! x `TC` dot products of contiguous vectors, kept in as many AVX-512 accumulators while
//! k streams past (`TR` + `TC` loads for `TR` x `TC` multiply-adds), and summed across
//! lanes once at the end (`sums_f32`, `sums_f64`: one tree of shuffles for the tile). B
//! is read once from memory, in blocks of `TC` columns that stay in L1 while every tile of
//! A's rows passes them from L2; k is cut into chunks that keep
//! a block in L1.
//!
//! Measured there (f32, two threads, GFLOP/s, medians of 3 interleaved rounds; m x n x k,
//! before this path and with it, against PyTorch 2.15's oneMKL): 16 x 256 x 256 26 -> 106
//! (86), 48 x 512 x 512 78 -> 134 (114), 64 x 1024 x 1024 84 -> 128 (154), 96 x 1024 x
//! 1024 105 -> 158 (193), 32 x 4096 x 4096 28 -> 108 (124). From about 96 rows the packed
//! path (with `pack_b`'s transposes) is as fast: 96 x 512 x 512 152 packed against 138,
//! 128 x 1024 x 1024 155 against 127. Each step's four loads of A from L2 are where the
//! kernel waits; a software prefetch of B's next block into L2 did not help.
//!
//! Without AVX-512 (Zen 2 and 3, Intel's client cores) the same in 3 x 4 tiles of AVX2
//! vectors (`tile_kernel_avx2!`), 1.3-2.9x the packed AVX2 path up to 128 rows (numbers
//! at MAX_M_AVX2).

// Off x86-64 `Width::here` is none (no AVX-512 or AVX2) and nothing else here is reachable.
#![cfg_attr(
    not(target_arch = "x86_64"),
    allow(dead_code, unused_imports, unused_macros)
)]

use super::pack::{MatRef, OutPtr};
use super::{helper, Accum};

/// Rows of A (and of C) in one AVX-512 tile.
pub(super) const TR: usize = 4;
/// Columns of B (and of C) in one AVX-512 tile: 24 accumulators, 4 + 1 more registers of 32.
pub(super) const TC: usize = 6;
/// Rows of an AVX2 tile.
pub(super) const TR2: usize = 3;
/// Columns of an AVX2 tile: 12 accumulators, 3 + 1 more registers of 16.
pub(super) const TC2: usize = 4;
/// Fewest rows of C this path takes. From three rows it beats the thin path's dots form
/// (one dot product at a time, two loads an FMA), though a tile then computes some rows
/// twice: f32, two threads, 3 interleaved rounds, dots form against tiles (PyTorch): 3 x
/// 256 x 256 62 against 69 (67), 4 x 1000 x 100 49 against 62 (32), 8 x 512 x 512 90
/// against 159 (139), 8 x 4096 x 4096 27 against 80 (41). With one or two rows and a short
/// k it lost (1 x 1000 x 100 31 against 13, 2 x 1000 x 100 41 against 26).
const MIN_M: usize = 3;
/// Most rows of C this path takes, for f32 and for f64: with more, packing B is repaid by
/// the packed kernel, which needs no sums across lanes and loads one vector of B for 14
/// rows. Measured as in the module's note, packed against this path (PyTorch): f32 96 x 512
/// x 512 152 against 138, 96 x 1024 x 1024 120 against 156; f64 64 x 1024 x 1024 59 against
/// 75 (97), 80 x 1024 x 1024 73 against 75, 96 x 1024 x 1024 88 against 78 (109).
const MAX_M: [usize; 2] = [96, 72];
/// The most rows, f32 and f64, for the AVX2 tiles, where A's chunk of that many rows fits
/// in half of L2 (`max_m`; Zen 2 and 3 have 512 KiB: 64 rows). Measured with
/// `ACCEL_CPU_KERNEL=avx2` on the Emerald Rapids VM of bench/README.md (2 MiB of L2), the
/// packed path against these tiles alternated call by call in one process, two threads,
/// GFLOP/s, m x n x k (B transposed), 2 rounds: f32 8 x 1024 x 1024 38 against 109-113, 32
/// x 1024 x 1024 78-79 against 143-147, 64 x 1024 x 1024 86-90 against 145-151, 128 x 1024
/// x 1024 117 against 155-157, 192 x 1024 x 1024 133-138 against 140-154, 192 x 2048 x 2048
/// 130 against 129-132; f64 8 x 1024 x 1024 14-16 against 44-48, 64 x 1024 x 1024 43-44
/// against 60-62, 128 x 1024 x 1024 53-57 against 55-63, 192 x 1024 x 1024 level.
const MAX_M_AVX2: [usize; 2] = [192, 128];
/// Shallowest k: each dot ends with a sum across lanes, to be spread over enough steps.
const MIN_K: usize = 64;
/// Bytes of B's block (a tile's columns of a k chunk) kept in L1: AVX-512 (48 KiB of L1
/// on the CPUs measured), AVX2 (Zen 2 and 3: 32 KiB; 16 KiB ran as fast as 24 here, 12 KiB
/// 3-6% slower).
const B_BLOCK_BYTES: [usize; 2] = [24 << 10, 16 << 10];
/// Fewer multiply-adds than this run on the calling thread alone.
const SPLIT_FLOPS: usize = 1 << 18;
/// Blocks of B a thread claims at a time: with AVX-512's six columns a block, whole cache
/// lines of C's rows (192 bytes of f32; AVX2's four columns: 128), so that two threads
/// never write one line.
const UNIT_BLOCKS: usize = 8;

/// Which tile kernel runs here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Width {
    /// TR x TC tiles in zmm registers.
    Avx512,
    /// TR2 x TC2 tiles in ymm registers.
    Avx2,
}

impl Width {
    /// The widest this CPU has and `ACCEL_CPU_KERNEL` allows (`kernel::vector_bytes`).
    fn here() -> Option<Width> {
        super::kernel::vector_bytes().map(|b| if b == 64 { Width::Avx512 } else { Width::Avx2 })
    }

    /// Columns of a tile.
    fn cols(self) -> usize {
        match self {
            Width::Avx512 => TC,
            Width::Avx2 => TC2,
        }
    }
}

/// MAX_M for this element type and kernel (for AVX2 no more rows than fit A's chunk in
/// half of this machine's L2).
fn max_m<D>(w: Width) -> usize {
    let f64 = usize::from(std::mem::size_of::<D>() > 4);
    match w {
        Width::Avx512 => MAX_M[f64],
        Width::Avx2 => {
            let row = chunk::<D>(w) * std::mem::size_of::<D>();
            let l2 = super::kernel::Caches::of_this_machine().l2;
            (l2 / 2 / row).clamp(MIN_M, MAX_M_AVX2[f64])
        }
    }
}

/// Elements of k a B block holds (`B_BLOCK_BYTES`), a multiple of 64.
fn chunk<D>(w: Width) -> usize {
    let bytes = B_BLOCK_BYTES[usize::from(w == Width::Avx2)];
    (bytes / w.cols() / std::mem::size_of::<D>()).max(64) / 64 * 64
}

/// Element types with a tile kernel.
pub(crate) trait DotTile: Accum {
    /// `out[i][j]` = a[i] . b[j] over k elements.
    ///
    /// # Safety
    /// Every a[i] and b[j] readable for k elements; the CPU has AVX-512F and FMA.
    #[cfg(target_arch = "x86_64")]
    unsafe fn tile(a: &[*const Self; TR], b: &[*const Self; TC], k: usize) -> [[Self; TC]; TR];
    /// The same for a TR2 x TC2 tile.
    ///
    /// # Safety
    /// Every a[i] and b[j] readable for k elements; the CPU has AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    unsafe fn tile_avx2(
        a: &[*const Self; TR2],
        b: &[*const Self; TC2],
        k: usize,
    ) -> [[Self; TC2]; TR2];
}

#[cfg(target_arch = "x86_64")]
impl DotTile for f32 {
    unsafe fn tile(a: &[*const f32; TR], b: &[*const f32; TC], k: usize) -> [[f32; TC]; TR] {
        tile_f32(a, b, k)
    }
    unsafe fn tile_avx2(
        a: &[*const f32; TR2],
        b: &[*const f32; TC2],
        k: usize,
    ) -> [[f32; TC2]; TR2] {
        tile_avx2_f32(a, b, k)
    }
}
#[cfg(target_arch = "x86_64")]
impl DotTile for f64 {
    unsafe fn tile(a: &[*const f64; TR], b: &[*const f64; TC], k: usize) -> [[f64; TC]; TR] {
        tile_f64(a, b, k)
    }
    unsafe fn tile_avx2(
        a: &[*const f64; TR2],
        b: &[*const f64; TC2],
        k: usize,
    ) -> [[f64; TC2]; TR2] {
        tile_avx2_f64(a, b, k)
    }
}
#[cfg(not(target_arch = "x86_64"))]
impl DotTile for f32 {}
#[cfg(not(target_arch = "x86_64"))]
impl DotTile for f64 {}

/// Whether an m x k by k x n product with these operands takes this path with the kernel
/// `w` (`gemm` asks for the widest this CPU has, `Width::here`): A's rows and B's columns
/// contiguous, MIN_M..=`max_m` rows, more than a few columns, k from MIN_K.
fn takes_at<D>(w: Width, m: usize, n: usize, k: usize, a: MatRef<D>, b: MatRef<D>) -> bool {
    a.cs == 1 && b.rs == 1 && (MIN_M..=max_m::<D>(w)).contains(&m) && n > TC && k >= MIN_K
}

/// C = A B through this path where `takes_at` says so for this CPU's kernel (returns false, touching nothing,
/// otherwise), on up to `threads` threads: m x k by k x n, C row-major m x n.
///
/// # Safety
/// As for `gemm_with`: `a.at(i, p)` valid for i < m, p < k, `b.at(p, j)` for p < k, j < n,
/// `c` holds m * n elements; A and B are not written during the call.
pub(super) unsafe fn gemm<D: DotTile>(
    m: usize,
    n: usize,
    k: usize,
    a: MatRef<D>,
    b: MatRef<D>,
    c: &mut [D],
    threads: usize,
) -> bool {
    match Width::here() {
        Some(w) if takes_at(w, m, n, k, a, b) => {
            // SAFETY: the caller's contract, `takes_at` for w, and w is usable here.
            unsafe { gemm_at(w, m, n, k, a, b, c, threads) };
            true
        }
        _ => false,
    }
}

/// The largest A `unaliased` copies (128 rows of bf16 with k = 4096 are 1 MiB).
const MAX_A_COPY_BYTES: usize = 16 << 20;

/// A as the tiles read it: where it lies, or, where its rows lie a multiple of 4 KiB apart
/// (f32 with k = 1024, bf16 with 2048, f64 with 512: the features of a Linear layer), a
/// copy of all of it (up to MAX_A_COPY_BYTES) whose rows are 64 bytes longer, which the
/// scratch holds. A tile reads
/// its 4 rows of A in step with 6 of B; 4 KiB apart, A's lines all fall into the sets that
/// B's block holds, and L1 (8 ways on Zen 4) evicts B to keep them. The copy is m x k values
/// once, against m x n x k multiply-adds. Zen 4, two threads, B transposed, copy against
/// none alternated in one process (GFLOP/s, medians of 15 rounds): f32 64 x 1024 x 1024 162
/// against 123, 96 x 1024 x 1024 171 against 143, 32 x 4096 x 4096 142 against 109, 96 x
/// 4096 x 4096 162 against 127; f64 64 x 512 x 512 86 against 78, 64 x 1024 x 1024 89 against
/// 73; bf16 128 x 4096 x 4096 309-357 against 235-299 (the blocked path: 294-325); with
/// `ACCEL_CPU_KERNEL=avx2` f32 64 x 1024 x 1024 185 against 163, 128 x 4096 x 4096 154
/// against 137. Copying B's block as well changed nothing (bf16 358 against 357).
///
/// # Safety
/// `a.at(i, p)` readable for i < m, p < k.
unsafe fn unaliased<S: super::pack::Packed>(
    m: usize,
    k: usize,
    a: MatRef<S>,
) -> (Option<super::Scratch>, MatRef<S>) {
    let size = std::mem::size_of::<S>();
    let aliased = a.cs == 1 && a.rs >= k && (a.rs * size).is_multiple_of(4096);
    // A larger A (a k of millions) is read in place rather than held twice in memory.
    if !aliased || m * k * size > MAX_A_COPY_BYTES {
        return (None, a);
    }
    let ld = k + 64 / size;
    let mut scratch = super::Scratch::take::<S>(m * ld);
    let dst = scratch.view::<S>();
    for (i, row) in dst.chunks_exact_mut(ld).take(m).enumerate() {
        // SAFETY: row i of A holds k values at unit stride (this function's contract and
        // a.cs == 1); `row` holds ld >= k.
        unsafe { std::ptr::copy_nonoverlapping(a.ptr.add(i * a.rs), row.as_mut_ptr(), k) };
    }
    let copy = MatRef {
        ptr: dst.as_ptr(),
        rs: ld,
        cs: 1,
    };
    (Some(scratch), copy)
}

/// C = A B with the kernel `w`, on up to `threads` threads.
///
/// # Safety
/// As for `gemm`, with `takes_at(w, ..)` true and `w` usable on this CPU (`Width::here`
/// or below it).
unsafe fn gemm_at<D: DotTile>(
    w: Width,
    m: usize,
    n: usize,
    k: usize,
    a: MatRef<D>,
    b: MatRef<D>,
    c: &mut [D],
    threads: usize,
) {
    #[cfg(target_arch = "x86_64")]
    {
        // Threads claim blocks of C's columns in turn (each block's part of B is read once,
        // by the thread that claims it), so that a thread slowed by another process on its
        // CPU does fewer (`helper::Claims`).
        let cp = OutPtr(c.as_mut_ptr());
        // SAFETY: the caller's contract covers A.
        let (_copy, a) = unsafe { unaliased(m, k, a) };
        in_units(n, w.cols(), m * n * k, threads, |cols| {
            // SAFETY: the caller's contract covers A, B and C, and `takes_at` the strides
            // and the CPU; each unit writes only its own columns of C and is claimed once,
            // and nothing reads C until every thread has returned.
            unsafe {
                let (c, chunk) = ((cp.get(), n), chunk::<D>(w));
                match w {
                    Width::Avx512 => run(0..m, cols, (k, chunk), a, b, c, D::tile),
                    Width::Avx2 => run(0..m, cols, (k, chunk), a, b, c, D::tile_avx2),
                }
            }
        });
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (w, m, n, k, a, b, c, threads);
        unreachable!("`takes_at` is for x86-64 kernels")
    }
}

/// Runs `run_unit` on C's n columns in units of UNIT_BLOCKS blocks of `block` columns,
/// which up to `threads` threads claim in turn where the product (`flops` multiply-adds)
/// is large enough (each block's part of B is then read once, by the thread that claims
/// it, and a thread slowed by another process on its CPU does fewer: `helper::Claims`).
#[cfg(target_arch = "x86_64")]
fn in_units(
    n: usize,
    block: usize,
    flops: usize,
    threads: usize,
    run_unit: impl Fn(std::ops::Range<usize>) + Sync,
) {
    let unit_cols = UNIT_BLOCKS * block;
    let units = n.div_ceil(unit_cols);
    let unit = |u: usize| run_unit(u * unit_cols..((u + 1) * unit_cols).min(n));
    if threads > 1 && flops >= SPLIT_FLOPS && units > 1 {
        let claims = helper::Claims::new(units);
        helper::for_each_part(&mut vec![(); threads.min(units)], |_, _| {
            while let Some(u) = claims.next() {
                unit(u);
            }
        });
    } else {
        (0..units).for_each(unit);
    }
}

/// A tile kernel: `out[i][j]` = a[i] . b[j] over k elements of S, as D (`DotTile`).
type TileFn<S, D, const R: usize, const C: usize> =
    unsafe fn(&[*const S; R], &[*const S; C], usize) -> [[D; C]; R];

/// C's block `rows` x `cols` (C's rows `ldc` apart), tile by tile with `tile` (R x C):
/// k in chunks of `chunk` (a B block that fits B_BLOCK_BYTES), B's blocks of C columns
/// outside, A's tiles of R rows inside. Edge tiles repeat their last row or column (read, computed, not
/// stored).
///
/// # Safety
/// As for `gemm`, with the strides `takes_at` asks for, the ranges inside m and n, and `tile`
/// callable on this CPU; no one else writes that block of C during the call.
#[cfg(target_arch = "x86_64")]
unsafe fn run<S, D: Accum, const R: usize, const C: usize>(
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
    (k, chunk): (usize, usize),
    a: MatRef<S>,
    b: MatRef<S>,
    (c, ldc): (*mut D, usize),
    tile: TileFn<S, D, R, C>,
) {
    if rows.is_empty() || cols.is_empty() {
        return;
    }
    let mut k0 = 0;
    while k0 < k {
        let kl = chunk.min(k - k0);
        for j0 in cols.clone().step_by(C) {
            let w = C.min(cols.end - j0);
            let mut bp = [std::ptr::null::<S>(); C];
            for (j, p) in bp.iter_mut().enumerate() {
                *p = b.ptr.add((j0 + j.min(w - 1)) * b.cs + k0);
            }
            for i0 in rows.clone().step_by(R) {
                let h = R.min(rows.end - i0);
                let mut ap = [std::ptr::null::<S>(); R];
                for (i, p) in ap.iter_mut().enumerate() {
                    *p = a.ptr.add((i0 + i.min(h - 1)) * a.rs + k0);
                }
                let out = tile(&ap, &bp, kl);
                for (i, row) in out.iter().enumerate().take(h) {
                    let cr = c.add((i0 + i) * ldc + j0);
                    for (j, &v) in row.iter().enumerate().take(w) {
                        *cr.add(j) = if k0 == 0 { v } else { *cr.add(j) + v };
                    }
                }
            }
        }
        k0 += kl;
    }
}

/// The tile kernel for one element type, in assembly: the accumulators of C's element (i,
/// j) in zmm(4 j + i), A's four vectors in zmm24..zmm27, B's vector in zmm28 or zmm29 in
/// turn; whole vectors of k, then the rest under a mask (masked lanes read nothing). In
/// Rust with arrays of vectors, LLVM kept half the accumulators on the stack and shuffled
/// the rest between registers every step (55-80 GFLOP/s at f32 256 x 512 x 512).
macro_rules! tile_kernel {
    ($name:ident, $t:ty, $vec:ty, $zero:ident, $lanes:expr, $mov:literal, $fma:literal, $reduce:ident) => {
        tile_kernel!($name, $t => $t, "avx512f,fma", $vec, $zero, $lanes, u16, "kortestw",
                     $mov, $fma, $reduce);
    };
    // Elements $t in, sums $o out; the tail's mask a $mask (one bit a lane) tested by $kt.
    ($name:ident, $t:ty => $o:ty, $feat:literal, $vec:ty, $zero:ident, $lanes:expr,
     $mask:ty, $kt:literal, $mov:literal, $fma:literal, $reduce:ident) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $feat)]
        unsafe fn $name(a: &[*const $t; TR], b: &[*const $t; TC], k: usize) -> [[$o; TC]; TR] {
            use std::arch::x86_64::*;
            const V: usize = $lanes;
            let size = std::mem::size_of::<$t>();
            let end = k / V * V * size;
            let mask = ((1u64 << (k % V)) - 1) as $mask;
            let mut acc: [$vec; TR * TC] = [$zero(); TR * TC];
            // SAFETY: the loads read a[i] and b[j] at byte offsets below k * size (whole
            // vectors below `end`, then the lanes of `mask`, which suppresses the others'
            // reads and faults): inside the caller's vectors (# Safety). Nothing is written
            // to memory; every register changed is an operand or clobber.
            std::arch::asm!(
                "vpxord zmm0, zmm0, zmm0", "vpxord zmm1, zmm1, zmm1",
                "vpxord zmm2, zmm2, zmm2", "vpxord zmm3, zmm3, zmm3",
                "vpxord zmm4, zmm4, zmm4", "vpxord zmm5, zmm5, zmm5",
                "vpxord zmm6, zmm6, zmm6", "vpxord zmm7, zmm7, zmm7",
                "vpxord zmm8, zmm8, zmm8", "vpxord zmm9, zmm9, zmm9",
                "vpxord zmm10, zmm10, zmm10", "vpxord zmm11, zmm11, zmm11",
                "vpxord zmm12, zmm12, zmm12", "vpxord zmm13, zmm13, zmm13",
                "vpxord zmm14, zmm14, zmm14", "vpxord zmm15, zmm15, zmm15",
                "vpxord zmm16, zmm16, zmm16", "vpxord zmm17, zmm17, zmm17",
                "vpxord zmm18, zmm18, zmm18", "vpxord zmm19, zmm19, zmm19",
                "vpxord zmm20, zmm20, zmm20", "vpxord zmm21, zmm21, zmm21",
                "vpxord zmm22, zmm22, zmm22", "vpxord zmm23, zmm23, zmm23",
                "cmp {p}, {end}",
                "jae 3f",
                "2:",
                tile_step!($mov, $fma, ""),
                "add {p}, 64",
                "cmp {p}, {end}",
                "jb 2b",
                "3:",
                concat!($kt, " {m}, {m}"),
                "jz 4f",
                tile_step!($mov, $fma, " {{{m}}}{{z}}"),
                "4:",
                a0 = in(reg) a[0], a1 = in(reg) a[1], a2 = in(reg) a[2], a3 = in(reg) a[3],
                b0 = in(reg) b[0], b1 = in(reg) b[1], b2 = in(reg) b[2],
                b3 = in(reg) b[3], b4 = in(reg) b[4], b5 = in(reg) b[5],
                p = inout(reg) 0usize => _,
                end = in(reg) end,
                m = in(kreg) mask,
                out("zmm0") acc[0], out("zmm1") acc[1], out("zmm2") acc[2], out("zmm3") acc[3],
                out("zmm4") acc[4], out("zmm5") acc[5], out("zmm6") acc[6], out("zmm7") acc[7],
                out("zmm8") acc[8], out("zmm9") acc[9], out("zmm10") acc[10], out("zmm11") acc[11],
                out("zmm12") acc[12], out("zmm13") acc[13], out("zmm14") acc[14],
                out("zmm15") acc[15], out("zmm16") acc[16], out("zmm17") acc[17],
                out("zmm18") acc[18], out("zmm19") acc[19], out("zmm20") acc[20],
                out("zmm21") acc[21], out("zmm22") acc[22], out("zmm23") acc[23],
                out("zmm24") _, out("zmm25") _, out("zmm26") _, out("zmm27") _,
                out("zmm28") _, out("zmm29") _,
                options(nostack, readonly),
            );
            $reduce(&acc)
        }
    };
}

/// One step of the tile kernel: A's four vectors at byte offset {p}, then each of B's six,
/// with its four FMAs; `$mask` is "" or a zeroing mask on the loads.
macro_rules! tile_step {
    ($mov:literal, $fma:literal, $mask:literal) => {
        concat!(
            $mov, " zmm24", $mask, ", [{a0} + {p}]\n",
            $mov, " zmm25", $mask, ", [{a1} + {p}]\n",
            $mov, " zmm26", $mask, ", [{a2} + {p}]\n",
            $mov, " zmm27", $mask, ", [{a3} + {p}]\n",
            tile_step!(@b $mov, $fma, $mask, "{b0}", "zmm28", "zmm0", "zmm1", "zmm2", "zmm3"),
            tile_step!(@b $mov, $fma, $mask, "{b1}", "zmm29", "zmm4", "zmm5", "zmm6", "zmm7"),
            tile_step!(@b $mov, $fma, $mask, "{b2}", "zmm28", "zmm8", "zmm9", "zmm10", "zmm11"),
            tile_step!(@b $mov, $fma, $mask, "{b3}", "zmm29", "zmm12", "zmm13", "zmm14", "zmm15"),
            tile_step!(@b $mov, $fma, $mask, "{b4}", "zmm28", "zmm16", "zmm17", "zmm18", "zmm19"),
            tile_step!(@b $mov, $fma, $mask, "{b5}", "zmm29", "zmm20", "zmm21", "zmm22", "zmm23"),
        )
    };
    (@b $mov:literal, $fma:literal, $mask:literal, $bp:literal, $r:literal, $c0:literal,
     $c1:literal, $c2:literal, $c3:literal) => {
        concat!(
            $mov, " ", $r, $mask, ", [", $bp, " + {p}]\n",
            $fma, " ", $c0, ", zmm24, ", $r, "\n",
            $fma, " ", $c1, ", zmm25, ", $r, "\n",
            $fma, " ", $c2, ", zmm26, ", $r, "\n",
            $fma, " ", $c3, ", zmm27, ", $r, "\n",
        )
    };
}
tile_kernel!(
    tile_f32,
    f32,
    __m512,
    _mm512_setzero_ps,
    16,
    "vmovups",
    "vfmadd231ps",
    sums_f32
);
tile_kernel!(
    tile_f64,
    f64,
    __m512d,
    _mm512_setzero_pd,
    8,
    "vmovupd",
    "vfmadd231pd",
    sums_f64
);

/// One column of an AVX-512 tile (its four rows' accumulators `$v`) folded so that 128-bit
/// lane i holds values summing to row i's: lanes paired across rows 0-1 and 2-3, then
/// across the pairs, with the type's 128-bit lane shuffle `$shuffle` and add `$add`.
macro_rules! fold_column {
    ($v:expr, $shuffle:ident, $add:ident) => {{
        let v = $v;
        let t01 = $add($shuffle::<0x44>(v[0], v[1]), $shuffle::<0xEE>(v[0], v[1]));
        let t23 = $add($shuffle::<0x44>(v[2], v[3]), $shuffle::<0xEE>(v[2], v[3]));
        $add($shuffle::<0x88>(t01, t23), $shuffle::<0xDD>(t01, t23))
    }};
}

/// The 24 sums across lanes of the tile's accumulators (element (i, j) of C in acc[4 j + i])
/// as a tree of shuffles and adds (69 instructions, against about 190 for 24 separate
/// reductions): each column's four vectors fold to one of four 128-bit lanes (lane i: four
/// partial sums of row i), then columns pair up within lanes, twice, until lane i holds row
/// i's first four sums, and a second vector its last two.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn sums_f32(acc: &[std::arch::x86_64::__m512; TR * TC]) -> [[f32; TC]; TR] {
    use std::arch::x86_64::*;
    // Column j: lane i of the result holds four values that sum to acc[4 j + i]'s lanes.
    let mut col = [_mm512_setzero_ps(); TC];
    for (j, c) in col.iter_mut().enumerate() {
        *c = fold_column!(&acc[4 * j..4 * j + 4], _mm512_shuffle_f32x4, _mm512_add_ps);
    }
    // Within each 128-bit lane, x = (x0, x1, x2, x3) and y the same: (x0 + x1, x2 + x3,
    // y0 + y1, y2 + y3).
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn pair(x: __m512, y: __m512) -> __m512 {
        _mm512_add_ps(
            _mm512_shuffle_ps::<0x88>(x, y),
            _mm512_shuffle_ps::<0xDD>(x, y),
        )
    }
    let (r01, r23, r45) = (
        pair(col[0], col[1]),
        pair(col[2], col[3]),
        pair(col[4], col[5]),
    );
    let mut first = [0f32; 16];
    let mut last = [0f32; 16];
    _mm512_storeu_ps(first.as_mut_ptr(), pair(r01, r23));
    _mm512_storeu_ps(last.as_mut_ptr(), pair(r45, r45));
    let mut out = [[0f32; TC]; TR];
    for (i, row) in out.iter_mut().enumerate() {
        row[..4].copy_from_slice(&first[4 * i..4 * i + 4]);
        row[4..].copy_from_slice(&last[4 * i..4 * i + 2]);
    }
    out
}

/// As [`sums_f32`] for f64: each column's four vectors fold to lane i holding two values of
/// row i, then columns pair up within lanes once, lane i of the pair (j, j + 1) holding
/// row i's sums of those columns.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn sums_f64(acc: &[std::arch::x86_64::__m512d; TR * TC]) -> [[f64; TC]; TR] {
    use std::arch::x86_64::*;
    let mut col = [_mm512_setzero_pd(); TC];
    for (j, c) in col.iter_mut().enumerate() {
        *c = fold_column!(&acc[4 * j..4 * j + 4], _mm512_shuffle_f64x2, _mm512_add_pd);
    }
    let mut out = [[0f64; TC]; TR];
    for p in 0..TC / 2 {
        let (x, y) = (col[2 * p], col[2 * p + 1]);
        let s = _mm512_add_pd(_mm512_unpacklo_pd(x, y), _mm512_unpackhi_pd(x, y));
        let mut v = [0f64; 8];
        _mm512_storeu_pd(v.as_mut_ptr(), s);
        for (i, row) in out.iter_mut().enumerate() {
            row[2 * p] = v[2 * i];
            row[2 * p + 1] = v[2 * i + 1];
        }
    }
    out
}

/// The AVX2 tile kernel for one element type, in assembly as [`tile_kernel!`]'s: the
/// accumulators of C's element (i, j) in ymm(3 j + i), A's three vectors in ymm12..ymm14,
/// B's vector in ymm15 (all sixteen registers); whole vectors of k, then the last values
/// (fewer than a vector) in Rust, added to the sums.
macro_rules! tile_kernel_avx2 {
    ($name:ident, $t:ty, $vec:ty, $zero:ident, $lanes:expr, $mov:literal, $fma:literal, $reduce:ident) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn $name(a: &[*const $t; TR2], b: &[*const $t; TC2], k: usize) -> [[$t; TC2]; TR2] {
            use std::arch::x86_64::*;
            let whole = k / $lanes * $lanes;
            let mut acc: [$vec; TR2 * TC2] = [$zero(); TR2 * TC2];
            // SAFETY: the loads read a[i] and b[j] at byte offsets below whole * size <= k *
            // size: inside the caller's vectors (# Safety). Nothing is written to memory;
            // every register changed is an operand or clobber.
            std::arch::asm!(
                "vxorps ymm0, ymm0, ymm0", "vxorps ymm1, ymm1, ymm1",
                "vxorps ymm2, ymm2, ymm2", "vxorps ymm3, ymm3, ymm3",
                "vxorps ymm4, ymm4, ymm4", "vxorps ymm5, ymm5, ymm5",
                "vxorps ymm6, ymm6, ymm6", "vxorps ymm7, ymm7, ymm7",
                "vxorps ymm8, ymm8, ymm8", "vxorps ymm9, ymm9, ymm9",
                "vxorps ymm10, ymm10, ymm10", "vxorps ymm11, ymm11, ymm11",
                "cmp {p}, {end}",
                "jae 3f",
                "2:",
                concat!(
                    $mov, " ymm12, [{a0} + {p}]\n",
                    $mov, " ymm13, [{a1} + {p}]\n",
                    $mov, " ymm14, [{a2} + {p}]\n",
                    tile_kernel_avx2!(@b $mov, $fma, "{b0}", "ymm0", "ymm1", "ymm2"),
                    tile_kernel_avx2!(@b $mov, $fma, "{b1}", "ymm3", "ymm4", "ymm5"),
                    tile_kernel_avx2!(@b $mov, $fma, "{b2}", "ymm6", "ymm7", "ymm8"),
                    tile_kernel_avx2!(@b $mov, $fma, "{b3}", "ymm9", "ymm10", "ymm11"),
                ),
                "add {p}, 32",
                "cmp {p}, {end}",
                "jb 2b",
                "3:",
                a0 = in(reg) a[0], a1 = in(reg) a[1], a2 = in(reg) a[2],
                b0 = in(reg) b[0], b1 = in(reg) b[1], b2 = in(reg) b[2], b3 = in(reg) b[3],
                p = inout(reg) 0usize => _,
                end = in(reg) whole * std::mem::size_of::<$t>(),
                out("ymm0") acc[0], out("ymm1") acc[1], out("ymm2") acc[2], out("ymm3") acc[3],
                out("ymm4") acc[4], out("ymm5") acc[5], out("ymm6") acc[6], out("ymm7") acc[7],
                out("ymm8") acc[8], out("ymm9") acc[9], out("ymm10") acc[10],
                out("ymm11") acc[11],
                out("ymm12") _, out("ymm13") _, out("ymm14") _, out("ymm15") _,
                options(nostack, readonly),
            );
            let mut out = $reduce(&acc);
            for p in whole..k {
                for (i, row) in out.iter_mut().enumerate() {
                    let x = *a[i].add(p);
                    for (j, v) in row.iter_mut().enumerate() {
                        *v += x * *b[j].add(p);
                    }
                }
            }
            out
        }
    };
    (@b $mov:literal, $fma:literal, $bp:literal, $c0:literal, $c1:literal, $c2:literal) => {
        concat!(
            $mov, " ymm15, [", $bp, " + {p}]\n",
            $fma, " ", $c0, ", ymm12, ymm15\n",
            $fma, " ", $c1, ", ymm13, ymm15\n",
            $fma, " ", $c2, ", ymm14, ymm15\n",
        )
    };
}
tile_kernel_avx2!(
    tile_avx2_f32,
    f32,
    __m256,
    _mm256_setzero_ps,
    8,
    "vmovups",
    "vfmadd231ps",
    sums_avx2_f32
);
tile_kernel_avx2!(
    tile_avx2_f64,
    f64,
    __m256d,
    _mm256_setzero_pd,
    4,
    "vmovupd",
    "vfmadd231pd",
    sums_avx2_f64
);

/// The 12 sums across lanes of an AVX2 tile's accumulators (element (i, j) in acc[3 j +
/// i]): for each row, its four columns' vectors folded by horizontal adds to one vector
/// per 128-bit half, the halves then added.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn sums_avx2_f32(acc: &[std::arch::x86_64::__m256; TR2 * TC2]) -> [[f32; TC2]; TR2] {
    use std::arch::x86_64::*;
    let mut out = [[0f32; TC2]; TR2];
    for (i, row) in out.iter_mut().enumerate() {
        // (c0 01, c0 23, c1 01, c1 23 | the same of lanes 4..8), then c2 and c3.
        let t0 = _mm256_hadd_ps(acc[i], acc[3 + i]);
        let t1 = _mm256_hadd_ps(acc[6 + i], acc[9 + i]);
        // (c0 0..4, c1 0..4, c2 0..4, c3 0..4 | the same of lanes 4..8).
        let t = _mm256_hadd_ps(t0, t1);
        let s = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps::<1>(t));
        _mm_storeu_ps(row.as_mut_ptr(), s);
    }
    out
}

/// As [`sums_avx2_f32`] for f64.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn sums_avx2_f64(acc: &[std::arch::x86_64::__m256d; TR2 * TC2]) -> [[f64; TC2]; TR2] {
    use std::arch::x86_64::*;
    let mut out = [[0f64; TC2]; TR2];
    for (i, row) in out.iter_mut().enumerate() {
        // (c0 01, c1 01, c0 23, c1 23), then c2 and c3.
        let t0 = _mm256_hadd_pd(acc[i], acc[3 + i]);
        let t1 = _mm256_hadd_pd(acc[6 + i], acc[9 + i]);
        let lo = _mm256_permute2f128_pd::<0x20>(t0, t1);
        let hi = _mm256_permute2f128_pd::<0x31>(t0, t1);
        _mm256_storeu_pd(row.as_mut_ptr(), _mm256_add_pd(lo, hi));
    }
    out
}

mod bf16;
pub(super) use bf16::{gemm_bf16, usable as bf16_pairs_usable};

#[cfg(test)]
mod tests;
