//! The small-product path: C = A * B without packing, each tile of C over the whole of k
//! with A and B read where they lie (BLIS's "sup" path), for products too small to repay
//! packing; which products take it (`takes`), how two threads share C (`gemm`), and the
//! loop over tiles (`gemm_small`).
use super::kernel::{self, CpuKernel};
use super::{helper, Accum, MatRef, OutPtr};

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
pub(super) const SMALL_SPLIT_FLOPS: usize = 3 << 15;

/// C = A * B on the small path with `small`, the twin of `kern`'s micro-kernel, on up to
/// two threads; `l2` is one core's L2 in bytes.
///
/// # Safety
/// As for `gemm_with`, with `takes` true for this product (where n is at most the kernel's
/// NR, true for B's values in row-major order: its one strip is copied, from any layout),
/// and `small` from `kern` (`CpuKernel::small`).
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn gemm<D: Accum>(
    kern: &CpuKernel<D, D>,
    small: kernel::SmallKernel<D>,
    m: usize,
    n: usize,
    k: usize,
    a: MatRef<D>,
    b: MatRef<D>,
    c: &mut [D],
    threads: usize,
    l2: usize,
) {
    let (mr, nr) = (kern.mr, kern.nr);
    let strips = n.div_ceil(nr);
    let mb = small_block_rows(k, std::mem::size_of::<D>(), mr, l2);
    let cp = OutPtr(c.as_mut_ptr());
    // A's rows a multiple of 4 KiB apart, with tiles of more rows than L1 has ways
    // (`RowsOfA`: AVX-512's 14, not AVX2's 6): C of one strip of columns runs tiles of half
    // the rows (AVX-512's twins compute only those), reading A in place, and wider C copies
    // A's blocks, which each of its strips reads again.
    let aliased = mr > 8 && RowsOfA::aliased(a, k);
    let half_tiles = aliased && kern.small_halves && n <= nr;
    let copy = aliased && !half_tiles;
    let mr = if half_tiles { mr / 2 } else { mr };
    // Rows i0..i0 + rb of C (one block), the strips `strips` of its columns: A's block as
    // `rows` gives it, B's last strip from `edge`.
    // SAFETY (of the calls): as for this function, for those rows of A and C; callers on
    // two threads give each (block, strip) to one of them.
    let block = |rows: &mut RowsOfA<D>, edge: &[D], i0: usize, rb: usize, strips| unsafe {
        let (ar, cr) = (rows.block(i0, rb), cp.get().add(i0 * n));
        gemm_small(
            small,
            (mr, nr),
            (rb, mb),
            n,
            k,
            ar,
            (b, edge),
            (cr, n),
            strips,
        )
    };
    if threads > 1 && m * n * k >= SMALL_SPLIT_FLOPS && m >= 2 * mr {
        // Two shares of C's rows (`small_split`), each cut into blocks of `mb` rows
        // and each block into column strips: each thread takes the (block, strip)
        // units of its own share in turn, then helps with what is left of the
        // other's, so that a thread slowed by another process does fewer while, on
        // equal CPUs, each keeps to its own rows.
        let half = small_split(m, mr, kern.small_halves && !half_tiles);
        let rows = [(0, half), (half, m - half)];
        let units = |rn: usize| rn.div_ceil(mb) * strips;
        let claims = [
            helper::Claims::new(units(half)),
            helper::Claims::new(units(m - half)),
        ];
        helper::for_each_part(&mut [(); 2], |t, _| {
            let mut rows_of_a = RowsOfA::new(a, k, mb, copy);
            // SAFETY: B as for this function.
            let edge = unsafe { last_strip(b, n, k, nr) };
            for share in [t, 1 - t] {
                let (r0, rn) = rows[share];
                while let Some(u) = claims[share].next() {
                    let (i0, s) = (r0 + u / strips * mb, u % strips);
                    // Rows i0..i0 + rb inside the share r0..r0 + rn, the strip s; each
                    // (share, unit) is claimed once, so no two threads write one element
                    // of C, and nothing reads C before both threads have returned.
                    block(&mut rows_of_a, &edge, i0, mb.min(r0 + rn - i0), s..s + 1);
                }
            }
        });
    } else {
        let mut rows_of_a = RowsOfA::new(a, k, mb, copy);
        let edge = last_strip(b, n, k, nr);
        for i0 in (0..m).step_by(mb) {
            block(&mut rows_of_a, &edge, i0, mb.min(m - i0), 0..strips);
        }
    }
}

