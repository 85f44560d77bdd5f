//! Tensor data on the CPU (`CpuStorage`, typed vectors) and every op on it: kernels
//! multi-threaded with rayon and written so the compiler vectorises them; matmul is the packed
//! GEMM in `matmul/`.

use std::ops::Range;

use half::{bf16, f16};
use rayon::prelude::*;

use super::gather::{gather, in_place_or_gathered};
use super::matmul::MatRef;
use super::num::Num;
use super::{alloc, float16, matmul};
use crate::backend::contract::BackendStorage;
use crate::backend::ops::{BinaryOp, MatmulSpec, ReduceOp, UnaryOp};
use crate::base::dtype::CpuStorage;
use crate::base::dtype::{map_vec, with_type, with_vec, WithDType};
use crate::base::shape::Layout;
use crate::{DType, Error, Result, Shape};

/// Elements per parallel chunk of an elementwise kernel: large enough that a chunk costs more
/// than handing it to another thread.
pub(super) const CHUNK: usize = 1 << 16;

impl BackendStorage for CpuStorage {
    fn dtype(&self) -> DType {
        CpuStorage::dtype(self)
    }
    fn len(&self) -> usize {
        CpuStorage::len(self)
    }
    fn to_cpu(&self, l: &Layout) -> Result<CpuStorage> {
        Ok(CpuStorage::copy_strided(self, l))
    }
    fn to_host(&self, l: &Layout, dst: &mut [u8]) -> Result<()> {
        if l.is_contiguous() {
            let size = self.dtype().size_in_bytes();
            let off = l.offset * size;
            crate::backend::ops::par_copy(dst, &self.as_bytes()[off..off + dst.len()]);
        } else {
            dst.copy_from_slice(CpuStorage::copy_strided(self, l).as_bytes());
        }
        Ok(())
    }
    fn copy_strided(&self, l: &Layout) -> Result<CpuStorage> {
        Ok(CpuStorage::copy_strided(self, l))
    }
    fn to_dtype(&self, l: &Layout, dtype: DType) -> Result<CpuStorage> {
        Ok(CpuStorage::to_dtype(self, l, dtype))
    }
    fn binary(
        &self,
        op: BinaryOp,
        ll: &Layout,
        rhs: &CpuStorage,
        rl: &Layout,
        out: &Shape,
    ) -> Result<CpuStorage> {
        CpuStorage::binary(self, op, ll, rhs, rl, out)
    }
    fn unary(&self, op: UnaryOp, l: &Layout) -> Result<CpuStorage> {
        Ok(CpuStorage::unary(self, op, l))
    }
    fn half_scalar(&self, op: BinaryOp, l: &Layout, v: f32) -> Result<Option<CpuStorage>> {
        Ok(match self {
            CpuStorage::F16(x) => float16::scalar(x, l, op, v).map(CpuStorage::F16),
            CpuStorage::BF16(x) => float16::scalar(x, l, op, v).map(CpuStorage::BF16),
            _ => None,
        })
    }
    fn reduce(
        &self,
        op: ReduceOp,
        l: &Layout,
        dim: Option<usize>,
        out_dtype: DType,
    ) -> Result<CpuStorage> {
        Ok(CpuStorage::reduce(self, op, l, dim, out_dtype))
    }
    fn matmul(&self, rhs: &CpuStorage, spec: &MatmulSpec) -> Result<CpuStorage> {
        CpuStorage::matmul(self, rhs, spec)
    }
}

impl CpuStorage {
    /// Gives the buffer back to the allocator's cache.
    pub(crate) fn release(self) {
        with_vec!(self, v => alloc::recycle(v))
    }

    /// `n` elements whose values are unspecified (zeros, or what a freed buffer held), for a
    /// caller that overwrites every byte (a download from a device, bytes from NumPy): no
    /// fill pass before the copy.
    pub(crate) fn for_overwrite(dtype: DType, n: usize) -> CpuStorage {
        with_type!(dtype, T => T::to_storage(alloc::output::<T>(n)))
    }

