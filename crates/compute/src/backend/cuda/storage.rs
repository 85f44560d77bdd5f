//! Tensor data in GPU memory and every op on it: elementwise, casts, reductions, fills and
//! random numbers run accel's NVRTC kernels; float matmul runs cuBLAS.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::sys::CUdeviceptr;

use super::context::CudaContext;
use super::kernels::{self, Kernel, ReducePass, BLOCK, MAX_RANK};
use crate::backend::contract::BackendStorage;
use crate::backend::ops::{BinaryOp, MatmulSpec, ReduceOp, UnaryOp};
use crate::base::dtype::{CpuStorage, HostSlice};
use crate::base::shape::Layout;
use crate::{DType, Error, Result, Shape};

/// A buffer of `len` elements of `dtype` on one GPU, freed (stream-ordered) on drop.
pub(crate) struct CudaStorage {
    pub gpu: Arc<CudaContext>,
    pub ptr: CUdeviceptr,
    pub len: usize,
    pub dtype: DType,
}

impl std::fmt::Debug for CudaStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CudaStorage(cuda:{}, {} x {})",
            self.gpu.ordinal, self.len, self.dtype
        )
    }
}

impl Drop for CudaStorage {
    fn drop(&mut self) {
        self.gpu
            .free(self.ptr, self.len * self.dtype.size_in_bytes());
    }
}

/// The kernels' `Ix` argument: a strided walk over up to 8 dimensions for one or two operands.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Ix {
    n: i64,
    rank: i32,
    pad: i32,
    dims: [i64; MAX_RANK],
    s0: [i64; MAX_RANK],
    s1: [i64; MAX_RANK],
}

/// Merges dimensions that are contiguous in every operand, so most views need few dimensions.
fn merged(dims: &[usize], strides: [&[usize]; 2]) -> Result<Ix> {
    let mut d: Vec<usize> = Vec::new();
    let mut s: [Vec<usize>; 2] = [Vec::new(), Vec::new()];
    for i in 0..dims.len() {
        if dims[i] == 1 {
            continue;
        }
        let can_merge =
            !d.is_empty() && (0..2).all(|k| s[k][s[k].len() - 1] == strides[k][i] * dims[i]);
        if can_merge {
            let last = d.len() - 1;
            d[last] *= dims[i];
            for k in 0..2 {
                let l = s[k].len() - 1;
                s[k][l] = strides[k][i];
            }
        } else {
            d.push(dims[i]);
            for k in 0..2 {
                s[k].push(strides[k][i]);
            }
        }
    }
    if d.len() > MAX_RANK {
        return Err(Error::invalid(
            "cuda kernel",
            format!(
                "this view needs {} dimensions after merging; the CUDA kernels take at most {MAX_RANK} (call .contiguous() first)",
                d.len()
            ),
        ));
    }
    let mut ix = Ix {
        n: dims.iter().product::<usize>() as i64,
        rank: d.len() as i32,
        pad: 0,
        dims: [1; MAX_RANK],
        s0: [0; MAX_RANK],
        s1: [0; MAX_RANK],
    };
    for i in 0..d.len() {
        ix.dims[i] = d[i] as i64;
        ix.s0[i] = s[0][i] as i64;
        ix.s1[i] = s[1][i] as i64;
    }
    Ok(ix)
}

fn arg<T>(v: &T) -> *mut c_void {
    v as *const T as *mut c_void
}

impl CudaStorage {
    /// Uninitialised memory for `len` elements.
    pub fn alloc(gpu: &Arc<CudaContext>, dtype: DType, len: usize) -> Result<CudaStorage> {
        let ptr = gpu.alloc(len * dtype.size_in_bytes())?;
        Ok(CudaStorage {
            gpu: gpu.clone(),
            ptr,
            len,
            dtype,
        })
    }

    fn at(&self, offset: usize) -> CUdeviceptr {
        self.ptr + (offset * self.dtype.size_in_bytes()) as u64
    }

