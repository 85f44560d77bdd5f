//! Matrix multiplication on the CPU.
//!
//! Floats use the BLIS/GotoBLAS structure: the operands are packed into cache-sized panels
//! (B into KC x NC panels that stay in L3, A into MC x KC blocks that stay in L2), and a
//! register-blocked micro-kernel chosen at run time (AVX-512: 14 x 32 f32, 14 x 16 f64, 14 x 32
//! bf16 pairs; AVX2+FMA: 6 x 16, 6 x 8; or portable) computes each MR x NR tile of C from one
//! micro-panel of each. Packing reads any strides, so transposed views cost nothing extra, and
//! converts f16 (and bf16 without AVX512_BF16) to f32 on the way; their f32 results are rounded
//! block by block as each block of C completes (`Finish`). Threads pack each B panel
//! together (a range of k each), then split C into disjoint blocks of rows (or columns when
//! C is wide and short). Small f32/f64 products skip packing (`gemm_small`). On two threads
//! the second half of each phase runs on a spinning helper thread (`helper`), on more on
//! rayon's pool. The AVX-512 kernels prefetch C's tile and the next B micro-panel a little
//! at a time while their k loop runs.

// Micro-kernels take the tile's operands, its C pointer and stride, and its valid extent:
// eight scalars that belong in registers, not in a struct.
#![allow(clippy::too_many_arguments)]

pub(crate) mod amx;
mod dot_tiles;
mod helper;
mod kernel;
mod micro;
mod pack;
#[cfg(test)]
mod pack_tests;
#[cfg(test)]
mod small_tests;
#[cfg(test)]
mod tests;
mod thin;

use half::bf16;
use rayon::prelude::*;

pub(crate) use dot_tiles::DotTile;
pub(crate) use helper::join;
pub(crate) use kernel::describe;
pub(crate) use kernel::{bf16_kernel, Accum};
pub(crate) use pack::{MatRef, OutPtr, PackInto};
pub(crate) use thin::Thin;

use kernel::CpuKernel;
use micro::Prefetch;
use pack::{pack_a, pack_b, PackFrom, Packed};

/// Runs the micro-kernel over one packed A block (mc rows) and the columns [j0, j1) of one
/// packed B panel (ks packed steps), writing C from (ic, jc).
///
/// # Safety
/// `k.run` must be callable on this CPU (`CpuKernel`s come from `Accum::kernel`/`bf16_kernel`,
/// which check); `apack` must hold the mc x kc block packed by `pack_a` with `k.mr`
/// (ceil(mc / mr) * mr * ks values) and `bpack` the panel packed by `pack_b` with `k.nr`
/// covering columns up to j1 rounded up to nr (ceil(j1 / nr) * nr * ks values), with j0 a
/// multiple of nr; `c` must be valid for reads and writes of rows 0..mc and columns j0..j1
/// at row stride `ldc`, and no other thread may touch that block during the call.
#[allow(clippy::too_many_arguments)]
unsafe fn macro_kernel<P: Packed, D>(
    k: &CpuKernel<P, D>,
    apack: &[P],
    bpack: &[P],
    mc: usize,
    ks: usize,
    (j0, j1): (usize, usize),
    c: *mut D,
    ldc: usize,
    accumulate: bool,
) {
    let (mr_, nr_) = (k.mr, k.nr);
    let panel_bytes = ks * nr_ * std::mem::size_of::<P>();
    let panel_lines = panel_bytes / 64;
    let tiles = mc.div_ceil(mr_);
    let lines_per_tile = panel_lines.div_ceil(tiles);
    for jr in (j0..j1).step_by(nr_) {
        let nr = nr_.min(j1 - jr);
        let bp = bpack.as_ptr().add(jr * ks);
        // The next B micro-panel sits in L3; each tile's kernel pulls a slice of it into L2
        // while it runs (the AVX-512 kernels two lines a turn of their k loop: a burst
        // before each tile held the miss buffers the loop's loads needed), so that the next
        // column of tiles does not start by waiting on it. `next` exists only when
        // jr + nr < j1, so that panel (panel_bytes long) is inside `bpack`, and every
        // l * 64 < panel_lines * 64 <= panel_bytes is inside it.
        let next = (jr + nr_ < j1).then(|| bp.add(ks * nr_) as *const i8);
        for (t, ir) in (0..mc).step_by(mr_).enumerate() {
            let pf = match next {
                Some(nb) => {
                    let l0 = (t * lines_per_tile).min(panel_lines);
                    let l1 = ((t + 1) * lines_per_tile).min(panel_lines);
                    Prefetch {
                        ptr: nb.add(l0 * 64),
                        lines: l1 - l0,
                    }
                }
                None => Prefetch::NONE,
            };
            let mr = mr_.min(mc - ir);
            let ap = apack.as_ptr().add(ir * ks);
            (k.run)(
                ks,
                ap,
                bp,
                c.add(ir * ldc + jr),
                ldc,
                accumulate,
                mr,
                nr,
                pf,
            );
        }
    }
}

