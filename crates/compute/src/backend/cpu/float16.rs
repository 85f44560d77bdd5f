//! Conversions between f32 and the 16-bit float types, in the fastest way the CPU has and
//! bit for bit as `half` converts: products rounded to bf16 (`scaled_to_bf16`) and f16
//! (`scaled_to_f16`), and both widened to f32 (`widen_bf16`, `widen_f16`).

use half::{bf16, f16};

use super::alloc;
use super::num::Num;
use crate::backend::ops::BinaryOp;
use crate::base::shape::Layout;
use crate::Shape;

/// `dst = x * src`, each product rounded once to bf16 (to nearest, ties to even; NaNs stay
/// NaNs, quieted), as `half`'s `bf16::from_f32` rounds, with the fastest of `bf16_rounders`
/// the CPU has. Scaled by 1, exactly the rounding of `src` (multiplying by 1 is exact,
/// subnormal values and NaNs' payloads included); scaled by A's value, a row of an outer
/// product (`matmul::gemm_outer_rounded`), rounded as it is computed.
pub(crate) fn scaled_to_bf16(dst: &mut [bf16], src: &[f32], x: f32) {
    let (_, f) = bf16_rounders()[0];
    // SAFETY: `bf16_rounders` lists only the rounders the CPU has the features for.
    unsafe { f(dst, src, x) }
}

/// `dst = x * src`, each product rounded once to f16 (to nearest, ties to even), as `half`'s
/// `f16::from_f32` rounds, with the fastest of `f16_rounders` the CPU has.
pub(crate) fn scaled_to_f16(dst: &mut [f16], src: &[f32], x: f32) {
    let (_, f) = f16_rounders()[0];
    // SAFETY: `f16_rounders` lists only the rounders the CPU has the features for.
    unsafe { f(dst, src, x) }
}

/// The f16 rounders this CPU can run, the fastest first: `vcvtps2ph` 16 at a time with
/// AVX-512, 8 at a time with F16C, then `half`'s conversion one value at a time. `half`'s
/// slice conversion (F16C, a call for every 8 values) took 55% of an f16 4096 x 1 by 1 x 1024
/// product (Zen 4).
fn f16_rounders() -> &'static [Rounder<f16>] {
    static LIST: std::sync::OnceLock<Vec<Rounder<f16>>> = std::sync::OnceLock::new();
    LIST.get_or_init(|| {
        let mut list: Vec<Rounder<f16>> = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            use std::is_x86_feature_detected as has;
            if has!("avx512f") && has!("f16c") {
                list.push(("avx512", round_f16_avx512));
            }
            if has!("avx") && has!("f16c") {
                list.push(("f16c", round_f16_f16c));
            }
        }
        list.push(("portable", |d, s, x| {
            d.iter_mut()
                .zip(s)
                .for_each(|(d, &y)| *d = f16::from_f32(x * y))
        }));
        list
    })
}

/// `vcvtps2ph` 16 products at a time, rounded to nearest even (`round_f16_f16c` for the
/// rest).
///
/// # Safety
/// The CPU has AVX-512F and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx,f16c")]
unsafe fn round_f16_avx512(dst: &mut [f16], src: &[f32], x: f32) {
    use std::arch::x86_64::*;
    let n = dst.len().min(src.len());
    let (d16, s16) = (dst[..n].chunks_exact_mut(16), src[..n].chunks_exact(16));
    let done = s16.len() * 16;
    let xs = _mm512_set1_ps(x);
    for (d, s) in d16.zip(s16) {
        // SAFETY: `s` holds 16 f32 and `d` 16 f16 (32 bytes): an unaligned load and store.
        unsafe {
            let p = _mm512_mul_ps(xs, _mm512_loadu_ps(s.as_ptr()));
            let h = _mm512_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(p);
            _mm256_storeu_si256(d.as_mut_ptr().cast(), h);
        }
    }
    // SAFETY: the CPU has AVX (AVX-512F implies it) and F16C (this function's contract).
    unsafe { round_f16_f16c(&mut dst[done..n], &src[done..n], x) }
}

