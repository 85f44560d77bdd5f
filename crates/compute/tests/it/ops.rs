//! Every tensor op against a naive reference written here, over dtypes, broadcasting cases
//! and error cases, on every usable device.

use crate::common;

use crate::common::{assert_close, round_to, tol, values};
use accelkit::{DType, Device, Error, Shape, Tensor};

/// A tensor of `dtype` on `d` holding `vals` (rounded as the dtype stores them).
fn tensor(vals: &[f64], shape: &[usize], dtype: DType, d: &Device) -> accelkit::Result<Tensor> {
    Tensor::from_vec(vals.to_vec(), shape, &Device::Cpu)?
        .to_dtype(dtype)?
        .to_device(d)
}

/// The flat index into an operand of shape `s` for output index `idx` of shape `out`
/// (broadcasting), computed independently of accel's strides.
fn bcast_index(idx: usize, out: &[usize], s: &[usize]) -> usize {
    let mut coords = vec![0; out.len()];
    let mut rem = idx;
    for i in (0..out.len()).rev() {
        coords[i] = rem % out[i];
        rem /= out[i];
    }
    let extra = out.len() - s.len();
    let mut flat = 0;
    for i in 0..s.len() {
        let c = if s[i] == 1 { 0 } else { coords[i + extra] };
        flat = flat * s[i] + c;
    }
    flat
}

const BROADCAST_CASES: &[(&[usize], &[usize], &[usize])] = &[
    (&[5], &[5], &[5]),
    (&[3, 4], &[3, 4], &[3, 4]),
    (&[3, 4], &[4], &[3, 4]),
    (&[3, 1], &[1, 4], &[3, 4]),
    (&[2, 3, 4], &[3, 1], &[2, 3, 4]),
    (&[1, 3, 1], &[2, 1, 5], &[2, 3, 5]),
    (&[3, 4], &[], &[3, 4]),
    (&[], &[2, 2], &[2, 2]),
    (&[0, 3], &[3], &[0, 3]),
    // Large enough for the parallel kernels.
    (&[300, 400], &[300, 400], &[300, 400]),
    (&[300, 400], &[400], &[300, 400]),
    (&[70000], &[], &[70000]),
];

device_test!(binary_ops_broadcast_every_dtype, |d: &Device| {
    type Ref = fn(f64, f64) -> f64;
    let ops: [(&str, Ref); 4] = [
        ("add", |a, b| a + b),
        ("sub", |a, b| a - b),
        ("mul", |a, b| a * b),
        ("maximum", f64::max),
    ];
    for dtype in DType::ALL {
        if !d.supports(dtype) {
            continue;
        }
        for (ci, (sa, sb, so)) in BROADCAST_CASES.iter().enumerate() {
            let na: usize = sa.iter().product();
            let nb: usize = sb.iter().product();
            let va = round_to(&values(na, ci as u64 + 1), dtype);
            let vb = round_to(&values(nb, ci as u64 + 100), dtype);
            let a = tensor(&va, sa, dtype, d)?;
            let b = tensor(&vb, sb, dtype, d)?;
            for (name, f) in ops {
                let got = match name {
                    "add" => a.add(&b)?,
                    "sub" => a.sub(&b)?,
                    "mul" => a.mul(&b)?,
                    _ => a.maximum(&b)?,
                };
                assert_eq!(got.dims(), *so, "{name} {dtype} shape");
                assert_eq!(got.dtype(), dtype);
                assert_eq!(got.device(), *d);
                let n: usize = so.iter().product();
                let want: Vec<f64> = (0..n)
                    .map(|i| f(va[bcast_index(i, so, sa)], vb[bcast_index(i, so, sb)]))
                    .collect();
                assert_close(
                    &got.to_vec_f64()?,
                    &round_to(&want, dtype),
                    tol(dtype),
                    &format!("{name} {dtype} {sa:?} {sb:?}"),
                );
            }
        }
    }
    Ok(())
});

device_test!(division_is_true_division, |d: &Device| {
    let it = common::int_dtype(d);
    let a = tensor(&[7.0, -7.0, 1.0], &[3], it, d)?;
    let b = tensor(&[2.0, 2.0, 3.0], &[3], it, d)?;
    let q = a.div(&b)?;
    assert_eq!(
        q.dtype(),
        DType::F32,
        "integer division gives floats, as in PyTorch"
    );
    assert_close(&q.to_vec_f64()?, &[3.5, -3.5, 1.0 / 3.0], 1e-6, "int div");
    // IEEE 754: x/0 is a signed infinity, 0/0 is NaN, -0 divides to a negative infinity.
    for dtype in [DType::F64, DType::F32, DType::F16, DType::BF16] {
        if !d.supports(dtype) {
            common::skip_part(d, &format!("division in {dtype}"));
            continue;
        }
        let x = tensor(&[1.0, -2.0, 0.0, 1.0, 3.0], &[5], dtype, d)?;
        let y = tensor(&[4.0, 0.0, 0.0, -0.0, 0.5], &[5], dtype, d)?;
        let v = x.div(&y)?.to_vec_f64()?;
        assert_eq!(v[0], 0.25, "{dtype}");
        assert_eq!(v[1], f64::NEG_INFINITY, "{dtype}");
        assert!(v[2].is_nan(), "{dtype}: 0/0 is NaN, got {}", v[2]);
        assert_eq!(v[3], f64::NEG_INFINITY, "{dtype}: 1/-0");
        assert_eq!(v[4], 6.0, "{dtype}");
    }
    // Integer division by zero is infinity in floating point, never a crash.
    let z = tensor(&[1.0, -1.0, 0.0], &[3], it, d)?.div(&tensor(&[0.0; 3], &[3], it, d)?)?;
    let z = z.to_vec1::<f32>()?;
    assert_eq!(z[..2], [f32::INFINITY, f32::NEG_INFINITY]);
    assert!(z[2].is_nan());
    Ok(())
});

