//! One test per defect found by the conformance suite, the fuzzers or a review, named after
//! what it found, in its smallest form (RELIABILITY.md lists them with how they were found).

use crate::common;

use accelkit::{DType, Device, Error, Tensor};

// Found by the review: the element count 2 * 1 * 2^63 wrapped to 0, so from_vec
// built a tensor of 2^64 elements over an empty buffer; every later op read outside it.
#[test]
fn from_vec_with_an_overflowing_shape_built_a_tensor_over_nothing() {
    // One process runs every module's tests: the device counters are shared.
    let _serial = crate::common::lock();
    let e = Tensor::from_vec(Vec::<f32>::new(), vec![2, 1, 1 << 63], &Device::Cpu).unwrap_err();
    assert!(matches!(e, Error::SizeOverflow { .. }), "{e}");
}

// Found by conformance.rs and the tensor_views fuzzer: rayon's chunk size of 0 panicked.
device_test!(
    sum_mean_max_over_a_zero_size_inner_dim_panicked,
    |d: &Device| {
        let t = Tensor::zeros((3, 0), DType::F32, d)?;
        assert_eq!(t.sum(0)?.dims(), [0]);
        assert_eq!(t.mean(0)?.dims(), [0]);
        assert_eq!(t.max(0)?.dims(), [0]);
        Ok(())
    }
);

// Found by the tensor_construct fuzzer: sum_all of an empty tensor was a 0-d tensor whose
// storage held no element, and reading it panicked.
device_test!(sum_all_of_an_empty_tensor_had_no_element, |d: &Device| {
    let s = Tensor::zeros(0, DType::F32, d)?.sum_all()?;
    assert_eq!(s.to_scalar::<f32>()?, 0.0);
    Ok(())
});

// Found by conformance.rs (SIGSEGV on the CPU) and the hlo_text fuzzer (a slice past the
// end of an XLA argument): a batch of 1 against a batch of 0 took the batch size 1 and
// multiplied a matrix read from an empty buffer.
device_test!(
    matmul_of_a_batch_of_one_against_a_batch_of_zero_read_out_of_bounds,
    |d: &Device| {
        let a = Tensor::ones((2, 3), DType::F32, d)?;
        let b = Tensor::zeros((0, 3, 3), DType::F32, d)?;
        assert_eq!(a.matmul(&b)?.dims(), [0, 2, 3]);
        let a = Tensor::ones((1, 2, 4), DType::F32, d)?;
        let b = Tensor::zeros((0, 4, 3), DType::F32, d)?;
        assert_eq!(a.matmul(&b)?.dims(), [0, 2, 3]);
        Ok(())
    }
);

// A guard, not a reproduced failure: k = 0 products now never reach a kernel (the CPU GEMM
// writes nothing when k = 0, and its output can be a reused, non-zero buffer); they must be
// zeros on every backend, also right after a same-sized buffer was freed.
device_test!(matmul_with_k_zero_returned_stale_values, |d: &Device| {
    drop(Tensor::full(7.0, (4, 5), DType::F32, d)?);
    let z = Tensor::ones((4, 0), DType::F32, d)?.matmul(&Tensor::ones((0, 5), DType::F32, d)?)?;
    assert_eq!(z.to_vec_f64()?, vec![0.0; 20]);
    Ok(())
});

// Found by conformance.rs: XLA's program for a reduction of a 0-d tensor had an empty
// `array<i64: >`, which StableHLO's parser rejects.
device_test!(
    reductions_of_a_zero_d_tensor_did_not_compile_on_xla,
    |d: &Device| {
        let s = Tensor::new(&2.5f32, d)?;
        assert_eq!(s.sum_all()?.to_scalar::<f32>()?, 2.5);
        assert_eq!(s.max_all()?.to_scalar::<f32>()?, 2.5);
        assert_eq!(s.mean_all()?.to_scalar::<f32>()?, 2.5);
        Ok(())
    }
);

