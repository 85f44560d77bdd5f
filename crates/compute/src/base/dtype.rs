//! Element types.

use std::fmt;
use std::str::FromStr;

use half::{bf16, f16};
use serde::{Deserialize, Serialize};

use super::error::{Error, Result};

/// The element type of a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// IEEE half precision (PyTorch `torch.float16`).
    F16,
    /// bfloat16 (PyTorch `torch.bfloat16`).
    BF16,
    /// Single precision (PyTorch `torch.float32`, the default float type).
    F32,
    /// Double precision (PyTorch `torch.float64`).
    F64,
    /// 32-bit signed integer (PyTorch `torch.int32`).
    I32,
    /// 64-bit signed integer (PyTorch `torch.int64`).
    I64,
}

impl DType {
    /// Every dtype, in a stable order.
    pub const ALL: [DType; 6] = [
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
        DType::I32,
        DType::I64,
    ];

    /// Bytes per element.
    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::F16 | DType::BF16 => 2,
            DType::F32 | DType::I32 => 4,
            DType::F64 | DType::I64 => 8,
        }
    }

    /// True for the floating-point dtypes.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    /// The short name (`f32`), as accepted by `FromStr` and printed by `Display`.
    pub fn as_str(self) -> &'static str {
        match self {
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::I32 => "i32",
            DType::I64 => "i64",
        }
    }

    pub(crate) fn variant_name(self) -> &'static str {
        match self {
            DType::F16 => "F16",
            DType::BF16 => "BF16",
            DType::F32 => "F32",
            DType::F64 => "F64",
            DType::I32 => "I32",
            DType::I64 => "I64",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for DType {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "f16" | "float16" | "half" | "torch.float16" => DType::F16,
            "bf16" | "bfloat16" | "torch.bfloat16" => DType::BF16,
            "f32" | "float32" | "float" | "torch.float32" => DType::F32,
            "f64" | "float64" | "double" | "torch.float64" => DType::F64,
            "i32" | "int32" | "int" | "torch.int32" => DType::I32,
            "i64" | "int64" | "long" | "torch.int64" => DType::I64,
            _ => {
                return Err(Error::invalid(
                    "dtype",
                    format!("unknown dtype '{s}'; expected one of f16, bf16, f32, f64, i32, i64"),
                ))
            }
        })
    }
}

/// A Rust type that can be a tensor element.
pub trait WithDType:
    Copy + Send + Sync + PartialOrd + fmt::Debug + fmt::Display + 'static + sealed::Sealed
{
    /// The matching dtype.
    const DTYPE: DType;
    /// Converts to f64 (exact for every type but i64 beyond 2^53).
    fn to_f64(self) -> f64;
    /// Converts from f64, rounding to nearest for floats, truncating for integers.
    fn from_f64(v: f64) -> Self;
    #[doc(hidden)]
    fn to_storage(data: Vec<Self>) -> CpuStorage;
    #[doc(hidden)]
    fn from_storage(s: &CpuStorage) -> Option<&[Self]>;
    /// The exact value of an integer element (None for floats).
    #[doc(hidden)]
    fn to_i128(self) -> Option<i128> {
        None
    }
    /// An integer element from an i128 that fits (floats: None).
    #[doc(hidden)]
    fn from_i128(_v: i128) -> Option<Self> {
        None
    }
}