    /// `n` copies of `value` (converted to the dtype).
    pub(crate) fn full(dtype: DType, n: usize, value: f64) -> CpuStorage {
        with_type!(dtype, T => T::to_storage(filled(n, <T as WithDType>::from_f64(value))))
    }

    /// `start, start + step, ...` below `end` (above it for a negative step).
    pub(crate) fn arange(dtype: DType, start: f64, step: f64, n: usize) -> CpuStorage {
        with_type!(dtype, T => T::to_storage((0..n).map(|i| <T as WithDType>::from_f64(start + step * i as f64)).collect()))
    }

    /// A contiguous copy of the strided view `l`.
    pub(crate) fn copy_strided(&self, l: &Layout) -> CpuStorage {
        map_vec!(self, v => gather(v, l))
    }

    /// A contiguous copy of the view `l`, converted to `dtype`.
    pub(crate) fn to_dtype(&self, l: &Layout, dtype: DType) -> CpuStorage {
        if dtype == self.dtype() {
            return self.copy_strided(l);
        }
        // Integer to integer keeps the low bits (two's complement wrap, as C and PyTorch),
        // and i64 to f32 rounds once: going through f64 would saturate the first and round
        // the second twice.
        match (self, dtype) {
            (CpuStorage::I64(v), DType::I32) => {
                return CpuStorage::I32(gather(v, l).iter().map(|&x| x as i32).collect())
            }
            (CpuStorage::I32(v), DType::I64) => {
                return CpuStorage::I64(gather(v, l).iter().map(|&x| i64::from(x)).collect())
            }
            (CpuStorage::I64(v), DType::F32) => {
                return CpuStorage::F32(gather(v, l).iter().map(|&x| x as f32).collect())
            }
            // f32 to and from the 16-bit floats (`model.to(torch.bfloat16)`, `x.half()`):
            // `float16`'s vector conversions into a buffer from the allocator's cache, by
            // every thread. Through f64 one value at a time into a fresh vector, f32 to bf16
            // of 2^24 values took 36 ms against PyTorch's 16 (Zen 4, two threads).
            (CpuStorage::F32(v), DType::BF16) => {
                return CpuStorage::BF16(convert(v, l, |o, s| float16::scaled_to_bf16(o, s, 1.0)))
            }
            (CpuStorage::F32(v), DType::F16) => {
                return CpuStorage::F16(convert(v, l, |o, s| float16::scaled_to_f16(o, s, 1.0)))
            }
            (CpuStorage::BF16(v), DType::F32) => {
                return CpuStorage::F32(convert(v, l, float16::widen_bf16))
            }
            (CpuStorage::F16(v), DType::F32) => {
                return CpuStorage::F32(convert(v, l, float16::widen_f16))
            }
            // f32 <-> f64 the same way (through `cast_vec` one value at a time, 0.43x
            // PyTorch's `x.to(torch.float64)`).
            (CpuStorage::F32(v), DType::F64) => {
                return CpuStorage::F64(convert(v, l, |o, s| {
                    o.iter_mut().zip(s).for_each(|(o, &x)| *o = f64::from(x))
                }))
            }
            (CpuStorage::F64(v), DType::F32) => {
                return CpuStorage::F32(convert(v, l, |o, s| {
                    o.iter_mut().zip(s).for_each(|(o, &x)| *o = x as f32)
                }))
            }
            _ => {}
        }
        with_vec!(self, v => {
            let src = gather(v, l);
            cast_vec(&src, dtype)
        })
    }

