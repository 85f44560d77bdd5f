//! Library discovery against real files laid out like a Python wheel and like a toolkit, the
//! kernels' sources against what the storage launches, and the probe's answer on a machine
//! without a driver: the CUDA backend's insides that run without a GPU.

use std::path::{Path, PathBuf};

use crate::backend::cuda::kernels::{self, Family};
use crate::backend::native::libs::{self, SearchEnv};
use crate::base::device::Device;
use crate::base::dtype::DType;
use crate::tensor::Tensor;

/// The NVRTC library this process loaded, or None with a `skipped:` line (a failure when
/// ACCEL_TEST_REQUIRE names nvrtc or cuda).
fn nvrtc() -> Option<&'static libs::Library> {
    let lib = libs::library(crate::backend::native::libs::LibName::Nvrtc).filter(|l| l.is_loaded());
    if lib.is_none() {
        let why = libs::library(crate::backend::native::libs::LibName::Nvrtc)
            .and_then(|l| l.problem.clone())
            .unwrap_or_default();
        assert!(
            !accelkit_testkit::is_required("nvrtc") && !accelkit_testkit::is_required("cuda"),
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
    let w = libs::wanted(13)
        .iter()
        .find(|w| w.name == crate::backend::native::libs::LibName::Nvrtc)
        .unwrap();
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
    let w = libs::wanted(13)
        .iter()
        .find(|w| w.name == crate::backend::native::libs::LibName::Nvrtc)
        .unwrap();
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
        name: libs::LibName::Cudnn,
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
        .find(|w| w.name == crate::backend::native::libs::LibName::Nvrtc)
        .unwrap();
    assert_eq!(lib.file, real.file);
    assert!(kernels::compile(&Family::Fill.source(), "fill", "sm_80").is_ok());
    // An address in another object (libc's malloc) is another copy: refused, naming both.
    let e = libs::check_bound(libs::LibName::Nvrtc, libc_malloc()).unwrap_err();
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
    let probe = crate::cuda::probe();
    let cuda = libs::library(crate::backend::native::libs::LibName::Cuda).unwrap();
    if cuda.is_loaded() {
        println!("skipped: this machine has an NVIDIA driver; the GPU tests cover it");
        return;
    }
    assert!(!probe.is_available());
    let crate::Availability::Unavailable { reason, hint } = &probe.availability else {
        unreachable!()
    };
    assert!(reason.starts_with("no NVIDIA driver"), "{reason}");
    assert!(reason.contains("libcuda.so.1"), "{reason}");
    assert!(hint.contains("driver"), "{hint}");
    // A tensor on cuda:0 is an error value that says the same.
    let e = Tensor::zeros((2, 2), DType::F32, &Device::Cuda(0)).unwrap_err();
    assert!(e.to_string().contains("no NVIDIA driver"), "{e}");
    assert!(crate::cuda::utilization(0).is_err());
}
