//! Conformance: every op on zero-size and degenerate shapes, and the values IEEE 754 and
//! two's complement fix for NaN, infinities, overflow, rounding and integer wrap-around, on
//! every backend. The expected values are written down from the standards (and PyTorch's
//! documented behaviour for empty reductions), not taken from any backend's output.

use crate::common;

use accelkit::{DType, Device, Error, Tensor};

/// A tensor of `dtype` on `d` holding `vals` (made on the CPU in f64, then converted).
fn tensor(vals: &[f64], shape: &[usize], dtype: DType, d: &Device) -> accelkit::Result<Tensor> {
    Tensor::from_vec(vals.to_vec(), shape, &Device::Cpu)?
        .to_dtype(dtype)?
        .to_device(d)
}

/// Asserts `got` holds `want` exactly, bit for bit (so -0.0 is not 0.0), NaN matching NaN.
fn same(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length of {got:?}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g.is_nan() && w.is_nan()) || g.to_bits() == w.to_bits(),
            "{what}: element {i} is {g}, expected {w} (all: {got:?})"
        );
    }
}

/// The dtypes `d` holds.
fn dtypes(d: &Device) -> Vec<DType> {
    DType::ALL
        .into_iter()
        .filter(|&t| {
            let ok = d.supports(t);
            if !ok {
                common::skip_part(d, &format!("{t} (not held by this device)"));
            }
            ok
        })
        .collect()
}

