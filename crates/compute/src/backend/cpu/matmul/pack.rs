//! Packing: operands copied into the micro-kernels' panel layouts (MR-tall micro-panels of A,
//! NR-wide ones of B), converted on the way (f16/bf16 to f32, or bf16 into pairs for
//! `vdpbf16ps`), zero-padded at the edges.

use half::{bf16, f16};

/// A strided matrix operand: element (i, j) is at `ptr + i * rs + j * cs`.
#[derive(Clone, Copy)]
pub(crate) struct MatRef<T> {
    pub ptr: *const T,
    pub rs: usize,
    pub cs: usize,
}

// SAFETY: a MatRef is a shared, read-only view (like `&[T]`, which is Send + Sync for T:
// Sync): nothing writes through `ptr`. It carries no lifetime, so the pointee's lifetime is
// the creator's obligation: `CpuStorage::matmul` makes MatRefs from `&[S]`
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
    /// every tensor layout is in bounds of its storage (`Layout::check_in_bounds`, which
    /// `Tensor::view` and `Tensor::from_storage` run on every tensor).
    #[inline(always)]
    pub(crate) unsafe fn at(&self, i: usize, j: usize) -> T {
        *self.ptr.add(i * self.rs + j * self.cs)
    }
    pub(crate) fn offset(&self, i: usize, j: usize) -> Self {
        MatRef {
            ptr: self.ptr.wrapping_add(i * self.rs + j * self.cs),
            ..*self
        }
    }
}

/// An output buffer's pointer, shared by the threads of one product that write disjoint
/// parts of it.
#[derive(Clone, Copy)]
pub(crate) struct OutPtr<T>(pub(crate) *mut T);
// SAFETY: an OutPtr is made only from a buffer its maker holds mutably for the whole call
// (`gemm_with`: the `&mut [D]` it is given, and the B panel it packs; `CpuStorage::matmul`'s
// `rounded`: the output it allocated), which is not used otherwise until every task has
// joined; the tasks write disjoint parts of it (in `gemm_with` the units of C, each
// claimed once, see `Split` and `helper::Claims`, and the k steps of each claimed
// packing range, see `pack_b`; in `rounded` the blocks `Finish` hands out once each), so
// sharing the pointer across threads creates no data race.
unsafe impl<T: Send> Send for OutPtr<T> {}
// SAFETY: as for Send.
unsafe impl<T: Send> Sync for OutPtr<T> {}

impl<T> OutPtr<T> {
    /// A method, so closures capture the `Send` wrapper rather than the raw pointer field.
    pub(crate) fn get(self) -> *mut T {
        self.0
    }
}

/// Element types that are packed into an accumulator type `D` (f16 -> f32 and so on).
pub(crate) trait PackInto<D>: Copy + Send + Sync {
    /// Whether `conv_run` converts a vector at a time (16-bit floats widened to f32), so that
    /// packing converts whole runs of a row first (`pack_b`, `pack_a_widened`).
    const RUNS: bool = false;
    fn conv(self) -> D;
    /// `dst[t] = src[t].conv()` for every t (the two have one length).
    #[inline(always)]
    fn conv_run(src: &[Self], dst: &mut [D]) {
        for (d, &x) in dst.iter_mut().zip(src) {
            *d = x.conv();
        }
    }
}
impl PackInto<f32> for f32 {
    #[inline(always)]
    fn conv(self) -> f32 {
        self
    }
}
impl PackInto<f32> for f16 {
    /// One call into `half` a value (`to_f32`, not inlined) measured 15% of an f16 N=1024
    /// product on Zen 4, packing included; its slice conversion takes 8 at a time (F16C).
    const RUNS: bool = true;
    #[inline(always)]
    fn conv(self) -> f32 {
        self.to_f32()
    }
    #[inline(always)]
    fn conv_run(src: &[f16], dst: &mut [f32]) {
        half::slice::HalfFloatSliceExt::convert_to_f32_slice(src, dst);
    }
}
impl PackInto<f32> for bf16 {
    const RUNS: bool = true;
    #[inline(always)]
    fn conv(self) -> f32 {
        self.to_f32()
    }
    /// A shift, inline (the compiler vectorizes it where it is used) rather than `half`'s
    /// slice conversion, a call per run: through that call bf16's 64 x 1024 x 1024 on the
    /// AVX2 kernel ran 0.88x the value-by-value packing.
    #[inline(always)]
    fn conv_run(src: &[bf16], dst: &mut [f32]) {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = f32::from_bits((s.to_bits() as u32) << 16);
        }
    }
}
impl PackInto<f64> for f64 {
    #[inline(always)]
    fn conv(self) -> f64 {
        self
    }
}