/// `vcvtps2ph` 8 products at a time, rounded to nearest even; the last few one at a time by
/// `half`.
///
/// # Safety
/// The CPU has AVX and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx,f16c")]
unsafe fn round_f16_f16c(dst: &mut [f16], src: &[f32], x: f32) {
    use std::arch::x86_64::*;
    let n = dst.len().min(src.len());
    let (d8, s8) = (dst[..n].chunks_exact_mut(8), src[..n].chunks_exact(8));
    let done = s8.len() * 8;
    let xs = _mm256_set1_ps(x);
    for (d, s) in d8.zip(s8) {
        // SAFETY: `s` holds 8 f32 and `d` 8 f16 (16 bytes): an unaligned load and store.
        unsafe {
            let p = _mm256_mul_ps(xs, _mm256_loadu_ps(s.as_ptr()));
            let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(p);
            _mm_storeu_si128(d.as_mut_ptr().cast(), h);
        }
    }
    for (d, &y) in dst[done..n].iter_mut().zip(&src[done..n]) {
        *d = f16::from_f32(x * y);
    }
}

/// `dst = src` widened to f32 (exact): a bf16 value is the top half of an f32's bits; a
/// signalling NaN comes out quiet, as `half` and the x86 conversions make it.
pub(crate) fn widen_bf16(dst: &mut [f32], src: &[bf16]) {
    super::num::vectorised(|| {
        for (d, &h) in dst.iter_mut().zip(src) {
            *d = bf16_to_f32(h);
        }
    })
}

/// One bf16 in f32, as `half` widens it (a signalling NaN comes out quiet).
#[inline(always)]
fn bf16_to_f32(h: bf16) -> f32 {
    let b = u32::from(h.to_bits()) << 16;
    let nan = b & 0x7FFF_FFFF > 0x7F80_0000;
    f32::from_bits(if nan { b | 0x0040_0000 } else { b })
}