device_test!(zero_size_shapes_in_every_op_and_dtype, |d: &Device| {
    let held = dtypes(d);
    for &dtype in &held {
        let what = |s: &str| format!("{s} in {dtype} on {d}");
        // Creation.
        let e0 = Tensor::zeros(0, dtype, d)?;
        let e03 = Tensor::zeros((0, 3), dtype, d)?;
        let e30 = Tensor::ones((3, 0), dtype, d)?;
        let e204 = Tensor::full(2.0, (2, 0, 4), dtype, d)?;
        assert_eq!(e03.dims(), [0, 3]);
        assert_eq!((e30.elem_count(), e30.size_in_bytes()), (0, 0));
        assert!(e204.to_vec_f64()?.is_empty());
        // Printed as PyTorch prints them: the shape, unless it is [0].
        let shown = e204.to_string();
        assert!(shown.starts_with("tensor([], size=(2, 0, 4)"), "{shown}");
        assert!(e0.to_string().starts_with("tensor([]"));
        assert!(!e0.to_string().contains("size="));
        assert_eq!(tensor(&[], &[0, 5], dtype, d)?.dims(), [0, 5]);
        assert_eq!(
            tensor(&[], &[4, 0], dtype, d)?.to_vec_f64()?,
            Vec::<f64>::new()
        );
        // Elementwise, with broadcasting of size-1 and size-0 dimensions.
        for t in [&e0, &e03, &e30, &e204] {
            assert_eq!(t.neg()?.dims(), t.dims(), "{}", what("neg"));
            assert_eq!(t.relu()?.dims(), t.dims(), "{}", what("relu"));
            assert_eq!(t.exp()?.dims(), t.dims(), "{}", what("exp"));
            assert_eq!(t.add(t)?.dims(), t.dims(), "{}", what("add"));
            assert_eq!(
                t.mul_scalar(3.0)?.dims(),
                t.dims(),
                "{}",
                what("mul_scalar")
            );
            assert_eq!(t.div(t)?.elem_count(), 0, "{}", what("div"));
            assert_eq!(t.contiguous()?.dims(), t.dims());
            assert_eq!(t.copy()?.dims(), t.dims());
            for &to in &held {
                assert_eq!(t.to_dtype(to)?.dims(), t.dims(), "{}", what("cast"));
            }
            assert_eq!(
                t.cpu()?.to_device(d)?.dims(),
                t.dims(),
                "{}",
                what("copies")
            );
            let shown = t.to_string();
            assert!(shown.starts_with("tensor([]"), "{shown}");
        }
        let row = Tensor::ones(3, dtype, d)?;
        assert_eq!(e03.add(&row)?.dims(), [0, 3], "{}", what("[0,3] + [3]"));
        let col = Tensor::ones((3, 1), dtype, d)?;
        assert_eq!(
            e30.maximum(&col)?.dims(),
            [3, 0],
            "{}",
            what("[3,0] max [3,1]")
        );
        let one = Tensor::ones((1, 1), dtype, d)?;
        assert_eq!(
            e204.sub(&one)?.dims(),
            [2, 0, 4],
            "{}",
            what("[2,0,4] - [1,1]")
        );
        assert!(matches!(
            e03.add(&Tensor::ones((2, 3), dtype, d)?),
            Err(Error::ShapeMismatch { .. })
        ));
        // Views.
        assert_eq!(e03.t()?.dims(), [3, 0]);
        assert_eq!(e03.t()?.contiguous()?.dims(), [3, 0]);
        assert_eq!(e204.transpose(0, 2)?.dims(), [4, 0, 2]);
        assert_eq!(e03.reshape((3, 0))?.dims(), [3, 0]);
        assert_eq!(e03.reshape(0)?.dims(), [0]);
        assert_eq!(e03.t()?.reshape((0, 7))?.dims(), [0, 7]);
        assert!(e03.reshape(1).is_err());
        // Reductions, as PyTorch: an empty sum is 0, an empty mean is NaN, an empty max is an
        // error; reducing a non-empty dimension of an empty tensor gives an empty result.
        let sum_dtype = if dtype.is_float() { dtype } else { DType::I64 };
        if d.supports(sum_dtype) {
            let s = e30.sum(1)?;
            assert_eq!((s.dims(), s.dtype()), (&[3usize][..], sum_dtype));
            same(&s.to_vec_f64()?, &[0.0; 3], &what("sum over an empty dim"));
            assert_eq!(e30.sum(0)?.dims(), [0], "{}", what("sum(0) of [3, 0]"));
            assert_eq!(e03.sum(0)?.to_vec_f64()?, vec![0.0; 3]);
            assert_eq!(e03.sum(-1)?.dims(), [0]);
            same(&e0.sum_all()?.to_vec_f64()?, &[0.0], &what("sum_all of []"));
            same(
                &e204.sum_all()?.to_vec_f64()?,
                &[0.0],
                &what("sum_all of [2,0,4]"),
            );
            assert_eq!(e204.sum(1)?.to_vec_f64()?, vec![0.0; 8]);
            assert_eq!(e204.sum(2)?.dims(), [2, 0]);
        } else {
            common::skip_part(d, &format!("sums of {dtype} (they are {sum_dtype})"));
        }
        if dtype.is_float() {
            same(
                &e0.mean_all()?.to_vec_f64()?,
                &[f64::NAN],
                &what("mean_all of []"),
            );
            same(
                &e30.mean(1)?.to_vec_f64()?,
                &[f64::NAN; 3],
                &what("mean(1) of [3,0]"),
            );
            assert_eq!(e30.mean(0)?.dims(), [0]);
        }
        for (t, dim) in [(&e0, None), (&e30, Some(1)), (&e03, Some(0)), (&e204, None)] {
            let e = match dim {
                None => t.max_all(),
                Some(k) => t.max(k),
            }
            .unwrap_err();
            assert!(
                matches!(e, Error::InvalidArgument { .. }) && e.to_string().contains("empty"),
                "{}: {e}",
                what("max over nothing")
            );
        }
        assert_eq!(e30.max(0)?.dims(), [0], "{}", what("max(0) of [3, 0]"));
        assert_eq!(e03.max(1)?.dims(), [0], "{}", what("max(1) of [0, 3]"));
        // Matmul: k = 0 gives zeros (also in a buffer reused from the allocator's cache),
        // m = 0 or n = 0 give empty results, batches of 0 too.
        drop(Tensor::full(5.0, (2, 3), dtype, d)?);
        let z = Tensor::zeros((2, 0), dtype, d)?.matmul(&Tensor::zeros((0, 3), dtype, d)?)?;
        assert_eq!(z.dims(), [2, 3]);
        same(&z.to_vec_f64()?, &[0.0; 6], &what("matmul with k = 0"));
        let zb = Tensor::ones((4, 2, 0), dtype, d)?.matmul(&Tensor::ones((0, 3), dtype, d)?)?;
        same(
            &zb.to_vec_f64()?,
            &[0.0; 24],
            &what("batched matmul with k = 0"),
        );
        let a = Tensor::ones((0, 4), dtype, d)?.matmul(&Tensor::ones((4, 3), dtype, d)?)?;
        assert_eq!(a.dims(), [0, 3]);
        let b = Tensor::ones((2, 4), dtype, d)?.matmul(&Tensor::ones((4, 0), dtype, d)?)?;
        assert_eq!(b.dims(), [2, 0]);
        let c = Tensor::ones((0, 2, 4), dtype, d)?.matmul(&Tensor::ones((0, 4, 3), dtype, d)?)?;
        assert_eq!(c.dims(), [0, 2, 3]);
        let c = Tensor::ones((0, 2, 4), dtype, d)?.matmul(&Tensor::ones((4, 3), dtype, d)?)?;
        assert_eq!(c.dims(), [0, 2, 3]);
    }
    Ok(())
});