// Found by conformance.rs: XLA's CPU `maximum` returned the other operand when one was NaN.
device_test!(maximum_dropped_nan_on_xla, |d: &Device| {
    let a = Tensor::new(&[1.0f32, f32::NAN], d)?;
    let b = Tensor::new(&[f32::NAN, 2.0], d)?;
    let m = a.maximum(&b)?.to_vec1::<f32>()?;
    assert!(m[0].is_nan() && m[1].is_nan(), "{m:?}");
    Ok(())
});

// Found by conformance.rs: the CPU converted i64 to i32 through f64 and saturated; integer
// narrowing keeps the low 32 bits (two's complement), as PyTorch and C do.
device_test!(
    i64_to_i32_casts_saturated_instead_of_wrapping,
    |d: &Device| {
        if !d.supports(DType::I64) {
            common::skip_part(d, "i64 casts (no i64 on this device)");
            return Ok(());
        }
        let t = Tensor::new(&[(1i64 << 32) + 5, i64::from(i32::MAX) + 1], d)?;
        assert_eq!(t.to_dtype(DType::I32)?.to_vec1::<i32>()?, vec![5, i32::MIN]);
        Ok(())
    }
);

// Found while making strides overflow-free (a zero size now counts as 1 in the strides): the
// layout of an empty [3, 0] tensor stopped being "contiguous", and XLA's cast of it rebuilt
// the same view until the stack overflowed. Every empty view is contiguous now.
device_test!(
    casting_an_empty_view_recursed_forever_on_xla,
    |d: &Device| {
        let t = Tensor::zeros((3, 0), DType::F32, d)?;
        assert!(t.is_contiguous());
        assert_eq!(t.to_dtype(DType::I32)?.dims(), [3, 0]);
        Ok(())
    }
);

// Found by the second review: an empty input can have a huge output. Summing [2^40, 0] over
// dim 1 allocated 2^40 accumulators (an abort), and to_vec2 of [2^60, 0] asked for 2^60 row
// vectors (a capacity-overflow panic). Both are out-of-memory error values now.
device_test!(
    reducing_or_reading_an_empty_tensor_with_a_huge_output_aborted,
    |d: &Device| {
        let t = Tensor::zeros((1 << 40, 0), DType::F32, d)?;
        assert!(matches!(t.sum(1), Err(Error::OutOfMemory { .. })));
        assert!(matches!(t.mean(1), Err(Error::OutOfMemory { .. })));
        assert_eq!(t.sum(0)?.dims(), [0]);
        let t = Tensor::zeros((1 << 60, 0), DType::F32, d)?;
        assert!(matches!(t.to_vec2::<f32>(), Err(Error::OutOfMemory { .. })));
        let t = Tensor::zeros((1 << 30, 1 << 30, 0), DType::F32, d)?;
        assert!(matches!(t.to_vec3::<f32>(), Err(Error::OutOfMemory { .. })));
        Ok(())
    }
);

// Found by the second review: f64 -> bf16 dropped the low 29 bits of the significand before
// rounding, so f32 1 + 2^-8 + 2^-23 (just above a tie) became bf16 1.0 instead of 1.0078125.
device_test!(
    a_cast_to_bf16_just_above_a_tie_rounded_down,
    |d: &Device| {
        if !d.supports(DType::BF16) {
            common::skip_part(d, "bf16 casts (no bf16 on this device)");
            return Ok(());
        }
        let x = Tensor::new(&[1.0f32 + 2f32.powi(-8) + 2f32.powi(-23)], d)?;
        assert_eq!(x.to_dtype(DType::BF16)?.to_vec_f64()?, vec![1.0078125]);
        Ok(())
    }
);