/// Buffers for packed panels, kept between calls: a fresh zeroed allocation per call costs as
/// much as a whole 64 x 64 product. At most 8 are kept (a thread's A block plus the B panel
/// per call; more only under concurrent calls).
static SCRATCH: std::sync::Mutex<Vec<Vec<u64>>> = std::sync::Mutex::new(Vec::new());

/// One scratch buffer, back in the pool on drop.
struct Scratch(Vec<u64>);

/// Words a scratch buffer has beyond what it was asked for, to start on a 64-byte boundary
/// (`Scratch::view`).
const ALIGN_SLACK: usize = 8;

impl Scratch {
    /// A buffer of at least `len` values of P (contents: whatever the last user left, or
    /// zeros where it grew; packing overwrites every value a kernel reads).
    fn take<P: Packed>(len: usize) -> Scratch {
        let words = (len * std::mem::size_of::<P>()).div_ceil(8) + ALIGN_SLACK;
        let mut v = SCRATCH
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .unwrap_or_default();
        if v.len() < words {
            v.resize(words, 0);
        }
        Scratch(v)
    }

    fn view<P: Packed>(&mut self) -> &mut [P] {
        // From the first 64-byte boundary: the kernels' full-vector loads of a packed B step
        // then never straddle two cache lines (malloc's large blocks start 16 bytes past a
        // page). Aligned against not, alternated in one process (Emerald Rapids): f64 N=1000
        // and 128 x 1024 x 1024 on two threads +5-7%, f32 128 x 1024 x 1024 +5-7%, N=1000
        // level.
        let skip = self.0.as_ptr().align_offset(64).min(ALIGN_SLACK - 1);
        let n = (self.0.len() - ALIGN_SLACK) * 8 / std::mem::size_of::<P>();
        // SAFETY: `Packed`'s contract: P's size divides 8 and its alignment is at most u64's,
        // so the u64 buffer past its first `skip` (< ALIGN_SLACK) words holds at least n
        // values of P, aligned; every bit pattern is a valid P, so the initialised u64s are
        // initialised Ps. The borrow of `self` is unique.
        unsafe { std::slice::from_raw_parts_mut(self.0.as_mut_ptr().add(skip) as *mut P, n) }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let mut pool = SCRATCH.lock().unwrap_or_else(|e| e.into_inner());
        // Buffers past 64 MiB are not kept (a one-off huge product).
        if pool.len() < 8 && self.0.len() <= 8 << 20 {
            pool.push(std::mem::take(&mut self.0));
        }
    }
}

/// Below this many multiply-adds (f32 N=161) the packed path runs on one thread. It was 2^24
/// (N=256) when the second thread was rayon's, which had to be woken each time (Zen 5: f32
/// N=128 took 32 us on one thread and 73 us on two). With the spinning helper, two threads
/// pay from here: on the Emerald Rapids VM of bench/README.md, products with a transposed B
/// (packed), 2^22 against 2^24, 4 interleaved rounds: 200 x 200 x 200 1.03-1.26x, 32 x 512 x
/// 512 1.02-1.60x, 100 x 400 x 400 1.13-1.59x, 256 x 128 x 128 0.98-1.16x. (The small path
/// splits from SMALL_SPLIT_FLOPS.)
const PARALLEL_MIN_FLOPS: usize = 1 << 22;

/// Products up to this many multiply-adds (f32 N=512), with k up to SMALL_MAX_K, run
/// without packing where the kernel has a twin for unpacked operands and B has unit column
/// stride: at f32 N=64 packing A and B took as long as the micro-kernels themselves, and
/// measured on Zen 5 (interleaved, 3 rounds) the unpacked path on two threads beat the packed
/// one up to N=512 (300: 329-396 vs 230-281 GFLOP/s; 512: 401-426 vs 335-373), not at 768.
const SMALL_MAX_FLOPS: usize = 1 << 27;

/// Up to this many f32 multiply-adds (N=645) where A, which the small path reads once for
/// every strip of B's columns, fits in 7/8 of L2. Measured on the Emerald Rapids VM of
/// bench/README.md (2 MiB of L2), the two limits alternated call by call in one process, 3
/// rounds, GFLOP/s: N=576 239-273 packed against 255-294 unpacked, N=600 188-281 against
/// 180-299, N=640 211-292 against 197-304, 300 x 1000 x 800 (m x n x k) 184-225 against
/// 208-258, 128 x 2000 x 1000 149-217 against 151-243; with A past L2 packed stays ahead:
/// N=768 290-297 against 273-283, 1024 x 256 x 1024 237-258 against 218-246, 512 x 512 x
/// 1024 level.
const SMALL_MAX_FLOPS_A_IN_L2: usize = 1 << 28;

