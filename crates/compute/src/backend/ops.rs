//! The operations every backend implements, as values: elementwise ops, reductions and the
//! batched matmul (`MatmulSpec`), with the rules that decide their output dtypes. The
//! contract (`contract.rs`) passes these to each backend's storage.

use crate::base::shape::Layout;
use crate::{DType, Error, Result, Shape};

/// Elementwise operations of two operands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Maximum,
}

impl BinaryOp {
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Maximum => "maximum",
        }
    }
}

/// Elementwise operations of one operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnaryOp {
    Neg,
    Relu,
    Exp,
}

/// One operand of a batched matmul, in elements: (batch stride, row stride, column stride,
/// offset). A batch stride of 0 reuses one matrix for every batch.
pub(crate) type MatView = (usize, usize, usize, usize);

/// A batched matmul as every backend receives it: `bsz` products of (m x k) by (k x n), with
/// each operand's view of its buffer. The result is dense, `bsz` x m x n.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MatmulSpec {
    pub bsz: usize,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub a: MatView,
    pub b: MatView,
}

impl MatmulSpec {
    /// The product of views `a` and `b` as `Tensor::matmul` defines it: 2-d or 3-d operands,
    /// matching inner sizes, batches equal or one of them 1 (a batch of 1 is used for every
    /// batch of the other side, a batch of 0 included). Returns the output shape and the spec,
    /// or None for the spec when there is nothing to multiply (an empty output, or k = 0).
    pub fn plan(a: &Layout, b: &Layout) -> Result<(Shape, Option<MatmulSpec>)> {
        const OP: &str = "matmul";
        let (ra, rb) = (a.shape.rank(), b.shape.rank());
        if !(2..=3).contains(&ra) || !(2..=3).contains(&rb) {
            return Err(Error::shape(
                OP,
                &a.shape,
                &b.shape,
                "both operands must be 2-d matrices or 3-d batches of matrices",
            ));
        }
        let (da, db) = (a.shape.dims(), b.shape.dims());
        let (m, k) = (da[ra - 2], da[ra - 1]);
        let (k2, n) = (db[rb - 2], db[rb - 1]);
        if k != k2 {
            return Err(Error::shape(
                OP,
                &a.shape,
                &b.shape,
                format!("the left operand has {k} columns but the right one has {k2} rows"),
            ));
        }
        let batch = |r: usize, d: &[usize]| if r == 3 { d[0] } else { 1 };
        let (ba, bb) = (batch(ra, da), batch(rb, db));
        if ba != bb && ba != 1 && bb != 1 {
            return Err(Error::shape(
                OP,
                &a.shape,
                &b.shape,
                format!("batch sizes {ba} and {bb} differ (one of them may be 1)"),
            ));
        }
        let bsz = if ba == 1 { bb } else { ba };
        let out = if ra == 3 || rb == 3 {
            Shape::from((bsz, m, n))
        } else {
            Shape::from((m, n))
        };
        if out.elem_count() == 0 || k == 0 {
            return Ok((out, None));
        }
        let view = |l: &Layout, r: usize, bs: usize| {
            let s = &l.strides;
            let batch_stride = if r == 3 && bs > 1 { s[0] } else { 0 };
            (batch_stride, s[r - 2], s[r - 1], l.offset)
        };
        let spec = MatmulSpec {
            bsz,
            m,
            n,
            k,
            a: view(a, ra, ba),
            b: view(b, rb, bb),
        };
        Ok((out, Some(spec)))
    }

    /// Checks that every element each operand's view reads lies inside a storage of
    /// `a_len` / `b_len` elements, with checked arithmetic; the kernels' pointer arithmetic
    /// relies on it. `Tensor::matmul` builds specs from in-bounds layouts (so this holds),
    /// and never passes an empty product or k = 0.
    pub fn check_in_bounds(&self, a_len: usize, b_len: usize) -> Result<()> {
        let last = |v: MatView, rows: usize, cols: usize| -> Option<usize> {
            let (bs, rs, cs, off) = v;
            off.checked_add(self.bsz.checked_sub(1)?.checked_mul(bs)?)?
                .checked_add(rows.checked_sub(1)?.checked_mul(rs)?)?
                .checked_add(cols.checked_sub(1)?.checked_mul(cs)?)
        };
        let ok = |v, rows, cols, len| last(v, rows, cols).is_some_and(|l| l < len);
        if ok(self.a, self.m, self.k, a_len) && ok(self.b, self.k, self.n, b_len) {
            Ok(())
        } else {
            Err(Error::internal(format!(
                "matmul operands {self:?} reach past their storage of {a_len} and {b_len} elements"
            )))
        }
    }
}

/// Reductions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReduceOp {
    Sum,
    Mean,
    Max,
}

impl ReduceOp {
    /// The dtype of the result for an input of `dtype`, the one place this rule lives: sums of
    /// integers are i64 (as PyTorch's), everything else keeps its dtype. (`Tensor` refuses the
    /// mean of integers before any backend sees it.)
    pub fn out_dtype(self, dtype: DType) -> DType {
        match self {
            ReduceOp::Sum if !dtype.is_float() => DType::I64,
            _ => dtype,
        }
    }
}

impl BinaryOp {
    /// The dtype integer operands are computed in, where it is not their own: true division
    /// of integers is done in f32 (as PyTorch's `/`). `Tensor` converts the operands first.
    pub fn compute_dtype(self, dtype: DType) -> DType {
        match self {
            BinaryOp::Div if !dtype.is_float() => DType::F32,
            _ => dtype,
        }
    }
}

/// Copies bytes with several threads when there are many (a single core's memcpy does not
/// reach the memory's bandwidth).
pub(crate) fn par_copy(dst: &mut [u8], src: &[u8]) {
    use rayon::prelude::*;
    const PIECE: usize = 2 << 20;
    if dst.len() <= PIECE || !crate::base::threads::parallel() {
        dst.copy_from_slice(src);
    } else {
        dst.par_chunks_mut(PIECE)
            .zip(src.par_chunks(PIECE))
            .for_each(|(d, s)| d.copy_from_slice(s));
    }
}
