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
//! C is wide and short). Small f32/f64 products skip packing (`small::gemm`). On two threads
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
mod outer;
mod pack;
#[cfg(test)]
mod pack_tests;
mod small;
#[cfg(test)]
mod small_tests;
#[cfg(test)]
mod tests;
mod thin;
mod thin_half;

use half::bf16;
use rayon::prelude::*;

pub(crate) use dot_tiles::DotTile;
pub(crate) use helper::join;
pub(crate) use kernel::describe;
pub(crate) use kernel::{bf16_kernel, Accum};
pub(crate) use outer::gemm_rounded as gemm_outer_rounded;
pub(crate) use pack::{MatRef, OutPtr, PackInto};
#[cfg(target_arch = "x86_64")]
pub(in crate::backend::cpu) use thin::level as simd_level;
pub(crate) use thin::Thin;

use kernel::{CpuKernel, PackingKernel};
use micro::Prefetch;
use pack::{pack_a, pack_b, words_of_source, PackFrom, Packed};

/// Runs the micro-kernel over one packed A block (mc rows) and the columns [j0, j1) of one
/// packed B panel (ks packed steps), writing C from (ic, jc). With `fused` (`k.packing`,
/// where A's block lies, its row stride), the first column of tiles runs the packing kernel
/// on every whole tile of rows, which packs those tiles into `apack` for the columns after
/// it: a pass over A from L3 that measured 2-4% of an f32 or f64 product at N=1000 (the
/// loads of A's rows now overlap the FMAs). Emerald Rapids VM, calls alternated in one
/// process, median over pairs, one and two threads: N=1000 1.018 and 1.013 (f32), 1.021
/// and 1.024 (f64); N=2000 1.015 and 1.014 (f32), 1.020 and 1.005 (f64); N=512 two
/// threads 1.042 (f32) and 1.043 (f64); 3000 x 200 x 1000 1.068; N=4096 1.001.
///
/// # Safety
/// `k.run` must be callable on this CPU (`CpuKernel`s come from `Accum::kernel`/`bf16_kernel`,
/// which check); `apack` must hold the mc x kc block packed by `pack_a` with `k.mr`
/// (ceil(mc / mr) * mr * ks values), or with `fused` only its last partial tile of rows
/// (the rest is written here), `fused`'s pointer then A's block: 14 rows of ks values at
/// `rsa` apart for each whole tile, `k.mr` 14 (the twin's tile) and j1 - j0 >= nr; `bpack`
/// the panel packed by `pack_b` with `k.nr` covering columns up to j1 rounded up to nr
/// (ceil(j1 / nr) * nr * ks values), with j0 a multiple of nr; `c` must be valid for reads
/// and writes of rows 0..mc and columns j0..j1 at row stride `ldc`, and no other thread may
/// touch that block during the call.
#[allow(clippy::too_many_arguments)]
unsafe fn macro_kernel<P: Packed, D>(
    k: &CpuKernel<P, D>,
    apack: &mut [P],
    bpack: &[P],
    mc: usize,
    ks: usize,
    (j0, j1): (usize, usize),
    c: *mut D,
    ldc: usize,
    accumulate: bool,
    fused: Option<(PackingKernel<P, D>, *const P, usize)>,
) {
    let (mr_, nr_) = (k.mr, k.nr);
    // The packing kernels' tiles are 14 rows (the AVX-512 kernels', whose twins they are).
    debug_assert!(fused.is_none() || (j1 - j0 >= nr_ && mr_ == 14));
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
            let ap = apack.as_mut_ptr().add(ir * ks);
            if let Some((pk, asrc, rsa)) = fused.filter(|_| jr == j0 && mr == mr_) {
                let ct = c.add(ir * ldc + jr);
                pk(ks, asrc.add(ir * rsa), rsa, bp, ct, ldc, accumulate, nr, ap);
                continue;
            }
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
/// splits from `small::SMALL_SPLIT_FLOPS`.)
const PARALLEL_MIN_FLOPS: usize = 1 << 22;

/// C = A * B for f32 or f64 (no conversion while packing): 3 to 96 rows (AVX2: up to 192)
/// by a transposed B through `dot_tiles::gemm`, `x @ W` on up to 32 rows through
/// `thin_half::gemm_rows_widened` (f32) or `gemm_rows_f64` (`Thin::rows_widened`), other products with few rows or
/// columns through `thin::gemm_thin`, small products without packing where this CPU's
/// kernel allows it (`gemm_small`), the rest as [`gemm_with`].
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
    if k == 1 && m > 0 && n > 0 {
        return outer::gemm(m, n, a, b, c, threads, finish);
    }
    if dot_tiles::gemm(m, n, k, a, b, c, threads)
        || D::rows_widened(m, n, k, a, b, c, threads)
        || thin::gemm_thin(m, n, k, a, b, c, threads)
    {
        return finish_whole(finish, c, m, n);
    }
    let kern = D::kernel();
    let l2 = kernel::Caches::of_this_machine().l2;
    // A B of one strip of columns that is not row-major (a Linear layer's weight, n x k,
    // transposed: 256 x 10 x 784, 1024 x 32 x 1024), or of at most half a strip in any
    // layout, also takes the small path, which copies that strip row-major as it starts
    // (`small::last_strip`), so that A, whose every value meets only n columns, is read in
    // place rather than packed. (`takes` asks of a row-major B.)
    let narrow = m >= kern.mr && (2 * n <= kern.nr || (n <= kern.nr && b.cs != 1));
    let as_copied = MatRef { rs: n, cs: 1, ..b };
    match kern.small {
        Some(small) if small::takes(m, n, k, b, (kern.mr, kern.nr), l2) => {
            small::gemm(&kern, small, m, n, k, a, b, c, threads, l2);
            finish_whole(finish, c, m, n);
        }
        Some(small) if narrow && small::takes(m, n, k, as_copied, (kern.mr, kern.nr), l2) => {
            small::gemm(&kern, small, m, n, k, a, b, c, threads, l2);
            finish_whole(finish, c, m, n);
        }
        _ => gemm_with(&kern, m, n, k, a, b, c, threads, finish),
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

/// bf16 C = A * B accumulated in f32: `x @ W` on up to 32 rows with C's tiles in registers
/// (`thin_half::gemm_rows`, or `gemm_rows_widened` without AVX512_BF16), few rows or
/// columns through `thin_half::gemm`; else on AMX's tiles where the CPU has them and Linux
/// gives them to this process (`amx::status`), else with AVX512_BF16's pair dot products
/// where the CPU has them (a transposed B on 3 to 128 rows as `dot_tiles::gemm_bf16`'s
/// tiles), else converted to f32 while packing.
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
    let amx = amx::tiles().is_some();
    let native = amx || bf16_kernel().is_some();
    if k == 1 && m > 0 && n > 0 {
        return outer::gemm(m, n, a, b, c, threads, finish);
    }
    if thin_half::gemm_rows(m, n, k, a, b, c, threads, amx)
        || thin_half::gemm_rows_widened(m, n, k, a, b, c, threads, amx)
        || thin_half::gemm(m, n, k, a, b, c, threads, native)
    {
        return finish_whole(finish, c, m, n);
    }
    if let Some(t) = amx::tiles() {
        return amx::gemm_tiles(&t, m, n, k, a, b, c, threads, finish);
    }
    if dot_tiles::gemm_bf16(m, n, k, a, b, c, threads) {
        return finish_whole(finish, c, m, n);
    }
    match bf16_kernel() {
        Some(kern) => gemm_with(&kern, m, n, k, a, b, c, threads, finish),
        None => gemm_with(&f32::kernel(), m, n, k, a, b, c, threads, finish),
    }
}

/// f16 C = A * B accumulated in f32: `x @ W` on up to 32 rows through
/// `thin_half::gemm_rows_widened`, few rows or columns through `thin_half::gemm`; else on
/// AMX's tiles where the CPU has AMX-FP16 and Linux gives them to this process
/// (`amx::status_f16`), else converted to f32 while packing; with `finish` as for
/// [`gemm_with`].
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
    let native = amx::tiles_f16().is_some();
    if k == 1 && m > 0 && n > 0 {
        return outer::gemm(m, n, a, b, c, threads, finish);
    }
    if thin_half::gemm_rows_widened(m, n, k, a, b, c, threads, native)
        || thin_half::gemm(m, n, k, a, b, c, threads, native)
    {
        return finish_whole(finish, c, m, n);
    }
    if let Some(t) = amx::tiles_f16() {
        return amx::gemm_tiles(&t, m, n, k, a, b, c, threads, finish);
    }
    gemm_with(&f32::kernel(), m, n, k, a, b, c, threads, finish)
}

