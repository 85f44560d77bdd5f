//! bf16 products on AMX's tile unit (Intel Xeon from Sapphire Rapids on), chosen at run time
//! from CPUID and the kernel's permission for tile data, with a self-check before first use.
//!
//! A tile is a 16-row register of up to 64 bytes a row; `tdpbf16ps` adds to a 16 x 16 f32
//! tile of C the product of a 16 x 32 bf16 tile of A by a 32 x 16 one of B, given as 16 rows
//! of 16 column pairs: element (k, j) of B sits at row k / 2, place 2 j + k % 2. That is the
//! layout `pack_b` already gives the AVX512_BF16 kernel (`Bf16Pair`: two consecutive k of one
//! column in a 32-bit word), so B is packed by the same code, 32 columns a micro-panel; A is
//! packed as whole rows of pairs (`pack_rows`), which is its natural order. The kernel
//! (`tile_kernel`) keeps a 32 x 32 block of C in four tiles and loads two tiles of A and two
//! of B for every 32 elements of k: four tile products for four loads.
//!
//! The loop nest is `gemm_with`'s (B panels in L3, packed by all threads together; each
//! thread its own A blocks in L2, for the units of C it claims: `Split`), with the B
//! micro-panel (KS x 32 pairs, a third of L1) in L1 and A micro-panels streamed from L2. Edge tiles of C are computed in
//! a 32 x 32 scratch block and copied out, so the kernel always computes whole tiles of
//! zero-padded operands.
//!
//! f16 products run the same way on CPUs with AMX-FP16 (Granite Rapids on): `tdpfp16ps`
//! takes the same layout with f16 pairs and accumulates in f32 as well (`status_f16`,
//! `tiles_f16`; the loop nest and packing are generic over [`Half`]). Unlike `tdpbf16ps`,
//! which treats bf16 subnormal inputs as zero (below 1.2e-38: no data reaches them), it
//! multiplies f16 subnormals exactly (Intel's reference for the instruction: "input FP16
//! denormals are always handled and not treated as zero"), as the Rust tile product of the
//! tests does; both flush f32 results below 1.2e-38 to zero.
//!
//! Linux gives a process the tile registers only after `arch_prctl(ARCH_REQ_XCOMP_PERM,
//! XFEATURE_XTILEDATA)` (Linux 5.16 and later; a tile instruction before it is SIGILL), so
//! [`status`] asks once and says why when the answer is no; bf16 then runs on the
//! AVX512_BF16 kernel as before, and f16 in f32.

use half::{bf16, f16};

use super::helper;
use super::kernel::Caches;
use super::pack::{pack_b, Bf16Pair, MatRef, OutPtr, PackFrom};
use super::{pack_in_turn, Finish, Scratch, Split, PARALLEL_MIN_FLOPS};

/// Rows of C one tile-kernel call computes (two tiles of 16).
pub(super) const MR: usize = 32;
/// Columns of C one call computes (two tiles of 16): the B micro-panel's width.
pub(super) const NR: usize = 32;
/// Packed steps (pairs of k) in one tile of A or B: 64 bytes a row.
pub(super) const STEP: usize = 16;

/// `(chunks, a, sa, b, c, sc, load)`: the 32 x 32 f32 block at `c` (rows `sc` bytes apart)
/// becomes (`load` ? itself : 0) + A B over `chunks` x 32 elements of k, with A 32 rows of
/// packed pairs `sa` bytes apart and B an NR-wide micro-panel (NR pairs a step).
///
/// Calling one is unsafe: `a` must be readable for 32 rows of chunks * STEP pairs at stride
/// `sa`, `b` for chunks * STEP * NR pairs, `c` readable and writable for 32 rows of 32 f32 at
/// stride `sc` and not touched by anyone else during the call; `chunks` >= 1; the asm kernel
/// also needs AMX with the tiles configured on this thread (`Tiles::enter`).
pub(super) type TileKernel =
    unsafe fn(usize, *const Bf16Pair, usize, *const Bf16Pair, *mut f32, usize, bool);

