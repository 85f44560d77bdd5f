//! The XLA backend against a real PJRT plugin (the test command installs XLA's CPU plugin
//! from PyPI): the plugin's devices, the compile cache and synchronisation (the C structs
//! are checked by the unit tests of `backend::xla::pjrt`). Every op is also checked against the CPU backend by the
//! device tests in ops.rs, matmul.rs and the rest, which run on `xla:0` and `xla:1`.
#![cfg(all(feature = "xla", target_os = "linux"))]

use crate::common;

use accelkit::{DType, Device, Tensor};

#[test]
fn jax_cuda_plugin_preloads_the_cuda_wheels_of_its_own_site_packages() {
    // A site-packages laid out as pip lays out jax-cuda13-pjrt and the CUDA wheels.
    let root = std::env::temp_dir().join(format!("accel-preload-{}", std::process::id()));
    let sp = root.join("lib/python3.12/site-packages");
    let touch = |rel: &str| {
        let p = sp.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, b"").unwrap();
        p
    };
    let plugin = touch("jax_plugins/xla_cuda13/xla_cuda_plugin.so");
    let cudart = touch("nvidia/cu13/lib/libcudart.so.13");
    let lt = touch("nvidia/cu13/lib/libcublasLt.so.13");
    let cublas = touch("nvidia/cu13/lib/libcublas.so.13");
    touch("nvidia/cu13/lib/README.txt");
    let cudnn = touch("nvidia/cudnn/lib/libcudnn.so.9");
    let nccl = touch("nvidia/nccl/lib/libnccl.so.2");
    let got = accelkit::xla::plugin_preloads(&plugin);
    // Absolute paths from the plugin's own site-packages, dependencies first (cuBLASLt
    // before cuBLAS), only what is installed.
    assert_eq!(got, vec![cudart, lt, cublas, nccl, cudnn]);
    assert!(got.iter().all(|p| p.is_absolute()));
    // Plugins outside jax_plugins/, or not CUDA ones, load nothing first.
    let cpu = touch("lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so");
    assert!(accelkit::xla::plugin_preloads(&cpu).is_empty());
    let tpu = touch("jax_plugins/xla_tpu/xla_tpu_plugin.so");
    assert!(accelkit::xla::plugin_preloads(&tpu).is_empty());
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn jax_cuda12_plugin_preloads_the_cuda_12_wheels_only() {
    // jax-cuda12-pjrt beside the nvidia-*-cu12 wheels (a folder a library), with a CUDA
    // 13 wheel in the same site-packages: only CUDA 12's files are loaded for it.
    let root = std::env::temp_dir().join(format!("accel-preload12-{}", std::process::id()));
    let sp = root.join("lib/python3.11/site-packages");
    let touch = |rel: &str| {
        let p = sp.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, b"").unwrap();
        p
    };
    let plugin = touch("jax_plugins/xla_cuda12/xla_cuda_plugin.so");
    touch("nvidia/cu13/lib/libcublas.so.13");
    let cudart = touch("nvidia/cuda_runtime/lib/libcudart.so.12");
    let nvrtc = touch("nvidia/cuda_nvrtc/lib/libnvrtc.so.12");
    let lt = touch("nvidia/cublas/lib/libcublasLt.so.12");
    let cublas = touch("nvidia/cublas/lib/libcublas.so.12");
    let cudnn = touch("nvidia/cudnn/lib/libcudnn.so.9");
    assert_eq!(
        accelkit::xla::plugin_preloads(&plugin),
        vec![cudart, nvrtc, lt, cublas, cudnn]
    );
    std::fs::remove_dir_all(&root).unwrap();
}

/// The XLA devices, or none with a skip line (a failure under ACCEL_TEST_REQUIRE=xla).
fn xla_devices() -> Vec<Device> {
    common::devices_of("xla", "XLA plugin tests")
}

#[test]
fn the_plugin_reports_its_platform_and_devices() {
    let _serial = common::lock();
    if xla_devices().is_empty() {
        return;
    }
    let plugins = accelkit::xla::plugins();
    let p = plugins
        .iter()
        .find(|p| p.problem.is_none())
        .expect("a working plugin");
    assert!(p.devices >= 1);
    let v = p.pjrt_api_version.as_deref().unwrap();
    assert!(v.starts_with("0."), "{v}");
    // `xla:PLATFORM:N` names the n-th device of one platform (cpu here, cuda on a GPU).
    let platform = p.platform.clone().unwrap();
    let first = accelkit::xla::platform_device(&platform, 0);
    assert!(first.is_some(), "{platform}");
    assert_eq!(format!("xla:{platform}:0").parse::<Device>().ok(), first);
    let e = format!("xla:{platform}:99")
        .parse::<Device>()
        .unwrap_err()
        .to_string();
    assert!(e.contains(":99") && e.contains("xla:0"), "{e}");
    // Memory: the CPU plugin does not report it; that is data, not an error.
    let info = accelkit::devices()
        .into_iter()
        .find(|p| p.backend == "xla")
        .unwrap();
    let d = &info.devices()[0];
    if let Some((_, why)) = d.details.iter().find(|(k, _)| k == "memory_stats") {
        assert!(why.contains("not available"), "{why}");
    }
}

