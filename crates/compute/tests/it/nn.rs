//! `Linear` against a reference computed by hand, and moving models between devices.

use crate::common;

use crate::common::assert_close;
use accelkit::nn::{Linear, Module};
use accelkit::{DType, Device, Error, Tensor};

device_test!(linear_forward_matches_reference, |d: &Device| {
    let w = Tensor::new(&[[1.0f32, 2.0, 3.0], [-1.0, 0.5, 0.0]], d)?;
    let b = Tensor::new(&[0.5f32, -1.0], d)?;
    let lin = Linear::from_parameters(w, Some(b))?;
    let x = Tensor::new(&[[1.0f32, 1.0, 1.0], [2.0, 0.0, -1.0]], d)?;
    let y = lin.forward(&x)?;
    // y = x W^T + b
    assert_eq!(y.to_vec2::<f32>()?, vec![vec![6.5, -1.5], vec![-0.5, -3.0]]);
    let v = lin.forward(&Tensor::new(&[1.0f32, 0.0, 0.0], d)?)?;
    assert_eq!(v.to_vec1::<f32>()?, vec![1.5, -2.0]);
    let batch = Tensor::ones((4, 2, 3), DType::F32, d)?;
    assert_eq!(lin.forward(&batch)?.dims(), [4, 2, 2]);
    assert!(matches!(
        lin.forward(&Tensor::ones((2, 4), DType::F32, d)?),
        Err(Error::ShapeMismatch { .. })
    ));
    Ok(())
});

#[test]
fn init_is_pytorch_like_and_seedable() -> accelkit::Result<()> {
    // Also keeps a seed from being consumed by a test running beside this one.
    let _serial = common::lock();
    accelkit::manual_seed(7);
    let a = Linear::new(100, 50, true, &Device::Cpu)?;
    accelkit::manual_seed(7);
    let b = Linear::new(100, 50, true, &Device::Cpu)?;
    assert_eq!(a.weight().to_vec2::<f32>()?, b.weight().to_vec2::<f32>()?);
    let bound = 1.0 / 10.0;
    let w = a.weight().to_vec_f64()?;
    assert!(w.iter().all(|x| x.abs() <= bound));
    // Uniform on [-b, b] has variance b^2 / 3.
    let var = w.iter().map(|x| x * x).sum::<f64>() / w.len() as f64;
    assert_close(&[var], &[bound * bound / 3.0], 0.1, "weight variance");
    assert_eq!(a.weight().dims(), [50, 100]);
    assert_eq!(a.bias().unwrap().dims(), [50]);
    assert_eq!(a.num_parameters(), 5050);
    assert_eq!(
        Linear::new(3, 2, false, &Device::Cpu)?.parameters().len(),
        1
    );
    Ok(())
}

#[test]
fn moving_a_model_moves_every_parameter() -> accelkit::Result<()> {
    // Also keeps a seed from being consumed by a test running beside this one.
    let _serial = common::lock();
    let mut lin = Linear::new(4, 3, true, &Device::Cpu)?;
    assert_eq!(lin.device(), Device::Cpu);
    for d in common::devices() {
        lin.to_device(&d)?;
        assert_eq!(lin.device(), d);
        assert!(lin.parameters().iter().all(|p| p.device() == d));
        let y = lin.forward(&Tensor::ones((2, 4), DType::F32, &d)?)?;
        assert_eq!(y.device(), d);
        lin.cpu()?;
    }
    if !accelkit::cuda::is_available() {
        // A failed move leaves the model where it was.
        let e = lin.cuda().unwrap_err();
        assert!(e.to_string().contains("cuda:0 is not available"), "{e}");
        assert_eq!(lin.device(), Device::Cpu);
    }
    let x = Tensor::ones((1, 4), DType::F32, &Device::Cpu)?;
    lin.to_dtype(DType::F64)?;
    assert!(matches!(lin.forward(&x), Err(Error::DTypeMismatch { .. })));
    Ok(())
}