/// The same for f64 (N=322): its kernel does half the multiply-adds of f32's for each byte of
/// B it reads, and B's strips come from L2. Measured on the Emerald Rapids VM of
/// bench/README.md, two threads, the two paths alternated within one process: the packed
/// path 0.94-0.97x of the unpacked one at f64 N=320, 1.01-1.08x at 384, 1.05-1.28x at 448.
const SMALL_MAX_FLOPS_F64: usize = 1 << 25;

/// The deepest k the unpacked path takes: a B strip of k x NR (128 KiB of f32 at 1024) stays
/// in L2 while every row tile of A streams past it.
const SMALL_MAX_K: usize = 1024;

/// From this many multiply-adds (f32 N=46) the unpacked path splits C's rows over two
/// threads, the second half on a helper that spin-waits between products (`helper`).
/// Measured on Zen 5, 30 back-to-back products, best of 4 rounds, one thread against two:
/// f32 N=32 81 vs 70 GFLOP/s, N=48 77 vs 86, N=64 158 vs 194, N=128 169 vs 305. Through
/// rayon (whose sleeping worker had to be woken each time) the split only paid from N=147.
/// The two threads each take the strips of their own share of rows, then help with the
/// other's: the two vCPUs of the Emerald Rapids VM of bench/README.md run this path at
/// different speeds at times (one thread, f32 N=1024, pinned: 127-145 GFLOP/s on one,
/// 104-116 on the other; PyTorch 122-130 on both), and fixed shares then ran at the slower
/// one's pace. Whole strips claimed in turn, every row in each, gained in that phase (f32,
/// 5 rounds: 128 x 512 x 512 163 -> 203, N=300 170 -> 225, N=512 209 -> 240) but lost 5-15%
/// when both vCPUs ran at full speed (N=256 296 -> 255); own share first measured level with
/// fixed shares there (5 rounds: N=256 298 against 291, N=512 298 against 303).
const SMALL_SPLIT_FLOPS: usize = 3 << 15;

/// C = A * B for f32 or f64 (no conversion while packing): 3 to 96 rows (AVX2: up to 192)
/// by a transposed B through `dot_tiles::gemm`, other products with few rows or columns through
/// `thin::gemm_thin`, small products without packing where this CPU's kernel
/// allows it (`gemm_small`), the rest as [`gemm_with`].
///
/// # Safety
/// As for [`gemm_with`].
pub(crate) unsafe fn gemm_float<D: Thin + DotTile + PackFrom<D> + PackInto<D>>(
    m: usize,
    n: usize,
    k: usize,
    a: MatRef<D>,
    b: MatRef<D>,
    c: &mut [D],
    threads: usize,
    finish: Option<Finish<D>>,
) {
    if dot_tiles::gemm(m, n, k, a, b, c, threads) || thin::gemm_thin(m, n, k, a, b, c, threads) {
        if let Some(f) = finish {
            f(c.as_ptr(), 0..m, 0..n);
        }
        return;
    }
    let kern = D::kernel();
    let l2 = kernel::Caches::of_this_machine().l2;
    match kern.small {
        Some(small) if takes_small_path::<D>(m, n, k, b, kern.mr, l2) => {
            let (mr, nr) = (kern.mr, kern.nr);
            let strips = n.div_ceil(nr);
            let mb = small_block_rows(k, std::mem::size_of::<D>(), mr, l2);
            let cp = OutPtr(c.as_mut_ptr());
            if threads > 1 && m * n * k >= SMALL_SPLIT_FLOPS && m >= 2 * mr {
                // Two shares of C's rows (`small_split`), each cut into blocks of `mb` rows
                // and each block into column strips: each thread takes the (block, strip)
                // units of its own share in turn, then helps with what is left of the
                // other's, so that a thread slowed by another process does fewer while, on
                // equal CPUs, each keeps to its own rows.
                let half = small_split(m, mr, kern.small_halves);
                let rows = [(0, half), (half, m - half)];
                let units = |rn: usize| rn.div_ceil(mb) * strips;
                let claims = [
                    helper::Claims::new(units(half)),
                    helper::Claims::new(units(m - half)),
                ];
                helper::for_each_part(&mut [(); 2], |t, _| {
                    for share in [t, 1 - t] {
                        let (r0, rn) = rows[share];
                        while let Some(u) = claims[share].next() {
                            let (i0, s) = (r0 + u / strips * mb, u % strips);
                            let rb = mb.min(r0 + rn - i0);
                            // SAFETY: as for this function, for rows i0..i0 + rb of A and C
                            // (inside the share r0..r0 + rn) and the strip s of C's
                            // columns; each (share, unit) is claimed once, so no two
                            // threads write one element of C, and nothing reads C before
                            // both threads have returned.
                            unsafe {
                                let (ar, cr) = (a.offset(i0, 0), cp.get().add(i0 * n));
                                gemm_small(
                                    small,
                                    (mr, nr),
                                    (rb, mb),
                                    n,
                                    k,
                                    ar,
                                    b,
                                    (cr, n),
                                    s..s + 1,
                                )
                            }
                        }
                    }
                });
            } else {
                gemm_small(
                    small,
                    (mr, nr),
                    (m, mb),
                    n,
                    k,
                    a,
                    b,
                    (cp.get(), n),
                    0..strips,
                )
            }
            if let Some(f) = finish {
                f(c.as_ptr(), 0..m, 0..n);
            }
        }
        _ => gemm_with(&kern, m, n, k, a, b, c, threads, finish),
    }
}

