//! WGSL source for the wgpu kernels: the prelude every shader starts with, dtype
//! conversions, the strided map, and the matmuls (register-blocked, and a simple reference).

use crate::{DType, Error, Result};

use super::choice::{matmul_choice, MatmulChoice};
use super::context::{WgpuContext, MAX_RANK};

/// What every shader starts with: `enable f16` where used, and conversions as the CPU does
/// them: f32 -> i32 saturates with NaN -> 0 (Rust's `as`; WGSL leaves NaN undefined), and
/// f32 -> f16 is the backend's IEEE conversion at run time (beyond f16's range it gives
/// infinity, as the `half` crate does; a test checks it on the adapter).
pub(super) fn prelude(f16: bool) -> String {
    let mut s = String::from(
        r#"fn isnan32(v: f32) -> bool { return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u; }
fn f32_to_i32(v: f32) -> i32 {
  if (isnan32(v)) { return 0; }
  if (v >= 2147483648.0) { return 2147483647; }
  if (v < -2147483648.0) { return bitcast<i32>(0x80000000u); }
  return i32(v);
}
"#,
    );
    if f16 {
        s = format!(
            r#"enable f16;
{s}fn to_f16(v: f32) -> f16 {{ return f16(v); }}
"#
        );
    }
    s
}

/// The WGSL expression converting `x` (of `from`) to `to`.
pub(super) fn convert(x: &str, from: DType, to: DType) -> String {
    use DType::*;
    match (from, to) {
        (a, b) if a == b => x.to_string(),
        (F32, I32) => format!("f32_to_i32({x})"),
        (F16, I32) => format!("f32_to_i32(f32({x}))"),
        (F32, F16) => format!("to_f16({x})"),
        (I32, F16) => format!("to_f16(f32({x}))"),
        _ => format!("f32({x})"),
    }
}

pub(super) const STRIDED: &str = r#"
@group(0) @binding(0) var<storage, read> a: array<TA>;
@group(0) @binding(1) var<storage, read> b: array<TB>;
@group(0) @binding(2) var<storage, read_write> o: array<TO>;
@group(0) @binding(3) var<storage, read> p: array<u32>;
// p: n, rank, offset a, offset b, dims[8], strides a[8], strides b[8], mode
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let i = (wg.y * nw.x + wg.x) * 256u + li;
  if (i >= p[0]) { return; }
  var r = i;
  var oa = p[2];
  var ob = p[3];
  // p[28]: 1 = both operands dense in the output's order, 2 = a dense and b one value
  // (a scalar), 0 = anything else: the per-dimension index arithmetic.
  if (p[28] == 1u) {
    oa = oa + i;
    ob = ob + i;
  } else if (p[28] == 2u) {
    oa = oa + i;
  } else {
    for (var d = i32(p[1]) - 1; d >= 0; d = d - 1) {
      let dim = p[4u + u32(d)];
      let c = r % dim;
      r = r / dim;
      oa = oa + c * p[12u + u32(d)];
      ob = ob + c * p[20u + u32(d)];
    }
  }
  let x = a[oa];
  let y = b[ob];
  o[i] = EXPR;
}
"#;

pub(super) fn strided_params(
    n: usize,
    dims: &[usize],
    sa: &[usize],
    oa: usize,
    sb: &[usize],
    ob: usize,
) -> Result<Vec<u32>> {
    let too_big = |v: usize| v > u32::MAX as usize;
    if too_big(n) || too_big(oa) || too_big(ob) || dims.len() > MAX_RANK {
        return Err(Error::invalid(
            "wgpu kernel",
            "tensors above 2^32 elements or 8 dimensions are not supported on wgpu",
        ));
    }
    let mut p = vec![0u32; 4 + 3 * MAX_RANK];
    p[0] = n as u32;
    p[1] = dims.len() as u32;
    p[2] = oa as u32;
    p[3] = ob as u32;
    for i in 0..dims.len() {
        p[4 + i] = dims[i] as u32;
        p[12 + i] = sa[i] as u32;
        p[20 + i] = sb[i] as u32;
    }
    Ok(p)
}