/// `dst = src` widened to f32 (exact): `vcvtph2ps` 16 at a time with AVX-512, 8 with F16C,
/// else `half` one value at a time. (`half`'s slice conversion calls a function for every 8
/// values.)
pub(crate) fn widen_f16(dst: &mut [f32], src: &[f16]) {
    let n = dst.len().min(src.len());
    #[cfg(target_arch = "x86_64")]
    {
        use std::is_x86_feature_detected as has;
        /// # Safety
        /// The CPU has AVX-512F and F16C.
        #[target_feature(enable = "avx512f,avx,f16c")]
        unsafe fn wide(dst: &mut [f32], src: &[f16]) -> usize {
            use std::arch::x86_64::*;
            for (d, s) in dst.chunks_exact_mut(16).zip(src.chunks_exact(16)) {
                // SAFETY: `s` holds 16 f16 (32 bytes) and `d` 16 f32.
                unsafe {
                    let h = _mm256_loadu_si256(s.as_ptr().cast());
                    _mm512_storeu_ps(d.as_mut_ptr(), _mm512_cvtph_ps(h));
                }
            }
            dst.len().min(src.len()) / 16 * 16
        }
        /// # Safety
        /// The CPU has AVX and F16C.
        #[target_feature(enable = "avx,f16c")]
        unsafe fn narrow(dst: &mut [f32], src: &[f16]) -> usize {
            use std::arch::x86_64::*;
            for (d, s) in dst.chunks_exact_mut(8).zip(src.chunks_exact(8)) {
                // SAFETY: `s` holds 8 f16 (16 bytes) and `d` 8 f32.
                unsafe {
                    let h = _mm_loadu_si128(s.as_ptr().cast());
                    _mm256_storeu_ps(d.as_mut_ptr(), _mm256_cvtph_ps(h));
                }
            }
            dst.len().min(src.len()) / 8 * 8
        }
        let done = if has!("avx512f") && has!("f16c") {
            // SAFETY: checked just above.
            unsafe { wide(&mut dst[..n], &src[..n]) }
        } else if has!("avx") && has!("f16c") {
            // SAFETY: checked just above.
            unsafe { narrow(&mut dst[..n], &src[..n]) }
        } else {
            0
        };
        for (d, s) in dst[done..n].iter_mut().zip(&src[done..n]) {
            *d = s.to_f32();
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    for (d, s) in dst[..n].iter_mut().zip(&src[..n]) {
        *d = s.to_f32();
    }
}

/// bf16 and f16: elementwise ops computed in f32 blocks (`binary`, `unary`).
pub(crate) trait Half: Num {
    /// `dst = src` in f32 (exact).
    fn widen(dst: &mut [f32], src: &[Self]);
    /// `dst = src` rounded once, to nearest even.
    fn round(dst: &mut [Self], src: &[f32]) {
        Self::round_scaled(dst, src, 1.0)
    }
    /// `dst = x * src`, each product rounded once, to nearest even.
    fn round_scaled(dst: &mut [Self], src: &[f32], x: f32);
    /// `dst = f(src)` with src widened: bf16 in one vector loop with `f` (its widening is a
    /// shift), f16 widened (F16C) and then `f` in place.
    #[inline(always)]
    fn widen_map(dst: &mut [f32], src: &[Self], f: impl Fn(f32) -> f32) {
        Self::widen(dst, src);
        super::num::vectorised(|| dst.iter_mut().for_each(|d| *d = f(*d)))
    }
}

impl Half for bf16 {
    fn widen(dst: &mut [f32], src: &[Self]) {
        widen_bf16(dst, src)
    }
    #[inline(always)]
    fn widen_map(dst: &mut [f32], src: &[Self], f: impl Fn(f32) -> f32) {
        super::num::vectorised(|| {
            for (d, &h) in dst.iter_mut().zip(src) {
                *d = f(bf16_to_f32(h));
            }
        })
    }
    fn round_scaled(dst: &mut [Self], src: &[f32], x: f32) {
        scaled_to_bf16(dst, src, x)
    }
}

impl Half for f16 {
    fn widen(dst: &mut [f32], src: &[Self]) {
        widen_f16(dst, src)
    }
    #[inline(always)]
    fn widen_map(dst: &mut [f32], src: &[Self], f: impl Fn(f32) -> f32) {
        #[cfg(target_arch = "x86_64")]
        if super::matmul::simd_level() == 2 {
            /// 16 values at a time: `vcvtph2ps`, then `f` on the register's lanes.
            ///
            /// # Safety
            /// The CPU has AVX-512F (and so F16C).
            #[target_feature(enable = "avx512f,avx,f16c")]
            unsafe fn wide(dst: &mut [f32], src: &[f16], f: impl Fn(f32) -> f32) -> usize {
                use std::arch::x86_64::*;
                for (d, s) in dst.chunks_exact_mut(16).zip(src.chunks_exact(16)) {
                    let mut v = [0f32; 16];
                    // SAFETY: `s` holds 16 f16 (32 bytes), `v` 16 f32.
                    unsafe {
                        let h = _mm256_loadu_si256(s.as_ptr().cast());
                        _mm512_storeu_ps(v.as_mut_ptr(), _mm512_cvtph_ps(h));
                    }
                    for (d, &x) in d.iter_mut().zip(&v) {
                        *d = f(x);
                    }
                }
                dst.len().min(src.len()) / 16 * 16
            }
            // SAFETY: simd_level 2 means the CPU has AVX-512F.
            let done = unsafe { wide(dst, src, &f) };
            widen_f16(&mut dst[done..], &src[done..]);
            dst[done..].iter_mut().for_each(|d| *d = f(*d));
            return;
        }
        widen_f16(dst, src);
        super::num::vectorised(|| dst.iter_mut().for_each(|d| *d = f(*d)))
    }
    fn round_scaled(dst: &mut [Self], src: &[f32], x: f32) {
        scaled_to_f16(dst, src, x)
    }
}

/// Values a block of a 16-bit elementwise op widens at a time (two f32 buffers of 1 KiB on
/// the stack, in L1).
const BLOCK: usize = 256;

/// `out[i] = f(x[i], y[i])` for bf16 or f16 x and y of `out`'s shape, contiguous, or y one
/// value (`x + b` of a scalar tensor): blocks widened to f32, `f` there, each result
/// rounded once, so bit for bit what `Num`'s bf16/f16 arithmetic gives one value at a time
/// (`Num::max` of a signalling NaN aside: it comes out quiet). None, computing nothing, for
/// other layouts (broadcasts). One value at a time, bf16 `x + y` of 2^22 values ran at 0.31x
/// PyTorch's speed, f16 at 0.05x (Zen 4).
pub(crate) fn binary<H: Half>(
    x: &[H],
    lx: &Layout,
    y: &[H],
    ly: &Layout,
    out: &Shape,
    f: impl Fn(f32, f32) -> f32 + Sync + Send,
) -> Option<Vec<H>> {
    let n = out.elem_count();
    let same = |l: &Layout| l.shape == *out && l.is_contiguous();
    if n == 0 || !same(lx) {
        return None;
    }
    let x = &x[lx.offset..lx.offset + n];
    let y: Result<&[H], f32> = if same(ly) {
        Ok(&y[ly.offset..ly.offset + n])
    } else if ly.shape.elem_count() == 1 {
        let mut v = [0f32];
        H::widen(&mut v, &y[ly.offset..ly.offset + 1]);
        Err(v[0])
    } else {
        return None;
    };
    let mut res = alloc::output::<H>(n);
    super::storage::for_chunks(&mut res, |start, o| {
        let (mut bx, mut by) = ([0f32; BLOCK], [0f32; BLOCK]);
        for (k, o) in o.chunks_mut(BLOCK).enumerate() {
            let at = start + k * BLOCK;
            let (bx, by) = (&mut bx[..o.len()], &mut by[..o.len()]);
            H::widen(bx, &x[at..at + o.len()]);
            match y {
                Ok(y) => H::widen(by, &y[at..at + o.len()]),
                Err(v) => by.fill(v),
            }
            super::num::vectorised(|| {
                for (p, &q) in bx.iter_mut().zip(by.iter()) {
                    *p = f(*p, q);
                }
            });
            H::round(o, bx);
        }
    });
    Some(res)
}

/// `f(out, x)` on blocks of a contiguous bf16 or f16 x, widened to f32 (`out` the same
/// length), the results rounded once, as `binary`; None for a strided view. A block at a
/// time, so that `f` can be a vector loop (`num::exp_f32_slice`).
pub(crate) fn unary<H: Half>(
    x: &[H],
    l: &Layout,
    f: impl Fn(&mut [f32], &[f32]) + Sync + Send,
) -> Option<Vec<H>> {
    blocks(x, l, |o, xs, bx, by| {
        H::widen(bx, xs);
        f(by, bx);
        H::round(o, by);
    })
}

/// `op` of each element of a contiguous bf16 or f16 x and the f32 `c`, in f32 and rounded
/// once (`BackendStorage::half_scalar`); None for a strided view. Two passes over each block:
/// a product rounds as it is made (`Half::round_scaled`), the other ops are applied as the
/// block is widened (`Half::widen_map`). With three (widen, op, round) bf16 `x * 2` of 10^7
/// values took 1.28 ms against 0.96 (Zen 4).
pub(crate) fn scalar<H: Half>(x: &[H], l: &Layout, op: BinaryOp, c: f32) -> Option<Vec<H>> {
    fn with<H: Half>(x: &[H], l: &Layout, f: impl Fn(f32) -> f32 + Copy + Sync) -> Option<Vec<H>> {
        blocks(x, l, |o, xs, bx, _| {
            H::widen_map(bx, xs, f);
            H::round(o, bx);
        })
    }
    match op {
        BinaryOp::Add => with(x, l, move |x| x + c),
        BinaryOp::Sub => with(x, l, move |x| x - c),
        BinaryOp::Mul => blocks(x, l, |o, xs, bx, _| {
            H::widen(bx, xs);
            H::round_scaled(o, bx, c);
        }),
        BinaryOp::Div => with(x, l, move |x| x / c),
        BinaryOp::Maximum => with(x, l, move |x| Num::max(x, c)),
    }
}

/// `body(out, x, buffer, buffer)` on blocks of BLOCK values of a contiguous x and of the
/// result (two f32 buffers of the block's length, in L1), on every thread; None for a
/// strided view.
fn blocks<H: Half>(
    x: &[H],
    l: &Layout,
    body: impl Fn(&mut [H], &[H], &mut [f32], &mut [f32]) + Sync,
) -> Option<Vec<H>> {
    if !l.is_contiguous() {
        return None;
    }
    let n = l.shape.elem_count();
    let x = &x[l.offset..l.offset + n];
    let mut res = alloc::output::<H>(n);
    super::storage::for_chunks(&mut res, |start, o| {
        let (mut bx, mut by) = ([0f32; BLOCK], [0f32; BLOCK]);
        for (k, o) in o.chunks_mut(BLOCK).enumerate() {
            let at = start + k * BLOCK;
            let len = o.len();
            body(o, &x[at..at + len], &mut bx[..len], &mut by[..len]);
        }
    });
    Some(res)
}

/// A way of rounding products to bf16 or f16 (`scaled_to_bf16`, `scaled_to_f16`), and its
/// name (for the tests).
type Rounder<H> = (&'static str, unsafe fn(&mut [H], &[f32], f32));

/// The rounders this CPU can run, the fastest first: `vcvtne2ps2bf16` with AVX512_BF16,
/// `round_bf16` compiled for AVX-512, then for any CPU. (`half`'s slice conversion ran one
/// value at a time, 5% of a bf16 N=1024 product.)
fn bf16_rounders() -> &'static [Rounder<bf16>] {
    static LIST: std::sync::OnceLock<Vec<Rounder<bf16>>> = std::sync::OnceLock::new();
    LIST.get_or_init(|| {
        let mut list: Vec<Rounder<bf16>> = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            use std::is_x86_feature_detected as has;
            if has!("avx512f") && has!("avx512bf16") && has!("avx512dq") && has!("avx512bw") {
                list.push(("vcvtne2ps2bf16", round_bf16_vcvt));
            }
            if has!("avx512f") && has!("avx512bw") {
                list.push(("avx512", round_bf16_avx512));
            }
        }
        list.push(("portable", |d, s, x| round_bf16(d, s, x)));
        list
    })
}

/// The rounding written out on the bits, in a form the compiler vectorises (16 at a time
/// with AVX-512).
#[inline(always)]
fn round_bf16(dst: &mut [bf16], src: &[f32], x: f32) {
    for (d, &y) in dst.iter_mut().zip(src) {
        let b = (x * y).to_bits();
        let rounded = (b.wrapping_add(0x7FFF + ((b >> 16) & 1))) >> 16;
        let nan = (b >> 16) | 0x40;
        let r = if b & 0x7FFF_FFFF > 0x7F80_0000 {
            nan
        } else {
            rounded
        };
        *d = bf16::from_bits(r as u16);
    }
}

/// # Safety
/// The CPU has AVX-512F and BW.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn round_bf16_avx512(dst: &mut [bf16], src: &[f32], x: f32) {
    round_bf16(dst, src, x)
}

