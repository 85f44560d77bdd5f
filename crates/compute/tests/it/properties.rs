//! Property tests: random shapes (with sizes 0, 1 and primes), random views (transposed,
//! broadcast), random dtypes the device holds, and every op, on every backend, against a
//! reference computed here in f64 from the same inputs. proptest shrinks a failure to a
//! smallest case, which then becomes a named regression test in conformance.rs.
//!
//! `ACCEL_PROPTEST_CASES` sets the number of cases per backend (default 512 on the CPU, 256
//! on accelerators, where each new shape may compile a program).

use crate::common;

use crate::common::{round_to, tol, values};
use accelkit::{DType, Device, Tensor};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// Sizes a dimension takes: empty, one (broadcasts), and primes.
const SIZES: [usize; 6] = [0, 1, 2, 3, 5, 7];

/// One operand: its logical shape, its values in storage order, and whether it is the
/// transpose of a stored tensor (dims `a` and `b` swapped) rather than the tensor itself.
#[derive(Debug, Clone)]
struct Operand {
    dims: Vec<usize>,
    swap: Option<(usize, usize)>,
    seed: u64,
}

impl Operand {
    /// The stored tensor's shape (the logical one with the swap undone).
    fn storage_dims(&self) -> Vec<usize> {
        let mut d = self.dims.clone();
        if let Some((a, b)) = self.swap {
            d.swap(a, b);
        }
        d
    }

    /// The stored values, as the dtype holds them (an integer 0 has no sign: -0.0 + 0.0
    /// is +0.0).
    fn stored(&self, dtype: DType) -> Vec<f64> {
        let n: usize = self.dims.iter().product();
        round_to(&values(n, self.seed), dtype)
            .into_iter()
            .map(|x| x + 0.0)
            .collect()
    }

    /// The values in the logical view's row-major order, computed from coordinates (not from
    /// accel's strides).
    fn logical(&self, dtype: DType) -> Vec<f64> {
        let stored = self.stored(dtype);
        let sd = self.storage_dims();
        let n: usize = self.dims.iter().product();
        (0..n)
            .map(|i| {
                let mut c = unravel(i, &self.dims);
                if let Some((a, b)) = self.swap {
                    c.swap(a, b);
                }
                stored[ravel(&c, &sd)]
            })
            .collect()
    }

    fn tensor(&self, dtype: DType, d: &Device) -> accelkit::Result<Tensor> {
        let t = Tensor::from_vec(self.stored(dtype), self.storage_dims(), &Device::Cpu)?
            .to_dtype(dtype)?
            .to_device(d)?;
        match self.swap {
            Some((a, b)) => t.transpose(a as isize, b as isize),
            None => Ok(t),
        }
    }
}

fn unravel(mut i: usize, dims: &[usize]) -> Vec<usize> {
    let mut c = vec![0; dims.len()];
    for k in (0..dims.len()).rev() {
        c[k] = i % dims[k];
        i /= dims[k];
    }
    c
}

fn ravel(c: &[usize], dims: &[usize]) -> usize {
    c.iter().zip(dims).fold(0, |acc, (&x, &d)| acc * d + x)
}

fn dims(max_rank: usize) -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(prop::sample::select(SIZES.to_vec()), 0..=max_rank)
}

/// An operand of `dims`, transposed or not.
fn operand(dims: Vec<usize>) -> impl Strategy<Value = Operand> {
    let rank = dims.len();
    let swap = if rank >= 2 {
        prop::option::of((0..rank, 0..rank)).boxed()
    } else {
        Just(None).boxed()
    };
    (swap, any::<u64>()).prop_map(move |(swap, seed)| Operand {
        dims: dims.clone(),
        swap,
        seed,
    })
}

/// A shape that broadcasts with `dims`: some sizes replaced by 1, some leading dims dropped.
fn broadcast_partner(dims: Vec<usize>) -> impl Strategy<Value = Vec<usize>> {
    let rank = dims.len();
    (prop::collection::vec(any::<bool>(), rank), 0..=rank).prop_map(move |(ones, drop)| {
        dims.iter()
            .zip(&ones)
            .skip(drop)
            .map(|(&d, &one)| if one { 1 } else { d })
            .collect()
    })
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Neg,
    Relu,
    Exp,
    Add,
    Sub,
    Mul,
    Div,
    Maximum,
    Sum(Option<usize>),
    Mean(Option<usize>),
    Max(Option<usize>),
    Matmul,
    Reshape,
    Cast(DType),
}