device_test!(scalar_ops, |d: &Device| {
    let a = Tensor::new(&[[1.0f32, 2.0], [3.0, 4.0]], d)?;
    assert_eq!(
        a.add_scalar(1.5)?.to_vec2::<f32>()?,
        vec![vec![2.5, 3.5], vec![4.5, 5.5]]
    );
    assert_eq!(
        a.sub_scalar(1.0)?.to_vec2::<f32>()?,
        vec![vec![0.0, 1.0], vec![2.0, 3.0]]
    );
    assert_eq!(
        a.mul_scalar(-2.0)?.to_vec2::<f32>()?,
        vec![vec![-2.0, -4.0], vec![-6.0, -8.0]]
    );
    assert_eq!(
        a.div_scalar(2.0)?.to_vec2::<f32>()?,
        vec![vec![0.5, 1.0], vec![1.5, 2.0]]
    );
    let i = tensor(&[1.0, 2.0, 3.0], &[3], common::int_dtype(d), d)?;
    assert_eq!(i.mul_scalar(3.0)?.to_vec_f64()?, vec![3.0, 6.0, 9.0]);
    assert_eq!(i.div_scalar(2.0)?.to_vec1::<f32>()?, vec![0.5, 1.0, 1.5]);
    let e = i.add_scalar(0.5).unwrap_err();
    assert!(e.to_string().contains("not an integer"), "{e}");
    // Integers wrap on overflow (two's complement), as in PyTorch, rather than panicking.
    let big = Tensor::new(&[i32::MAX, i32::MIN], d)?;
    assert_eq!(big.add_scalar(1.0)?.to_vec1::<i32>()?[0], i32::MIN);
    assert_eq!(big.sub_scalar(1.0)?.to_vec1::<i32>()?[1], i32::MAX);
    assert_eq!(big.mul_scalar(2.0)?.to_vec1::<i32>()?, vec![-2, 0]);
    if d.supports(DType::I64) {
        let big = Tensor::new(&[i64::MAX], d)?.add_scalar(1.0)?;
        assert_eq!(big.to_vec1::<i64>()?, vec![i64::MIN]);
    } else {
        common::skip_part(d, "i64 wrap-around");
    }
    Ok(())
});

device_test!(unary_ops_every_dtype, |d: &Device| {
    for dtype in DType::ALL {
        if !d.supports(dtype) {
            continue;
        }
        let v = round_to(&values(1000, 7), dtype);
        let t = tensor(&v, &[10, 100], dtype, d)?;
        let neg: Vec<f64> = v.iter().map(|x| -x).collect();
        assert_close(&t.neg()?.to_vec_f64()?, &neg, 0.0, &format!("neg {dtype}"));
        let relu: Vec<f64> = v.iter().map(|x| x.max(0.0)).collect();
        assert_close(
            &t.relu()?.to_vec_f64()?,
            &relu,
            0.0,
            &format!("relu {dtype}"),
        );
        let e = t.exp()?;
        let want_dtype = if dtype.is_float() { dtype } else { DType::F32 };
        assert_eq!(e.dtype(), want_dtype);
        let exp: Vec<f64> = v.iter().map(|x| x.exp()).collect();
        assert_close(
            &e.to_vec_f64()?,
            &exp,
            tol(want_dtype).max(1e-6) * 2.0,
            &format!("exp {dtype}"),
        );
        // On a transposed (non-contiguous) view too.
        let tt = t.t()?.neg()?;
        assert_eq!(tt.dims(), [100, 10]);
        assert_eq!(tt.to_vec_f64()?[1], -v[100]);
    }
    let n = Tensor::new(&[f32::NAN, -1.0], d)?
        .relu()?
        .to_vec1::<f32>()?;
    assert!(n[0].is_nan() && n[1] == 0.0, "relu keeps NaN");
    Ok(())
});

