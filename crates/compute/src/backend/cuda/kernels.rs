//! accel's CUDA kernels: CUDA C generated here, one family per module, compiled at run time by
//! NVRTC to a CUBIN for the device's own architecture (`sm_90` on an H200), so no PTX newer than
//! the driver is ever handed to it. Compiled modules are cached in memory and on disk.
//!
//! The sources avoid every header (NVRTC ships none for half types in some versions): f16 is
//! converted with PTX `cvt` instructions, bf16 with bit operations.
//!
//! Naming: `bin_add_f32` (strided, broadcasting), `binc_add_f32` (contiguous), `un_exp_f32`,
//! `cast_f32_f16`, `red_sum_f32` / `redt_sum_f32` / `redp_sum_f32` + `redf_sum_f32`,
//! `fill_f32`, `arange_f32`, `uniform_f32`, `normal_f32`, `imatmul_i32`.

use std::fmt::Write;

#[cfg(test)]
pub(crate) use super::archs::ARCHS;
pub(crate) use super::archs::{arch_supported, arch_supported_by, parse_arch};
use crate::backend::ops::{BinaryOp, UnaryOp};
use crate::DType;

/// Most dimensions a strided kernel handles after merging (`Ix` below).
pub const MAX_RANK: usize = 8;

/// Threads per block of every elementwise kernel.
pub const BLOCK: u32 = 256;

/// The kernel families; each is one NVRTC program and one loaded module.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// Binary and unary elementwise ops.
    Elementwise,
    /// Dtype conversions and strided copies.
    Cast,
    /// Sum, mean and max.
    Reduce,
    /// Fill, arange and random numbers.
    Fill,
    /// Integer matmul (floats use cuBLAS).
    Matmul,
}

impl Family {
    /// Every family.
    #[cfg(test)]
    pub const ALL: [Family; 5] = [
        Family::Elementwise,
        Family::Cast,
        Family::Reduce,
        Family::Fill,
        Family::Matmul,
    ];

    /// The family's name, used for its program and cache file.
    pub fn name(self) -> &'static str {
        match self {
            Family::Elementwise => "elementwise",
            Family::Cast => "cast",
            Family::Reduce => "reduce",
            Family::Fill => "fill",
            Family::Matmul => "matmul",
        }
    }

    /// The CUDA C source of this family.
    pub fn source(self) -> String {
        let mut s = String::from(PRELUDE);
        match self {
            Family::Elementwise => elementwise(&mut s),
            Family::Cast => cast(&mut s),
            Family::Reduce => reduce(&mut s),
            Family::Fill => fill(&mut s),
            Family::Matmul => imatmul(&mut s),
        }
        s
    }
}

/// The passes of a reduction, each a kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReducePass {
    /// A block per output (`red_`).
    Block,
    /// A thread per output, for short rows (`redt_`).
    Thread,
    /// Long rows split into parts over the whole GPU (`redp_`).
    Parts,
    /// The parts combined (`redf_`).
    Combine,
}

/// One kernel, by what it computes: the key every launch names its kernel by. Its C name
/// (`name`) is the one the generators in this file write; a test checks that every key's name
/// is in its family's source, so a launch cannot ask for a kernel that does not exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// `op` over two strided views of `dtype`, broadcast.
    Binary { op: BinaryOp, dtype: DType },
    /// `op` over two dense operands of `dtype`.
    BinaryDense { op: BinaryOp, dtype: DType },
    /// `op` over dense f32 operands, four elements per thread.
    BinaryDenseF32x4 { op: BinaryOp },
    /// `op` over a strided view of `dtype`.
    Unary { op: UnaryOp, dtype: DType },
    /// A strided copy converting `from` to `to`.
    Cast { from: DType, to: DType },
    /// One pass of a sum (also the mean) or a max of `dtype`.
    Reduce {
        pass: ReducePass,
        max: bool,
        dtype: DType,
    },
    /// `n` copies of a value.
    Fill(DType),
    /// `start + i * step`.
    Arange(DType),
    /// Uniform random numbers.
    Uniform(DType),
    /// Normal random numbers.
    Normal(DType),
    /// Integer matmul.
    IntMatmul(DType),
}