/// Whether a product of m x k by k x n (B as `b`) runs on the unpacked path, for a kernel
/// of `mr` rows: few enough multiply-adds for its dtype, k up to SMALL_MAX_K, B with unit
/// column stride, and B's rows not a multiple of 4 KiB apart once C has 8 tiles of rows or
/// more. Such rows all fall into the same sets of L1, so a B strip read in place misses on
/// every row, each time a tile of A passes it. Measured as for SMALL_MAX_FLOPS_F64, the
/// packed path against this one: f32 256x1024x512 (m x n x k) 1.48x, 128x1024x1024 1.75x,
/// f64 N=512 1.92x; with fewer rows the packing of B is not repaid: f32 64x1024x1024 0.96x,
/// 28x1024x1024 0.62x. (Rows 2 KiB apart, f32 N=512: 0.96-1.04x, left unpacked.) And a
/// k under SMALL_MIN_K only for a C of up to SMALL_SHORT_MAX_MN elements. `l2` is one
/// core's L2 in bytes (`Caches`).
fn takes_small_path<D>(m: usize, n: usize, k: usize, b: MatRef<D>, mr: usize, l2: usize) -> bool {
    let size = std::mem::size_of::<D>();
    let max = if size > 4 {
        SMALL_MAX_FLOPS_F64
    } else if m * k * size <= l2 / 8 * 7 {
        SMALL_MAX_FLOPS_A_IN_L2
    } else {
        SMALL_MAX_FLOPS
    };
    let aliased = (b.rs * size).is_multiple_of(4096) && m >= 8 * mr;
    let short = k < SMALL_MIN_K && m * n > SMALL_SHORT_MAX_MN;
    !short
        && m * n * k <= max
        && k <= SMALL_MAX_K
        && b.cs == 1
        && k > 0
        && m > 0
        && n > 0
        && !aliased
}

/// Below this k the small path (`takes_small_path`) takes only products with a C of up to
/// SMALL_SHORT_MAX_MN elements: each tile's few steps of k then pay for its prologue and
/// its stores, and the packed kernel did better (Emerald Rapids, AVX-512, two threads, the
/// two paths alternated in one process, packed against unpacked: f32 2048 x 512 x 128
/// 1.14-1.20x, 4096 x 256 x 64 1.21-1.34x, 1000 x 1000 x 32 1.27x; f64 1000 x 1000 x 32
/// 1.12-1.16x, 2048 x 256 x 64 1.26-1.36x; AVX2 alike), except for a small C (f32 256 x
/// 256 x 32 0.73x, 512 x 512 x 64 0.92x, 1000 x 256 x 64 0.97x).
const SMALL_MIN_K: usize = 256;
const SMALL_SHORT_MAX_MN: usize = 1 << 18;

/// Where the small path splits m rows between two threads: the split whose two shares cost
/// the least at the slower one, counting a whole tile of `mr` rows as 2 and a last, partial
/// one as 2, or, where the kernel computes only its rows (`halves`: AVX-512's twins), a
/// last tile of up to mr / 2 rows as 1. With `halves` the split is a multiple of half a
/// tile, else of a tile. f32 N=256 on AVX-512 (18 tiles and 4 rows): 126 and 130 rows, 18
/// and 19 halves, where a split into whole tiles gave 20 and 18.
fn small_split(m: usize, mr: usize, halves: bool) -> usize {
    let h = if halves { (mr / 2).max(1) } else { mr };
    let cost = |rows: usize| {
        2 * (rows / mr)
            + match rows % mr {
                0 => 0,
                r if halves && 2 * r <= mr => 1,
                _ => 2,
            }
    };
    let near = m / 2 / h * h;
    (near.saturating_sub(h)..=near + 2 * h)
        .step_by(h)
        .filter(|&s| s >= h && s < m)
        .min_by_key(|&s| (cost(s).max(cost(m - s)), s.abs_diff(m - s)))
        .unwrap_or(m / 2)
}

