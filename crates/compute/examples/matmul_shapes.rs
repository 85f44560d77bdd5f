//! accel's CPU matmul on given shapes, for `bench/shapes_side_by_side.py` (which runs
//! PyTorch on the same shapes in its own process, in alternating rounds): a Linear layer's
//! `x @ W.t()` on a few tokens (m x k by a transposed n x k), a vector times a matrix, and
//! the like, which `accel bench matmul` (square products) does not cover.
//!
//! ```sh
//! cargo run --release --example matmul_shapes -- bf16 t 1x4096x4096 32x4096x4096
//! ```
//!
//! Arguments: the dtype (`f32`, `f64`, `bf16`, `f16`), `t` (B stored n x k and transposed,
//! as a Linear layer's weight) or `n` (B stored k x n), then shapes `MxNxK`. For each shape:
//! 10 warm-up calls, then 7 timed runs of calls (about 50 ms each at 50 GFLOP/s), and one
//! line `MxNxK GFLOP/s` with the median run's rate.

use std::process::ExitCode;
use std::time::Instant;

use accelkit::{DType, Device, Tensor};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: matmul_shapes f32|f64|bf16|f16 t|n MxNxK...";
    let (dt, layout, shapes) = match args.as_slice() {
        [dt, layout, shapes @ ..] if !shapes.is_empty() => (dt, layout, shapes),
        _ => return Err(usage.into()),
    };
    let dt = match dt.as_str() {
        "f32" => DType::F32,
        "f64" => DType::F64,
        "bf16" => DType::BF16,
        "f16" => DType::F16,
        other => return Err(format!("unknown dtype {other:?}; {usage}")),
    };
    let transposed = match layout.as_str() {
        "t" => true,
        "n" => false,
        other => return Err(format!("B's layout must be t or n, not {other:?}; {usage}")),
    };
    let cpu = Device::Cpu;
    for spec in shapes {
        let dims: Vec<usize> = spec
            .split('x')
            .map(|d| d.parse().ok().filter(|&d| d > 0))
            .collect::<Option<_>>()
            .filter(|d: &Vec<usize>| d.len() == 3)
            .ok_or_else(|| format!("shape {spec:?} is not MxNxK with sizes above 0"))?;
        let (m, n, k) = (dims[0], dims[1], dims[2]);
        let err = |e: accelkit::Error| e.to_string();
        let a = Tensor::randn_with(0.0, 1.0, (m, k), dt, &cpu).map_err(err)?;
        let b = if transposed {
            let w = Tensor::randn_with(0.0, 1.0, (n, k), dt, &cpu).map_err(err)?;
            w.t().map_err(err)?
        } else {
            Tensor::randn_with(0.0, 1.0, (k, n), dt, &cpu).map_err(err)?
        };
        let gflop = 2.0 * (m * n * k) as f64 / 1e9;
        for _ in 0..10 {
            drop(a.matmul(&b).map_err(err)?);
        }
        // A run takes about 50 ms at 50 GFLOP/s.
        let calls = ((2.5 / gflop).ceil() as usize).clamp(3, 100_000);
        let mut rates = Vec::new();
        for _ in 0..7 {
            let start = Instant::now();
            for _ in 0..calls {
                drop(a.matmul(&b).map_err(err)?);
            }
            rates.push(gflop * calls as f64 / start.elapsed().as_secs_f64());
        }
        rates.sort_by(f64::total_cmp);
        println!("{spec} {:.1}", rates[3]);
    }
    Ok(())
}
