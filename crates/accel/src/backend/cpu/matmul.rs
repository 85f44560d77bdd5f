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
// SAFETY: 4 bytes, align 4, every bit pattern is an f32.
unsafe impl Packed for f32 {
    const K_PER: usize = 1;
}
// SAFETY: 8 bytes, align 8, every bit pattern is an f64.
unsafe impl Packed for f64 {
    const K_PER: usize = 1;
}

/// Two bf16 values of consecutive k (the first in the low half), packed for `vdpbf16ps`.
#[derive(Clone, Copy, Default)]
#[repr(transparent)]
pub(crate) struct Bf16Pair(u32);
// SAFETY: a transparent u32: 4 bytes, align 4, every bit pattern valid.
unsafe impl Packed for Bf16Pair {
    const K_PER: usize = 2;
}

/// Source elements that pack into `P`: `get(t)` is element t of the group of `P::K_PER`
/// consecutive k elements, or `None` past the end of k or of the matrix (packed as zero).
pub(crate) trait PackFrom<S>: Packed {
    fn make(get: impl Fn(usize) -> Option<S>) -> Self;
}
impl<S: PackInto<f32>> PackFrom<S> for f32 {
    #[inline(always)]
    fn make(get: impl Fn(usize) -> Option<S>) -> f32 {
        get(0).map_or(0.0, PackInto::conv)
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

/// `(ks, a, b, c, ldc, accumulate, mr, nr)`, with `ks` packed steps of k.
///
/// Calling one is unsafe: `a` must point to ks * MR readable packed values (an MR-tall
/// micro-panel from `pack_a`), `b` to ks * NR (an NR-wide micro-panel from `pack_b`), and
/// `c` to an mr x nr block (mr <= MR, nr <= NR) of writable, initialised values at row
/// stride `ldc`, not accessed by anyone else during the call; the SIMD kernels also require
/// the CPU features they were compiled for (checked by `Kernel::select`).
type MicroKernel<P, D> = unsafe fn(usize, *const P, *const P, *mut D, usize, bool, usize, usize);

/// One micro-kernel, its tile (MR x NR) and the blocking derived for it from this machine's
/// caches (MC x KC blocks of A in L2, KC x NR micro-panels of B in L1, KC x NC panels of B in
/// L3), as BLIS's analytical model does.
#[derive(Clone, Copy)]
pub(crate) struct Kernel<P, D> {
    /// `avx512`, `avx512-bf16`, `avx2` or `portable`.
    pub name: &'static str,
    pub mr: usize,
    pub nr: usize,
    pub mc: usize,
    /// In elements of k (a multiple of 4 * K_PER).
    pub kc: usize,
    pub nc: usize,
    run: MicroKernel<P, D>,
}

/// The cache sizes the blocking is derived from, in bytes: L1 data and L2 of one core, L3 of
/// the whole chip, from Linux's sysfs; Zen 3's sizes where it says nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Caches {
    pub l1d: usize,
    pub l2: usize,
    pub l3: usize,
}

impl Caches {
    pub(crate) fn of_this_machine() -> Caches {
        static C: std::sync::OnceLock<Caches> = std::sync::OnceLock::new();
        *C.get_or_init(|| {
            let mut c = Caches {
                l1d: 32 << 10,
                l2: 512 << 10,
                l3: 32 << 20,
            };
            let base = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
            for i in 0..8 {
                let d = base.join(format!("index{i}"));
                let read = |f: &str| std::fs::read_to_string(d.join(f)).ok();
                let (Some(level), Some(kind), Some(size)) =
                    (read("level"), read("type"), read("size"))
                else {
                    continue;
                };
                let size = size.trim();
                let bytes = match size.strip_suffix('K') {
                    Some(k) => k.parse::<usize>().ok().map(|k| k << 10),
                    None => match size.strip_suffix('M') {
                        Some(m) => m.parse::<usize>().ok().map(|m| m << 20),
                        None => size.parse().ok(),
                    },
                };
                let Some(bytes) = bytes.filter(|&b| b > 0) else {
                    continue;
                };
                match (level.trim(), kind.trim()) {
                    ("1", "Data") => c.l1d = bytes,
                    ("2", _) => c.l2 = bytes,
                    ("3", _) => c.l3 = bytes,
                    _ => {}
                }
            }
            c
        })
    }
}

/// How a kernel's blocking follows the caches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rule {
    /// BLIS's: a B micro-panel (KC x NR) in 3/4 of L1, an A block (MC x KC) in 27/64 of L2.
    /// On Zen 3 (32 KiB, 512 KiB) this gives the KC = 384, MC = 144 measured best there for
    /// the AVX2 f32 kernel.
    L1Panel,
    /// For the AVX-512 kernels, measured on Zen 5 (48 KiB L1, 1 MiB L2): a B micro-panel of
    /// L2 / 8 (1024 packed steps of 128 bytes) streamed from L2, and an A block of MC x KC x 4
    /// bytes = L2. Deep slices halve the C traffic of BLIS's L1 rule, which measured 15-20%
    /// slower there (KC = 288: 299-316 GFLOP/s; KC = 1024, MC = 252: 380-400, f32 N=2000-4096).
    L2Panel,
}