/// Rows of C the small path computes together (`gemm_small`): a block whose A rows take
/// half of L2 (`l2` bytes), in whole tiles of `mr` rows, at least 4, so that the block's A
/// stays in L2 while its strips pass (down all of C's rows, each strip passed all of A).
/// Smaller blocks read B once a block: measured on Emerald Rapids (2 MiB L2, the sizes
/// alternated in one process), blocks of an eighth of L2 ran f32 1024 x 256 x 256 and
/// 1024 x 128 x 1024 3% faster and 300 x 1000 x 800 (3.2 MB of B) 10% slower; half of L2
/// is level with no blocks on the squares and there.
fn small_block_rows(k: usize, size: usize, mr: usize, l2: usize) -> usize {
    (l2 / 2 / (k * size).max(1) / mr * mr).max(4 * mr)
}

/// C = A * B for the column strips `strips` (NR columns each) of C, one tile at a time over
/// the whole of k, reading A and B where they lie: B's full-width column strips in place
/// (unit column stride), its last, narrower strip copied into a zero-padded k x NR buffer.
/// C is m x n with rows `ldc` apart. C's rows are taken in blocks of `mb` (a multiple of
/// the tile's rows), each block's strips in turn.
///
/// # Safety
/// As for [`gemm_with`], with `small` from this CPU's kernel (`CpuKernel::small`), (mr, nr) its
/// tile, b.cs == 1, m, n, k > 0, strips inside ceil(n / NR), and `c` valid for writes of
/// those columns of m rows; no one else writes them during the call.
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_small<D: Accum>(
    small: kernel::SmallKernel<D>,
    (mr_t, nr_t): (usize, usize),
    (m, mb): (usize, usize),
    n: usize,
    k: usize,
    a: MatRef<D>,
    b: MatRef<D>,
    (c, ldc): (*mut D, usize),
    strips: std::ops::Range<usize>,
) {
    // The last strip, when narrower than NR, copied once a call (on two threads each unit
    // is a call: once a block of rows, k x NR values against the block's mb x k x NR
    // multiply-adds).
    let mut edge: Vec<D> = Vec::new();
    let last = n / nr_t;
    if !n.is_multiple_of(nr_t) && strips.contains(&last) {
        let (j0, nr) = (last * nr_t, n % nr_t);
        edge.resize(k * nr_t, D::default());
        for p in 0..k {
            for j in 0..nr {
                edge[p * nr_t + j] = b.at(p, j0 + j);
            }
        }
    }
    for r0 in (0..m).step_by(mb) {
        let r1 = m.min(r0 + mb);
        for j0 in strips.clone().map(|s| s * nr_t) {
            let nr = (n - j0).min(nr_t);
            let (bp, rsb) = if nr == nr_t {
                // Columns j0..j0 + NR of every row p < k: in bounds (b.cs == 1, j0 + NR <= n).
                (b.ptr.wrapping_add(j0), b.rs)
            } else {
                (edge.as_ptr(), nr_t)
            };
            for i0 in (r0..r1).step_by(mr_t) {
                let mr = (r1 - i0).min(mr_t);
                // SAFETY: rows i0..i0 + mr of A (valid for i < m, p < k: the caller's
                // contract), B's strip as above, C's tile inside its m x n (c holds m * n,
                // row stride n).
                small(
                    k,
                    a.ptr.wrapping_add(i0 * a.rs),
                    a.rs,
                    a.cs,
                    bp,
                    rsb,
                    c.add(i0 * ldc + j0),
                    ldc,
                    mr,
                    nr,
                );
            }
        }
    }
}

/// Whether products of `dtype` run on AMX's tiles in this process (bf16 with AMX-BF16, f16
/// with AMX-FP16).
pub(crate) fn amx_in_use(dtype: crate::DType) -> bool {
    match dtype {
        crate::DType::BF16 => amx::tiles().is_some(),
        crate::DType::F16 => amx::tiles_f16().is_some(),
        _ => false,
    }
}

/// bf16 C = A * B accumulated in f32: on AMX's tiles where the CPU has them and Linux gives
/// them to this process (`amx::status`), else with AVX512_BF16's pair dot products where the
/// CPU has them, else converted to f32 while packing.
///
/// # Safety
/// As for [`gemm_with`].
pub(crate) unsafe fn gemm_bf16(
    m: usize,
    n: usize,
    k: usize,
    a: MatRef<bf16>,
    b: MatRef<bf16>,
    c: &mut [f32],
    threads: usize,
    finish: Option<Finish<f32>>,
) {
    if let Some(t) = amx::tiles() {
        return amx::gemm_tiles(&t, m, n, k, a, b, c, threads, finish);
    }
    match bf16_kernel() {
        Some(kern) => gemm_with(&kern, m, n, k, a, b, c, threads, finish),
        None => gemm_with(&f32::kernel(), m, n, k, a, b, c, threads, finish),
    }
}