/// Hands all of C (m x n), now complete, to `finish` where there is one: for the paths
/// that compute C in one piece (thin, dot tiles, small products, k = 0).
fn finish_whole<D>(finish: Option<Finish<D>>, c: &[D], m: usize, n: usize) {
    if let Some(f) = finish {
        f(c.as_ptr(), 0..m, 0..n);
    }
}

/// Called by `gemm_with` for each block of C that is complete (its last KC slice
/// done), on the thread that computed it, while the block is still in its caches: `(c,
/// rows, cols)` with `c` C's first element (row stride n) and the block's rows and columns.
/// bf16 and f16 products round their f32 results here (a separate pass afterwards read
/// them back from memory: 5% of a bf16 N=1024 product). Blocks of different calls are
/// disjoint and cover C once.
pub(crate) type Finish<'a, D> =
    &'a (dyn Fn(*const D, std::ops::Range<usize>, std::ops::Range<usize>) + Sync);

/// The most rows of C for which `gemm_with` gives each of two threads a share of columns
/// (all the rows) rather than shares of rows, where C is wide enough (four micro-panels a
/// thread).
/// With shares of rows every thread reads every packed micro-panel of B, half of them packed
/// by the other core, once per block of A; with shares of columns each reads only its own,
/// and A is packed by both. Measured on Zen 4 (two threads, blocks of calls of one kind
/// alternated in one process, median over 8 rounds): f32 N=512 1.05x, 640 1.16x, 768 1.03x,
/// 256 x 1024 x 1024 1.04x, 700 x 3000 x 700 1.04x; f64 N=384 1.17x, 512 1.06x, 640 1.04x,
/// 512 x 2000 x 2000 1.14x; bf16 N=384 1.09x, 512 1.05x, 640 1.19x, 768 1.16x, 256 x 1024
/// x 1024 1.55x, 512 x 2000 x 2000 1.28x. At N=1024 mixed (f32 0.99, f64 1.02, bf16 1.01),
/// so not there; with C 200 columns wide (768 x 200 x 1000: 7 micro-panels, 4 against 3)
/// 0.85-0.91x, hence the width condition.
const COLUMNS_MAX_ROWS: usize = 768;

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
        if m < threads * mr * 4 {
            return Split::columns(threads, (m, nc), (mr, nr));
        }
        let tiles = m.div_ceil(mr);
        // Units of at most MC rows: ceil(tiles / units) <= mc / mr tiles.
        let fit = tiles.div_ceil((mc / mr).max(1));
        let units = if threads == 1 {
            fit
        } else {
            let min_tiles = (mc / mr / 4).max(4);
            let per = (tiles / (threads * min_tiles)).clamp(1, UNITS_PER_THREAD);
            (threads * per)
                .max(fit.next_multiple_of(threads))
                .min(tiles)
        };
        Split {
            rows: true,
            units,
            tiles,
            threads,
            m,
            nc,
            mr,
            nr,
        }
    }

    /// One share of columns a thread, all of C's rows each (what `new` gives C with too
    /// few rows). `gemm_with` takes it on several threads for C of up to two blocks of
    /// rows (MC), and on two threads for C of up to `COLUMNS_MAX_ROWS` rows wide enough,
    /// where each thread packs the micro-panels of its own share: with a share
    /// of rows each thread read every micro-panel, half of them packed by the other core,
    /// and waited for all of them to be packed. Two threads, the two alternated in one
    /// process, Emerald Rapids, GFLOP/s: f64 128 x 1024 x 1024 113 -> 121, 114 -> 122 in a
    /// fast phase, 82 -> 85, 89 -> 90 in a slow one; f64 250 x 1000 x 1000 101 -> 108, 92
    /// -> 94; f32 128 x 1024 x 1024 227 -> 237, 256 x 1024 x 1024 192 -> 199; f64 256 x
    /// 1024 x 1024 level.
    fn columns(threads: usize, (m, nc): (usize, usize), (mr, nr): (usize, usize)) -> Split {
        let threads = threads.max(1);
        Split {
            rows: false,
            units: threads,
            tiles: m.div_ceil(mr),
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
        return finish_whole(finish, c, m, n);
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
            let split = Split::new(threads, (m, nc), (mr, nr), mcb);
            // C of up to two blocks of rows, or of up to COLUMNS_MAX_ROWS rows and at least
            // four micro-panels a thread: one share of columns a thread instead (see
            // `Split::columns`).
            // Measured on two threads only; with more, each would pack all of A and lose
            // the claims that let a slowed thread hand work to the others.
            let wide = threads == 2 && m <= COLUMNS_MAX_ROWS && nc >= threads * 4 * nr;
            let split = if threads > 1 && split.rows && (m <= 2 * mcb || wide) {
                Split::columns(threads, (m, nc), (mr, nr))
            } else {
                split
            };
            // On several threads a share of columns packs its own micro-panels, and only
            // it reads them; else the threads pack ranges of k steps of every panel (see
            // pack_b), in turn, before any unit runs.
            let own_panels = threads > 1 && !split.rows;
            if !own_panels {
                pack_in_turn(ks, threads, |steps| {
                    // SAFETY: pack_b reads b.at(pc + p, jc + j) for p < kc, j < nc: elements
                    // of the k x n operand that gemm's caller promised valid (# Safety of
                    // gemm_with). `dst` holds `len` values (the `panels` slice, borrowed
                    // mutably for this call only); pack_in_turn gives each range of steps
                    // once, and pack_b writes only the places of its steps, disjoint from
                    // the others'.
                    unsafe { pack_b(kc, nc, nr, bsrc, steps, (dst, len), ks) };
                });
            }
            let claims = helper::Claims::new(split.units);
            let gemm_unit = |u: usize, apack: &mut &mut [P]| {
                let (rows, cols) = split.unit(u);
                // Column shares rounded up to whole micro-panels can run out before the
                // last units (and a zero block height would never advance).
                if rows.is_empty() || cols.0 == cols.1 {
                    return;
                }
                // This unit's micro-panels: columns cols.0 (a multiple of nr) to cols.1,
                // ks * nr values each from panel cols.0 / nr on.
                let (off, plen) = (cols.0 * ks, (cols.1 - cols.0).div_ceil(nr) * nr * ks);
                // SAFETY: off + plen <= len (cols.1 <= nc, panels hold ceil(nc / nr) * nr *
                // ks values). With own_panels the unit is the only one to write or read
                // these places (a share of columns, claimed once): pack_b reads b.at(pc +
                // p, jc + cols.0 + j) for p < kc, j < cols.1 - cols.0, valid by gemm_with's
                // # Safety. Else pack_in_turn packed every panel (and its tasks joined)
                // before `work` runs, and no one writes them while units read.
                let bown: &[P] = unsafe {
                    if own_panels {
                        let bsrc = b.offset(pc, jc + cols.0);
                        let d = OutPtr(dst.get().add(off));
                        pack_b(kc, cols.1 - cols.0, nr, bsrc, 0..ks, (d, plen), ks);
                    }
                    std::slice::from_raw_parts(dst.get().add(off), plen)
                };
                // Equal blocks (in whole tiles) rather than full ones and a thin rest: a
                // block of a few rows costs a whole pass over the B panel for little work.
                // (A unit of rows is one block; a unit of columns has all of C's rows.)
                let blocks = rows.len().div_ceil(mcb).max(1);
                let mc_even = rows.len().div_ceil(blocks).next_multiple_of(mr).min(mcb);
                for ic in rows.clone().step_by(mc_even) {
                    let mc = mc_even.min(rows.end - ic);
                    // SAFETY: pack_a (or, for the whole tiles with `fused`, the packing
                    // kernel in macro_kernel's first column) reads A rows ic..ic + mc (< m,
                    // since mc <= rows.end - ic) and columns pc..pc + kc (<= k), valid by
                    // gemm_with's # Safety; with `fused`, A is row-major of f32 or f64
                    // (words_of_source: S is P) and the kernel is AVX-512's (14-row tiles).
                    // apack, this thread's own, has ceil(min(MC, m) / mr) * mr * ks_max >=
                    // the packed size, written by one or the other.
                    // `cblk` is C + ic * n + jc + cols.0, inside `c` (m * n elements by #
                    // Safety); macro_kernel writes rows ic..ic + mc and columns jc + cols.0
                    // .. jc + cols.1 of C; the units of a Split are disjoint (runs of whole
                    // tiles, or nr-aligned column shares) and each is claimed once, so no
                    // two threads write one element. `bown` holds the unit's panels, packed
                    // above; `kern` is callable (# Safety).
                    unsafe {
                        let cblk = cp.get().add(ic * n + jc + cols.0);
                        let w = cols.1 - cols.0;
                        // Row-major A of f32 or f64: the first column of tiles packs the
                        // block's whole tiles as it runs (`PackingKernel`), reading A where
                        // it lies, and only a last partial tile is packed beforehand.
                        let fused = kern.packing.filter(|_| {
                            a.cs == 1 && P::K_PER == 1 && words_of_source::<S, P>() && w >= nr
                        });
                        let whole = if fused.is_some() { mc / mr * mr } else { 0 };
                        if whole < mc {
                            let rest = &mut apack[whole * ks..];
                            pack_a(mc - whole, kc, mr, a.offset(ic + whole, pc), rest);
                        }
                        let fused = fused.map(|pk| (pk, a.offset(ic, pc).ptr as *const P, a.rs));
                        macro_kernel(kern, apack, bown, mc, ks, (0, w), cblk, n, pc > 0, fused);
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