/// AVX512_BF16's `vcvtne2ps2bf16` rounds 32 values in one instruction, as `round_bf16`
/// does except that it reads subnormal inputs as zero (0x8071 came out 0): a run of 32
/// products with one (`vfpclassps`, class 0x20) goes through `round_bf16`. Rounding 4096
/// values (in L1) took 130 ns against `round_bf16_avx512`'s 350 (Zen 4), where a bf16 4096
/// x 1 by 1 x 1024 product spent half its time.
///
/// # Safety
/// The CPU has AVX512_BF16, AVX-512F, BW and DQ.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512bf16")]
unsafe fn round_bf16_vcvt(dst: &mut [bf16], src: &[f32], x: f32) {
    use std::arch::x86_64::*;
    let n = dst.len().min(src.len());
    let (d32, s32) = (dst[..n].chunks_exact_mut(32), src[..n].chunks_exact(32));
    let done = s32.len() * 32;
    let xs = _mm512_set1_ps(x);
    for (d, s) in d32.zip(s32) {
        // SAFETY: `s` holds 32 f32 and `d` 32 bf16 (64 bytes): unaligned loads and a store.
        unsafe {
            let lo = _mm512_mul_ps(xs, _mm512_loadu_ps(s.as_ptr()));
            let hi = _mm512_mul_ps(xs, _mm512_loadu_ps(s.as_ptr().add(16)));
            if _mm512_fpclass_ps_mask::<0x20>(lo) | _mm512_fpclass_ps_mask::<0x20>(hi) != 0 {
                round_bf16(d, s, x);
                continue;
            }
            let r: __m512i = std::mem::transmute(_mm512_cvtne2ps_pbh(hi, lo));
            _mm512_storeu_si512(d.as_mut_ptr().cast(), r);
        }
    }
    round_bf16(&mut dst[done..n], &src[done..n], x);
}

