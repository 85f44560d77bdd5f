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

/// `sum_f64` for f32 and f64 rows, compiled for AVX-512 or AVX2 where the CPU has them: the
/// baseline build summed 2 f64 at a time, 0.09x PyTorch's f32 `x.sum()` of 2^22 values (Zen
/// 4, with a copy of the tensor first).
fn sum_float<T: Copy + Into<f64>>(row: &[T]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f")]
        fn wide<T: Copy + Into<f64>>(row: &[T]) -> f64 {
            sum_f64(row, Into::into)
        }
        #[target_feature(enable = "avx2")]
        fn narrow<T: Copy + Into<f64>>(row: &[T]) -> f64 {
            sum_f64(row, Into::into)
        }
        if std::is_x86_feature_detected!("avx512f") {
            // SAFETY: checked just above.
            return unsafe { wide(row) };
        }
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: checked just above.
            return unsafe { narrow(row) };
        }
    }
    sum_f64(row, Into::into)
}

/// The sum of a bf16 or f16 row: blocks widened to f32 (exact, `float16::widen_*`), each summed
/// by `sum_float`.
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
    ($t:ty) => {
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
                self.exp()
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
        }
    };
}
float_num!(f32);
float_num!(f64);

macro_rules! half_num {
    ($t:ty, $widen:path) => {
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
                <$t>::from_f32(self.to_f32().exp())
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
                sum_half(row, $widen)
            }
        }
    };
}
half_num!(f16, super::float16::widen_f16);
half_num!(bf16, super::float16::widen_bf16);

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