pub(super) struct MatmulKernel {
    pub src: String,
    /// Rows and columns of C per workgroup.
    pub tile: usize,
}

/// The matmul shader for `dtype`: floats accumulate in f32 (f16 is rounded once at the
/// end, as on the CPU), i32 in i32 (wrapping).
pub(super) fn matmul_kernel(
    gpu: &WgpuContext,
    dtype: DType,
    (m, n, k): (usize, usize, usize),
) -> Result<MatmulKernel> {
    let t = gpu.ty("matmul", dtype)?;
    let acc = if dtype.is_float() { "f32" } else { "i32" };
    let acc_dtype = if dtype.is_float() {
        DType::F32
    } else {
        DType::I32
    };
    // The register-blocked kernels are faster everywhere, lavapipe included (2.7x at N=256);
    // the simple one stays for comparisons, within llvmpipe's 65535 loop iterations. The
    // 128x128 kernel does 64 multiply-adds per 4 vec4 reads of workgroup memory (the 64x64
    // one 16 per 2) but runs a quarter as many workgroups: for large products on hardware
    // GPUs, which need many workgroups to fill their cores, and everywhere on software ones
    // (lavapipe: 1.2-1.4x the 64x64 kernel at N=256-512).
    let big = (m >= 1024 && n >= 1024) || gpu.is_software();
    let tile = match matmul_choice() {
        MatmulChoice::Simple if k < 65535 => 16,
        MatmulChoice::Blocked128 => 128,
        MatmulChoice::Auto if big => 128,
        _ => 64,
    };
    let body = if tile == 16 {
        MATMUL_SIMPLE.to_string()
    } else {
        blocked_matmul_wgsl(tile)
    };
    let src = prelude(dtype == DType::F16)
        + &body
            .replace("TYPE", t)
            .replace("ACC", acc)
            .replace("STORE", &convert("v", acc_dtype, dtype));
    Ok(MatmulKernel { src, tile })
}

