//! Entry points for the fuzz targets in `fuzz/` (cargo feature `fuzzing`). Not a stable API:
//! hidden from the docs and free to change with the code it exposes.
//!
//! - [`hlo`] (with `xla`): the StableHLO text of each op, built with the backend's own
//!   `hlo::Program` from the layouts the `Tensor` API makes (contiguous, then transposed).
//!   The op-level sequences mirror `backend/xla/storage.rs`, which interleaves them with
//!   execution; see fuzz/README.md for the refactor that would let both share one function.
#![doc(hidden)]
#![allow(missing_docs)]

#[doc(hidden)]
#[cfg(all(feature = "xla", target_os = "linux"))]
pub mod hlo {
    use crate::backend::xla::hlo::{Program, Val};
    use crate::shape::Layout;
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
        let l = v.layout();
        let mut probe = Program::new();
        let a = probe.arg(v.buffer_len(), dtype);
        if probe.view(&a, &l).is_some() {
            let a = p.arg(v.buffer_len(), dtype);
            p.view(&a, &l).expect("expressible")
        } else {
            let dense = Layout::contiguous(l.shape.clone());
            let a = p.arg(l.shape.elem_count(), dtype);
            p.view(&a, &dense)
                .expect("a contiguous view is expressible")
        }
    }

    /// The program `XlaStorage` would compile for `op` on `a` (and `b`), or None when the
    /// public API rejects the operands first (shapes that do not broadcast or multiply).
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
                let x = p.broadcast_to(&x, out.dims());
                let y = p.broadcast_to(&y, out.dims());
                let name = ["add", "subtract", "multiply", "divide", "maximum"][k as usize % 5];
                p.elementwise(name, &[&x, &y])
            }
            Op::Unary(k) => {
                let x = operand(&mut p, a, dtype);
                match k % 3 {
                    0 => p.elementwise("negate", &[&x]),
                    1 => p.elementwise("exponential", &[&x]),
                    _ => {
                        let z = p.constant(0.0, &x.dims, x.dtype);
                        p.elementwise("maximum", &[&x, &z])
                    }
                }
            }
            Op::Reduce(k, dim) => {
                let shape = a.layout().shape;
                let rank = shape.rank();
                if dim.is_some_and(|d| d >= rank) {
                    return None;
                }
                let x = operand(&mut p, a, dtype);
                let dims: Vec<usize> = match dim {
                    Some(d) => vec![d],
                    None => (0..rank).collect(),
                };
                let count: usize = dims.iter().map(|&d| shape.dims()[d]).product();
                match k % 3 {
                    2 => {
                        if count == 0 {
                            return None; // max of nothing: an error value before any program
                        }
                        let init = match dtype {
                            DType::I32 => i32::MIN as f64,
                            DType::I64 => i64::MIN as f64,
                            _ => f64::NEG_INFINITY,
                        };
                        let m = p.reduce(&x, &dims, "maximum", init);
                        if dtype.is_float() {
                            let nans = p.isnan(&x);
                            let any = p.reduce(&nans, &dims, "maximum", 0.0);
                            p.nan_where(&any, &m)
                        } else {
                            m
                        }
                    }
                    k => {
                        let mean = k == 1;
                        if mean && !dtype.is_float() {
                            return None;
                        }
                        let acc = match dtype {
                            DType::I32 | DType::I64 => DType::I64,
                            DType::F16 | DType::BF16 => DType::F32,
                            d => d,
                        };
                        let xa = p.convert(&x, acc);
                        let s = p.reduce(&xa, &dims, "add", 0.0);
                        let s = if mean {
                            let c = p.constant(count as f64, &s.dims, acc);
                            p.elementwise("divide", &[&s, &c])
                        } else {
                            s
                        };
                        p.convert(&s, if dtype.is_float() { dtype } else { DType::I64 })
                    }
                }
            }
            Op::Matmul => {
                // Tensor::matmul's checks and MatmulSpec, then XlaStorage::matmul.
                let (ra, rb) = (a.dims.len(), b.dims.len());
                if !(2..=3).contains(&ra) || !(2..=3).contains(&rb) {
                    return None;
                }
                let (la, lb) = (a.layout(), b.layout());
                let (da, db) = (la.shape.dims().to_vec(), lb.shape.dims().to_vec());
                let (m, k) = (da[ra - 2], da[ra - 1]);
                let (k2, n) = (db[rb - 2], db[rb - 1]);
                if k != k2 {
                    return None;
                }
                let batch = |r: usize, d: &[usize]| if r == 3 { d[0] } else { 1 };
                let (ba, bb) = (batch(ra, &da), batch(rb, &db));
                if ba != bb && ba != 1 && bb != 1 {
                    return None;
                }
                let bsz = if ba == 1 { bb } else { ba }; // as Tensor::matmul (fixed: was ba.max(bb))
                if bsz * m * n == 0 || k == 0 {
                    return None; // Tensor::matmul makes zeros without a kernel
                }
                let strides = |l: &Layout, r: usize, bs: usize| {
                    let s = &l.strides;
                    let b = if r == 3 && bs > 1 { s[0] } else { 0 };
                    (b, s[r - 2], s[r - 1], l.offset)
                };
                let (sa, sb) = (strides(&la, ra, ba), strides(&lb, rb, bb));
                let layout = |s: (usize, usize, usize, usize), rows: usize, cols: usize| {
                    if s.0 == 0 || bsz == 1 {
                        Layout {
                            shape: Shape::from((rows, cols)),
                            strides: vec![s.1, s.2],
                            offset: s.3,
                        }
                    } else {
                        Layout {
                            shape: Shape::from((bsz, rows, cols)),
                            strides: vec![s.0, s.1, s.2],
                            offset: s.3,
                        }
                    }
                };
                let (ma, mb) = (layout(sa, m, k), layout(sb, k, n));
                let operand_of = |p: &mut Program, l: &Layout, len: usize| {
                    let mut probe = Program::new();
                    let x = probe.arg(len, dtype);
                    if probe.view(&x, l).is_some() {
                        let x = p.arg(len, dtype);
                        p.view(&x, l).expect("expressible")
                    } else {
                        // The storage copies it dense (batch stride 0 stays one matrix).
                        let dense = Layout::contiguous(l.shape.clone());
                        let x = p.arg(l.shape.elem_count(), dtype);
                        p.view(&x, &dense).expect("dense")
                    }
                };
                let mut va = operand_of(&mut p, &ma, a.buffer_len());
                let mut vb = operand_of(&mut p, &mb, b.buffer_len());
                if bsz > 1 {
                    va = p.broadcast_to(&va, &[bsz, m, k]);
                    vb = p.broadcast_to(&vb, &[bsz, k, n]);
                }
                p.dot(&va, &vb)
            }
        };
        Some(p.finish(&out))
    }
}
