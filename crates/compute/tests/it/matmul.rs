//! Matmul against a naive triple loop in f64: odd shapes that are not multiples of the
//! kernel's tiles, transposed views, batches, every dtype, and the error cases.

use crate::common;

use crate::common::{assert_close, round_to, values};
use accelkit::{DType, Device, Error, Tensor};

fn naive(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
        }
    }
    c
}

/// Tolerance relative to max(1, |c|) for a k-term dot product of values in [-4, 4).
fn mm_tol(dtype: DType, k: usize) -> f64 {
    match dtype {
        DType::F64 => 1e-12 * k as f64,
        DType::F32 => 2e-6 * k as f64,
        // f16/bf16 inputs are exact in f32; the result is rounded once.
        DType::F16 => 1e-3 * 16.0,
        DType::BF16 => 8e-3 * 16.0,
        DType::I32 | DType::I64 => 0.0,
    }
}

fn input(n: usize, seed: u64, dtype: DType) -> Vec<f64> {
    let v = values(n, seed);
    // Integers in [-4, 4) keep integer products exact and small.
    round_to(&v, dtype)
}

fn t(v: &[f64], shape: &[usize], dtype: DType, d: &Device) -> accelkit::Result<Tensor> {
    Tensor::from_vec(v.to_vec(), shape, &Device::Cpu)?
        .to_dtype(dtype)?
        .to_device(d)
}

const SHAPES: &[(usize, usize, usize)] = &[
    (1, 1, 1),
    (2, 2, 2),
    (17, 33, 5),
    (7, 1, 9),
    (6, 16, 16),
    (13, 257, 31),
    (65, 300, 129),
    (145, 70, 400),
    (0, 3, 4),
    (3, 0, 4),
    (3, 4, 0),
];

device_test!(matmul_matches_naive_every_dtype, |d: &Device| {
    for dtype in DType::ALL {
        if !d.supports(dtype) {
            continue;
        }
        for &(m, k, n) in SHAPES {
            let a = input(m * k, (m * 31 + k) as u64, dtype);
            let b = input(k * n, (k * 17 + n) as u64, dtype);
            let c = t(&a, &[m, k], dtype, d)?.matmul(&t(&b, &[k, n], dtype, d)?)?;
            assert_eq!(c.dims(), [m, n]);
            assert_eq!(c.dtype(), dtype);
            let want = naive(&a, &b, m, k, n);
            assert_close(
                &c.to_vec_f64()?,
                &want,
                mm_tol(dtype, k),
                &format!("{dtype} {m}x{k}x{n}"),
            );
        }
    }
    Ok(())
});

device_test!(matmul_large_parallel_f32_f64, |d: &Device| {
    // Big enough to split across threads and to use several KC blocks.
    for (dtype, (m, k, n)) in [
        (DType::F32, (301, 600, 517)),
        (DType::F64, (250, 530, 90)),
        (DType::BF16, (40, 700, 300)),
    ] {
        if !d.supports(dtype) {
            continue;
        }
        let a = input(m * k, 5, dtype);
        let b = input(k * n, 6, dtype);
        let c = t(&a, &[m, k], dtype, d)?.matmul(&t(&b, &[k, n], dtype, d)?)?;
        assert_close(
            &c.to_vec_f64()?,
            &naive(&a, &b, m, k, n),
            mm_tol(dtype, k),
            &format!("{dtype} large"),
        );
    }
    Ok(())
});

device_test!(matmul_of_transposed_views, |d: &Device| {
    let (m, k, n) = (37, 50, 23);
    for dtype in [DType::F32, DType::F64, DType::F16, DType::I64] {
        if !d.supports(dtype) {
            continue;
        }
        let a = input(m * k, 1, dtype);
        let b = input(k * n, 2, dtype);
        // Store A^T and B^T, multiply their transposes: the kernel reads the strides.
        let at = naive_transpose(&a, m, k);
        let bt = naive_transpose(&b, k, n);
        let av = t(&at, &[k, m], dtype, d)?.t()?;
        let bv = t(&bt, &[n, k], dtype, d)?.t()?;
        assert!(!av.is_contiguous() && !bv.is_contiguous());
        let c = av.matmul(&bv)?;
        assert_close(
            &c.to_vec_f64()?,
            &naive(&a, &b, m, k, n),
            mm_tol(dtype, k),
            &format!("{dtype} transposed"),
        );
    }
    Ok(())
});

fn naive_transpose(a: &[f64], r: usize, c: usize) -> Vec<f64> {
    (0..c)
        .flat_map(|j| (0..r).map(move |i| a[i * c + j]))
        .collect()
}

