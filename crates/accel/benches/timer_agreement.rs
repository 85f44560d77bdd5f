//! Does accel's own timer agree with an independent one? Criterion times `a.matmul(&b)` and
//! `a.add(&b)`, then `accel::bench` times the same calls in the same process, and the medians
//! are printed side by side with their ratio (issue: within 5%).
//!
//! `cargo bench -p accel --bench timer_agreement`

use std::time::Duration;

use accel::bench::{self, ElementwiseOp, Iterations};
use accel::{DType, Device, Tensor};
use criterion::Criterion;

fn main() {
    // `cargo test --all-targets` runs bench binaries too, without `--bench`: measuring there
    // would only slow the tests down.
    if !std::env::args().any(|a| a == "--bench") {
        println!(
            "skipped: timer agreement: run it with `cargo bench -p accel --bench timer_agreement`"
        );
        return;
    }
    let d = Device::Cpu;
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30);
    let mut rows = Vec::new();
    for n in [256usize, 1024] {
        let a = Tensor::randn(0.0, 1.0, (n, n), &d).unwrap();
        let b = Tensor::randn(0.0, 1.0, (n, n), &d).unwrap();
        let name = format!("matmul f32 N={n}");
        c.bench_function(&name, |bch| bch.iter(|| a.matmul(&b).unwrap()));
        let (r, _) = bench::matmul(
            &d,
            n,
            DType::F32,
            3,
            Iterations::Adaptive { min_time_s: 3.0 },
        )
        .unwrap();
        rows.push((name, r.stats.median_s));
    }
    let n = 10_000_000;
    let a = Tensor::rand(-1.0, 1.0, n, &d).unwrap();
    let b = Tensor::rand(-1.0, 1.0, n, &d).unwrap();
    let name = "add f32 n=10M".to_string();
    c.bench_function(&name, |bch| bch.iter(|| a.add(&b).unwrap()));
    let r = bench::elementwise(
        &d,
        ElementwiseOp::Add,
        n,
        DType::F32,
        3,
        Iterations::Adaptive { min_time_s: 3.0 },
    )
    .unwrap();
    rows.push((name, r.stats.median_s));
    c.final_summary();
    println!("\naccel's medians (compare with criterion's estimates above):");
    for (name, m) in rows {
        println!("  {name:<20} {:.3} us", m * 1e6);
    }
}