device_test!(scalars_and_size_one_dims, |d: &Device| {
    let s = Tensor::new(&2.5f32, d)?;
    assert_eq!((s.rank(), s.elem_count()), (0, 1));
    assert_eq!(s.add(&s)?.to_scalar::<f32>()?, 5.0);
    assert_eq!(s.neg()?.rank(), 0);
    assert_eq!(s.sum_all()?.to_scalar::<f32>()?, 2.5);
    assert_eq!(s.mean_all()?.to_scalar::<f32>()?, 2.5);
    assert_eq!(s.max_all()?.to_scalar::<f32>()?, 2.5);
    assert!(matches!(s.sum(0), Err(Error::DimOutOfRange { .. })));
    assert!(matches!(
        s.transpose(0, 0),
        Err(Error::DimOutOfRange { .. })
    ));
    assert_eq!(s.t()?.rank(), 0);
    assert_eq!(s.reshape((1, 1))?.dims(), [1, 1]);
    assert_eq!(s.reshape((1, 1))?.reshape(())?.to_scalar::<f32>()?, 2.5);
    assert!(matches!(s.matmul(&s), Err(Error::ShapeMismatch { .. })));
    // A 0-d operand broadcasts against any shape, the empty one included.
    let m = Tensor::new(&[[1.0f32, 2.0], [3.0, 4.0]], d)?;
    assert_eq!(
        m.mul(&s)?.to_vec2::<f32>()?,
        vec![vec![2.5, 5.0], vec![7.5, 10.0]]
    );
    assert_eq!(
        s.sub(&m)?.to_vec2::<f32>()?,
        vec![vec![1.5, 0.5], vec![-0.5, -1.5]]
    );
    assert_eq!(
        Tensor::zeros((0, 2), DType::F32, d)?.add(&s)?.dims(),
        [0, 2]
    );
    // Size-1 dimensions: reductions over them, matmuls of 1x1, transposes.
    let c = Tensor::new(&[[1.0f32], [2.0], [3.0]], d)?;
    assert_eq!(c.sum(1)?.to_vec1::<f32>()?, vec![1.0, 2.0, 3.0]);
    assert_eq!(c.max(0)?.to_vec1::<f32>()?, vec![3.0]);
    assert_eq!(c.t()?.matmul(&c)?.to_vec2::<f32>()?, vec![vec![14.0]]);
    assert_eq!(c.matmul(&c.t()?)?.dims(), [3, 3]);
    let one = Tensor::new(&[[[7.0f32]]], d)?;
    assert_eq!(one.matmul(&one)?.to_vec3::<f32>()?, vec![vec![vec![49.0]]]);
    assert_eq!(
        one.transpose(0, 2)?.contiguous()?.to_vec3::<f32>()?[0][0][0],
        7.0
    );
    Ok(())
});