/// A value of a packed panel: one element of k (f32, f64), or a pair of consecutive k
/// elements in one 32-bit word (bf16 for AVX512_BF16's `vdpbf16ps`, which multiplies pairs).
///
/// # Safety
/// Implementors are plain data of at most 8 bytes whose size divides 8, aligned to at most 8,
/// for which every bit pattern is a valid value: packed panels live in reused `u64` scratch
/// ([`Scratch`]) that is viewed as `[Self]`.
pub(crate) unsafe trait Packed: Copy + Default + Send + Sync + 'static {
    /// Elements of k per packed value.
    const K_PER: usize;
}
// SAFETY: 2 bytes, align 2, every bit pattern is a bf16 (A's rows copied by `dot_tiles`).
unsafe impl Packed for half::bf16 {
    const K_PER: usize = 1;
}
// SAFETY: 4 bytes, align 4, every bit pattern is an f32.
unsafe impl Packed for f32 {
    const K_PER: usize = 1;
}
// SAFETY: 8 bytes, align 8, every bit pattern is an f64.
unsafe impl Packed for f64 {
    const K_PER: usize = 1;
}

/// Two bf16 values of consecutive k (the first in the low half), packed for `vdpbf16ps` and
/// `tdpbf16ps`; or two f16 the same way, for `tdpfp16ps` (`amx::gemm_tiles`).
#[derive(Clone, Copy, Default)]
#[repr(transparent)]
pub(crate) struct Bf16Pair(pub(crate) u32);
// SAFETY: a transparent u32: 4 bytes, align 4, every bit pattern valid.
unsafe impl Packed for Bf16Pair {
    const K_PER: usize = 2;
}

/// Source elements that pack into `P`: `get(t)` is element t of the group of `P::K_PER`
/// consecutive k elements, or `None` past the end of k or of the matrix (packed as zero).
pub(crate) trait PackFrom<S>: Packed {
    /// Whether `run` converts a vector at a time ([`PackInto::RUNS`]).
    const RUNS: bool = false;
    fn make(get: impl Fn(usize) -> Option<S>) -> Self;
    /// One packed value per source value (K_PER == 1): `dst[t]` from `src[t]` (the two have
    /// one length).
    #[inline(always)]
    fn run(src: &[S], dst: &mut [Self])
    where
        S: Copy,
    {
        for (d, &x) in dst.iter_mut().zip(src) {
            *d = Self::make(|_| Some(x));
        }
    }
}
impl<S: PackInto<f32>> PackFrom<S> for f32 {
    const RUNS: bool = S::RUNS;
    #[inline(always)]
    fn make(get: impl Fn(usize) -> Option<S>) -> f32 {
        get(0).map_or(0.0, PackInto::conv)
    }
    #[inline(always)]
    fn run(src: &[S], dst: &mut [f32])
    where
        S: Copy,
    {
        S::conv_run(src, dst)
    }
}
impl PackFrom<f64> for f64 {
    #[inline(always)]
    fn make(get: impl Fn(usize) -> Option<f64>) -> f64 {
        get(0).unwrap_or(0.0)
    }
}
impl PackFrom<bf16> for Bf16Pair {
    #[inline(always)]
    fn make(get: impl Fn(usize) -> Option<bf16>) -> Bf16Pair {
        let bits = |t| get(t).map_or(0u32, |v| v.to_bits() as u32);
        Bf16Pair(bits(0) | bits(1) << 16)
    }
}
impl PackFrom<half::f16> for Bf16Pair {
    #[inline(always)]
    fn make(get: impl Fn(usize) -> Option<half::f16>) -> Bf16Pair {
        let bits = |t| get(t).map_or(0u32, |v| v.to_bits() as u32);
        Bf16Pair(bits(0) | bits(1) << 16)
    }
}