/// A tile kernel with what a thread does before and after a run of calls, and the blocking.
#[derive(Clone, Copy)]
pub(super) struct Tiles {
    pub run: TileKernel,
    /// Configures the tile registers on the calling thread (asm kernel), or nothing.
    pub enter: unsafe fn(),
    /// Releases them, so that the kernel's context switches stop saving 8 KiB of tile data.
    pub leave: unsafe fn(),
    /// Packed steps per KC slice (a multiple of STEP).
    pub ks: usize,
    /// Rows per A block (a multiple of MR).
    pub mc: usize,
    /// Columns per B panel (a multiple of NR).
    pub nc: usize,
}

impl Tiles {
    /// The blocking for these caches: the B micro-panel (KS pairs x 32 columns) takes a
    /// third of L1, so that it stays there while each 32-row A micro-panel, of the same size,
    /// streams past it from L2 (KS = 128 pairs, 256 of k, on a 48 KiB L1: 16 KiB each; with
    /// two thirds of L1 for B, as first written, B and the A stream together overflowed L1
    /// and B came back from L2 for every A micro-panel). The A block takes half of L2 and the
    /// B panel 0.4 of L3, as the vector kernels' (`CpuKernel::blocked`). Not yet timed on
    /// AMX hardware.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(super) fn blocked(
        run: TileKernel,
        enter: unsafe fn(),
        leave: unsafe fn(),
        caches: Caches,
    ) -> Tiles {
        let ks = (caches.l1d / 3 / (NR * 4) / STEP * STEP).clamp(STEP, 256);
        let mc = (caches.l2 / 2 / (ks * 4) / MR * MR).clamp(MR, 1024);
        let nc = (caches.l3 * 4 / 10 / (ks * 4) / NR * NR).clamp(NR * 4, 8192);
        Tiles {
            run,
            enter,
            leave,
            ks,
            mc,
            nc,
        }
    }
}

/// The 16-bit floats the tiles multiply in pairs: bf16 (`tdpbf16ps`) and f16 (`tdpfp16ps`).
pub(super) trait Half: Copy + Send + Sync + 'static {
    fn bits(self) -> u16;
    fn widen(bits: u16) -> f32;
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    fn narrow(x: f32) -> u16;
}
impl Half for bf16 {
    fn bits(self) -> u16 {
        self.to_bits()
    }
    fn widen(bits: u16) -> f32 {
        bf16::from_bits(bits).to_f32()
    }
    fn narrow(x: f32) -> u16 {
        bf16::from_f32(x).to_bits()
    }
}
impl Half for f16 {
    fn bits(self) -> u16 {
        self.to_bits()
    }
    fn widen(bits: u16) -> f32 {
        f16::from_bits(bits).to_f32()
    }
    fn narrow(x: f32) -> u16 {
        f16::from_f32(x).to_bits()
    }
}

/// Why bf16 (or f16) products do not run on AMX here.
#[derive(Debug)]
pub(crate) struct Unavailable {
    /// Whether the CPU has the AMX feature asked about (AMX-BF16 for bf16, AMX-FP16 for f16),
    /// and something else stood in the way.
    pub hardware: bool,
    pub why: String,
}

/// Whether bf16 products run on AMX here, and if not, why (asked once a process).
pub(crate) fn status() -> &'static Result<(), Unavailable> {
    static S: std::sync::OnceLock<Result<(), Unavailable>> = std::sync::OnceLock::new();
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    return S.get_or_init(decide::<bf16>);
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    S.get_or_init(not_here)
}

/// Whether f16 products run on AMX here (AMX-FP16), and if not, why (asked once a process).
pub(crate) fn status_f16() -> &'static Result<(), Unavailable> {
    static S: std::sync::OnceLock<Result<(), Unavailable>> = std::sync::OnceLock::new();
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    return S.get_or_init(decide::<f16>);
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    S.get_or_init(not_here)
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
fn not_here() -> Result<(), Unavailable> {
    Err(Unavailable {
        hardware: false,
        why: "AMX is used on x86-64 Linux only".into(),
    })
}

