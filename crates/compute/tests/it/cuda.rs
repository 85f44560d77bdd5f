//! The CUDA backend through the public API: pinned memory refused without a GPU, and the
//! GPU-only tests (matmul against a naive loop, memory accounting, random numbers, long
//! reductions, copies). The ops themselves are checked on a GPU by the device tests in ops.rs,
//! matmul.rs and the rest; the parts that need no GPU (library discovery, the kernels'
//! sources and every architecture's compile, the driver-symbol floor) are unit tests in
//! `backend::cuda::tests`.
#![cfg(feature = "cuda")]

use crate::common;

use accelkit::{DType, Device, Tensor};

#[test]
fn pinned_memory_without_a_gpu_is_an_error_value() -> accelkit::Result<()> {
    // One process runs every module's tests: the device counters are shared.
    let _serial = crate::common::lock();
    let t = Tensor::arange(0f32, 6.0, &Device::Cpu)?;
    assert!(!t.is_pinned());
    if accelkit::cuda::is_available() {
        println!("skipped: cuda: this machine has a CUDA GPU; gpu_pinned_memory covers pinning");
        return Ok(());
    }
    let e = t.pin_memory().unwrap_err();
    assert!(e.to_string().contains("CUDA"), "{e}");
    // The copy benchmark refuses pinned memory on a device that is not a CUDA GPU.
    let e = accelkit::bench::copy(
        &Device::Cpu,
        accelkit::bench::CopyKind::H2d,
        accelkit::bench::HostBuffer::Pinned,
        1024,
        0,
        accelkit::bench::Iterations::Fixed(1),
    )
    .unwrap_err();
    assert!(e.to_string().contains("pinned"), "{e}");
    Ok(())
}

// ---- on a GPU ------------------------------------------------------------------------------

/// The CUDA devices to test, or none with a skip line.
fn gpus() -> Vec<Device> {
    common::devices_of("cuda", "GPU-only CUDA tests")
}

#[test]
fn gpu_matmul_every_float_dtype_and_tf32_against_a_naive_loop() -> accelkit::Result<()> {
    // Exact ledger values and the global generator: one GPU test at a time.
    let _serial = common::lock();
    for d in gpus() {
        for (m, k, n) in [(1, 1, 1), (17, 33, 5), (128, 64, 96), (257, 513, 129)] {
            let a = Tensor::randn(0.0, 1.0, (m, k), &Device::Cpu)?;
            let b = Tensor::randn(0.0, 1.0, (k, n), &Device::Cpu)?;
            let want =
                common::naive_matmul(&a.to_vec_f64()?, &b.to_vec_f64()?, (1, m, k, n), false);
            for (dt, tol) in [
                (DType::F32, 1e-4),
                (DType::F64, 1e-10),
                (DType::F16, 2e-2),
                (DType::BF16, 5e-2),
            ] {
                let (ga, gb) = (
                    a.to_dtype(dt)?.to_device(&d)?,
                    b.to_dtype(dt)?.to_device(&d)?,
                );
                // The textbook loop in f64 over the values as `dt` holds them.
                let want_dt = common::naive_matmul(
                    &a.to_dtype(dt)?.to_vec_f64()?,
                    &b.to_dtype(dt)?.to_vec_f64()?,
                    (1, m, k, n),
                    false,
                );
                let got = ga.matmul(&gb)?.to_dtype(DType::F64)?.to_vec_f64()?;
                let scale = (k as f64).sqrt();
                let w: Vec<f64> = want_dt.iter().map(|x| x / scale).collect();
                let g: Vec<f64> = got.iter().map(|x| x / scale).collect();
                common::assert_close(&g, &w, tol, &format!("{dt} {m}x{k}x{n} on {d}"));
                // Transposed operands take cuBLAS's transpose path.
                let gt = gb.t()?.contiguous()?.t()?;
                let got_t = ga.matmul(&gt)?.to_dtype(DType::F64)?.to_vec_f64()?;
                let g2: Vec<f64> = got_t.iter().map(|x| x / scale).collect();
                common::assert_close(&g2, &w, tol, &format!("{dt} transposed on {d}"));
            }
            accelkit::cuda::set_allow_tf32(true);
            let got = a.to_device(&d)?.matmul(&b.to_device(&d)?)?.to_vec_f64()?;
            accelkit::cuda::set_allow_tf32(false);
            let scale = (k as f64).sqrt();
            let w: Vec<f64> = want.iter().map(|x| x / scale).collect();
            let g: Vec<f64> = got.iter().map(|x| x / scale).collect();
            common::assert_close(&g, &w, 1e-2, &format!("tf32 {m}x{k}x{n} on {d}"));
        }
    }
    Ok(())
}

