//! Tensors print the way PyTorch prints them.

use accelkit::{DType, Device, Tensor};

#[test]
fn integers_and_floats() -> accelkit::Result<()> {
    // One process runs every module's tests: the device counters are shared.
    let _serial = crate::common::lock();
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
fn three_dims_and_summaries() -> accelkit::Result<()> {
    // One process runs every module's tests: the device counters are shared.
    let _serial = crate::common::lock();
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

#[test]
fn summaries_read_only_the_edges_and_agree_with_a_full_reference() -> accelkit::Result<()> {
    // One process runs every module's tests: the device counters are shared.
    let _serial = crate::common::lock();
    // The printout of a large tensor reads its edges as small blocks; the text must be what
    // the elements say, whatever the view. Reference: the same elements, printed from a
    // contiguous CPU copy whose values were read whole (to_vec_f64) and rebuilt.
    let d = Device::Cpu;
    for dims in [
        vec![7usize, 300],
        vec![2, 9, 100],
        vec![11, 3, 5, 13],
        vec![1001],
    ] {
        let n: usize = dims.iter().product();
        let t = Tensor::arange(0i64, n as i64, &d)?.reshape(dims.clone())?;
        let whole = Tensor::new(t.to_vec_f64()?.as_slice(), &d)?
            .to_dtype(DType::I64)?
            .reshape(dims.clone())?;
        assert_eq!(t.to_string(), whole.to_string(), "{dims:?}");
        // A transposed (strided) view prints as its contiguous copy.
        let tt = t.transpose(0, -1)?;
        assert_eq!(
            tt.to_string(),
            tt.contiguous()?.to_string(),
            "{dims:?} transposed"
        );
    }
    // On every device accel finds, PyTorch's text of torch.arange(10000, dtype=torch.int32)
    // .reshape(100, 100), read there through the same edge blocks.
    let want = "tensor([[   0,    1,    2,  ...,   97,   98,   99],
        [ 100,  101,  102,  ...,  197,  198,  199],
        [ 200,  201,  202,  ...,  297,  298,  299],
        ...,
        [9700, 9701, 9702,  ..., 9797, 9798, 9799],
        [9800, 9801, 9802,  ..., 9897, 9898, 9899],
        [9900, 9901, 9902,  ..., 9997, 9998, 9999]]";
    let host = Tensor::arange(0i32, 10000, &d)?.reshape((100, 100))?;
    let mut ran = 0;
    for dev in accelkit::available_devices() {
        if dev == Device::Cpu || !dev.supports(DType::I32) {
            continue;
        }
        let got = host.to_device(&dev)?.to_string();
        assert_eq!(got, format!("{want}, device='{dev}', dtype=i32)"), "{dev}");
        ran += 1;
    }
    if ran == 0 {
        println!("skipped: accelerators: no accelerator here (summaries_read_only_the_edges, device part)");
    }
    Ok(())
}

#[test]
fn both_dimensions_cut_as_pytorch_prints_them() -> accelkit::Result<()> {
    // One process runs every module's tests: the device counters are shared.
    let _serial = crate::common::lock();
    // torch.arange(10000).reshape(100, 100), and its transpose, as PyTorch prints them.
    let m = Tensor::arange(0i64, 10000, &Device::Cpu)?.reshape((100, 100))?;
    assert_eq!(
        m.to_string(),
        "tensor([[   0,    1,    2,  ...,   97,   98,   99],
        [ 100,  101,  102,  ...,  197,  198,  199],
        [ 200,  201,  202,  ...,  297,  298,  299],
        ...,
        [9700, 9701, 9702,  ..., 9797, 9798, 9799],
        [9800, 9801, 9802,  ..., 9897, 9898, 9899],
        [9900, 9901, 9902,  ..., 9997, 9998, 9999]])"
    );
    assert_eq!(
        m.t()?.to_string(),
        "tensor([[   0,  100,  200,  ..., 9700, 9800, 9900],
        [   1,  101,  201,  ..., 9701, 9801, 9901],
        [   2,  102,  202,  ..., 9702, 9802, 9902],
        ...,
        [  97,  197,  297,  ..., 9797, 9897, 9997],
        [  98,  198,  298,  ..., 9798, 9898, 9998],
        [  99,  199,  299,  ..., 9799, 9899, 9999]])"
    );
    Ok(())
}