/// f16 C = A * B accumulated in f32: on AMX's tiles where the CPU has AMX-FP16 and Linux
/// gives them to this process (`amx::status_f16`), else converted to f32 while packing; with
/// `finish` as for [`gemm_with`].
///
/// # Safety
/// As for [`gemm_with`].
pub(crate) unsafe fn gemm_f16(
    m: usize,
    n: usize,
    k: usize,
    a: MatRef<half::f16>,
    b: MatRef<half::f16>,
    c: &mut [f32],
    threads: usize,
    finish: Option<Finish<f32>>,
) {
    if let Some(t) = amx::tiles_f16() {
        return amx::gemm_tiles(&t, m, n, k, a, b, c, threads, finish);
    }
    gemm_with(&f32::kernel(), m, n, k, a, b, c, threads, finish)
}

/// Called by `gemm_with` for each block of C that is complete (its last KC slice
/// done), on the thread that computed it, while the block is still in its caches: `(c,
/// rows, cols)` with `c` C's first element (row stride n) and the block's rows and columns.
/// bf16 and f16 products round their f32 results here (a separate pass afterwards read
/// them back from memory: 5% of a bf16 N=1024 product). Blocks of different calls are
/// disjoint and cover C once.
pub(crate) type Finish<'a, D> =
    &'a (dyn Fn(*const D, std::ops::Range<usize>, std::ops::Range<usize>) + Sync);

/// How many units of work a phase is cut into per thread at most (`Split`, `pack_units`):
/// enough that a thread slowed by another process on its CPU (a busy sibling hyperthread, a
/// neighbour on a shared VM) hands units to the other, few enough that each A block still
/// covers a good part of L2. On the Emerald Rapids VM of bench/README.md, one vCPU's FMA
/// rate swung between 104 and 176 GFLOP/s from one second to the next.
const UNITS_PER_THREAD: usize = 8;

/// The k steps of a B panel cut into ranges that the threads pack in turn (`pack_b`):
/// `UNITS_PER_THREAD` ranges a thread, of at least 16 steps, at least one range (one thread:
/// one range).
fn pack_units(ks: usize, threads: usize) -> Vec<std::ops::Range<usize>> {
    let parts = if threads > 1 {
        (ks / 16).clamp(1, threads * UNITS_PER_THREAD)
    } else {
        1
    };
    let per = ks.div_ceil(parts);
    (0..parts)
        .map(|t| (t * per).min(ks)..((t + 1) * per).min(ks))
        .filter(|r| !r.is_empty())
        .collect()
}

/// Runs `pack(steps)` for the k steps 0..ks of a B panel cut into `pack_units` ranges, each
/// range once, the `threads` threads claiming them in turn (`helper::Claims`).
fn pack_in_turn(ks: usize, threads: usize, pack: impl Fn(std::ops::Range<usize>) + Sync + Send) {
    let ranges = pack_units(ks, threads);
    let claims = helper::Claims::new(ranges.len());
    helper::for_each_part(&mut vec![(); threads], |_, _| {
        while let Some(u) = claims.next() {
            pack(ranges[u].clone());
        }
    });
}

/// How one compute phase's m x nc block of C is cut into units that the threads claim in
/// turn (`helper::Claims`), so that a thread slowed by another process takes fewer of them
/// (a fixed half each ran two threads at the slower one's pace: f32 N=2000 at 150 GFLOP/s
/// with a busy loop on one of two vCPUs, against 158 on one thread alone).
///
/// Units are runs of whole tiles of rows with every column, at most MC rows each, and
/// `UNITS_PER_THREAD` a thread where C has rows enough (each unit at least 4 tiles and a
/// quarter of MC: every unit costs a pass over the B panel); where the tiles allow, their
/// number is a multiple of the threads, so that on equal CPUs each thread ends up with the
/// same share. One thread takes blocks of MC rows, as few as fit. C with too few rows to
/// share (fewer than 4 tiles a thread) is cut into one share of columns a thread (whole
/// micro-panels each), every unit with all the rows.
#[derive(Clone, Copy, Debug)]
struct Split {
    rows: bool,
    units: usize,
    /// Tiles of rows (ceil(m / mr)), shared out over the units when `rows`.
    tiles: usize,
    threads: usize,
    m: usize,
    nc: usize,
    mr: usize,
    nr: usize,
}