    pub(crate) fn binary(
        &self,
        op: BinaryOp,
        ll: &Layout,
        rhs: &CpuStorage,
        rl: &Layout,
        out: &Shape,
    ) -> Result<CpuStorage> {
        macro_rules! go {
            ($a:expr, $b:expr, $variant:ident) => {
                CpuStorage::$variant(match op {
                    BinaryOp::Add => binary_map($a, ll, $b, rl, out, Num::add),
                    BinaryOp::Sub => binary_map($a, ll, $b, rl, out, Num::sub),
                    BinaryOp::Mul => binary_map($a, ll, $b, rl, out, Num::mul),
                    BinaryOp::Div => binary_map($a, ll, $b, rl, out, Num::div),
                    BinaryOp::Maximum => binary_map($a, ll, $b, rl, out, Num::max),
                })
            };
        }
        // bf16 and f16 in f32 blocks where the layouts allow (`float16::binary`).
        macro_rules! half {
            ($a:expr, $b:expr, $variant:ident) => {{
                let (a, b) = ($a, $b);
                let v = match op {
                    BinaryOp::Add => float16::binary(a, ll, b, rl, out, Num::add),
                    BinaryOp::Sub => float16::binary(a, ll, b, rl, out, Num::sub),
                    BinaryOp::Mul => float16::binary(a, ll, b, rl, out, Num::mul),
                    BinaryOp::Div => float16::binary(a, ll, b, rl, out, Num::div),
                    BinaryOp::Maximum => float16::binary(a, ll, b, rl, out, Num::max),
                };
                match v {
                    Some(v) => CpuStorage::$variant(v),
                    None => go!(a, b, $variant),
                }
            }};
        }
        Ok(match (self, rhs) {
            (CpuStorage::F16(a), CpuStorage::F16(b)) => half!(a, b, F16),
            (CpuStorage::BF16(a), CpuStorage::BF16(b)) => half!(a, b, BF16),
            (CpuStorage::F32(a), CpuStorage::F32(b)) => go!(a, b, F32),
            (CpuStorage::F64(a), CpuStorage::F64(b)) => go!(a, b, F64),
            (CpuStorage::I32(a), CpuStorage::I32(b)) => go!(a, b, I32),
            (CpuStorage::I64(a), CpuStorage::I64(b)) => go!(a, b, I64),
            _ => {
                return Err(Error::DTypeMismatch {
                    op: op.name(),
                    lhs: self.dtype(),
                    rhs: rhs.dtype(),
                })
            }
        })
    }

    pub(crate) fn unary(&self, op: UnaryOp, l: &Layout) -> CpuStorage {
        fn go<T: Num>(v: &[T], l: &Layout, op: UnaryOp) -> Vec<T> {
            match op {
                UnaryOp::Neg => unary_map(v, l, Num::neg),
                UnaryOp::Relu => unary_map(v, l, Num::relu),
                UnaryOp::Exp => unary_map(v, l, Num::exp),
            }
        }
        // bf16 and f16 relu and exp in f32 blocks (`float16::unary`); a negation only flips
        // the sign bit.
        fn half<H: float16::Half>(v: &[H], l: &Layout, op: UnaryOp) -> Vec<H> {
            let v32 = match op {
                UnaryOp::Neg => None,
                UnaryOp::Relu => float16::unary(v, l, |o, s| {
                    o.iter_mut().zip(s).for_each(|(o, &x)| *o = x.relu())
                }),
                UnaryOp::Exp => float16::unary(v, l, super::num::exp_f32_slice),
            };
            v32.unwrap_or_else(|| go(v, l, op))
        }
        match self {
            CpuStorage::F32(v) if op == UnaryOp::Exp => {
                CpuStorage::F32(convert(v, l, super::num::exp_f32_slice))
            }
            CpuStorage::F16(v) => CpuStorage::F16(half(v, l, op)),
            CpuStorage::BF16(v) => CpuStorage::BF16(half(v, l, op)),
            _ => map_vec!(self, v => go(v, l, op)),
        }
    }

