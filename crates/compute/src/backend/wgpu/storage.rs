//! Tensor data on a wgpu device (f32, i32, and f16 where the adapter has `shader-f16`) in one
//! GPU buffer, and every op on it (`impl BackendStorage for WgpuStorage`): a strided map for
//! copies, casts and elementwise ops with broadcasting, a reduction, and the matmuls whose
//! WGSL `shaders.rs` writes.

use std::sync::Arc;

use crate::backend::contract::BackendStorage;
use crate::backend::ops::{BinaryOp, MatmulSpec, ReduceOp, UnaryOp};
use crate::base::dtype::{CpuStorage, HostSlice};
use crate::base::shape::Layout;
use crate::{DType, Error, Result, Shape};

use super::context::{unsupported, WgpuContext};
use super::shaders::{convert, matmul_kernel, prelude, strided_params, STRIDED};

/// Tensor data in one GPU buffer: f32 and i32 on every adapter, f16 where it has `shader-f16`.
pub(crate) struct WgpuStorage {
    pub gpu: Arc<WgpuContext>,
    pub buf: wgpu::Buffer,
    pub len: usize,
    pub dtype: DType,
}

impl std::fmt::Debug for WgpuStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "WgpuStorage(wgpu:{}, {} x {})",
            self.gpu.ordinal, self.len, self.dtype
        )
    }
}

impl WgpuStorage {
    pub fn from_cpu(gpu: &Arc<WgpuContext>, data: HostSlice<'_>) -> Result<WgpuStorage> {
        gpu.ty("to_device", data.dtype)?;
        let bytes = data.bytes;
        let buf = gpu.buffer(bytes.len() as u64)?;
        let (_, q) = gpu.device()?;
        // Queue writes come in whole 4-byte words: an odd number of f16 gets a padded copy.
        if !bytes.len().is_multiple_of(4) {
            let mut padded = bytes.to_vec();
            padded.resize(bytes.len().next_multiple_of(4), 0);
            q.write_buffer(&buf, 0, &padded);
        } else if !bytes.is_empty() {
            q.write_buffer(&buf, 0, bytes);
        }
        Ok(WgpuStorage {
            gpu: gpu.clone(),
            buf,
            len: data.len,
            dtype: data.dtype,
        })
    }

    fn empty(gpu: &Arc<WgpuContext>, dtype: DType, len: usize) -> Result<WgpuStorage> {
        Ok(WgpuStorage {
            gpu: gpu.clone(),
            buf: gpu.buffer((len * dtype.size_in_bytes()) as u64)?,
            len,
            dtype,
        })
    }

    /// The whole buffer on the host (waits).
    fn download(&self) -> Result<CpuStorage> {
        let mut host = CpuStorage::for_overwrite(self.dtype, self.len);
        let bytes = self.len * self.dtype.size_in_bytes();
        if bytes == 0 {
            return Ok(host);
        }
        // Buffer copies come in whole 4-byte words (the buffer is padded to them).
        let words = bytes.next_multiple_of(4);
        let mut staged = vec![0u8; words];
        self.gpu.read_back(&mut staged, |enc, read| {
            enc.copy_buffer_to_buffer(&self.buf, 0, read, 0, words as u64);
        })?;
        host.as_bytes_mut().copy_from_slice(&staged[..bytes]);
        Ok(host)
    }

    /// Runs the strided kernel: `out[i] = expr(x = self[view i], y = rhs[view i])`.
    fn map(
        &self,
        expr: &str,
        la: &Layout,
        rhs: Option<(&WgpuStorage, &Layout)>,
        out: &Shape,
        out_dtype: DType,
    ) -> Result<WgpuStorage> {
        let n = out.elem_count();
        let o = WgpuStorage::empty(&self.gpu, out_dtype, n)?;
        if n == 0 {
            return Ok(o);
        }
        let sa = la.broadcast_strides(out);
        let (b, sb, ob) = match rhs {
            Some((s, l)) => (s, l.broadcast_strides(out), l.offset),
            None => (self, sa.clone(), la.offset),
        };
        let dense = Layout::contiguous(out.clone()).strides;
        // Both operands dense in the output's order (a dimension of size 1 has no stride that
        // matters): rank 0 tells the kernel so.
        let is_dense = |s: &[usize]| {
            out.dims()
                .iter()
                .zip(s.iter().zip(&dense))
                .all(|(&d, (&x, &y))| d == 1 || x == y)
        };
        let mode = if !is_dense(&sa) {
            0
        } else if is_dense(&sb) {
            1
        } else if sb.iter().all(|&x| x == 0) {
            2
        } else {
            0
        };
        let dims = if mode == 0 { out.dims() } else { &[] };
        let mut p = strided_params(n, dims, &sa, la.offset, &sb, ob)?;
        p.push(mode);
        let pb = self.gpu.params(&p)?;
        let f16 = [self.dtype, b.dtype, out_dtype].contains(&DType::F16);
        let src = prelude(f16)
            + &STRIDED
                .replace("TA", self.gpu.ty("kernel", self.dtype)?)
                .replace("TB", self.gpu.ty("kernel", b.dtype)?)
                .replace("TO", self.gpu.ty("kernel", out_dtype)?)
                .replace("EXPR", expr);
        self.gpu.dispatch(
            &src,
            &[&self.buf, &b.buf, &o.buf, &pb],
            self.gpu.groups_1d(n),
        )?;
        Ok(o)
    }