/// The answer for S's AMX feature: CPUID shows it and AMX-TILE (`system::amx_features`),
/// `ACCEL_CPU_KERNEL` allows amx, Linux gives the process tile data (asked once for both
/// features: the `PERMIT` cell below), and S's self-check passes.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn decide<S: asm_kernel::Ins>() -> Result<(), Unavailable> {
    let refused = |why: String| Unavailable {
        hardware: true,
        why,
    };
    let cpu = crate::base::system::amx_features();
    if !(cpu.contains(&"amx-tile") && cpu.contains(&S::FLAG)) {
        return Err(Unavailable {
            hardware: false,
            why: format!("this CPU has no {}", S::FLAG.to_uppercase()),
        });
    }
    if !super::kernel::allowed("amx") {
        return Err(refused(
            "ACCEL_CPU_KERNEL caps the kernels below amx".into(),
        ));
    }
    static PERMIT: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    PERMIT
        .get_or_init(asm_kernel::permit)
        .clone()
        .map_err(refused)?;
    asm_kernel::self_check::<S>().map_err(refused)
}

/// The bf16 tile kernel for this machine, when [`status`] is Ok.
pub(super) fn tiles() -> Option<Tiles> {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        static T: std::sync::OnceLock<Option<Tiles>> = std::sync::OnceLock::new();
        *T.get_or_init(|| asm_kernel::tiles::<bf16>(status()))
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    None
}

/// The f16 tile kernel for this machine, when [`status_f16`] is Ok.
pub(super) fn tiles_f16() -> Option<Tiles> {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        static T: std::sync::OnceLock<Option<Tiles>> = std::sync::OnceLock::new();
        *T.get_or_init(|| asm_kernel::tiles::<f16>(status_f16()))
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    None
}

/// Packs rows 0..mc, columns 0..kc of A (at `a`) as whole rows of pairs: row i's pair s (k =
/// 2s, 2s + 1) at `dst[i * kstride + s]`, zeros past kc and in rows mc..mc rounded up to MR.
///
/// # Safety
/// `a.at(i, p)` must be valid (see [`MatRef::at`]) for every i < mc, p < kc; `dst` must hold
/// mc.next_multiple_of(MR) * kstride values (checked), with kstride >= ceil(kc / 2).
pub(super) unsafe fn pack_rows<S: Half>(
    mc: usize,
    kc: usize,
    a: MatRef<S>,
    kstride: usize,
    dst: &mut [Bf16Pair],
) {
    let ks = kc.div_ceil(2);
    assert!(ks <= kstride && mc.next_multiple_of(MR) * kstride <= dst.len());
    for (i, row) in dst
        .chunks_mut(kstride)
        .take(mc.next_multiple_of(MR))
        .enumerate()
    {
        if i >= mc {
            row.fill(Bf16Pair(0));
            continue;
        }
        let (body, pad) = row.split_at_mut(ks);
        if a.cs == 1 {
            // SAFETY: row i < mc, columns 0..kc: valid by # Safety, contiguous (cs == 1).
            let src = unsafe { std::slice::from_raw_parts(a.ptr.add(i * a.rs), kc) };
            for (v, p) in body.iter_mut().zip(src.chunks(2)) {
                let hi = p.get(1).map_or(0, |x| x.bits() as u32);
                *v = Bf16Pair(p[0].bits() as u32 | hi << 16);
            }
        } else {
            for (s, v) in body.iter_mut().enumerate() {
                // SAFETY: i < mc, and 2s < kc (s < ks), 2s + 1 read only when < kc.
                let lo = unsafe { a.at(i, 2 * s) }.bits() as u32;
                let hi = if 2 * s + 1 < kc {
                    unsafe { a.at(i, 2 * s + 1) }.bits() as u32
                } else {
                    0
                };
                *v = Bf16Pair(lo | hi << 16);
            }
        }
        pad.fill(Bf16Pair(0));
    }
}

/// A 32 x 32 f32 block for edge tiles, aligned to a cache line.
#[repr(C, align(64))]
struct Block([f32; MR * NR]);