    /// Reduces over `dim` (all dimensions when `None`). Sums of integers are i64, as in
    /// PyTorch; `Mean` is only called on floats.
    pub(crate) fn reduce(
        &self,
        op: ReduceOp,
        l: &Layout,
        dim: Option<usize>,
        out_dtype: DType,
    ) -> CpuStorage {
        let (outer, len, inner) = l.reduce_split(dim);
        macro_rules! float {
            ($v:expr, $variant:ident, $t:ty) => {{
                let x = in_place_or_gathered($v, l);
                CpuStorage::$variant(match op {
                    ReduceOp::Max => reduce_max(&x, outer, len, inner),
                    ReduceOp::Sum | ReduceOp::Mean => {
                        let scale = if op == ReduceOp::Mean {
                            1.0 / len as f64
                        } else {
                            1.0
                        };
                        reduce_sum(&x, outer, len, inner)
                            .into_iter()
                            .map(|s| <$t as WithDType>::from_f64(s * scale))
                            .collect()
                    }
                })
            }};
        }
        macro_rules! int {
            ($v:expr, $variant:ident) => {{
                let x = gather($v, l);
                match op {
                    ReduceOp::Max => CpuStorage::$variant(reduce_max(&x, outer, len, inner)),
                    ReduceOp::Sum | ReduceOp::Mean => {
                        let wide: Vec<i64> = x.iter().map(|&e| e as i64).collect();
                        let sums = CpuStorage::I64(reduce_int_sum(&wide, outer, len, inner));
                        if out_dtype == DType::I64 {
                            sums
                        } else {
                            let n = sums.len();
                            sums.to_dtype(&Layout::contiguous(Shape::from(n)), out_dtype)
                        }
                    }
                }
            }};
        }
        match self {
            CpuStorage::F16(v) => float!(v, F16, f16),
            CpuStorage::BF16(v) => float!(v, BF16, bf16),
            CpuStorage::F32(v) => float!(v, F32, f32),
            CpuStorage::F64(v) => float!(v, F64, f64),
            CpuStorage::I32(v) => int!(v, I32),
            CpuStorage::I64(v) => int!(v, I64),
        }
    }

