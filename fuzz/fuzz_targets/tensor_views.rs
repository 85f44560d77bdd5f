//! Views and ops on small CPU tensors against a naive reference.
//!
//! A tensor of at most 4096 elements (dims chosen by the fuzzer, 0 and 1 included) goes
//! through a fuzzer-chosen sequence of reshape / transpose / t / contiguous / add / mul /
//! maximum (with a second tensor of a broadcast-ish shape, sometimes a transposed view) /
//! sum / mean / max / matmul / exp / neg. Every `Ok` result must have an element count that
//! agrees with its dims and must read back with `to_vec_f64`; for f64, f32, i64 and i32 the
//! values are compared with a plain row-major reference (integers exactly, wrapping as the
//! library documents; floats within a tolerance scaled by the magnitudes involved). An op the
//! reference says is valid must not fail, and one it says is invalid must not succeed.
#![no_main]

use accelkit::{DType, Device, Tensor};
use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;

const MAX_ELEMS: usize = 4096;
/// Ops whose result would exceed this many elements are skipped.
const MAX_RESULT: usize = 1 << 18;

#[derive(Arbitrary, Debug)]
struct Input {
    dtype: u8,
    dims: Vec<u8>,
    seed: u8,
    specials: bool,
    ops: Vec<Op>,
}

#[derive(Arbitrary, Debug)]
enum Op {
    Reshape(Vec<u8>),
    ReshapeAny(Vec<usize>),
    Transpose(isize, isize),
    TransposeSmall(i8, i8),
    T,
    Contiguous,
    Add(Other),
    Mul(Other),
    Maximum(Other),
    Sum(i8),
    SumAll,
    Mean(i8),
    Max(i8),
    MatmulT,
    Matmul(Other),
    Exp,
    Neg,
}

/// The second operand: its shape derived from the current one, per dimension.
#[derive(Arbitrary, Debug)]
struct Other {
    per_dim: Vec<u8>,
    drop_leading: u8,
    transposed: bool,
    other_dtype: bool,
    seed: u8,
}

const DTYPES: [DType; 6] = [
    DType::F64,
    DType::F32,
    DType::I64,
    DType::I32,
    DType::F16,
    DType::BF16,
];

/// Reference values, row-major.
#[derive(Clone, Debug)]
enum Vals {
    F(Vec<f64>),
    I(Vec<i64>),
    /// f16 / bf16: values not compared.
    Unchecked,
}

#[derive(Clone, Debug)]
struct Model {
    dims: Vec<usize>,
    dtype: DType,
    vals: Vals,
}

fn count(d: &[usize]) -> Option<usize> {
    d.iter().try_fold(1usize, |a, &x| a.checked_mul(x))
}

fn strides(d: &[usize]) -> Vec<usize> {
    let mut s = vec![0; d.len()];
    let mut acc = 1;
    for i in (0..d.len()).rev() {
        s[i] = acc;
        acc *= d[i];
    }
    s
}

/// Multi-index of flat position `i` in dims `d`.
fn unravel(mut i: usize, d: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; d.len()];
    for k in (0..d.len()).rev() {
        idx[k] = i % d[k];
        i /= d[k];
    }
    idx
}

fn wrap(dtype: DType, v: i64) -> i64 {
    if dtype == DType::I32 {
        v as i32 as i64
    } else {
        v
    }
}

fn value(i: usize, seed: u8, specials: bool) -> f64 {
    let h = (i as u64).wrapping_mul(2654435761).wrapping_add(seed as u64 * 40503) % 97;
    if specials && h % 31 == 5 {
        return [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0][(h % 4) as usize];
    }
    (h % 19) as f64 - 9.0
}