/// C = A B (bf16 or f16 operands, f32 C) on the tile kernel `t` (made for S), with `finish`
/// as for `gemm_with`.
///
/// # Safety
/// As for `gemm_with`; `t.run` must be callable on this CPU (`tiles()`, or the portable
/// kernel of the tests).
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn gemm_tiles<S: Half>(
    t: &Tiles,
    m: usize,
    n: usize,
    k: usize,
    a: MatRef<S>,
    b: MatRef<S>,
    c: &mut [f32],
    threads: usize,
    finish: Option<Finish<f32>>,
) where
    Bf16Pair: PackFrom<S>,
{
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        c.fill(0.0);
        if let Some(f) = finish {
            f(c.as_ptr(), 0..m, 0..n);
        }
        return;
    }
    // Equal slices of whole tiles (32 of k), as gemm_with's.
    let kcb = k
        .div_ceil(k.div_ceil(2 * t.ks))
        .next_multiple_of(2 * STEP)
        .min(2 * t.ks);
    let threads = if m * n * k < PARALLEL_MIN_FLOPS {
        1
    } else {
        threads.max(1)
    };
    let ks_max = kcb.div_ceil(2).next_multiple_of(STEP);
    let nc_max = t.nc.min(n);
    let mut bscratch = Scratch::take::<Bf16Pair>(ks_max * nc_max.next_multiple_of(NR));
    let bpack: &mut [Bf16Pair] = bscratch.view();
    let alen = ks_max * t.mc.min(m).next_multiple_of(MR);
    let mut ascratch: Vec<Scratch> = (0..threads)
        .map(|_| Scratch::take::<Bf16Pair>(alen))
        .collect();
    let mut apacks: Vec<&mut [Bf16Pair]> = ascratch.iter_mut().map(|s| s.view()).collect();
    let cp = OutPtr(c.as_mut_ptr());
    for jc in (0..n).step_by(t.nc) {
        let nc = t.nc.min(n - jc);
        let panels = nc.div_ceil(NR);
        for pc in (0..k).step_by(kcb) {
            let kc = kcb.min(k - pc);
            let ks = kc.div_ceil(2);
            let kstride = ks.next_multiple_of(STEP);
            let chunks = kstride / STEP;
            let bsrc = b.offset(pc, jc);
            let panel_set = &mut bpack[..kstride * panels * NR];
            // The steps past ks of every micro-panel are zeros (the tile reads whole chunks).
            for q in 0..panels {
                panel_set[(q * kstride + ks) * NR..(q + 1) * kstride * NR].fill(Bf16Pair(0));
            }
            let (dst, len) = (OutPtr(panel_set.as_mut_ptr()), panel_set.len());
            pack_in_turn(ks, threads, |steps| {
                // SAFETY: pack_b reads b.at(pc + p, jc + j) for p < kc, j < nc, valid by
                // gemm_tiles' # Safety; `dst` holds `len` = kstride * panels * NR values (the
                // `panel_set` slice, borrowed for this packing only) and pack_in_turn gives
                // each range of steps once: pack_b writes only its steps' places.
                unsafe { pack_b(kc, nc, NR, bsrc, steps, (dst, len), kstride) };
            });
            let bpack = &bpack[..];
            let split = Split::new(threads, (m, nc), (MR, NR), t.mc);
            let claims = helper::Claims::new(split.units);
            let gemm_unit = |u: usize, apack: &mut &mut [Bf16Pair]| {
                let (rows, cols) = split.unit(u);
                if rows.is_empty() || cols.0 == cols.1 {
                    return;
                }
                let blocks = rows.len().div_ceil(t.mc).max(1);
                let mc_even = rows.len().div_ceil(blocks).next_multiple_of(MR).min(t.mc);
                for ic in rows.clone().step_by(mc_even) {
                    let mc = mc_even.min(rows.end - ic);
                    // SAFETY: rows ic..ic + mc < m and columns pc..pc + kc <= k of A are
                    // valid (# Safety); apack holds alen >= mc rounded to MR x kstride.
                    unsafe { pack_rows(mc, kc, a.offset(ic, pc), kstride, apack) };
                    for jr in (cols.0..cols.1).step_by(NR) {
                        let w = NR.min(cols.1 - jr);
                        // cols.0 is a multiple of NR, so jr starts micro-panel jr / NR.
                        let bp = bpack[jr / NR * kstride * NR..].as_ptr();
                        for ir in (0..mc).step_by(MR) {
                            let h = MR.min(mc - ir);
                            let ap = apack[ir * kstride..].as_ptr();
                            // SAFETY: (ic + ir, jc + jr) .. + (h, w) is inside C (m x n) and
                            // in this unit's rows and columns (claimed once, disjoint: see
                            // Split); ap has MR rows of kstride pairs, bp chunks * STEP
                            // steps of NR pairs (the micro-panel), both packed above.
                            unsafe {
                                let cb = cp.get().add((ic + ir) * n + jc + jr);
                                tile_block(t, chunks, ap, kstride * 4, bp, cb, n, (h, w), pc > 0);
                            }
                        }
                    }
                    if let Some(f) = finish.filter(|_| pc + kc == k) {
                        f(cp.get(), ic..ic + mc, jc + cols.0..jc + cols.1);
                    }
                }
            };
            let work = |_: usize, apack: &mut &mut [Bf16Pair]| {
                // SAFETY: `t.run` is callable here (# Safety); enter configures this
                // thread's tiles, leave (below) releases them.
                unsafe { (t.enter)() };
                while let Some(u) = claims.next() {
                    gemm_unit(u, apack);
                }
                // SAFETY: as for enter.
                unsafe { (t.leave)() };
            };
            helper::for_each_part(&mut apacks, work);
        }
    }
}