    pub fn from_cpu(gpu: &Arc<CudaContext>, data: HostSlice<'_>) -> Result<CudaStorage> {
        let out = CudaStorage::alloc(gpu, data.dtype, data.len)?;
        // SAFETY: `out` was allocated just above with data.len elements of data's dtype: exactly
        // the bytes `htod` writes (HostSlice::bytes holds len elements).
        unsafe { gpu.htod(out.ptr, data.bytes) }?;
        Ok(out)
    }

    /// The view's elements as one dense run: its address, and the copy holding it when the
    /// view was strided (keep it alive while the address is used).
    fn dense(&self, l: &Layout) -> Result<(Option<CudaStorage>, CUdeviceptr)> {
        if l.is_contiguous() {
            Ok((None, self.at(l.offset)))
        } else {
            let c = self.copy_strided(l)?;
            let p = c.ptr;
            Ok((Some(c), p))
        }
    }

    /// A contiguous copy of the view `l` on another GPU.
    pub fn to_gpu(&self, l: &Layout, dst: &Arc<CudaContext>) -> Result<CudaStorage> {
        let (_copy, src) = self.dense(l)?;
        let n = l.shape.elem_count();
        let out = CudaStorage::alloc(dst, self.dtype, n)?;
        // SAFETY: `out` was allocated just above with n elements on `dst`, and `src` is the view's
        // dense run of n elements on this GPU (`dense`, in bounds by Layout::check_in_bounds).
        unsafe { dst.dtod(out.ptr, &self.gpu, src, n * self.dtype.size_in_bytes()) }?;
        Ok(out)
    }

    /// `value` in every element.
    pub fn full(gpu: &Arc<CudaContext>, dtype: DType, n: usize, value: f64) -> Result<CudaStorage> {
        let o = CudaStorage::alloc(gpu, dtype, n)?;
        if n > 0 {
            let nn = n as i64;
            // SAFETY: `o` holds n elements of `dtype` (allocated above); the arguments match
            // `fill_*` in kernels.rs.
            unsafe {
                gpu.launch(
                    Kernel::Fill(dtype),
                    (gpu.grid_for(n), 1, 1),
                    (BLOCK, 1, 1),
                    &mut [arg(&o.ptr), arg(&nn), arg(&value)],
                )
            }?;
        }
        Ok(o)
    }

    /// `start + i * step`.
    pub fn arange(
        gpu: &Arc<CudaContext>,
        dtype: DType,
        start: f64,
        step: f64,
        n: usize,
    ) -> Result<CudaStorage> {
        let o = CudaStorage::alloc(gpu, dtype, n)?;
        if n > 0 {
            let nn = n as i64;
            // SAFETY: `o` holds n elements of `dtype` (allocated above); the arguments match
            // `arange_*` in kernels.rs.
            unsafe {
                gpu.launch(
                    Kernel::Arange(dtype),
                    (gpu.grid_for(n), 1, 1),
                    (BLOCK, 1, 1),
                    &mut [arg(&o.ptr), arg(&nn), arg(&start), arg(&step)],
                )
            }?;
        }
        Ok(o)
    }

    /// Uniform in [a, b) (`normal == false`) or normal with mean a and deviation b, from a
    /// counter-based generator keyed by `seed`.
    pub fn random(
        gpu: &Arc<CudaContext>,
        dtype: DType,
        n: usize,
        seed: u64,
        normal: bool,
        a: f64,
        b: f64,
    ) -> Result<CudaStorage> {
        let o = CudaStorage::alloc(gpu, dtype, n)?;
        if n > 0 {
            let nn = n as i64;
            let kind = if normal {
                Kernel::Normal(dtype)
            } else {
                Kernel::Uniform(dtype)
            };
            // SAFETY: `o` holds n elements of `dtype` (allocated above); the arguments match the
            // generator kernels in kernels.rs.
            unsafe {
                gpu.launch(
                    kind,
                    (gpu.grid_for(n), 1, 1),
                    (BLOCK, 1, 1),
                    &mut [arg(&o.ptr), arg(&nn), arg(&seed), arg(&a), arg(&b)],
                )
            }?;
        }
        Ok(o)
    }