#[test]
fn gpu_memory_is_accounted_and_copies_round_trip() -> accelkit::Result<()> {
    // Exact ledger values and the global generator: one GPU test at a time.
    let _serial = common::lock();
    for d in gpus() {
        let before = accelkit::memory::stats(&d);
        // 48 MiB: large enough to go through the pinned staging buffers both ways.
        let n = 12 << 20;
        let host: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
        let t = Tensor::from_vec(host.clone(), n, &d)?;
        let mid = accelkit::memory::stats(&d);
        assert_eq!(mid.allocated_bytes, before.allocated_bytes + 4 * n as u64);
        assert!(mid.total_bytes.is_some() && mid.free_bytes.is_some());
        assert_eq!(t.to_vec1::<f32>()?, host);
        drop(t);
        d.synchronize()?;
        assert_eq!(
            accelkit::memory::stats(&d).allocated_bytes,
            before.allocated_bytes
        );
        accelkit::memory::empty_cache(&d)?;
        // Out of memory is an error value naming the sizes.
        let e = Tensor::zeros((1 << 20, 1 << 20), DType::F32, &d).unwrap_err();
        assert!(e.to_string().contains("out of memory"), "{e}");
        // Load through NVML.
        if let Device::Cuda(i) = d {
            let load = accelkit::cuda::utilization(i)?;
            assert!(load.memory_total_bytes.unwrap_or(0) > 0, "{load:?}");
        }
    }
    Ok(())
}

#[test]
fn gpu_random_numbers_are_seedable_and_have_the_right_moments() -> accelkit::Result<()> {
    // Exact ledger values and the global generator: one GPU test at a time.
    let _serial = common::lock();
    for d in gpus() {
        accelkit::manual_seed(7);
        let a = Tensor::randn(2.0, 3.0, 1 << 20, &d)?.to_vec1::<f32>()?;
        accelkit::manual_seed(7);
        let b = Tensor::randn(2.0, 3.0, 1 << 20, &d)?.to_vec1::<f32>()?;
        assert_eq!(a, b);
        let n = a.len() as f64;
        let mean = a.iter().map(|&x| x as f64).sum::<f64>() / n;
        let var = a.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
        assert!(
            (mean - 2.0).abs() < 0.02 && (var.sqrt() - 3.0).abs() < 0.02,
            "{mean} {var}"
        );
        let u = Tensor::rand(-1.0, 1.0, 1 << 20, &d)?.to_vec1::<f32>()?;
        assert!(u.iter().all(|&x| (-1.0..1.0).contains(&x)));
        let um = u.iter().map(|&x| x as f64).sum::<f64>() / u.len() as f64;
        assert!(um.abs() < 0.01, "{um}");
    }
    Ok(())
}

#[test]
fn gpu_long_reductions_use_every_sm_and_agree_with_the_cpu() -> accelkit::Result<()> {
    // Exact ledger values and the global generator: one GPU test at a time.
    let _serial = common::lock();
    for d in gpus() {
        let n = 3 << 20;
        let host: Vec<f32> = (0..n).map(|i| ((i % 7) as f32) - 3.0).collect();
        let want: f64 = host.iter().map(|&x| x as f64).sum();
        let t = Tensor::from_vec(host, n, &d)?;
        let got = t.sum_all()?.to_scalar::<f32>()? as f64;
        assert!((got - want).abs() <= 1e-3 * n as f64, "{got} vs {want}");
        let m = t.max_all()?.to_scalar::<f32>()?;
        assert_eq!(m, 3.0);
        let i = Tensor::arange(0i64, n as i64, &d)?;
        let s = i.sum_all()?.to_scalar::<i64>()?;
        assert_eq!(s, (n as i64) * (n as i64 - 1) / 2);
    }
    Ok(())
}

