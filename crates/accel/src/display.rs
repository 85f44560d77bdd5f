//! `Display` for tensors, in PyTorch's format:
//! `tensor([[1., 2.],\n        [3., 4.]], device='cuda:0')`. Large tensors are summarised
//! with `...` (more than 1000 elements: the first and last 3 of each dimension).

use std::fmt;

use crate::{DType, Device, Tensor};

const THRESHOLD: usize = 1000;
const EDGE: usize = 3;

struct Formatter {
    float: bool,
    /// Scientific notation (very large or very small magnitudes).
    sci: bool,
    /// All values are integers: floats print as `1.`.
    int_valued: bool,
    width: usize,
}

impl Formatter {
    fn new(values: &[f64], float: bool) -> Formatter {
        let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        let int_valued = finite.iter().all(|v| v.fract() == 0.0);
        let max = finite.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let min_nonzero = finite
            .iter()
            .filter(|v| **v != 0.0)
            .fold(f64::INFINITY, |m, v| m.min(v.abs()));
        let sci = float
            && !finite.is_empty()
            && (max >= 1e8 || (!int_valued && (min_nonzero < 1e-4 || max / min_nonzero > 1e3)));
        let mut f = Formatter {
            float,
            sci,
            int_valued,
            width: 0,
        };
        f.width = values.iter().map(|&v| f.fmt(v).len()).max().unwrap_or(0);
        f
    }

    fn fmt(&self, v: f64) -> String {
        if !self.float {
            return format!("{}", v as i64);
        }
        if v.is_nan() {
            return "nan".into();
        }
        if v.is_infinite() {
            return if v > 0.0 { "inf".into() } else { "-inf".into() };
        }
        if self.sci {
            let s = format!("{v:.4e}");
            // Rust writes 1.2340e5; PyTorch writes 1.2340e+05.
            match s.split_once('e') {
                Some((m, e)) => {
                    let (sign, digits) = e.strip_prefix('-').map_or(("+", e), |d| ("-", d));
                    format!("{m}e{sign}{digits:0>2}")
                }
                None => s,
            }
        } else if self.int_valued {
            format!("{v:.0}.")
        } else {
            format!("{v:.4}")
        }
    }
}

/// What every level of the nested printout shares.
struct Printer<'a> {
    vals: &'a [f64],
    dims: &'a [usize],
    strides: Vec<usize>,
    f: Formatter,
    summarise: bool,
    indent: usize,
}

impl Printer<'_> {
    /// Writes dimension `d` of the nested array starting at flat index `base`.
    fn write_dim(&self, out: &mut String, d: usize, base: usize) {
        out.push('[');
        let n = self.dims[d];
        let idx: Vec<Option<usize>> = if self.summarise && n > 2 * EDGE {
            (0..EDGE)
                .map(Some)
                .chain(std::iter::once(None))
                .chain((n - EDGE..n).map(Some))
                .collect()
        } else {
            (0..n).map(Some).collect()
        };
        let last = d + 1 == self.dims.len();
        for (pos, i) in idx.iter().enumerate() {
            if pos > 0 {
                out.push(',');
                if last {
                    out.push(' ');
                } else {
                    // Blank lines between blocks of 3-d and higher, like PyTorch.
                    for _ in 0..(self.dims.len() - d - 1) {
                        out.push('\n');
                    }
                    out.push_str(&" ".repeat(self.indent + d + 1));
                }
            }
            match i {
                // PyTorch pads the elision of a row by one space: `2,  ..., 1997`.
                None if last => out.push_str(" ..."),
                None => out.push_str("..."),
                Some(i) if last => {
                    let s = self.f.fmt(self.vals[base + i * self.strides[d]]);
                    out.push_str(&format!("{s:>w$}", w = self.f.width));
                }
                Some(i) => self.write_dim(out, d + 1, base + i * self.strides[d]),
            }
        }
        out.push(']');
    }
}

impl fmt::Display for Tensor {
    fn fmt(&self, fm: &mut fmt::Formatter<'_>) -> fmt::Result {
        let vals = match self.to_vec_f64() {
            Ok(v) => v,
            Err(e) => return write!(fm, "tensor(<unreadable: {e}>)"),
        };
        let dims = self.dims().to_vec();
        let strides = self.shape().contiguous_strides();
        let summarise = vals.len() > THRESHOLD;
        // Size the columns from the values that will be shown.
        let shown: Vec<f64> = if summarise {
            vals.iter()
                .take(EDGE * 64)
                .chain(vals.iter().rev().take(EDGE * 64))
                .copied()
                .collect()
        } else {
            vals.clone()
        };
        let f = Formatter::new(&shown, self.dtype().is_float());
        let mut out = String::from("tensor(");
        if dims.is_empty() {
            out.push_str(&f.fmt(vals[0]));
        } else if vals.is_empty() {
            // As PyTorch: the shape is said unless it is [0].
            out.push_str("[]");
            if dims != [0] {
                let sizes: Vec<String> = dims.iter().map(usize::to_string).collect();
                out.push_str(&format!(", size=({})", sizes.join(", ")));
            }
        } else {
            let p = Printer {
                vals: &vals,
                dims: &dims,
                strides,
                f,
                summarise,
                indent: "tensor(".len(),
            };
            p.write_dim(&mut out, 0, 0);
        }
        if self.device() != Device::Cpu {
            out.push_str(&format!(", device='{}'", self.device()));
        }
        // PyTorch names the dtype unless it is a default one (float32, int64).
        if !matches!(self.dtype(), DType::F32 | DType::I64) {
            out.push_str(&format!(", dtype={}", self.dtype()));
        }
        out.push(')');
        fm.write_str(&out)
    }
}