device_test!(reductions_every_dtype, |d: &Device| {
    let shape = [3usize, 4, 5];
    for dtype in DType::ALL {
        if !d.supports(dtype) {
            continue;
        }
        let v = round_to(&values(60, 11), dtype);
        let t = tensor(&v, &shape, dtype, d)?;
        if !dtype.is_float() && !d.supports(DType::I64) {
            // Integer sums are i64, as in PyTorch: a device without i64 (wgpu) says so.
            let e = t.sum_all().unwrap_err().to_string();
            assert!(e.contains("i64"), "{e}");
            assert!(t.sum(0).is_err());
            let max = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            assert_eq!(t.max_all()?.to_vec_f64()?, vec![max], "max_all {dtype}");
            continue;
        }
        let sum_dtype = if dtype.is_float() { dtype } else { DType::I64 };
        let total: f64 = v.iter().sum();
        let s = t.sum_all()?;
        assert_eq!(s.dtype(), sum_dtype);
        assert_eq!(s.rank(), 0);
        assert_close(
            &s.to_vec_f64()?,
            &[total],
            tol(dtype) * 60.0,
            &format!("sum_all {dtype}"),
        );
        let max = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        assert_eq!(t.max_all()?.to_vec_f64()?, vec![max], "max_all {dtype}");
        for dim in 0..3usize {
            let mut out_shape = shape.to_vec();
            out_shape.remove(dim);
            let n_out: usize = out_shape.iter().product();
            let mut sums = vec![0.0; n_out];
            let mut maxs = vec![f64::NEG_INFINITY; n_out];
            for (i, x) in v.iter().enumerate() {
                let c = [i / 20, (i / 5) % 4, i % 5];
                let mut oc: Vec<usize> = c.to_vec();
                oc.remove(dim);
                let o = oc.iter().zip(&out_shape).fold(0, |acc, (c, s)| acc * s + c);
                sums[o] += x;
                maxs[o] = maxs[o].max(*x);
            }
            let got = t.sum(dim as isize)?;
            assert_eq!(got.dims(), out_shape.as_slice());
            assert_close(
                &got.to_vec_f64()?,
                &sums,
                tol(dtype) * 10.0,
                &format!("sum({dim}) {dtype}"),
            );
            assert_eq!(
                t.max(dim as isize)?.to_vec_f64()?,
                maxs,
                "max({dim}) {dtype}"
            );
            if dtype.is_float() {
                let means: Vec<f64> = sums.iter().map(|s| s / shape[dim] as f64).collect();
                assert_close(
                    &t.mean(dim as isize)?.to_vec_f64()?,
                    &means,
                    tol(dtype) * 10.0,
                    &format!("mean({dim}) {dtype}"),
                );
            } else {
                assert!(matches!(
                    t.mean(dim as isize),
                    Err(Error::UnsupportedDType { .. })
                ));
            }
        }
        // Negative dims count from the end.
        assert_eq!(t.sum(-1)?.to_vec_f64()?, t.sum(2)?.to_vec_f64()?);
    }
    // A big reduction goes through the parallel path.
    let big = Tensor::ones(1 << 20, DType::F32, d)?;
    assert_eq!(big.sum_all()?.to_scalar::<f32>()?, (1 << 20) as f32);
    assert_eq!(big.mean_all()?.to_scalar::<f32>()?, 1.0);
    let nan = Tensor::new(&[1.0f32, f32::NAN, 3.0], d)?;
    assert!(
        nan.max_all()?.to_scalar::<f32>()?.is_nan(),
        "max propagates NaN"
    );
    Ok(())
});

device_test!(creation, |d: &Device| {
    for dtype in DType::ALL {
        if !d.supports(dtype) {
            common::skip_part(d, &format!("creation in {dtype}"));
            continue;
        }
        let z = Tensor::zeros((2, 3), dtype, d)?;
        assert_eq!(
            (z.dims(), z.dtype(), z.device()),
            (&[2usize, 3][..], dtype, *d)
        );
        assert_eq!(z.to_vec_f64()?, vec![0.0; 6]);
        assert_eq!(Tensor::ones(4, dtype, d)?.to_vec_f64()?, vec![1.0; 4]);
        let f = if dtype.is_float() { 2.5 } else { -3.0 };
        assert_eq!(Tensor::full(f, (2,), dtype, d)?.to_vec_f64()?, vec![f, f]);
        let e = Tensor::full(7.0, (), dtype, d)?;
        assert_eq!((e.rank(), e.to_vec_f64()?), (0, vec![7.0]));
    }
    let it = common::int_dtype(d);
    let r = if it == DType::I64 {
        Tensor::arange(0i64, 5, d)?
    } else {
        Tensor::arange(0i32, 5, d)?
    };
    assert_eq!(r.dtype(), it);
    assert_eq!(r.to_vec_f64()?, vec![0.0, 1.0, 2.0, 3.0, 4.0]);
    assert_eq!(
        Tensor::arange_step(1.0f32, 2.0, 0.25, d)?.to_vec1::<f32>()?,
        vec![1.0, 1.25, 1.5, 1.75]
    );
    assert_eq!(
        Tensor::arange_step(5i32, 0, -2, d)?.to_vec1::<i32>()?,
        vec![5, 3, 1]
    );
    assert_eq!(Tensor::arange(3i32, 3, d)?.dims(), [0]);
    assert_eq!(Tensor::arange_step(0i32, 5, -1, d)?.dims(), [0]);
    assert!(Tensor::arange_step(0.0f32, 1.0, 0.0, d).is_err());
    assert!(Tensor::arange_step(0.0f32, f32::INFINITY, 1.0, d).is_err());
    assert!(Tensor::arange_step(0.0f32, 1.0, f32::NAN, d).is_err());
    assert_eq!(Tensor::new(&3.5f32, d)?.rank(), 0);
    let n = Tensor::new(&[[[1i32, 2], [3, 4]], [[5, 6], [7, 8]]], d)?;
    assert_eq!(
        n.to_vec3::<i32>()?,
        vec![vec![vec![1, 2], vec![3, 4]], vec![vec![5, 6], vec![7, 8]]]
    );
    let from_vecs = Tensor::new(&vec![vec![1.0f32, 2.0], vec![3.0, 4.0]], d)?;
    assert_eq!(from_vecs.dims(), [2, 2]);
    assert!(matches!(
        Tensor::new(&vec![vec![1.0f32, 2.0], vec![3.0]], d),
        Err(Error::InvalidData(_))
    ));
    assert!(matches!(
        Tensor::from_vec(vec![1.0f32; 5], (2, 3), d),
        Err(Error::InvalidData(_))
    ));
    Ok(())
});