#[test]
fn gpu_to_gpu_copies() -> accelkit::Result<()> {
    // Exact ledger values and the global generator: one GPU test at a time.
    let _serial = common::lock();
    let g = gpus();
    if g.len() < 2 {
        if !g.is_empty() {
            println!("skipped: cuda: copies between GPUs need two, this machine has one");
        }
        return Ok(());
    }
    let t = Tensor::arange(0f32, 1000.0, &g[0])?;
    let u = t.to_device(&g[1])?;
    assert_eq!(u.device(), g[1]);
    assert_eq!(u.to_vec1::<f32>()?, t.to_vec1::<f32>()?);
    Ok(())
}

#[test]
fn gpu_pinned_memory() -> accelkit::Result<()> {
    // Exact ledger values and the global generator: one GPU test at a time.
    let _serial = common::lock();
    for d in gpus() {
        // 40 MiB: above the size where pageable copies are staged.
        let n = 10 << 20;
        let host = Tensor::arange(0f32, n as f32, &Device::Cpu)?;
        let p = host.pin_memory()?;
        assert!(p.is_pinned() && !host.is_pinned());
        assert_eq!(p.device(), Device::Cpu);
        // Counted as CPU memory while it lives (other tests allocate too: at least).
        assert!(accelkit::memory::stats(&Device::Cpu).allocated_bytes >= 2 * 4 * n as u64);
        // Pinning a pinned tensor is the same handle; ops on it are CPU ops.
        assert!(p.pin_memory()?.is_pinned());
        assert_eq!(p.sum_all()?.to_vec_f64()?, host.sum_all()?.to_vec_f64()?);
        // One DMA each way, both intact.
        let g = p.to_device(&d)?;
        let want = host.to_vec1::<f32>()?;
        assert_eq!(g.to_vec1::<f32>()?, want);
        let back = g.pin_memory()?;
        assert!(back.is_pinned());
        assert_eq!(back.to_vec1::<f32>()?, want);
        // A strided view pins its elements in order.
        let m = Tensor::arange(0f32, 12.0, &Device::Cpu)?.reshape((3, 4))?;
        let pt = m.t()?.pin_memory()?;
        assert_eq!(pt.to_vec2::<f32>()?, m.t()?.to_vec2::<f32>()?);
        assert_eq!(
            pt.to_device(&d)?.to_vec2::<f32>()?,
            m.t()?.to_vec2::<f32>()?
        );
        drop((back, pt));
        // Dropped on a thread that never used CUDA: the block goes back to the cache, and
        // pinning the same size again reuses it.
        std::thread::spawn(move || drop(p)).join().unwrap();
        let again = host.pin_memory()?;
        assert_eq!(again.to_vec1::<f32>()?, want);
        drop(again);
        accelkit::memory::empty_cache(&Device::Cpu)?;
        // The benchmark runs both kinds of host memory and checks them.
        for h in [
            accelkit::bench::HostBuffer::Pageable,
            accelkit::bench::HostBuffer::Pinned,
        ] {
            for k in [
                accelkit::bench::CopyKind::H2d,
                accelkit::bench::CopyKind::D2h,
            ] {
                let r = accelkit::bench::copy(
                    &d,
                    k,
                    h,
                    64 << 20,
                    1,
                    accelkit::bench::Iterations::Fixed(3),
                )?;
                assert_eq!(r.max_rel_error, 0.0, "{r:?}");
                assert_eq!(r.host_memory, h);
                println!(
                    "{d} {k:?} {h:?} 64 MiB: {:.2} GB/s ({:?}% of PCIe)",
                    r.gb_per_s, r.percent_of_peak
                );
            }
        }
    }
    Ok(())
}
