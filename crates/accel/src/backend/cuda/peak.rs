//! NVIDIA GPUs' matmul peak: SMs x clock x flops per clock per SM, by compute capability.
//! Compiled in every build (a pure table: `accel::bench::cuda_peak`).

use crate::base::peak::Peak;
use crate::DType;

/// An NVIDIA GPU's peak for matmul in `dtype`: SMs x clock x flops per clock per SM, using
/// the tensor cores' dense rate where cuBLAS uses them (f16, bf16, TF32 when allowed, f64 on
/// A100/H100-class parts) and the CUDA cores' FMA rate otherwise. Known architectures only:
/// compute capability 8.0, 8.6, 8.9, 9.0 and 10.0.
pub fn cuda_peak(
    cc: (u32, u32),
    sm_count: u32,
    clock_mhz: u32,
    dtype: DType,
    tf32: bool,
) -> Option<Peak> {
    // (f32 FMA lanes, tf32 tensor, f16/bf16 tensor, f64) flops per clock per SM.
    let (f32_cores, tf32_tc, half_tc, f64_rate) = match cc {
        (8, 0) => (64.0, 1024.0, 2048.0, 128.0),
        (8, 6) | (8, 7) => (128.0, 512.0, 1024.0, 4.0),
        (8, 9) => (128.0, 512.0, 1024.0, 4.0),
        (9, 0) => (128.0, 2048.0, 4096.0, 256.0),
        (10, 0) => (128.0, 4096.0, 8192.0, 256.0),
        _ => return None,
    };
    let (per_clock, what) = match dtype {
        DType::F32 if tf32 => (tf32_tc, "TF32 tensor-core flops (dense)".to_string()),
        DType::F32 => (2.0 * f32_cores, format!("{f32_cores} FP32 cores x 2 (FMA)")),
        DType::F16 | DType::BF16 => (half_tc, format!("{dtype} tensor-core flops (dense)")),
        DType::F64 => (f64_rate, "FP64 flops".to_string()),
        DType::I32 | DType::I64 => return None,
    };
    let g = sm_count as f64 * clock_mhz as f64 / 1000.0 * per_clock;
    Some(Peak {
        gflop_per_s: g,
        formula: format!(
            "{sm_count} SMs x {:.3} GHz x {per_clock} flops/clock/SM ({what}, compute capability {}.{}) = {:.1} TFLOP/s",
            clock_mhz as f64 / 1000.0,
            cc.0,
            cc.1,
            g / 1000.0
        ),
    })
}