#[derive(Debug, Clone)]
struct Case {
    dtype: DType,
    op: Op,
    a: Operand,
    b: Option<Operand>,
}

fn case(dtypes: Vec<DType>) -> impl Strategy<Value = Case> {
    let dtype = prop::sample::select(dtypes.clone());
    let unary = (dtype.clone(), dims(3))
        .prop_flat_map(|(t, d)| {
            (
                Just(t),
                prop::sample::select(vec![Op::Neg, Op::Relu, Op::Exp, Op::Reshape]),
                operand(d),
            )
        })
        .prop_map(|(dtype, op, a)| Case {
            dtype,
            op,
            a,
            b: None,
        });
    let cast = (dtype.clone(), prop::sample::select(dtypes), dims(3))
        .prop_flat_map(|(t, to, d)| (Just(t), Just(to), operand(d)))
        .prop_map(|(dtype, to, a)| Case {
            dtype,
            op: Op::Cast(to),
            a,
            b: None,
        });
    let binary = (dtype.clone(), dims(3))
        .prop_flat_map(|(t, d)| (Just(t), Just(d.clone()), broadcast_partner(d)))
        .prop_flat_map(|(t, d, e)| {
            // Either side may be the smaller one.
            let (l, r) = if e.len() % 2 == 0 { (d, e) } else { (e, d) };
            (
                Just(t),
                prop::sample::select(vec![Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Maximum]),
                operand(l),
                operand(r),
            )
        })
        .prop_map(|(dtype, op, a, b)| Case {
            dtype,
            op,
            a,
            b: Some(b),
        });
    let reduce = (dtype.clone(), dims(3))
        .prop_flat_map(|(t, d)| {
            let rank = d.len();
            let dim = if rank == 0 {
                Just(None).boxed()
            } else {
                prop::option::of(0..rank).boxed()
            };
            (Just(t), dim, 0..3usize, operand(d))
        })
        .prop_map(|(dtype, dim, kind, a)| Case {
            dtype,
            op: [Op::Sum(dim), Op::Mean(dim), Op::Max(dim)][kind],
            a,
            b: None,
        });
    // Each side 2-d or a batch of 0, 1 or 3; a 2-d side or a batch of 1 broadcasts, other
    // unequal batches are an error (checked elsewhere), so they become equal here.
    let batches = prop::sample::select(vec![None, Some(0usize), Some(1), Some(3)]);
    let matmul = (
        dtype,
        (batches.clone(), batches),
        prop::sample::select(SIZES.to_vec()),
        prop::sample::select(SIZES.to_vec()),
        prop::sample::select(SIZES.to_vec()),
    )
        .prop_flat_map(|(t, (ba, bb), m, k, n)| {
            let lead = |b: Option<usize>, x, y| match b {
                Some(b) => vec![b, x, y],
                None => vec![x, y],
            };
            let bb = match (ba, bb) {
                (Some(x), Some(y)) if x != y && x != 1 && y != 1 => Some(x),
                _ => bb,
            };
            (Just(t), operand(lead(ba, m, k)), operand(lead(bb, k, n)))
        })
        .prop_map(|(dtype, a, b)| Case {
            dtype,
            op: Op::Matmul,
            a,
            b: Some(b),
        });
    prop_oneof![unary, cast, binary, reduce, matmul]
}

/// `got` agrees with `want`: NaN with NaN, equal infinities, else within `tol` relative to
/// max(1, |want|).
fn close(got: &[f64], want: &[f64], tol: f64) -> Result<(), TestCaseError> {
    prop_assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= tol * w.abs().max(1.0);
        prop_assert!(ok, "element {} is {}, expected {} (tol {})", i, g, w, tol);
    }
    Ok(())
}

/// Broadcasts `v` of shape `s` to `out` (NumPy's rule), by coordinates.
fn broadcast(v: &[f64], s: &[usize], out: &[usize]) -> Vec<f64> {
    let n: usize = out.iter().product();
    let extra = out.len() - s.len();
    (0..n)
        .map(|i| {
            let c = unravel(i, out);
            let cs: Vec<usize> = (0..s.len())
                .map(|k| if s[k] == 1 { 0 } else { c[k + extra] })
                .collect();
            v[ravel(&cs, s)]
        })
        .collect()
}

fn broadcast_dims(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let r = a.len().max(b.len());
    (0..r)
        .map(|i| {
            let x = if i < r - a.len() {
                1
            } else {
                a[i - (r - a.len())]
            };
            let y = if i < r - b.len() {
                1
            } else {
                b[i - (r - b.len())]
            };
            match (x, y) {
                _ if x == y => Some(x),
                (1, y) => Some(y),
                (x, 1) => Some(x),
                _ => None,
            }
        })
        .collect()
}