    /// One reduction pass over rows of `r` elements (`outer` x `r` x `inner`), each split in
    /// `parts` of `chunk`; writes `nout * parts` results of `out` dtype. A mean divides by
    /// `divisor`.
    fn reduce_pass(
        &self,
        op: ReduceOp,
        (outer, r, inner): (usize, usize, usize),
        chunk: usize,
        parts: usize,
        divisor: usize,
        out: DType,
    ) -> Result<WgpuStorage> {
        let nout = outer * inner;
        let o = WgpuStorage::empty(&self.gpu, out, nout * parts)?;
        // Short rows, or many outputs with rows a thread can walk alone (within llvmpipe's
        // 65535 loop iterations): a thread per output.
        let per_thread = parts == 1 && (r <= 64 || (nout >= 4096 && r <= 4096));
        let float = self.dtype.is_float();
        let acc = if float { "f32" } else { "i32" };
        let (init, comb, fin) = match op {
            ReduceOp::Sum => ("0.0", "acc + v", "acc"),
            ReduceOp::Mean => ("0.0", "acc + v", "acc / f32(p[5])"),
            // NaN wins, as in PyTorch.
            ReduceOp::Max if float => ("bitcast<f32>(0xff800000u)", "max(acc, v)", "acc"),
            ReduceOp::Max => ("bitcast<i32>(0x80000000u)", "max(acc, v)", "acc"),
        };
        let acc_dtype = if float { DType::F32 } else { DType::I32 };
        let f16 = self.dtype == DType::F16 || out == DType::F16;
        let nan_wins = if op == ReduceOp::Max && float {
            "if (nan != 0u) { res = bitcast<f32>(0x7fc00000u); }"
        } else {
            ""
        };
        let head = format!(
            r#"
@group(0) @binding(0) var<storage, read> a: array<{t_in}>;
@group(0) @binding(1) var<storage, read_write> o: array<{t_out}>;
@group(0) @binding(2) var<storage, read> p: array<u32>;
// p: outer, r, inner, chunk, parts, divisor
fn fold(acc: {acc}, v: {acc}) -> {acc} {{ return {comb}; }}
fn load(i: u32) -> {acc} {{ return {acc}(a[i]); }}
fn is_nan(v: {acc}) -> bool {{ return {float} && isnan32(f32(v)); }}
"#,
            t_in = self.gpu.ty("reduction", self.dtype)?,
            t_out = self.gpu.ty("reduction", out)?,
        );
        let store = convert("res", acc_dtype, out);
        let (body, groups) = if per_thread {
            // One thread per output, looping over its short row: for many small rows, where a
            // workgroup per output would leave most of its 256 threads idle.
            let body = format!(
                r#"
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {{
  let q = (wg.y * nw.x + wg.x) * 256u + li;
  let inner = p[2];
  let r = p[1];
  if (q >= p[0] * inner) {{ return; }}
  let a0 = q / inner;
  let c = q % inner;
  var acc: {acc} = {init};
  var nan = 0u;
  for (var j = 0u; j < r; j = j + 1u) {{
    let v = load((a0 * r + j) * inner + c);
    if (is_nan(v)) {{ nan = 1u; }}
    acc = fold(acc, v);
  }}
  var res = {fin};
  {nan_wins}
  o[q] = {store};
}}
"#
            );
            (body, self.gpu.groups_1d(nout))
        } else {
            // One workgroup per (output, part): 256 threads stride over the part, then a tree
            // in workgroup memory. Outputs beyond the per-dimension limit wrap into z.
            let body = format!(
                r#"
var<workgroup> sh: array<{acc}, 256>;
var<workgroup> shn: array<u32, 256>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {{
  let q = wg.z * nw.x + wg.x;
  let part = wg.y;
  let inner = p[2];
  let r = p[1];
  let live = q < p[0] * inner;
  let j0 = part * p[3];
  let j1 = min(r, j0 + p[3]);
  var acc: {acc} = {init};
  var nan = 0u;
  if (live) {{
    let a0 = q / inner;
    let c = q % inner;
    for (var j = j0 + li; j < j1; j = j + 256u) {{
      let v = load((a0 * r + j) * inner + c);
      if (is_nan(v)) {{ nan = 1u; }}
      acc = fold(acc, v);
    }}
  }}
  sh[li] = acc;
  shn[li] = nan;
  workgroupBarrier();
  for (var w = 128u; w > 0u; w = w / 2u) {{
    if (li < w) {{
      sh[li] = fold(sh[li], sh[li + w]);
      shn[li] = shn[li] | shn[li + w];
    }}
    workgroupBarrier();
  }}
  if (live && li == 0u) {{
    acc = sh[0];
    nan = shn[0];
    var res = {fin};
    {nan_wins}
    o[q * p[4] + part] = {store};
  }}
}}
"#
            );
            let cap = self
                .gpu
                .adapter
                .limits()
                .max_compute_workgroups_per_dimension
                .max(1) as usize;
            let x = nout.min(cap);
            (body, (x as u32, parts as u32, nout.div_ceil(x) as u32))
        };
        let src = prelude(f16) + &head + &body;
        let pb = self.gpu.params(&[
            outer as u32,
            r as u32,
            inner as u32,
            chunk as u32,
            parts as u32,
            divisor as u32,
        ])?;
        self.gpu.dispatch(&src, &[&self.buf, &o.buf, &pb], groups)?;
        Ok(o)
    }
}