impl Split {
    fn new(threads: usize, (m, nc): (usize, usize), (mr, nr): (usize, usize), mc: usize) -> Split {
        let threads = threads.max(1);
        let rows = m >= threads * mr * 4;
        let tiles = m.div_ceil(mr);
        // Units of at most MC rows: ceil(tiles / units) <= mc / mr tiles.
        let fit = tiles.div_ceil((mc / mr).max(1));
        let units = if !rows {
            threads
        } else if threads == 1 {
            fit
        } else {
            let min_tiles = (mc / mr / 4).max(4);
            let per = (tiles / (threads * min_tiles)).clamp(1, UNITS_PER_THREAD);
            (threads * per)
                .max(fit.next_multiple_of(threads))
                .min(tiles)
        };
        Split {
            rows,
            units,
            tiles,
            threads,
            m,
            nc,
            mr,
            nr,
        }
    }

    /// Unit u's rows and columns of the block (empty when there is nothing for it: column
    /// shares rounded up to whole micro-panels can run out before the last units).
    fn unit(&self, u: usize) -> (std::ops::Range<usize>, (usize, usize)) {
        let (m, nc, mr, nr) = (self.m, self.nc, self.mr, self.nr);
        if self.rows {
            let (lo, hi) = (
                u * self.tiles / self.units,
                (u + 1) * self.tiles / self.units,
            );
            ((lo * mr).min(m)..(hi * mr).min(m), (0, nc))
        } else {
            let per = nc.div_ceil(self.threads).next_multiple_of(nr);
            (0..m, ((u * per).min(nc), ((u + 1) * per).min(nc)))
        }
    }
}

