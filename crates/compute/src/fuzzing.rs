//! Entry points for the fuzz targets in `fuzz/` (cargo feature `fuzzing`). Not a stable API:
//! hidden from the docs and free to change with the code it exposes.
//!
//! - [`hlo`] (with `xla`): the StableHLO text of each op, built with the backend's own
//!   `hlo::Program` from the layouts the `Tensor` API makes (contiguous, then transposed).
//!   Each op's program comes from the same `Program` methods `XlaStorage` calls, and a
//!   matmul's operands from the same `MatmulSpec::plan` as `Tensor::matmul`; the other ops'
//!   tensor-layer checks (broadcasting, empty max, integer mean) are restated here.
#![doc(hidden)]
#![allow(missing_docs)]

#[doc(hidden)]
#[cfg(all(feature = "xla", target_os = "linux"))]
pub mod hlo {
    use crate::backend::ops::{BinaryOp, MatmulSpec, ReduceOp, UnaryOp};
    use crate::backend::xla::hlo::{self, Program, Val};
    use crate::base::shape::Layout;
    use crate::{DType, Shape};

    /// A tensor view as the public API makes it: a contiguous tensor of `dims` (its buffer
    /// holds `extra` more elements than it needs), then `transpose(a, b)` for each swap
    /// (indices taken modulo the rank). Ops see the transposed shape, not `dims`.
    #[derive(Debug, Clone)]
    pub struct View {
        pub dims: Vec<usize>,
        pub swaps: Vec<(usize, usize)>,
        pub offset: usize,
        pub extra: usize,
    }

    impl View {
        fn layout(&self) -> Layout {
            let mut l = Layout::contiguous(Shape::from(self.dims.clone()));
            let r = self.dims.len();
            if r > 0 {
                for &(a, b) in &self.swaps {
                    l = l.transpose(a % r, b % r);
                }
            }
            l.offset = self.offset;
            l
        }

        /// Elements of the dense 1-D buffer the view lies in.
        pub fn buffer_len(&self) -> usize {
            let l = self.layout();
            if l.shape.dims().contains(&0) {
                return l.offset + self.extra;
            }
            let last: usize = l
                .shape
                .dims()
                .iter()
                .zip(&l.strides)
                .map(|(d, s)| (d - 1) * s)
                .sum();
            l.offset + last + 1 + self.extra
        }
    }

    #[derive(Debug, Clone, Copy)]
    pub enum Op {
        Cast(DType),
        /// add, subtract, multiply, divide, maximum
        Binary(u8),
        /// negate, exponential, relu
        Unary(u8),
        /// sum, mean, max over one dim (None = all)
        Reduce(u8, Option<usize>),
        Matmul,
    }

    /// The operand in `p`; a view the program cannot express becomes what the storage
    /// makes of it (a dense copy through the host), as `XlaStorage::expressible` does.
    fn operand(p: &mut Program, v: &View, dtype: DType) -> Val {
        operand_at(p, &v.layout(), v.buffer_len(), dtype)
    }

    /// The view `l` of a buffer of `len` elements in `p`, or its dense copy.
    fn operand_at(p: &mut Program, l: &Layout, len: usize, dtype: DType) -> Val {
        let mut probe = Program::new();
        let x = probe.arg(len, dtype);
        if probe.view(&x, l).is_some() {
            let x = p.arg(len, dtype);
            p.view(&x, l).expect("expressible")
        } else {
            let dense = Layout::contiguous(l.shape.clone());
            let x = p.arg(l.shape.elem_count(), dtype);
            p.view(&x, &dense)
                .expect("a contiguous view is expressible")
        }
    }

    /// The program `XlaStorage` would compile for `op` on `a` (and `b`), or None when the
    /// public API rejects the operands first (shapes that do not broadcast or multiply) or
    /// runs no program (an empty product, k = 0). The op's program is built by the same
    /// functions `XlaStorage` calls (`Program::binary_op`, `reduce_op`...).
    pub fn program(op: Op, a: &View, b: &View, dtype: DType) -> Option<(String, usize)> {
        let mut p = Program::new();
        let out = match op {
            Op::Cast(to) => {
                let v = operand(&mut p, a, dtype);
                p.convert(&v, to)
            }
            Op::Binary(k) => {
                let out = a.layout().shape.broadcast(&b.layout().shape, "fuzz").ok()?;
                let x = operand(&mut p, a, dtype);
                let y = operand(&mut p, b, dtype);
                let ops = [
                    BinaryOp::Add,
                    BinaryOp::Sub,
                    BinaryOp::Mul,
                    BinaryOp::Div,
                    BinaryOp::Maximum,
                ];
                p.binary_op(ops[k as usize % 5], &x, &y, out.dims())
            }
            Op::Unary(k) => {
                let x = operand(&mut p, a, dtype);
                let ops = [UnaryOp::Neg, UnaryOp::Exp, UnaryOp::Relu];
                p.unary_op(ops[k as usize % 3], &x)
            }
            Op::Reduce(k, dim) => {
                let shape = a.layout().shape;
                if dim.is_some_and(|d| d >= shape.rank()) {
                    return None;
                }
                let op = [ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max][k as usize % 3];
                let count = dim.map_or(shape.elem_count(), |d| shape.dims()[d]);
                if (op == ReduceOp::Max && count == 0)
                    || (op == ReduceOp::Mean && !dtype.is_float())
                {
                    return None; // error values before any program
                }
                let x = operand(&mut p, a, dtype);
                p.reduce_op(op, &x, dim)
            }
            Op::Matmul => {
                // Tensor::matmul's plan (None: an error value or zeros, no program), then
                // XlaStorage::matmul.
                let Ok((_, Some(spec))) = MatmulSpec::plan(&a.layout(), &b.layout()) else {
                    return None;
                };
                let (ma, mb) = hlo::matmul_layouts(&spec);
                let va = operand_at(&mut p, &ma, a.buffer_len(), dtype);
                let vb = operand_at(&mut p, &mb, b.buffer_len(), dtype);
                p.matmul_op(&spec, &va, &vb)
            }
        };
        Some(p.finish(&out))
    }
}
