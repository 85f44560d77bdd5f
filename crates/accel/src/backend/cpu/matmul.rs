//! Matrix multiplication on the CPU.
//!
//! Floats use the BLIS/GotoBLAS structure: the operands are packed into cache-sized panels
//! (B into KC x NC panels that stay in L3, A into MC x KC blocks that stay in L2), and a
//! register-blocked micro-kernel (6 x 16 for f32, 6 x 8 for f64 with AVX2 and FMA, chosen at
//! run time) computes each MR x NR tile of C from one micro-panel of each. Packing reads any
//! strides, so transposed views cost nothing extra, and converts f16/bf16 to f32 on the way, so
//! half-precision matmul runs at f32 speed. Threads split C into disjoint blocks of rows (or
//! columns when C is wide and short) and each runs the whole blocked loop on its own block.

// Micro-kernels take the tile's operands, its C pointer and stride, and its valid extent:
// eight scalars that belong in registers, not in a struct.
#![allow(clippy::too_many_arguments)]

use half::{bf16, f16};
use rayon::prelude::*;

/// A strided matrix operand: element (i, j) is at `ptr + i * rs + j * cs`.
#[derive(Clone, Copy)]
pub(crate) struct MatRef<T> {
    pub ptr: *const T,
    pub rs: usize,
    pub cs: usize,
}

// SAFETY: a MatRef is a shared, read-only view (like `&[T]`, which is Send + Sync for T:
// Sync): nothing writes through `ptr`. It carries no lifetime, so the pointee's lifetime is
// the creator's obligation: `CpuStorage::matmul` (cpu/mod.rs) makes MatRefs from `&[S]`
// borrowed for the whole call, and `gemm`/`gemm_int` join all their rayon tasks before
// returning, so no thread uses one after the storage is released.
unsafe impl<T: Sync> Send for MatRef<T> {}
// SAFETY: as for Send: shared reads of T: Sync data only.
unsafe impl<T: Sync> Sync for MatRef<T> {}

impl<T: Copy> MatRef<T> {
    /// Element (i, j).
    ///
    /// # Safety
    /// `ptr + i * rs + j * cs` (in elements, computed without overflow) must lie inside the
    /// live allocation `ptr` points into and hold an initialised T; for the views built by
    /// `CpuStorage::matmul` this holds for i < m, j < k (A) or i < k, j < n (B) because
    /// every tensor layout is in bounds of its storage (Layout::check_in_bounds, shape.rs).
    #[inline(always)]
    unsafe fn at(&self, i: usize, j: usize) -> T {
        *self.ptr.add(i * self.rs + j * self.cs)
    }
    fn offset(&self, i: usize, j: usize) -> Self {
        MatRef {
            ptr: self.ptr.wrapping_add(i * self.rs + j * self.cs),
            ..*self
        }
    }
}

#[derive(Clone, Copy)]
struct OutPtr<T>(*mut T);
// SAFETY: an OutPtr is only made in `gemm`, from the `&mut [D]` it is given (D: Accum, which
// is Send + Sync); that borrow is not used otherwise until every task has joined, and the
// tasks write disjoint blocks of it (rows `t * per..` or columns `t * per..` per thread, see
// `work` in `gemm`), so sharing the pointer across rayon threads creates no data race.
unsafe impl<T: Send> Send for OutPtr<T> {}
// SAFETY: as for Send.
unsafe impl<T: Send> Sync for OutPtr<T> {}

impl<T> OutPtr<T> {
    /// A method, so closures capture the `Send` wrapper rather than the raw pointer field.
    fn get(self) -> *mut T {
        self.0
    }
}

/// Element types that are packed into an accumulator type `D` (f16 -> f32 and so on).
pub(crate) trait PackInto<D>: Copy + Send + Sync {
    fn conv(self) -> D;
}
impl PackInto<f32> for f32 {
    #[inline(always)]
    fn conv(self) -> f32 {
        self
    }
}
impl PackInto<f32> for f16 {
    #[inline(always)]
    fn conv(self) -> f32 {
        self.to_f32()
    }
}
impl PackInto<f32> for bf16 {
    #[inline(always)]
    fn conv(self) -> f32 {
        self.to_f32()
    }
}
impl PackInto<f64> for f64 {
    #[inline(always)]
    fn conv(self) -> f64 {
        self
    }
}