/// Held by the tests here that compile programs: the compile counter is process-wide, and
/// tests run in parallel.
static COMPILING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn compiling() -> std::sync::MutexGuard<'static, ()> {
    COMPILING.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn empty_cache_forgets_programs_and_the_cache_is_bounded() -> accelkit::Result<()> {
    let _serial = common::lock();
    let _one_at_a_time = compiling();
    let Some(d) = xla_devices().first().copied() else {
        return Ok(());
    };
    // A shape no other test uses.
    let a = Tensor::ones((41, 2), DType::F32, &d)?;
    let first =
        |a: &Tensor| -> accelkit::Result<f32> { a.add_scalar(1.0)?.sum_all()?.to_scalar::<f32>() };
    assert_eq!(first(&a)?, 164.0);
    let compiled = accelkit::xla::compile_count();
    assert_eq!(first(&a)?, 164.0);
    assert_eq!(accelkit::xla::compile_count(), compiled, "cached");
    accelkit::memory::empty_cache(&d)?;
    assert_eq!(first(&a)?, 164.0);
    assert!(
        accelkit::xla::compile_count() > compiled,
        "empty_cache forgot nothing: the same program was not compiled again"
    );
    // More distinct programs than the cache holds: the least recently used goes.
    let start = accelkit::xla::compile_count();
    for n in 1..=300usize {
        let t = Tensor::ones((n,), DType::F32, &d)?;
        assert_eq!(t.add_scalar(1.0)?.to_vec1::<f32>()?.len(), n);
    }
    assert!(accelkit::xla::compile_count() - start >= 300);
    let again = accelkit::xla::compile_count();
    // n = 1 was used 300 programs ago: evicted, compiled again. n = 300 is still there.
    Tensor::ones((1,), DType::F32, &d)?
        .add_scalar(1.0)?
        .to_vec1::<f32>()?;
    assert!(
        accelkit::xla::compile_count() > again,
        "the cache kept 300+ programs"
    );
    let again = accelkit::xla::compile_count();
    Tensor::ones((300,), DType::F32, &d)?
        .add_scalar(1.0)?
        .to_vec1::<f32>()?;
    assert_eq!(
        accelkit::xla::compile_count(),
        again,
        "a recent program was evicted"
    );
    Ok(())
}

#[test]
fn identical_ops_compile_once_and_sync_waits() -> accelkit::Result<()> {
    let _serial = common::lock();
    let _one_at_a_time = compiling();
    for d in xla_devices() {
        // A shape no other test uses, so the first op must compile.
        let a = Tensor::arange(0f32, 37.0 * 3.0, &d)?.reshape((37, 3))?;
        let b = Tensor::ones((3, 5), DType::F32, &d)?;
        let before = accelkit::xla::compile_count();
        let c1 = a.matmul(&b)?;
        let after_first = accelkit::xla::compile_count();
        let c2 = a.matmul(&b)?;
        d.synchronize()?;
        assert_eq!(
            accelkit::xla::compile_count(),
            after_first,
            "no recompilation"
        );
        // Tests in this binary hold one lock, so only this test compiles meanwhile: one
        // program on the first device, which the plugin's other devices then share.
        let want_compiles = usize::from(d == xla_devices()[0]);
        assert_eq!(
            after_first,
            before + want_compiles,
            "the first product on {d} compiles {want_compiles} program(s)"
        );
        let want: Vec<f32> = (0..37)
            .flat_map(|r| {
                let s = (3 * r) as f32 * 3.0 + 3.0;
                std::iter::repeat_n(s, 5)
            })
            .collect();
        assert_eq!(c1.to_vec2::<f32>()?.concat(), want);
        assert_eq!(c2.to_vec2::<f32>()?.concat(), want);
        assert!(accelkit::xla::compile_seconds() > 0.0);
    }
    Ok(())
}

#[test]
fn large_matmul_agrees_with_a_naive_f64_loop() -> accelkit::Result<()> {
    let _serial = common::lock();
    let _one_at_a_time = compiling();
    for d in xla_devices() {
        accelkit::manual_seed(3);
        let a = Tensor::randn(0.0, 1.0, (4, 96, 130), &Device::Cpu)?;
        let b = Tensor::randn(0.0, 1.0, (130, 70), &Device::Cpu)?;
        // The reference: the textbook loop in f64 (the CPU backend's answer is an extra).
        let want =
            common::naive_matmul(&a.to_vec_f64()?, &b.to_vec_f64()?, (4, 96, 130, 70), false);
        let got = a.to_device(&d)?.matmul(&b.to_device(&d)?)?;
        assert_eq!(got.dims(), &[4, 96, 70]);
        common::assert_close(&got.to_vec_f64()?, &want, 1e-4, &format!("batched on {d}"));
        let cpu = a.matmul(&b)?.to_vec_f64()?;
        common::assert_close(
            &got.to_vec_f64()?,
            &cpu,
            1e-4,
            &format!("{d} against the CPU"),
        );
    }
    Ok(())
}

#[test]
fn benchmarks_time_xla_work_by_pjrt_ready_events() -> accelkit::Result<()> {
    let _serial = common::lock();
    let _one_at_a_time = compiling();
    for d in xla_devices().into_iter().take(1) {
        let (run, _) = accelkit::bench::matmul(
            &d,
            192,
            DType::F32,
            1,
            accelkit::bench::Iterations::Fixed(5),
        )?;
        let dev = run
            .device_stats
            .as_ref()
            .expect("XLA runs have ready-event times");
        // From launch to the runtime's report: positive, and within the wall clock around it
        // (which adds the waiting thread's wake-up).
        assert!(dev.median_s > 0.0, "{dev:?}");
        assert!(
            dev.max_s <= run.stats.max_s * 1.05 + 1e-4,
            "{dev:?} vs {:?}",
            run.stats
        );
        assert!(accelkit::bench::device_timer_name(&d).starts_with("PJRT ready events"));
    }
    Ok(())
}