/// `x` in f32 rounded to odd: truncated toward zero, with the last bit set when anything was
/// cut off. Rounding that to a format of at most 22 significant bits (f16, bf16) to nearest
/// even gives the same as rounding `x` there directly, so f64 -> f16/bf16 rounds once.
/// (`half`'s own `from_f64` drops the low 29 bits of the f64 significand first, which can
/// turn a value just above a tie into a tie: f32 1 + 2^-8 + 2^-23 became bf16 1.0.)
fn f32_round_to_odd(x: f64) -> f32 {
    let f = x as f32;
    if x.is_nan() || x.is_infinite() || f as f64 == x {
        return f;
    }
    // Inexact: one step toward zero if rounding went away from it, then mark it odd.
    let mut t = if f.is_infinite() {
        f32::MAX.copysign(f)
    } else {
        f
    };
    if (t as f64).abs() > x.abs() {
        t = f32::from_bits(t.to_bits() - 1);
    }
    f32::from_bits(t.to_bits() | 1)
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! with_dtype {
    ($t:ty, $variant:ident, $to:expr, $from:expr) => {
        with_dtype!($t, $variant, $to, $from, {});
    };
    ($t:ty, $variant:ident, $to:expr, $from:expr, int) => {
        with_dtype!($t, $variant, $to, $from, {
            fn to_i128(self) -> Option<i128> {
                Some(i128::from(self))
            }
            fn from_i128(v: i128) -> Option<Self> {
                <$t>::try_from(v).ok()
            }
        });
    };
    ($t:ty, $variant:ident, $to:expr, $from:expr, {$($extra:tt)*}) => {
        impl sealed::Sealed for $t {}
        impl WithDType for $t {
            const DTYPE: DType = DType::$variant;
            fn to_f64(self) -> f64 {
                $to(self)
            }
            fn from_f64(v: f64) -> Self {
                $from(v)
            }
            fn to_storage(data: Vec<Self>) -> CpuStorage {
                CpuStorage::$variant(data)
            }
            fn from_storage(s: &CpuStorage) -> Option<&[Self]> {
                match s {
                    CpuStorage::$variant(v) => Some(v),
                    _ => None,
                }
            }
            $($extra)*
        }
    };
}

with_dtype!(f16, F16, |v: f16| v.to_f64(), |v: f64| f16::from_f32(
    f32_round_to_odd(v)
));
with_dtype!(bf16, BF16, |v: bf16| v.to_f64(), |v: f64| bf16::from_f32(
    f32_round_to_odd(v)
));
with_dtype!(f32, F32, |v: f32| v as f64, |v: f64| v as f32);
with_dtype!(f64, F64, |v: f64| v, |v: f64| v);
with_dtype!(i32, I32, |v: i32| v as f64, |v: f64| v as i32, int);
with_dtype!(i64, I64, |v: i64| v as f64, |v: f64| v as i64, int);

/// Tensor data in host memory, one variant per dtype.
#[derive(Clone, Debug)]
#[doc(hidden)]
pub enum CpuStorage {
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    I32(Vec<i32>),
    I64(Vec<i64>),
}

/// Runs `$body` with `$v` bound to the typed vector, whatever the dtype.
macro_rules! with_vec {
    ($s:expr, $v:ident => $body:expr) => {
        match $s {
            CpuStorage::F16($v) => $body,
            CpuStorage::BF16($v) => $body,
            CpuStorage::F32($v) => $body,
            CpuStorage::F64($v) => $body,
            CpuStorage::I32($v) => $body,
            CpuStorage::I64($v) => $body,
        }
    };
}

/// Runs `$body` (which yields a `Vec` of the same element type) and wraps it back.
macro_rules! map_vec {
    ($s:expr, $v:ident => $body:expr) => {
        match $s {
            CpuStorage::F16($v) => CpuStorage::F16($body),
            CpuStorage::BF16($v) => CpuStorage::BF16($body),
            CpuStorage::F32($v) => CpuStorage::F32($body),
            CpuStorage::F64($v) => CpuStorage::F64($body),
            CpuStorage::I32($v) => CpuStorage::I32($body),
            CpuStorage::I64($v) => CpuStorage::I64($body),
        }
    };
}

/// Runs `$body` with `$t` as the Rust type of `$dtype`.
macro_rules! with_type {
    ($dtype:expr, $t:ident => $body:expr) => {
        match $dtype {
            DType::F16 => {
                type $t = f16;
                $body
            }
            DType::BF16 => {
                type $t = bf16;
                $body
            }
            DType::F32 => {
                type $t = f32;
                $body
            }
            DType::F64 => {
                type $t = f64;
                $body
            }
            DType::I32 => {
                type $t = i32;
                $body
            }
            DType::I64 => {
                type $t = i64;
                $body
            }
        }
    };
}

pub(crate) use {map_vec, with_type, with_vec};

impl CpuStorage {
    pub(crate) fn dtype(&self) -> DType {
        match self {
            CpuStorage::F16(_) => DType::F16,
            CpuStorage::BF16(_) => DType::BF16,
            CpuStorage::F32(_) => DType::F32,
            CpuStorage::F64(_) => DType::F64,
            CpuStorage::I32(_) => DType::I32,
            CpuStorage::I64(_) => DType::I64,
        }
    }

    pub(crate) fn len(&self) -> usize {
        with_vec!(self, v => v.len())
    }

    /// The elements' bytes, for copies to a device.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        // SAFETY: the pointer and length come from a live Vec<T> borrowed for the returned
        // lifetime (size_of_val = len * size_of::<T>() bytes, all initialised); every T here
        // (f16, bf16, f32, f64, i32, i64: the CpuStorage variants) is plain data without
        // padding, so all those bytes are initialised u8s; u8 has alignment 1. For an empty
        // Vec the pointer is dangling but non-null and aligned, which a 0-length slice allows.
        with_vec!(self, v => unsafe {
            std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v.as_slice()))
        })
    }

    /// The elements' bytes, writable, for copies from a device.
    pub(crate) fn as_bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_bytes`, over a Vec borrowed mutably for the returned lifetime (so
        // no other access aliases it); every element type is ZeroBits (alloc.rs), so any bytes
        // a device copy writes leave valid values behind.
        with_vec!(self, v => unsafe {
            std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, std::mem::size_of_val(v.as_slice()))
        })
    }

    /// Element `i` of a contiguous storage as f64 (for display and tests).
    pub(crate) fn get_f64(&self, i: usize) -> f64 {
        with_vec!(self, v => v[i].to_f64())
    }

    /// Every element, borrowed as bytes with their dtype (what a backend uploads).
    pub(crate) fn as_host(&self) -> HostSlice<'_> {
        self.host_range(0..self.len())
    }

    /// Elements `range` (which must lie inside the storage), borrowed as bytes with their
    /// dtype: a contiguous view uploads without a host copy first.
    pub(crate) fn host_range(&self, range: std::ops::Range<usize>) -> HostSlice<'_> {
        let size = self.dtype().size_in_bytes();
        HostSlice {
            dtype: self.dtype(),
            len: range.len(),
            bytes: &self.as_bytes()[range.start * size..range.end * size],
        }
    }
}

/// Host elements of one dtype, borrowed as their bytes: what `Backend::upload` copies to a
/// device, from a whole CPU storage or a contiguous part of it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HostSlice<'a> {
    pub dtype: DType,
    /// Elements (`bytes.len() / dtype.size_in_bytes()`).
    pub len: usize,
    pub bytes: &'a [u8],
}

impl HostSlice<'_> {
    /// A CPU storage holding a copy of these elements.
    pub(crate) fn to_storage(self) -> CpuStorage {
        let mut out = CpuStorage::for_overwrite(self.dtype, self.len);
        out.as_bytes_mut().copy_from_slice(self.bytes);
        out
    }
}