device_test!(ieee_special_values_and_rounding, |d: &Device| {
    let inf = f64::INFINITY;
    let nan = f64::NAN;
    for dtype in dtypes(d).into_iter().filter(|t| t.is_float()) {
        let what = |s: &str| format!("{s} in {dtype} on {d}");
        // exp: e^0 = 1, e^-inf = +0, e^inf = inf, e^NaN = NaN; overflow to inf and underflow
        // to 0 at each format's range (f16's largest finite value is 65504, e^12 > that).
        let big = if dtype == DType::F16 { 12.0 } else { 1000.0 };
        let x = tensor(&[0.0, -inf, inf, nan, big, -big * 64.0], &[6], dtype, d)?;
        same(
            &x.exp()?.to_vec_f64()?,
            &[1.0, 0.0, inf, nan, inf, 0.0],
            &what("exp of special values"),
        );
        // relu and neg keep NaN and infinities.
        same(
            &x.relu()?.to_vec_f64()?,
            &[0.0, 0.0, inf, nan, big, 0.0],
            &what("relu"),
        );
        same(
            &x.neg()?.to_vec_f64()?,
            &[-0.0, inf, -inf, nan, -big, big * 64.0],
            &what("neg"),
        );
        // max and maximum propagate NaN (PyTorch's documented behaviour), whichever side.
        let a = tensor(&[1.0, nan, -inf, 3.0], &[4], dtype, d)?;
        let b = tensor(&[nan, 2.0, -inf, inf], &[4], dtype, d)?;
        same(
            &a.maximum(&b)?.to_vec_f64()?,
            &[nan, nan, -inf, inf],
            &what("maximum"),
        );
        same(
            &a.max_all()?.to_vec_f64()?,
            &[nan],
            &what("max_all with NaN"),
        );
        same(
            &tensor(&[-inf, -inf], &[2], dtype, d)?
                .max_all()?
                .to_vec_f64()?,
            &[-inf],
            &what("max of -inf"),
        );
        // inf - inf and 0 * inf are NaN; inf + inf stays inf.
        let i = tensor(&[inf, 0.0], &[2], dtype, d)?;
        let j = tensor(&[inf, inf], &[2], dtype, d)?;
        same(
            &i.sub(&j)?.to_vec_f64()?,
            &[nan, -inf],
            &what("inf - inf, 0 - inf"),
        );
        same(
            &i.mul(&j)?.to_vec_f64()?,
            &[inf, nan],
            &what("inf * inf, 0 * inf"),
        );
        same(&i.sum_all()?.to_vec_f64()?, &[inf], &what("sum with inf"));
        same(&j.sum_all()?.to_vec_f64()?, &[inf], &what("inf + inf"));
    }
    // Overflow to infinity when a result leaves a format's range.
    if d.supports(DType::F16) {
        let h = tensor(&[65504.0, -65504.0], &[2], DType::F16, d)?;
        same(
            &h.add(&h)?.to_vec_f64()?,
            &[inf, -inf],
            "f16 overflow to inf",
        );
        same(
            &h.mul_scalar(2.0)?.to_vec_f64()?,
            &[inf, -inf],
            "f16 scalar overflow",
        );
    }
    let f = tensor(&[3.0e38, -3.0e38], &[2], DType::F32, d)?;
    same(
        &f.add(&f)?.to_vec_f64()?,
        &[inf, -inf],
        "f32 overflow to inf",
    );
    Ok(())
});