impl Kernel {
    /// The family whose program holds this kernel.
    pub fn family(self) -> Family {
        match self {
            Kernel::Binary { .. }
            | Kernel::BinaryDense { .. }
            | Kernel::BinaryDenseF32x4 { .. }
            | Kernel::Unary { .. } => Family::Elementwise,
            Kernel::Cast { .. } => Family::Cast,
            Kernel::Reduce { .. } => Family::Reduce,
            Kernel::Fill(_) | Kernel::Arange(_) | Kernel::Uniform(_) | Kernel::Normal(_) => {
                Family::Fill
            }
            Kernel::IntMatmul(_) => Family::Matmul,
        }
    }

    /// The kernel's C name in its family's source.
    pub fn name(self) -> String {
        let unary = |op: UnaryOp| match op {
            UnaryOp::Neg => "neg",
            UnaryOp::Relu => "relu",
            UnaryOp::Exp => "exp",
        };
        match self {
            Kernel::Binary { op, dtype } => format!("bin_{}_{}", op.name(), tag(dtype)),
            Kernel::BinaryDense { op, dtype } => format!("binc_{}_{}", op.name(), tag(dtype)),
            Kernel::BinaryDenseF32x4 { op } => format!("binc4_{}_f32", op.name()),
            Kernel::Unary { op, dtype } => format!("un_{}_{}", unary(op), tag(dtype)),
            Kernel::Cast { from, to } => format!("cast_{}_{}", tag(from), tag(to)),
            Kernel::Reduce { pass, max, dtype } => {
                let pass = match pass {
                    ReducePass::Block => "red",
                    ReducePass::Thread => "redt",
                    ReducePass::Parts => "redp",
                    ReducePass::Combine => "redf",
                };
                let op = if max { "max" } else { "sum" };
                format!("{pass}_{op}_{}", tag(dtype))
            }
            Kernel::Fill(d) => format!("fill_{}", tag(d)),
            Kernel::Arange(d) => format!("arange_{}", tag(d)),
            Kernel::Uniform(d) => format!("uniform_{}", tag(d)),
            Kernel::Normal(d) => format!("normal_{}", tag(d)),
            Kernel::IntMatmul(d) => format!("imatmul_{}", tag(d)),
        }
    }

    /// Every kernel the storage may launch: what the generators must provide.
    #[cfg(test)]
    pub fn all() -> Vec<Kernel> {
        use crate::backend::ops::{BinaryOp as B, UnaryOp as U};
        let binary = [B::Add, B::Sub, B::Mul, B::Div, B::Maximum];
        let mut v = Vec::new();
        for dtype in ALL {
            for op in binary {
                v.push(Kernel::Binary { op, dtype });
                v.push(Kernel::BinaryDense { op, dtype });
            }
            v.push(Kernel::Unary { op: U::Neg, dtype });
            v.push(Kernel::Unary { op: U::Relu, dtype });
            if dtype.is_float() {
                v.push(Kernel::Unary { op: U::Exp, dtype });
                v.push(Kernel::Uniform(dtype));
                v.push(Kernel::Normal(dtype));
            }
            for to in ALL {
                v.push(Kernel::Cast { from: dtype, to });
            }
            for pass in [
                ReducePass::Block,
                ReducePass::Thread,
                ReducePass::Parts,
                ReducePass::Combine,
            ] {
                for max in [false, true] {
                    v.push(Kernel::Reduce { pass, max, dtype });
                }
            }
            v.push(Kernel::Fill(dtype));
            v.push(Kernel::Arange(dtype));
        }
        for op in binary {
            v.push(Kernel::BinaryDenseF32x4 { op });
        }
        v.push(Kernel::IntMatmul(DType::I32));
        v.push(Kernel::IntMatmul(DType::I64));
        v
    }
}