impl BackendStorage for WgpuStorage {
    fn dtype(&self) -> DType {
        self.dtype
    }
    fn len(&self) -> usize {
        self.len
    }
    fn to_cpu(&self, l: &Layout) -> Result<CpuStorage> {
        if l.is_contiguous() && l.offset == 0 && l.shape.elem_count() == self.len {
            return self.download();
        }
        self.copy_strided(l)?.download()
    }
    fn to_host(&self, l: &Layout, dst: &mut [u8]) -> Result<()> {
        dst.copy_from_slice(WgpuStorage::to_cpu(self, l)?.as_bytes());
        Ok(())
    }
    fn copy_strided(&self, l: &Layout) -> Result<WgpuStorage> {
        self.map("x", l, None, &l.shape, self.dtype)
    }
    fn to_dtype(&self, l: &Layout, dtype: DType) -> Result<WgpuStorage> {
        self.gpu.ty("to_dtype", dtype)?;
        self.map(&convert("x", self.dtype, dtype), l, None, &l.shape, dtype)
    }
    fn binary(
        &self,
        op: BinaryOp,
        ll: &Layout,
        rhs: &WgpuStorage,
        rl: &Layout,
        out: &Shape,
    ) -> Result<WgpuStorage> {
        let e = match (op, self.dtype) {
            (BinaryOp::Maximum, DType::I32) => "max(x, y)".to_string(),
            // NaN-propagating, as PyTorch's maximum.
            (BinaryOp::Maximum, _) => "select(select(y, x, x > y), x, isnan32(f32(x)))".to_string(),
            (_, dt) => {
                let sym = match op {
                    BinaryOp::Add => "+",
                    BinaryOp::Sub => "-",
                    BinaryOp::Mul => "*",
                    _ => "/",
                };
                if dt == DType::F16 {
                    // In f32, rounded once to f16, as the CPU does.
                    format!("to_f16(f32(x) {sym} f32(y))")
                } else {
                    // i32 wraps on overflow in WGSL, as in PyTorch.
                    format!("x {sym} y")
                }
            }
        };
        self.map(&e, ll, Some((rhs, rl)), out, self.dtype)
    }
    fn unary(&self, op: UnaryOp, l: &Layout) -> Result<WgpuStorage> {
        let t = self.gpu.ty("unary op", self.dtype)?;
        let e = match op {
            UnaryOp::Neg => "-x".to_string(),
            UnaryOp::Relu if self.dtype == DType::I32 => "max(x, 0)".to_string(),
            // Negative on the bits (sign set, not -0, not NaN): NVIDIA's Vulkan compiler made
            // `select(x, 0, x < 0)` a max, which returns 0 for NaN where PyTorch keeps NaN.
            UnaryOp::Relu => format!(
                "select(x, {t}(0), bitcast<u32>(f32(x)) > 0x80000000u && \
                 bitcast<u32>(f32(x)) <= 0xff800000u)"
            ),
            UnaryOp::Exp if self.dtype == DType::F16 => "to_f16(exp(f32(x)))".to_string(),
            UnaryOp::Exp => "exp(x)".to_string(),
        };
        self.map(&e, l, None, &l.shape, self.dtype)
    }
    fn reduce(
        &self,
        op: ReduceOp,
        l: &Layout,
        dim: Option<usize>,
        out_dtype: DType,
    ) -> Result<WgpuStorage> {
        if out_dtype != self.dtype {
            // Integer sums are i64 (`ReduceOp::out_dtype`, as PyTorch), which WGSL has not.
            return Err(unsupported("sum", out_dtype));
        }
        let c = self.copy_strided(l)?;
        let (outer, r, inner) = l.reduce_split(dim);
        let nout = outer * inner;
        if nout == 0 {
            return WgpuStorage::empty(&self.gpu, self.dtype, 0);
        }
        // Floats accumulate in f32 (f16 too, as on the CPU); i32 (max only) in i32.
        let acc = if self.dtype.is_float() {
            DType::F32
        } else {
            DType::I32
        };
        // Some drivers (llvmpipe) stop a shader loop after 65535 iterations: each thread
        // takes at most CHUNK / 256 elements, and long rows are split into parts that a
        // second pass combines.
        const CHUNK: usize = 256 * 8192;
        let parts = r.div_ceil(CHUNK).max(1);
        if parts == 1 {
            return c.reduce_pass(op, (outer, r, inner), r, 1, r, self.dtype);
        }
        let first = if op == ReduceOp::Max {
            ReduceOp::Max
        } else {
            ReduceOp::Sum
        };
        // partial[q * parts + part], in the accumulator's type; the last pass combines each
        // output's parts (the mean divides by r there).
        let partial = c.reduce_pass(first, (outer, r, inner), CHUNK, parts, 1, acc)?;
        partial.reduce_pass(op, (nout, parts, 1), parts, 1, r, self.dtype)
    }
    fn matmul(&self, rhs: &WgpuStorage, spec: &MatmulSpec) -> Result<WgpuStorage> {
        let MatmulSpec { bsz, m, n, k, a, b } = *spec;
        // The kernels index in u32 and run without naga's bounds checks and loop bounding,
        // which is safe only while every index and loop counter fits with room to spare.
        const LIMIT: usize = 1 << 31;
        let size = |x: usize, y: usize| bsz.checked_mul(x)?.checked_mul(y);
        if [size(m, k), size(k, n), size(m, n)]
            .iter()
            .any(|e| e.is_none_or(|e| e > LIMIT))
        {
            return Err(Error::invalid(
                "matmul",
                "operands or results above 2^31 elements are not supported on wgpu",
            ));
        }
        let out = WgpuStorage::empty(&self.gpu, self.dtype, bsz * m * n)?;
        if bsz * m * n == 0 {
            return Ok(out);
        }
        let cap = self
            .gpu
            .adapter
            .limits()
            .max_compute_workgroups_per_dimension as usize;
        if bsz > cap {
            return Err(Error::invalid(
                "matmul",
                format!("a batch of {bsz} matrices is more than this adapter's {cap} workgroups per dimension; split the batch"),
            ));
        }
        // Dense operands: a batch stride of 0 stays 0 (one matrix for every batch).
        let dense =
            |s: &WgpuStorage, st: (usize, usize, usize, usize), rows: usize, cols: usize| {
                let batch = if st.0 == 0 { 1 } else { bsz };
                let l = Layout {
                    shape: Shape::from((batch, rows, cols)),
                    strides: vec![st.0, st.1, st.2],
                    offset: st.3,
                };
                s.copy_strided(&l)
                    .map(|c| (c, if st.0 == 0 { 0 } else { rows * cols }))
            };
        let (da, sa) = dense(self, a, m, k)?;
        let (db, sb) = dense(rhs, b, k, n)?;
        let pb = self
            .gpu
            .params(&[m as u32, n as u32, k as u32, sa as u32, sb as u32])?;
        let kernel = matmul_kernel(&self.gpu, self.dtype, (m, n, k))?;
        if n.div_ceil(kernel.tile).max(m.div_ceil(kernel.tile)) > cap {
            return Err(Error::invalid(
                "matmul",
                format!("a {m}x{n} result needs more than this adapter's {cap} workgroups per dimension"),
            ));
        }
        let groups = (
            n.div_ceil(kernel.tile) as u32,
            m.div_ceil(kernel.tile) as u32,
            bsz as u32,
        );
        self.gpu.dispatch_with(
            &kernel.src,
            true,
            &[&da.buf, &db.buf, &out.buf, &pb],
            groups,
        )?;
        Ok(out)
    }
}