/// `(kc, a, b, c, ldc, accumulate, mr, nr)`.
///
/// Calling one is unsafe: `a` must point to kc * MR readable packed values (an MR-tall
/// micro-panel from `pack_a`), `b` to kc * NR (an NR-wide micro-panel from `pack_b`), and
/// `c` to an mr x nr block (mr <= MR, nr <= NR) of writable, initialised values at row
/// stride `ldc`, not accessed by anyone else during the call; the AVX2 kernels also require
/// the CPU to have AVX2 and FMA (checked by `Accum::kernel`).
type MicroKernel<D> = unsafe fn(usize, *const D, *const D, *mut D, usize, bool, usize, usize);

/// An accumulator type with its blocking parameters and micro-kernel.
pub(crate) trait Accum:
    super::alloc::ZeroBits
    + Copy
    + Send
    + Sync
    + Default
    + std::ops::Add<Output = Self>
    + std::ops::Mul<Output = Self>
    + 'static
{
    const MR: usize;
    const NR: usize;
    const MC: usize;
    const KC: usize;
    const NC: usize;
    fn kernel() -> MicroKernel<Self>;
}

// Blocking measured on Zen 3 (32 KiB L1, 512 KiB L2, 32 MiB L3): KC = 384 keeps a B
// micro-panel (24 KiB) in L1, MC = 144 keeps an A block (216 KiB) in L2, and NC covers
// matrices up to 8160 columns with one B panel (12 MiB at most) in the shared L3, so A is
// packed once per KC slice.
impl Accum for f32 {
    const MR: usize = 6;
    const NR: usize = 16;
    const MC: usize = 144;
    const KC: usize = 384;
    const NC: usize = 8160;
    fn kernel() -> MicroKernel<f32> {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            return avx2::kernel_f32;
        }
        generic_kernel::<f32, 6, 16>
    }
}

impl Accum for f64 {
    const MR: usize = 6;
    const NR: usize = 8;
    const MC: usize = 120;
    const KC: usize = 384;
    const NC: usize = 8160;
    fn kernel() -> MicroKernel<f64> {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            return avx2::kernel_f64;
        }
        generic_kernel::<f64, 6, 8>
    }
}