/// Every kernel name the storage may launch, with its family (for tests: each must be in the
/// family's generated source).
#[cfg(test)]
pub fn launched_kernels() -> Vec<(Family, String)> {
    Kernel::all()
        .into_iter()
        .map(|k| (k.family(), k.name()))
        .collect()
}

/// Short dtype names used in kernel names (`f32`).
pub fn tag(d: DType) -> &'static str {
    d.as_str()
}

const ALL: [DType; 6] = [
    DType::F16,
    DType::BF16,
    DType::F32,
    DType::F64,
    DType::I32,
    DType::I64,
];
const FLOATS: [DType; 4] = [DType::F16, DType::BF16, DType::F32, DType::F64];

/// (storage type, compute type, load macro, store macro).
fn ty(d: DType) -> (&'static str, &'static str, &'static str, &'static str) {
    match d {
        DType::F16 => ("unsigned short", "float", "h2f", "f2h"),
        DType::BF16 => ("unsigned short", "float", "b2f", "f2b"),
        DType::F32 => ("float", "float", "", ""),
        DType::F64 => ("double", "double", "", ""),
        DType::I32 => ("int", "int", "", ""),
        DType::I64 => ("long long", "long long", "", ""),
    }
}

/// CUDA C converting the double expression `x` to `d`'s storage type, rounding once.
fn from_double(d: DType, x: &str) -> String {
    let (t, _, _, _) = ty(d);
    match d {
        DType::F16 => format!("d2h({x})"),
        DType::BF16 => format!("d2b({x})"),
        _ => format!("({t})({x})"),
    }
}

const PRELUDE: &str = r#"
#define MAXR 8
struct Ix { long long n; int rank; int pad; long long dims[MAXR]; long long s0[MAXR]; long long s1[MAXR]; };
__device__ __forceinline__ float h2f(unsigned short h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ unsigned short f2h(float f) { unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ float b2f(unsigned short b) { return __uint_as_float(((unsigned int)b) << 16); }
__device__ __forceinline__ unsigned short f2b(float f) {
  unsigned int u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}
__device__ __forceinline__ unsigned short d2h(double d) { unsigned short h; asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(d)); return h; }
// Round to odd into f32, then to nearest-even bf16: one correct rounding from double.
__device__ __forceinline__ unsigned short d2b(double d) {
  float f = __double2float_rz(d);
  if ((double)f != d && f == f) f = __uint_as_float(__float_as_uint(f) | 1u);
  return f2b(f);
}
__device__ __forceinline__ void offs(const Ix& p, long long i, long long& o0, long long& o1) {
  o0 = 0; o1 = 0;
  for (int d = p.rank - 1; d >= 0; --d) {
    long long c = i % p.dims[d]; i /= p.dims[d];
    o0 += c * p.s0[d]; o1 += c * p.s1[d];
  }
}
#define GRID_LOOP(i, n) for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (long long)gridDim.x * blockDim.x)
// Float to integer as Rust's `as` and the CPU backend convert: toward zero, saturating, NaN to
// 0. A plain C cast leaves NaN and out-of-range values to the hardware (`cvt.rzi` gave INT_MIN
// for NaN on an H100).
__device__ __forceinline__ int d2i(double x) {
  return x != x ? 0 : x >= 2147483647.0 ? 2147483647 : x <= -2147483648.0 ? (-2147483647 - 1) : (int)x;
}
__device__ __forceinline__ long long d2ll(double x) {
  return x != x ? 0 : x >= 9223372036854775807.0 ? 9223372036854775807LL
       : x <= -9223372036854775808.0 ? (-9223372036854775807LL - 1) : (long long)x;
}
template <typename T> __device__ __forceinline__ T fmaxnan(T a, T b) { return (a != a || a > b) ? a : b; }
"#;

fn binop_expr(op: &str, float: bool) -> &'static str {
    match (op, float) {
        ("add", _) => "x + y",
        ("sub", _) => "x - y",
        ("mul", _) => "x * y",
        ("div", true) => "x / y",
        ("div", false) => "(y == 0 ? 0 : x / y)",
        ("maximum", _) => "fmaxnan(x, y)",
        _ => unreachable!("unknown binary op {op}"),
    }
}