/// A's rows as the small path reads them: where they lie, or, where they lie a multiple of
/// 4 KiB apart (f32 with k = 1024, f64 with 512), copied a block at a time with a stride 64
/// bytes longer. A tile reads its 14 rows in step; 4 KiB apart, their lines all fall into
/// one set of L1 (8 ways), and each A value came from L2. Zen 4, GFLOP/s, k a multiple of
/// 4 KiB against one 16 values longer: f32 256 x 256 x 1024 168 against 228 (1000), 1024
/// x 32 x 1024 175 against 227 (1008), 2048 x 16 x 1024 101 against 173; f64 256 x 128 x
/// 512 87 against 113 (520); 2 KiB apart (f32 k = 512, f64 256) level.
struct RowsOfA<D: Accum> {
    a: MatRef<D>,
    k: usize,
    /// The copy and the first row of the block it holds.
    copy: Option<(super::Scratch, usize)>,
}

impl<D: Accum> RowsOfA<D> {
    /// Elements of D in the 64 bytes added to each copied row.
    const PAD: usize = 64 / std::mem::size_of::<D>();

    /// Whether A's rows (k values each) lie a multiple of 4 KiB apart.
    fn aliased(a: MatRef<D>, k: usize) -> bool {
        a.cs == 1 && a.rs >= k && (a.rs * std::mem::size_of::<D>()).is_multiple_of(4096)
    }

    /// For blocks of up to `mb` rows of A (m x k), copied where `copy`.
    fn new(a: MatRef<D>, k: usize, mb: usize, copy: bool) -> RowsOfA<D> {
        let copy = copy.then(|| (super::Scratch::take::<D>(mb * (k + Self::PAD)), usize::MAX));
        RowsOfA { a, k, copy }
    }

    /// Rows i0..i0 + rb of A (rb up to `mb`), copied if need be; a block copied last is
    /// not copied again.
    ///
    /// # Safety
    /// Rows i0..i0 + rb of A readable for k values each (the small path's contract).
    unsafe fn block(&mut self, i0: usize, rb: usize) -> MatRef<D> {
        let Some((buf, held)) = &mut self.copy else {
            return self.a.offset(i0, 0);
        };
        let (k, stride) = (self.k, self.k + Self::PAD);
        let dst = buf.view::<D>();
        if *held != i0 {
            for (i, row) in dst.chunks_exact_mut(stride).take(rb).enumerate() {
                // SAFETY: row i0 + i of A holds k values at unit stride (this function's
                // contract, a.cs == 1); `row` is k + PAD values of the scratch, which
                // `new` sized for mb >= rb rows.
                std::ptr::copy_nonoverlapping(self.a.offset(i0 + i, 0).ptr, row.as_mut_ptr(), k);
            }
            *held = i0;
        }
        MatRef {
            ptr: dst.as_ptr(),
            rs: stride,
            cs: 1,
        }
    }
}

