//! The CUDA libraries accel looks for, per CUDA major: each one's file, wheel folder, pip
//! package and role (the table `libs` searches with).

use serde::Serialize;

/// The libraries accel looks for, by what they are; written as their short names (`cublaslt`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LibName {
    /// The driver's CUDA library (`libcuda.so.1`).
    Cuda,
    /// The driver's management library (`libnvidia-ml.so.1`).
    Nvml,
    /// The run-time CUDA C compiler.
    Nvrtc,
    /// cuBLASLt.
    CublasLt,
    /// cuBLAS.
    Cublas,
    /// cuDNN (reported only).
    Cudnn,
}

impl LibName {
    /// The short name (`cublas`).
    pub fn as_str(self) -> &'static str {
        match self {
            LibName::Cuda => "cuda",
            LibName::Nvml => "nvml",
            LibName::Nvrtc => "nvrtc",
            LibName::CublasLt => "cublaslt",
            LibName::Cublas => "cublas",
            LibName::Cudnn => "cudnn",
        }
    }
}

impl std::fmt::Display for LibName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One library accel looks for.
#[derive(Debug, Clone, Copy)]
pub struct Wanted {
    /// Which library.
    pub name: LibName,
    /// The file to load, with its major-version suffix.
    pub file: &'static str,
    /// The folder under a wheel's `nvidia/` that holds it (`cu13` for CUDA 13, `cuda_nvrtc`,
    /// `cublas`... for CUDA 12), whose `lib/` is searched.
    pub wheel_dir: &'static str,
    /// What the library is for: the table's documentation, read by no code.
    #[allow(dead_code)]
    pub role: &'static str,
    /// Which pip package provides it (empty for the driver's libraries).
    pub pip: &'static str,
    /// The CUDA major it belongs to (None: the driver's own, and cuDNN 9, built for either).
    pub major: Option<u32>,
}

const fn driver_lib(name: LibName, file: &'static str, role: &'static str) -> Wanted {
    Wanted {
        name,
        file,
        wheel_dir: "",
        role,
        pip: "",
        major: None,
    }
}

const LIBCUDA: Wanted = driver_lib(
    LibName::Cuda,
    "libcuda.so.1",
    "the NVIDIA driver's CUDA library",
);
const LIBNVML: Wanted = driver_lib(
    LibName::Nvml,
    "libnvidia-ml.so.1",
    "the driver's management library (load, temperature, power)",
);
const NVRTC_ROLE: &str = "the run-time CUDA C compiler for accel's kernels";
const CUDNN_ROLE: &str = "cuDNN (reported only; accel does not use it)";

/// CUDA 13's libraries, in load order (cuBLASLt before cuBLAS, which needs it).
pub(crate) const WANTED_13: &[Wanted] = &[
    LIBCUDA,
    LIBNVML,
    Wanted {
        name: LibName::Nvrtc,
        file: "libnvrtc.so.13",
        wheel_dir: "cu13",
        role: NVRTC_ROLE,
        pip: "nvidia-cuda-nvrtc",
        major: Some(13),
    },
    Wanted {
        name: LibName::CublasLt,
        file: "libcublasLt.so.13",
        wheel_dir: "cu13",
        role: "cuBLASLt, which cuBLAS uses",
        pip: "nvidia-cublas",
        major: Some(13),
    },
    Wanted {
        name: LibName::Cublas,
        file: "libcublas.so.13",
        wheel_dir: "cu13",
        role: "cuBLAS, for matrix multiplication",
        pip: "nvidia-cublas",
        major: Some(13),
    },
    Wanted {
        name: LibName::Cudnn,
        file: "libcudnn.so.9",
        wheel_dir: "cudnn",
        role: CUDNN_ROLE,
        pip: "nvidia-cudnn-cu13",
        major: None,
    },
];

/// CUDA 12's libraries (the `nvidia-*-cu12` wheels, one folder a library), in load order.
pub(crate) const WANTED_12: &[Wanted] = &[
    LIBCUDA,
    LIBNVML,
    Wanted {
        name: LibName::Nvrtc,
        file: "libnvrtc.so.12",
        wheel_dir: "cuda_nvrtc",
        role: NVRTC_ROLE,
        pip: "nvidia-cuda-nvrtc-cu12",
        major: Some(12),
    },
    Wanted {
        name: LibName::CublasLt,
        file: "libcublasLt.so.12",
        wheel_dir: "cublas",
        role: "cuBLASLt, which cuBLAS uses",
        pip: "nvidia-cublas-cu12",
        major: Some(12),
    },
    Wanted {
        name: LibName::Cublas,
        file: "libcublas.so.12",
        wheel_dir: "cublas",
        role: "cuBLAS, for matrix multiplication",
        pip: "nvidia-cublas-cu12",
        major: Some(12),
    },
    Wanted {
        name: LibName::Cudnn,
        file: "libcudnn.so.9",
        wheel_dir: "cudnn",
        role: CUDNN_ROLE,
        pip: "nvidia-cudnn-cu12",
        major: None,
    },
];

/// The libraries for CUDA `major` (12 or 13; anything else gets 13's), in load order.
pub fn wanted(major: u32) -> &'static [Wanted] {
    if major == 12 {
        WANTED_12
    } else {
        WANTED_13
    }
}