device_test!(casts_round_to_nearest_even_and_saturate, |d: &Device| {
    let inf = f64::INFINITY;
    let nan = f64::NAN;
    let held = dtypes(d);
    // From the widest float the device holds: f64, else f32 (whose values these all are).
    let src = if held.contains(&DType::F64) {
        DType::F64
    } else {
        DType::F32
    };
    let cast = |v: &[f64], to: DType| -> accelkit::Result<Vec<f64>> {
        tensor(v, &[v.len()], src, d)?.to_dtype(to)?.to_vec_f64()
    };
    // Float to float: round to nearest, ties to even; beyond the largest finite value,
    // infinity; below the smallest subnormal, zero; NaN and infinities stay.
    if held.contains(&DType::F16) {
        // f16: 11-bit significands, so 2049 is a tie between 2048 and 2050 (even: 2048), 2051
        // between 2050 and 2052 (even: 2052); 65520 rounds up past 65504 to infinity; 2^-25
        // is half the smallest subnormal 2^-24, a tie that goes to the even 0, and 3 * 2^-25
        // a tie between 2^-24 and 2^-23 that goes to the even 2^-23.
        same(
            &cast(
                &[
                    2049.0,
                    2051.0,
                    65520.0,
                    -65520.0,
                    65519.0,
                    2f64.powi(-25),
                    3.0 * 2f64.powi(-25),
                    nan,
                    -inf,
                ],
                DType::F16,
            )?,
            &[
                2048.0,
                2052.0,
                inf,
                -inf,
                65504.0,
                0.0,
                2f64.powi(-23),
                nan,
                -inf,
            ],
            &format!("casts to f16 on {d}"),
        );
    }
    // Just above a tie, by a bit that only a wide source holds: rounds up (a conversion that
    // drops low bits first sees a tie and rounds to even, down). Both values are f32s.
    if held.contains(&DType::BF16) {
        same(
            &cast(&[1.0 + 2f64.powi(-8) + 2f64.powi(-23)], DType::BF16)?,
            &[1.0078125],
            &format!("a cast to bf16 just above a tie on {d}"),
        );
    }
    if held.contains(&DType::F16) {
        same(
            &cast(&[2049.0 + 2f64.powi(-12)], DType::F16)?,
            &[2050.0],
            &format!("a cast to f16 just above a tie on {d}"),
        );
    }
    if held.contains(&DType::BF16) {
        // bf16: 8-bit significands, so 1 + 2^-8 ties to 1 and 1 + 3 * 2^-8 ties to 1 + 2^-6;
        // 3e38 is 225.695 units of 2^120, so 226 of them; 3.4e38 passes the largest finite.
        same(
            &cast(
                &[
                    1.0 + 2f64.powi(-8),
                    1.0 + 3.0 * 2f64.powi(-8),
                    3.0e38,
                    3.4e38,
                    nan,
                    inf,
                ],
                DType::BF16,
            )?,
            &[1.0, 1.015625, 226.0 * 2f64.powi(120), inf, nan, inf],
            &format!("casts to bf16 on {d}"),
        );
    }
    if src == DType::F64 {
        // f32: 2^24 + 1 ties to 2^24; 2^24 + 3 ties to 2^24 + 4; 1e39 overflows.
        same(
            &cast(
                &[16_777_217.0, 16_777_219.0, 1e39, -1e39, 1e-46, nan],
                DType::F32,
            )?,
            &[16_777_216.0, 16_777_220.0, inf, -inf, 0.0, nan],
            &format!("casts to f32 on {d}"),
        );
    }
    // Float to integer: toward zero (C's and IEEE's convertToIntegerTowardZero); out of
    // range saturates at the type's limits and NaN gives 0 (IEEE leaves these results to the
    // implementation; accel fixes them as Rust's `as` does, on every backend).
    let to_int = [2.9, -2.9, 0.5, -0.5, 3.0e9, -3.0e9, 1.0e19, inf, -inf, nan];
    if held.contains(&DType::I32) {
        let (max, min) = (f64::from(i32::MAX), f64::from(i32::MIN));
        same(
            &cast(&to_int, DType::I32)?,
            &[2.0, -2.0, 0.0, 0.0, max, min, max, max, min, 0.0],
            &format!("casts to i32 on {d}"),
        );
    }
    if held.contains(&DType::I64) {
        let (max, min) = (i64::MAX as f64, i64::MIN as f64);
        same(
            &cast(&to_int, DType::I64)?,
            &[2.0, -2.0, 0.0, 0.0, 3.0e9, -3.0e9, max, max, min, 0.0],
            &format!("casts to i64 on {d}"),
        );
        // Integer to float rounds to nearest even too: 2^53 + 1 is not an f64.
        let i = Tensor::new(&[(1i64 << 53) + 1, i64::MAX], d)?;
        if held.contains(&DType::F64) {
            same(
                &i.to_dtype(DType::F64)?.to_vec_f64()?,
                &[2f64.powi(53), 2f64.powi(63)],
                &format!("i64 to f64 on {d}"),
            );
        }
        // Narrowing integers wraps (two's complement), as PyTorch and C do.
        let w = Tensor::new(&[(1i64 << 32) + 5, -1, i64::from(i32::MAX) + 1], d)?;
        if held.contains(&DType::I32) {
            same(
                &w.to_dtype(DType::I32)?.to_vec_f64()?,
                &[5.0, -1.0, f64::from(i32::MIN)],
                &format!("i64 to i32 on {d}"),
            );
        }
    }
    Ok(())
});