#[test]
fn random_is_seedable_and_has_the_right_moments() -> accelkit::Result<()> {
    let _serial = common::lock();
    accelkit::manual_seed(42);
    let a = Tensor::randn(0.0, 1.0, 100_000, &Device::Cpu)?;
    accelkit::manual_seed(42);
    let b = Tensor::randn(0.0, 1.0, 100_000, &Device::Cpu)?;
    assert_eq!(
        a.to_vec1::<f32>()?,
        b.to_vec1::<f32>()?,
        "same seed, same numbers"
    );
    let v = a.to_vec_f64()?;
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64;
    assert!(
        mean.abs() < 0.02 && (var - 1.0).abs() < 0.02,
        "mean {mean}, var {var}"
    );
    let u = Tensor::rand(2.0, 3.0, 10_000, &Device::Cpu)?.to_vec_f64()?;
    assert!(u.iter().all(|x| (2.0..3.0).contains(x)));
    let um = u.iter().sum::<f64>() / u.len() as f64;
    assert!((um - 2.5).abs() < 0.02, "uniform mean {um}");
    let h = Tensor::randn_with(1.0, 0.5, (3, 3), DType::BF16, &Device::Cpu)?;
    assert_eq!(h.dtype(), DType::BF16);
    assert!(Tensor::randn_with(0.0, 1.0, 3, DType::I32, &Device::Cpu).is_err());
    Ok(())
}

device_test!(casts_round_trip, |d: &Device| {
    // Every value is exact in f32, so the reference is one rounding into each dtype.
    let v = vec![-2.75, -1.0, 0.0, 0.5, 1.25, 3.0, 1000.5, -1000.75];
    let t = tensor(&v, &[8], DType::F32, d)?;
    let wide = if d.supports(DType::F64) {
        DType::F64
    } else {
        DType::F32
    };
    for dtype in DType::ALL {
        if !d.supports(dtype) {
            common::skip_part(d, &format!("casts to {dtype}"));
            continue;
        }
        let c = t.to_dtype(dtype)?;
        assert_eq!(c.dtype(), dtype);
        let want = round_to(&v, dtype);
        assert_close(&c.to_vec_f64()?, &want, 0.0, &format!("cast to {dtype}"));
        assert_close(
            &c.to_dtype(wide)?.to_vec_f64()?,
            &want,
            0.0,
            &format!("{dtype} back to {wide}"),
        );
        // A strided view casts as its own elements.
        let m = t.reshape((2, 4))?.t()?.to_dtype(dtype)?;
        assert_eq!(m.dims(), [4, 2]);
        assert_eq!(m.to_vec_f64()?[1], want[4]);
    }
    Ok(())
});

device_test!(views_reshape_contiguous, |d: &Device| {
    let it = common::int_dtype(d);
    let seq: Vec<f64> = (0..24).map(f64::from).collect();
    let t = tensor(&seq, &[24], it, d)?.reshape((2, 3, 4))?;
    let tr = t.transpose(0, 2)?;
    assert_eq!(tr.dims(), [4, 3, 2]);
    assert!(!tr.is_contiguous());
    let c = tr.contiguous()?;
    assert!(c.is_contiguous());
    // tr[i, j, k] == t[k, j, i] == k*12 + j*4 + i
    let v = c.to_vec_f64()?;
    for i in 0..4 {
        for j in 0..3 {
            for k in 0..2 {
                assert_eq!(v[(i * 3 + j) * 2 + k], (k * 12 + j * 4 + i) as f64);
            }
        }
    }
    assert_eq!(tr.reshape(24)?.to_vec_f64()?[1], 12.0);
    let m = tensor(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], it, d)?;
    assert_eq!(m.t()?.to_vec_f64()?, vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    assert_eq!(m.t()?.t()?.to_vec_f64()?, m.to_vec_f64()?);
    assert!(
        t.t().is_err(),
        "t() of a 3-d tensor is an error, as in PyTorch"
    );
    assert!(matches!(
        t.transpose(0, 3),
        Err(Error::DimOutOfRange { .. })
    ));
    assert!(matches!(
        t.reshape((5, 5)),
        Err(Error::ShapeMismatch { .. })
    ));
    assert_eq!(Tensor::new(&[1.0f32], d)?.reshape(())?.rank(), 0);
    // A reshape of a transposed view reads the view's order, not the storage's.
    assert_eq!(
        m.t()?.reshape((3, 2))?.to_vec_f64()?,
        vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]
    );
    Ok(())
});

