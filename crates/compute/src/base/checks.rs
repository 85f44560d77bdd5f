//! The checks on values that answer with an [`Error`]: a shape's size, dimension index and
//! broadcast, a view inside its storage, a dtype's name. Kept apart from the values
//! themselves (`shape.rs`, `dtype.rs`) so that `error.rs`, which names shapes and dtypes in
//! its messages, sits below this file and above those: no two files import each other.

use std::str::FromStr;

use super::shape::{Layout, Shape};
use crate::{DType, Error, Result};

impl Shape {
    /// Checks that a tensor of this shape and `dtype` can be described at all: the product of
    /// the sizes, each counted as at least 1, times the element size fits in `isize::MAX`
    /// bytes (Rust's and every allocator's limit). Every tensor's shape passes this check
    /// (`Tensor::from_storage`, `Tensor::view`), so element counts, contiguous strides, byte
    /// sizes and in-bounds offsets computed from it cannot overflow. Returns the byte size.
    pub(crate) fn check_size(&self, dtype: crate::DType, op: &'static str) -> Result<usize> {
        let extent = self
            .0
            .iter()
            .try_fold(dtype.size_in_bytes(), |acc, &d| acc.checked_mul(d.max(1)));
        match extent {
            Some(b) if b <= isize::MAX as usize => Ok(self.elem_count() * dtype.size_in_bytes()),
            _ => Err(Error::SizeOverflow {
                op,
                shape: self.clone(),
                dtype,
            }),
        }
    }

    /// Resolves a possibly negative dimension index (`-1` is the last) against this shape.
    pub(crate) fn dim_index(&self, dim: isize, op: &'static str) -> Result<usize> {
        let rank = self.rank() as isize;
        let d = if dim < 0 { dim + rank } else { dim };
        if d < 0 || d >= rank {
            return Err(Error::DimOutOfRange {
                op,
                dim,
                rank: self.rank(),
                valid: if rank == 0 {
                    "none (it is a scalar)".into()
                } else {
                    format!("{}..={}", -rank, rank - 1)
                },
            });
        }
        Ok(d as usize)
    }

    /// The shape both operands broadcast to, by NumPy's rules (align on the right; a size
    /// of 1 stretches).
    pub fn broadcast(&self, rhs: &Shape, op: &'static str) -> Result<Shape> {
        let (a, b) = (&self.0, &rhs.0);
        let rank = a.len().max(b.len());
        let mut out = vec![0; rank];
        for i in 0..rank {
            let da = if i < rank - a.len() {
                1
            } else {
                a[i - (rank - a.len())]
            };
            let db = if i < rank - b.len() {
                1
            } else {
                b[i - (rank - b.len())]
            };
            out[i] = match (da, db) {
                (x, y) if x == y => x,
                (1, y) => y,
                (x, 1) => x,
                _ => {
                    return Err(Error::shape(
                        op,
                        self,
                        rhs,
                        format!(
                            "dimension {i} of the broadcast shape has sizes {da} and {db}; \
                             sizes must match or one of them must be 1"
                        ),
                    ))
                }
            };
        }
        Ok(Shape(out))
    }
}

impl Layout {
    /// Checks that every element of this view lies inside a storage of `len` elements: the
    /// largest offset, `offset + sum((size - 1) * stride)`, is below `len` (computed with
    /// checked arithmetic). An empty view reads nothing and passes when its offset is at most `len`. This is the
    /// invariant that every kernel's `unsafe` pointer arithmetic relies on; `Tensor::view`
    /// and `Tensor::from_storage` establish it for every tensor.
    pub fn check_in_bounds(&self, len: usize) -> Result<()> {
        if self.shape.0.len() != self.strides.len() {
            return Err(Error::System(format!(
                "internal error: a layout of shape {} has {} strides",
                self.shape,
                self.strides.len()
            )));
        }
        if self.shape.0.contains(&0) {
            // Reads nothing; a slice at the offset is still in range.
            if self.offset <= len {
                return Ok(());
            }
            return Err(Error::System(format!(
                "internal error: an empty view at offset {} of a storage of {len} elements",
                self.offset
            )));
        }
        let last = self
            .shape
            .0
            .iter()
            .zip(&self.strides)
            .try_fold(self.offset, |acc, (&d, &s)| {
                acc.checked_add((d - 1).checked_mul(s)?)
            });
        match last {
            Some(l) if l < len => Ok(()),
            _ => Err(Error::System(format!(
                "internal error: a view of shape {} (strides {:?}, offset {}) reaches past its \
                 storage of {len} elements; please report this",
                self.shape, self.strides, self.offset
            ))),
        }
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