/// Packs the packed steps `steps` (of ks = ceil(kc / K_PER)) of the kc x nc block of B
/// starting at `b` into their places in `nr`-wide micro-panels `kstride` >= ks steps apart,
/// zero-padded to nr columns: value (s, j) of panel q at `dst[q * kstride * nr + s * nr +
/// j]` (steps ks..kstride are the caller's: the AMX kernels zero them, see
/// `amx::gemm_tiles`). Threads that pack one panel
/// set together each take a range of steps: each then reads whole rows of B (a range of k),
/// where ranges of panels made each read half of every row, which measured twice as slow
/// (Zen 5, two threads, a 1000 x 2000 f32 slice from memory: 0.45-0.49 ms against 0.9-1.06).
///
/// # Safety
/// `b.at(p, j)` must be valid (see [`MatRef::at`]) for every p < kc, j < nc. `dst` must be
/// valid for writes of `len` >= kstride * ceil(nc / nr) * nr values, with kstride >= ks
/// (both checked: this panics otherwise), and no one else may read or write the places of
/// `steps` during the call.
pub(super) unsafe fn pack_b<S: Copy + 'static, P: PackFrom<S>>(
    kc: usize,
    nc: usize,
    nr: usize,
    b: MatRef<S>,
    steps: std::ops::Range<usize>,
    (dst, len): (OutPtr<P>, usize),
    kstride: usize,
) {
    let ks = kc.div_ceil(P::K_PER);
    let panels = nc.div_ceil(nr);
    assert!(
        steps.end <= ks && ks <= kstride && kstride * panels * nr <= len,
        "pack_b: steps {steps:?} of {ks} ({kstride} apart), {panels} panels of {nr} in {len}"
    );
    // The nr values of step s of panel q.
    let place = |q: usize, s: usize| {
        // SAFETY: q < panels and s < ks <= kstride (callers below), so the nr values at q *
        // kstride * nr + s * nr end within kstride * panels * nr <= len (asserted above):
        // inside `dst`; they are this call's own places (# Safety), so this is the only
        // reference to them.
        unsafe { std::slice::from_raw_parts_mut(dst.get().add(q * kstride * nr + s * nr), nr) }
    };
    // One packed value from the group of K_PER rows of k starting at p0, column j (j < nc).
    let at = |p0: usize, j: usize| {
        P::make(|t| {
            let p = p0 + t;
            // SAFETY: p < kc and j < nc (callers below): valid by # Safety.
            (p < kc).then(|| unsafe { b.at(p, j) })
        })
    };
    if b.cs == 1 {
        // Row-major B: blocks of ROWS_AT_ONCE steps, each dealt out panel by panel, so that
        // the panels are written in runs of that many steps. Step by step (each row's
        // nr-wide pieces dealt out to every panel in turn), the writes went to places a
        // whole panel apart, 128 KiB at KC = 1024, all in the same sets of L1: on the
        // Emerald Rapids VM of bench/README.md (two paths alternated call by call, 2 rounds)
        // f64 128 x 1024 x 1024 ran 98-100 GFLOP/s against 108-110 in blocks of 16, 256 x
        // 1024 x 1024 121-125 against 128-131, f32 128 x 1024 x 1024 206-218 against 210-223
        // (blocks of 4 gained half of that; 32 and 64 no more than 16).
        const ROWS_AT_ONCE: usize = 16;
        for s0 in steps.clone().step_by(ROWS_AT_ONCE) {
            for q in 0..panels {
                for s in s0..(s0 + ROWS_AT_ONCE).min(steps.end) {
                    let p0 = s * P::K_PER;
                    let j0 = q * nr;
                    let w = nr.min(nc - j0);
                    let out = place(q, s);
                    let (body, pad) = out.split_at_mut(w);
                    // SAFETY (both slices): row p < kc, columns j0..j0 + w <= nc: valid by
                    // # Safety, and contiguous (cs == 1).
                    let row = |p: usize| unsafe {
                        std::slice::from_raw_parts(b.ptr.add(p * b.rs + j0), w)
                    };
                    if P::K_PER == 1 {
                        P::run(row(p0), body);
                    } else if P::K_PER == 2 && p0 + 1 < kc {
                        // Each visit reads one line of each of 2 x ROWS_AT_ONCE rows, more
                        // streams than the hardware follows: the two rows' piece two panels
                        // on is fetched here. bf16 (pairs), two threads, Zen 4, paired in one
                        // process: N=2000 +1.1%, N=1500 +1.3%, N=1024 +3.1% (f32 and f64,
                        // two lines of 16 rows a visit: level, not done for them).
                        #[cfg(target_arch = "x86_64")]
                        for t in 0..2 {
                            let ahead = b.ptr.wrapping_add((p0 + t) * b.rs + j0 + 2 * nr);
                            for off in (0..nr * size_of::<S>()).step_by(64) {
                                let line = ahead.wrapping_byte_add(off) as *const i8;
                                // SAFETY: a prefetch of any address never faults.
                                unsafe {
                                    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                                    _mm_prefetch::<_MM_HINT_T0>(line)
                                };
                            }
                        }
                        for ((v, &x0), &x1) in body.iter_mut().zip(row(p0)).zip(row(p0 + 1)) {
                            *v = P::make(|t| Some(if t == 0 { x0 } else { x1 }));
                        }
                    } else {
                        for (j, v) in body.iter_mut().enumerate() {
                            *v = at(p0, j0 + j);
                        }
                    }
                    pad.fill(P::default());
                }
            }
        }
        return;
    }
    // Column-major B (a transposed view: `x @ W.t()`): each column is contiguous in k.
    // Whole words of the source's as vector transposes (`cols_simd`; AVX-512: 16 x 16 or 8
    // x 8, AVX2: 8 x 8 or 4 x 4, whole vectors only): f32 and f64 as they are, and 16-bit
    // pairs (bf16 or f16 into `Bf16Pair`, a pair being the column's 32-bit word at 2 s, the
    // first value in the low half, as `PackFrom` makes it); a last step of a single 16-bit
    // value (odd kc) is made through `at`. For f32 packing went from 42% of 64 x 512 by a
    // transposed 512 x 512 to 33%, and the product 1.1-1.4x faster.
    #[cfg(target_arch = "x86_64")]
    let width = simd::width().filter(|&v| {
        let word = size_of::<P>();
        matches!(word, 4 | 8) && (v == 64 || nr.is_multiple_of(v / word))
    });
    #[cfg(target_arch = "x86_64")]
    if let Some(vbytes) = width.filter(|_| b.rs == 1 && words_of_source::<S, P>()) {
        // Steps made of whole words: all but an odd kc's last.
        let whole = kc / P::K_PER;
        let simd_steps = steps.start.min(whole)..steps.end.min(whole);
        // SAFETY: every packed value is a word of the source (`words_of_source`; a pair
        // only within `whole`); with 32-byte vectors nr is a multiple of their lanes
        // (`width` above); the rest as for `cols_simd`'s # Safety, which this call's own
        // gives.
        unsafe {
            cols_simd(
                nc,
                nr,
                b,
                simd_steps,
                P::K_PER,
                (dst.get() as *mut u8, kstride),
                (size_of::<P>(), vbytes),
            )
        };
        for s in steps.start.max(whole)..steps.end {
            for q in 0..panels {
                let j0 = q * nr;
                for (j, v) in place(q, s).iter_mut().enumerate() {
                    *v = if j0 + j < nc {
                        at(s * P::K_PER, j0 + j)
                    } else {
                        P::default()
                    };
                }
            }
        }
        return;
    }
    if b.rs == 1 && P::K_PER == 1 {
        // Without AVX2 (or converting): panel by panel, in blocks of 128 steps: read each
        // column's 128 values (contiguous) and deal them down the panel, whose 128 rows (16
        // KiB of f32) stay in L1 meanwhile. Value by value through `at`, packing took 67% of
        // f32 32 x 512 by a transposed 512 x 512; blocks ran it 2.1x faster (28.7 -> 61.3
        // GFLOP/s; blocks of 16: 55.0, and 0.9x at 16 x 256 x 256, against 1.1x for 128).
        const BLOCK: usize = 128;
        for q in 0..panels {
            let j0 = q * nr;
            let w = nr.min(nc - j0);
            let base = dst.get().add(q * kstride * nr);
            let mut s0 = steps.start;
            while s0 < steps.end {
                let s1 = (s0 + BLOCK).min(steps.end);
                for j in 0..nr {
                    if j < w {
                        // SAFETY: rows s0..s1 <= ks = kc of column j0 + j < nc: valid by
                        // # Safety, and contiguous (rs == 1).
                        let col =
                            std::slice::from_raw_parts(b.ptr.add(s0 + (j0 + j) * b.cs), s1 - s0);
                        if P::RUNS {
                            // f16, bf16: the column widened a vector at a time first.
                            let mut wide = [P::default(); BLOCK];
                            P::run(col, &mut wide[..col.len()]);
                            for (t, &v) in wide[..col.len()].iter().enumerate() {
                                // SAFETY: as below.
                                *base.add((s0 + t) * nr + j) = v;
                            }
                            continue;
                        }
                        for (t, &x) in col.iter().enumerate() {
                            // SAFETY: as for `place`: q < panels, s0 + t < ks <= kstride, j < nr.
                            *base.add((s0 + t) * nr + j) = P::make(|_| Some(x));
                        }
                    } else {
                        for t in s0..s1 {
                            // SAFETY: as above.
                            *base.add(t * nr + j) = P::default();
                        }
                    }
                }
                s0 = s1;
            }
        }
        return;
    }
    for q in 0..panels {
        let j0 = q * nr;
        let w = nr.min(nc - j0);
        for j in 0..nr {
            for s in steps.clone() {
                place(q, s)[j] = if j < w {
                    at(s * P::K_PER, j0 + j)
                } else {
                    P::default()
                };
            }
        }
    }
}