/// The portable micro-kernel: the same tile shape in plain Rust, for CPUs without AVX2+FMA.
///
/// # Safety
/// As for [`MicroKernel`]: `a` valid for reads of kc * MR elements, `b` of kc * NR, `c` valid
/// for reads and writes of rows 0..mr, columns 0..nr at stride `ldc` (mr <= MR, nr <= NR),
/// with no other access to that block during the call.
unsafe fn generic_kernel<D: Accum, const MR: usize, const NR: usize>(
    kc: usize,
    a: *const D,
    b: *const D,
    c: *mut D,
    ldc: usize,
    accumulate: bool,
    mr: usize,
    nr: usize,
) {
    let mut acc = [[D::default(); NR]; MR];
    for p in 0..kc {
        let ap = a.add(p * MR);
        let bp = b.add(p * NR);
        for (i, row) in acc.iter_mut().enumerate() {
            let av = *ap.add(i);
            for (j, v) in row.iter_mut().enumerate() {
                *v = *v + av * *bp.add(j);
            }
        }
    }
    for (i, row) in acc.iter().enumerate().take(mr) {
        for (j, v) in row.iter().enumerate().take(nr) {
            let dst = c.add(i * ldc + j);
            *dst = if accumulate { *dst + *v } else { *v };
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    /// Generates a 6 x (2 * LANES) AVX2+FMA micro-kernel: 12 accumulators, 2 B vectors and one
    /// broadcast A value live in the 16 ymm registers.
    macro_rules! kernel {
        ($name:ident, $t:ty, $lanes:expr, $zero:ident, $load:ident, $bcast:ident, $fma:ident,
         $add:ident, $store:ident) => {
            /// # Safety
            /// The CPU must support AVX2 and FMA (`Accum::kernel` checks with
            /// `is_x86_feature_detected!` before handing this out). Pointers as for
            /// [`super::MicroKernel`]: `a` readable for kc * 6 values, `b` for kc * NR, `c`
            /// readable and writable for rows 0..mr, columns 0..nr at stride `ldc`, and, when
            /// mr == 6 and nr == NR, the whole 6 x NR tile (full-width vector stores).
            #[target_feature(enable = "avx2,fma")]
            pub(super) unsafe fn $name(
                kc: usize,
                mut a: *const $t,
                mut b: *const $t,
                c: *mut $t,
                ldc: usize,
                accumulate: bool,
                mr: usize,
                nr: usize,
            ) {
                const NR: usize = 2 * $lanes;
                const PF_A: usize = 384;
                let (mut c00, mut c01, mut c10, mut c11) = ($zero(), $zero(), $zero(), $zero());
                let (mut c20, mut c21, mut c30, mut c31) = ($zero(), $zero(), $zero(), $zero());
                let (mut c40, mut c41, mut c50, mut c51) = ($zero(), $zero(), $zero(), $zero());
                // Bring the C tile towards L1 while the loop runs: it is read at the end,
                // and its rows are far apart.
                // Prefetch addresses are computed with `wrapping_add`: for an edge tile (mr < 6
                // or nr < NR) at the bottom/right of C they can point past C's allocation,
                // which `add` must not do; a prefetch of any address never faults.
                for i in 0..6 {
                    let p = c.wrapping_add(i * ldc) as *const i8;
                    _mm_prefetch::<_MM_HINT_T0>(p);
                    _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(NR * std::mem::size_of::<$t>() - 1));
                }
                // One k step: two B vectors, six broadcast A values, twelve FMAs.
                macro_rules! step {
                    ($u:expr) => {{
                        let bp = b.add($u * NR);
                        let ap = a.add($u * 6);
                        let b0 = $load(bp);
                        let b1 = $load(bp.add($lanes));
                        let a0 = $bcast(&*ap);
                        c00 = $fma(a0, b0, c00);
                        c01 = $fma(a0, b1, c01);
                        let a1 = $bcast(&*ap.add(1));
                        c10 = $fma(a1, b0, c10);
                        c11 = $fma(a1, b1, c11);
                        let a2 = $bcast(&*ap.add(2));
                        c20 = $fma(a2, b0, c20);
                        c21 = $fma(a2, b1, c21);
                        let a3 = $bcast(&*ap.add(3));
                        c30 = $fma(a3, b0, c30);
                        c31 = $fma(a3, b1, c31);
                        let a4 = $bcast(&*ap.add(4));
                        c40 = $fma(a4, b0, c40);
                        c41 = $fma(a4, b1, c41);
                        let a5 = $bcast(&*ap.add(5));
                        c50 = $fma(a5, b0, c50);
                        c51 = $fma(a5, b1, c51);
                    }};
                }
                // Unrolled by 4, with one prefetch of the A panel per cache line consumed.
                // PF_A = 384 bytes ahead passes the end of `apack` for the last tiles of a
                // block: `wrapping_add` (a prefetch never faults); the loads stay inside the
                // packed panels.
                for _ in 0..kc / 4 {
                    _mm_prefetch::<_MM_HINT_T0>((a as *const i8).wrapping_add(PF_A));
                    step!(0);
                    step!(1);
                    step!(2);
                    step!(3);
                    a = a.add(24);
                    b = b.add(4 * NR);
                }
                for _ in 0..kc % 4 {
                    step!(0);
                    a = a.add(6);
                    b = b.add(NR);
                }
                let rows = [
                    (c00, c01),
                    (c10, c11),
                    (c20, c21),
                    (c30, c31),
                    (c40, c41),
                    (c50, c51),
                ];
                if mr == 6 && nr == NR {
                    for (i, (lo, hi)) in rows.into_iter().enumerate() {
                        let p = c.add(i * ldc);
                        if accumulate {
                            $store(p, $add($load(p), lo));
                            $store(p.add($lanes), $add($load(p.add($lanes)), hi));
                        } else {
                            $store(p, lo);
                            $store(p.add($lanes), hi);
                        }
                    }
                } else {
                    // Edge tile: spill to a buffer and copy the valid part.
                    let mut tmp = [0 as $t; 6 * NR];
                    for (i, (lo, hi)) in rows.into_iter().enumerate() {
                        $store(tmp.as_mut_ptr().add(i * NR), lo);
                        $store(tmp.as_mut_ptr().add(i * NR + $lanes), hi);
                    }
                    for i in 0..mr {
                        for j in 0..nr {
                            let dst = c.add(i * ldc + j);
                            let v = tmp[i * NR + j];
                            *dst = if accumulate { *dst + v } else { v };
                        }
                    }
                }
            }
        };
    }

    kernel!(
        kernel_f32,
        f32,
        8,
        _mm256_setzero_ps,
        _mm256_loadu_ps,
        _mm256_broadcast_ss,
        _mm256_fmadd_ps,
        _mm256_add_ps,
        _mm256_storeu_ps
    );
    kernel!(
        kernel_f64,
        f64,
        4,
        _mm256_setzero_pd,
        _mm256_loadu_pd,
        _mm256_broadcast_sd,
        _mm256_fmadd_pd,
        _mm256_add_pd,
        _mm256_storeu_pd
    );
}

/// Packs the kc x nc block of B starting at `b` into NR-wide micro-panels, zero-padded.
///
/// # Safety
/// `b.at(p, j)` must be valid (see [`MatRef::at`]) for every p < kc, j < nc. `dst` is
/// indexed with bounds checks (it must hold kc * ceil(nc / NR) * NR values or this panics).
unsafe fn pack_b<S: PackInto<D>, D: Accum>(kc: usize, nc: usize, b: MatRef<S>, dst: &mut [D]) {
    let nr_ = D::NR;
    let panels = nc.div_ceil(nr_);
    if b.cs == 1 {
        // Row-major B: read each row once, front to back (one page at a time, however far
        // apart the rows are), and deal its NR-wide pieces out to the panels.
        for p in 0..kc {
            let src = b.ptr.add(p * b.rs);
            for q in 0..panels {
                let j0 = q * nr_;
                let w = nr_.min(nc - j0);
                let out = &mut dst[q * kc * nr_ + p * nr_..q * kc * nr_ + (p + 1) * nr_];
                for (j, v) in out.iter_mut().enumerate() {
                    *v = if j < w {
                        (*src.add(j0 + j)).conv()
                    } else {
                        D::default()
                    };
                }
            }
        }
        return;
    }
    for (q, panel) in dst.chunks_mut(kc * nr_).take(panels).enumerate() {
        let j0 = q * nr_;
        let w = nr_.min(nc - j0);
        for j in 0..nr_ {
            if j < w {
                for p in 0..kc {
                    panel[p * nr_ + j] = b.at(p, j0 + j).conv();
                }
            } else {
                for p in 0..kc {
                    panel[p * nr_ + j] = D::default();
                }
            }
        }
    }
}

/// Packs the mc x kc block of A starting at `a` into MR-tall micro-panels, zero-padded.
///
/// # Safety
/// `a.at(i, p)` must be valid (see [`MatRef::at`]) for every i < mc, p < kc. `dst` is indexed
/// with bounds checks.
unsafe fn pack_a<S: PackInto<D>, D: Accum>(mc: usize, kc: usize, a: MatRef<S>, dst: &mut [D]) {
    let mr_ = D::MR;
    for (q, panel) in dst.chunks_mut(kc * mr_).take(mc.div_ceil(mr_)).enumerate() {
        let i0 = q * mr_;
        let h = mr_.min(mc - i0);
        if a.cs == 1 {
            for i in 0..mr_ {
                if i < h {
                    for p in 0..kc {
                        panel[p * mr_ + i] = a.at(i0 + i, p).conv();
                    }
                } else {
                    for p in 0..kc {
                        panel[p * mr_ + i] = D::default();
                    }
                }
            }
        } else {
            for p in 0..kc {
                for i in 0..mr_ {
                    panel[p * mr_ + i] = if i < h {
                        a.at(i0 + i, p).conv()
                    } else {
                        D::default()
                    };
                }
            }
        }
    }
}

/// Runs the MR x NR micro-kernel over one packed A block (mc rows) and the columns
/// [j0, j1) of one packed B panel, writing C from (ic, jc).
///
/// # Safety
/// `kernel` must be callable on this CPU (from `D::kernel()`); `apack` must hold the mc x kc
/// block packed by `pack_a` (ceil(mc / MR) * MR * kc values) and `bpack` the panel packed by
/// `pack_b` covering columns up to j1 rounded up to NR (ceil(j1 / NR) * NR * kc values), with
/// j0 a multiple of NR; `c` must be valid for reads and writes of rows 0..mc and columns
/// j0..j1 at row stride `ldc`, and no other thread may touch that block during the call.
#[allow(clippy::too_many_arguments)]
unsafe fn macro_kernel<D: Accum>(
    kernel: MicroKernel<D>,
    apack: &[D],
    bpack: &[D],
    mc: usize,
    kc: usize,
    (j0, j1): (usize, usize),
    c: *mut D,
    ldc: usize,
    accumulate: bool,
) {
    let panel_lines = (kc * D::NR * std::mem::size_of::<D>()).div_ceil(64);
    let tiles = mc.div_ceil(D::MR);
    let lines_per_tile = panel_lines.div_ceil(tiles);
    for jr in (j0..j1).step_by(D::NR) {
        let nr = D::NR.min(j1 - jr);
        let bp = bpack.as_ptr().add(jr * kc);
        // The next B micro-panel sits in L3; pull it into L2 a slice per tile, so that
        // the next column of tiles does not start by waiting on it.
        // Pointer arithmetic here stays in bounds: `next` exists only when jr + NR < j1, so
        // that panel is inside `bpack`, and a panel is kc * NR * size_of::<D>() = kc * 64
        // bytes for both f32 (16 x 4) and f64 (8 x 8), so l * 64 < panel_lines * 64 is inside
        // it; `bp`/`ap` are panel starts inside `bpack`/`apack` (# Safety above).
        let next = (jr + D::NR < j1).then(|| bp.add(kc * D::NR) as *const i8);
        for (t, ir) in (0..mc).step_by(D::MR).enumerate() {
            if let Some(nb) = next {
                for l in t * lines_per_tile..((t + 1) * lines_per_tile).min(panel_lines) {
                    prefetch_l2(nb.add(l * 64));
                }
            }
            let mr = D::MR.min(mc - ir);
            let ap = apack.as_ptr().add(ir * kc);
            kernel(kc, ap, bp, c.add(ir * ldc + jr), ldc, accumulate, mr, nr);
        }
    }
}

#[inline(always)]
fn prefetch_l2(p: *const i8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: _mm_prefetch only needs SSE (baseline on x86_64) and is a hint that never
    // faults or reads memory architecturally, whatever the address. Callers (macro_kernel)
    // must still have computed `p` without UB: see the note there.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(p)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Below this many multiply-adds one thread is faster than waking the pool.
const PARALLEL_MIN_FLOPS: usize = 1 << 21;

/// C = A * B for one matrix, with C contiguous row-major (m x n), on up to `threads` threads.
///
/// The loop nest is BLIS's: for each NC-wide column panel and KC-deep slice, B's panel is
/// packed once, by all threads together, and stays in the shared L3; then each thread packs
/// its own MC x KC blocks of A (in its L2) and runs the micro-kernel over them. Threads split
/// the rows of C, or its columns when C has too few rows to share.
///
/// # Safety
/// `a.at(i, p)` must be valid (see [`MatRef::at`]) for all i < m, p < k, and `b.at(p, j)`
/// for all p < k, j < n: every element address, computed without overflow, inside the live
/// allocation its pointer came from, for the whole call. `c` must hold at least m * n
/// elements (this is not checked; the micro-kernels write through a raw pointer). The
/// memory behind `a` and `b` must not be written during the call.
pub(crate) unsafe fn gemm<S: PackInto<D>, D: Accum>(
    m: usize,
    n: usize,
    k: usize,
    a: MatRef<S>,
    b: MatRef<S>,
    c: &mut [D],
    threads: usize,
) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        c.fill(D::default());
        return;
    }
    let kernel = D::kernel();
    // Equal KC slices (a multiple of the kernel's unroll of 4) rather than full ones and a
    // thin remainder: every slice then pays the same C read-back for the same work.
    let kcb = k.div_ceil(k.div_ceil(D::KC)).next_multiple_of(4).min(D::KC);
    let (mcb, ncb) = (D::MC, D::NC);
    let threads = if m * n * k < PARALLEL_MIN_FLOPS {
        1
    } else {
        threads.max(1)
    };
    let split_rows = m >= threads * D::MR * 4;
    let kc_max = kcb.min(k);
    let nc_max = ncb.min(n);
    let mut bpack = vec![D::default(); kc_max * nc_max.div_ceil(D::NR) * D::NR];
    let mut apacks: Vec<Vec<D>> = (0..threads)
        .map(|_| vec![D::default(); kc_max * mcb.min(m).div_ceil(D::MR) * D::MR])
        .collect();
    let cp = OutPtr(c.as_mut_ptr());
    for jc in (0..n).step_by(ncb) {
        let nc = ncb.min(n - jc);
        for pc in (0..k).step_by(kcb) {
            let kc = kcb.min(k - pc);
            let bsrc = b.offset(pc, jc);
            let panels = &mut bpack[..kc * nc.div_ceil(D::NR) * D::NR];
            if threads == 1 {
                pack_b(kc, nc, bsrc, panels);
            } else {
                // Each thread packs a share of the NR-wide panels.
                let per = nc.div_ceil(D::NR).div_ceil(threads);
                panels
                    .par_chunks_mut(per * kc * D::NR)
                    .enumerate()
                    .for_each(|(t, dst)| {
                        let j0 = t * per * D::NR;
                        let w = (per * D::NR).min(nc - j0);
                        // SAFETY: pack_b reads b.at(pc + p, jc + j0 + j) for p < kc, j < w;
                        // j0 + w <= nc (w is clamped to nc - j0 above, and j0 < nc because
                        // par_chunks_mut makes only ceil(panels / per) chunks), so these are
                        // elements of the k x n operand that gemm's caller promised valid
                        // (# Safety of gemm). `dst` is this task's own disjoint chunk.
                        unsafe { pack_b(kc, w, bsrc.offset(0, j0), dst) };
                    });
            }
            let bpack = &bpack[..];
            let work = |(t, apack): (usize, &mut Vec<D>)| {
                let (rows, cols) = if split_rows {
                    let per = m.div_ceil(threads).div_ceil(D::MR) * D::MR;
                    ((t * per).min(m)..((t + 1) * per).min(m), (0, nc))
                } else {
                    let per = nc.div_ceil(threads).div_ceil(D::NR) * D::NR;
                    (0..m, ((t * per).min(nc), ((t + 1) * per).min(nc)))
                };
                for ic in rows.clone().step_by(mcb) {
                    let mc = mcb.min(rows.end - ic);
                    // SAFETY: pack_a reads A rows ic..ic + mc (< m, since mc <= rows.end -
                    // ic) and columns pc..pc + kc (<= k), valid by gemm's # Safety. apack
                    // has ceil(min(MC, m) / MR) * MR * kc_max >= the packed size. `cblk` is
                    // C + ic * n + jc, inside `c` (m * n elements by gemm's # Safety);
                    // macro_kernel writes rows ic..ic + mc and columns jc + cols.0 ..
                    // jc + cols.1 of C, and the `rows`/`cols` ranges of different `t` are
                    // disjoint (each thread's own MR- or NR-aligned share), so no two
                    // threads write one element. bpack was fully packed (and the packing
                    // tasks joined) before `work` runs.
                    unsafe {
                        pack_a(mc, kc, a.offset(ic, pc), apack);
                        let cblk = cp.get().add(ic * n + jc);
                        macro_kernel(kernel, apack, bpack, mc, kc, cols, cblk, n, pc > 0);
                    }
                }
            };
            if threads == 1 {
                apacks.iter_mut().enumerate().for_each(work);
            } else {
                apacks.par_iter_mut().enumerate().for_each(work);
            }
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
    T: super::num::Num,
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
    if m * n * k < PARALLEL_MIN_FLOPS {
        c.chunks_mut(n).enumerate().take(m).for_each(row);
    } else {
        c.par_chunks_mut(n).enumerate().take(m).for_each(row);
    }
}
