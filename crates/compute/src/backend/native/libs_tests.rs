//! `libs`'s unit tests.
use super::*;

#[test]
fn each_majors_files_and_wheel_folders() {
    let files = |m| wanted(m).iter().map(|w| w.file).collect::<Vec<_>>();
    assert!(files(12).contains(&"libcublas.so.12") && files(12).contains(&"libnvrtc.so.12"));
    assert!(files(13).contains(&"libcublasLt.so.13"));
    // cuBLASLt loads before cuBLAS, the driver's libraries first, in both.
    for m in CUDA_MAJORS {
        let names: Vec<&str> = wanted(m).iter().map(|w| w.name.as_str()).collect();
        assert_eq!(
            names,
            ["cuda", "nvml", "nvrtc", "cublaslt", "cublas", "cudnn"]
        );
    }
    assert_eq!(cuda_version_text(12040), "12.4");
    assert_eq!(cuda_version_text(13010), "13.1");
    let sp = std::env::temp_dir().join(format!("accel-wheeldirs-{}", std::process::id()));
    for d in [
        "nvidia/cu13/lib",
        "nvidia/cuda_nvrtc/lib",
        "nvidia/cublas/lib",
    ] {
        std::fs::create_dir_all(sp.join(d)).unwrap();
    }
    let got = wheel_dirs(&sp);
    assert_eq!(
        got,
        [
            sp.join("nvidia/cu13/lib"),
            sp.join("nvidia/cuda_nvrtc/lib"),
            sp.join("nvidia/cublas/lib")
        ]
    );
    let _ = std::fs::remove_dir_all(&sp);
}
