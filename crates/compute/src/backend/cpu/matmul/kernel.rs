//! Which micro-kernel runs here: the kernels with their tiles, the blocking derived from the
//! caches (`Caches`, `Rule`), the choice by CPU features and `ACCEL_CPU_KERNEL`, and the
//! description `accel bench matmul --explain` prints.

#[cfg(target_arch = "x86_64")]
use super::micro::{avx2, avx512};
use super::micro::{generic_kernel, Prefetch};
use super::pack::{Bf16Pair, Packed};

/// `(ks, a, b, c, ldc, accumulate, mr, nr, next)`, with `ks` packed steps of k and `next`
/// the lines of the next B micro-panel this tile should bring towards L2 (a hint).
///
/// Calling one is unsafe: `a` must point to ks * MR readable packed values (an MR-tall
/// micro-panel from `pack_a`), `b` to ks * NR (an NR-wide micro-panel from `pack_b`), and
/// `c` to an mr x nr block (mr <= MR, nr <= NR) of writable, initialised values at row
/// stride `ldc`, not accessed by anyone else during the call; the SIMD kernels also require
/// the CPU features they were compiled for (checked by `CpuKernel::select`).
pub(super) type MicroKernel<P, D> =
    unsafe fn(usize, *const P, *const P, *mut D, usize, bool, usize, usize, Prefetch);

/// `(k, a, rsa, csa, b, rsb, c, ldc, mr, nr)`: an mr x nr tile of C = A B over the whole
/// of k, reading A and B where they lie, for products too small to repay packing (BLIS's
/// "sup" path): A element (i, p) at `a + i * rsa + p * csa`, B row p at `b + p * rsb` (NR
/// values: a full-width tile of a B with unit column stride, or a packed edge strip).
///
/// Calling one is unsafe: those addresses must be readable for i < mr (1 <= mr <= MR), p < k,
/// `c` as for `MicroKernel` (written, not accumulated), and the CPU must have the kernel's
/// features.
pub(super) type SmallKernel<D> =
    unsafe fn(usize, *const D, usize, usize, *const D, usize, *mut D, usize, usize, usize);

/// `(ks, a, rsa, b, c, ldc, accumulate, nr, out)`: a whole MR-tall tile over a packed B
/// micro-panel that reads A where it lies (row-major: element (i, p) at `a + i * rsa + p`)
/// and writes A's packed micro-panel to `out` as it goes (`pack_a`'s layout), so that the
/// first column of tiles of a block packs A without a pass of its own.
///
/// Calling one is unsafe: `ks` > 0, A's 14 rows readable for ks values, `b` and `c` as for
/// `MicroKernel` with mr = MR, `out` writable for ks * MR values, and the CPU must have the
/// kernel's features.
pub(super) type PackingKernel<P, D> =
    unsafe fn(usize, *const P, usize, *const P, *mut D, usize, bool, usize, *mut P);

/// One micro-kernel, its tile (MR x NR) and the blocking derived for it from this machine's
/// caches (MC x KC blocks of A in L2, KC x NR micro-panels of B in L1, KC x NC panels of B in
/// L3), as BLIS's analytical model does.
#[derive(Clone, Copy)]
pub(crate) struct CpuKernel<P, D> {
    /// `avx512`, `avx512-bf16`, `avx2` or `portable`.
    pub name: &'static str,
    pub mr: usize,
    pub nr: usize,
    pub mc: usize,
    /// In elements of k (a multiple of 4 * K_PER).
    pub kc: usize,
    pub nc: usize,
    pub(super) run: MicroKernel<P, D>,
    /// Its twin over unpacked operands, for small products (AVX-512 and AVX2, f32 and f64).
    pub(super) small: Option<SmallKernel<D>>,
    /// Whether `small` computes a last tile of up to mr / 2 rows at about half the cost of a
    /// whole one (AVX-512's twins; AVX2's compute all 6 rows whatever `mr`), which
    /// `small_split` counts on.
    pub(super) small_halves: bool,
    /// Its twin that packs A while it runs (`PackingKernel`: AVX-512, f32 and f64).
    pub(super) packing: Option<PackingKernel<P, D>>,
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
                let read = |f: &str| accelkit_core::files::read_text_limited(&d.join(f), 4096).ok();
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
    /// L2 / 8 (1024 packed steps of 128 bytes) streamed from L2, and an A block (MC x KC) of
    /// L2 / 2, beside that panel and the next one, which the kernels prefetch into L2. Deep
    /// slices halve the C traffic of BLIS's L1 rule, which measured 15-20% slower there (KC
    /// = 288: 299-316 GFLOP/s; KC = 1024, MC = 252: 380-400, f32 N=2000-4096). An A block of
    /// all of L2 (MC = 252 for f32) measured 2% slower than half of it (f32 N=2000, two
    /// threads, median of 5 interleaved rounds: 466.1 against 474.0 GFLOP/s; MC = 84: 475.3;
    /// f64, MC = 56 against 112: 204.6 against 201.0).
    L2Panel,
}