/// Every binary op, typed: what the generators iterate.
const BINARY: [BinaryOp; 5] = [
    BinaryOp::Add,
    BinaryOp::Sub,
    BinaryOp::Mul,
    BinaryOp::Div,
    BinaryOp::Maximum,
];

/// Binary ops, as named in kernel names.
#[cfg(test)]
pub const BINARY_OPS: [&str; 5] = ["add", "sub", "mul", "div", "maximum"];

fn elementwise(s: &mut String) {
    for d in ALL {
        let (t, a, ld, st) = ty(d);
        for op in BINARY {
            let e = binop_expr(op.name(), d.is_float());
            let bin = Kernel::Binary { op, dtype: d }.name();
            let binc = Kernel::BinaryDense { op, dtype: d }.name();
            let _ = write!(
                s,
                r#"
extern "C" __global__ void {bin}(const {t}* __restrict__ a, const {t}* __restrict__ b, {t}* __restrict__ o, Ix p) {{
  GRID_LOOP(i, p.n) {{ long long oa, ob; offs(p, i, oa, ob); {a} x = {ld}(a[oa]); {a} y = {ld}(b[ob]); o[i] = {st}({e}); }}
}}
extern "C" __global__ void {binc}(const {t}* __restrict__ a, const {t}* __restrict__ b, {t}* __restrict__ o, long long n) {{
  GRID_LOOP(i, n) {{ {a} x = {ld}(a[i]); {a} y = {ld}(b[i]); o[i] = {st}({e}); }}
}}
"#
            );
        }
        let mut un = vec![
            (UnaryOp::Neg, "-x"),
            (UnaryOp::Relu, "(x < 0 ? ({a})0 : x)"),
        ];
        if d.is_float() {
            un.push((UnaryOp::Exp, "exp(x)"));
        }
        for (op, e) in un {
            let e = e.replace("{a}", a);
            let name = Kernel::Unary { op, dtype: d }.name();
            let _ = write!(
                s,
                r#"
extern "C" __global__ void {name}(const {t}* __restrict__ a, {t}* __restrict__ o, Ix p) {{
  GRID_LOOP(i, p.n) {{ long long oa, ob; offs(p, i, oa, ob); {a} x = {ld}(a[oa]); o[i] = {st}({e}); }}
}}
"#
            );
        }
    }
    // The bandwidth-bound case worth vectorising: contiguous f32 with 16-byte aligned
    // pointers and a length divisible by 4.
    for op in BINARY {
        let e = binop_expr(op.name(), true);
        let name = Kernel::BinaryDenseF32x4 { op }.name();
        let _ = write!(
            s,
            r#"
extern "C" __global__ void {name}(const float4* __restrict__ a, const float4* __restrict__ b, float4* __restrict__ o, long long n4) {{
  GRID_LOOP(i, n4) {{
    float4 u = a[i], v = b[i], r; float x, y;
    x = u.x; y = v.x; r.x = {e}; x = u.y; y = v.y; r.y = {e};
    x = u.z; y = v.z; r.z = {e}; x = u.w; y = v.w; r.w = {e};
    o[i] = r;
  }}
}}
"#
        );
    }
}

