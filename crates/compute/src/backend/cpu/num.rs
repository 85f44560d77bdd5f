//! The arithmetic each element type supports, so kernels are written once and monomorphised.
//! f16 and bf16 compute in f32 and round once per result. Integers wrap on overflow, as in
//! PyTorch.

use half::{bf16, f16};

use crate::base::dtype::WithDType;

pub(crate) trait Num: WithDType + Default + super::alloc::ZeroBits {
    const ZERO: Self;
    /// The value every maximum starts from (-inf for floats, MIN for integers).
    const LOWEST: Self;
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn div(self, o: Self) -> Self;
    fn neg(self) -> Self;
    fn relu(self) -> Self;
    fn exp(self) -> Self;
    /// NaN-propagating maximum (PyTorch's `max`).
    fn max(self, o: Self) -> Self;
    /// The sum of `row` in f64 (floats; integers are summed in i64 one level up).
    fn sum_row(row: &[Self]) -> f64 {
        sum_f64(row, |v| v.to_f64())
    }
    /// `acc[i] += row[i]` in f64, for i below both lengths (sums over a dimension that is
    /// not the last).
    fn accumulate(acc: &mut [f64], row: &[Self]) {
        for (a, v) in acc.iter_mut().zip(row) {
            *a += v.to_f64();
        }
    }
    /// The largest value of `row` (`Num::max` folded over it: NaN if any is NaN).
    fn max_row(row: &[Self]) -> Self {
        row.iter().fold(Self::LOWEST, |m, &v| m.max(v))
    }
}

/// The largest of `row`, or a NaN if it holds one, as `Num::max` folded over it gives, in a
/// form the compiler vectorises: 16 running maxima and a flag for NaN. The fold's NaN test
/// on every value kept it one value at a time: f32 `x.max()` of 2^22 values ran at 0.04x
/// PyTorch's speed (Zen 4).
#[inline(always)]
fn max_f<T: Copy + PartialOrd>(row: &[T], lowest: T, nan: T) -> T {
    let mut acc = [lowest; 16];
    let mut seen_nan = false;
    let mut chunks = row.chunks_exact(16);
    for c in &mut chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            #[allow(clippy::eq_op)] // v != v: NaN
            let is_nan = v != v;
            seen_nan |= is_nan;
            *a = if v > *a { v } else { *a };
        }
    }
    let mut best = lowest;
    for &v in acc.iter().chain(chunks.remainder()) {
        #[allow(clippy::eq_op)]
        let is_nan = v != v;
        seen_nan |= is_nan;
        best = if v > best { v } else { best };
    }
    if seen_nan {
        nan
    } else {
        best
    }
}

/// `max_f`, `vectorised`.
fn max_float<T: Copy + PartialOrd>(row: &[T], lowest: T, nan: T) -> T {
    vectorised(|| max_f(row, lowest, nan))
}

/// e^x in f32, within 1 unit in the last place of the exact value (0 in 99.6% of f32
/// inputs, checked against f64's exp over every third bit pattern), in a form the compiler
/// vectorises: `x = n ln 2 + r` (ln 2 in two parts, Cody and Waite), e^r by Cephes' `expf`
/// polynomial, times 2^n as two powers of two so that a subnormal result is rounded once.
/// libm's `expf` one value at a time ran at half PyTorch's speed (Zen 4); this, 16 at a
/// time with AVX-512 (`exp_f32_slice`), 6x libm's.
#[inline(always)]
pub(crate) fn exp_f32(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // ln 2 = C1 + C2, C1 with few bits so that n C1 is exact.
    const C1: f32 = 0.693_359_4;
    const C2: f32 = -2.121_944_4e-4;
    // 1.5 x 2^23: adding it rounds to an integer held in the low bits.
    const MAGIC: f32 = 12_582_912.0;
    // e^89 overflows and e^-104 rounds to 0; between, 2^n stays within two normal powers.
    let xc = x.clamp(-104.0, 89.0);
    let t = xc * LOG2E + MAGIC;
    let n = t - MAGIC;
    let r = xc - n * C1 - n * C2;
    let mut p = 1.987_569_1e-4f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5; // Cephes: 5.0000001201e-1, which rounds to 0.5 in f32
    let e = p * r * r + r + 1.0;
    // n from t's bits (an `as` cast saturates, which the compiler does not vectorise).
    let ni = t.to_bits() as i32 - 0x4B40_0000;
    let h = ni >> 1;
    let s1 = f32::from_bits(((h + 127) as u32) << 23);
    let s2 = f32::from_bits(((ni - h + 127) as u32) << 23);
    let y = e * s1 * s2;
    if x.is_nan() {
        x
    } else {
        y
    }
}

/// `out = e^src` by `exp_f32`, `vectorised`.
pub(crate) fn exp_f32_slice(out: &mut [f32], src: &[f32]) {
    vectorised(|| {
        for (o, &x) in out.iter_mut().zip(src) {
            *o = exp_f32(x);
        }
    })
}

