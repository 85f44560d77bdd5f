//! The wgpu backend on a real adapter (the test command installs Mesa's lavapipe, a software
//! Vulkan device): adapters as data, both matmul kernels at odd shapes in every dtype, casts,
//! f16 rounding and overflow, work larger than one dispatch dimension, and honest errors for
//! the dtypes WGSL lacks. Every op in every dtype the adapter holds is also checked against the
//! CPU by the device tests in ops.rs and matmul.rs, which run on each wgpu adapter.
#![cfg(feature = "wgpu")]

mod common;

use accel::{DType, Device, Tensor};

/// Named `wgpu::...` so that `cargo test wgpu` selects the wgpu backend's tests.
mod wgpu {
    #[allow(unused_imports)]
    use super::*;

    fn wgpu_devices() -> Vec<Device> {
        common::devices_of("wgpu", "wgpu adapter tests")
    }

    /// What the wgpu probe reports about `d`.
    fn probed(d: Device) -> accel::DeviceInfo {
        accel::devices()
            .into_iter()
            .find(|p| p.backend == "wgpu")
            .and_then(|p| p.devices().iter().find(|x| x.device == d).cloned())
            .expect("a listed wgpu device")
    }

    #[test]
    fn adapters_are_listed_and_software_ones_never_chosen() {
        for d in wgpu_devices() {
            let info = probed(d);
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

    /// The dtypes `d` holds, of those WGSL can have.
    fn dtypes(d: &Device) -> Vec<DType> {
        [DType::F32, DType::I32, DType::F16]
            .into_iter()
            .filter(|&t| d.supports(t))
            .collect()
    }

    #[test]
    fn both_matmul_kernels_at_odd_shapes_in_every_dtype() -> accel::Result<()> {
        for d in wgpu_devices() {
            // Every kernel, whatever the adapter: both register-blocked ones and the simple one.
            for kernel in ["simple", "blocked", "blocked128"] {
                accel::wgpu::set_matmul_kernel(kernel)?;
                for dt in dtypes(&d) {
                    let shapes = [
                        (1, 1, 1, 1),
                        (1, 17, 33, 5),
                        (1, 1, 70, 3),
                        (1, 65, 1, 66),
                        (1, 64, 16, 64),
                        (1, 130, 47, 129),
                        (1, 128, 8, 128),
                        (1, 257, 9, 131),
                        (3, 9, 20, 70),
                    ];
                    for (bsz, m, k, n) in shapes {
                        let a = Tensor::from_vec(
                            common::values(bsz * m * k, 5),
                            (bsz, m, k),
                            &Device::Cpu,
                        )?;
                        let b = Tensor::from_vec(common::values(k * n, 6), (k, n), &Device::Cpu)?;
                        let (a, b) = (a.to_dtype(dt)?, b.to_dtype(dt)?);
                        // The textbook loop in f64 over the values as `dt` holds them.
                        let want = common::naive_matmul(
                            &a.to_vec_f64()?,
                            &b.to_vec_f64()?,
                            (bsz, m, k, n),
                            false,
                        );
                        let want = if dt == DType::I32 {
                            want.iter().map(|x| *x as i64 as i32 as f64).collect()
                        } else {
                            want
                        };
                        let got = a.to_device(&d)?.matmul(&b.to_device(&d)?)?;
                        assert_eq!(got.dtype(), dt);
                        // Against exact f64 sums: f32 accumulation over k <= 47 products of
                        // magnitude <= 16 errs by up to about k * 2^-24 * 16 = 4.5e-5.
                        let tol = match dt {
                            DType::F16 => 2e-3,
                            DType::I32 => 0.0,
                            _ => 1e-4,
                        };
                        let what = format!("{kernel} {dt} {bsz}x{m}x{k}x{n} on {d}");
                        common::assert_close(&got.to_vec_f64()?, &want, tol, &what);
                    }
                    // A transposed operand is made dense first.
                    let a = Tensor::from_vec(common::values(40 * 30, 7), (40, 30), &Device::Cpu)?
                        .to_dtype(dt)?;
                    let av = a.to_vec_f64()?;
                    let at: Vec<f64> = (0..30)
                        .flat_map(|i| (0..40).map(move |r| (r, i)))
                        .map(|(r, i)| av[r * 30 + i])
                        .collect();
                    let want = common::naive_matmul(&at, &av, (1, 30, 40, 30), false);
                    let ga = a.to_device(&d)?;
                    let got = ga.t()?.matmul(&ga)?.to_vec_f64()?;
                    let tol = if dt == DType::F16 { 2e-3 } else { 1e-4 };
                    common::assert_close(
                        &got,
                        &want,
                        tol,
                        &format!("{kernel} {dt} transposed on {d}"),
                    );
                }
            }
            accel::wgpu::set_matmul_kernel("auto")?;
        }
        assert!(accel::wgpu::set_matmul_kernel("fast").is_err());
        Ok(())
    }

    #[test]
    fn casts_between_every_dtype_match_the_cpu() -> accel::Result<()> {
        for d in wgpu_devices() {
            let v: Vec<f32> = vec![
                0.0,
                -0.0,
                1.5,
                -2.5,
                2.7,
                -2.7,
                65504.0,
                65520.0,
                -1e6,
                3e9,
                -3e9,
                1e-6,
                f32::INFINITY,
                f32::NEG_INFINITY,
                f32::NAN,
                0.1,
                12345.678,
                -7.0,
            ];
            let host = Tensor::new(v.as_slice(), &Device::Cpu)?;
            for from in dtypes(&d) {
                let src = host.to_dtype(from)?;
                for to in dtypes(&d) {
                    let want = src.to_dtype(to)?.to_vec_f64()?;
                    let got = src.to_device(&d)?.to_dtype(to)?;
                    assert_eq!(got.dtype(), to);
                    let got = got.to_vec_f64()?;
                    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                        assert!(
                            g == w || (g.is_nan() && w.is_nan()),
                            "{from} -> {to} of {} on {d}: {g}, the CPU gives {w}",
                            v[i]
                        );
                    }
                }
            }
        }
        Ok(())
    }

    #[test]
    fn f16_and_i32_ops_round_and_wrap_as_on_the_cpu() -> accel::Result<()> {
        for d in wgpu_devices() {
            if d.supports(DType::F16) {
                // 60000 + 60000 overflows f16 to infinity; 1 + 2^-11 rounds to even.
                let a = Tensor::new(&[60000.0f32, 1.0, -3.0, 0.5], &Device::Cpu)?
                    .to_dtype(DType::F16)?;
                let b = Tensor::new(&[60000.0f32, 0.00048828125, 2.0, 0.25], &Device::Cpu)?
                    .to_dtype(DType::F16)?;
                for (name, want, got) in [
                    ("add", a.add(&b)?, a.to_device(&d)?.add(&b.to_device(&d)?)?),
                    ("mul", a.mul(&b)?, a.to_device(&d)?.mul(&b.to_device(&d)?)?),
                    ("div", a.div(&b)?, a.to_device(&d)?.div(&b.to_device(&d)?)?),
                    ("exp", a.exp()?, a.to_device(&d)?.exp()?),
                ] {
                    // Vulkan lets exp and division be a few f32 ulps off; after rounding to f16
                    // that is at most one f16 ulp.
                    let (g, w) = (got.to_vec_f64()?, want.to_vec_f64()?);
                    for (x, y) in g.iter().zip(&w) {
                        let ok = x == y || (x - y).abs() <= 1e-3 * y.abs().max(1.0);
                        assert!(ok, "f16 {name} on {d}: {g:?}, the CPU gives {w:?}");
                    }
                }
                assert_eq!(
                    a.to_device(&d)?.add(&b.to_device(&d)?)?.to_vec_f64()?[0],
                    f64::INFINITY
                );
                // An odd number of f16 round-trips (buffers are padded to whole words).
                let odd = Tensor::new(&[1.0f32, 2.0, 3.0], &Device::Cpu)?.to_dtype(DType::F16)?;
                assert_eq!(odd.to_device(&d)?.to_vec_f64()?, vec![1.0, 2.0, 3.0]);
            }
            let i = Tensor::new(&[i32::MAX, -5, 7], &d)?;
            assert_eq!(i.add_scalar(1.0)?.to_vec1::<i32>()?, vec![i32::MIN, -4, 8]);
            assert_eq!(i.neg()?.to_vec1::<i32>()?, vec![-i32::MAX, 5, -7]);
            assert_eq!(i.max_all()?.to_scalar::<i32>()?, i32::MAX);
            // The sum of integers is i64, as in PyTorch: WGSL has no i64, so it is an honest error.
            let e = i.sum_all().unwrap_err().to_string();
            assert!(e.contains("i64"), "{e}");
        }
        Ok(())
    }

    #[test]
    fn work_beyond_one_dispatch_dimension() -> accel::Result<()> {
        for d in wgpu_devices() {
            // More than 65535 workgroups of 256: the 1-D work is spread over two dimensions.
            let n = 65535 * 256 + 1000;
            let x = Tensor::arange(0f32, n as f32, &d)?;
            let y = x.add_scalar(1.0)?.to_vec1::<f32>()?;
            assert_eq!(y.len(), n);
            for i in [0, 1, 65535 * 256 - 1, 65535 * 256, n - 1] {
                assert_eq!(y[i], i as f32 + 1.0, "element {i}");
            }
            assert_eq!(x.max_all()?.to_scalar::<f32>()?, (n - 1) as f32);
            // Rows longer than one pass takes (256 x 8192 elements) are reduced in parts that a
            // second pass combines: along a strided dimension too, and for the mean in f16.
            let rows = 2_100_000;
            let host: Vec<f32> = (0..rows * 2).map(|i| ((i * 7) % 13) as f32 - 6.0).collect();
            let t = Tensor::from_vec(host, (rows, 2), &Device::Cpu)?;
            let g = t.to_device(&d)?;
            for dim in [0isize, -1] {
                let want = t.sum(dim)?.to_vec_f64()?;
                common::assert_close(&g.sum(dim)?.to_vec_f64()?, &want, 1e-6, "long sum");
                let want = t.mean(dim)?.to_vec_f64()?;
                common::assert_close(&g.mean(dim)?.to_vec_f64()?, &want, 1e-6, "long mean");
                assert_eq!(g.max(dim)?.to_vec_f64()?, t.max(dim)?.to_vec_f64()?);
            }
            if d.supports(DType::F16) {
                let h = t.to_dtype(DType::F16)?;
                let want = h.mean(0)?.to_vec_f64()?;
                let got = h.to_device(&d)?.mean(0)?.to_vec_f64()?;
                common::assert_close(&got, &want, 2e-3, "long f16 mean");
            }
        }
        Ok(())
    }

    #[test]
    fn dtypes_wgsl_lacks_are_an_honest_error() {
        for d in wgpu_devices() {
            for dt in [DType::BF16, DType::F64, DType::I64] {
                assert!(!d.supports(dt));
                let e = Tensor::zeros(3, dt, &d).unwrap_err().to_string();
                assert!(e.contains("WGSL"), "{e}");
            }
            assert!(d.supports(DType::F32) && d.supports(DType::I32));
            let x = Tensor::ones(3, DType::F32, &d).unwrap();
            let e = x.to_dtype(DType::F64).unwrap_err().to_string();
            assert!(e.contains("WGSL"), "{e}");
        }
    }

    #[test]
    fn benchmarks_use_timestamp_queries_where_the_adapter_has_them() -> accel::Result<()> {
        for d in wgpu_devices() {
            let info = probed(d);
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
}