device_test!(errors_name_the_problem, |d: &Device| {
    let a = Tensor::zeros((2, 3), DType::F32, d)?;
    let b = Tensor::zeros((4, 3), DType::F32, d)?;
    let e = a.add(&b).unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { op: "add", .. }));
    let msg = e.to_string();
    assert!(
        msg.contains("[2, 3]") && msg.contains("[4, 3]") && msg.contains("add"),
        "{msg}"
    );
    let it = common::int_dtype(d);
    let i = Tensor::zeros((2, 3), it, d)?;
    let e = a.mul(&i).unwrap_err().to_string();
    assert!(
        e.contains("f32")
            && e.contains(&it.to_string())
            && e.contains("mul")
            && e.contains("to_dtype"),
        "{e}"
    );
    assert!(matches!(
        a.sum(2),
        Err(Error::DimOutOfRange {
            dim: 2,
            rank: 2,
            ..
        })
    ));
    assert!(matches!(a.sum(-3), Err(Error::DimOutOfRange { .. })));
    let e = Tensor::zeros(0, DType::F32, d)?.max_all().unwrap_err();
    assert!(e.to_string().contains("empty"), "{e}");
    let e = a.to_vec1::<f32>().unwrap_err().to_string();
    assert!(e.contains("1-d") && e.contains("[2, 3]"), "{e}");
    let e = a.to_vec2::<i32>().unwrap_err().to_string();
    assert!(e.contains("f32") && e.contains("i32"), "{e}");
    assert!(a.to_scalar::<f32>().is_err());
    // Sizes no memory can address are an error, not an abort or a wrapped count.
    let e = Tensor::zeros((1 << 40, 1 << 40), DType::F32, d).unwrap_err();
    assert!(matches!(e, Error::SizeOverflow { .. }), "{e}");
    // Sizes larger than the device's memory are out of memory, naming the size.
    let e = Tensor::zeros((1 << 20, 1 << 20), DType::F32, d)
        .unwrap_err()
        .to_string();
    assert!(e.contains("out of memory") && e.contains("4.00 TiB"), "{e}");
    Ok(())
});

#[test]
fn mixed_devices_are_an_error_naming_both() {
    let _serial = common::lock();
    // Every accelerator device, usable or not, must be refused next to a CPU tensor.
    let cpu = Tensor::new(&[[5f32, 6.], [7., 8.]], &Device::Cpu).unwrap();
    for d in common::devices().into_iter().filter(Device::is_accelerator) {
        let a = cpu.to_device(&d).unwrap();
        let e = a.matmul(&cpu).unwrap_err().to_string();
        assert_eq!(
            e,
            format!("expected all tensors to be on the same device, but found {d} and cpu (in matmul); move one with .to_device(&{d}) or .to_device(&cpu)")
        );
        assert!(a.add(&cpu).is_err());
    }
    // On a machine without the accelerator, asking for it is an error that lists what exists.
    if !accelkit::cuda::is_available() {
        let e = cpu.cuda().unwrap_err().to_string();
        assert!(e.starts_with("device cuda:0 is not available: "), "{e}");
        assert!(e.contains("available devices: cpu"), "{e}");
    }
    let shape = Shape::from((2, 2));
    assert_eq!(cpu.shape(), &shape);
}

/// f32 to bf16 and f16 and back on the CPU, bit for bit as `half` converts one value at a
/// time (round to nearest even; NaNs quiet), and f32 <-> f64 as Rust's `as` converts:
/// every 16-bit pattern widened, and f32 (and f64) bit
/// patterns spread over all exponents, signs and NaN payloads rounded, over 3 x 2^16 + 141
/// values (several chunks, split between threads, and a tail), contiguous and transposed.
#[test]
fn casts_between_f32_and_16_bit_floats_match_half_bit_for_bit() {
    use half::{bf16, f16};
    let _serial = common::lock();
    let cpu = Device::Cpu;
    let n = 7 * 28_107; // 3 x 2^16 + 141
    let wide: Vec<f32> = (0..n as u32)
        .map(|i| f32::from_bits(i.wrapping_mul(2_654_435_761)))
        .collect();
    let bits: Vec<u16> = (0..n).map(|i| (i % 65536) as u16).collect();
    let x = Tensor::from_vec(wide.clone(), n, &cpu).unwrap();
    let xt = x.reshape((n / 7, 7)).unwrap().t().unwrap();
    let by_t: Vec<f32> = (0..7)
        .flat_map(|j| (0..n / 7).map(move |i| i * 7 + j))
        .map(|e| wide[e])
        .collect();
    let check_round = |got: Vec<u16>, from: &[f32], round: fn(f32) -> u16, what: &str| {
        assert_eq!(got.len(), from.len(), "{what}");
        for (g, &v) in got.iter().zip(from) {
            assert_eq!(*g, round(v), "{what}: {v:e} ({:#x})", v.to_bits());
        }
    };
    for (t, from, what) in [
        (&x, &wide[..], "contiguous"),
        (&xt, &by_t[..], "transposed"),
    ] {
        let b = t.to_dtype(DType::BF16).unwrap();
        let got = b
            .contiguous()
            .unwrap()
            .reshape(n)
            .unwrap()
            .to_vec1::<bf16>()
            .unwrap();
        let got: Vec<u16> = got.iter().map(|v| v.to_bits()).collect();
        check_round(
            got,
            from,
            |v| bf16::from_f32(v).to_bits(),
            &format!("bf16 {what}"),
        );
        let h = t.to_dtype(DType::F16).unwrap();
        let got = h
            .contiguous()
            .unwrap()
            .reshape(n)
            .unwrap()
            .to_vec1::<f16>()
            .unwrap();
        let got: Vec<u16> = got.iter().map(|v| v.to_bits()).collect();
        check_round(
            got,
            from,
            |v| f16::from_f32(v).to_bits(),
            &format!("f16 {what}"),
        );
        // f32 -> f64 is exact, and back gives the same bits (NaNs aside: payloads).
        let d = t.to_dtype(DType::F64).unwrap();
        let got = d.contiguous().unwrap().reshape(n).unwrap();
        for (g, &v) in got.to_vec1::<f64>().unwrap().iter().zip(from) {
            assert!(
                *g == f64::from(v) || (g.is_nan() && v.is_nan()),
                "f64 {what}: {v:e}"
            );
        }
        let back = d.to_dtype(DType::F32).unwrap().contiguous().unwrap();
        let back = back.reshape(n).unwrap().to_vec1::<f32>().unwrap();
        for (g, &v) in back.iter().zip(from) {
            assert!(
                g.to_bits() == v.to_bits() || v.is_nan(),
                "f32 {what}: {v:e}"
            );
        }
    }
    // f64 -> f32 rounds to nearest even, overflows to infinity, underflows to 0.
    let wide64: Vec<f64> = (0..n as u64)
        .map(|i| f64::from_bits(i.wrapping_mul(0x9E37_79B9_7F4A_7C15)))
        .collect();
    let d = Tensor::from_vec(wide64.clone(), n, &cpu).unwrap();
    let got = d.to_dtype(DType::F32).unwrap().to_vec1::<f32>().unwrap();
    for (g, &v) in got.iter().zip(&wide64) {
        assert!(
            g.to_bits() == (v as f32).to_bits() || v.is_nan(),
            "f64 {v:e} to f32"
        );
    }
    let h: Vec<f16> = bits.iter().map(|&b| f16::from_bits(b)).collect();
    let b: Vec<bf16> = bits.iter().map(|&b| bf16::from_bits(b)).collect();
    let hs = Tensor::from_vec(h.clone(), n, &cpu).unwrap();
    let bs = Tensor::from_vec(b.clone(), n, &cpu).unwrap();
    let got = hs.to_dtype(DType::F32).unwrap().to_vec1::<f32>().unwrap();
    for (g, v) in got.iter().zip(&h) {
        assert_eq!(g.to_bits(), v.to_f32().to_bits(), "f16 {:#x}", v.to_bits());
    }
    let got = bs.to_dtype(DType::F32).unwrap().to_vec1::<f32>().unwrap();
    for (g, v) in got.iter().zip(&b) {
        assert_eq!(g.to_bits(), v.to_f32().to_bits(), "bf16 {:#x}", v.to_bits());
    }
}