fn cast(s: &mut String) {
    for src in ALL {
        for dst in ALL {
            let (ts, as_, lds, _) = ty(src);
            let (td, ad, _, _) = ty(dst);
            let conv = if src == dst {
                // A copy: move the bits, convert nothing.
                "a[oa]".to_string()
            } else if !src.is_float() && !dst.is_float() {
                // Integer narrowing keeps the low bits (two's complement), as PyTorch and C
                // do; widening keeps the value.
                format!("({td})(a[oa])")
            } else {
                // Through double, as the CPU backend converts; to a half type straight from
                // double, rounding once; to an integer saturating, NaN to 0.
                let x = format!("(double)(({as_}){lds}(a[oa]))");
                match dst {
                    DType::F16 => format!("d2h({x})"),
                    DType::BF16 => format!("d2b({x})"),
                    DType::I32 => format!("d2i({x})"),
                    DType::I64 => format!("d2ll({x})"),
                    _ => format!("({ad})({x})"),
                }
            };
            let _ = write!(
                s,
                r#"
extern "C" __global__ void {name}(const {ts}* __restrict__ a, {td}* __restrict__ o, Ix p) {{
  GRID_LOOP(i, p.n) {{ long long oa, ob; offs(p, i, oa, ob); o[i] = {conv}; }}
}}
"#,
                name = Kernel::Cast { from: src, to: dst }.name(),
            );
        }
    }
}

/// The dtype a reduction writes: integer sums widen to i64, as in PyTorch.
pub fn reduce_out(op: &str, d: DType) -> DType {
    use crate::backend::ops::ReduceOp;
    let op = if op == "max" {
        ReduceOp::Max
    } else {
        ReduceOp::Sum
    };
    op.out_dtype(d)
}

/// Reduction kernels (mean is sum with a flag).
pub const REDUCE_OPS: [&str; 2] = ["sum", "max"];

