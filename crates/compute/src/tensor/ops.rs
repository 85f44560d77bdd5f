//! Tensor ops: elementwise (with broadcasting and scalars), reductions and matmul. Each
//! checks its operands (device, then dtype, then shape), decides the output dtype
//! (`BinaryOp::compute_dtype`, `ReduceOp::out_dtype`) and hands the storage to the backend.

use crate::backend::ops::{BinaryOp, MatmulSpec, ReduceOp, UnaryOp};
use crate::{DType, Error, Result, Shape, Tensor};

impl Tensor {
    // ---- elementwise ---------------------------------------------------------------------

    fn same_device(&self, rhs: &Tensor, op: &'static str) -> Result<()> {
        if self.device() != rhs.device() {
            return Err(Error::DeviceMismatch {
                op,
                lhs: self.device(),
                rhs: rhs.device(),
            });
        }
        Ok(())
    }

    fn binary(&self, rhs: &Tensor, op: BinaryOp) -> Result<Tensor> {
        self.same_device(rhs, op.name())?;
        if self.dtype() != rhs.dtype() {
            return Err(Error::DTypeMismatch {
                op: op.name(),
                lhs: self.dtype(),
                rhs: rhs.dtype(),
            });
        }
        let out = self.shape().broadcast(rhs.shape(), op.name())?;
        let compute = op.compute_dtype(self.dtype());
        if compute != self.dtype() {
            // True division, as PyTorch: integers divide as f32.
            return self.to_dtype(compute)?.binary(&rhs.to_dtype(compute)?, op);
        }
        Tensor::check_alloc(&out, self.dtype(), &self.device())?;
        let s = self
            .buf
            .storage
            .binary(op, &self.layout, &rhs.buf.storage, &rhs.layout, &out)?;
        Tensor::from_storage(s, self.device(), out)
    }

    fn scalar_op(&self, v: f64, op: BinaryOp) -> Result<Tensor> {
        let dtype = self.dtype();
        if matches!(dtype, DType::F16 | DType::BF16) && self.device().supports(DType::F32) {
            // As PyTorch: half tensors compute with the scalar in f32 and round once at the
            // end, so `x * 1e5` of a small f16 x is not x * inf. In one pass where the
            // backend has one (`BackendStorage::half_scalar`).
            Tensor::check_alloc(self.shape(), dtype, &self.device())?;
            if let Some(s) = self.buf.storage.half_scalar(op, &self.layout, v as f32)? {
                return Tensor::from_storage(s, self.device(), self.shape().clone());
            }
            return self.to_dtype(DType::F32)?.scalar_op(v, op)?.to_dtype(dtype);
        }
        let (lo, hi) = match dtype {
            DType::I32 => (f64::from(i32::MIN), f64::from(i32::MAX)),
            // i64's limits as f64: -2^63 is exact, 2^63 is one past the largest.
            DType::I64 => (-(2f64.powi(63)), 2f64.powi(63) - 1024.0),
            _ => (f64::NEG_INFINITY, f64::INFINITY),
        };
        if !dtype.is_float() && !(lo..=hi).contains(&v) {
            return Err(Error::invalid(
                op.name(),
                format!("the scalar {v} does not fit in the tensor's dtype {dtype}; convert first with .to_dtype(DType::F64)"),
            ));
        }
        if !self.dtype().is_float() && v.fract() != 0.0 && op != BinaryOp::Div {
            return Err(Error::invalid(
                op.name(),
                format!(
                    "the scalar {v} is not an integer but the tensor is {}; convert first with .to_dtype(DType::F32)",
                    self.dtype()
                ),
            ));
        }
        let s = Tensor::full(v, (), self.dtype(), &self.device())?;
        self.binary(&s, op)
    }

    /// Elementwise sum with broadcasting (`a + b`).
    pub fn add(&self, rhs: &Tensor) -> Result<Tensor> {
        self.binary(rhs, BinaryOp::Add)
    }
    /// Elementwise difference with broadcasting (`a - b`).
    pub fn sub(&self, rhs: &Tensor) -> Result<Tensor> {
        self.binary(rhs, BinaryOp::Sub)
    }
    /// Elementwise product with broadcasting (`a * b`).
    pub fn mul(&self, rhs: &Tensor) -> Result<Tensor> {
        self.binary(rhs, BinaryOp::Mul)
    }
    /// Elementwise true division with broadcasting (`a / b`); integer tensors give f32.
    pub fn div(&self, rhs: &Tensor) -> Result<Tensor> {
        self.binary(rhs, BinaryOp::Div)
    }
    /// Elementwise maximum with broadcasting (`torch.maximum`), NaN-propagating.
    pub fn maximum(&self, rhs: &Tensor) -> Result<Tensor> {
        self.binary(rhs, BinaryOp::Maximum)
    }
    /// `self + v`.
    pub fn add_scalar(&self, v: f64) -> Result<Tensor> {
        self.scalar_op(v, BinaryOp::Add)
    }
    /// `self - v`.
    pub fn sub_scalar(&self, v: f64) -> Result<Tensor> {
        self.scalar_op(v, BinaryOp::Sub)
    }
    /// `self * v`.
    pub fn mul_scalar(&self, v: f64) -> Result<Tensor> {
        self.scalar_op(v, BinaryOp::Mul)
    }
    /// `self / v` (true division; integer tensors give f32).
    pub fn div_scalar(&self, v: f64) -> Result<Tensor> {
        if !self.dtype().is_float() {
            return self.to_dtype(DType::F32)?.div_scalar(v);
        }
        self.scalar_op(v, BinaryOp::Div)
    }