/// Sums big enough to be split between threads, on the CPU: every row of a 300 x 1001 tensor
/// (`sum(1)`: rows shared out), all of it (`sum_all`: chunks), the columns of its transpose
/// (a strided view, copied first) and a middle dimension (blocks of columns shared out), in f32, bf16 and f16, against f64 sums of the
/// values as stored, rounded once into the dtype.
#[test]
fn large_sums_over_rows_views_and_all_match_f64_sums() {
    let _serial = common::lock();
    let cpu = Device::Cpu;
    let (r, c) = (300, 1001);
    for dtype in [DType::F32, DType::BF16, DType::F16] {
        // Values in [-4, 4): f16 sums of a row stay far inside its range.
        let v = round_to(&values(r * c, 5), dtype);
        let t = tensor(&v, &[r, c], dtype, &cpu).unwrap();
        let rows: Vec<f64> = v.chunks(c).map(|row| row.iter().sum()).collect();
        let total: f64 = v.iter().sum();
        let what = |w: &str| format!("{w} {dtype}");
        let exact = |s: &[f64]| round_to(s, dtype);
        // One rounding of an f64 sum: equal but for f64's own error, far below a unit of
        // the dtype's last place.
        let tol = 1e-9;
        let got = t.sum(1).unwrap().to_vec_f64().unwrap();
        assert_close(&got, &exact(&rows), tol, &what("sum(1)"));
        let got = t.t().unwrap().sum(0).unwrap().to_vec_f64().unwrap();
        assert_close(&got, &exact(&rows), tol, &what("t().sum(0)"));
        let got = t.sum_all().unwrap().to_vec_f64().unwrap();
        assert_close(&got, &exact(&[total]), tol, &what("sum_all"));
        let means: Vec<f64> = rows.iter().map(|s| s / c as f64).collect();
        let got = t.mean(1).unwrap().to_vec_f64().unwrap();
        assert_close(&got, &exact(&means), tol, &what("mean(1)"));
        // Over a middle dimension, with more columns than one block of sums (1024): 3 x 40 x
        // 2100, summed over the 40.
        let (a, m, b) = (3, 40, 2100);
        let v = round_to(&values(a * m * b, 6), dtype);
        let t = tensor(&v, &[a, m, b], dtype, &cpu).unwrap();
        let mut sums = vec![0.0; a * b];
        for (e, x) in v.iter().enumerate() {
            sums[(e / (m * b)) * b + e % b] += x;
        }
        let got = t.sum(1).unwrap().to_vec_f64().unwrap();
        assert_close(
            &got,
            &exact(&sums),
            tol,
            &what("sum over the middle of 3 x 40 x 2100"),
        );
    }
}