fn reduce(s: &mut String) {
    for d in ALL {
        let (t, a, ld, _) = ty(d);
        for op in REDUCE_OPS {
            let od = reduce_out(op, d);
            let max = op == "max";
            let pass = |pass| {
                Kernel::Reduce {
                    pass,
                    max,
                    dtype: d,
                }
                .name()
            };
            let (red, redt) = (pass(ReducePass::Block), pass(ReducePass::Thread));
            let (redp, redf) = (pass(ReducePass::Parts), pass(ReducePass::Combine));
            let (to, _, _, sto) = ty(od);
            // Accumulate integer sums in 64 bits.
            let acc = if op == "sum" && !d.is_float() {
                "long long"
            } else {
                a
            };
            let (init, comb) = match op {
                "sum" => ("0", "(u + v)"),
                _ => (
                    match d {
                        DType::I32 => "(-2147483647 - 1)",
                        DType::I64 => "(-9223372036854775807LL - 1)",
                        _ => "(-1.0 / 0.0)",
                    },
                    "fmaxnan(u, v)",
                ),
            };
            let _ = write!(
                s,
                r#"
#define COMB(u, v) {comb}
// One block per output: threads stride over the reduced dimension, then a tree in shared memory.
extern "C" __global__ void {red}(const {t}* __restrict__ x, {to}* __restrict__ o, long long outer, long long r, long long inner, int mean) {{
  __shared__ {acc} sh[{BLOCK}];
  long long nout = outer * inner;
  for (long long q = blockIdx.x; q < nout; q += gridDim.x) {{
    long long a0 = q / inner, c = q - a0 * inner;
    const {t}* base = x + a0 * r * inner + c;
    {acc} u = ({acc}){init};
    for (long long j = threadIdx.x; j < r; j += blockDim.x) {{ {acc} v = ({acc}){ld}(base[j * inner]); u = COMB(u, v); }}
    sh[threadIdx.x] = u; __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {{
      if (threadIdx.x < w) {{ {acc} v = sh[threadIdx.x + w]; u = sh[threadIdx.x]; sh[threadIdx.x] = COMB(u, v); }}
      __syncthreads();
    }}
    if (threadIdx.x == 0) {{ {acc} v = sh[0]; if (mean) v = v / ({acc})r; o[q] = {sto}(v); }}
    __syncthreads();
  }}
}}
// One thread per output, for short reduced dimensions.
extern "C" __global__ void {redt}(const {t}* __restrict__ x, {to}* __restrict__ o, long long outer, long long r, long long inner, int mean) {{
  GRID_LOOP(q, outer * inner) {{
    long long a0 = q / inner, c = q - a0 * inner;
    const {t}* base = x + a0 * r * inner + c;
    {acc} u = ({acc}){init};
    for (long long j = 0; j < r; ++j) {{ {acc} v = ({acc}){ld}(base[j * inner]); u = COMB(u, v); }}
    if (mean) u = u / ({acc})r;
    o[q] = {sto}(u);
  }}
}}
// Long reductions into few outputs: blockIdx.y splits the reduced dimension into parts,
// each writing a partial result; redf combines the parts.
extern "C" __global__ void {redp}(const {t}* __restrict__ x, {acc}* __restrict__ part, long long outer, long long r, long long inner, long long chunk) {{
  __shared__ {acc} sh[{BLOCK}];
  long long nout = outer * inner;
  long long j0 = (long long)blockIdx.y * chunk, j1 = min(r, j0 + chunk);
  for (long long q = blockIdx.x; q < nout; q += gridDim.x) {{
    long long a0 = q / inner, c = q - a0 * inner;
    const {t}* base = x + a0 * r * inner + c;
    {acc} u = ({acc}){init};
    for (long long j = j0 + threadIdx.x; j < j1; j += blockDim.x) {{ {acc} v = ({acc}){ld}(base[j * inner]); u = COMB(u, v); }}
    sh[threadIdx.x] = u; __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {{
      if (threadIdx.x < w) {{ {acc} v = sh[threadIdx.x + w]; u = sh[threadIdx.x]; sh[threadIdx.x] = COMB(u, v); }}
      __syncthreads();
    }}
    if (threadIdx.x == 0) part[q * gridDim.y + blockIdx.y] = sh[0];
    __syncthreads();
  }}
}}
extern "C" __global__ void {redf}(const {acc}* __restrict__ part, {to}* __restrict__ o, long long nout, long long parts, long long r, int mean) {{
  GRID_LOOP(q, nout) {{
    {acc} u = ({acc}){init};
    for (long long j = 0; j < parts; ++j) {{ {acc} v = part[q * parts + j]; u = COMB(u, v); }}
    if (mean) u = u / ({acc})r;
    o[q] = {sto}(u);
  }}
}}
#undef COMB
"#
            );
        }
    }
}

fn fill(s: &mut String) {
    let _ = write!(
        s,
        r#"
// A counter-based generator (SplitMix64 of seed and index): the same seed gives the same
// numbers whatever the launch shape.
__device__ __forceinline__ unsigned long long mix64(unsigned long long z) {{
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}}
__device__ __forceinline__ double unit(unsigned long long seed, unsigned long long i) {{
  return (double)(mix64(seed ^ mix64(i)) >> 11) * (1.0 / 9007199254740992.0);
}}
"#
    );
    for d in ALL {
        let (t, _, _, _) = ty(d);
        let fill = from_double(d, "v");
        let (n_fill, n_arange) = (Kernel::Fill(d).name(), Kernel::Arange(d).name());
        // Multiply and add rounded apart, as the CPU computes start + i * step.
        let ar = from_double(d, "__dadd_rn(start, __dmul_rn((double)i, step))");
        let _ = write!(
            s,
            r#"
extern "C" __global__ void {n_fill}({t}* __restrict__ o, long long n, double v) {{
  {t} w = {fill};
  GRID_LOOP(i, n) o[i] = w;
}}
extern "C" __global__ void {n_arange}({t}* __restrict__ o, long long n, double start, double step) {{
  GRID_LOOP(i, n) o[i] = {ar};
}}
"#
        );
    }
    for d in FLOATS {
        let (t, _, _, _) = ty(d);
        let u = from_double(d, "lo + (hi - lo) * unit(seed, (unsigned long long)i)");
        let z = from_double(d, "mean + std * z");
        let (n_uniform, n_normal) = (Kernel::Uniform(d).name(), Kernel::Normal(d).name());
        let _ = write!(
            s,
            r#"
extern "C" __global__ void {n_uniform}({t}* __restrict__ o, long long n, unsigned long long seed, double lo, double hi) {{
  GRID_LOOP(i, n) o[i] = {u};
}}
extern "C" __global__ void {n_normal}({t}* __restrict__ o, long long n, unsigned long long seed, double mean, double std) {{
  // Box-Muller on two numbers of the stream; 1 - u keeps the logarithm finite.
  GRID_LOOP(i, n) {{
    double u1 = 1.0 - unit(seed, 2ULL * i), u2 = unit(seed, 2ULL * i + 1);
    double z = sqrt(-2.0 * log(u1)) * cospi(2.0 * u2);
    o[i] = {z};
  }}
}}
"#
        );
    }
}

