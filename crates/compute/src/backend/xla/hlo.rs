//! StableHLO programs for accel's ops, as MLIR text. Every tensor lives on an XLA device as a
//! dense 1-D buffer; a program takes such buffers, rebuilds each operand's view (slice,
//! reshape, transpose) from its [`Layout`], computes, and returns a dense 1-D result.
//!
//! The text is also the cache key: the same op on the same shapes and dtypes gives the same
//! program, compiled once.

use std::fmt::Write;

use crate::backend::ops::{BinaryOp, MatmulSpec, ReduceOp, UnaryOp};
use crate::base::shape::Layout;
use crate::{DType, Shape};

/// MLIR element type: accel's short dtype names are MLIR's (`f32`, `bf16`, `i64`).
pub fn ty(d: DType) -> &'static str {
    d.as_str()
}

/// `tensor<2x3xf32>`; `tensor<f32>` for a scalar.
pub fn tensor(dims: &[usize], d: DType) -> String {
    let mut s = String::from("tensor<");
    for x in dims {
        let _ = write!(s, "{x}x");
    }
    s.push_str(ty(d));
    s.push('>');
    s
}

fn list(v: &[usize]) -> String {
    v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A program under construction: arguments, SSA statements, one result.
pub struct Program {
    args: Vec<String>,
    body: String,
    next: usize,
}

/// A value in the program: its SSA name, dims and dtype.
#[derive(Clone)]
pub struct Val {
    pub name: String,
    pub dims: Vec<usize>,
    pub dtype: DType,
}

impl Val {
    fn t(&self) -> String {
        tensor(&self.dims, self.dtype)
    }
}

impl Default for Program {
    fn default() -> Self {
        Program::new()
    }
}

impl Program {
    pub fn new() -> Program {
        Program {
            args: Vec::new(),
            body: String::new(),
            next: 0,
        }
    }

    /// A new argument: a dense 1-D buffer of `len` elements.
    pub fn arg(&mut self, len: usize, dtype: DType) -> Val {
        let name = format!("%arg{}", self.args.len());
        self.args.push(format!("{name}: {}", tensor(&[len], dtype)));
        Val {
            name,
            dims: vec![len],
            dtype,
        }
    }

    fn emit(&mut self, dims: Vec<usize>, dtype: DType, rhs: impl FnOnce(&str) -> String) -> Val {
        let name = format!("%v{}", self.next);
        self.next += 1;
        let t = tensor(&dims, dtype);
        let line = rhs(&t);
        let _ = writeln!(self.body, "    {name} = {line}");
        Val { name, dims, dtype }
    }

    pub fn reshape(&mut self, x: &Val, dims: &[usize]) -> Val {
        if x.dims == dims {
            return x.clone();
        }
        let src = x.t();
        self.emit(dims.to_vec(), x.dtype, |t| {
            format!("stablehlo.reshape {} : ({src}) -> {t}", x.name)
        })
    }

    pub fn slice(&mut self, x: &Val, start: usize, len: usize) -> Val {
        if start == 0 && len == x.dims[0] {
            return x.clone();
        }
        let src = x.t();
        self.emit(vec![len], x.dtype, |t| {
            format!(
                "\"stablehlo.slice\"({}) {{start_indices = array<i64: {start}>, limit_indices = array<i64: {}>, strides = array<i64: 1>}} : ({src}) -> {t}",
                x.name,
                start + len
            )
        })
    }

    /// Result dim i is operand dim perm[i].
    pub fn transpose(&mut self, x: &Val, perm: &[usize]) -> Val {
        if perm.iter().enumerate().all(|(i, &p)| i == p) {
            return x.clone();
        }
        let dims: Vec<usize> = perm.iter().map(|&p| x.dims[p]).collect();
        let src = x.t();
        self.emit(dims, x.dtype, |t| {
            format!(
                "stablehlo.transpose {}, dims = [{}] : ({src}) -> {t}",
                x.name,
                list(perm)
            )
        })
    }

    /// Broadcasts `x` to `dims`, aligning trailing dimensions (NumPy's rule).
    pub fn broadcast_to(&mut self, x: &Val, dims: &[usize]) -> Val {
        if x.dims == dims {
            return x.clone();
        }
        let extra = dims.len() - x.dims.len();
        let map: Vec<usize> = (0..x.dims.len()).map(|i| i + extra).collect();
        let src = x.t();
        self.emit(dims.to_vec(), x.dtype, |t| {
            format!(
                "stablehlo.broadcast_in_dim {}, dims = [{}] : ({src}) -> {t}",
                x.name,
                list(&map)
            )
        })
    }

    pub fn convert(&mut self, x: &Val, dtype: DType) -> Val {
        if x.dtype == dtype {
            return x.clone();
        }
        if x.dtype == DType::F64 && matches!(dtype, DType::F16 | DType::BF16) {
            let odd = self.f32_rounded_to_odd(x);
            return self.convert(&odd, dtype);
        }
        let src = x.t();
        self.emit(x.dims.clone(), dtype, |t| {
            format!("stablehlo.convert {} : ({src}) -> {t}", x.name)
        })
    }

    /// `x` (f64) to f32 rounded to odd: of the two f32 values around `x`, the one whose last
    /// significand bit is 1, where `x` is not exact in f32. Rounded again to a half type
    /// (11 or 8 bits, far fewer than f32's 24), that is the one correct rounding from f64,
    /// as the CPU backend's casts give; XLA's CPU plugin converts f64 to f16 through f32 to
    /// nearest, twice rounded (0.1006... became 0.10070800781 where the f16 nearest to the
    /// f64 value is 0.10064697265625).
    fn f32_rounded_to_odd(&mut self, x: &Val) -> Val {
        let f32_t = tensor(&x.dims, DType::F32);
        let (f64_t, i32_t) = (x.t(), tensor(&x.dims, DType::I32));
        let i1_t = f32_t.replace("f32", "i1");
        let mut line = |rhs: String| {
            let name = format!("%v{}", self.next);
            self.next += 1;
            let _ = writeln!(self.body, "    {name} = {rhs}");
            name
        };
        let near = line(format!(
            "stablehlo.convert {} : ({f64_t}) -> {f32_t}",
            x.name
        ));
        let back = line(format!("stablehlo.convert {near} : ({f32_t}) -> {f64_t}"));
        // NaN is never equal to itself: "inexact", and a NaN with its last bit set is NaN.
        let inexact = line(format!(
            "stablehlo.compare NE, {back}, {} : ({f64_t}, {f64_t}) -> {i1_t}",
            x.name
        ));
        let bits = line(format!(
            "stablehlo.bitcast_convert {near} : ({f32_t}) -> {i32_t}"
        ));
        let one = line(format!("stablehlo.constant dense<1> : {i32_t}"));
        let zero = line(format!("stablehlo.constant dense<0> : {i32_t}"));
        let last = line(format!("stablehlo.and {bits}, {one} : {i32_t}"));
        let even = line(format!(
            "stablehlo.compare EQ, {last}, {zero} : ({i32_t}, {i32_t}) -> {i1_t}"
        ));
        let fix = line(format!("stablehlo.and {inexact}, {even} : {i1_t}"));
        // The other neighbour is one step of the magnitude towards x: the bits are
        // sign-magnitude, so down where the nearest is larger in magnitude, else up
        // (infinity, past f32's largest, steps down to it: still infinite as a half type).
        let abs_back = line(format!("stablehlo.abs {back} : {f64_t}"));
        let abs_x = line(format!("stablehlo.abs {} : {f64_t}", x.name));
        let over = line(format!(
            "stablehlo.compare GT, {abs_back}, {abs_x} : ({f64_t}, {f64_t}) -> {i1_t}"
        ));
        let down = line(format!("stablehlo.subtract {bits}, {one} : {i32_t}"));
        let up = line(format!("stablehlo.add {bits}, {one} : {i32_t}"));
        let step = line(format!(
            "stablehlo.select {over}, {down}, {up} : {i1_t}, {i32_t}"
        ));
        let odd = line(format!(
            "stablehlo.select {fix}, {step}, {bits} : {i1_t}, {i32_t}"
        ));
        let name = line(format!(
            "stablehlo.bitcast_convert {odd} : ({i32_t}) -> {f32_t}"
        ));
        Val {
            name,
            dims: x.dims.clone(),
            dtype: DType::F32,
        }
    }

    /// A scalar constant broadcast to `dims`.
    pub fn constant(&mut self, value: f64, dims: &[usize], dtype: DType) -> Val {
        let lit = literal(value, dtype);
        let c = self.emit(vec![], dtype, |t| {
            format!("stablehlo.constant dense<{lit}> : {t}")
        });
        if dims.is_empty() {
            return c;
        }
        let src = c.t();
        self.emit(dims.to_vec(), dtype, |t| {
            format!(
                "stablehlo.broadcast_in_dim {}, dims = [] : ({src}) -> {t}",
                c.name
            )
        })
    }

    /// An elementwise op of one or two operands of equal dims (`stablehlo.add` ...).
    pub fn elementwise(&mut self, op: &str, xs: &[&Val]) -> Val {
        let names: Vec<&str> = xs.iter().map(|x| x.name.as_str()).collect();
        let x = xs[0];
        self.emit(x.dims.clone(), x.dtype, |t| {
            format!("stablehlo.{op} {} : {t}", names.join(", "))
        })
    }

    /// Reduces `dims` of `x` with `op` (`add` or `maximum`) from `init`.
    pub fn reduce(&mut self, x: &Val, dims: &[usize], op: &str, init: f64) -> Val {
        // Reducing over no dimension (a 0-d tensor) is the identity; StableHLO's parser also
        // rejects an empty `array<i64: >`.
        if dims.is_empty() {
            return x.clone();
        }
        let init = self.constant(init, &[], x.dtype);
        let out: Vec<usize> = (0..x.dims.len())
            .filter(|d| !dims.contains(d))
            .map(|d| x.dims[d])
            .collect();
        let (src, s) = (x.t(), tensor(&[], x.dtype));
        self.emit(out, x.dtype, |t| {
            format!(
                "\"stablehlo.reduce\"({}, {}) ({{\n      ^bb0(%a: {s}, %b: {s}):\n        %r = stablehlo.{op} %a, %b : {s}\n        stablehlo.return %r : {s}\n    }}) {{dimensions = array<i64: {}>}} : ({src}, {s}) -> {t}",
                x.name,
                init.name,
                list(dims)
            )
        })
    }

    /// 1 where `x` is NaN, else 0, in `x`'s dtype.
    pub fn isnan(&mut self, x: &Val) -> Val {
        let bool_t = x.t().replace(ty(x.dtype), "i1");
        let src = x.t();
        let name = format!("%v{}", self.next);
        self.next += 1;
        let _ = writeln!(
            self.body,
            "    {name} = stablehlo.compare NE, {0}, {0} : ({src}, {src}) -> {bool_t}",
            x.name
        );
        let b = Val {
            name,
            dims: x.dims.clone(),
            dtype: x.dtype,
        };
        self.emit(x.dims.clone(), x.dtype, |t| {
            format!("stablehlo.convert {} : ({bool_t}) -> {t}", b.name)
        })
    }

    /// Where `flag` > 0, NaN; else `x` (same dims and dtype).
    pub fn nan_where(&mut self, flag: &Val, x: &Val) -> Val {
        let zero = self.constant(0.0, &x.dims, x.dtype);
        let nan = self.constant(f64::NAN, &x.dims, x.dtype);
        let bool_t = x.t().replace(ty(x.dtype), "i1");
        let t = x.t();
        let name = format!("%v{}", self.next);
        self.next += 1;
        let _ = writeln!(
            self.body,
            "    {name} = stablehlo.compare GT, {}, {} : ({t}, {t}) -> {bool_t}",
            flag.name, zero.name
        );
        self.emit(x.dims.clone(), x.dtype, |t| {
            format!(
                "stablehlo.select {name}, {}, {} : {bool_t}, {t}",
                nan.name, x.name
            )
        })
    }

    /// Batched matrix product: `a` is (batch, m, k) or (m, k), `b` likewise (k, n).
    pub fn dot(&mut self, a: &Val, b: &Val) -> Val {
        let batched = a.dims.len() == 3;
        let (ta, tb) = (a.t(), b.t());
        let dims = if batched {
            vec![a.dims[0], a.dims[1], b.dims[2]]
        } else {
            vec![a.dims[0], b.dims[1]]
        };
        let nums = if batched {
            "batching_dims = [0] x [0], contracting_dims = [2] x [1]"
        } else {
            "contracting_dims = [1] x [0]"
        };
        // f32 means f32: without a precision, XLA multiplies f32 in TF32 on NVIDIA GPUs and in
        // bf16 passes on TPUs. HIGHEST asks for full f32, unless the user allowed TF32
        // (`accelkit::cuda::set_allow_tf32`, PyTorch's `allow_tf32`).
        let precision = if a.dtype == DType::F32 && !crate::backend::native::settings::allow_tf32()
        {
            ", precision = [HIGHEST, HIGHEST]"
        } else {
            ""
        };
        self.emit(dims, a.dtype, |t| {
            format!(
                "stablehlo.dot_general {}, {}, {nums}{precision} : ({ta}, {tb}) -> {t}",
                a.name, b.name
            )
        })
    }

    /// The operand's view as a value of its shape, from its dense 1-D buffer; None when the
    /// view is not a permutation of a dense block (the caller copies through the host).
    pub fn view(&mut self, buf: &Val, l: &Layout) -> Option<Val> {
        let shape = l.shape.dims();
        let n: usize = shape.iter().product();
        let flat = self.slice(buf, l.offset, n);
        if l.is_contiguous() {
            return Some(self.reshape(&flat, shape));
        }
        // Dimensions of size > 1, ordered by decreasing stride, must tile a dense block.
        let big: Vec<usize> = (0..shape.len()).filter(|&d| shape[d] != 1).collect();
        let mut order = big.clone();
        order.sort_by(|&x, &y| l.strides[y].cmp(&l.strides[x]));
        let mut expect = 1;
        for &d in order.iter().rev() {
            if l.strides[d] != expect {
                return None;
            }
            expect *= shape[d];
        }
        let permuted: Vec<usize> = order.iter().map(|&d| shape[d]).collect();
        let block = self.reshape(&flat, &permuted);
        let perm: Vec<usize> = big
            .iter()
            .map(|d| order.iter().position(|o| o == d).expect("same set"))
            .collect();
        let t = self.transpose(&block, &perm);
        Some(self.reshape(&t, shape))
    }

    /// The finished module, returning `out` flattened to 1-D.
    pub fn finish(mut self, out: &Val) -> (String, usize) {
        let n: usize = out.dims.iter().product();
        let flat = self.reshape(out, &[n]);
        let rt = flat.t();
        let text = format!(
            "module @accel {{\n  func.func public @main({}) -> {rt} {{\n{}    return {} : {rt}\n  }}\n}}\n",
            self.args.join(", "),
            self.body,
            flat.name
        );
        (text, n)
    }
}

/// An MLIR literal of `value` in `dtype` (infinities as hex bit patterns).
fn literal(value: f64, dtype: DType) -> String {
    match dtype {
        DType::I32 | DType::I64 => format!("{}", value as i64),
        _ if value.is_nan() => match dtype {
            DType::F16 => "0x7E00".into(),
            DType::BF16 => "0x7FC0".into(),
            DType::F32 => "0x7FC00000".into(),
            _ => "0x7FF8000000000000".into(),
        },
        _ if value == f64::NEG_INFINITY => match dtype {
            DType::F16 => "0xFC00".into(),
            DType::BF16 => "0xFF80".into(),
            DType::F32 => "0xFF800000".into(),
            _ => "0xFFF0000000000000".into(),
        },
        _ if value == f64::INFINITY => match dtype {
            DType::F16 => "0x7C00".into(),
            DType::BF16 => "0x7F80".into(),
            DType::F32 => "0x7F800000".into(),
            _ => "0x7FF0000000000000".into(),
        },
        _ => format!("{value:.17e}"),
    }
}

// ---- accel's ops as programs ----------------------------------------------------------------
// One definition of each op's program, used by `XlaStorage` and by the fuzz target
// (`crate::fuzzing::hlo`), so what is fuzzed is what runs.

impl Program {
    /// `op` of `a` and `b`, each broadcast to `out` (NumPy's rule).
    pub fn binary_op(&mut self, op: BinaryOp, a: &Val, b: &Val, out: &[usize]) -> Val {
        let a = self.broadcast_to(a, out);
        let b = self.broadcast_to(b, out);
        let name = match op {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "subtract",
            BinaryOp::Mul => "multiply",
            BinaryOp::Div => "divide",
            BinaryOp::Maximum => "maximum",
        };
        let r = self.elementwise(name, &[&a, &b]);
        if op == BinaryOp::Maximum && a.dtype.is_float() {
            // XLA's CPU maximum may drop a NaN operand; PyTorch and accel propagate it.
            let (na, nb) = (self.isnan(&a), self.isnan(&b));
            let any = self.elementwise("add", &[&na, &nb]);
            return self.nan_where(&any, &r);
        }
        r
    }

    /// `op` of `x`, elementwise.
    pub fn unary_op(&mut self, op: UnaryOp, x: &Val) -> Val {
        match op {
            UnaryOp::Neg => self.elementwise("negate", &[x]),
            UnaryOp::Exp => self.elementwise("exponential", &[x]),
            UnaryOp::Relu => {
                // max(x, 0) keeps NaN, as the CPU backend and PyTorch do.
                let z = self.constant(0.0, &x.dims, x.dtype);
                self.elementwise("maximum", &[x, &z])
            }
        }
    }

    /// `op` of `x` over `dim` (every dimension when None). Sums of integers are i64 and half
    /// floats accumulate in f32; a max over nothing is refused before any program is built.
    pub fn reduce_op(&mut self, op: ReduceOp, x: &Val, dim: Option<usize>) -> Val {
        let dims: Vec<usize> = match dim {
            Some(d) => vec![d],
            None => (0..x.dims.len()).collect(),
        };
        let count: usize = dims.iter().map(|&d| x.dims[d]).product();
        let dt = x.dtype;
        match op {
            ReduceOp::Max => {
                let init = match dt {
                    DType::I32 => i32::MIN as f64,
                    DType::I64 => i64::MIN as f64,
                    _ => f64::NEG_INFINITY,
                };
                let m = self.reduce(x, &dims, "maximum", init);
                if dt.is_float() {
                    // XLA's CPU reduction drops NaN; PyTorch and accel propagate it.
                    let nans = self.isnan(x);
                    let any = self.reduce(&nans, &dims, "maximum", 0.0);
                    self.nan_where(&any, &m)
                } else {
                    m
                }
            }
            ReduceOp::Sum | ReduceOp::Mean => {
                let acc = match dt {
                    DType::I32 | DType::I64 => DType::I64,
                    DType::F16 | DType::BF16 => DType::F32,
                    d => d,
                };
                let xa = self.convert(x, acc);
                let s = self.reduce(&xa, &dims, "add", 0.0);
                let s = if op == ReduceOp::Mean {
                    let c = self.constant(count as f64, &s.dims, acc);
                    self.elementwise("divide", &[&s, &c])
                } else {
                    s
                };
                self.convert(&s, op.out_dtype(dt))
            }
        }
    }

    /// The product of `a` (m x k, or a batch) and `b` (k x n, or a batch), broadcasting a
    /// single matrix to the `bsz` of the other side.
    pub fn matmul_op(&mut self, spec: &MatmulSpec, a: &Val, b: &Val) -> Val {
        let MatmulSpec { bsz, m, n, k, .. } = *spec;
        if bsz > 1 {
            let a = self.broadcast_to(a, &[bsz, m, k]);
            let b = self.broadcast_to(b, &[bsz, k, n]);
            return self.dot(&a, &b);
        }
        self.dot(a, b)
    }
}

/// The views of a matmul's operands in their buffers: (rows, cols), or (bsz, rows, cols)
/// when the operand has a batch of its own (a batch stride of 0 is one matrix for all).
pub fn matmul_layouts(spec: &MatmulSpec) -> (Layout, Layout) {
    let MatmulSpec { bsz, m, n, k, a, b } = *spec;
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
    (layout(a, m, k), layout(b, k, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The program of a 2x3 by 3x2 matmul of `dtype`.
    fn matmul_text(dtype: DType) -> String {
        let a = Layout::contiguous(Shape::from((2, 3)));
        let b = Layout::contiguous(Shape::from((3, 2)));
        let (_, spec) = MatmulSpec::plan(&a, &b).expect("shapes agree");
        let spec = spec.expect("not empty");
        let mut p = Program::new();
        let x = p.arg(6, dtype);
        let y = p.arg(6, dtype);
        let va = p.view(&x, &a).expect("contiguous");
        let vb = p.view(&y, &b).expect("contiguous");
        let out = p.matmul_op(&spec, &va, &vb);
        p.finish(&out).0
    }

    #[test]
    fn f32_dot_asks_for_full_f32_precision_unless_tf32_is_allowed() {
        let dot = |t: &str| {
            t.lines()
                .find(|l| l.contains("stablehlo.dot_general"))
                .map(str::to_string)
                .unwrap_or_else(|| panic!("no dot_general in\n{t}"))
        };
        assert!(
            dot(&matmul_text(DType::F32)).contains("precision = [HIGHEST, HIGHEST]"),
            "{}",
            matmul_text(DType::F32)
        );
        // Other dtypes compute in their own precision: nothing to ask for.
        for d in [DType::F64, DType::F16, DType::BF16, DType::I32, DType::I64] {
            assert!(!dot(&matmul_text(d)).contains("precision"), "{d}");
        }
        // The TF32 switch lives in the CUDA backend (a no-op in builds without it).
        crate::backend::native::settings::set_allow_tf32(true);
        let allowed = crate::backend::native::settings::allow_tf32();
        let tf32 = dot(&matmul_text(DType::F32));
        crate::backend::native::settings::set_allow_tf32(false);
        assert_eq!(tf32.contains("precision"), !allowed, "{tf32}");
    }
}