/// Whether every packed value is a word of the source as it lies in memory: S packed as
/// itself (f32, f64), or two 16-bit values of consecutive k in a 32-bit pair, the first in
/// the low half as `PackFrom` makes it (little-endian only). `pack_a` and `pack_b` then
/// move words (transposes) instead of making values one by one.
pub(super) fn words_of_source<S: 'static, P: Packed>() -> bool {
    let same = std::any::TypeId::of::<S>() == std::any::TypeId::of::<P>();
    let pairs = P::K_PER == 2
        && size_of::<S>() == 2
        && size_of::<P>() == 4
        && cfg!(target_endian = "little");
    same || pairs
}

/// `pack_b`'s column-major case (unit row stride), for packed steps that are words of the
/// source (`word` bytes, 4 or 8: `per` source values each, step s at value per * s of the
/// column), with transposes of `vbytes`-wide vectors (64: AVX-512, 32: AVX2): each panel's
/// columns in groups of one vector's lanes, each group's steps a vector of each column at a
/// time, the rest one word at a time; lanes past the matrix's last column are zero.
///
/// # Safety
/// As `pack_b`'s, with its assertion checked, `dst` as its words, and the words of `steps`
/// whole inside each column (per * steps.end <= kc); the CPU has AVX-512F for `vbytes` 64,
/// AVX2 for 32, and then nr is a multiple of 32 / word.
#[cfg(target_arch = "x86_64")]
pub(super) unsafe fn cols_simd<S>(
    nc: usize,
    nr: usize,
    b: MatRef<S>,
    steps: std::ops::Range<usize>,
    per: usize,
    (dst, kstride): (*mut u8, usize),
    (word, vbytes): (usize, usize),
) {
    let lanes = vbytes / word;
    let (len, full) = (steps.len(), steps.len() / lanes * lanes);
    for q in 0..nc.div_ceil(nr) {
        let j0 = q * nr;
        let w = nr.min(nc - j0);
        let panel = dst.add(q * kstride * nr * word);
        for g in (0..nr).step_by(lanes) {
            let h = w.saturating_sub(g).min(lanes).min(nr - g);
            let mut rows = [std::ptr::null::<u8>(); 16];
            for (i, r) in rows.iter_mut().enumerate().take(h) {
                // Column j0 + g + i < nc from step `steps.start` (rs == 1).
                *r = b.ptr.wrapping_add((j0 + g + i) * b.cs + per * steps.start) as *const u8;
            }
            let lanes_here = (nr - g).min(lanes);
            // The transposes read every row: a group short of columns (the matrix's last)
            // goes value by value.
            let full = if h < lanes { 0 } else { full };
            let out = panel.add((steps.start * nr + g) * word);
            // SAFETY: rows i < h are columns of B (valid by # Safety for steps.start +
            // `full` <= kc values, contiguous); the stores go to steps `steps` of lanes g..g +
            // lanes_here < nr of panel q, inside `dst` by pack_b's assertion (with 32-byte
            // vectors lanes_here is all their lanes: nr is a multiple of them); `full` is 0
            // unless h is all the lanes, so every row the transposes read is a column. The
            // CPU has the features of `vbytes` (# Safety).
            match (vbytes, word) {
                (64, 4) => {
                    let mask = ((1u32 << lanes_here) - 1) as u16;
                    let rows = &rows;
                    simd::transpose32::<16>(rows, full, out as *mut u32, nr, mask);
                }
                (64, _) => {
                    let mask = ((1u32 << lanes_here) - 1) as u8;
                    let rows = rows[..8].try_into().expect("8 of 16");
                    simd::transpose64::<8>(rows, full, out as *mut u64, nr, mask);
                }
                (_, 4) => {
                    let rows = rows[..8].try_into().expect("8 of 16");
                    simd::transpose32_avx2::<8, 8>(rows, full, out as *mut f32, nr);
                }
                _ => {
                    let rows = rows[..4].try_into().expect("4 of 16");
                    simd::transpose64_avx2(rows, full, out as *mut f64, nr);
                }
            }
            // The last steps, value by value (rows past h are zero lanes).
            for t in full..len {
                for (i, row) in rows.iter().enumerate().take(lanes_here) {
                    let to = out.add((t * nr + i) * word);
                    if i < h {
                        std::ptr::copy_nonoverlapping(row.wrapping_add(t * word), to, word);
                    } else {
                        std::ptr::write_bytes(to, 0, word);
                    }
                }
            }
        }
    }
}