fn imatmul(s: &mut String) {
    // Integer matmul (cuBLAS has none that matches PyTorch's wrapping semantics): 16x16 tiles
    // through shared memory; blockIdx.z is the batch. Strides in elements.
    // Products and sums accumulate in the unsigned type of the same width: signed overflow is
    // undefined in C++, unsigned arithmetic wraps, and converting back gives two's complement.
    for d in [DType::I32, DType::I64] {
        let (t, _, _, _) = ty(d);
        let u = if d == DType::I32 {
            "unsigned int"
        } else {
            "unsigned long long"
        };
        let name = Kernel::IntMatmul(d).name();
        let _ = write!(
            s,
            r#"
extern "C" __global__ void {name}(const {t}* __restrict__ a, const {t}* __restrict__ b, {t}* __restrict__ c,
    long long batch, long long m, long long n, long long k,
    long long sab, long long sar, long long sac, long long sbb, long long sbr, long long sbc) {{
  __shared__ {t} ta[16][17];
  __shared__ {t} tb[16][17];
  // Grid-stride over row tiles (y) and batches (z): each is capped at 65535 blocks.
  for (long long z = blockIdx.z; z < batch; z += gridDim.z) {{
  const {t}* A = a + z * sab; const {t}* B = b + z * sbb; {t}* C = c + z * m * n;
  for (long long by = blockIdx.y; by * 16 < m; by += gridDim.y) {{
  long long row = by * 16 + threadIdx.y, col = (long long)blockIdx.x * 16 + threadIdx.x;
  {u} acc = 0;
  for (long long k0 = 0; k0 < k; k0 += 16) {{
    long long ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
    ta[threadIdx.y][threadIdx.x] = (row < m && ka < k) ? A[row * sar + ka * sac] : ({t})0;
    tb[threadIdx.y][threadIdx.x] = (kb < k && col < n) ? B[kb * sbr + col * sbc] : ({t})0;
    __syncthreads();
    #pragma unroll
    for (int q = 0; q < 16; ++q) acc += ({u})ta[threadIdx.y][q] * ({u})tb[q][threadIdx.x];
    __syncthreads();
  }}
  if (row < m && col < n) C[row * n + col] = ({t})acc;
  }}
  }}
}}
"#
        );
    }
}