device_test!(integers_wrap_and_widen, |d: &Device| {
    // i32 arithmetic wraps modulo 2^32.
    let a = Tensor::new(&[i32::MAX, i32::MIN, 65536, -7], d)?;
    let b = Tensor::new(&[1i32, -1, 65536, 2], d)?;
    assert_eq!(
        a.add(&b)?.to_vec1::<i32>()?,
        vec![i32::MIN, i32::MAX, 131072, -5]
    );
    assert_eq!(
        a.mul(&b)?.to_vec1::<i32>()?,
        vec![i32::MAX, i32::MIN, 0, -14]
    );
    assert_eq!(
        a.neg()?.to_vec1::<i32>()?,
        vec![-i32::MAX, i32::MIN, -65536, 7]
    );
    assert_eq!(
        a.maximum(&b)?.to_vec1::<i32>()?,
        vec![i32::MAX, -1, 65536, 2]
    );
    assert_eq!(a.relu()?.to_vec1::<i32>()?, vec![i32::MAX, 0, 65536, 0]);
    // A 1x1 product whose value is 2^32 wraps to 0.
    let m = Tensor::new(&[[65536i32]], d)?;
    assert_eq!(m.matmul(&m)?.to_vec2::<i32>()?, vec![vec![0]]);
    // Sums of integers are i64, as in PyTorch, so they do not wrap at 32 bits.
    if d.supports(DType::I64) {
        let s = Tensor::new(&[i32::MAX, i32::MAX, 2], d)?.sum_all()?;
        assert_eq!(s.to_scalar::<i64>()?, 2 * i64::from(i32::MAX) + 2);
        let s = Tensor::new(&[i64::MAX, 1], d)?.sum_all()?;
        assert_eq!(s.to_scalar::<i64>()?, i64::MIN, "i64 sums wrap at 64 bits");
    } else {
        common::skip_part(d, "integer sums (they are i64)");
    }
    Ok(())
});