    /// Batched matmul: `bsz` products of (m x k) by (k x n). Each operand is given as
    /// (batch stride, row stride, column stride, offset) in elements; a batch stride of 0
    /// reuses one matrix for every batch.
    pub(crate) fn matmul(&self, rhs: &CpuStorage, spec: &MatmulSpec) -> Result<CpuStorage> {
        // Establishes what the unsafe GEMM below relies on: every element each view reads is
        // inside `self` and `rhs`, and the product is not empty.
        spec.check_in_bounds(self.len(), rhs.len())?;
        let threads = crate::base::threads::threads();
        /// One matrix product: `gemm_float`, `gemm_bf16` (pair dot products where the CPU
        /// has them) or `gemm_f16`, with an optional `Finish`. Same # Safety as
        /// `matmul::gemm_with`.
        type Gemm<S, D> = unsafe fn(
            usize,
            usize,
            usize,
            MatRef<S>,
            MatRef<S>,
            &mut [D],
            usize,
            Option<matmul::Finish<D>>,
        );
        /// `matmul::Finish` with the batch: (batch, C of that batch, rows, columns).
        type BatchFinish<'a, D> = &'a (dyn Fn(usize, *const D, Range<usize>, Range<usize>) + Sync);
        fn float<S: Copy + Send + Sync, D: matmul::Accum>(
            gemm: Gemm<S, D>,
            x: &[S],
            y: &[S],
            spec: &MatmulSpec,
            threads: usize,
            finish: Option<BatchFinish<D>>,
        ) -> Vec<D> {
            let MatmulSpec { bsz, m, n, k, a, b } = *spec;
            let mut out = alloc::output::<D>(bsz * m * n);
            // Many small matrices: one thread per matrix beats splitting each.
            let per_matrix_parallel =
                bsz >= threads && m.saturating_mul(n).saturating_mul(k) < (1 << 24);
            let run = |(i, c): (usize, &mut [D])| {
                let (ar, br) = (batch_view(x, a, i), batch_view(y, b, i));
                let t = if per_matrix_parallel { 1 } else { threads };
                let batch_finish = |c: *const D, rows: Range<usize>, cols: Range<usize>| {
                    if let Some(f) = finish {
                        f(i, c, rows, cols)
                    }
                };
                let fin: Option<matmul::Finish<D>> = finish.map(|_| &batch_finish as _);
                // SAFETY: gemm needs x[a.3 + i*a.0 + r*a.1 + c*a.2] for r < m, c < k, and
                // y[b.3 + i*b.0 + r*b.1 + c*b.2] for r < k, c < n, inside x and y, for this
                // batch i < bsz: MatmulSpec::check_in_bounds at the top of
                // CpuStorage::matmul checked exactly that, with checked arithmetic, for the
                // last batch, row and column (it also refuses m, n or k = 0, which
                // Tensor::matmul never passes). `c` is one m * n chunk of `out`, allocated by
                // alloc::output(bsz * m * n) above, as gemm requires. x and y are only read
                // (shared borrows for the whole call).
                unsafe { gemm(m, n, k, ar, br, c, t, fin) };
            };
            if m * n == 0 {
                return out;
            }
            if per_matrix_parallel && threads == 2 {
                // Two halves of the batch: the second on matmul's spinning helper, which
                // (unlike rayon's sleeping worker) needs no wake-up between calls.
                let half = bsz.div_ceil(2);
                let (c0, c1) = out.split_at_mut(half * m * n);
                matmul::join(
                    || c0.chunks_mut(m * n).enumerate().for_each(run),
                    || {
                        c1.chunks_mut(m * n)
                            .enumerate()
                            .for_each(|(i, c)| run((half + i, c)))
                    },
                );
            } else if per_matrix_parallel && threads > 1 {
                out.par_chunks_mut(m * n).enumerate().for_each(run);
            } else {
                out.chunks_mut(m * n).enumerate().for_each(run);
            }
            out
        }
        /// A bf16 or f16 product: accumulated in f32 (`float`), each block of the result
        /// rounded by `conv` (scaled by 1) into the output as soon as it is complete; k = 1
        /// (an outer product) through `matmul::gemm_outer_rounded`, without an f32 C.
        fn rounded<S: matmul::PackInto<f32>, H: alloc::ZeroBits + Send + Sync>(
            gemm: Gemm<S, f32>,
            x: &[S],
            y: &[S],
            spec: &MatmulSpec,
            threads: usize,
            conv: fn(&mut [H], &[f32], f32),
        ) -> Vec<H> {
            let MatmulSpec { bsz, m, n, k, a, b } = *spec;
            let mut out = alloc::output::<H>(bsz * m * n);
            if k == 1 && m * n > 0 {
                for (i, c) in out.chunks_mut(m * n).enumerate() {
                    let (ar, br) = (batch_view(x, a, i), batch_view(y, b, i));
                    // SAFETY: as in `float`: MatmulSpec::check_in_bounds at the top of
                    // CpuStorage::matmul checked that A's m x 1 and B's 1 x n values of every
                    // batch i < bsz are inside x and y; `c` is one m * n chunk of `out`.
                    unsafe { matmul::gemm_outer_rounded(m, n, ar, br, c, threads, conv) };
                }
                return out;
            }
            let dst = matmul::OutPtr(out.as_mut_ptr());
            let fin = |i: usize, c: *const f32, rows: Range<usize>, cols: Range<usize>| {
                for r in rows {
                    // SAFETY: `Finish`'s contract: (rows, cols) is a complete block of the
                    // m x n C of batch i < bsz, whose first element is `c`, handed to one
                    // thread once; so row r's columns are inside that C, and the same
                    // elements of `out` (bsz * m * n, batch i at i * m * n) are written by
                    // this call only. `out` is not otherwise used until `float` returns.
                    unsafe {
                        let src = std::slice::from_raw_parts(c.add(r * n + cols.start), cols.len());
                        let o = dst.get().add(i * m * n + r * n + cols.start);
                        conv(std::slice::from_raw_parts_mut(o, cols.len()), src, 1.0);
                    }
                }
            };
            let acc = float(gemm, x, y, spec, threads, Some(&fin));
            alloc::recycle(acc);
            out
        }
        fn int<T: Num>(x: &[T], y: &[T], spec: &MatmulSpec) -> Vec<T> {
            let MatmulSpec { bsz, m, n, k, a, b } = *spec;
            let mut out = alloc::output::<T>(bsz * m * n);
            if m * n == 0 {
                return out;
            }
            for (i, c) in out.chunks_mut(m * n).enumerate() {
                let ar = batch_view(x, a, i);
                // Integer kernel wants B row-major: gather this batch's B.
                let bl = Layout {
                    shape: Shape::from((k, n)),
                    strides: vec![b.1, b.2],
                    offset: b.3 + i * b.0,
                };
                let bm = gather(y, &bl);
                // SAFETY: a.at(i, p) for i < m, p < k is x[a.3 + batch * a.0 + i * a.1 +
                // p * a.2], inside x: MatmulSpec::check_in_bounds at the top of this function.
                unsafe { matmul::gemm_int(m, n, k, ar, &bm, c) };
            }
            out
        }
        Ok(match (self, rhs) {
            (CpuStorage::F32(x), CpuStorage::F32(y)) => {
                CpuStorage::F32(float(matmul::gemm_float, x, y, spec, threads, None))
            }
            (CpuStorage::F64(x), CpuStorage::F64(y)) => {
                CpuStorage::F64(float(matmul::gemm_float, x, y, spec, threads, None))
            }
            (CpuStorage::F16(x), CpuStorage::F16(y)) => {
                let conv: fn(&mut [f16], &[f32], f32) = float16::scaled_to_f16;
                CpuStorage::F16(rounded(matmul::gemm_f16, x, y, spec, threads, conv))
            }
            (CpuStorage::BF16(x), CpuStorage::BF16(y)) => {
                let conv: fn(&mut [bf16], &[f32], f32) = float16::scaled_to_bf16;
                CpuStorage::BF16(rounded(matmul::gemm_bf16, x, y, spec, threads, conv))
            }
            (CpuStorage::I32(x), CpuStorage::I32(y)) => CpuStorage::I32(int(x, y, spec)),
            (CpuStorage::I64(x), CpuStorage::I64(y)) => CpuStorage::I64(int(x, y, spec)),
            _ => {
                return Err(Error::DTypeMismatch {
                    op: "matmul",
                    lhs: self.dtype(),
                    rhs: rhs.dtype(),
                })
            }
        })
    }
}

