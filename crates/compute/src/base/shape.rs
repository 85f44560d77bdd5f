//! Shapes, strided layouts and broadcasting.

use std::fmt;

use serde::Serialize;

use crate::{Error, Result};

/// The size of each dimension of a tensor. A 0-d tensor (a scalar) has an empty shape.
#[derive(Clone, PartialEq, Eq, Hash, Default, Serialize)]
pub struct Shape(pub(crate) Vec<usize>);

impl Shape {
    /// The sizes, outermost first.
    pub fn dims(&self) -> &[usize] {
        &self.0
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.0.len()
    }

    /// Number of elements (1 for a scalar). Exact for the shape of every tensor (each passed
    /// `Shape::check_size`); for a shape whose count overflows `usize` it saturates at
    /// `usize::MAX` (see [`Shape::checked_elem_count`]).
    pub fn elem_count(&self) -> usize {
        self.checked_elem_count().unwrap_or(usize::MAX)
    }

    /// Number of elements, or None when the product of the sizes overflows `usize`.
    pub fn checked_elem_count(&self) -> Option<usize> {
        self.0.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
    }

    /// Row-major (C order) strides in elements. Exact for every tensor's shape (see
    /// [`Shape::check_size`]); saturates instead of overflowing for shapes too large to exist.
    pub(crate) fn contiguous_strides(&self) -> Vec<usize> {
        let mut strides = vec![0; self.0.len()];
        let mut acc = 1usize;
        for (s, d) in strides.iter_mut().zip(&self.0).rev() {
            *s = acc;
            acc = acc.saturating_mul((*d).max(1));
        }
        strides
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{d}")?;
        }
        write!(f, "]")
    }
}

impl From<Vec<usize>> for Shape {
    fn from(v: Vec<usize>) -> Self {
        Shape(v)
    }
}
impl From<&[usize]> for Shape {
    fn from(v: &[usize]) -> Self {
        Shape(v.to_vec())
    }
}
impl<const N: usize> From<[usize; N]> for Shape {
    fn from(v: [usize; N]) -> Self {
        Shape(v.to_vec())
    }
}
impl From<&Shape> for Shape {
    fn from(v: &Shape) -> Self {
        v.clone()
    }
}
impl From<()> for Shape {
    fn from(_: ()) -> Self {
        Shape(vec![])
    }
}
impl From<usize> for Shape {
    fn from(v: usize) -> Self {
        Shape(vec![v])
    }
}
impl From<(usize,)> for Shape {
    fn from(v: (usize,)) -> Self {
        Shape(vec![v.0])
    }
}
impl From<(usize, usize)> for Shape {
    fn from(v: (usize, usize)) -> Self {
        Shape(vec![v.0, v.1])
    }
}
impl From<(usize, usize, usize)> for Shape {
    fn from(v: (usize, usize, usize)) -> Self {
        Shape(vec![v.0, v.1, v.2])
    }
}
impl From<(usize, usize, usize, usize)> for Shape {
    fn from(v: (usize, usize, usize, usize)) -> Self {
        Shape(vec![v.0, v.1, v.2, v.3])
    }
}

/// Where a tensor's elements sit in its storage: shape, strides (in elements) and offset.
/// Views (`transpose`, `t`) share storage and differ only in layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    pub shape: Shape,
    pub strides: Vec<usize>,
    pub offset: usize,
}

impl Layout {
    pub fn contiguous(shape: Shape) -> Self {
        let strides = shape.contiguous_strides();
        Layout {
            shape,
            strides,
            offset: 0,
        }
    }

    /// Whether the elements are dense and in row-major order from `offset` (every empty
    /// view is: it reads nothing).
    pub fn is_contiguous(&self) -> bool {
        if self.shape.0.contains(&0) {
            return true;
        }
        let mut acc = 1;
        for (&d, &s) in self.shape.0.iter().zip(&self.strides).rev() {
            if d != 1 && s != acc {
                return false;
            }
            acc *= d;
        }
        true
    }

    /// Strides for reading this layout as if it had the (broadcast) shape `to`: stretched
    /// dimensions get stride 0.
    pub fn broadcast_strides(&self, to: &Shape) -> Vec<usize> {
        let extra = to.rank() - self.shape.rank();
        let mut out = vec![0; to.rank()];
        for i in 0..self.shape.rank() {
            if self.shape.0[i] != 1 {
                out[i + extra] = self.strides[i];
            }
        }
        out
    }

    /// A reduction over `dim` (or everything) seen as (outer, reduced, inner) extents of the
    /// dense data: element (o, j, i) is at (o * reduced + j) * inner + i.
    pub fn reduce_split(&self, dim: Option<usize>) -> (usize, usize, usize) {
        let dims = self.shape.dims();
        match dim {
            None => (1, self.shape.elem_count(), 1),
            Some(d) => (
                dims[..d].iter().product(),
                dims[d],
                dims[d + 1..].iter().product(),
            ),
        }
    }

    pub fn transpose(&self, a: usize, b: usize) -> Layout {
        let mut l = self.clone();
        l.shape.0.swap(a, b);
        l.strides.swap(a, b);
        l
    }
}

/// Calls `f(offset)` for the storage offset of every element of a strided view, in row-major
/// order of `shape`. The innermost dimension is handed over whole, as (start, stride, len),
/// so callers can run a tight loop.
pub(crate) fn for_each_run(
    shape: &[usize],
    strides: &[usize],
    offset: usize,
    mut f: impl FnMut(usize, usize, usize),
) {
    if shape.contains(&0) {
        return;
    }
    if shape.is_empty() {
        f(offset, 1, 1);
        return;
    }
    let rank = shape.len();
    let inner = shape[rank - 1];
    let inner_stride = strides[rank - 1];
    let mut idx = vec![0usize; rank - 1];
    let mut pos = offset;
    loop {
        f(pos, inner_stride, inner);
        // Odometer increment over the outer dimensions.
        let mut d = rank - 1;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            pos += strides[d];
            if idx[d] < shape[d] {
                break;
            }
            pos -= strides[d] * shape[d];
            idx[d] = 0;
        }
    }
}

// The checks that answer with an [`Error`]: beside the values they check.
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
            return Err(Error::internal(format!(
                "a layout of shape {} has {} strides",
                self.shape,
                self.strides.len()
            )));
        }
        if self.shape.0.contains(&0) {
            // Reads nothing; a slice at the offset is still in range.
            if self.offset <= len {
                return Ok(());
            }
            return Err(Error::internal(format!(
                "an empty view at offset {} of a storage of {len} elements",
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
            _ => Err(Error::internal(format!(
                "a view of shape {} (strides {:?}, offset {}) reaches past its storage of {len} \
                 elements",
                self.shape, self.strides, self.offset
            ))),
        }
    }
}
