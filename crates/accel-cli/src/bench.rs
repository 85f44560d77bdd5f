//! `accel bench`: warmed-up, synchronised benchmarks with their spread, % of peak and a
//! check of the answer.

use accel::bench::{self, MatmulRun};
use accel::{DType, Device};
use clap::Subcommand;
use serde::Serialize;

use crate::out;

#[derive(Subcommand)]
pub enum Workload {
    /// N x N by N x N matrix multiplication on each device.
    Matmul {
        /// Device to run on (repeatable); default: every available device.
        #[arg(long = "device", value_parser = parse_device)]
        devices: Vec<Device>,
        /// Matrix size N (repeatable).
        #[arg(long = "size", default_values_t = [2000])]
        sizes: Vec<usize>,
        /// Element type: f32, f64, f16, bf16, i32, i64.
        #[arg(long, default_value = "f32", value_parser = parse_dtype)]
        dtype: DType,
        /// Untimed iterations before timing.
        #[arg(long, default_value_t = 3)]
        warmup: usize,
        /// Timed iterations.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
        iters: u64,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
}

fn parse_device(s: &str) -> Result<Device, String> {
    s.parse().map_err(|e: accel::Error| e.to_string())
}

fn parse_dtype(s: &str) -> Result<DType, String> {
    s.parse().map_err(|e: accel::Error| e.to_string())
}

#[derive(Serialize)]
struct Report<'a> {
    benchmark: &'static str,
    results: &'a [MatmulRun],
}

pub fn run(w: Workload) -> anyhow::Result<()> {
    let Workload::Matmul {
        devices,
        sizes,
        dtype,
        warmup,
        iters,
        json,
    } = w;
    let devices = if devices.is_empty() {
        accel::available_devices()
    } else {
        devices
    };
    for d in &devices {
        d.check()?;
    }
    if !json {
        out::line(format!(
            "matmul {dtype}: {warmup} warm-ups, {iters} timed iterations, each synchronised"
        ))?;
        out::line(header())?;
    }
    let mut runs = Vec::new();
    for &size in &sizes {
        for d in &devices {
            let (r, _) = bench::matmul(d, size, dtype, warmup, iters as usize)?;
            if !json {
                out::line(row(&r))?;
            }
            runs.push(r);
        }
    }
    if json {
        out::json(
            "bench",
            &Report {
                benchmark: "matmul",
                results: &runs,
            },
        )?;
    }
    check(&runs)
}

/// A wrong answer fails the run, whatever the speed.
pub fn check(runs: &[MatmulRun]) -> anyhow::Result<()> {
    for r in runs {
        let tol = bench::tolerance(r.dtype);
        if r.max_rel_error > tol {
            anyhow::bail!(
                "matmul on {} ({}, N={}) is wrong: max relative error {:.2e} exceeds the {} tolerance {:.0e}",
                r.device,
                r.dtype,
                r.size,
                r.max_rel_error,
                r.dtype,
                tol
            );
        }
    }
    Ok(())
}

pub fn header() -> String {
    format!(
        "{:<8}{:>6}{:>12}{:>12}{:>22}{:>12}{:>10}{:>8}{:>12}",
        "device", "N", "first run", "median", "mean ± sd", "min", "GFLOP/s", "% peak", "max error"
    )
}

pub fn row(r: &MatmulRun) -> String {
    let s = &r.stats;
    format!(
        "{:<8}{:>6}{:>12}{:>12}{:>22}{:>12}{:>10.1}{:>8}{:>12.1e}",
        r.device.to_string(),
        r.size,
        out::secs(r.first_run_s),
        out::secs(s.median_s),
        format!("{} ± {}", out::secs(s.mean_s), out::secs(s.stddev_s)),
        out::secs(s.min_s),
        r.gflop_per_s,
        r.percent_of_peak
            .map_or("-".to_string(), |p| format!("{p:.0}%")),
        r.max_rel_error
    )
}
