//! Tensors print the way PyTorch prints them.

use accel::{DType, Device, Tensor};

#[test]
fn integers_and_floats() -> accel::Result<()> {
    let d = Device::Cpu;
    assert_eq!(
        Tensor::new(&[[1i64, 2], [3, 4]], &d)?.to_string(),
        "tensor([[1, 2],\n        [3, 4]])"
    );
    assert_eq!(
        Tensor::new(&[1i32, -20], &d)?.to_string(),
        "tensor([  1, -20], dtype=i32)"
    );
    assert_eq!(
        Tensor::new(&[1.0f32, 2.0, 3.0], &d)?.to_string(),
        "tensor([1., 2., 3.])"
    );
    assert_eq!(
        Tensor::new(&[0.5f32, -1.25], &d)?.to_string(),
        "tensor([ 0.5000, -1.2500])"
    );
    assert_eq!(
        Tensor::new(&[1.5f64], &d)?.to_string(),
        "tensor([1.5000], dtype=f64)"
    );
    assert_eq!(Tensor::new(&2.5f32, &d)?.to_string(), "tensor(2.5000)");
    assert_eq!(
        Tensor::new(&[1e10f32, 1.0], &d)?.to_string(),
        "tensor([1.0000e+10, 1.0000e+00])"
    );
    assert_eq!(
        Tensor::new(&[f32::NAN, f32::INFINITY], &d)?.to_string(),
        "tensor([nan, inf])"
    );
    assert_eq!(Tensor::zeros(0, DType::F32, &d)?.to_string(), "tensor([])");
    assert_eq!(
        Tensor::ones((2,), DType::BF16, &d)?.to_string(),
        "tensor([1., 1.], dtype=bf16)"
    );
    Ok(())
}

#[test]
fn three_dims_and_summaries() -> accel::Result<()> {
    let d = Device::Cpu;
    let t = Tensor::arange(0i64, 8, &d)?.reshape((2, 2, 2))?;
    assert_eq!(
        t.to_string(),
        "tensor([[[0, 1],\n         [2, 3]],\n\n        [[4, 5],\n         [6, 7]]])"
    );
    let big = Tensor::arange(0i64, 2000, &d)?;
    assert_eq!(
        big.to_string(),
        "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])"
    );
    let m = Tensor::arange(0i64, 1200, &d)?.reshape((400, 3))?;
    let s = m.to_string();
    assert!(
        s.starts_with("tensor([[   0,    1,    2],\n        [   3,    4,    5],"),
        "{s}"
    );
    assert!(
        s.contains("        ...,\n        [1191, 1192, 1193]"),
        "{s}"
    );
    Ok(())
}
