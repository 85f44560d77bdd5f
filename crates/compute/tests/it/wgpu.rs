//! The wgpu backend on a real adapter (the test command installs Mesa's lavapipe, a software
//! Vulkan device): adapters as data, both matmul kernels at odd shapes in every dtype, casts,
//! f16 rounding and overflow, work larger than one dispatch dimension, and honest errors for
//! the dtypes WGSL lacks, each against a reference written here (the formats' rounding rules,
//! exact f64 arithmetic, hand-checked values); the CPU backend's answer is a second opinion
//! only. The device tests in ops.rs and matmul.rs also run on each wgpu adapter.
#![cfg(feature = "wgpu")]

use crate::common;

use accelkit::{DType, Device, Tensor};

fn wgpu_devices() -> Vec<Device> {
    common::devices_of("wgpu", "wgpu adapter tests")
}

/// What the wgpu probe reports about `d`.
fn probed(d: Device) -> accelkit::DeviceInfo {
    accelkit::devices()
        .into_iter()
        .find(|p| p.backend == "wgpu")
        .and_then(|p| p.devices().iter().find(|x| x.device == d).cloned())
        .expect("a listed wgpu device")
}

#[test]
fn adapters_are_listed_and_software_ones_never_chosen() {
    // One process runs every module's tests: the device counters are shared.
    let _serial = crate::common::lock();
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
            if accelkit::wgpu::is_software(i) {
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
        assert!(!accelkit::mps::is_available());
        assert!(!accelkit::mps::is_built());
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
fn both_matmul_kernels_at_odd_shapes_in_every_dtype() -> accelkit::Result<()> {
    // One process runs every module's tests: the device counters are shared.
    let _serial = crate::common::lock();
    for d in wgpu_devices() {
        // Every kernel, whatever the adapter: both register-blocked ones and the simple one.
        for kernel in ["simple", "blocked", "blocked128"] {
            accelkit::wgpu::set_matmul_kernel(kernel)?;
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
        accelkit::wgpu::set_matmul_kernel("auto")?;
    }
    assert!(accelkit::wgpu::set_matmul_kernel("fast").is_err());
    Ok(())
}

/// `x` (held exactly in f64) converted to `to` by the rules accel documents, written here
/// from the formats' definitions: floats round to nearest even (`common::round_to`), f16
/// overflows to infinity; floats to i32 truncate toward zero and saturate, NaN to 0.
fn cast_ref(x: f64, to: DType) -> f64 {
    match to {
        DType::I32 if x.is_nan() => 0.0,
        DType::I32 => x.trunc().clamp(i32::MIN as f64, i32::MAX as f64),
        _ => common::round_to(&[x], to)[0],
    }
}

#[test]
fn casts_between_every_dtype_follow_the_rules() -> accelkit::Result<()> {
    // One process runs every module's tests: the device counters are shared.
    let _serial = crate::common::lock();
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
    // Hand-checked corners of the rules above, so the reference itself is pinned down.
    assert_eq!(cast_ref(65520.0, DType::F16), f64::INFINITY);
    assert_eq!(cast_ref(65504.0, DType::F16), 65504.0);
    assert_eq!(cast_ref(3e9, DType::I32), 2147483647.0);
    assert_eq!(cast_ref(-2.7, DType::I32), -2.0);
    assert_eq!(cast_ref(0.1, DType::F16), 0.0999755859375);
    for d in wgpu_devices() {
        let host = Tensor::new(v.as_slice(), &Device::Cpu)?;
        for from in dtypes(&d) {
            // The source as `from` holds it, by the same rules.
            let held: Vec<f64> = v.iter().map(|&x| cast_ref(x as f64, from)).collect();
            let src = host.to_dtype(from)?;
            assert_eq!(src.dtype(), from);
            for to in dtypes(&d) {
                let want: Vec<f64> = held.iter().map(|&x| cast_ref(x, to)).collect();
                let got = src.to_device(&d)?.to_dtype(to)?;
                assert_eq!(got.dtype(), to);
                let got = got.to_vec_f64()?;
                // The CPU backend, as a second opinion.
                let cpu = src.to_dtype(to)?.to_vec_f64()?;
                for (i, ((g, w), c)) in got.iter().zip(&want).zip(&cpu).enumerate() {
                    let same = |a: &f64, b: &f64| a == b || (a.is_nan() && b.is_nan());
                    assert!(
                        same(g, w),
                        "{from} -> {to} of {} on {d}: {g}, the rules give {w}",
                        v[i]
                    );
                    assert!(same(c, w), "{from} -> {to} of {} on the CPU: {c}", v[i]);
                }
            }
        }
    }
    Ok(())
}

#[test]
fn f16_and_i32_ops_round_and_wrap_by_the_rules() -> accelkit::Result<()> {
    // One process runs every module's tests: the device counters are shared.
    let _serial = crate::common::lock();
    for d in wgpu_devices() {
        if d.supports(DType::F16) {
            // 60000 + 60000 overflows f16 to infinity; 1 + 2^-11 rounds to even.
            let (xa, xb) = (
                [60000.0, 1.0, -3.0, 0.5],
                [60000.0, 0.00048828125, 2.0, 0.25],
            );
            let a = Tensor::new(&xa.map(|x: f64| x as f32), &Device::Cpu)?.to_dtype(DType::F16)?;
            let b = Tensor::new(&xb.map(|x: f64| x as f32), &Device::Cpu)?.to_dtype(DType::F16)?;
            // The reference: the exact result in f64, rounded once to f16.
            let f16 = |f: fn(f64, f64) -> f64| -> Vec<f64> {
                let exact: Vec<f64> = xa.iter().zip(&xb).map(|(&x, &y)| f(x, y)).collect();
                common::round_to(&exact, DType::F16)
            };
            let (ga, gb) = (a.to_device(&d)?, b.to_device(&d)?);
            for (name, want, got, cpu) in [
                ("add", f16(|x, y| x + y), ga.add(&gb)?, a.add(&b)?),
                ("mul", f16(|x, y| x * y), ga.mul(&gb)?, a.mul(&b)?),
                ("div", f16(|x, y| x / y), ga.div(&gb)?, a.div(&b)?),
                ("exp", f16(|x, _| x.exp()), ga.exp()?, a.exp()?),
            ] {
                // Vulkan lets exp and division be a few f32 ulps off; after rounding to f16
                // that is at most one f16 ulp.
                for (who, got) in [("wgpu", got.to_vec_f64()?), ("cpu", cpu.to_vec_f64()?)] {
                    for (x, y) in got.iter().zip(&want) {
                        let ok = x == y || (x - y).abs() <= 1e-3 * y.abs().max(1.0);
                        assert!(ok, "f16 {name} on {who} ({d}): {got:?}, want {want:?}");
                    }
                }
            }
            // The hand-checked corners: overflow to infinity, ties to even.
            assert_eq!(
                ga.add(&gb)?.to_vec_f64()?,
                vec![f64::INFINITY, 1.0, -1.0, 0.75]
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
fn work_beyond_one_dispatch_dimension() -> accelkit::Result<()> {
    // One process runs every module's tests: the device counters are shared.
    let _serial = crate::common::lock();
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
        // The references: naive f64 loops over the same values.
        let hv = &host;
        let col = |c: usize| (0..rows).map(move |r| hv[r * 2 + c] as f64);
        let sum0: Vec<f64> = (0..2).map(|c| col(c).sum()).collect();
        let max0: Vec<f64> = (0..2).map(|c| col(c).fold(f64::MIN, f64::max)).collect();
        let row = |r: usize| [host[r * 2] as f64, host[r * 2 + 1] as f64];
        let sum1: Vec<f64> = (0..rows).map(|r| row(r).iter().sum()).collect();
        let max1: Vec<f64> = (0..rows).map(|r| row(r)[0].max(row(r)[1])).collect();
        let t = Tensor::from_vec(host.clone(), (rows, 2), &Device::Cpu)?;
        let g = t.to_device(&d)?;
        for (dim, sum, max, n) in [(0isize, &sum0, &max0, rows), (-1, &sum1, &max1, 2)] {
            common::assert_close(&g.sum(dim)?.to_vec_f64()?, sum, 1e-6, "long sum");
            let mean: Vec<f64> = sum.iter().map(|s| s / n as f64).collect();
            common::assert_close(&g.mean(dim)?.to_vec_f64()?, &mean, 1e-6, "long mean");
            assert_eq!(&g.max(dim)?.to_vec_f64()?, max);
        }
        if d.supports(DType::F16) {
            // The values are small integers, exact in f16; the mean rounds once.
            let h = t.to_dtype(DType::F16)?;
            let want: Vec<f64> = sum0.iter().map(|s| s / rows as f64).collect();
            let got = h.to_device(&d)?.mean(0)?.to_vec_f64()?;
            common::assert_close(&got, &want, 2e-3, "long f16 mean");
        }
    }
    Ok(())
}

#[test]
fn dtypes_wgsl_lacks_are_an_honest_error() {
    // One process runs every module's tests: the device counters are shared.
    let _serial = crate::common::lock();
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
fn benchmarks_use_timestamp_queries_where_the_adapter_has_them() -> accelkit::Result<()> {
    // One process runs every module's tests: the device counters are shared.
    let _serial = crate::common::lock();
    for d in wgpu_devices() {
        let info = probed(d);
        let has = info
            .details
            .iter()
            .any(|(k, v)| k == "timestamp_queries" && v == "true");
        let (run, _) =
            accelkit::bench::matmul(&d, 48, DType::F32, 1, accelkit::bench::Iterations::Fixed(3))?;
        match (&run.device_stats, has) {
            (Some(dev), true) => {
                // The GPU's clock sees the queued work only: positive, and not more than the
                // wall clock around it, with slack for the two clocks' granularity: 5% and
                // 0.1 ms (lavapipe's timestamps read 0.75 ms beside a 0.71 ms wall median
                // of three 0.7 ms samples once, in a clean-clone CI run).
                assert!(dev.median_s > 0.0, "{dev:?}");
                assert!(
                    dev.median_s <= run.stats.median_s * 1.05 + 1e-4,
                    "{dev:?} vs {:?}",
                    run.stats
                );
                assert_eq!(
                    accelkit::bench::device_timer_name(&d),
                    "wgpu timestamp queries"
                );
            }
            (None, false) => {}
            other => panic!("timestamps {has} but device stats {:?}", other.0),
        }
    }
    Ok(())
}