impl<P: Packed, D> CpuKernel<P, D> {
    /// The kernel with the blocking these caches call for under `rule`, each figure rounded
    /// to the kernel's tile; a B panel (KC x NC) takes 0.4 of L3 (shared by the threads).
    pub(super) fn blocked(
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
            Rule::L2Panel => caches.l2 / 2 / (ks * psize),
        };
        let mc = (mc / mr * mr).clamp(mr * 4, 1200 / mr * mr);
        let nc = (caches.l3 * 4 / 10 / (ks * psize)) / nr * nr;
        let nc = nc.clamp(nr * 16, 8160 / nr * nr);
        CpuKernel {
            name,
            mr,
            nr,
            mc,
            kc: ks * P::K_PER,
            nc,
            run,
            small: None,
            small_halves: false,
            packing: None,
        }
    }
}

/// Which micro-kernel family `ACCEL_CPU_KERNEL` asks for (`None`: the best this CPU has).
/// A bad value is ignored here (and reported by `accel doctor` through the central parser).
fn forced_kernel() -> Option<&'static str> {
    const FAMILIES: [&str; 4] = crate::base::env::CPU_KERNELS;
    static F: std::sync::OnceLock<Option<&'static str>> = std::sync::OnceLock::new();
    *F.get_or_init(|| {
        let v = crate::base::env::choice("ACCEL_CPU_KERNEL", &FAMILIES).ok()??;
        FAMILIES.into_iter().find(|f| *f == v)
    })
}

/// Whether `ACCEL_CPU_KERNEL` allows the `family` kernels: a forced family allows itself and
/// those below it (amx > avx512 > avx2 > portable).
pub(super) fn allowed(family: &str) -> bool {
    let rank = |f: &str| match f {
        "amx" => 3,
        "avx512" => 2,
        "avx2" => 1,
        _ => 0,
    };
    forced_kernel().is_none_or(|f| rank(family) <= rank(f))
}