/// Runs one case on `d` and compares it with the f64 reference.
fn check(c: &Case, d: &Device) -> Result<(), TestCaseError> {
    let err = |e: accelkit::Error| TestCaseError::fail(format!("{e}"));
    let t = c.dtype;
    let a = c.a.tensor(t, d).map_err(err)?;
    let av = c.a.logical(t);
    let float = t.is_float();
    match c.op {
        Op::Neg | Op::Relu | Op::Exp => {
            let (got, out_t, f): (Tensor, DType, fn(f64) -> f64) = match c.op {
                Op::Neg => (a.neg().map_err(err)?, t, |x| -x),
                Op::Relu => (a.relu().map_err(err)?, t, |x| x.max(0.0)),
                _ => {
                    let out_t = if float { t } else { DType::F32 };
                    (a.exp().map_err(err)?, out_t, f64::exp)
                }
            };
            prop_assert_eq!(got.dims(), c.a.dims.as_slice());
            prop_assert_eq!(got.dtype(), out_t);
            let want = round_to(&av.iter().map(|&x| f(x)).collect::<Vec<_>>(), out_t);
            close(&got.to_vec_f64().map_err(err)?, &want, 2.0 * tol(out_t))?;
        }
        Op::Reshape => {
            // Any shape of as many elements: here the reversed dims, and flat.
            let rev: Vec<usize> = c.a.dims.iter().rev().copied().collect();
            for shape in [rev, vec![av.len()]] {
                let r = a.reshape(shape.clone()).map_err(err)?;
                prop_assert_eq!(r.dims(), shape.as_slice());
                close(&r.to_vec_f64().map_err(err)?, &av, 0.0)?;
            }
            close(
                &a.contiguous().map_err(err)?.to_vec_f64().map_err(err)?,
                &av,
                0.0,
            )?;
        }
        Op::Cast(to) => {
            let got = a.to_dtype(to).map_err(err)?;
            prop_assert_eq!(got.dtype(), to);
            // Every input is exact in every dtype but the narrower float formats, and a
            // value of any of them rounds once into `to`.
            close(&got.to_vec_f64().map_err(err)?, &round_to(&av, to), 0.0)?;
        }
        Op::Add | Op::Sub | Op::Mul | Op::Div | Op::Maximum => {
            let bo = c.b.as_ref().unwrap();
            let b = bo.tensor(t, d).map_err(err)?;
            let out = broadcast_dims(&c.a.dims, &bo.dims).unwrap();
            let (x, y) = (
                broadcast(&av, &c.a.dims, &out),
                broadcast(&bo.logical(t), &bo.dims, &out),
            );
            let f: fn(f64, f64) -> f64 = match c.op {
                Op::Add => |x, y| x + y,
                Op::Sub => |x, y| x - y,
                Op::Mul => |x, y| x * y,
                Op::Div => |x, y| x / y,
                _ => |x: f64, y: f64| {
                    if x.is_nan() || y.is_nan() {
                        f64::NAN
                    } else {
                        x.max(y)
                    }
                },
            };
            let got = match c.op {
                Op::Add => a.add(&b),
                Op::Sub => a.sub(&b),
                Op::Mul => a.mul(&b),
                Op::Div => a.div(&b),
                _ => a.maximum(&b),
            }
            .map_err(err)?;
            let out_t = if matches!(c.op, Op::Div) && !float {
                DType::F32
            } else {
                t
            };
            prop_assert_eq!(got.dims(), out.as_slice());
            prop_assert_eq!(got.dtype(), out_t);
            let want: Vec<f64> = x.iter().zip(&y).map(|(&p, &q)| f(p, q)).collect();
            close(
                &got.to_vec_f64().map_err(err)?,
                &round_to(&want, out_t),
                2.0 * tol(out_t),
            )?;
        }
        Op::Sum(dim) | Op::Mean(dim) | Op::Max(dim) => {
            let (outer, len, inner, out_dims) = match dim {
                None => (1, av.len(), 1, vec![]),
                Some(k) => {
                    let mut o = c.a.dims.clone();
                    o.remove(k);
                    (
                        c.a.dims[..k].iter().product::<usize>(),
                        c.a.dims[k],
                        c.a.dims[k + 1..].iter().product::<usize>(),
                        o,
                    )
                }
            };
            let got = match (c.op, dim) {
                (Op::Sum(_), None) => a.sum_all(),
                (Op::Sum(_), Some(k)) => a.sum(k as isize),
                (Op::Mean(_), None) => a.mean_all(),
                (Op::Mean(_), Some(k)) => a.mean(k as isize),
                (_, None) => a.max_all(),
                (_, Some(k)) => a.max(k as isize),
            };
            let sum_t = if float { t } else { DType::I64 };
            let is_max = matches!(c.op, Op::Max(_));
            if matches!(c.op, Op::Mean(_)) && !float {
                prop_assert!(got.is_err(), "the mean of integers is refused");
                return Ok(());
            }
            if is_max && len == 0 {
                prop_assert!(got.is_err(), "a max over nothing is an error");
                return Ok(());
            }
            if !is_max && !d.supports(sum_t) {
                prop_assert!(got.is_err(), "{} cannot hold the i64 sum", d);
                return Ok(());
            }
            let got = got.map_err(err)?;
            prop_assert_eq!(got.dims(), out_dims.as_slice());
            let mut want = Vec::with_capacity(outer * inner);
            for o in 0..outer {
                for i in 0..inner {
                    let xs = (0..len).map(|j| av[(o * len + j) * inner + i]);
                    want.push(match c.op {
                        Op::Max(_) => xs.fold(f64::NEG_INFINITY, f64::max),
                        Op::Sum(_) => xs.sum(),
                        _ => xs.sum::<f64>() / len as f64,
                    });
                }
            }
            let out_t = if is_max { t } else { sum_t };
            prop_assert_eq!(got.dtype(), out_t);
            let tolerance = if is_max {
                0.0
            } else {
                tol(out_t) * (len as f64 + 1.0) * 4.0
            };
            close(
                &got.to_vec_f64().map_err(err)?,
                &round_to(&want, out_t),
                tolerance,
            )?;
        }
        Op::Matmul => {
            let bo = c.b.as_ref().unwrap();
            let b = bo.tensor(t, d).map_err(err)?;
            let (ad, bd) = (&c.a.dims, &bo.dims);
            let (m, k, n) = (ad[ad.len() - 2], ad[ad.len() - 1], bd[bd.len() - 1]);
            let batch = |x: &[usize]| if x.len() == 3 { x[0] } else { 1 };
            let (ba, bb) = (batch(ad), batch(bd));
            let bsz = if ba == 1 { bb } else { ba };
            let got = a.matmul(&b).map_err(err)?;
            let out: Vec<usize> = if ad.len() == 3 || bd.len() == 3 {
                vec![bsz, m, n]
            } else {
                vec![m, n]
            };
            prop_assert_eq!(got.dims(), out.as_slice());
            let bv = bo.logical(t);
            let mut want = Vec::with_capacity(bsz * m * n);
            for p in 0..bsz {
                let (pa, pb) = (if ba == 1 { 0 } else { p }, if bb == 1 { 0 } else { p });
                for i in 0..m {
                    for j in 0..n {
                        want.push(
                            (0..k)
                                .map(|q| av[(pa * m + i) * k + q] * bv[(pb * k + q) * n + j])
                                .sum::<f64>(),
                        );
                    }
                }
            }
            // Half floats accumulate in f32 and round once.
            let tolerance = if float {
                tol(t).max(1e-6) * 4.0 * (k as f64 + 1.0)
            } else {
                0.0
            };
            close(
                &got.to_vec_f64().map_err(err)?,
                &round_to(&want, t),
                tolerance,
            )?;
        }
    }
    Ok(())
}

/// Runs the properties on every usable device of `backend`.
fn run(backend: &str, default_cases: u32) {
    common::run_on(backend, "properties", |d| {
        let dtypes: Vec<DType> = DType::ALL.into_iter().filter(|&t| d.supports(t)).collect();
        let cases = std::env::var("ACCEL_PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default_cases);
        assert!(cases > 0, "ACCEL_PROPTEST_CASES=0 would test nothing");
        let mut runner = TestRunner::new(Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        });
        let d = *d;
        if let Err(e) = runner.run(&case(dtypes), |c| check(&c, &d)) {
            panic!("on {d}: {e}");
        }
        Ok(())
    });
}

#[test]
fn every_op_against_the_reference_cpu() {
    run("cpu", 512);
}

#[test]
fn every_op_against_the_reference_cuda() {
    run("cuda", 256);
}

#[test]
fn every_op_against_the_reference_mps() {
    run("mps", 256);
}

#[test]
fn every_op_against_the_reference_xla() {
    run("xla", 256);
}

#[test]
fn every_op_against_the_reference_wgpu() {
    run("wgpu", 256);
}
