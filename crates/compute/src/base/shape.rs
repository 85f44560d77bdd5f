//! Shapes, strided layouts and broadcasting.

use std::fmt;

use serde::Serialize;

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
    /// [`Shape::check_size`]); for a shape whose count overflows `usize` it saturates at
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