/// Batch i of a matmul operand laid out as `MatmulSpec`'s (batch stride, row stride,
/// column stride, offset), as a view into `p` (its pointer computed without dereferencing:
/// `MatmulSpec::check_in_bounds` says whether the elements it reaches are inside).
fn batch_view<S>(
    p: &[S],
    (bs, rs, cs, offset): (usize, usize, usize, usize),
    i: usize,
) -> MatRef<S> {
    MatRef {
        ptr: p.as_ptr().wrapping_add(offset + i * bs),
        rs,
        cs,
    }
}

fn filled<T: alloc::ZeroBits>(n: usize, value: T) -> Vec<T> {
    let mut v = alloc::output(n);
    v.fill(value);
    v
}

/// Converts a contiguous vector to another dtype (through f64, which is exact for every
/// source but i64 beyond 2^53). Large vectors convert in parallel.
fn cast_vec<S: WithDType>(src: &[S], to: DType) -> CpuStorage {
    with_type!(to, T => {
        // The trait's conversion, not `half`'s inherent `from_f64` (which the concrete type
        // would pick): it rounds f64 to f16/bf16 once.
        let conv = |s: &S| -> T { <T as WithDType>::from_f64(s.to_f64()) };
        let v: Vec<T> = if src.len() >= CHUNK && crate::base::threads::parallel() {
            src.par_iter().map(conv).collect()
        } else {
            src.iter().map(conv).collect()
        };
        T::to_storage(v)
    })
}

/// The view `l` of `v`, converted element by element by `conv(out, src)` into a buffer from
/// the allocator's cache, a chunk per task (`for_chunks`); a strided view is made contiguous
/// first.
fn convert<S: alloc::ZeroBits + Send + Sync + Clone, T: alloc::ZeroBits + Send>(
    v: &[S],
    l: &Layout,
    conv: impl Fn(&mut [T], &[S]) + Sync + Send,
) -> Vec<T> {
    let src = in_place_or_gathered(v, l);
    let mut out = alloc::output(src.len());
    for_chunks(&mut out, |start, o| conv(o, &src[start..start + o.len()]));
    out
}

