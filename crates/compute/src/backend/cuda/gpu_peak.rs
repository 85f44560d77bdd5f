//! NVIDIA GPUs' matmul peak: SMs x clock x flops per clock per SM, by compute capability.
//! Compiled in every build (a pure table: `accelkit::bench::cuda_peak`).

use crate::base::cpu_peak::Peak;
use crate::DType;

/// An NVIDIA GPU's peak for matmul in `dtype`: SMs x clock x flops per clock per SM, using
/// the tensor cores' dense rate where cuBLAS uses them (f16 from 7.0; bf16 and TF32, when
/// allowed, from 8.0; f64 on A100/H100/B200-class parts) and the CUDA cores' FMA rate
/// otherwise (bf16 on Volta and Turing, which cuBLAS computes in f32 on the CUDA cores; f32
/// with TF32 allowed on a GPU without TF32, where allowing it changes nothing). Known
/// architectures: compute capability 7.0, 7.5, 8.0, 8.6, 8.7, 8.9, 9.0, 10.0, 10.3, 12.0, 12.1.
pub fn cuda_peak(
    cc: (u32, u32),
    sm_count: u32,
    clock_mhz: u32,
    dtype: DType,
    tf32: bool,
) -> Option<Peak> {
    // (f32 FMA lanes, tf32 tensor, f16/bf16 tensor, f64) flops per clock per SM, dense. 0.0:
    // no such tensor cores. Sources: NVIDIA's architecture whitepapers; each row's check is
    // SMs x boost clock x rate = NVIDIA's published dense peak.
    let (f32_cores, tf32_tc, half_tc, f64_rate) = match cc {
        // Volta (Tesla V100 whitepaper): 8 tensor cores x 64 f16 FMA = 1024 flops; FP64 at
        // half rate. V100 SXM2: 80 SMs x 1.53 GHz x 1024 = 125 TFLOP/s f16.
        (7, 0) => (64.0, 0.0, 1024.0, 64.0),
        // Turing (Turing architecture whitepaper; T4 datasheet): f16 tensor cores only, FP64
        // at 1/32. T4: 40 SMs x 1.59 GHz x 1024 = 65 TFLOP/s f16, x 128 = 8.1 TFLOP/s f32.
        (7, 5) => (64.0, 0.0, 1024.0, 4.0),
        // A100 (A100 whitepaper): 108 SMs x 1.41 GHz: 312 TFLOP/s f16/bf16, 156 TF32,
        // 19.5 FP64 (tensor cores).
        (8, 0) => (64.0, 1024.0, 2048.0, 128.0),
        // GA10x (GA102 whitepaper; A10, RTX 30): 128 FP32 lanes; 512 f16 FMA per SM (the
        // professional parts' full rate with f32 accumulation). A10: 72 x 1.695 x 1024 = 125.
        (8, 6) => (128.0, 512.0, 1024.0, 4.0),
        // Orin (Jetson AGX Orin technical brief): GA10B SMs with A100-class tensor cores:
        // 16 SMs x 1.3 GHz x 2048 = 42.6 TFLOP/s f16 dense (85 TOPS int8 dense).
        (8, 7) => (128.0, 1024.0, 2048.0, 4.0),
        // Ada (Ada Lovelace whitepaper; L4, L40S, RTX 40): L4: 58 SMs x 2.04 GHz x 1024 =
        // 121 TFLOP/s f16 dense.
        (8, 9) => (128.0, 512.0, 1024.0, 4.0),
        // Hopper (H100 whitepaper): H100 SXM 132 SMs x 1.83 GHz: 989 TFLOP/s f16/bf16 dense,
        // 495 TF32, 67 FP64 (tensor cores, at 1.98 GHz).
        (9, 0) => (128.0, 2048.0, 4096.0, 256.0),
        // Blackwell (Blackwell architecture technical brief): B200 148 SMs x 1.965 GHz x 8192
        // = 2.4 PFLOP/s f16/bf16 dense; FP64 40 TFLOP/s = 128 flops/clock/SM.
        (10, 0) => (128.0, 4096.0, 8192.0, 128.0),
        // Blackwell Ultra (B300): the same f16/bf16 and TF32 rate per SM, FP64 cut to ~1.25
        // TFLOP/s (160 SMs: 4 flops/clock/SM).
        (10, 3) => (128.0, 4096.0, 8192.0, 4.0),
        // Blackwell RTX (RTX Blackwell GPU architecture whitepaper): RTX PRO 6000 Blackwell
        // 188 SMs x 2.617 GHz x 1024 = 504 TFLOP/s f16 dense; 12.1 (GB10, DGX Spark) has the
        // same SM.
        (12, 0) | (12, 1) => (128.0, 512.0, 1024.0, 4.0),
        _ => return None,
    };
    let cores = || (2.0 * f32_cores, format!("{f32_cores} FP32 cores x 2 (FMA)"));
    let (per_clock, what) = match dtype {
        DType::F32 if tf32 && tf32_tc > 0.0 => {
            (tf32_tc, "TF32 tensor-core flops (dense)".to_string())
        }
        DType::F32 if tf32 => {
            let (r, w) = cores();
            (
                r,
                format!("{w}; no TF32 tensor cores before 8.0, so allow_tf32 changes nothing"),
            )
        }
        DType::F32 => cores(),
        DType::BF16 if cc < (8, 0) => {
            let (r, w) = cores();
            (
                r,
                format!("{w}; no bf16 tensor cores before 8.0: cuBLAS computes bf16 in f32"),
            )
        }
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