/// bf16 and f16 elementwise ops on the CPU (computed in f32 blocks), bit for bit against
/// `half`'s own arithmetic one value at a time (each result rounded once from f32): x op y
/// of the same shape and x op a one-value tensor, relu and exp, over 2^16 + 2^15 + 3 bit
/// patterns (every finite, infinite, subnormal and NaN class; chunks split between threads,
/// blocks and a tail), and a broadcast row (the general path) for comparison. (exp: accel's
/// f32 exp is within one unit of f32's last place of libm's, so a result could round the
/// other way; over these values none does.)
#[test]
fn half_elementwise_ops_match_half_arithmetic_bit_for_bit() {
    use half::{bf16, f16};
    fn check<H: accelkit::WithDType + Copy + PartialEq + std::fmt::Debug>(
        from_bits: fn(u16) -> H,
        to_bits: fn(H) -> u16,
        to_f32: fn(H) -> f32,
        from_f32: fn(f32) -> H,
        name: &str,
    ) {
        let cpu = Device::Cpu;
        let n = 65536 + 32768 + 3;
        let xs: Vec<H> = (0..n as u32)
            .map(|i| from_bits((i * 40503) as u16))
            .collect();
        let ys: Vec<H> = (0..n as u32)
            .map(|i| from_bits((i * 9973 + 7) as u16))
            .collect();
        let x = Tensor::from_vec(xs.clone(), n, &cpu).unwrap();
        let y = Tensor::from_vec(ys.clone(), n, &cpu).unwrap();
        let one = Tensor::from_vec(vec![ys[5]], 1, &cpu).unwrap();
        let same = |got: Tensor, want: &dyn Fn(usize) -> f32, what: &str| {
            let got = got.to_vec1::<H>().unwrap();
            for (i, g) in got.iter().enumerate() {
                let w = from_f32(want(i));
                // NaN payloads aside (x86 and `half` quiet them alike; the sign may differ).
                let nan = to_f32(*g).is_nan() && to_f32(w).is_nan();
                assert!(
                    nan || to_bits(*g) == to_bits(w),
                    "{name} {what} at {i}: {:#x} {:#x} gave {:#x}, want {:#x}",
                    to_bits(xs[i]),
                    to_bits(ys[i]),
                    to_bits(*g),
                    to_bits(w)
                );
            }
        };
        let (a, b) = (|i: usize| to_f32(xs[i]), |i: usize| to_f32(ys[i]));
        let c = to_f32(ys[5]);
        same(x.add(&y).unwrap(), &|i| a(i) + b(i), "x + y");
        same(x.sub(&y).unwrap(), &|i| a(i) - b(i), "x - y");
        same(x.mul(&y).unwrap(), &|i| a(i) * b(i), "x * y");
        same(x.div(&y).unwrap(), &|i| a(i) / b(i), "x / y");
        let max = |p: f32, q: f32| if p.is_nan() || p > q { p } else { q };
        same(x.maximum(&y).unwrap(), &|i| max(a(i), b(i)), "maximum");
        same(x.add(&one).unwrap(), &|i| a(i) + c, "x + one value");
        same(x.div(&one).unwrap(), &|i| a(i) / c, "x / one value");
        // A Python scalar: in f32 with the element, rounded once (x * 1e5 of a small f16 is
        // not x * inf), in one pass on the CPU (`BackendStorage::half_scalar`).
        for v in [3.0, 0.1, -2.5e-3, 1e5, 1.0 + 2f64.powi(-30), 7e-42] {
            let c = v as f32;
            same(x.add_scalar(v).unwrap(), &|i| a(i) + c, "x + scalar");
            same(x.sub_scalar(v).unwrap(), &|i| a(i) - c, "x - scalar");
            same(x.mul_scalar(v).unwrap(), &|i| a(i) * c, "x * scalar");
            same(x.div_scalar(v).unwrap(), &|i| a(i) / c, "x / scalar");
        }
        // A strided view (pairs transposed) goes through f32 and back.
        let pairs = Tensor::from_vec(xs[..n - 1].to_vec(), ((n - 1) / 2, 2), &cpu).unwrap();
        let got = pairs.t().unwrap().mul_scalar(0.1).unwrap();
        let got = got
            .t()
            .unwrap()
            .contiguous()
            .unwrap()
            .reshape(n - 1)
            .unwrap();
        same(got, &|i| a(i) * 0.1f32, "a strided view * scalar");
        let relu = |p: f32| if p < 0.0 { 0.0 } else { p };
        same(x.relu().unwrap(), &|i| relu(a(i)), "relu");
        same(x.exp().unwrap(), &|i| a(i).exp(), "exp");
        // A broadcast (rows of 9 by one row) goes the general way: the same values.
        let m = x.reshape((n / 9, 9)).unwrap();
        let row = Tensor::from_vec(ys[..9].to_vec(), (1, 9), &cpu).unwrap();
        let got = m.mul(&row).unwrap().reshape(n).unwrap();
        same(got, &|i| a(i) * b(i % 9), "x * a row");
    }
    let _serial = common::lock();
    check(
        bf16::from_bits,
        bf16::to_bits,
        bf16::to_f32,
        bf16::from_f32,
        "bf16",
    );
    check(
        f16::from_bits,
        f16::to_bits,
        f16::to_f32,
        f16::from_f32,
        "f16",
    );
}