/// Packs the mc x kc block of A starting at `a` into `mr`-tall micro-panels of ks =
/// ceil(kc / K_PER) packed steps each, zero-padded.
///
/// # Safety
/// `a.at(i, p)` must be valid (see [`MatRef::at`]) for every i < mc, p < kc. `dst` is indexed
/// with bounds checks.
pub(super) unsafe fn pack_a<S: Copy + 'static, P: PackFrom<S>>(
    mc: usize,
    kc: usize,
    mr: usize,
    a: MatRef<S>,
    dst: &mut [P],
) {
    let ks = kc.div_ceil(P::K_PER);
    // One packed value from row i (< mc), the group of K_PER columns of k starting at p0.
    let at = |i: usize, p0: usize| {
        P::make(|t| {
            let p = p0 + t;
            // SAFETY: i < mc and p < kc: valid by # Safety.
            (p < kc).then(|| unsafe { a.at(i, p) })
        })
    };
    for (q, panel) in dst.chunks_mut(ks * mr).take(mc.div_ceil(mr)).enumerate() {
        let i0 = q * mr;
        let h = mr.min(mc - i0);
        // Row-major A whose packed values are its own words: f32 and f64 as they are, or
        // 16-bit values in pairs (a pair is the row's 32-bit word at 2 s, the first value in
        // the low half, as `PackFrom` makes it). The block is then a transpose of words,
        // written in order (step by step, rows inner).
        if a.cs == 1 && words_of_source::<S, P>() {
            let per = P::K_PER;
            let full = kc / per;
            // 32-bit words into 14-tall panels: whole blocks of 16 steps as AVX-512
            // transposes (the scalar loop below waits on its loads, one word of each of 14
            // rows per step: 6% of a bf16 N=1024 product), or into AVX2's 6-tall ones; the
            // rest below.
            #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
            let mut first = 0;
            #[cfg(target_arch = "x86_64")]
            if size_of::<P>() == 4 && mr == simd::ROWS && simd::usable() {
                // Rows past h (a last panel of fewer) read row i0 again, into lanes that
                // are not stored (zeroed below).
                let rows: [*const u8; simd::ROWS] = std::array::from_fn(|i| {
                    let i = if i < h { i } else { 0 };
                    a.ptr.wrapping_add((i0 + i) * a.rs) as *const u8
                });
                first = full / 16 * 16;
                // SAFETY: rows i < 14 start at row i0 + i (or i0) < mc of A, and the words of
                // steps 0..first are columns 0..per * first <= kc of it: valid by # Safety
                // and contiguous (cs == 1); the panel holds ks * mr >= first * 14 values of 4
                // bytes. The CPU has AVX-512F (`simd::usable`).
                unsafe { simd::transpose14(&rows, h, first, panel.as_mut_ptr() as *mut u32) };
            } else if size_of::<P>() == 4 && mr == 6 && h == 6 && simd::avx2() {
                // The same into AVX2's 6-tall panels, 8 steps at a time (a last panel of
                // fewer rows below).
                let rows: [*const u8; 6] =
                    std::array::from_fn(|i| a.ptr.wrapping_add((i0 + i) * a.rs) as *const u8);
                first = full / 8 * 8;
                // SAFETY: as above, with all 6 rows inside A (h == 6), 6-value steps (KEEP
                // = stride = 6) and the CPU's AVX2 (`simd::avx2`).
                let dst = panel.as_mut_ptr() as *mut f32;
                unsafe { simd::transpose32_avx2::<6, 6>(&rows, first, dst, 6) };
            }
            for st in first..full {
                let out = &mut panel[st * mr..st * mr + h];
                for (i, v) in out.iter_mut().enumerate() {
                    // SAFETY: row i0 + i < mc, columns per * st .. per * st + per <= kc:
                    // valid by # Safety and contiguous (cs == 1); read unaligned (a pair is
                    // two 2-byte aligned values). Every bit pattern is a valid P (`Packed`),
                    // and where S is P the bytes are a P already.
                    *v = unsafe {
                        (a.ptr.add((i0 + i) * a.rs + per * st) as *const P).read_unaligned()
                    };
                }
            }
            if !kc.is_multiple_of(per) {
                for i in 0..h {
                    panel[full * mr + i] = at(i0 + i, per * full);
                }
            }
        } else if a.cs == 1 && P::RUNS && mr <= WIDE_ROWS {
            // Row-major f16 or bf16 A into f32 panels: runs of WIDE_STEPS values of each row
            // widened into a small buffer, then dealt out as a transpose of f32 words
            // (AVX-512, 16 steps at a time, as for f32's own) or one at a time.
            pack_a_widened(h, kc, mr, panel, |i| {
                // SAFETY: row i0 + i < mc, columns 0..kc: valid by # Safety, contiguous.
                unsafe { std::slice::from_raw_parts(a.ptr.add((i0 + i) * a.rs), kc) }
            });
        } else if a.cs == 1 {
            // Row-major A: each row read front to back (in groups of K_PER), dealt out at
            // stride mr.
            for i in 0..h {
                // SAFETY: row i0 + i < mc, columns 0..kc: valid by # Safety, contiguous.
                let src = unsafe { std::slice::from_raw_parts(a.ptr.add((i0 + i) * a.rs), kc) };
                if P::K_PER == 1 {
                    for (s, &x) in src.iter().enumerate() {
                        panel[s * mr + i] = P::make(|_| Some(x));
                    }
                } else {
                    for (s, g) in src.chunks(P::K_PER).enumerate() {
                        panel[s * mr + i] = P::make(|t| g.get(t).copied());
                    }
                }
            }
        } else {
            for s in 0..ks {
                for i in 0..h {
                    panel[s * mr + i] = at(i0 + i, s * P::K_PER);
                }
            }
        }
        for s in 0..ks {
            panel[s * mr + h..(s + 1) * mr].fill(P::default());
        }
    }
}