// Found by the property tests on XLA's CPU plugin: its f64 -> f16 conversion goes through f32,
// rounding twice, so a value just below a tie of two f16 neighbours (rounded to the tie in f32,
// then to the even one) came out one f16 step too high. One rounding is what the CPU backend
// and PyTorch give.
device_test!(casts_from_f64_to_half_types_round_once, |d: &Device| {
    if !d.supports(DType::F64) {
        common::skip_part(d, "casts from f64 (no f64 on this device)");
        return Ok(());
    }
    // f16 neighbours 0.10064697265625 (significand 625, odd) and 0.1007080078125 (626).
    let mid = (0.10064697265625f64 + 0.1007080078125) / 2.0;
    // bf16 neighbours 1.0 (even) and 1.0078125 (odd), their tie 1 + 2^-8.
    let tie = 1.0 + 2f64.powi(-8);
    let x = Tensor::new(
        &[
            mid - 2f64.powi(-40),
            mid + 2f64.powi(-40),
            -tie - 2f64.powi(-40),
        ],
        d,
    )?;
    if d.supports(DType::F16) {
        let h = x.to_dtype(DType::F16)?.to_vec_f64()?;
        assert_eq!(
            &h[..2],
            &[0.10064697265625, 0.1007080078125],
            "f64 -> f16 on {d}"
        );
    } else {
        common::skip_part(d, "f64 -> f16 (no f16 on this device)");
    }
    if d.supports(DType::BF16) {
        let b = x.to_dtype(DType::BF16)?.to_vec_f64()?;
        assert_eq!(b[2], -1.0078125, "f64 -> bf16 on {d}");
    } else {
        common::skip_part(d, "f64 -> bf16 (no bf16 on this device)");
    }
    Ok(())
});

// Found by the second review: scalars were rounded to the tensor's dtype first, so an f16
// tensor times 1e5 was times infinity, and an i32 tensor plus 3e9 added i32::MAX.
device_test!(
    scalars_were_rounded_to_the_tensors_dtype_first,
    |d: &Device| {
        if d.supports(DType::F16) {
            let h = Tensor::new(&[0.01f32], d)?.to_dtype(DType::F16)?;
            let y = h.mul_scalar(1e5)?.to_vec_f64()?[0];
            assert!((y - 1000.0).abs() < 2.0, "0.01 (in f16) * 1e5 = {y}");
        } else {
            common::skip_part(d, "f16 scalar ops (no f16 on this device)");
        }
        let i = Tensor::new(&[1i32], d)?;
        let e = i.add_scalar(3e9).unwrap_err().to_string();
        assert!(e.contains("does not fit") && e.contains("i32"), "{e}");
        assert!(i.mul_scalar(f64::NAN).is_err());
        Ok(())
    }
);

// Found by the second review: integer ranges were counted and computed through f64, so
// arange(2^60, 2^60 + 3) was empty and values beyond 2^53 repeated.
device_test!(integer_arange_beyond_2_pow_53_lost_values, |d: &Device| {
    if !d.supports(DType::I64) {
        common::skip_part(d, "i64 ranges (no i64 on this device)");
        return Ok(());
    }
    let b = 1i64 << 60;
    assert_eq!(
        Tensor::arange(b, b + 3, d)?.to_vec1::<i64>()?,
        vec![b, b + 1, b + 2]
    );
    let m = i64::MAX;
    assert_eq!(
        Tensor::arange_step(m - 2, m, 1, d)?.to_vec1::<i64>()?,
        vec![m - 2, m - 1]
    );
    assert_eq!(
        Tensor::arange_step(i64::MIN, m, m, d)?.to_vec1::<i64>()?,
        vec![i64::MIN, -1, m - 1]
    );
    assert!(matches!(
        Tensor::arange(0i64, m, d),
        Err(Error::SizeOverflow { .. })
    ));
    assert!(Tensor::arange_step(0i64, 5, 0, d).is_err());
    assert_eq!(
        Tensor::arange_step(5i32, 0, -2, d)?.to_vec1::<i32>()?,
        vec![5, 3, 1]
    );
    Ok(())
});