#[cfg(test)]
mod tests {
    use half::{bf16, f16};

    #[test]
    fn bf16_rounding_matches_half() {
        // Every 251st bit pattern (all exponents, signs and NaN payloads), the ties and the
        // specials, against `half`'s scalar conversion, in slices of odd lengths, through each
        // rounder the CPU can run (runs of 32 with and without subnormal values), as they are
        // (scaled by 1) and scaled (2^-100 makes small normal values
        // subnormal, the class `vcvtne2ps2bf16` must not see).
        let mut src: Vec<f32> = (0..u32::MAX / 251)
            .map(|i| f32::from_bits(i * 251))
            .collect();
        src.extend([
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            f32::MAX,
            f32::MIN_POSITIVE,
            f32::from_bits(0x3F80_8000), // 1 + 2^-8: a tie, to even (down)
            f32::from_bits(0x3F81_8000), // a tie, to even (up)
            f32::from_bits(0x7F7F_FFFF), // rounds to infinity
            f32::from_bits(0x0000_8001), // a denormal
        ]);
        let mut got = vec![bf16::ZERO; src.len()];
        super::scaled_to_bf16(&mut got, &src, 1.0);
        for (g, &y) in got.iter().zip(&src) {
            let (g, w) = (g.to_bits(), bf16::from_f32(y).to_bits());
            assert_eq!(g, w, "scaled_to_bf16: {y:e} ({:#x})", y.to_bits());
        }
        for &(name, f) in super::bf16_rounders() {
            for x in [1.0, -3.0, 2f32.powi(-100)] {
                for chunk in src.chunks(1001) {
                    let mut got = vec![bf16::ZERO; chunk.len()];
                    // SAFETY: the CPU has what each listed rounder needs (`bf16_rounders`).
                    unsafe { f(&mut got, chunk, x) };
                    for (g, &y) in got.iter().zip(chunk) {
                        let want = bf16::from_f32(if x == 1.0 { y } else { x * y });
                        let (g, w) = (g.to_bits(), want.to_bits());
                        assert_eq!(g, w, "{name}: {x} * {y:e} ({:#x})", y.to_bits());
                    }
                }
            }
        }
    }