impl<P: Packed, D> Kernel<P, D> {
    /// The kernel with the blocking these caches call for under `rule`, each figure rounded
    /// to the kernel's tile; a B panel (KC x NC) takes 0.4 of L3 (shared by the threads).
    fn blocked(
        name: &'static str,
        (mr, nr): (usize, usize),
        run: MicroKernel<P, D>,
        caches: Caches,
        rule: Rule,
    ) -> Self {
        let psize = std::mem::size_of::<P>();
        // Packed steps of k per slice (a multiple of the unroll of 4).
        let ks = match rule {
            Rule::L1Panel => caches.l1d * 3 / 4 / (nr * psize),
            Rule::L2Panel => caches.l2 / 8 / (nr * psize),
        };
        let ks = (ks / 4 * 4).clamp(16, 1024);
        let mc = match rule {
            Rule::L1Panel => caches.l2 * 27 / 64 / (ks * psize),
            Rule::L2Panel => caches.l2 / (ks * 4),
        };
        let mc = (mc / mr * mr).clamp(mr * 4, 1200 / mr * mr);
        let nc = (caches.l3 * 4 / 10 / (ks * psize)) / nr * nr;
        let nc = nc.clamp(nr * 16, 8160 / nr * nr);
        Kernel {
            name,
            mr,
            nr,
            mc,
            kc: ks * P::K_PER,
            nc,
            run,
        }
    }
}

/// Which micro-kernel family `ACCEL_CPU_KERNEL` asks for (`None`: the best this CPU has).
/// A bad value is ignored here (and reported by `accel doctor` through the central parser).
fn forced_kernel() -> Option<&'static str> {
    static F: std::sync::OnceLock<Option<&'static str>> = std::sync::OnceLock::new();
    *F.get_or_init(|| {
        match crate::base::env::choice("ACCEL_CPU_KERNEL", &["portable", "avx2", "avx512"]) {
            Ok(Some(v)) => Some(match v.as_str() {
                "portable" => "portable",
                "avx2" => "avx2",
                _ => "avx512",
            }),
            _ => None,
        }
    })
}

/// Whether the CPU has every feature of the `family` kernels (and the family is allowed by
/// `ACCEL_CPU_KERNEL`: a forced family allows itself and those below it).
fn usable(family: &str) -> bool {
    let rank = |f: &str| match f {
        "avx512" => 2,
        "avx2" => 1,
        _ => 0,
    };
    if forced_kernel().is_some_and(|f| rank(family) > rank(f)) {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    {
        match family {
            "avx512" => std::is_x86_feature_detected!("avx512f"),
            "avx2" => std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma"),
            _ => true,
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        family == "portable"
    }
}

/// Whether bf16 products can use AVX512_BF16's pair dot products here.
pub(crate) fn bf16_dot_usable() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        usable("avx512") && std::is_x86_feature_detected!("avx512bf16")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// An accumulator type with its micro-kernels.
pub(crate) trait Accum:
    super::alloc::ZeroBits
    + Packed
    + Copy
    + Send
    + Sync
    + Default
    + std::ops::Add<Output = Self>
    + std::ops::Mul<Output = Self>
    + 'static
{
    /// The best kernel for this CPU (and `ACCEL_CPU_KERNEL`), chosen once.
    fn kernel() -> Kernel<Self, Self>;
}

impl Accum for f32 {
    fn kernel() -> Kernel<f32, f32> {
        static K: std::sync::OnceLock<Kernel<f32, f32>> = std::sync::OnceLock::new();
        *K.get_or_init(|| {
            let caches = Caches::of_this_machine();
            #[cfg(target_arch = "x86_64")]
            {
                if usable("avx512") {
                    return Kernel::blocked(
                        "avx512",
                        (14, 32),
                        avx512::kernel_f32,
                        caches,
                        Rule::L2Panel,
                    );
                }
                if usable("avx2") {
                    return Kernel::blocked(
                        "avx2",
                        (6, 16),
                        avx2::kernel_f32,
                        caches,
                        Rule::L1Panel,
                    );
                }
            }
            Kernel::blocked(
                "portable",
                (6, 16),
                generic_kernel::<f32, 6, 16>,
                caches,
                Rule::L1Panel,
            )
        })
    }
}

impl Accum for f64 {
    fn kernel() -> Kernel<f64, f64> {
        static K: std::sync::OnceLock<Kernel<f64, f64>> = std::sync::OnceLock::new();
        *K.get_or_init(|| {
            let caches = Caches::of_this_machine();
            #[cfg(target_arch = "x86_64")]
            {
                if usable("avx512") {
                    return Kernel::blocked(
                        "avx512",
                        (14, 16),
                        avx512::kernel_f64,
                        caches,
                        Rule::L2Panel,
                    );
                }
                if usable("avx2") {
                    return Kernel::blocked(
                        "avx2",
                        (6, 8),
                        avx2::kernel_f64,
                        caches,
                        Rule::L1Panel,
                    );
                }
            }
            Kernel::blocked(
                "portable",
                (6, 8),
                generic_kernel::<f64, 6, 8>,
                caches,
                Rule::L1Panel,
            )
        })
    }
}

/// The kernel bf16 products use here: AVX512_BF16 pair dot products where the CPU has them
/// (`None` elsewhere: bf16 is then converted to f32 while packing and runs the f32 kernel).
pub(crate) fn bf16_kernel() -> Option<Kernel<Bf16Pair, f32>> {
    static K: std::sync::OnceLock<Option<Kernel<Bf16Pair, f32>>> = std::sync::OnceLock::new();
    *K.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        if bf16_dot_usable() {
            return Some(Kernel::blocked(
                "avx512-bf16",
                (14, 32),
                avx512::kernel_bf16,
                Caches::of_this_machine(),
                Rule::L2Panel,
            ));
        }
        None
    })
}