/// One h x w block of C (at `c`, row stride `ldc` elements) from a whole 32 x 32 tile
/// product: straight into C when whole, else through a scratch block.
///
/// # Safety
/// As for [`TileKernel`], with `c` valid for h rows of w values at stride ldc.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn tile_block(
    t: &Tiles,
    chunks: usize,
    a: *const Bf16Pair,
    sa: usize,
    b: *const Bf16Pair,
    c: *mut f32,
    ldc: usize,
    (h, w): (usize, usize),
    load: bool,
) {
    if h == MR && w == NR {
        (t.run)(chunks, a, sa, b, c, ldc * 4, load);
        return;
    }
    let mut blk = Block([0.0; MR * NR]);
    if load {
        for i in 0..h {
            std::ptr::copy_nonoverlapping(c.add(i * ldc), blk.0.as_mut_ptr().add(i * NR), w);
        }
    }
    (t.run)(chunks, a, sa, b, blk.0.as_mut_ptr(), NR * 4, load);
    for i in 0..h {
        std::ptr::copy_nonoverlapping(blk.0.as_ptr().add(i * NR), c.add(i * ldc), w);
    }
}

/// One place of `tdpbf16ps` (S = bf16) or `tdpfp16ps` (f16): the dot product of two pairs
/// (low halves, then high), in f32.
#[cfg_attr(
    not(any(test, all(target_arch = "x86_64", target_os = "linux"))),
    allow(dead_code)
)]
fn pair_dot<S: Half>(x: Bf16Pair, y: Bf16Pair) -> f32 {
    let half = |v: u32| S::widen(v as u16);
    half(x.0) * half(y.0) + half(x.0 >> 16) * half(y.0 >> 16)
}