/// Maxima big enough to be split between threads, on the CPU: every row of a 300 x 1001
/// tensor (`max(1)`), all of it, and the columns of its transpose, in f32, f64 and bf16,
/// against a naive fold; a NaN anywhere in a row makes that row's maximum NaN, and the
/// whole tensor's.
#[test]
fn large_maxima_over_rows_and_all_match_a_naive_fold() {
    let _serial = common::lock();
    let cpu = Device::Cpu;
    let (r, c) = (300, 1001);
    for dtype in [DType::F32, DType::F64, DType::BF16] {
        let mut v = round_to(&values(r * c, 9), dtype);
        // The largest value of row 7 in its tail (past the last whole vector), and a NaN in
        // row 11.
        v[7 * c + 1000] = 100.0;
        v[11 * c + 500] = f64::NAN;
        let t = tensor(&v, &[r, c], dtype, &cpu).unwrap();
        let fold = |xs: &[f64]| {
            xs.iter().fold(f64::NEG_INFINITY, |m, &x| {
                if m.is_nan() || x.is_nan() {
                    f64::NAN
                } else {
                    m.max(x)
                }
            })
        };
        let rows: Vec<f64> = v.chunks(c).map(fold).collect();
        let what = |w: &str| format!("{w} {dtype}");
        let got = t.max(1).unwrap().to_vec_f64().unwrap();
        assert_close(&got, &rows, 0.0, &what("max(1)"));
        assert_eq!(got[7], 100.0);
        let got = t.t().unwrap().max(0).unwrap().to_vec_f64().unwrap();
        assert_close(&got, &rows, 0.0, &what("t().max(0)"));
        assert!(t.max_all().unwrap().to_vec_f64().unwrap()[0].is_nan());
        v[11 * c + 500] = 0.0;
        let t = tensor(&v, &[r, c], dtype, &cpu).unwrap();
        assert_eq!(t.max_all().unwrap().to_vec_f64().unwrap(), [100.0]);
    }
}

/// Contiguous copies of transposed views on the CPU (copied in tiles, bands of rows split
/// between threads): a 300 x 1001 matrix's `t()` (past the size that splits), a batch of
/// three 130 x 70 matrices transposed in their last two dimensions, and a 3-d view whose
/// middle dimension is swapped with its first, against the index arithmetic written out.
#[test]
fn transposed_views_copy_as_their_elements() {
    let _serial = common::lock();
    let cpu = Device::Cpu;
    let (r, c) = (300, 1001);
    let v: Vec<f64> = (0..r * c).map(|i| i as f64).collect();
    let t = Tensor::from_vec(v.clone(), (r, c), &cpu).unwrap();
    let got = t.t().unwrap().contiguous().unwrap().to_vec_f64().unwrap();
    let want: Vec<f64> = (0..c)
        .flat_map(|j| (0..r).map(move |i| (i * c + j) as f64))
        .collect();
    assert_eq!(got, want, "300 x 1001 transposed");
    // 4- and 8-byte values go through 16 x 16 or 8 x 8 blocks in registers where the CPU
    // has AVX-512 (f64 just above), the edges one at a time; rows 8 KiB apart (2048 f32)
    // as well.
    for dt in [DType::F32, DType::I32, DType::I64] {
        let got = t.to_dtype(dt).unwrap().t().unwrap().contiguous().unwrap();
        assert_eq!(
            got.to_vec_f64().unwrap(),
            want,
            "{dt} 300 x 1001 transposed"
        );
    }
    // 2-byte values through 32 x 32 blocks on the stack (rounded first: compared as held).
    for dt in [DType::BF16, DType::F16] {
        let h = t.to_dtype(dt).unwrap();
        let hv = h.to_vec_f64().unwrap();
        let want_h: Vec<f64> = (0..c)
            .flat_map(|j| (0..r).map(move |i| (i, j)))
            .map(|(i, j)| hv[i * c + j])
            .collect();
        let got = h.t().unwrap().contiguous().unwrap().to_vec_f64().unwrap();
        assert_eq!(got, want_h, "{dt} 300 x 1001 transposed");
    }
    let (r2, c2) = (40, 2048);
    let v: Vec<f32> = (0..r2 * c2).map(|i| i as f32).collect();
    let t2 = Tensor::from_vec(v, (r2, c2), &cpu).unwrap();
    let got = t2.t().unwrap().contiguous().unwrap().to_vec_f64().unwrap();
    let want2: Vec<f64> = (0..c2)
        .flat_map(|j| (0..r2).map(move |i| (i * c2 + j) as f64))
        .collect();
    assert_eq!(got, want2, "40 x 2048 f32 transposed");
    let (b, m, n) = (3, 130, 70);
    let v: Vec<f32> = (0..b * m * n).map(|i| i as f32).collect();
    let t = Tensor::from_vec(v, (b, m, n), &cpu).unwrap();
    let got = t.transpose(1, 2).unwrap().contiguous().unwrap();
    assert_eq!(got.dims(), [b, n, m]);
    let want: Vec<f64> = (0..b * n * m)
        .map(|e| {
            let (z, j, i) = (e / (n * m), (e / m) % n, e % m);
            (z * m * n + i * n + j) as f64
        })
        .collect();
    assert_eq!(got.to_vec_f64().unwrap(), want, "batched transpose");
    let got = t.transpose(0, 1).unwrap().contiguous().unwrap();
    let want: Vec<f64> = (0..b * m * n)
        .map(|e| {
            let (i, z, j) = (e / (b * n), (e / n) % b, e % n);
            (z * m * n + i * n + j) as f64
        })
        .collect();
    assert_eq!(
        got.to_vec_f64().unwrap(),
        want,
        "first two dimensions swapped"
    );
}