device_test!(eight_threads_share_one_device, |d: &Device| {
    let d = *d;
    let results: Vec<accelkit::Result<()>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|t| {
                s.spawn(move || -> accelkit::Result<()> {
                    let n = 24 + t;
                    let av: Vec<f64> = common::values(n * n, t as u64 + 1)
                        .iter()
                        .map(|x| x.round())
                        .collect();
                    let a = tensor(&av, &[n, n], DType::F32, &d)?;
                    for round in 0..5 {
                        // Integers in f32: every product and sum below is exact.
                        let c = a.matmul(&a.t()?)?.add_scalar(round as f64)?;
                        let got = c.to_vec_f64()?;
                        for i in 0..n {
                            for j in 0..n {
                                let want: f64 = (0..n).map(|k| av[i * n + k] * av[j * n + k]).sum();
                                assert_eq!(
                                    got[i * n + j],
                                    want + round as f64,
                                    "thread {t}, round {round}, [{i}, {j}] on {d}"
                                );
                            }
                        }
                        let s = a.sum_all()?.to_scalar::<f32>()? as f64;
                        assert_eq!(s, av.iter().sum::<f64>(), "thread {t} sum on {d}");
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a thread panicked"))
            .collect()
    });
    results.into_iter().collect()
});

/// Tensors may cross threads: a compile-time check.
#[test]
fn tensors_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Tensor>();
    send_sync::<accelkit::nn::Linear>();
    send_sync::<Error>();
}

#[test]
fn sizes_that_overflow_are_errors_not_tensors() {
    let _serial = common::lock();
    let cpu = Device::Cpu;
    // The element count 2 * 1 * 2^63 wraps to 0 in 64 bits: refused, not built over nothing.
    let e = Tensor::from_vec(Vec::<f32>::new(), vec![2, 1, 1 << 63], &cpu).unwrap_err();
    assert!(
        matches!(e, Error::SizeOverflow { op: "from_vec", .. }),
        "{e}"
    );
    assert!(e.to_string().contains("[2, 1, 9223372036854775808]"), "{e}");
    // A zero among huge sizes holds no element, but its strides would still overflow.
    for shape in [
        vec![0, 1 << 62, 8],
        vec![usize::MAX, 0],
        vec![1 << 32, 1 << 32],
    ] {
        for dtype in DType::ALL {
            let e = Tensor::zeros(shape.clone(), dtype, &cpu).unwrap_err();
            assert!(
                matches!(e, Error::SizeOverflow { .. }),
                "{shape:?} {dtype}: {e}"
            );
            assert!(Tensor::full(1.0, shape.clone(), dtype, &cpu).is_err());
        }
    }
    // Byte sizes are checked per dtype: 2^61 elements of i32 are 2^63 bytes, one too many.
    assert!(matches!(
        Tensor::zeros(1usize << 61, DType::I32, &cpu),
        Err(Error::SizeOverflow { .. })
    ));
    // Reshape to a shape whose count wraps to the same count.
    let t = Tensor::zeros(0, DType::F32, &cpu).unwrap();
    assert!(matches!(
        t.reshape(vec![0, 1 << 63, 4]),
        Err(Error::SizeOverflow { .. })
    ));
    let one = Tensor::ones(1, DType::F32, &cpu).unwrap();
    assert!(one.reshape(vec![1 << 32, 1 << 32]).is_err());
    // Broadcasting two valid (empty) shapes into one too large to exist.
    let a = Tensor::zeros(vec![0, 1 << 40, 1], DType::F32, &cpu).unwrap();
    let b = Tensor::zeros(vec![0, 1, 1 << 40], DType::F32, &cpu).unwrap();
    assert!(matches!(a.add(&b), Err(Error::SizeOverflow { .. })));
    // A matmul whose output is too large to exist: [2^40, 0] x [0, 2^40].
    let a = Tensor::zeros(vec![1 << 40, 0], DType::F32, &cpu).unwrap();
    let b = Tensor::zeros(vec![0, 1 << 40], DType::F32, &cpu).unwrap();
    assert!(matches!(a.matmul(&b), Err(Error::SizeOverflow { .. })));
    // arange whose length overflows, and one too long for memory.
    assert!(Tensor::arange_step(0.0f64, 1e300, 1e-300, &cpu).is_err());
    assert!(Tensor::arange(0i64, i64::MAX, &cpu).is_err());
    // A cast to a wider dtype checks the new byte size.
    assert!(matches!(
        Tensor::zeros(0, DType::F16, &cpu)
            .unwrap()
            .reshape(vec![0, 1 << 61])
            .and_then(|t| t.to_dtype(DType::F64)),
        Err(Error::SizeOverflow { .. })
    ));
    // Shapes outside tensors saturate instead of overflowing.
    let s = accelkit::Shape::from(vec![1usize << 63, 4]);
    assert_eq!(s.checked_elem_count(), None);
    assert_eq!(s.elem_count(), usize::MAX);
}