/// Runs `body` compiled for AVX-512 (`matmul::simd_level` 2) or AVX2 and FMA (1), as this
/// process may use them (`ACCEL_CPU_KERNEL` caps it, as it caps the matmul kernels): the
/// loops of the sums, maxima, exp and 16-bit conversions, which the baseline build ran 2 or 4
/// values at a time. `body` is inlined into the copy that runs it.
#[inline(always)]
pub(crate) fn vectorised<R>(body: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f")]
        fn wide<R>(body: impl FnOnce() -> R) -> R {
            body()
        }
        #[target_feature(enable = "avx2,fma")]
        fn narrow<R>(body: impl FnOnce() -> R) -> R {
            body()
        }
        match super::matmul::simd_level() {
            // SAFETY: level 2 means the CPU has AVX-512F, level 1 AVX2 and FMA.
            2 => return unsafe { wide(body) },
            // SAFETY: as above.
            1 => return unsafe { narrow(body) },
            _ => {}
        }
    }
    body()
}

/// The sum of `row` in f64 with 32 partial sums, which the compiler keeps in vector registers
/// (4 with AVX-512, 8 with AVX2) where the caller is compiled for them.
#[inline(always)]
fn sum_f64<T: Copy>(row: &[T], wide: impl Fn(T) -> f64) -> f64 {
    let mut acc = [0.0f64; 32];
    let mut chunks = row.chunks_exact(32);
    for c in &mut chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a += wide(v);
        }
    }
    let tail: f64 = chunks.remainder().iter().map(|&v| wide(v)).sum();
    acc.iter().sum::<f64>() + tail
}

/// A value the vector sums widen to f64 in registers: f32, f64 and bf16 (the top half of an
/// f32's bits; a NaN stays a NaN).
trait Summand: Copy {
    fn wide(self) -> f64;
}

impl Summand for f32 {
    #[inline(always)]
    fn wide(self) -> f64 {
        self.into()
    }
}

impl Summand for f64 {
    #[inline(always)]
    fn wide(self) -> f64 {
        self
    }
}

impl Summand for bf16 {
    #[inline(always)]
    fn wide(self) -> f64 {
        f32::from_bits(u32::from(self.to_bits()) << 16).into()
    }
}

/// `sum_f64` for f32, f64 and bf16 rows, `vectorised`:
/// the baseline build summed 2 f64 at a time, 0.09x PyTorch's f32 `x.sum()` of 2^22 values
/// (Zen 4, with a copy of the tensor first); bf16 through blocks widened first, 0.31x.
fn sum_float<T: Summand>(row: &[T]) -> f64 {
    vectorised(|| sum_f64(row, T::wide))
}

/// `Num::accumulate` for f32, f64 and bf16, `vectorised`.
fn accumulate_float<T: Summand>(acc: &mut [f64], row: &[T]) {
    vectorised(|| {
        for (a, &v) in acc.iter_mut().zip(row) {
            *a += v.wide();
        }
    })
}

/// The sum of an f16 row: blocks widened to f32 (exact, `float16::widen_f16`: F16C), each
/// summed by `sum_float`.
fn sum_half<H: Copy>(row: &[H], widen: fn(&mut [f32], &[H])) -> f64 {
    let mut buf = [0f32; 512];
    row.chunks(512)
        .map(|c| {
            let b = &mut buf[..c.len()];
            widen(b, c);
            sum_float(b)
        })
        .sum()
}

macro_rules! float_num {
    ($t:ty, $exp:path) => {
        impl Num for $t {
            const ZERO: Self = 0.0;
            const LOWEST: Self = <$t>::NEG_INFINITY;
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                self + o
            }
            #[inline(always)]
            fn sub(self, o: Self) -> Self {
                self - o
            }
            #[inline(always)]
            fn mul(self, o: Self) -> Self {
                self * o
            }
            #[inline(always)]
            fn div(self, o: Self) -> Self {
                self / o
            }
            #[inline(always)]
            fn neg(self) -> Self {
                -self
            }
            #[inline(always)]
            fn relu(self) -> Self {
                // NaN stays NaN, as in PyTorch.
                if self < 0.0 {
                    0.0
                } else {
                    self
                }
            }
            #[inline(always)]
            fn exp(self) -> Self {
                $exp(self)
            }
            #[inline(always)]
            fn max(self, o: Self) -> Self {
                if self.is_nan() || self > o {
                    self
                } else {
                    o
                }
            }
            fn sum_row(row: &[Self]) -> f64 {
                sum_float(row)
            }
            fn max_row(row: &[Self]) -> Self {
                max_float(row, <$t>::NEG_INFINITY, <$t>::NAN)
            }
            fn accumulate(acc: &mut [f64], row: &[Self]) {
                accumulate_float(acc, row)
            }
        }
    };
}
float_num!(f32, exp_f32);
float_num!(f64, f64::exp);

