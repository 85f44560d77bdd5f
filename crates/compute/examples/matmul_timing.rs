//! The seeds' CPU-vs-accelerator matmul timing: 3 warm-ups, then the mean of 10 timed
//! iterations, synchronising the device before the clock is read.
//!
//! `cargo run --release --example matmul_timing -- [N] [DEVICE]`: the accelerator is DEVICE
//! (`xla:0`, `wgpu:0`, ...) when given, else `Device::best()`. Both multiply the same operands,
//! and the last line says how far apart their results are.

use std::time::Instant;

use accelkit::{Device, Tensor};

fn time_matmul(a: &Tensor, b: &Tensor, device: &Device, iters: usize) -> accelkit::Result<f64> {
    // Warm-up: the first runs pay for thread start-up, library loading and caches.
    for _ in 0..3 {
        a.matmul(b)?;
    }
    device.synchronize()?;
    let start = Instant::now();
    for _ in 0..iters {
        a.matmul(b)?;
    }
    // Accelerators run asynchronously: wait for the work before stopping the clock.
    device.synchronize()?;
    Ok(start.elapsed().as_secs_f64() / iters as f64)
}

fn main() -> std::process::ExitCode {
    // As the `accel` command does: settings that keep accelerator libraries quiet on a server
    // (Vulkan's window-system code complains without XDG_RUNTIME_DIR). SAFETY: the first thing
    // in main, before any thread has started.
    unsafe { accelkit::prepare_environment() };
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // The error's own words (the reason, the fix, the devices there are).
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> accelkit::Result<()> {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let iters = 10;
    let a_cpu = Tensor::randn(0.0, 1.0, (n, n), &Device::Cpu)?;
    let b_cpu = Tensor::randn(0.0, 1.0, (n, n), &Device::Cpu)?;

    let device = match std::env::args().nth(2) {
        Some(name) => name.parse::<Device>()?,
        None => Device::best(),
    };
    // An unusable device is an error with the reason and the devices there are.
    device.check()?;
    let a_dev = a_cpu.to_device(&device)?;
    let b_dev = b_cpu.to_device(&device)?;

    let cpu_time = time_matmul(&a_cpu, &b_cpu, &Device::Cpu, iters)?;
    let dev_time = time_matmul(&a_dev, &b_dev, &device, iters)?;
    let gflops = |t: f64| 2.0 * (n as f64).powi(3) / t / 1e9;

    println!(
        "CPU average: {cpu_time:.6} sec ({:.1} GFLOP/s)",
        gflops(cpu_time)
    );
    println!(
        "{device} average: {dev_time:.6} sec ({:.1} GFLOP/s)",
        gflops(dev_time)
    );
    println!("Speedup: {:.2}x", cpu_time / dev_time);

    // One product, computed on both: the largest |difference| over the largest |entry|.
    let c_cpu = a_cpu.matmul(&b_cpu)?.to_vec_f64()?;
    let c_dev = a_dev.matmul(&b_dev)?.to_vec_f64()?;
    let scale = c_cpu.iter().fold(f64::MIN_POSITIVE, |m, x| m.max(x.abs()));
    let diff = c_cpu
        .iter()
        .zip(&c_dev)
        .fold(0.0f64, |m, (x, y)| m.max((x - y).abs()))
        / scale;
    println!("max relative difference of the two results: {diff:.2e}");
    Ok(())
}
