//! One test per defect found by the conformance suite, the fuzzers or a review, named after
//! what it found, in its smallest form (RELIABILITY.md lists them with how they were found).

mod common;

use accel::{DType, Device, Error, Tensor};

// Found by the review: the element count 2 * 1 * 2^63 wrapped to 0, so from_vec
// built a tensor of 2^64 elements over an empty buffer; every later op read outside it.
#[test]
fn from_vec_with_an_overflowing_shape_built_a_tensor_over_nothing() {
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

// Found by conformance.rs: the CPU GEMM with k = 0 could hand back a reused buffer's stale
// values; k = 0 now gives zeros on every backend.
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