/// The names of the kernels in use for f32, f64 and bf16 (for `accel bench --explain` and
/// doctor), with their blocking.
pub fn describe() -> Vec<(&'static str, String)> {
    let f = |name: &str, mr, nr, mc, kc, nc| format!("{name} {mr}x{nr}, MC={mc} KC={kc} NC={nc}");
    let k32 = f32::kernel();
    let k64 = f64::kernel();
    let mut v = vec![
        ("f32", f(k32.name, k32.mr, k32.nr, k32.mc, k32.kc, k32.nc)),
        ("f64", f(k64.name, k64.mr, k64.nr, k64.mc, k64.kc, k64.nc)),
    ];
    match bf16_kernel() {
        Some(k) => v.push(("bf16", f(k.name, k.mr, k.nr, k.mc, k.kc, k.nc))),
        None => v.push((
            "bf16",
            format!("converted to f32 while packing, then {}", k32.name),
        )),
    }
    let c = Caches::of_this_machine();
    v.push((
        "caches",
        format!(
            "L1d {} KiB, L2 {} KiB, L3 {} MiB",
            c.l1d >> 10,
            c.l2 >> 10,
            c.l3 >> 20
        ),
    ));
    v
}

/// The portable micro-kernel: the same tile shape in plain Rust, for CPUs without AVX2+FMA.
///
/// # Safety
/// As for [`MicroKernel`]: `a` valid for reads of ks * MR elements, `b` of ks * NR, `c` valid
/// for reads and writes of rows 0..mr, columns 0..nr at stride `ldc` (mr <= MR, nr <= NR),
/// with no other access to that block during the call.
unsafe fn generic_kernel<D: Accum, const MR: usize, const NR: usize>(
    ks: usize,
    a: *const D,
    b: *const D,
    c: *mut D,
    ldc: usize,
    accumulate: bool,
    mr: usize,
    nr: usize,
) {
    let mut acc = [[D::default(); NR]; MR];
    for p in 0..ks {
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
mod avx512 {
    use std::arch::x86_64::*;

    use super::Bf16Pair;

    /// Rows of the tile: 14 rows x 2 vectors = 28 accumulators, 2 B vectors and one
    /// broadcast A value in the 32 zmm registers.
    const MR: usize = 14;

    /// Generates a 14 x (2 * LANES) AVX-512 micro-kernel. `load_b`, `bcast_a` and `fma` are
    /// the packed-type-specific steps, written as expressions over the names given.
    macro_rules! kernel {
        ($name:ident, $p:ty, $t:ty, $v:ty, $lanes:expr, $feat:literal,
         zero = $zero:expr,
         load_b($lb:ident) = $load_b:expr,
         bcast_a($la:ident) = $bcast_a:expr,
         fma($acc:ident, $x:ident, $y:ident) = $fma:expr,
         load_c = $load_c:ident, add_c = $add_c:ident, store_c = $store_c:ident) => {
            /// # Safety
            /// The CPU must have the target features named above (`Accum::kernel` and
            /// `bf16_kernel` check with `is_x86_feature_detected!` before handing this out).
            /// Pointers as for [`super::MicroKernel`]: `a` readable for ks * 14 packed
            /// values, `b` for ks * NR, `c` readable and writable for rows 0..mr, columns
            /// 0..nr at stride `ldc`, and, when mr == 14 and nr == NR, the whole tile
            /// (full-width vector stores).
            #[target_feature(enable = $feat)]
            pub(super) unsafe fn $name(
                ks: usize,
                mut a: *const $p,
                mut b: *const $p,
                c: *mut $t,
                ldc: usize,
                accumulate: bool,
                mr: usize,
                nr: usize,
            ) {
                const NR: usize = 2 * $lanes;
                let mut acc: [[$v; 2]; MR] = [[$zero; 2]; MR];
                // Prefetch addresses use `wrapping_add`: for an edge tile they may point past
                // C's allocation, and a prefetch of any address never faults.
                for i in 0..MR {
                    let p = c.wrapping_add(i * ldc) as *const i8;
                    _mm_prefetch::<_MM_HINT_T0>(p);
                    _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(NR * std::mem::size_of::<$t>() - 1));
                }
                // One packed step of k: two B vectors, MR broadcast A values, 2 MR FMAs.
                macro_rules! step {
                    ($u:expr) => {{
                        let bp = b.add($u * NR);
                        let ap = a.add($u * MR);
                        let b0 = {
                            let $lb = bp;
                            $load_b
                        };
                        let b1 = {
                            let $lb = bp.add($lanes);
                            $load_b
                        };
                        for (i, row) in acc.iter_mut().enumerate() {
                            let av = {
                                let $la = ap.add(i);
                                $bcast_a
                            };
                            row[0] = {
                                let ($acc, $x, $y) = (row[0], av, b0);
                                $fma
                            };
                            row[1] = {
                                let ($acc, $x, $y) = (row[1], av, b1);
                                $fma
                            };
                        }
                    }};
                }
                // Unrolled by 4, with prefetches of the A and B streams per turn;
                // `wrapping_add`: past the panels' ends for the last turns, and a prefetch
                // never faults.
                for _ in 0..ks / 4 {
                    let (pa, pb) = (a as *const i8, b as *const i8);
                    _mm_prefetch::<_MM_HINT_T0>(pa.wrapping_add(1024));
                    _mm_prefetch::<_MM_HINT_T0>(pa.wrapping_add(1024 + 128));
                    // The B micro-panel streams from L2 (KC x NR is larger than L1 with the
                    // L2 rule): 4 x 128 bytes a turn, fetched 2 KiB ahead (+2-3% on Zen 5,
                    // interleaved: f32 N=2000 423-428 vs 415-426 GFLOP/s, bf16 735-747 vs
                    // 711-738).
                    for l in 0..8 {
                        _mm_prefetch::<_MM_HINT_T0>(pb.wrapping_add(2048 + l * 64));
                    }
                    step!(0);
                    step!(1);
                    step!(2);
                    step!(3);
                    a = a.add(4 * MR);
                    b = b.add(4 * NR);
                }
                for _ in 0..ks % 4 {
                    step!(0);
                    a = a.add(MR);
                    b = b.add(NR);
                }
                if mr == MR && nr == NR {
                    for (i, row) in acc.iter().enumerate() {
                        let p = c.add(i * ldc);
                        if accumulate {
                            $store_c(p, $add_c($load_c(p), row[0]));
                            $store_c(p.add($lanes), $add_c($load_c(p.add($lanes)), row[1]));
                        } else {
                            $store_c(p, row[0]);
                            $store_c(p.add($lanes), row[1]);
                        }
                    }
                } else {
                    // Edge tile: spill to a buffer and copy the valid part.
                    let mut tmp = [0 as $t; MR * NR];
                    for (i, row) in acc.iter().enumerate() {
                        $store_c(tmp.as_mut_ptr().add(i * NR), row[0]);
                        $store_c(tmp.as_mut_ptr().add(i * NR + $lanes), row[1]);
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
        f32,
        __m512,
        16,
        "avx512f",
        zero = _mm512_setzero_ps(),
        load_b(p) = _mm512_loadu_ps(p),
        bcast_a(p) = _mm512_set1_ps(*p),
        fma(acc, x, y) = _mm512_fmadd_ps(x, y, acc),
        load_c = _mm512_loadu_ps,
        add_c = _mm512_add_ps,
        store_c = _mm512_storeu_ps
    );

    kernel!(
        kernel_f64,
        f64,
        f64,
        __m512d,
        8,
        "avx512f",
        zero = _mm512_setzero_pd(),
        load_b(p) = _mm512_loadu_pd(p),
        bcast_a(p) = _mm512_set1_pd(*p),
        fma(acc, x, y) = _mm512_fmadd_pd(x, y, acc),
        load_c = _mm512_loadu_pd,
        add_c = _mm512_add_pd,
        store_c = _mm512_storeu_pd
    );

    // bf16: each 32-bit lane of a B vector holds the pair (k, k + 1) of one column, and the
    // broadcast A value the pair of one row: `vdpbf16ps` adds both products to the f32 lane.
    kernel!(
        kernel_bf16,
        Bf16Pair,
        f32,
        __m512,
        16,
        "avx512f,avx512bf16",
        zero = _mm512_setzero_ps(),
        load_b(p) =
            std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(p as *const __m512i)),
        bcast_a(p) = std::mem::transmute::<__m512i, __m512bh>(_mm512_set1_epi32((*p).0 as i32)),
        fma(acc, x, y) = _mm512_dpbf16_ps(acc, x, y),
        load_c = _mm512_loadu_ps,
        add_c = _mm512_add_ps,
        store_c = _mm512_storeu_ps
    );
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

/// Packs the kc x nc block of B starting at `b` into `nr`-wide micro-panels of ks =
/// ceil(kc / K_PER) packed steps each, zero-padded.
///
/// # Safety
/// `b.at(p, j)` must be valid (see [`MatRef::at`]) for every p < kc, j < nc. `dst` is
/// indexed with bounds checks (it must hold ks * ceil(nc / nr) * nr values or this panics).
unsafe fn pack_b<S: Copy, P: PackFrom<S>>(
    kc: usize,
    nc: usize,
    nr: usize,
    b: MatRef<S>,
    dst: &mut [P],
) {
    let ks = kc.div_ceil(P::K_PER);
    let panels = nc.div_ceil(nr);
    // One packed value from the group of K_PER rows of k starting at p0, column j (j < nc).
    let at = |p0: usize, j: usize| {
        P::make(|t| {
            let p = p0 + t;
            // SAFETY: p < kc and j < nc (callers below): valid by # Safety.
            (p < kc).then(|| unsafe { b.at(p, j) })
        })
    };
    if b.cs == 1 {
        // Row-major B: read each row (group of K_PER rows) front to back, one page at a time
        // however far apart the rows are, and deal its nr-wide pieces out to the panels.
        for s in 0..ks {
            let p0 = s * P::K_PER;
            for q in 0..panels {
                let j0 = q * nr;
                let w = nr.min(nc - j0);
                let out = &mut dst[q * ks * nr + s * nr..q * ks * nr + (s + 1) * nr];
                let (body, pad) = out.split_at_mut(w);
                // SAFETY (both slices): row p < kc, columns j0..j0 + w <= nc: valid by
                // # Safety, and contiguous (cs == 1).
                let row =
                    |p: usize| unsafe { std::slice::from_raw_parts(b.ptr.add(p * b.rs + j0), w) };
                if P::K_PER == 1 {
                    for (v, &x) in body.iter_mut().zip(row(p0)) {
                        *v = P::make(|_| Some(x));
                    }
                } else if P::K_PER == 2 && p0 + 1 < kc {
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
        return;
    }
    for (q, panel) in dst.chunks_mut(ks * nr).take(panels).enumerate() {
        let j0 = q * nr;
        let w = nr.min(nc - j0);
        for j in 0..nr {
            for s in 0..ks {
                panel[s * nr + j] = if j < w {
                    at(s * P::K_PER, j0 + j)
                } else {
                    P::default()
                };
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
unsafe fn pack_a<S: Copy, P: PackFrom<S>>(
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
        if a.cs == 1 {
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

/// Runs the micro-kernel over one packed A block (mc rows) and the columns [j0, j1) of one
/// packed B panel (ks packed steps), writing C from (ic, jc).
///
/// # Safety
/// `k.run` must be callable on this CPU (`Kernel`s come from `Accum::kernel`/`bf16_kernel`,
/// which check); `apack` must hold the mc x kc block packed by `pack_a` with `k.mr`
/// (ceil(mc / mr) * mr * ks values) and `bpack` the panel packed by `pack_b` with `k.nr`
/// covering columns up to j1 rounded up to nr (ceil(j1 / nr) * nr * ks values), with j0 a
/// multiple of nr; `c` must be valid for reads and writes of rows 0..mc and columns j0..j1
/// at row stride `ldc`, and no other thread may touch that block during the call.
#[allow(clippy::too_many_arguments)]
unsafe fn macro_kernel<P: Packed, D>(
    k: &Kernel<P, D>,
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
        // The next B micro-panel sits in L3; pull it into L2 a slice per tile, so that the
        // next column of tiles does not start by waiting on it. `next` exists only when
        // jr + nr < j1, so that panel (panel_bytes long) is inside `bpack`, and every
        // l * 64 < panel_lines * 64 <= panel_bytes is inside it.
        let next = (jr + nr_ < j1).then(|| bp.add(ks * nr_) as *const i8);
        for (t, ir) in (0..mc).step_by(mr_).enumerate() {
            if let Some(nb) = next {
                for l in t * lines_per_tile..((t + 1) * lines_per_tile).min(panel_lines) {
                    prefetch_l2(nb.add(l * 64));
                }
            }
            let mr = mr_.min(mc - ir);
            let ap = apack.as_ptr().add(ir * ks);
            (k.run)(ks, ap, bp, c.add(ir * ldc + jr), ldc, accumulate, mr, nr);
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

/// Buffers for packed panels, kept between calls: a fresh zeroed allocation per call costs as
/// much as a whole 64 x 64 product. At most 8 are kept (a thread's A block plus the B panel
/// per call; more only under concurrent calls).
static SCRATCH: std::sync::Mutex<Vec<Vec<u64>>> = std::sync::Mutex::new(Vec::new());

/// One scratch buffer, back in the pool on drop.
struct Scratch(Vec<u64>);

impl Scratch {
    /// A buffer of at least `len` values of P (contents: whatever the last user left, or
    /// zeros where it grew; packing overwrites every value a kernel reads).
    fn take<P: Packed>(len: usize) -> Scratch {
        let words = (len * std::mem::size_of::<P>()).div_ceil(8);
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
        let n = self.0.len() * 8 / std::mem::size_of::<P>();
        // SAFETY: `Packed`'s contract: P's size divides 8 and its alignment is at most u64's,
        // so the u64 buffer holds exactly n values of P, aligned; every bit pattern is a valid
        // P, so the initialised u64s are initialised Ps. The borrow of `self` is unique.
        unsafe { std::slice::from_raw_parts_mut(self.0.as_mut_ptr() as *mut P, n) }
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

/// Below this many multiply-adds one thread is faster than waking the pool (measured on Zen 5:
/// f32 N=128 takes 32 us on one thread and 73 us on two, N=256 207 and 189 us).
const PARALLEL_MIN_FLOPS: usize = 1 << 24;

/// C = A * B for one matrix, with C contiguous row-major (m x n), on up to `threads` threads,
/// with the best kernel for D on this CPU.
///
/// # Safety
/// As for [`gemm_with`].
pub(crate) unsafe fn gemm<S: PackInto<D>, D: Accum + PackFrom<S>>(
    m: usize,
    n: usize,
    k: usize,
    a: MatRef<S>,
    b: MatRef<S>,
    c: &mut [D],
    threads: usize,
) {
    gemm_with(&D::kernel(), m, n, k, a, b, c, threads)
}

/// bf16 C = A * B accumulated in f32: with AVX512_BF16's pair dot products where the CPU has
/// them, else converted to f32 while packing.
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
) {
    match bf16_kernel() {
        Some(kern) => gemm_with(&kern, m, n, k, a, b, c, threads),
        None => gemm_with(&f32::kernel(), m, n, k, a, b, c, threads),
    }
}

/// C = A * B with kernel `kern`.
///
/// The loop nest is BLIS's: for each NC-wide column panel and KC-deep slice, B's panel is
/// packed once, by all threads together, and stays in the shared L3; then each thread packs
/// its own MC x KC blocks of A (in its L2) and runs the micro-kernel over them. Threads split
/// the rows of C, or its columns when C has too few rows to share.
///
/// # Safety
/// `kern` must come from `Accum::kernel` or `bf16_kernel` (callable on this CPU).
/// `a.at(i, p)` must be valid (see [`MatRef::at`]) for all i < m, p < k, and `b.at(p, j)`
/// for all p < k, j < n: every element address, computed without overflow, inside the live
/// allocation its pointer came from, for the whole call. `c` must hold at least m * n
/// elements (this is not checked; the micro-kernels write through a raw pointer). The
/// memory behind `a` and `b` must not be written during the call.
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_with<S: Copy + Send + Sync, P: PackFrom<S>, D: Accum>(
    kern: &Kernel<P, D>,
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
    let split_rows = m >= threads * mr * 4;
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
            if threads == 1 {
                pack_b(kc, nc, nr, bsrc, panels);
            } else {
                // Each thread packs a share of the nr-wide panels.
                let per = nc.div_ceil(nr).div_ceil(threads);
                panels
                    .par_chunks_mut(per * ks * nr)
                    .enumerate()
                    .for_each(|(t, dst)| {
                        let j0 = t * per * nr;
                        let w = (per * nr).min(nc - j0);
                        // SAFETY: pack_b reads b.at(pc + p, jc + j0 + j) for p < kc, j < w;
                        // j0 + w <= nc (w is clamped to nc - j0 above, and j0 < nc because
                        // par_chunks_mut makes only ceil(panels / per) chunks), so these are
                        // elements of the k x n operand that gemm's caller promised valid
                        // (# Safety of gemm_with). `dst` is this task's own disjoint chunk.
                        unsafe { pack_b(kc, w, nr, bsrc.offset(0, j0), dst) };
                    });
            }
            let bpack = &bpack[..];
            let work = |(t, apack): (usize, &mut &mut [P])| {
                let (rows, cols) = if split_rows {
                    let per = m.div_ceil(threads).div_ceil(mr) * mr;
                    ((t * per).min(m)..((t + 1) * per).min(m), (0, nc))
                } else {
                    let per = nc.div_ceil(threads).div_ceil(nr) * nr;
                    (0..m, ((t * per).min(nc), ((t + 1) * per).min(nc)))
                };
                for ic in rows.clone().step_by(mcb) {
                    let mc = mcb.min(rows.end - ic);
                    // SAFETY: pack_a reads A rows ic..ic + mc (< m, since mc <= rows.end -
                    // ic) and columns pc..pc + kc (<= k), valid by gemm_with's # Safety.
                    // apack has ceil(min(MC, m) / mr) * mr * ks_max >= the packed size.
                    // `cblk` is C + ic * n + jc, inside `c` (m * n elements by # Safety);
                    // macro_kernel writes rows ic..ic + mc and columns jc + cols.0 ..
                    // jc + cols.1 of C, and the `rows`/`cols` ranges of different `t` are
                    // disjoint (each thread's own mr- or nr-aligned share), so no two
                    // threads write one element. bpack was fully packed (and the packing
                    // tasks joined) before `work` runs; `kern` is callable (# Safety).
                    unsafe {
                        pack_a(mc, kc, mr, a.offset(ic, pc), apack);
                        let cblk = cp.get().add(ic * n + jc);
                        macro_kernel(kern, apack, bpack, mc, ks, cols, cblk, n, pc > 0);
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

#[cfg(test)]
mod tests {
    //! Every micro-kernel this CPU can run, forced one at a time with small caches (so that
    //! the MC, KC and NC loops all take several turns and every tile kind, full and edge,
    //! occurs), on odd shapes and transposed views, against a naive f64 loop.
    use super::*;

    /// Caches small enough for several blocks at these sizes.
    const TINY: Caches = Caches {
        l1d: 4 << 10,
        l2: 2 << 10,
        l3: 16 << 10,
    };

    fn values(n: usize, seed: u64) -> Vec<f64> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                ((s >> 11) as f64 / (1u64 << 53) as f64) * 4.0 - 2.0
            })
            .collect()
    }

    /// The textbook product of (m x k) by (k x n) given as strided views, in f64.
    fn naive(
        m: usize,
        n: usize,
        k: usize,
        a: (&[f64], usize, usize),
        b: (&[f64], usize, usize),
    ) -> Vec<f64> {
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k)
                    .map(|p| a.0[i * a.1 + p * a.2] * b.0[p * b.1 + j * b.2])
                    .sum();
            }
        }
        c
    }

    const SHAPES: [(usize, usize, usize); 6] = [
        (1, 1, 1),
        (14, 32, 8),
        (15, 33, 17),
        (29, 70, 131),
        (57, 9, 300),
        (100, 130, 97),
    ];

    /// Runs `kern` on every shape, A and B row-major and transposed, on 1 and 2 threads, and
    /// compares with the naive loop within `tol` x k.
    fn check<S: Copy + Send + Sync, P: PackFrom<S>, D: Accum + Into<f64>>(
        kern: &Kernel<P, D>,
        to: impl Fn(f64) -> S,
        back: impl Fn(S) -> f64,
        tol: f64,
    ) {
        for &(m, n, k) in &SHAPES {
            for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
                let a: Vec<S> = values(m * k, 1).into_iter().map(&to).collect();
                let b: Vec<S> = values(k * n, 2).into_iter().map(&to).collect();
                let (af, bf): (Vec<f64>, Vec<f64>) = (
                    a.iter().map(|&x| back(x)).collect(),
                    b.iter().map(|&x| back(x)).collect(),
                );
                // A transposed: stored k x m, read with strides (1, m).
                let (ars, acs) = if ta { (1, m) } else { (k, 1) };
                let (brs, bcs) = if tb { (1, k) } else { (n, 1) };
                let want = naive(m, n, k, (&af, ars, acs), (&bf, brs, bcs));
                for threads in [1, 2] {
                    let mut c = vec![D::default(); m * n];
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
                    // SAFETY: the views cover exactly the m x k and k x n values allocated
                    // above; c holds m * n; the kernel was checked usable by the caller.
                    unsafe { gemm_with(kern, m, n, k, ar, br, &mut c, threads) };
                    for (idx, (g, w)) in c.iter().zip(&want).enumerate() {
                        let g: f64 = (*g).into();
                        assert!(
                            (g - w).abs() <= tol * k as f64 * w.abs().max(1.0),
                            "{} {m}x{n}x{k} ta={ta} tb={tb} threads={threads} at {idx}: {g}, naive {w}",
                            kern.name
                        );
                    }
                }
            }
        }
    }

    fn avx512_required() -> bool {
        std::env::var("ACCEL_TEST_REQUIRE")
            .unwrap_or_default()
            .split(',')
            .any(|s| s.trim().eq_ignore_ascii_case("avx512"))
    }

    #[test]
    fn every_f32_and_f64_kernel_this_cpu_has_matches_the_naive_loop() {
        let k = Kernel::blocked(
            "portable",
            (6, 16),
            generic_kernel::<f32, 6, 16>,
            TINY,
            Rule::L1Panel,
        );
        assert!(
            k.kc < 64 * 4 && k.mc < 200,
            "TINY gives several blocks: {} {}",
            k.kc,
            k.mc
        );
        check(&k, |x| x as f32, |x| x as f64, 1e-6);
        let k = Kernel::blocked(
            "portable",
            (6, 8),
            generic_kernel::<f64, 6, 8>,
            TINY,
            Rule::L1Panel,
        );
        check(&k, |x| x, |x| x, 1e-15);
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
                check(
                    &Kernel::blocked("avx2", (6, 16), avx2::kernel_f32, TINY, Rule::L1Panel),
                    |x| x as f32,
                    |x| x as f64,
                    1e-6,
                );
                check(
                    &Kernel::blocked("avx2", (6, 8), avx2::kernel_f64, TINY, Rule::L1Panel),
                    |x| x,
                    |x| x,
                    1e-15,
                );
            } else {
                println!("skipped: avx2: this CPU has no AVX2+FMA");
            }
            if std::is_x86_feature_detected!("avx512f") {
                check(
                    &Kernel::blocked("avx512", (14, 32), avx512::kernel_f32, TINY, Rule::L2Panel),
                    |x| x as f32,
                    |x| x as f64,
                    1e-6,
                );
                check(
                    &Kernel::blocked("avx512", (14, 16), avx512::kernel_f64, TINY, Rule::L2Panel),
                    |x| x,
                    |x| x,
                    1e-15,
                );
            } else {
                assert!(
                    !avx512_required(),
                    "ACCEL_TEST_REQUIRE names avx512, but this CPU has no avx512f"
                );
                println!("skipped: avx512: this CPU has no avx512f");
            }
        }
    }

    #[test]
    fn bf16_pair_dot_kernel_matches_the_naive_loop() {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512bf16") {
            // Products of two bf16 are exact in f32; only the f32 sums round.
            let k = Kernel::blocked(
                "avx512-bf16",
                (14, 32),
                avx512::kernel_bf16,
                TINY,
                Rule::L2Panel,
            );
            check(&k, bf16::from_f64, |x: bf16| x.to_f64(), 1e-6);
            // A k of 1 and odd k: the last pair is half padding.
            return;
        }
        assert!(
            !avx512_required(),
            "ACCEL_TEST_REQUIRE names avx512, but this CPU has no avx512_bf16"
        );
        println!("skipped: avx512: this CPU has no avx512_bf16");
    }

    #[test]
    fn blocking_follows_the_caches() {
        let zen3 = Caches {
            l1d: 32 << 10,
            l2: 512 << 10,
            l3: 32 << 20,
        };
        let k = Kernel::<f32, f32>::blocked(
            "x",
            (6, 16),
            generic_kernel::<f32, 6, 16>,
            zen3,
            Rule::L1Panel,
        );
        // The values measured best on Zen 3 for the AVX2 kernel.
        assert_eq!((k.kc, k.mc), (384, 144));
        assert_eq!(k.nc % 16, 0);
        let zen5 = Caches {
            l1d: 48 << 10,
            l2: 1 << 20,
            l3: 32 << 20,
        };
        let k = Kernel::<f32, f32>::blocked(
            "x",
            (14, 32),
            generic_kernel::<f32, 6, 16>,
            zen5,
            Rule::L2Panel,
        );
        // The values measured best on Zen 5 for the AVX-512 kernel.
        assert_eq!((k.kc, k.mc), (1024, 252));
        let kb = Kernel::<Bf16Pair, f32>::blocked(
            "x",
            (14, 32),
            |_, _, _, _, _, _, _, _| {},
            zen5,
            Rule::L2Panel,
        );
        // Pairs: the same bytes per step hold twice the k.
        assert_eq!((kb.kc, kb.mc), (2048, 252));
        // Caches smaller than any tile still give a usable blocking.
        let k = Kernel::<f64, f64>::blocked(
            "x",
            (6, 8),
            generic_kernel::<f64, 6, 8>,
            Caches {
                l1d: 1,
                l2: 1,
                l3: 1,
            },
            Rule::L1Panel,
        );
        assert!(
            k.kc >= 16 && k.mc >= 24 && k.nc >= 128,
            "{} {} {}",
            k.kc,
            k.mc,
            k.nc
        );
    }
}