macro_rules! half_num {
    ($t:ty, $sum:expr) => {
        impl Num for $t {
            const ZERO: Self = <$t>::ZERO;
            const LOWEST: Self = <$t>::NEG_INFINITY;
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                <$t>::from_f32(self.to_f32() + o.to_f32())
            }
            #[inline(always)]
            fn sub(self, o: Self) -> Self {
                <$t>::from_f32(self.to_f32() - o.to_f32())
            }
            #[inline(always)]
            fn mul(self, o: Self) -> Self {
                <$t>::from_f32(self.to_f32() * o.to_f32())
            }
            #[inline(always)]
            fn div(self, o: Self) -> Self {
                <$t>::from_f32(self.to_f32() / o.to_f32())
            }
            #[inline(always)]
            fn neg(self) -> Self {
                -self
            }
            #[inline(always)]
            fn relu(self) -> Self {
                <$t>::from_f32(self.to_f32().relu())
            }
            #[inline(always)]
            fn exp(self) -> Self {
                <$t>::from_f32(exp_f32(self.to_f32()))
            }
            #[inline(always)]
            fn max(self, o: Self) -> Self {
                if self.is_nan() || self > o {
                    self
                } else {
                    o
                }
            }
            fn sum_row(row: &[Self]) -> f64 {
                $sum(row)
            }
        }
    };
}
half_num!(f16, |row| sum_half(row, super::float16::widen_f16));
half_num!(bf16, sum_float);

macro_rules! int_num {
    ($t:ty) => {
        impl Num for $t {
            const ZERO: Self = 0;
            const LOWEST: Self = <$t>::MIN;
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            #[inline(always)]
            fn sub(self, o: Self) -> Self {
                self.wrapping_sub(o)
            }
            #[inline(always)]
            fn mul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            /// Integer tensors are divided in floating point one level up (PyTorch's true
            /// division); this is the integer quotient, defined as 0 for a zero divisor so
            /// no input can make it panic.
            #[inline(always)]
            fn div(self, o: Self) -> Self {
                self.checked_div(o).unwrap_or(0)
            }
            #[inline(always)]
            fn neg(self) -> Self {
                self.wrapping_neg()
            }
            #[inline(always)]
            fn relu(self) -> Self {
                Ord::max(self, 0)
            }
            /// Integer tensors are promoted to f32 before `exp` one level up; this rounds the
            /// real result to the nearest integer, saturating.
            #[inline(always)]
            fn exp(self) -> Self {
                (self as f64).exp().round() as $t
            }
            #[inline(always)]
            fn max(self, o: Self) -> Self {
                Ord::max(self, o)
            }
        }
    };
}
int_num!(i32);
int_num!(i64);

#[cfg(test)]
mod tests {
    /// `exp_f32` against f64's exp rounded to f32: within one unit in the last place over
    /// every 127th bit pattern, infinite exactly where the rounded value is (e^88.72283 is
    /// finite, the next f32 up is not), zero exactly where it is, NaN for NaN; and the
    /// vector build (`exp_f32_slice`) gives the same bits as the scalar one.
    #[test]
    fn exp_f32_is_within_one_ulp() {
        let xs: Vec<f32> = (0..u32::MAX / 127)
            .map(|i| f32::from_bits(i * 127))
            .chain([
                0.0,
                -0.0,
                f32::INFINITY,
                f32::NEG_INFINITY,
                f32::NAN,
                f32::from_bits(0x42b1_7217), // 88.72283: the largest finite result
                f32::from_bits(0x42b1_7218),
                -87.33655, // the smallest normal result
                -103.97208,
                -103.27893, // about the smallest subnormal
                1e-30,
            ])
            .collect();
        let mut vec = vec![0f32; xs.len()];
        super::exp_f32_slice(&mut vec, &xs);
        for (&x, &v) in xs.iter().zip(&vec) {
            let got = super::exp_f32(x);
            assert_eq!(
                got.to_bits(),
                v.to_bits(),
                "scalar and vector differ at {x:e}"
            );
            let want = (x as f64).exp() as f32;
            if x.is_nan() {
                assert!(got.is_nan(), "exp(NaN)");
                continue;
            }
            assert_eq!(
                got.is_infinite(),
                want.is_infinite(),
                "exp({x:e}) = {got:e}"
            );
            assert_eq!(
                got == 0.0,
                want == 0.0,
                "exp({x:e}) = {got:e}, want {want:e}"
            );
            let ulps = (got.to_bits() as i64 - want.to_bits() as i64).abs();
            assert!(
                ulps <= 1,
                "exp({x:e}) = {got:e}, want {want:e} ({ulps} ulps)"
            );
        }
    }
}