/// Runs `body(start, chunk)` over `out` in CHUNK-sized pieces, on the pool when there is more
/// than one piece (waking threads costs more than a small op itself).
pub(super) fn for_chunks<T: Send>(out: &mut [T], body: impl Fn(usize, &mut [T]) + Sync + Send) {
    if out.len() <= CHUNK || !crate::base::threads::parallel() {
        body(0, out);
    } else {
        out.par_chunks_mut(CHUNK)
            .enumerate()
            .for_each(|(i, o)| body(i * CHUNK, o));
    }
}

/// Maps `f` over a strided view into a new contiguous vector.
fn unary_map<T: Num>(v: &[T], l: &Layout, f: impl Fn(T) -> T + Sync + Send) -> Vec<T> {
    let n = l.shape.elem_count();
    if l.is_contiguous() {
        let src = &v[l.offset..l.offset + n];
        let mut out = alloc::output::<T>(n);
        for_chunks(&mut out, |start, o| {
            for (o, &s) in o.iter_mut().zip(&src[start..]) {
                *o = f(s);
            }
        });
        return out;
    }
    gather(v, l).into_iter().map(f).collect()
}

/// Applies `f` elementwise with broadcasting: the output has shape `out`, and each operand is
/// read through strides where stretched dimensions have stride 0.
fn binary_map<T: Num>(
    a: &[T],
    la: &Layout,
    b: &[T],
    lb: &Layout,
    out: &Shape,
    f: impl Fn(T, T) -> T + Sync + Send,
) -> Vec<T> {
    let n = out.elem_count();
    let mut res = alloc::output::<T>(n);
    if n == 0 {
        return res;
    }
    let same = |l: &Layout| l.shape == *out && l.is_contiguous();
    if same(la) && same(lb) {
        let (a, b) = (&a[la.offset..la.offset + n], &b[lb.offset..lb.offset + n]);
        for_chunks(&mut res, |start, o| {
            let (a, b) = (&a[start..start + o.len()], &b[start..start + o.len()]);
            for ((o, &x), &y) in o.iter_mut().zip(a).zip(b) {
                *o = f(x, y);
            }
        });
        return res;
    }
    if lb.shape.elem_count() == 1 && same(la) {
        let (a, y) = (&a[la.offset..la.offset + n], b[lb.offset]);
        for_chunks(&mut res, |start, o| {
            let a = &a[start..start + o.len()];
            for (o, &x) in o.iter_mut().zip(a) {
                *o = f(x, y);
            }
        });
        return res;
    }
    // General case: rows of the innermost dimension, each located by its outer index.
    let dims = out.dims();
    let rank = dims.len();
    let sa = la.broadcast_strides(out);
    let sb = lb.broadcast_strides(out);
    let inner = if rank == 0 { 1 } else { dims[rank - 1] };
    let (ia, ib) = if rank == 0 {
        (0, 0)
    } else {
        (sa[rank - 1], sb[rank - 1])
    };
    let row = |(r, o): (usize, &mut [T])| {
        let (mut pa, mut pb) = (la.offset, lb.offset);
        let mut rem = r;
        for d in (0..rank.saturating_sub(1)).rev() {
            let i = rem % dims[d];
            rem /= dims[d];
            pa += i * sa[d];
            pb += i * sb[d];
        }
        // Rows read in order (a row of each, or a row against one value broadcast along it:
        // `x + bias`) as slices the compiler vectorises; index arithmetic for the rest.
        // Element by element, f32 2048 x 2048 plus a row of 2048 ran at 0.15x PyTorch.
        let n = o.len();
        match (ia, ib) {
            (1, 1) => {
                let (x, y) = (&a[pa..pa + n], &b[pb..pb + n]);
                for ((o, &x), &y) in o.iter_mut().zip(x).zip(y) {
                    *o = f(x, y);
                }
            }
            (1, 0) => {
                let y = b[pb];
                for (o, &x) in o.iter_mut().zip(&a[pa..pa + n]) {
                    *o = f(x, y);
                }
            }
            (0, 1) => {
                let x = a[pa];
                for (o, &y) in o.iter_mut().zip(&b[pb..pb + n]) {
                    *o = f(x, y);
                }
            }
            _ => {
                for (j, o) in o.iter_mut().enumerate() {
                    *o = f(a[pa + j * ia], b[pb + j * ib]);
                }
            }
        }
    };
    if n >= CHUNK && crate::base::threads::parallel() {
        res.par_chunks_mut(inner).enumerate().for_each(row);
    } else {
        res.chunks_mut(inner).enumerate().for_each(row);
    }
    res
}