device_test!(batched_matmul, |d: &Device| {
    let (bs, m, k, n) = (4, 9, 20, 11);
    for dtype in [DType::F32, DType::F64, DType::I32, DType::BF16] {
        if !d.supports(dtype) {
            continue;
        }
        let a = input(bs * m * k, 3, dtype);
        let b = input(bs * k * n, 4, dtype);
        let ta = t(&a, &[bs, m, k], dtype, d)?;
        let tb = t(&b, &[bs, k, n], dtype, d)?;
        let c = ta.matmul(&tb)?;
        assert_eq!(c.dims(), [bs, m, n]);
        let got = c.to_vec_f64()?;
        for i in 0..bs {
            let want = naive(
                &a[i * m * k..(i + 1) * m * k],
                &b[i * k * n..(i + 1) * k * n],
                m,
                k,
                n,
            );
            assert_close(
                &got[i * m * n..(i + 1) * m * n],
                &want,
                mm_tol(dtype, k),
                &format!("{dtype} batch {i}"),
            );
        }
        // A 2-d right operand is used for every batch.
        let b2 = t(&b[..k * n], &[k, n], dtype, d)?;
        let c2 = ta.matmul(&b2)?.to_vec_f64()?;
        for i in 0..bs {
            let want = naive(&a[i * m * k..(i + 1) * m * k], &b[..k * n], m, k, n);
            assert_close(
                &c2[i * m * n..(i + 1) * m * n],
                &want,
                mm_tol(dtype, k),
                "broadcast batch",
            );
        }
    }
    // Many small matrices take the one-thread-per-matrix path.
    let (bs, m) = (64, 8);
    let a = input(bs * m * m, 9, DType::F32);
    let ta = t(&a, &[bs, m, m], DType::F32, d)?;
    let c = ta.matmul(&ta)?.to_vec_f64()?;
    let a = round_to(&a, DType::F32);
    for i in [0, 31, 63] {
        let s = &a[i * m * m..(i + 1) * m * m];
        assert_close(
            &c[i * m * m..(i + 1) * m * m],
            &naive(s, s, m, m, m),
            1e-5,
            "small batch",
        );
    }
    Ok(())
});

device_test!(the_seeds_int64_example, |d: &Device| {
    if !d.supports(DType::I64) {
        // An honest error value, not a silent conversion.
        let e = Tensor::new(&[[1i64, 1], [2, 2]], d).unwrap_err();
        assert!(e.to_string().contains("not supported for dtype i64"), "{e}");
        return Ok(());
    }
    let a = Tensor::new(&[[1i64, 1], [2, 2]], d)?;
    let b = Tensor::new(&[[5i64, 6], [7, 8]], d)?;
    assert_eq!(
        a.matmul(&b)?.to_vec2::<i64>()?,
        vec![vec![12, 14], vec![24, 28]]
    );
    Ok(())
});

device_test!(matmul_errors, |d: &Device| {
    let a = Tensor::zeros((2, 3), DType::F32, d)?;
    let e = a.matmul(&a).unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { op: "matmul", .. }));
    assert!(
        e.to_string().contains("3 columns") && e.to_string().contains("2 rows"),
        "{e}"
    );
    let v = Tensor::zeros(3, DType::F32, d)?;
    assert!(a.matmul(&v).unwrap_err().to_string().contains("2-d"));
    let b = Tensor::zeros((3, 2), common::int_dtype(d), d)?;
    assert!(matches!(
        a.matmul(&b),
        Err(Error::DTypeMismatch { op: "matmul", .. })
    ));
    let x = Tensor::zeros((2, 2, 3), DType::F32, d)?;
    let y = Tensor::zeros((3, 3, 2), DType::F32, d)?;
    assert!(x
        .matmul(&y)
        .unwrap_err()
        .to_string()
        .contains("batch sizes 2 and 3"));
    Ok(())
});

device_test!(batched_outer_products_16_bit, |d: &Device| {
    // k = 1 in bf16 and f16 (rounded straight into C on the CPU), two matrices per call, C
    // large enough to split between threads: each batch against its own naive product.
    let (bsz, m, n) = (2, 300, 250);
    for dtype in [DType::BF16, DType::F16] {
        if !d.supports(dtype) {
            continue;
        }
        let a = input(bsz * m, 3, dtype);
        let b = input(bsz * n, 4, dtype);
        let c = t(&a, &[bsz, m, 1], dtype, d)?.matmul(&t(&b, &[bsz, 1, n], dtype, d)?)?;
        assert_eq!(c.dims(), [bsz, m, n]);
        let got = c.to_vec_f64()?;
        for i in 0..bsz {
            let want = naive(&a[i * m..(i + 1) * m], &b[i * n..(i + 1) * n], m, 1, n);
            let what = format!("{dtype} batch {i}");
            assert_close(
                &got[i * m * n..(i + 1) * m * n],
                &want,
                mm_tol(dtype, 1),
                &what,
            );
        }
    }
    Ok(())
});