fn make(dims: &[usize], dtype: DType, seed: u8, specials: bool) -> (Tensor, Model) {
    let n = count(dims).unwrap();
    let specials = specials && dtype.is_float();
    let v: Vec<f64> = (0..n).map(|i| value(i, seed, specials)).collect();
    let t = match dtype {
        DType::F64 => Tensor::from_vec(v.clone(), dims.to_vec(), &Device::Cpu),
        DType::F32 => Tensor::from_vec(v.iter().map(|&x| x as f32).collect::<Vec<_>>(), dims.to_vec(), &Device::Cpu),
        DType::I64 => Tensor::from_vec(v.iter().map(|&x| x as i64).collect::<Vec<_>>(), dims.to_vec(), &Device::Cpu),
        DType::I32 => Tensor::from_vec(v.iter().map(|&x| x as i32).collect::<Vec<_>>(), dims.to_vec(), &Device::Cpu),
        DType::F16 => Tensor::from_vec(v.iter().map(|&x| accelkit::f16::from_f64(x)).collect::<Vec<_>>(), dims.to_vec(), &Device::Cpu),
        DType::BF16 => Tensor::from_vec(v.iter().map(|&x| accelkit::bf16::from_f64(x)).collect::<Vec<_>>(), dims.to_vec(), &Device::Cpu),
    }
    .unwrap_or_else(|e| panic!("from_vec of {n} {dtype} elements as {dims:?}: {e}"));
    let vals = match dtype {
        DType::F64 | DType::F32 => Vals::F(v),
        DType::I64 | DType::I32 => Vals::I(v.iter().map(|&x| x as i64).collect()),
        _ => Vals::Unchecked,
    };
    let m = Model { dims: dims.to_vec(), dtype, vals };
    (t, m)
}

/// What the library holds, checked for consistency, as reference values.
fn read(t: &Tensor, what: &str) -> Model {
    let n: usize = t.dims().iter().product();
    assert_eq!(t.elem_count(), n, "{what}: elem_count {} vs dims {:?}", t.elem_count(), t.dims());
    let f = t.to_vec_f64().unwrap_or_else(|e| panic!("{what}: to_vec_f64 failed: {e}"));
    assert_eq!(f.len(), n, "{what}: to_vec_f64 gave {} values for dims {:?}", f.len(), t.dims());
    let vals = match t.dtype() {
        DType::F64 | DType::F32 => Vals::F(f),
        // An empty tensor holds no integers to read (and its i64 copy may be too large to
        // exist: [2^61, 0] of i32 is, of i64 not).
        DType::I64 | DType::I32 if n == 0 => Vals::I(Vec::new()),
        DType::I64 | DType::I32 => {
            let i = t
                .to_dtype(DType::I64)
                .and_then(|x| x.reshape(vec![n]))
                .and_then(|x| x.to_vec1::<i64>())
                .unwrap_or_else(|e| panic!("{what}: reading integers failed: {e}"));
            assert_eq!(i.len(), n);
            Vals::I(i)
        }
        _ => Vals::Unchecked,
    };
    Model { dims: t.dims().to_vec(), dtype: t.dtype(), vals }
}

fn close(want: f64, got: f64, scale: f64, dtype: DType) -> bool {
    if want.is_nan() || got.is_nan() {
        return want.is_nan() && got.is_nan();
    }
    if want == got {
        return true;
    }
    // Near the dtype's overflow threshold, infinity may come out in either order (and f32
    // overflows where the f64 reference does not).
    let limit = if dtype == DType::F32 { 1e38 } else { 1e300 };
    if !scale.is_finite() || scale > limit || want.abs() > limit {
        return true;
    }
    let tol = if dtype == DType::F32 { 1e-4 } else { 1e-10 };
    (want - got).abs() <= tol * (scale + want.abs() + 1.0)
}

/// Compares the library's result with the reference (values and per-element scales).
fn compare(what: &str, got: &Model, want_dims: &[usize], want: &Vals, scale: &[f64]) {
    assert_eq!(got.dims, want_dims, "{what}: dims");
    match (want, &got.vals) {
        (Vals::F(w), Vals::F(g)) => {
            for i in 0..w.len() {
                let s = scale.get(i).copied().unwrap_or(0.0);
                assert!(
                    close(w[i], g[i], s, got.dtype),
                    "{what}: element {i} (of dims {want_dims:?}) is {} but the reference is {}",
                    g[i],
                    w[i]
                );
            }
        }
        (Vals::I(w), Vals::I(g)) => assert_eq!(g, w, "{what}: integer values"),
        _ => {}
    }
}

fn dim_of(rank: usize, d: isize) -> Option<usize> {
    let r = rank as isize;
    let x = if d < 0 { d + r } else { d };
    (0 <= x && x < r).then_some(x as usize)
}

fn other_shape(cur: &[usize], o: &Other) -> Vec<usize> {
    let drop = (o.drop_leading as usize % 4).min(cur.len());
    cur[drop..]
        .iter()
        .enumerate()
        .map(|(i, &d)| match o.per_dim.get(i).copied().unwrap_or(0) % 8 {
            0..=3 => d,
            4 | 5 => 1,
            6 => d + 1,
            _ => 0,
        })
        .collect()
}