/// Whether the CPU has every feature of the `family` kernels (and the family is `allowed`).
pub(super) fn usable(family: &str) -> bool {
    if !allowed(family) {
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

/// The widest vectors, in bytes, that the code around the micro-kernels (packing's
/// transposes, the dot tiles) may use here: 64 (AVX-512), 32 (AVX2 with FMA) or none, as
/// `usable` allows.
pub(super) fn vector_bytes() -> Option<usize> {
    if usable("avx512") {
        Some(64)
    } else if usable("avx2") {
        Some(32)
    } else {
        None
    }
}

/// Whether bf16 products can use AVX512_BF16's pair dot products here.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
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
    super::super::alloc::ZeroBits
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
    fn kernel() -> CpuKernel<Self, Self>;
}

/// One kernel of each family for an accumulator type: (tile, micro-kernel).
type Family<D> = ((usize, usize), MicroKernel<D, D>);

/// The best of the three families this CPU may run (`usable`), with its blocking; the
/// AVX-512 and AVX2 ones with their twins for small products.
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
fn best<D: Packed>(
    avx512: (Family<D>, SmallKernel<D>, Option<PackingKernel<D, D>>),
    avx2: (Family<D>, SmallKernel<D>),
    portable: Family<D>,
) -> CpuKernel<D, D> {
    let caches = Caches::of_this_machine();
    if usable("avx512") {
        let ((tile, run), small, packing) = avx512;
        let mut k = CpuKernel::blocked("avx512", tile, run, caches, Rule::L2Panel);
        k.small = Some(small);
        k.small_halves = true;
        k.packing = packing;
        return k;
    }
    if usable("avx2") {
        let ((tile, run), small) = avx2;
        let mut k = CpuKernel::blocked("avx2", tile, run, caches, Rule::L1Panel);
        k.small = Some(small);
        return k;
    }
    CpuKernel::blocked("portable", portable.0, portable.1, caches, Rule::L1Panel)
}

/// Off x86-64 no family has a small-product twin (`best` takes one for AVX-512 and AVX2).
#[cfg(not(target_arch = "x86_64"))]
unsafe fn no_small<D>(
    _: usize,
    _: *const D,
    _: usize,
    _: usize,
    _: *const D,
    _: usize,
    _: *mut D,
    _: usize,
    _: usize,
    _: usize,
) {
    unreachable!("AVX-512 and AVX2 are x86-64 only")
}

impl Accum for f32 {
    fn kernel() -> CpuKernel<f32, f32> {
        static K: std::sync::OnceLock<CpuKernel<f32, f32>> = std::sync::OnceLock::new();
        let portable: Family<f32> = ((6, 16), generic_kernel::<f32, 6, 16>);
        #[cfg(target_arch = "x86_64")]
        let simd = (
            (
                ((14, 32), avx512::kernel_f32 as MicroKernel<f32, f32>),
                avx512::small_f32 as SmallKernel<f32>,
                Some(avx512::packing_f32 as PackingKernel<f32, f32>),
            ),
            (
                ((6, 16), avx2::kernel_f32 as MicroKernel<f32, f32>),
                avx2::small_f32 as SmallKernel<f32>,
            ),
        );
        #[cfg(not(target_arch = "x86_64"))]
        let simd = (
            (portable, no_small::<f32> as SmallKernel<f32>, None),
            (portable, no_small::<f32> as SmallKernel<f32>),
        );
        *K.get_or_init(|| best(simd.0, simd.1, portable))
    }
}

impl Accum for f64 {
    fn kernel() -> CpuKernel<f64, f64> {
        static K: std::sync::OnceLock<CpuKernel<f64, f64>> = std::sync::OnceLock::new();
        let portable: Family<f64> = ((6, 8), generic_kernel::<f64, 6, 8>);
        #[cfg(target_arch = "x86_64")]
        let simd = (
            (
                ((14, 16), avx512::kernel_f64 as MicroKernel<f64, f64>),
                avx512::small_f64 as SmallKernel<f64>,
                Some(avx512::packing_f64 as PackingKernel<f64, f64>),
            ),
            (
                ((6, 8), avx2::kernel_f64 as MicroKernel<f64, f64>),
                avx2::small_f64 as SmallKernel<f64>,
            ),
        );
        #[cfg(not(target_arch = "x86_64"))]
        let simd = (
            (portable, no_small::<f64> as SmallKernel<f64>, None),
            (portable, no_small::<f64> as SmallKernel<f64>),
        );
        *K.get_or_init(|| best(simd.0, simd.1, portable))
    }
}

/// The kernel bf16 products use here: AVX512_BF16 pair dot products where the CPU has them
/// (`None` elsewhere: bf16 is then converted to f32 while packing and runs the f32 kernel).
pub(crate) fn bf16_kernel() -> Option<CpuKernel<Bf16Pair, f32>> {
    static K: std::sync::OnceLock<Option<CpuKernel<Bf16Pair, f32>>> = std::sync::OnceLock::new();
    *K.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        if bf16_dot_usable() {
            return Some(CpuKernel::blocked(
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

/// The names of the kernels in use for f32, f64, bf16 and f16 (for `accel bench --explain` and
/// doctor), with their blocking.
pub fn describe() -> Vec<(&'static str, String)> {
    let f = |name: &str, mr, nr, mc, kc, nc| format!("{name} {mr}x{nr}, MC={mc} KC={kc} NC={nc}");
    let k32 = f32::kernel();
    let k64 = f64::kernel();
    let mut v = vec![
        ("f32", f(k32.name, k32.mr, k32.nr, k32.mc, k32.kc, k32.nc)),
        ("f64", f(k64.name, k64.mr, k64.nr, k64.mc, k64.kc, k64.nc)),
    ];
    let bf16 = match (super::amx::tiles(), bf16_kernel()) {
        (Some(t), _) => f("amx", super::amx::MR, super::amx::NR, t.mc, 2 * t.ks, t.nc),
        (None, Some(k)) => f(k.name, k.mr, k.nr, k.mc, k.kc, k.nc),
        (None, None) => format!("converted to f32 while packing, then {}", k32.name),
    };
    // Where the CPU has AMX but accel cannot use it, say why.
    match super::amx::status() {
        Err(e) if e.hardware => v.push(("bf16", format!("{bf16} (not AMX: {})", e.why))),
        _ => v.push(("bf16", bf16)),
    }
    let f16 = match super::amx::tiles_f16() {
        Some(t) => f(
            "amx-fp16",
            super::amx::MR,
            super::amx::NR,
            t.mc,
            2 * t.ks,
            t.nc,
        ),
        None => format!("converted to f32 while packing, then {}", k32.name),
    };
    match super::amx::status_f16() {
        Err(e) if e.hardware => v.push(("f16", format!("{f16} (not AMX-FP16: {})", e.why))),
        _ => v.push(("f16", f16)),
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
