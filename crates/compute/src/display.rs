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

/// What every level of the nested printout shares. `vals` holds only the elements shown
/// (row-major over `shown` sizes): the edges of each summarised dimension, not the tensor.
struct Printer<'a> {
    vals: &'a [f64],
    dims: &'a [usize],
    strides: Vec<usize>,
    f: Formatter,
    summarise: bool,
    indent: usize,
}

/// Whether dimension `n` is cut to its first and last `EDGE` indices.
fn cut(summarise: bool, n: usize) -> bool {
    summarise && n > 2 * EDGE
}

impl Printer<'_> {
    /// Writes dimension `d` of the nested array starting at flat index `base` of `vals`.
    fn write_dim(&self, out: &mut String, d: usize, base: usize) {
        out.push('[');
        let n = self.dims[d];
        // (index in the tensor, index among the shown elements); None: the elision.
        let idx: Vec<Option<usize>> = if cut(self.summarise, n) {
            (0..EDGE)
                .map(Some)
                .chain(std::iter::once(None))
                .chain((EDGE..2 * EDGE).map(Some))
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

/// The elements a printout shows, as f64, row-major over the shown sizes: everything when
/// not summarised; else, per cut dimension, only the first and last `EDGE` indices, read as
/// at most 2^rank blocks (views), so a large tensor on a device is not copied whole.
fn shown_values(t: &Tensor, summarise: bool) -> crate::Result<(Vec<f64>, Vec<usize>)> {
    let dims = t.dims().to_vec();
    if !dims.iter().any(|&n| cut(summarise, n)) {
        return Ok((t.to_vec_f64()?, dims));
    }
    let shown: Vec<usize> = dims
        .iter()
        .map(|&n| if cut(summarise, n) { 2 * EDGE } else { n })
        .collect();
    let strides = crate::Shape::from(shown.clone()).contiguous_strides();
    let mut vals = vec![0.0; shown.iter().product()];
    // Per dimension, its ranges: (start in the tensor, start among the shown, length).
    let ranges: Vec<Vec<(usize, usize, usize)>> = dims
        .iter()
        .map(|&n| {
            if cut(summarise, n) {
                vec![(0, 0, EDGE), (n - EDGE, EDGE, EDGE)]
            } else {
                vec![(0, 0, n)]
            }
        })
        .collect();
    let blocks: usize = ranges.iter().map(Vec::len).product();
    for b in 0..blocks {
        // The b-th combination of one range per dimension.
        let mut rest = b;
        let pick: Vec<(usize, usize, usize)> = ranges
            .iter()
            .map(|r| {
                let x = r[rest % r.len()];
                rest /= r.len();
                x
            })
            .collect();
        let starts: Vec<usize> = pick.iter().map(|p| p.0).collect();
        let lens: Vec<usize> = pick.iter().map(|p| p.2).collect();
        let block = t.block(&starts, &lens)?.to_vec_f64()?;
        // Scatter the block, row-major over `lens`, into `vals`.
        let mut at = vec![0usize; lens.len()];
        for v in block {
            let flat: usize = (0..lens.len())
                .map(|d| (pick[d].1 + at[d]) * strides[d])
                .sum();
            vals[flat] = v;
            for d in (0..lens.len()).rev() {
                at[d] += 1;
                if at[d] < lens[d] {
                    break;
                }
                at[d] = 0;
            }
        }
    }
    Ok((vals, shown))
}

impl fmt::Display for Tensor {
    fn fmt(&self, fm: &mut fmt::Formatter<'_>) -> fmt::Result {
        let summarise = self.elem_count() > THRESHOLD;
        let (vals, shown) = match shown_values(self, summarise) {
            Ok(v) => v,
            Err(e) => return write!(fm, "tensor(<unreadable: {e}>)"),
        };
        let dims = self.dims().to_vec();
        let strides = crate::Shape::from(shown).contiguous_strides();
        // Columns are sized from the values shown, as PyTorch's summarised printout does.
        let f = Formatter::new(&vals, self.dtype().is_float());
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