/// The broadcast shape by NumPy's rules, or None.
fn broadcast(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let r = a.len().max(b.len());
    (0..r)
        .map(|i| {
            let da = if i < r - a.len() { 1 } else { a[i - (r - a.len())] };
            let db = if i < r - b.len() { 1 } else { b[i - (r - b.len())] };
            match (da, db) {
                (x, y) if x == y => Some(x),
                (1, y) => Some(y),
                (x, 1) => Some(x),
                _ => None,
            }
        })
        .collect()
}

/// Flat index into `src` dims for output multi-index `idx` under broadcasting.
fn bidx(idx: &[usize], src: &[usize]) -> usize {
    let extra = idx.len() - src.len();
    let st = strides(src);
    src.iter()
        .enumerate()
        .map(|(k, &d)| if d == 1 { 0 } else { idx[k + extra] * st[k] })
        .sum()
}

fn fmax(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Bin {
    Add,
    Mul,
    Maximum,
}

fn binary(what: &str, t: &Tensor, m: &Model, o: &Other, op: Bin) -> Option<(Tensor, Model)> {
    let od = other_shape(&m.dims, o);
    let rhs_dtype = if o.other_dtype {
        DTYPES[(DTYPES.iter().position(|&d| d == m.dtype).unwrap() + 1) % DTYPES.len()]
    } else {
        m.dtype
    };
    // A transposed view of the right shape: made as the transpose, then transposed back.
    let (rt, rm) = if o.transposed && od.len() >= 2 {
        let mut sw = od.clone();
        let k = sw.len();
        sw.swap(k - 2, k - 1);
        let (x, _) = make(&sw, rhs_dtype, o.seed, false);
        let v = x.transpose(-2, -1).expect("transpose of a made tensor");
        let rm = read(&v, "rhs view");
        (v, rm)
    } else {
        make(&od, rhs_dtype, o.seed, false)
    };
    let out = broadcast(&m.dims, &od);
    if out.as_ref().is_some_and(|d| count(d).is_none_or(|n| n > MAX_RESULT)) {
        return None;
    }
    let r = match op {
        Bin::Add => t.add(&rt),
        Bin::Mul => t.mul(&rt),
        Bin::Maximum => t.maximum(&rt),
    };
    let valid = out.is_some() && rhs_dtype == m.dtype;
    if valid && out.as_deref().is_some_and(huge) && too_big(&r) {
        return None;
    }
    let r = match (r, valid) {
        (Ok(r), true) => r,
        (Err(_), false) => return None,
        (Ok(r), false) => panic!("{what}: {:?} with {:?} ({rhs_dtype}) should fail, got {:?}", m.dims, od, r.dims()),
        (Err(e), true) => panic!("{what}: {:?} {} with {:?} failed: {e}", m.dims, m.dtype, od),
    };
    let out = out.unwrap();
    let got = read(&r, what);
    let n = count(&out).unwrap();
    let (want, scale) = match (&m.vals, &rm.vals) {
        (Vals::F(a), Vals::F(b)) => {
            let mut w = Vec::with_capacity(n);
            let mut s = Vec::with_capacity(n);
            for i in 0..n {
                let idx = unravel(i, &out);
                let (x, y) = (a[bidx(&idx, &m.dims)], b[bidx(&idx, &od)]);
                w.push(match op {
                    Bin::Add => x + y,
                    Bin::Mul => x * y,
                    Bin::Maximum => fmax(x, y),
                });
                s.push(if op == Bin::Mul { (x * y).abs() } else { x.abs() + y.abs() });
            }
            (Vals::F(w), s)
        }
        (Vals::I(a), Vals::I(b)) => {
            let w = (0..n)
                .map(|i| {
                    let idx = unravel(i, &out);
                    let (x, y) = (a[bidx(&idx, &m.dims)], b[bidx(&idx, &od)]);
                    wrap(m.dtype, match op {
                        Bin::Add => x.wrapping_add(y),
                        Bin::Mul => x.wrapping_mul(y),
                        Bin::Maximum => x.max(y),
                    })
                })
                .collect();
            (Vals::I(w), vec![])
        }
        _ => (Vals::Unchecked, vec![]),
    };
    compare(what, &got, &out, &want, &scale);
    Some((r, got))
}

/// Reduction over `dim` (None = all): (out dims, reduced length, groups of flat indices).
fn groups(dims: &[usize], dim: Option<usize>) -> (Vec<usize>, Vec<Vec<usize>>) {
    let n = count(dims).unwrap();
    match dim {
        None => (vec![], vec![(0..n).collect()]),
        Some(d) => {
            let mut out = dims.to_vec();
            out.remove(d);
            let no = count(&out).unwrap();
            let mut g = vec![Vec::new(); no];
            for i in 0..n {
                let mut idx = unravel(i, dims);
                idx.remove(d);
                let st = strides(&out);
                let o: usize = idx.iter().zip(&st).map(|(a, b)| a * b).sum();
                g[o].push(i);
            }
            (out, g)
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Red {
    Sum,
    Mean,
    Max,
}

fn reduce(what: &str, t: &Tensor, m: &Model, dim: Option<i8>, op: Red) -> Option<(Tensor, Model)> {
    let r = match (op, dim) {
        (Red::Sum, Some(d)) => t.sum(d as isize),
        (Red::Sum, None) => t.sum_all(),
        (Red::Mean, Some(d)) => t.mean(d as isize),
        (Red::Mean, None) => t.mean_all(),
        (Red::Max, Some(d)) => t.max(d as isize),
        (Red::Max, None) => t.max_all(),
    };
    let d = match dim {
        Some(d) => match dim_of(m.dims.len(), d as isize) {
            Some(x) => Some(x),
            None => {
                assert!(r.is_err(), "{what}: dim {d} of a rank-{} tensor was accepted", m.dims.len());
                return None;
            }
        },
        None => None,
    };
    let out_dims: Vec<usize> = match d {
        Some(x) => m.dims.iter().enumerate().filter(|&(i, _)| i != x).map(|(_, &s)| s).collect(),
        None => vec![],
    };
    if huge(&out_dims) {
        // Beyond the model: the library makes it (empty), refuses it as too large, or refuses
        // the op (mean of integers, max over nothing); not compared here.
        let _ = r;
        return None;
    }
    let (out, g) = groups(&m.dims, d);
    let reduced = d.map_or(count(&m.dims).unwrap(), |x| m.dims[x]);
    let valid = !(op == Red::Mean && !m.dtype.is_float()) && !(op == Red::Max && reduced == 0);
    let r = match (r, valid) {
        (Ok(r), true) => r,
        (Err(_), false) => return None,
        (Ok(_), false) => panic!("{what}: should fail on {:?} {}", m.dims, m.dtype),
        (Err(e), true) => panic!("{what}: failed on {:?} {}: {e}", m.dims, m.dtype),
    };
    let got = read(&r, what);
    let want_dtype = match (op, m.dtype) {
        (Red::Sum, DType::I32 | DType::I64) => DType::I64,
        (_, x) => x,
    };
    assert_eq!(r.dtype(), want_dtype, "{what}: result dtype");
    let (want, scale) = match &m.vals {
        Vals::F(a) => {
            let mut w = Vec::new();
            let mut s = Vec::new();
            for grp in &g {
                let xs = grp.iter().map(|&i| a[i]);
                let v = match op {
                    Red::Sum => xs.clone().sum::<f64>(),
                    Red::Mean => xs.clone().sum::<f64>() / grp.len() as f64,
                    Red::Max => xs.clone().fold(f64::NEG_INFINITY, fmax),
                };
                w.push(v);
                s.push(xs.map(f64::abs).sum::<f64>());
            }
            (Vals::F(w), s)
        }
        Vals::I(a) => {
            let w = g
                .iter()
                .map(|grp| {
                    let xs = grp.iter().map(|&i| a[i]);
                    match op {
                        Red::Sum => xs.fold(0i64, i64::wrapping_add),
                        _ => xs.max().unwrap(),
                    }
                })
                .collect();
            (Vals::I(w), vec![])
        }
        Vals::Unchecked => (Vals::Unchecked, vec![]),
    };
    compare(what, &got, &out, &want, &scale);
    Some((r, got))
}

fn matmul(what: &str, a: &Tensor, am: &Model, b: &Tensor, bm: &Model) -> Option<(Tensor, Model)> {
    let (ra, rb) = (am.dims.len(), bm.dims.len());
    let shapes_ok = (2..=3).contains(&ra) && (2..=3).contains(&rb);
    let mut out = None;
    if shapes_ok && am.dims[ra - 1] == bm.dims[rb - 2] {
        let ba = if ra == 3 { am.dims[0] } else { 1 };
        let bb = if rb == 3 { bm.dims[0] } else { 1 };
        if ba == bb || ba == 1 || bb == 1 {
            let (m, n) = (am.dims[ra - 2], bm.dims[rb - 1]);
            // A batch of 1 stretches to the other's size, 0 included (PyTorch's rule).
            let bsz = if ba == 1 { bb } else { ba };
            out = Some(if ra == 3 || rb == 3 { vec![bsz, m, n] } else { vec![m, n] });
        }
    }
    if let Some(o) = &out {
        if count(o).is_none_or(|n| n > MAX_RESULT) || count(o).unwrap() * am.dims[ra - 1] > (1 << 22) {
            return None;
        }
    }
    let r = a.matmul(b);
    let valid = out.is_some() && am.dtype == bm.dtype;
    if valid && out.as_deref().is_some_and(huge) && too_big(&r) {
        return None;
    }
    let r = match (r, valid) {
        (Ok(r), true) => r,
        (Err(_), false) => return None,
        (Ok(r), false) => panic!("{what}: {:?} @ {:?} should fail, got {:?}", am.dims, bm.dims, r.dims()),
        (Err(e), true) => panic!("{what}: {:?} @ {:?} ({}) failed: {e}", am.dims, bm.dims, am.dtype),
    };
    let out = out.unwrap();
    let got = read(&r, what);
    let k = am.dims[ra - 1];
    let (m, n) = (am.dims[ra - 2], bm.dims[rb - 1]);
    let bsz = if out.len() == 3 { out[0] } else { 1 };
    let at = |v: &Vals, dims: &[usize], z: usize, i: usize, j: usize| -> (f64, i64) {
        let r = dims.len();
        let zb = if r == 3 && dims[0] != 1 { z } else { 0 };
        let flat = (zb * dims[r - 2] + i) * dims[r - 1] + j;
        match v {
            Vals::F(x) => (x[flat], 0),
            Vals::I(x) => (0.0, x[flat]),
            Vals::Unchecked => (0.0, 0),
        }
    };
    let mut wf = Vec::new();
    let mut wi = Vec::new();
    let mut s = Vec::new();
    for z in 0..bsz {
        for i in 0..m {
            for j in 0..n {
                let (mut f, mut sc, mut iv) = (0.0f64, 0.0f64, 0i64);
                for q in 0..k {
                    let (xa, ia) = at(&am.vals, &am.dims, z, i, q);
                    let (xb, ib) = at(&bm.vals, &bm.dims, z, q, j);
                    f += xa * xb;
                    sc += (xa * xb).abs();
                    iv = iv.wrapping_add(ia.wrapping_mul(ib));
                }
                wf.push(f);
                s.push(sc);
                wi.push(wrap(am.dtype, iv));
            }
        }
    }
    let want = match am.vals {
        Vals::F(_) => Vals::F(wf),
        Vals::I(_) => Vals::I(wi),
        Vals::Unchecked => Vals::Unchecked,
    };
    compare(what, &got, &out, &want, &s);
    Some((r, got))
}

fn base_dims(raw: &[u8]) -> Vec<usize> {
    let mut dims: Vec<usize> = raw
        .iter()
        .take(5)
        .map(|&b| match b % 16 {
            0 => 0,
            1..=4 => 1,
            5..=12 => (b % 16 - 3) as usize, // 2..=9
            13 => 16,
            14 => 17,
            _ => 64,
        })
        .collect();
    while count(&dims).is_none_or(|n| n > MAX_ELEMS) {
        let i = dims.iter().enumerate().max_by_key(|(_, &d)| d).unwrap().0;
        dims[i] /= 2;
    }
    dims
}

fuzz_target!(|input: Input| {
    let dtype = DTYPES[input.dtype as usize % DTYPES.len()];
    let dims = base_dims(&input.dims);
    let (mut t, _) = make(&dims, dtype, input.seed, input.specials);
    let mut m = read(&t, "the base tensor");
    for (step, op) in input.ops.iter().take(12).enumerate() {
        let what = format!("step {step}: {op:?} on {:?} {}", m.dims, m.dtype);
        let what = what.as_str();
        let next: Option<(Tensor, Model)> = match op {
            Op::Reshape(raw) => {
                // Mostly a factorisation of the element count, sometimes not.
                let n = count(&m.dims).unwrap();
                let mut shape: Vec<usize> = raw.iter().take(6).map(|&b| (b % 10) as usize).collect();
                if raw.len() % 3 != 0 {
                    // make it fit: last dim takes what is left when it divides
                    let p: usize = shape.iter().filter(|&&d| d != 0).product();
                    if !shape.contains(&0) && p > 0 && n % p == 0 {
                        shape.push(n / p);
                    }
                }
                reshape(what, &t, &m, shape)
            }
            Op::ReshapeAny(shape) => reshape(what, &t, &m, shape.iter().take(8).copied().collect()),
            Op::Transpose(a, b) => transpose(what, &t, &m, *a, *b),
            Op::TransposeSmall(a, b) => transpose(what, &t, &m, (*a % 6) as isize, (*b % 6) as isize),
            Op::T => {
                let r = t.t();
                match m.dims.len() {
                    0 | 1 => {
                        let r = r.unwrap_or_else(|e| panic!("{what}: {e}"));
                        let got = read(&r, what);
                        compare(what, &got, &m.dims, &m.vals, &[]);
                        Some((r, got))
                    }
                    2 => transpose(what, &t, &m, 0, 1),
                    _ => {
                        assert!(r.is_err(), "{what}: t() of rank {} accepted", m.dims.len());
                        None
                    }
                }
            }
            Op::Contiguous => {
                let r = t.contiguous().unwrap_or_else(|e| panic!("{what}: {e}"));
                assert!(r.is_contiguous(), "{what}: contiguous() is not contiguous");
                let got = read(&r, what);
                compare(what, &got, &m.dims, &m.vals, &[]);
                Some((r, got))
            }
            Op::Add(o) => binary(what, &t, &m, o, Bin::Add),
            Op::Mul(o) => binary(what, &t, &m, o, Bin::Mul),
            Op::Maximum(o) => binary(what, &t, &m, o, Bin::Maximum),
            Op::Sum(d) => reduce(what, &t, &m, Some(*d % 5), Red::Sum),
            Op::SumAll => reduce(what, &t, &m, None, Red::Sum),
            Op::Mean(d) => reduce(what, &t, &m, Some(*d % 5), Red::Mean),
            Op::Max(d) => reduce(what, &t, &m, if *d == i8::MIN { None } else { Some(*d % 5) }, Red::Max),
            Op::MatmulT => {
                // x @ x^T (last two dims swapped): always shape-valid for rank 2 and 3.
                match t.transpose(-2, -1) {
                    Ok(tt) => {
                        let tm = read(&tt, "transposed operand");
                        matmul(what, &t, &m, &tt, &tm)
                    }
                    Err(_) => None,
                }
            }
            Op::Matmul(o) => {
                // Right operand: (k, n) or (batch, k, n) from the fuzzed per-dim choices.
                let k = m.dims.last().copied().unwrap_or(1);
                let n = o.per_dim.first().map_or(1, |&b| (b % 9) as usize);
                let mut d = vec![k, n];
                if o.drop_leading % 3 == 1 && m.dims.len() == 3 {
                    d.insert(0, m.dims[0]);
                } else if o.drop_leading % 3 == 2 {
                    d.insert(0, (o.seed % 3) as usize);
                }
                if o.per_dim.get(1).is_some_and(|b| b % 5 == 0) {
                    d[0] += 1; // a mismatch now and then
                }
                let (bt, _) = make(&d, if o.other_dtype { DType::F32 } else { m.dtype }, o.seed, false);
                let bm = read(&bt, "matmul operand");
                matmul(what, &t, &m, &bt, &bm)
            }
            Op::Exp => {
                let r = t.exp().unwrap_or_else(|e| panic!("{what}: {e}"));
                let got = read(&r, what);
                let want_dtype = if m.dtype.is_float() { m.dtype } else { DType::F32 };
                assert_eq!(r.dtype(), want_dtype, "{what}: dtype");
                let (want, scale): (Vals, Vec<f64>) = match &m.vals {
                    Vals::F(a) => (Vals::F(a.iter().map(|x| x.exp()).collect()), a.iter().map(|x| x.exp().abs() * (1.0 + x.abs())).collect()),
                    Vals::I(a) => (Vals::F(a.iter().map(|&x| (x as f32 as f64).exp()).collect()), a.iter().map(|&x| (x as f64).exp() * (1.0 + (x as f64).abs())).collect()),
                    Vals::Unchecked => (Vals::Unchecked, vec![]),
                };
                compare(what, &got, &m.dims, &want, &scale);
                Some((r, got))
            }
            Op::Neg => {
                let r = t.neg().unwrap_or_else(|e| panic!("{what}: {e}"));
                let got = read(&r, what);
                let want = match &m.vals {
                    Vals::F(a) => Vals::F(a.iter().map(|x| -x).collect()),
                    Vals::I(a) => Vals::I(a.iter().map(|&x| wrap(m.dtype, x.wrapping_neg())).collect()),
                    Vals::Unchecked => Vals::Unchecked,
                };
                compare(what, &got, &m.dims, &want, &[]);
                Some((r, got))
            }
        };
        if let Some((nt, nm)) = next {
            // Keep tensors small enough for the next op.
            if nt.elem_count() <= MAX_ELEMS * 4 {
                t = nt;
                m = nm;
            }
        }
    }
});

/// Whether `r` is the error value for a result too large to exist or to fit in memory.
fn too_big<T>(r: &accelkit::Result<T>) -> bool {
    matches!(
        r,
        Err(accelkit::Error::SizeOverflow { .. } | accelkit::Error::OutOfMemory { .. })
    )
}

/// Whether a result of `dims` is beyond what the harness models: more than MAX_RESULT
/// elements, counting each size as at least 1 (an empty result can still be too large to
/// exist, or its 8-byte accumulators too large for memory).
fn huge(dims: &[usize]) -> bool {
    dims.iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d.max(1)))
        .is_none_or(|n| n > MAX_RESULT)
}

/// Whether a tensor of `shape` and `dtype` can exist: the sizes, each counted as at least
/// 1, times the element size fit in isize::MAX bytes (so every stride is representable).
fn exists(shape: &[usize], dtype: DType) -> bool {
    shape
        .iter()
        .try_fold(dtype.size_in_bytes() as u128, |acc, &d| acc.checked_mul(d.max(1) as u128))
        .is_some_and(|b| b <= isize::MAX as u128)
}

fn reshape(what: &str, t: &Tensor, m: &Model, shape: Vec<usize>) -> Option<(Tensor, Model)> {
    let n = count(&m.dims).unwrap();
    let r = t.reshape(shape.clone());
    let valid = count(&shape) == Some(n) && exists(&shape, t.dtype());
    match (r, valid) {
        (Ok(r), true) => {
            let got = read(&r, what);
            compare(what, &got, &shape, &m.vals, &[]);
            Some((r, got))
        }
        (Err(_), false) => None,
        (Ok(r), false) => panic!("{what}: {n} elements reshaped to {shape:?} (gave {:?})", r.dims()),
        (Err(e), true) => panic!("{what}: reshape of {n} elements to {shape:?} failed: {e}"),
    }
}

fn transpose(what: &str, t: &Tensor, m: &Model, a: isize, b: isize) -> Option<(Tensor, Model)> {
    let r = t.transpose(a, b);
    let rank = m.dims.len();
    let (Some(x), Some(y)) = (dim_of(rank, a), dim_of(rank, b)) else {
        assert!(r.is_err(), "{what}: transpose({a}, {b}) of rank {rank} accepted");
        return None;
    };
    let r = r.unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut out = m.dims.clone();
    out.swap(x, y);
    let n = count(&out).unwrap();
    let src_st = strides(&m.dims);
    // Output element i is input element at i's coordinates with x and y swapped back.
    fn gather<T: Copy>(v: &[T], n: usize, out: &[usize], st: &[usize], x: usize, y: usize) -> Vec<T> {
        (0..n)
            .map(|i| {
                let mut idx = unravel(i, out);
                idx.swap(x, y);
                v[idx.iter().zip(st).map(|(a, b)| a * b).sum::<usize>()]
            })
            .collect()
    }
    let want = match &m.vals {
        Vals::F(v) => Vals::F(gather(v, n, &out, &src_st, x, y)),
        Vals::I(v) => Vals::I(gather(v, n, &out, &src_st, x, y)),
        Vals::Unchecked => Vals::Unchecked,
    };
    let got = read(&r, what);
    compare(what, &got, &out, &want, &[]);
    Some((r, got))
}
