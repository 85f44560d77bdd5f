//! The wgpu backend on a real adapter (the test command installs Mesa's lavapipe, a software
//! Vulkan device): adapters as data, odd shapes, work larger than one dispatch dimension, and
//! honest errors for dtypes this version does not run. Every f32 op is also checked against
//! the CPU by the device tests in ops.rs and matmul.rs, which run on each wgpu adapter.
#![cfg(feature = "wgpu")]

mod common;

use accel::{DType, Device, Tensor};

fn wgpu_devices() -> Vec<Device> {
    common::devices()
        .into_iter()
        .filter(|d| matches!(d, Device::Wgpu(_)))
        .collect()
}

#[test]
fn adapters_are_listed_and_software_ones_never_chosen() {
    for d in wgpu_devices() {
        let p = accel::devices()
            .into_iter()
            .find(|p| p.backend == "wgpu")
            .unwrap();
        let info = p.devices().iter().find(|x| x.device == d).unwrap();
        let keys: Vec<&str> = info.details.iter().map(|(k, _)| k.as_str()).collect();
        for k in [
            "backend",
            "device_type",
            "driver",
            "max_buffer_bytes",
            "shader_f16",
        ] {
            assert!(keys.contains(&k), "{k} missing from {keys:?}");
        }
        if let Some(i) = d.index() {
            if accel::wgpu::is_software(i) {
                assert_ne!(
                    Device::best(),
                    d,
                    "a software adapter is never the best device"
                );
            }
        }
    }
    // mps is the first Metal adapter: none off macOS, and the reason says so.
    if !cfg!(target_os = "macos") {
        assert!(!accel::mps::is_available());
        assert!(!accel::mps::is_built());
        let e = Tensor::zeros(2, DType::F32, &Device::Mps)
            .unwrap_err()
            .to_string();
        assert!(e.contains("mps"), "{e}");
    }
}

#[test]
fn odd_shapes_and_work_beyond_one_dispatch_dimension() -> accel::Result<()> {
    for d in wgpu_devices() {
        for (m, k, n) in [(1, 1, 1), (17, 33, 5), (1, 70, 3), (65, 1, 66)] {
            let a = Tensor::randn(0.0, 1.0, (m, k), &Device::Cpu)?;
            let b = Tensor::randn(0.0, 1.0, (k, n), &Device::Cpu)?;
            let want = a.matmul(&b)?.to_vec_f64()?;
            let got = a.to_device(&d)?.matmul(&b.to_device(&d)?)?.to_vec_f64()?;
            common::assert_close(&got, &want, 1e-5, &format!("{m}x{k}x{n} on {d}"));
        }
        // More than 65535 workgroups of 256: the 1-D work is spread over two dimensions.
        let n = 65535 * 256 + 1000;
        let x = Tensor::arange(0f32, n as f32, &d)?;
        let y = x.add_scalar(1.0)?.to_vec1::<f32>()?;
        assert_eq!(y.len(), n);
        for i in [0, 1, 65535 * 256 - 1, 65535 * 256, n - 1] {
            assert_eq!(y[i], i as f32 + 1.0, "element {i}");
        }
        assert_eq!(x.max_all()?.to_scalar::<f32>()?, (n - 1) as f32);
    }
    Ok(())
}

#[test]
fn other_dtypes_are_an_honest_error() {
    for d in wgpu_devices() {
        for dt in [DType::F16, DType::BF16, DType::F64, DType::I32, DType::I64] {
            assert!(!d.supports(dt));
            let e = Tensor::zeros(3, dt, &d).unwrap_err().to_string();
            assert!(e.contains("f32 tensors only"), "{e}");
        }
        let x = Tensor::ones(3, DType::F32, &d).unwrap();
        let e = x.to_dtype(DType::F16).unwrap_err().to_string();
        assert!(e.contains("f32 tensors only"), "{e}");
    }
}

#[test]
fn benchmarks_use_timestamp_queries_where_the_adapter_has_them() -> accel::Result<()> {
    for d in wgpu_devices() {
        let p = accel::devices()
            .into_iter()
            .find(|p| p.backend == "wgpu")
            .unwrap();
        let info = p.devices().iter().find(|x| x.device == d).unwrap();
        let has = info
            .details
            .iter()
            .any(|(k, v)| k == "timestamp_queries" && v == "true");
        let (run, _) =
            accel::bench::matmul(&d, 48, DType::F32, 1, accel::bench::Iterations::Fixed(3))?;
        match (&run.device_stats, has) {
            (Some(dev), true) => {
                // The GPU's clock sees the queued work only: positive, and not more than the
                // wall clock around it (with a little slack for clock granularity).
                assert!(dev.median_s > 0.0, "{dev:?}");
                assert!(
                    dev.median_s <= run.stats.median_s * 1.05,
                    "{dev:?} vs {:?}",
                    run.stats
                );
                assert_eq!(
                    accel::bench::device_timer_name(&d),
                    "wgpu timestamp queries"
                );
            }
            (None, false) => {}
            other => panic!("timestamps {has} but device stats {:?}", other.0),
        }
    }
    Ok(())
}
