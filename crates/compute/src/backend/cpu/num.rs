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
        }
    };
}
float_num!(f32);
float_num!(f64);

macro_rules! half_num {
    ($t:ty) => {
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
        }
    };
}
half_num!(f16);
half_num!(bf16);

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