/// What `tdpbf16ps` (S = bf16) or `tdpfp16ps` (f16) computes, in plain Rust, for machines
/// without AMX: the tests run the whole loop nest (packing, blocking, edges, threads) through
/// it everywhere.
#[cfg(test)]
pub(super) unsafe fn tile_portable<S: Half>(
    chunks: usize,
    a: *const Bf16Pair,
    sa: usize,
    b: *const Bf16Pair,
    c: *mut f32,
    sc: usize,
    load: bool,
) {
    for i in 0..MR {
        let arow = (a as *const u8).add(i * sa) as *const Bf16Pair;
        let crow = (c as *mut u8).add(i * sc) as *mut f32;
        for j in 0..NR {
            let mut acc = if load { *crow.add(j) } else { 0.0 };
            for s in 0..chunks * STEP {
                acc += pair_dot::<S>(*arow.add(s), *b.add(s * NR + j));
            }
            *crow.add(j) = acc;
        }
    }
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod tile_asm;

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod asm_kernel {
    use super::tile_asm::{enter, kernel_bf16, kernel_fp16, leave};
    use super::*;

    /// The tile kernel for each 16-bit type, and the CPUID flag it needs (as
    /// `system::amx_features` names it): `tdpbf16ps` for bf16, `tdpfp16ps` for f16.
    pub(super) trait Ins: Half {
        const RUN: TileKernel;
        const FLAG: &'static str;
    }
    impl Ins for bf16 {
        const RUN: TileKernel = kernel_bf16;
        const FLAG: &'static str = "amx-bf16";
    }
    impl Ins for f16 {
        const RUN: TileKernel = kernel_fp16;
        const FLAG: &'static str = "amx-fp16";
    }

    /// S's tile kernel with this machine's blocking, where `status` (S's) is Ok.
    pub(super) fn tiles<S: Ins>(status: &Result<(), Unavailable>) -> Option<Tiles> {
        status
            .is_ok()
            .then(|| Tiles::blocked(S::RUN, enter, leave, Caches::of_this_machine()))
    }

    /// Asks Linux for the tile data registers (once a process; every thread then has them).
    pub(super) fn permit() -> Result<(), String> {
        const ARCH_GET_XCOMP_SUPP: libc::c_long = 0x1021;
        const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
        const XFEATURE_XTILEDATA: libc::c_long = 18;
        let mut supported: u64 = 0;
        // SAFETY: arch_prctl(ARCH_GET_XCOMP_SUPP) writes one u64 through the pointer.
        let r = unsafe {
            libc::syscall(
                libc::SYS_arch_prctl,
                ARCH_GET_XCOMP_SUPP,
                &mut supported as *mut u64,
            )
        };
        if r != 0 {
            return Err(format!(
                "the Linux kernel cannot give tile data to a process (arch_prctl ARCH_GET_XCOMP_SUPP: {}; Linux 5.16 or later needed)",
                std::io::Error::last_os_error()
            ));
        }
        if supported >> XFEATURE_XTILEDATA & 1 == 0 {
            return Err("the Linux kernel has not enabled AMX tile data (XCR0)".into());
        }
        // SAFETY: a plain request with two integer arguments.
        let r = unsafe {
            libc::syscall(
                libc::SYS_arch_prctl,
                ARCH_REQ_XCOMP_PERM,
                XFEATURE_XTILEDATA,
            )
        };
        if r != 0 {
            return Err(format!(
                "Linux refused tile data to this process (arch_prctl ARCH_REQ_XCOMP_PERM: {})",
                std::io::Error::last_os_error()
            ));
        }
        Ok(())
    }

    /// Runs the kernel once on values whose products and sums are exact in f32, with and
    /// without loading C, and compares with the portable loop's arithmetic: a hypervisor
    /// that shows AMX but runs it wrong falls back to the vector kernel instead of giving
    /// wrong products.
    pub(super) fn self_check<S: Ins>() -> Result<(), String> {
        const CH: usize = 2;
        let pair = |lo: f32, hi: f32| Bf16Pair(S::narrow(lo) as u32 | (S::narrow(hi) as u32) << 16);
        let a: Vec<Bf16Pair> = (0..MR * CH * STEP)
            .map(|i| pair((i % 7) as f32 - 3.0, (i % 5) as f32 - 2.0))
            .collect();
        let b: Vec<Bf16Pair> = (0..CH * STEP * NR)
            .map(|i| pair((i % 3) as f32 - 1.0, (i % 11) as f32 - 5.0))
            .collect();
        // The sums alone (C not loaded), then C = its own index + the sums (loaded).
        let sums: Vec<f32> = (0..MR * NR)
            .map(|ij| {
                let (i, j) = (ij / NR, ij % NR);
                (0..CH * STEP)
                    .map(|s| pair_dot::<S>(a[i * CH * STEP + s], b[s * NR + j]))
                    .sum()
            })
            .collect();
        for load in [false, true] {
            let start = |i: usize| if load { i as f32 } else { -1.0 };
            let mut got = Block([0.0; MR * NR]);
            for (i, v) in got.0.iter_mut().enumerate() {
                *v = start(i);
            }
            // SAFETY: permit() succeeded (`decide` calls it first) and the CPU has AMX-TILE
            // and S's feature (checked there); a holds 32 rows of CH * STEP pairs, b CH * STEP
            // steps of NR, got 32 x 32 f32, all local.
            unsafe {
                enter();
                S::RUN(
                    CH,
                    a.as_ptr(),
                    CH * STEP * 4,
                    b.as_ptr(),
                    got.0.as_mut_ptr(),
                    NR * 4,
                    load,
                );
                leave();
            }
            let want = |i: usize| if load { start(i) + sums[i] } else { sums[i] };
            if let Some(i) = (0..MR * NR).find(|&i| got.0[i] != want(i)) {
                return Err(format!(
                    "the AMX self-check computed {} where {} is right (element {i}, C {}); \
                     not using AMX",
                    got.0[i],
                    want(i),
                    if load { "loaded" } else { "not loaded" }
                ));
            }
        }
        Ok(())
    }
}