/// C = A * B with kernel `kern`.
///
/// The loop nest is BLIS's: for each NC-wide column panel and KC-deep slice, B's panel is
/// packed once, by all threads together, and stays in the shared L3; then each thread packs
/// its own MC x KC blocks of A (in its L2) and runs the micro-kernel over them. Threads
/// claim the units of each phase in turn (`Split` for the rows, or columns when C has too
/// few rows to share; `pack_units` for B's packing), so that a thread on a busier CPU takes
/// fewer. With `finish`, each block of C is handed to it once complete ([`Finish`]).
///
/// # Safety
/// `kern` must come from `Accum::kernel` or `bf16_kernel` (callable on this CPU).
/// `a.at(i, p)` must be valid (see [`MatRef::at`]) for all i < m, p < k, and `b.at(p, j)`
/// for all p < k, j < n: every element address, computed without overflow, inside the live
/// allocation its pointer came from, for the whole call. `c` must hold at least m * n
/// elements (this is not checked; the micro-kernels write through a raw pointer). The
/// memory behind `a` and `b` must not be written during the call. `finish` may read the
/// block it is given through the pointer.
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_with<S: Copy + Send + Sync + 'static, P: PackFrom<S>, D: Accum>(
    kern: &CpuKernel<P, D>,
    m: usize,
    n: usize,
    k: usize,
    a: MatRef<S>,
    b: MatRef<S>,
    c: &mut [D],
    threads: usize,
    finish: Option<Finish<D>>,
) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        c.fill(D::default());
        if let Some(f) = finish {
            f(c.as_ptr(), 0..m, 0..n);
        }
        return;
    }
    let (mr, nr) = (kern.mr, kern.nr);
    // Equal KC slices (a multiple of the kernel's unroll of 4 packed steps) rather than full
    // ones and a thin remainder: every slice then pays the same C read-back for the same work.
    let step = 4 * P::K_PER;
    let kcb = k
        .div_ceil(k.div_ceil(kern.kc))
        .next_multiple_of(step)
        .min(kern.kc);
    let (mcb, ncb) = (kern.mc, kern.nc);
    let threads = if m * n * k < PARALLEL_MIN_FLOPS {
        1
    } else {
        threads.max(1)
    };
    let ks_max = kcb.min(k).div_ceil(P::K_PER);
    let nc_max = ncb.min(n);
    let mut bscratch = Scratch::take::<P>(ks_max * nc_max.div_ceil(nr) * nr);
    let bpack: &mut [P] = bscratch.view();
    let alen = ks_max * mcb.min(m).div_ceil(mr) * mr;
    let mut ascratch: Vec<Scratch> = (0..threads).map(|_| Scratch::take::<P>(alen)).collect();
    let mut apacks: Vec<&mut [P]> = ascratch.iter_mut().map(|s| s.view()).collect();
    let cp = OutPtr(c.as_mut_ptr());
    for jc in (0..n).step_by(ncb) {
        let nc = ncb.min(n - jc);
        for pc in (0..k).step_by(kcb) {
            let kc = kcb.min(k - pc);
            let ks = kc.div_ceil(P::K_PER);
            let bsrc = b.offset(pc, jc);
            let panels = &mut bpack[..ks * nc.div_ceil(nr) * nr];
            let (dst, len) = (OutPtr(panels.as_mut_ptr()), panels.len());
            // The threads pack ranges of k steps of every panel (see pack_b), in turn.
            pack_in_turn(ks, threads, |steps| {
                // SAFETY: pack_b reads b.at(pc + p, jc + j) for p < kc, j < nc: elements of
                // the k x n operand that gemm's caller promised valid (# Safety of
                // gemm_with). `dst` holds `len` values (the `panels` slice, borrowed mutably
                // for this packing only); pack_in_turn gives each range of steps once, and
                // pack_b writes only the places of its steps, disjoint from the others'.
                unsafe { pack_b(kc, nc, nr, bsrc, steps, (dst, len), ks) };
            });
            let bpack = &bpack[..];
            let split = Split::new(threads, (m, nc), (mr, nr), mcb);
            let claims = helper::Claims::new(split.units);
            let gemm_unit = |u: usize, apack: &mut &mut [P]| {
                let (rows, cols) = split.unit(u);
                // Column shares rounded up to whole micro-panels can run out before the
                // last units (and a zero block height would never advance).
                if rows.is_empty() || cols.0 == cols.1 {
                    return;
                }
                // Equal blocks (in whole tiles) rather than full ones and a thin rest: a
                // block of a few rows costs a whole pass over the B panel for little work.
                // (A unit of rows is one block; a unit of columns has all of C's rows.)
                let blocks = rows.len().div_ceil(mcb).max(1);
                let mc_even = rows.len().div_ceil(blocks).next_multiple_of(mr).min(mcb);
                for ic in rows.clone().step_by(mc_even) {
                    let mc = mc_even.min(rows.end - ic);
                    // SAFETY: pack_a reads A rows ic..ic + mc (< m, since mc <= rows.end -
                    // ic) and columns pc..pc + kc (<= k), valid by gemm_with's # Safety.
                    // apack has ceil(min(MC, m) / mr) * mr * ks_max >= the packed size.
                    // `cblk` is C + ic * n + jc, inside `c` (m * n elements by # Safety);
                    // macro_kernel writes rows ic..ic + mc and columns jc + cols.0 ..
                    // jc + cols.1 of C; the units of a Split are disjoint (runs of whole
                    // tiles, or nr-aligned column shares) and each is claimed once, so no
                    // two threads write one element. bpack was fully packed (and the packing
                    // tasks joined) before `work` runs; `kern` is callable (# Safety).
                    unsafe {
                        pack_a(mc, kc, mr, a.offset(ic, pc), apack);
                        let cblk = cp.get().add(ic * n + jc);
                        macro_kernel(kern, apack, bpack, mc, ks, cols, cblk, n, pc > 0);
                    }
                    // The block is complete after the last KC slice.
                    if let Some(f) = finish.filter(|_| pc + kc == k) {
                        f(cp.get(), ic..ic + mc, jc + cols.0..jc + cols.1);
                    }
                }
            };
            let work = |_: usize, apack: &mut &mut [P]| {
                while let Some(u) = claims.next() {
                    gemm_unit(u, apack);
                }
            };
            // Two threads: the second half on the helper, which spins between jobs. Through
            // rayon its worker slept between products, and a sleeping vCPU took up to 1.5 ms
            // to wake (Zen 5 VM): bf16 N=1024 (2.5 ms a product) ran on one thread in a
            // third of the iterations of a benchmark loop.
            helper::for_each_part(&mut apacks, work);
        }
    }
}

/// Integer matmul: C = A * B with wrapping arithmetic (PyTorch's integer matmul wraps too).
/// B must be contiguous row-major; rows of C are computed in parallel.
///
/// # Safety
/// `a.at(i, p)` must be valid (see [`MatRef::at`]) for every i < m, p < k. `b` and `c` are
/// indexed with bounds checks.
pub(crate) unsafe fn gemm_int<T>(m: usize, n: usize, k: usize, a: MatRef<T>, b: &[T], c: &mut [T])
where
    T: crate::backend::cpu::num::Num,
{
    if n == 0 {
        return;
    }
    let row = |(i, crow): (usize, &mut [T])| {
        crow.fill(T::ZERO);
        for p in 0..k {
            // SAFETY: i < m (chunks_mut(n).take(m)) and p < k, and the caller guarantees
            // a.at(i, p) is valid for those (this function's # Safety).
            let av = unsafe { a.at(i, p) };
            let brow = &b[p * n..(p + 1) * n];
            for (cv, &bv) in crow.iter_mut().zip(brow) {
                *cv = cv.add(av.mul(bv));
            }
        }
    };
    if m * n * k < PARALLEL_MIN_FLOPS || !crate::base::threads::parallel() {
        c.chunks_mut(n).enumerate().take(m).for_each(row);
    } else {
        c.par_chunks_mut(n).enumerate().take(m).for_each(row);
    }
}