    fn unary(&self, op: UnaryOp) -> Result<Tensor> {
        Tensor::check_alloc(self.shape(), self.dtype(), &self.device())?;
        let s = self.buf.storage.unary(op, &self.layout)?;
        Tensor::from_storage(s, self.device(), self.shape().clone())
    }

    /// `-self`.
    pub fn neg(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Neg)
    }
    /// `max(self, 0)`.
    pub fn relu(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Relu)
    }
    /// `e^self`; integer tensors give f32, as in PyTorch.
    pub fn exp(&self) -> Result<Tensor> {
        if !self.dtype().is_float() {
            return self.to_dtype(DType::F32)?.exp();
        }
        self.unary(UnaryOp::Exp)
    }

    // ---- reductions ----------------------------------------------------------------------

    fn reduce(&self, op: ReduceOp, dim: Option<isize>, name: &'static str) -> Result<Tensor> {
        if op == ReduceOp::Mean && !self.dtype().is_float() {
            return Err(Error::unsupported(
                name,
                self.dtype(),
                "the mean of integers is not an integer; convert first with .to_dtype(DType::F32)",
            ));
        }
        let dim = dim.map(|d| self.shape().dim_index(d, name)).transpose()?;
        let reduced_len = dim.map_or(self.elem_count(), |d| self.dims()[d]);
        if op == ReduceOp::Max && reduced_len == 0 {
            return Err(Error::invalid(
                name,
                "max of an empty tensor (or empty dimension) has no value",
            ));
        }
        let out = match dim {
            None => Shape::from(()),
            Some(d) => {
                let mut v = self.dims().to_vec();
                v.remove(d);
                Shape::from(v)
            }
        };
        // The output, as 8-byte accumulators (the CPU sums in f64 or i64), must fit: an empty
        // input can still have a huge output ([2^40, 0] summed over dim 1).
        Tensor::check_alloc(&out, DType::F64, &self.device())?;
        let s = self
            .buf
            .storage
            .reduce(op, &self.layout, dim, op.out_dtype(self.dtype()))?;
        Tensor::from_storage(s, self.device(), out)
    }

    /// Sum of all elements, as a 0-d tensor. Integer sums are i64, as in PyTorch.
    pub fn sum_all(&self) -> Result<Tensor> {
        self.reduce(ReduceOp::Sum, None, "sum")
    }
    /// Sum over `dim`, which is removed from the shape.
    pub fn sum(&self, dim: isize) -> Result<Tensor> {
        self.reduce(ReduceOp::Sum, Some(dim), "sum")
    }
    /// Mean of all elements (floats only).
    pub fn mean_all(&self) -> Result<Tensor> {
        self.reduce(ReduceOp::Mean, None, "mean")
    }
    /// Mean over `dim` (floats only).
    pub fn mean(&self, dim: isize) -> Result<Tensor> {
        self.reduce(ReduceOp::Mean, Some(dim), "mean")
    }
    /// Largest element (NaN if any element is NaN).
    pub fn max_all(&self) -> Result<Tensor> {
        self.reduce(ReduceOp::Max, None, "max")
    }
    /// Largest element over `dim`.
    pub fn max(&self, dim: isize) -> Result<Tensor> {
        self.reduce(ReduceOp::Max, Some(dim), "max")
    }

    // ---- matmul --------------------------------------------------------------------------

    /// Matrix product (`a @ b`): 2-D by 2-D, or batched with 3-D operands (a 2-D operand, or a
    /// batch of 1, is used for every batch). Every dtype, integers included.
    pub fn matmul(&self, rhs: &Tensor) -> Result<Tensor> {
        const OP: &str = "matmul";
        self.same_device(rhs, OP)?;
        if self.dtype() != rhs.dtype() {
            return Err(Error::DTypeMismatch {
                op: OP,
                lhs: self.dtype(),
                rhs: rhs.dtype(),
            });
        }
        let (out, spec) = MatmulSpec::plan(&self.layout, &rhs.layout)?;
        Tensor::check_alloc(&out, self.dtype(), &self.device())?;
        let Some(spec) = spec else {
            // Nothing to multiply: an empty result, or sums over k = 0 terms, which are 0 (as
            // in PyTorch). No kernel sees such a product.
            return Tensor::zeros(out, self.dtype(), &self.device());
        };
        let s = self.buf.storage.matmul(&rhs.buf.storage, &spec)?;
        Tensor::from_storage(s, self.device(), out)
    }
}