    /// Float matmul through cuBLAS. cuBLAS is column-major: a row-major C = A B is the
    /// column-major Cᵀ = Bᵀ Aᵀ, so we pass B first. Each operand must have unit stride along
    /// rows or columns; other views are made contiguous first.
    fn gemm(&self, rhs: &CudaStorage, spec: &MatmulSpec, out: CudaStorage) -> Result<CudaStorage> {
        use cudarc::cublas::sys as cb;
        let MatmulSpec { bsz, m, n, k, a, b } = *spec;

        // (pointer, op, leading dimension, batch stride) of one operand seen column-major,
        // rows x cols being its row-major shape.
        let plan = |s: &CudaStorage,
                    st: (usize, usize, usize, usize),
                    rows: usize,
                    cols: usize|
         -> Result<(
            Option<CudaStorage>,
            CUdeviceptr,
            cb::cublasOperation_t,
            i32,
            i64,
        )> {
            let (bs, rs, cs, off) = st;
            if cs == 1 && rs >= cols.max(1) && rs <= i32::MAX as usize {
                return Ok((
                    None,
                    s.at(off),
                    cb::cublasOperation_t::CUBLAS_OP_N,
                    rs as i32,
                    bs as i64,
                ));
            }
            if rs == 1 && cs >= rows.max(1) && cs <= i32::MAX as usize {
                return Ok((
                    None,
                    s.at(off),
                    cb::cublasOperation_t::CUBLAS_OP_T,
                    cs as i32,
                    bs as i64,
                ));
            }
            // Copy to a contiguous batch.
            let batch = if bs == 0 { 1 } else { bsz };
            let shape = Shape::from((batch, rows, cols));
            let l = Layout {
                shape,
                strides: vec![bs, rs, cs],
                offset: off,
            };
            let c = s.copy_strided(&l)?;
            let p = c.ptr;
            let bstride = if bs == 0 { 0 } else { (rows * cols) as i64 };
            Ok((
                Some(c),
                p,
                cb::cublasOperation_t::CUBLAS_OP_N,
                cols.max(1) as i32,
                bstride,
            ))
        };
        let (_keep_a, pa, opa, lda, sa) = plan(self, a, m, k)?;
        let (_keep_b, pb, opb, ldb, sb) = plan(rhs, b, k, n)?;
        let dims_ok = [m, n, k, bsz].iter().all(|&x| x <= i32::MAX as usize);
        if !dims_ok {
            return Err(Error::invalid("matmul", "cuBLAS takes sizes below 2^31"));
        }
        let (dt, compute) = match self.dtype {
            DType::F32 => (
                cb::cudaDataType::CUDA_R_32F,
                // TF32 only where the GPU has TF32 tensor cores (8.0 and newer): on a T4,
                // allowing it changes nothing, and cuBLAS is not asked for a mode it lacks.
                if crate::backend::native::settings::allow_tf32()
                    && kernels::parse_arch(&self.gpu.arch)
                        .is_some_and(|cc| crate::base::caps::TensorCores::of(cc).tf32)
                {
                    cb::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32
                } else {
                    cb::cublasComputeType_t::CUBLAS_COMPUTE_32F
                },
            ),
            DType::F64 => (
                cb::cudaDataType::CUDA_R_64F,
                cb::cublasComputeType_t::CUBLAS_COMPUTE_64F,
            ),
            DType::F16 => (
                cb::cudaDataType::CUDA_R_16F,
                cb::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            ),
            DType::BF16 => (
                cb::cudaDataType::CUDA_R_16BF,
                cb::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            ),
            d => return Err(Error::unsupported("matmul", d, "no cuBLAS path")),
        };
        let (one64, zero64) = (1f64, 0f64);
        let (one32, zero32) = (1f32, 0f32);
        let (alpha, beta) = if self.dtype == DType::F64 {
            (arg(&one64), arg(&zero64))
        } else {
            (arg(&one32), arg(&zero32))
        };
        let h = self.gpu.blas()?;
        self.gpu.bind()?;
        // SAFETY: cuBLAS reads, for batch z < bsz, B at pb + z*sb + (r*ldb + c) [OP_N] or
        // (c*ldb + r) [OP_T] for the k x n operand, A likewise for m x k, and writes
        // out.ptr + z*m*n + (i*n + j). `plan` passes an operand's own buffer only when its view
        // is exactly such a strided matrix (unit stride along rows or columns, leading
        // dimension >= the other extent), with the view's offset and batch stride (0 for a
        // single matrix) from Tensor::matmul; every Tensor layout is in bounds of its storage
        // (Layout::check_in_bounds, called by Tensor::from_storage and Tensor::view), so every element cuBLAS reads is inside `self`/`rhs`. Other views are
        // first copied dense (`_keep_a`/`_keep_b`, batch*rows*cols elements). `out` was
        // allocated above for bsz*m*n elements. The copies and `out` stay alive until the
        // call has queued the work, and their stream-ordered free (CudaContext::free) comes after it
        // on the same stream that the handle is bound to (CudaContext::blas). m, n, k, bsz, lda, ldb
        // fit in i32 (checked above); alpha/beta point at host scalars of the compute type's
        // scale type (f64 for COMPUTE_64F, f32 otherwise), alive until the call returns.
        let r = unsafe {
            cudarc::cublas::result::gemm_strided_batched_ex(
                h,
                opb,
                opa,
                n as i32,
                m as i32,
                k as i32,
                alpha,
                pb as *const c_void,
                dt,
                ldb,
                sb,
                pa as *const c_void,
                dt,
                lda,
                sa,
                beta,
                out.ptr as *mut c_void,
                dt,
                n as i32,
                (m * n) as i64,
                bsz as i32,
                compute,
                cb::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        };
        r.map_err(|e| Error::backend(crate::BackendKind::Cuda, "cuBLAS matmul failed", e))?;
        Ok(out)
    }
}

impl BackendStorage for CudaStorage {
    fn dtype(&self) -> DType {
        self.dtype
    }
    fn len(&self) -> usize {
        self.len
    }
    /// A host copy of the view `l` (waits for the GPU).
    fn to_cpu(&self, l: &Layout) -> Result<CpuStorage> {
        let mut host = CpuStorage::for_overwrite(self.dtype, l.shape.elem_count());
        self.to_host(l, host.as_bytes_mut())?;
        Ok(host)
    }
    /// Copies the view `l` into `dst` (its size exactly) and waits.
    fn to_host(&self, l: &Layout, dst: &mut [u8]) -> Result<()> {
        let want = l.shape.elem_count() * self.dtype.size_in_bytes();
        if dst.len() != want {
            return Err(Error::internal(format!(
                "a {}-byte host buffer for a {want}-byte copy from the GPU",
                dst.len()
            )));
        }
        let (_copy, src) = self.dense(l)?;
        // SAFETY: `src` is the view's dense run of n elements (`dense`: the view itself when
        // contiguous, in bounds by Layout::check_in_bounds, else a fresh copy), and dst.len() was
        // checked above to be those n elements' bytes.
        unsafe { self.gpu.dtoh(dst, src) }
    }
    fn to_device_direct(&self, l: &Layout, ordinal: usize) -> Result<Option<CudaStorage>> {
        Ok(Some(self.to_gpu(l, &super::context::gpu(ordinal)?)?))
    }
    /// A contiguous copy of the view `l`, on the same GPU: one device-to-device DMA when the
    /// view is dense (as PyTorch's `clone`; the H100 run's 1 GiB copy through the cast kernel
    /// moved 930 GB/s), else the strided cast kernel.
    fn copy_strided(&self, l: &Layout) -> Result<CudaStorage> {
        if l.is_contiguous() {
            return self.to_gpu(l, &self.gpu);
        }
        self.to_dtype(l, self.dtype)
    }
    /// The view `l` converted to `dtype`, contiguous.
    fn to_dtype(&self, l: &Layout, dtype: DType) -> Result<CudaStorage> {
        let n = l.shape.elem_count();
        let out = CudaStorage::alloc(&self.gpu, dtype, n)?;
        if n == 0 {
            return Ok(out);
        }
        let ix = merged(l.shape.dims(), [&l.strides, &l.strides])?;
        let a = self.at(l.offset);
        // SAFETY: `a` is the view's first element and `ix` its merged shape and strides, so every
        // index the kernel forms for i < n is an element of the view (in bounds:
        // Layout::check_in_bounds); `out` holds n elements of `dtype` (allocated above); the
        // arguments match `cast_*` in kernels.rs.
        unsafe {
            self.gpu.launch(
                Kernel::Cast {
                    from: self.dtype,
                    to: dtype,
                },
                (self.gpu.grid_for(n), 1, 1),
                (BLOCK, 1, 1),
                &mut [arg(&a), arg(&out.ptr), arg(&ix)],
            )
        }?;
        Ok(out)
    }
    fn binary(
        &self,
        op: BinaryOp,
        ll: &Layout,
        rhs: &CudaStorage,
        rl: &Layout,
        out: &Shape,
    ) -> Result<CudaStorage> {
        let n = out.elem_count();
        let o = CudaStorage::alloc(&self.gpu, self.dtype, n)?;
        if n == 0 {
            return Ok(o);
        }
        let (a, b) = (self.at(ll.offset), rhs.at(rl.offset));
        let same = ll.shape == *out && rl.shape == *out;
        if same && ll.is_contiguous() && rl.is_contiguous() {
            let aligned = [a, b, o.ptr].iter().all(|p| p % 16 == 0);
            if self.dtype == DType::F32 && n.is_multiple_of(4) && aligned {
                let n4 = (n / 4) as i64;
                // SAFETY: `a`, `b` and `o.ptr` are n contiguous elements (the operands are dense
                // views of their storage, in bounds by Layout::check_in_bounds; `o` was allocated
                // above for n), 16-byte aligned (checked above) and n % 4 == 0, so the float4
                // kernel's n / 4 vector loads and stores stay inside them; the arguments match
                // `binc4_*` in kernels.rs.
                return unsafe {
                    self.gpu.launch(
                        Kernel::BinaryDenseF32x4 { op },
                        (self.gpu.grid_for(n / 4), 1, 1),
                        (BLOCK, 1, 1),
                        &mut [arg(&a), arg(&b), arg(&o.ptr), arg(&n4)],
                    )
                }
                .map(|_| o);
            }
            let nn = n as i64;
            // SAFETY: `a`/`b` are the operands' first elements, and their strides (0 where
            // broadcast) keep every index for i < n inside each view (Layout::check_in_bounds); `o`
            // holds the n outputs (allocated above); the arguments match the kernel in kernels.rs.
            unsafe {
                self.gpu.launch(
                    Kernel::BinaryDense {
                        op,
                        dtype: self.dtype,
                    },
                    (self.gpu.grid_for(n), 1, 1),
                    (BLOCK, 1, 1),
                    &mut [arg(&a), arg(&b), arg(&o.ptr), arg(&nn)],
                )
            }?;
            return Ok(o);
        }
        let sa = ll.broadcast_strides(out);
        let sb = rl.broadcast_strides(out);
        let ix = merged(out.dims(), [&sa, &sb])?;
        // SAFETY: `a`/`b` are the operands' first elements, and their strides (0 where broadcast)
        // keep every index for i < n inside each view (Layout::check_in_bounds); `o` holds the n
        // outputs (allocated above); the arguments match the kernel in kernels.rs.
        unsafe {
            self.gpu.launch(
                Kernel::Binary {
                    op,
                    dtype: self.dtype,
                },
                (self.gpu.grid_for(n), 1, 1),
                (BLOCK, 1, 1),
                &mut [arg(&a), arg(&b), arg(&o.ptr), arg(&ix)],
            )
        }?;
        Ok(o)
    }
    fn unary(&self, op: UnaryOp, l: &Layout) -> Result<CudaStorage> {
        let n = l.shape.elem_count();
        let o = CudaStorage::alloc(&self.gpu, self.dtype, n)?;
        if n == 0 {
            return Ok(o);
        }
        let ix = merged(l.shape.dims(), [&l.strides, &l.strides])?;
        let a = self.at(l.offset);
        // SAFETY: `a` is the view's first element and `ix` its shape and strides (in bounds:
        // Layout::check_in_bounds); `o` holds the n outputs (allocated above); the arguments match
        // `un_*` in kernels.rs.
        unsafe {
            self.gpu.launch(
                Kernel::Unary {
                    op,
                    dtype: self.dtype,
                },
                (self.gpu.grid_for(n), 1, 1),
                (BLOCK, 1, 1),
                &mut [arg(&a), arg(&o.ptr), arg(&ix)],
            )
        }?;
        Ok(o)
    }
    fn reduce(
        &self,
        op: ReduceOp,
        l: &Layout,
        dim: Option<usize>,
        out_dtype: DType,
    ) -> Result<CudaStorage> {
        let (_copy, src) = self.dense(l)?;
        let (outer, r, inner) = l.reduce_split(dim);
        let max = op == ReduceOp::Max;
        let opn = if max { "max" } else { "sum" };
        let mean = i32::from(op == ReduceOp::Mean);
        if out_dtype != kernels::reduce_out(opn, self.dtype) {
            return Err(Error::internal(format!(
                "no {opn} kernel from {} to {out_dtype}",
                self.dtype
            )));
        }
        let nout = outer * inner;
        let o = CudaStorage::alloc(&self.gpu, out_dtype, nout)?;
        if nout == 0 {
            return Ok(o);
        }
        let x = src;
        let (outer_, r_, inner_) = (outer as i64, r as i64, inner as i64);
        let sms = self.gpu.sm_count as usize;
        let coalesced = inner >= 32 && nout >= 64 * sms;
        if r <= 64 || coalesced || nout >= 2 * sms || r < 1 << 16 {
            // Short rows: a thread per output; else a block per output.
            // Neighbouring outputs read neighbouring addresses when inner >= 32: coalesced.
            let (pass, grid) = if r <= 64 || coalesced {
                (ReducePass::Thread, self.gpu.grid_for(nout))
            } else {
                (ReducePass::Block, nout.min(65535 * 16) as u32)
            };
            // SAFETY: `x` is the view's dense run of outer * r * inner elements (`dense`); the
            // output it writes (`o`: outer * inner elements, or `part`: nout * parts) was allocated
            // above; the arguments match the kernel in kernels.rs.
            unsafe {
                self.gpu.launch(
                    Kernel::Reduce {
                        pass,
                        max,
                        dtype: self.dtype,
                    },
                    (grid, 1, 1),
                    (BLOCK, 1, 1),
                    &mut [
                        arg(&x),
                        arg(&o.ptr),
                        arg(&outer_),
                        arg(&r_),
                        arg(&inner_),
                        arg(&mean),
                    ],
                )
            }?;
        } else {
            // Few outputs, long rows: split each row into parts over the whole GPU.
            let parts = (4 * sms).div_ceil(nout).clamp(1, 65535);
            let chunk = r.div_ceil(parts) as i64;
            let acc_dtype = match (opn, self.dtype) {
                ("sum", DType::I32 | DType::I64) => DType::I64,
                (_, DType::F16 | DType::BF16) => DType::F32,
                (_, d) => d,
            };
            let part = CudaStorage::alloc(&self.gpu, acc_dtype, nout * parts)?;
            // SAFETY: `x` is the view's dense run of outer * r * inner elements (`dense`); the
            // output it writes (`o`: outer * inner elements, or `part`: nout * parts) was allocated
            // above; the arguments match the kernel in kernels.rs.
            unsafe {
                self.gpu.launch(
                    Kernel::Reduce {
                        pass: ReducePass::Parts,
                        max,
                        dtype: self.dtype,
                    },
                    (nout as u32, parts as u32, 1),
                    (BLOCK, 1, 1),
                    &mut [
                        arg(&x),
                        arg(&part.ptr),
                        arg(&outer_),
                        arg(&r_),
                        arg(&inner_),
                        arg(&chunk),
                    ],
                )
            }?;
            let (nout_, parts_) = (nout as i64, parts as i64);
            // SAFETY: `x` is the view's dense run of outer * r * inner elements (`dense`); the
            // output it writes (`o`: outer * inner elements, or `part`: nout * parts) was allocated
            // above; the arguments match the kernel in kernels.rs.
            unsafe {
                self.gpu.launch(
                    Kernel::Reduce {
                        pass: ReducePass::Combine,
                        max,
                        dtype: self.dtype,
                    },
                    (self.gpu.grid_for(nout), 1, 1),
                    (BLOCK, 1, 1),
                    &mut [
                        arg(&part.ptr),
                        arg(&o.ptr),
                        arg(&nout_),
                        arg(&parts_),
                        arg(&r_),
                        arg(&mean),
                    ],
                )
            }?;
        }
        Ok(o)
    }
    /// Batched matmul; `a` and `b` are (batch stride, row stride, column stride, offset).
    fn matmul(&self, rhs: &CudaStorage, spec: &MatmulSpec) -> Result<CudaStorage> {
        let MatmulSpec { bsz, m, n, k, a, b } = *spec;
        let out = CudaStorage::alloc(&self.gpu, self.dtype, bsz * m * n)?;
        if bsz * m * n == 0 {
            return Ok(out);
        }
        if k == 0 {
            return CudaStorage::full(&self.gpu, self.dtype, bsz * m * n, 0.0);
        }
        // Checked here too, as the CPU GEMM does: cuBLAS and the integer kernel index the
        // operands with these strides and trust them.
        spec.check_in_bounds(self.len, rhs.len)?;
        match self.dtype {
            DType::I32 | DType::I64 => {
                let p = [
                    bsz as i64, m as i64, n as i64, k as i64, a.0 as i64, a.1 as i64, a.2 as i64,
                    b.0 as i64, b.1 as i64, b.2 as i64,
                ];
                let (pa, pb) = (self.at(a.3), rhs.at(b.3));
                if n.div_ceil(16) > i32::MAX as usize {
                    return Err(Error::invalid(
                        "matmul",
                        "the result has too many columns for one CUDA grid",
                    ));
                }
                let mut args = vec![arg(&pa), arg(&pb), arg(&out.ptr)];
                args.extend(p.iter().map(arg));
                // SAFETY: `pa`/`pb` start the operands' views, and every (batch, row, column) index
                // the kernel forms is inside their storage (the MatmulSpec comes from
                // Tensor::matmul over layouts checked by Layout::check_in_bounds); `out` holds bsz
                // * m * n elements (allocated above); the arguments match `imatmul_*` in
                // kernels.rs.
                unsafe {
                    self.gpu.launch(
                        Kernel::IntMatmul(self.dtype),
                        (
                            n.div_ceil(16) as u32,
                            m.div_ceil(16).min(65535) as u32,
                            bsz.min(65535) as u32,
                        ),
                        (16, 16, 1),
                        &mut args,
                    )
                }?;
                Ok(out)
            }
            _ => self.gemm(rhs, spec, out),
        }
    }
}