    #[test]
    fn f16_rounding_matches_half() {
        // Every 1009th bit pattern (all exponents, signs and NaN payloads), scaled by 1
        // (rounded as they are) and by values that move them across f16's range, through
        // each rounder the CPU can run, in runs of odd lengths.
        let src: Vec<f32> = (0..u32::MAX / 1009)
            .map(|i| f32::from_bits(i * 1009))
            .collect();
        for &(name, f) in super::f16_rounders() {
            for x in [1.0, -3.0, 2f32.powi(-20), 1e4] {
                for chunk in src.chunks(1001).chain(src.chunks(37).take(50)) {
                    let mut got = vec![f16::ZERO; chunk.len()];
                    // SAFETY: the CPU has what each listed rounder needs (`f16_rounders`).
                    unsafe { f(&mut got, chunk, x) };
                    for (g, &y) in got.iter().zip(chunk) {
                        let want = f16::from_f32(if x == 1.0 { y } else { x * y });
                        let (g, w) = (g.to_bits(), want.to_bits());
                        assert_eq!(g, w, "{name}: {x} * {y:e} ({:#x})", y.to_bits());
                    }
                }
            }
        }
        let mut got = vec![f16::ZERO; src.len()];
        super::scaled_to_f16(&mut got, &src, 1.0);
        for (g, &y) in got.iter().zip(&src) {
            let (g, w) = (g.to_bits(), f16::from_f32(y).to_bits());
            assert_eq!(g, w, "scaled_to_f16: {y:e} ({:#x})", y.to_bits());
        }
    }

    #[test]
    fn widening_matches_half() {
        // Every 16-bit pattern (NaN payloads included), in runs of odd lengths so that each
        // vector width meets a tail.
        let bits: Vec<u16> = (0..=u16::MAX).collect();
        for len in [65536, 1001, 15, 7] {
            for chunk in bits.chunks(len) {
                let h: Vec<f16> = chunk.iter().map(|&b| f16::from_bits(b)).collect();
                let mut got = vec![0f32; chunk.len()];
                super::widen_f16(&mut got, &h);
                for (g, x) in got.iter().zip(&h) {
                    assert_eq!(g.to_bits(), x.to_f32().to_bits(), "f16 {:#x}", x.to_bits());
                }
                let h: Vec<bf16> = chunk.iter().map(|&b| bf16::from_bits(b)).collect();
                super::widen_bf16(&mut got, &h);
                for (g, x) in got.iter().zip(&h) {
                    assert_eq!(g.to_bits(), x.to_f32().to_bits(), "bf16 {:#x}", x.to_bits());
                }
            }
        }
    }
}