/// The most rows of a panel `pack_a_widened` takes (the widest kernel's MR is 14).
const WIDE_ROWS: usize = 16;
/// Values of each row widened at a time (a multiple of the transposes' 16 steps).
const WIDE_STEPS: usize = 64;

/// One mr-tall panel of steps 0..kc from rows 0..h (`row(i)`, kc values each) converted a
/// run at a time ([`PackFrom::run`]) into `panel[s * mr + i]`; rows h..mr are left to the
/// caller. Panics where `panel` is shorter than kc * mr, h > mr or mr > WIDE_ROWS.
fn pack_a_widened<'r, S: Copy + 'r, P: PackFrom<S>>(
    h: usize,
    kc: usize,
    mr: usize,
    panel: &mut [P],
    row: impl Fn(usize) -> &'r [S],
) {
    assert!(h <= mr && mr <= WIDE_ROWS && panel.len() >= kc * mr);
    let mut buf = [[P::default(); WIDE_STEPS]; WIDE_ROWS];
    for s0 in (0..kc).step_by(WIDE_STEPS) {
        let len = WIDE_STEPS.min(kc - s0);
        for (i, b) in buf.iter_mut().enumerate().take(h) {
            P::run(&row(i)[s0..s0 + len], &mut b[..len]);
        }
        #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
        let mut first = 0;
        #[cfg(target_arch = "x86_64")]
        if size_of::<P>() == 4 && mr == simd::ROWS && simd::usable() {
            // Rows past h read row 0 again, into lanes that are not stored.
            let rows: [*const u8; simd::ROWS] =
                std::array::from_fn(|i| buf[if i < h { i } else { 0 }].as_ptr() as *const u8);
            first = len / 16 * 16;
            let out = panel[s0 * mr..].as_mut_ptr() as *mut u32;
            // SAFETY: each of the 14 rows is a buffer row of WIDE_STEPS >= first 4-byte
            // values; steps s0..s0 + first of the panel, 14 values each, end within kc * mr
            // <= panel.len() (asserted); AVX-512F (`simd::usable`).
            unsafe { simd::transpose14(&rows, h, first, out) };
        }
        for s in first..len {
            for (i, b) in buf.iter().enumerate().take(h) {
                panel[(s0 + s) * mr + i] = b[s];
            }
        }
    }
}

/// Word transposes with AVX-512 and AVX2 for `pack_a` and `pack_b`.
#[cfg(target_arch = "x86_64")]
mod simd;