/// A register-blocked matmul shader with `tile` x `tile` blocks of C per 16x16 workgroup
/// (`tile` is 64 or 128). Each thread computes (tile/64)^2 groups of 4x4 outputs, held in vec4
/// accumulators: rows 64g + 4y .. +3 and columns 64h + 4x .. +3 for its (x, y), so
/// neighbouring threads read neighbouring vec4s of workgroup memory. Per step along k the
/// workgroup stages a tile x BK panel of A and a BK x tile panel of B there (BK = 1024 / tile:
/// four elements per thread each, bounds-checked and zero outside, so any shape works); each
/// thread then reads 2 * (tile/64) vec4s per k and does 16 * (tile/64)^2 multiply-adds with
/// them. `workgroup_id.z` is the batch. TYPE, ACC and STORE are filled in per dtype.
pub(super) fn blocked_matmul_wgsl(tile: usize) -> String {
    let g = tile / 64;
    let bk = 1024 / tile;
    let vecs = tile / 4;
    let mut compute = String::new();
    for gi in 0..g {
        compute += &format!(
            "      let a{gi} = ta[kk * {vecs}u + {}u + lid.y];\n",
            gi * 16
        );
    }
    for gj in 0..g {
        compute += &format!(
            "      let b{gj} = tb[kk * {vecs}u + {}u + lid.x];\n",
            gj * 16
        );
    }
    for gi in 0..g {
        for gj in 0..g {
            for (i, c) in ["x", "y", "z", "w"].iter().enumerate() {
                let q = (gi * g + gj) * 4 + i;
                compute += &format!("      acc[{q}] = acc[{q}] + a{gi}.{c} * b{gj};\n");
            }
        }
    }
    format!(
        r#"
@group(0) @binding(0) var<storage, read> a: array<TYPE>;
@group(0) @binding(1) var<storage, read> b: array<TYPE>;
@group(0) @binding(2) var<storage, read_write> c: array<TYPE>;
@group(0) @binding(3) var<storage, read> p: array<u32>;
// p: m, n, k, batch stride of a, batch stride of b
// ta[kk * {vecs} + i]: rows 4i..4i+3 of the A panel at column kk; tb[kk * {vecs} + j]:
// columns 4j..4j+3 of the B panel at row kk.
var<workgroup> ta: array<vec4<ACC>, 256>;
var<workgroup> tb: array<vec4<ACC>, 256>;
@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {{
  let m = p[0]; let n = p[1]; let k = p[2];
  let z = wg.z;
  let ba = z * p[3];
  let bb = z * p[4];
  let row0 = wg.y * {tile}u;
  let col0 = wg.x * {tile}u;
  // acc[(gi * {g} + gj) * 4 + i]: row 64 gi + 4 lid.y + i, columns 64 gj + 4 lid.x ..
  var acc: array<vec4<ACC>, {nacc}>;
  for (var k0 = 0u; k0 < k; k0 = k0 + {bk}u) {{
    for (var s = 0u; s < 4u; s = s + 1u) {{
      let e = li + s * 256u;
      // A: consecutive threads read consecutive k of one row.
      let r = e / {bk}u;
      let kk = e % {bk}u;
      var va = ACC(0);
      if (row0 + r < m && k0 + kk < k) {{ va = ACC(a[ba + (row0 + r) * k + k0 + kk]); }}
      ta[kk * {vecs}u + r / 4u][r % 4u] = va;
      // B: consecutive threads read consecutive columns of one row.
      let kb = e / {tile}u;
      let cb = e % {tile}u;
      var vb = ACC(0);
      if (k0 + kb < k && col0 + cb < n) {{ vb = ACC(b[bb + (k0 + kb) * n + col0 + cb]); }}
      tb[kb * {vecs}u + cb / 4u][cb % 4u] = vb;
    }}
    workgroupBarrier();
    for (var kk = 0u; kk < {bk}u; kk = kk + 1u) {{
{compute}    }}
    workgroupBarrier();
  }}
  for (var gi = 0u; gi < {g}u; gi = gi + 1u) {{
    for (var i = 0u; i < 4u; i = i + 1u) {{
      let row = row0 + gi * 64u + lid.y * 4u + i;
      for (var gj = 0u; gj < {g}u; gj = gj + 1u) {{
        for (var j = 0u; j < 4u; j = j + 1u) {{
          let col = col0 + gj * 64u + lid.x * 4u + j;
          if (row < m && col < n) {{
            let v = acc[(gi * {g}u + gj) * 4u + i][j];
            c[z * m * n + row * n + col] = STORE;
          }}
        }}
      }}
    }}
  }}
}}
"#,
        nacc = g * g * 4,
    )
}

/// One thread per output, no shared memory: the plain reference kernel, for comparisons.
pub(super) const MATMUL_SIMPLE: &str = r#"
@group(0) @binding(0) var<storage, read> a: array<TYPE>;
@group(0) @binding(1) var<storage, read> b: array<TYPE>;
@group(0) @binding(2) var<storage, read_write> c: array<TYPE>;
@group(0) @binding(3) var<storage, read> p: array<u32>;
@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let m = p[0]; let n = p[1]; let k = p[2];
  let z = wg.z;
  let row = wg.y * 16u + lid.y;
  let col = wg.x * 16u + lid.x;
  if (row >= m || col >= n) { return; }
  let ra = z * p[3] + row * k;
  let cb = z * p[4] + col;
  var acc = ACC(0);
  for (var q = 0u; q < k; q = q + 1u) {
    acc = acc + ACC(a[ra + q]) * ACC(b[cb + q * n]);
  }
  let v = acc;
  c[z * m * n + row * n + col] = STORE;
}
"#;
