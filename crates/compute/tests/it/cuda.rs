//! The CUDA backend's parts that run without a GPU: library discovery against real files laid
//! out like a Python wheel and like a toolkit (every kernel compiled by the real NVRTC 12 and
//! 13 for every architecture is cuda_archs.rs), and the probe's answer on a machine without a
//! driver. The ops
//! themselves are checked on a GPU by the device tests in ops.rs, matmul.rs and the rest, and
//! by the GPU-only tests at the end of this file.
#![cfg(feature = "cuda")]

use crate::common;

use std::path::{Path, PathBuf};

use accelkit::internals::kernels::{self, Family};
use accelkit::internals::libs::{self, SearchEnv};
use accelkit::{DType, Device, Tensor};

/// Named `cuda::...` so that `cargo test cuda` selects the cuda backend's tests.
mod cuda {
    #[allow(unused_imports)]
    use super::*;

    /// The NVRTC library this process loaded, or None with a `skipped:` line (a failure when
    /// ACCEL_TEST_REQUIRE names nvrtc or cuda).
    fn nvrtc() -> Option<&'static libs::Library> {
        let lib = libs::library("nvrtc").filter(|l| l.is_loaded());
        if lib.is_none() {
            let why = libs::library("nvrtc")
                .and_then(|l| l.problem.clone())
                .unwrap_or_default();
            assert!(
                !common::is_required("nvrtc") && !common::is_required("cuda"),
                "ACCEL_TEST_REQUIRE names nvrtc/cuda but NVRTC is missing: {why}"
            );
            println!("skipped: nvrtc: {why}");
        }
        lib
    }

    /// The kernel names a family's source defines.
    fn kernel_names(src: &str) -> Vec<String> {
        src.split("__global__ void ")
            .skip(1)
            .map(|s| s.split('(').next().unwrap_or("").trim().to_string())
            .collect()
    }

    #[test]
    fn every_kernel_the_storage_launches_is_in_its_familys_source() {
        // The storage names kernels by a typed key (op, dtype); this is the check that the
        // generators write each key's C name, so no launch can look up a missing kernel.
        let launched = kernels::launched_kernels();
        assert!(launched.len() > 150, "{}", launched.len());
        for fam in Family::ALL {
            let names = kernel_names(&fam.source());
            for (f, name) in launched.iter().filter(|(f, _)| *f == fam) {
                assert!(
                    names.contains(name),
                    "{name} is not in the {} source",
                    f.name()
                );
            }
        }
    }

    #[test]
    fn the_kernels_cover_every_op_and_dtype_the_storage_asks_for() {
        let all: Vec<String> = Family::ALL
            .iter()
            .flat_map(|f| kernel_names(&f.source()))
            .collect();
        let has = |n: &str| all.iter().any(|k| k == n);
        for d in DType::ALL {
            let t = kernels::tag(d);
            for op in kernels::BINARY_OPS {
                assert!(has(&format!("bin_{op}_{t}")) && has(&format!("binc_{op}_{t}")));
            }
            for op in kernels::REDUCE_OPS {
                for k in ["red", "redt", "redp", "redf"] {
                    assert!(has(&format!("{k}_{op}_{t}")), "{k}_{op}_{t}");
                }
            }
            for d2 in DType::ALL {
                assert!(has(&format!("cast_{t}_{}", kernels::tag(d2))));
            }
            assert!(has(&format!("fill_{t}")) && has(&format!("arange_{t}")));
            assert!(has(&format!("un_neg_{t}")) && has(&format!("un_relu_{t}")));
            if d.is_float() {
                assert!(has(&format!("un_exp_{t}")));
                assert!(has(&format!("uniform_{t}")) && has(&format!("normal_{t}")));
            }
        }
        assert!(has("imatmul_i32") && has("imatmul_i64"));
        // A broken source is a compile error with NVRTC's log, not a panic.
        if nvrtc().is_some() {
            let e = kernels::compile("this is not CUDA", "broken", "sm_90").unwrap_err();
            assert!(
                e.contains("could not compile") && e.contains("broken"),
                "{e}"
            );
        }
    }

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("accel-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// Places the real NVRTC library at `dir/file` (a symbolic link to the real file).
    fn place(real: &Path, dir: &Path, file: &str) {
        std::fs::create_dir_all(dir).unwrap();
        std::os::unix::fs::symlink(real, dir.join(file)).unwrap();
    }

    #[test]
    fn discovery_finds_the_wheels_beside_a_pip_installed_accel() {
        // `pip install accel` puts the binary in <prefix>/bin and the CUDA wheels in
        // <prefix>/lib/python3.X/site-packages: found without VIRTUAL_ENV (Colab: /usr/local,
        // dist-packages).
        let Some(lib) = nvrtc() else { return };
        let real = lib.path.clone().expect("a loaded library has a path");
        let w = libs::wanted(13).iter().find(|w| w.name == "nvrtc").unwrap();
        let root = tmpdir("own-prefix");
        let wheel = root.join("lib/python3.12/dist-packages/nvidia/cu13/lib");
        place(&real, &wheel, "libnvrtc.so.13");
        let env = SearchEnv {
            own_prefix: Some(root.display().to_string()),
            ..SearchEnv::default()
        };
        let (p, src) = libs::locate(w, &libs::search_dirs(&env)).expect("found beside accel");
        assert_eq!(p, wheel.join("libnvrtc.so.13"));
        assert_eq!(src, "python wheel (accel's own environment)");
    }

    #[test]
    fn discovery_finds_libraries_laid_out_like_a_wheel_and_like_a_toolkit() {
        let Some(lib) = nvrtc() else { return };
        let real = lib.path.clone().expect("a loaded library has a path");
        let w = libs::wanted(13).iter().find(|w| w.name == "nvrtc").unwrap();
        let root = tmpdir("discovery");

        // CUDA 13 wheel layout inside a virtual environment.
        let venv = root.join("venv");
        let wheel = venv.join("lib/python3.12/site-packages/nvidia/cu13/lib");
        place(&real, &wheel, "libnvrtc.so.13");
        // A toolkit with lib64.
        let toolkit = root.join("cuda-13.0");
        place(&real, &toolkit.join("lib64"), "libnvrtc.so.13");
        // An override folder holding only the CUDA 12 name.
        let old = root.join("old");
        place(&real, &old, "libnvrtc.so.12");

        let bare = SearchEnv::default();
        assert!(
            libs::search_dirs(&bare).is_empty(),
            "nothing set, no system dirs"
        );

        let env = SearchEnv {
            virtual_env: Some(venv.display().to_string()),
            ..SearchEnv::default()
        };
        let (p, src) = libs::locate(w, &libs::search_dirs(&env)).expect("found in the wheel");
        assert_eq!(p, wheel.join("libnvrtc.so.13"));
        assert_eq!(src, "python wheel (VIRTUAL_ENV)");

        let env = SearchEnv {
            cuda_home: Some(toolkit.display().to_string()),
            virtual_env: Some(venv.display().to_string()),
            ..SearchEnv::default()
        };
        let (p, src) = libs::locate(w, &libs::search_dirs(&env)).expect("found in the toolkit");
        assert_eq!(
            p,
            toolkit.join("lib64/libnvrtc.so.13"),
            "CUDA_HOME before wheels"
        );
        assert_eq!(src, "CUDA_HOME");

        // The override comes first, and a wrong major version is named as such.
        let env = SearchEnv {
            accel_cuda_lib_dir: Some(old.display().to_string()),
            ..SearchEnv::default()
        };
        let dirs = libs::search_dirs(&env);
        assert_eq!(dirs[0].source, "ACCEL_CUDA_LIB_DIR");
        assert!(libs::locate(w, &dirs).is_none());
        assert_eq!(
            libs::other_majors(&old, "libnvrtc.so.13"),
            ["libnvrtc.so.12"]
        );

        // Loading from the wheel layout really loads it and reads its version.
        let env = SearchEnv {
            virtual_env: Some(venv.display().to_string()),
            ..SearchEnv::default()
        };
        let got = libs::load_library(w, &libs::search_dirs(&env));
        assert!(got.is_loaded(), "{got:?}");
        assert_eq!(got.version, lib.version);

        // A library that exists nowhere is a problem with a hint, not a panic.
        let missing = libs::Wanted {
            name: "nothing",
            file: "libaccel-does-not-exist.so.13",
            wheel_dir: "nothing",
            role: "test",
            pip: "nvidia-nothing",
            major: Some(13),
        };
        let got = libs::load_library(&missing, &libs::search_dirs(&env));
        assert!(!got.is_loaded());
        let problem = got.problem.unwrap();
        assert!(
            problem.contains("libaccel-does-not-exist.so.13 not found"),
            "{problem}"
        );
        assert!(got.hint.unwrap().contains("pip install nvidia-nothing"));
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_library_cudarc_bound_elsewhere_is_refused() {
        let Some(lib) = nvrtc() else { return };
        // The real NVRTC, found through one of its own functions: the chosen file.
        let real = libs::wanted(libs::cuda_major().major)
            .iter()
            .find(|w| w.name == "nvrtc")
            .unwrap();
        assert_eq!(lib.file, real.file);
        assert!(kernels::compile(&Family::Fill.source(), "fill", "sm_80").is_ok());
        // An address in another object (libc's malloc) is another copy: refused, naming both.
        let e = libs::check_bound("nvrtc", libc_malloc()).unwrap_err();
        assert!(e.contains("cudarc bound") && e.contains(lib.file), "{e}");
    }

    fn libc_malloc() -> *const std::ffi::c_void {
        extern "C" {
            fn malloc(n: usize) -> *mut std::ffi::c_void;
        }
        malloc as *const std::ffi::c_void
    }

    #[test]
    fn probe_reports_a_missing_driver_as_data() {
        let probe = accelkit::cuda::probe();
        let cuda = libs::library("cuda").unwrap();
        if cuda.is_loaded() {
            println!("skipped: this machine has an NVIDIA driver; the GPU tests cover it");
            return;
        }
        assert!(!probe.is_available());
        let accelkit::Availability::Unavailable { reason, hint } = &probe.availability else {
            unreachable!()
        };
        assert!(reason.starts_with("no NVIDIA driver"), "{reason}");
        assert!(reason.contains("libcuda.so.1"), "{reason}");
        assert!(hint.contains("driver"), "{hint}");
        // A tensor on cuda:0 is an error value that says the same.
        let e = Tensor::zeros((2, 2), DType::F32, &Device::Cuda(0)).unwrap_err();
        assert!(e.to_string().contains("no NVIDIA driver"), "{e}");
        assert!(accelkit::cuda::utilization(0).is_err());
    }

    #[test]
    fn pinned_memory_without_a_gpu_is_an_error_value() -> accelkit::Result<()> {
        // One process runs every module's tests: the device counters are shared.
        let _serial = crate::common::lock();
        let t = Tensor::arange(0f32, 6.0, &Device::Cpu)?;
        assert!(!t.is_pinned());
        if accelkit::cuda::is_available() {
            println!(
                "skipped: cuda: this machine has a CUDA GPU; gpu_pinned_memory covers pinning"
            );
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
}