/// Whether a product of m x k by k x n (B as `b`) runs on the unpacked path, for a kernel
/// of `mr` rows: few enough multiply-adds for its dtype, k up to SMALL_MAX_K, B with unit
/// column stride, and B's rows not a multiple of 4 KiB apart. Such rows all fall into the
/// same sets of L1 (and of L2, whose ways hold a few of a strip's k rows), so a B strip
/// read in place misses on every row, each time a tile of A passes it. Measured as for
/// SMALL_MAX_FLOPS_F64, the packed path against this one: f32 256x1024x512 (m x n x k)
/// 1.48x, 128x1024x1024 1.75x, f64 N=512 1.92x. The rule first took such B unpacked below 8
/// tiles of rows (f32 28x1024x1024 packed read 0.62x then); since packing became cheaper,
/// on Zen 4 (two threads, calls alternated in one process, median ratio) packed reads f32
/// 40 x 1024 x 1024 1.26x, 64 x 1024 x 1024 1.18x, 100 x 1024 x 1024 1.26x, f64 12 x 512 x
/// 1024 1.73x, 40 x 512 x 512 1.32x, 100 x 512 x 512 1.40x; with AVX2's 64-byte strips
/// (`ACCEL_CPU_KERNEL=avx2`) f32 36 x 1024 x 1024 2.06x, 40 x 1024 x 512 2.78x, f64 16 x 512
/// x 512 1.55x, 40 x 512 x 512 2.24x, 12 x 512 x 1024 1.30x; level with 4 to 8 rows and
/// short k (48 x 1024 x 256, 200 x 1024 x 128). B's f32 rows a multiple of 2 KiB apart (N=512) with 128-byte
/// strips (AVX-512's 32 columns) are packed too once C has 24 tiles of rows and k is 384
/// or more: against MKL in one process (`sgemm_` from PyTorch's own library, calls paired)
/// the small path read 0.80-0.91x at f32 N=512, packing 0.985x. Packed against unpacked,
/// paired, two threads: 512 x 512 x 512 (m x n x k) 1.12x, 640 x 512 x 512 1.11x, 448 x
/// 512 x 512 1.06x, 384 x 512 x 512 1.03x, 512 x 512 x 384 1.08x; one thread 512^3 1.09x;
/// but 256 x 512 x 512 0.90x, 512 x 512 x 256 0.99x; AVX2's 64-byte strips level
/// (0.99-1.02x), f64 with rows 2 KiB apart (N=256) 0.88-0.96x. And a k under SMALL_MIN_K
/// only for a C of up to SMALL_SHORT_MAX_MN elements. `(mr, nr)` is the kernel's tile and
/// `l2` one core's L2 in bytes (`Caches`).
pub(super) fn takes<D>(
    m: usize,
    n: usize,
    k: usize,
    b: MatRef<D>,
    (mr, nr): (usize, usize),
    l2: usize,
) -> bool {
    let size = std::mem::size_of::<D>();
    let max = if size > 4 {
        SMALL_MAX_FLOPS_F64
    } else if m * k * size <= l2 / 8 * 7 {
        SMALL_MAX_FLOPS_A_IN_L2
    } else {
        SMALL_MAX_FLOPS
    };
    let row_bytes = b.rs * size;
    let aliased = row_bytes.is_multiple_of(4096)
        || size == 4
            && nr * size == 128
            && row_bytes.is_multiple_of(2048)
            && m >= 24 * mr
            && k >= 384;
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

/// Below this k the small path (`takes`) takes only products with a C of up to
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
pub(super) fn small_split(m: usize, mr: usize, halves: bool) -> usize {
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
pub(super) fn small_block_rows(k: usize, size: usize, mr: usize, l2: usize) -> usize {
    (l2 / 2 / (k * size).max(1) / mr * mr).max(4 * mr)
}

/// B's last strip of columns, where it cannot be read in place (else empty): narrower than
/// `nr_t`, or any strip of a B that is not row-major (the small path takes such a B only
/// where it is one strip); a zero-padded k x nr_t copy, made once a product by each thread
/// (it was once a block of rows: 17 times for 2048 x 16 x 1024). From a B stored transposed
/// (a Linear layer's weight), read a column at a time, contiguous there; row by row, each
/// step read a line of each of up to 31 rows of W, 4 KiB apart at k = 1024.
///
/// # Safety
/// `b` valid for i < k, j < n (as for `gemm_with`).
pub(super) unsafe fn last_strip<D: Accum>(b: MatRef<D>, n: usize, k: usize, nr_t: usize) -> Vec<D> {
    let j0 = if b.cs == 1 {
        n / nr_t * nr_t
    } else {
        n.saturating_sub(1) / nr_t * nr_t
    };
    let nr = n - j0;
    if nr == 0 || (nr == nr_t && b.cs == 1) {
        return Vec::new();
    }
    let mut edge = vec![D::default(); k * nr_t];
    if b.cs == 1 {
        for (p, row) in edge.chunks_exact_mut(nr_t).enumerate() {
            for (j, e) in row[..nr].iter_mut().enumerate() {
                *e = b.at(p, j0 + j);
            }
        }
    } else {
        for j in 0..nr {
            for (p, row) in edge.chunks_exact_mut(nr_t).enumerate() {
                row[j] = b.at(p, j0 + j);
            }
        }
    }
    edge
}

/// C = A * B for the column strips `strips` (NR columns each) of C, one tile at a time over
/// the whole of k, reading A and B where they lie: B's full-width column strips in place
/// (unit column stride), its last, narrower strip from `edge` (`last_strip`).
/// C is m x n with rows `ldc` apart. C's rows are taken in blocks of `mb` (a multiple of
/// the tile's rows), each block's strips in turn.
///
/// # Safety
/// As for `gemm_with`, with `small` from this CPU's kernel (`CpuKernel::small`), (mr, nr) its
/// tile, b.cs == 1 or n <= NR (only the copied strip), m, n, k > 0, strips inside
/// ceil(n / NR), and `c` valid for writes of
/// those columns of m rows; no one else writes them during the call.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn gemm_small<D: Accum>(
    small: kernel::SmallKernel<D>,
    (mr_t, nr_t): (usize, usize),
    (m, mb): (usize, usize),
    n: usize,
    k: usize,
    a: MatRef<D>,
    (b, edge): (MatRef<D>, &[D]),
    (c, ldc): (*mut D, usize),
    strips: std::ops::Range<usize>,
) {
    for r0 in (0..m).step_by(mb) {
        let r1 = m.min(r0 + mb);
        for j0 in strips.clone().map(|s| s * nr_t) {
            let nr = (n - j0).min(nr_t);
            let (bp, rsb) = if nr == nr_t && b.cs == 1 {
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