/// Compiles CUDA C to a CUBIN for `arch` (`sm_90`) with NVRTC. NVRTC needs no GPU. An
/// architecture the loaded NVRTC cannot target is an error naming both and the fix, before
/// NVRTC is asked.
#[cfg(feature = "cuda")]
pub fn compile(src: &str, name: &str, arch: &str) -> Result<Vec<u8>, String> {
    use cudarc::nvrtc::{result, sys};
    use std::ffi::{CStr, CString};

    let nvrtc = crate::backend::native::libs::library(crate::backend::native::libs::LibName::Nvrtc)
        .filter(|l| l.is_loaded());
    let Some(lib) = nvrtc else {
        let why =
            crate::backend::native::libs::library(crate::backend::native::libs::LibName::Nvrtc)
                .and_then(|l| l.problem.clone())
                .unwrap_or_default();
        return Err(format!("NVRTC is not available: {why}"));
    };
    if let (Some(v), Some(cc)) = (&lib.version, parse_arch(arch)) {
        arch_supported_by(cc, v)?;
    }
    // cudarc opens NVRTC by its own list of names: check it bound the file accel chose.
    // SAFETY: libnvrtc is loaded (checked above), so culib() finds it and does not panic; the
    // symbol is only looked up, never called here.
    let bound = unsafe {
        sys::culib()
            .get::<*const std::ffi::c_void>("nvrtcVersion")
            .ok()
            .map(|s| *s)
    };
    if let Some(addr) = bound {
        crate::backend::native::libs::check_bound(
            crate::backend::native::libs::LibName::Nvrtc,
            addr,
        )?;
    }
    let csrc = CString::new(src).map_err(|_| "kernel source holds a NUL byte".to_string())?;
    let cname = CString::new(format!("{name}.cu")).map_err(|e| e.to_string())?;
    let prog = result::create_program(&csrc, Some(&cname)).map_err(|e| format!("{e:?}"))?;
    let opts = [
        format!("--gpu-architecture={arch}"),
        "--std=c++17".to_string(),
        "--fmad=true".to_string(),
    ];
    // SAFETY: libnvrtc is loaded (checked at the top: `library("nvrtc")` is_loaded, dlopened
    // for good by libs.rs, so cudarc's lazy loader does not panic); `prog` comes from
    // create_program above, is used only on this thread and destroyed once, at the end.
    let compiled = unsafe { result::compile_program(prog, &opts) };
    let out = match compiled {
        // SAFETY: `prog` is the live program compiled just above; `size` is a local
        // out-pointer; nvrtcGetCUBIN writes exactly the `size` bytes nvrtcGetCUBINSize
        // reported, into `buf`, which holds `size` bytes (size > 0 checked).
        Ok(()) => unsafe {
            let mut size = 0usize;
            let r = sys::nvrtcGetCUBINSize(prog, &mut size);
            if r != sys::nvrtcResult::NVRTC_SUCCESS || size == 0 {
                Err(format!(
                    "nvrtcGetCUBINSize failed ({r:?}); is {arch} a real architecture?"
                ))
            } else {
                let mut buf = vec![0u8; size];
                let r = sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr() as *mut std::ffi::c_char);
                if r == sys::nvrtcResult::NVRTC_SUCCESS {
                    Ok(buf)
                } else {
                    Err(format!("nvrtcGetCUBIN failed ({r:?})"))
                }
            }
        },
        Err(e) => {
            // SAFETY: `prog` is live (destroyed only below); cudarc sizes the buffer with
            // nvrtcGetProgramLogSize before filling it.
            let log = unsafe { result::get_program_log(prog) }
                .map(|l| {
                    // Up to the first NUL, checked (an empty log is just empty).
                    let bytes: Vec<u8> = l.iter().map(|&c| c as u8).collect();
                    match CStr::from_bytes_until_nul(&bytes) {
                        Ok(c) => c.to_string_lossy().into_owned(),
                        Err(_) => String::from_utf8_lossy(&bytes).into_owned(),
                    }
                })
                .unwrap_or_default();
            Err(format!(
                "NVRTC could not compile the {name} kernels for {arch} ({e:?}): {}",
                log.lines().take(20).collect::<Vec<_>>().join("\n")
            ))
        }
    };
    // SAFETY: `prog` from create_program, not destroyed before; nothing uses it after this
    // (the CUBIN and log were copied into owned buffers above).
    unsafe {
        let _ = result::destroy_program(prog);
    }
    out
}