/// Sums of a contiguous [outer, len, inner] array over the middle axis, accumulated in f64.
fn reduce_sum<T: Num>(x: &[T], outer: usize, len: usize, inner: usize) -> Vec<f64> {
    // Empty outputs, and sums over nothing (0, as in PyTorch): no rows to walk.
    if outer * inner == 0 || len == 0 {
        return vec![0.0; outer * inner];
    }
    if inner == 1 {
        let parallel = outer * len >= CHUNK && crate::base::threads::parallel();
        if outer == 1 && parallel {
            return vec![x.par_chunks(CHUNK).map(T::sum_row).sum()];
        }
        let rows = &x[..outer * len];
        if parallel {
            return rows.par_chunks(len).map(T::sum_row).collect();
        }
        return rows.chunks(len).map(T::sum_row).collect();
    }
    // Columns in blocks of COLS (their f64 sums stay in L1), each block of each outer index a
    // task, so that `x.sum(0)` of one matrix is split between threads too (it ran on one, at
    // 0.52x PyTorch for 2048 x 2048 f32).
    const COLS: usize = 1024;
    let mut out = vec![0.0f64; outer * inner];
    let per = inner.div_ceil(COLS);
    let sum_rows = |(t, acc): (usize, &mut [f64])| {
        let (o, c0) = (t / per, (t % per) * COLS);
        for j in 0..len {
            let at = (o * len + j) * inner + c0;
            T::accumulate(acc, &x[at..at + acc.len()]);
        }
    };
    let blocks: Vec<&mut [f64]> = out
        .chunks_mut(inner)
        .flat_map(|o| o.chunks_mut(COLS))
        .collect();
    if outer * len * inner >= CHUNK && crate::base::threads::parallel() {
        blocks.into_par_iter().enumerate().for_each(sum_rows);
    } else {
        blocks.into_iter().enumerate().for_each(sum_rows);
    }
    out
}

fn reduce_int_sum(x: &[i64], outer: usize, len: usize, inner: usize) -> Vec<i64> {
    let mut out = vec![0i64; outer * inner];
    if out.is_empty() {
        return out;
    }
    for (o, acc) in out.chunks_mut(inner).enumerate() {
        for j in 0..len {
            let row = &x[(o * len + j) * inner..(o * len + j + 1) * inner];
            for (a, v) in acc.iter_mut().zip(row) {
                *a = a.wrapping_add(*v);
            }
        }
    }
    out
}

fn reduce_max<T: Num>(x: &[T], outer: usize, len: usize, inner: usize) -> Vec<T> {
    let mut out = vec![T::LOWEST; outer * inner];
    // The tensor layer refuses a max over an empty dimension; an empty output has no rows.
    if out.is_empty() {
        return out;
    }
    if inner == 1 {
        let parallel = outer * len >= CHUNK && crate::base::threads::parallel();
        if outer == 1 && parallel {
            out[0] = x
                .par_chunks(CHUNK)
                .map(T::max_row)
                .reduce(|| T::LOWEST, Num::max);
            return out;
        }
        let rows = &x[..outer * len];
        if parallel {
            out.par_iter_mut()
                .zip(rows.par_chunks(len))
                .for_each(|(o, r)| *o = T::max_row(r));
        } else {
            out.iter_mut()
                .zip(rows.chunks(len))
                .for_each(|(o, r)| *o = T::max_row(r));
        }
        return out;
    }
    for (o, acc) in out.chunks_mut(inner).enumerate() {
        for j in 0..len {
            let row = &x[(o * len + j) * inner..(o * len + j + 1) * inner];
            for (a, &v) in acc.iter_mut().zip(row) {
                *a = a.max(v);
            }
        }
    }
    out
}
