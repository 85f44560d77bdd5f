//! `accel` with no arguments: the seeds' walkthrough in one go. Which devices exist and which
//! is chosen; the CPU-vs-accelerator matmul (N=2000, 3 warm-ups, 10 synchronised iterations)
//! of the same operands on both, and how far apart their results are; then memory.
//! `--device D` runs it on D instead of the best device, `--size N` at another size.

use accelkit::bench::{self, Iterations};
use accelkit::load::Sampler;
use accelkit::{Device, Tensor};

use crate::{bench as cli_bench, devices, mem, out};

const WARMUP: usize = 3;
const ITERS: usize = 10;

pub fn run(chosen: Option<Device>, n: usize) -> anyhow::Result<()> {
    out::line(format!(
        "accel {} — devices, matmul timing and memory\n",
        env!("CARGO_PKG_VERSION")
    ))?;

    out::line("1. Devices")?;
    for l in devices::text(&accelkit::devices()) {
        out::line(format!("  {l}"))?;
    }
    let best = match chosen {
        Some(d) => {
            // Before any work: an unknown or unusable device is an error with its fix.
            d.check()?;
            out::line(format!("  chosen: {d}  (--device)\n"))?;
            d
        }
        None => {
            let best = Device::best();
            out::line(format!(
                "  chosen: {best}  (Device::best(): cuda, then mps, then xla, then wgpu, then cpu)\n"
            ))?;
            best
        }
    };

    out::line(format!(
        "2. Matmul {n}x{n} f32: {WARMUP} warm-ups, {ITERS} timed iterations, synchronised after each"
    ))?;
    out::line(format!("  {}", cli_bench::header()))?;
    // One pair of operands for every device, so that their results can be compared.
    let a = Tensor::randn(0.0, 1.0, (n, n), &Device::Cpu)?;
    let b = Tensor::randn(0.0, 1.0, (n, n), &Device::Cpu)?;
    // The host's CPU use while the CPU multiplies, as psutil.cpu_percent(interval=...) around
    // the work would measure it (telemetry only: this loads no compute library).
    let mut meter = Sampler::new()?;
    let (cpu, c_cpu) = bench::matmul_with(&Device::Cpu, &a, &b, WARMUP, Iterations::Fixed(ITERS))?;
    out::line(format!("  {}", cli_bench::row(&cpu)))?;
    let during = meter.sample();
    out::line(format!(
        "  host CPU use during the CPU matmul: {:.0} % of {} cores (over {:.1} s, warm-ups included)",
        during.host.cpu_percent,
        during.host.cpu_per_core_percent.len(),
        during.host.cpu_interval_s
    ))?;
    let mut runs = vec![cpu.clone()];
    if best != Device::Cpu {
        let (acc, c_acc) = bench::matmul_with(&best, &a, &b, WARMUP, Iterations::Fixed(ITERS))?;
        out::line(format!("  {}", cli_bench::row(&acc)))?;
        let diff = max_rel_diff(&c_cpu.to_vec_f64()?, &c_acc.to_vec_f64()?);
        out::line(format!(
            "  speedup {best} vs cpu: {:.2}x (median times); max relative difference of the two results (same operands): {diff:.2e}",
            cpu.stats.median_s / acc.stats.median_s
        ))?;
        runs.push(acc);
    } else if chosen.is_some() {
        out::line(
            "  the CPU was chosen (--device cpu): there is no second device to compare with",
        )?;
    } else {
        out::line("  no accelerator is available (reasons above): the CPU is the only device, so there is no speedup to report")?;
    }
    cli_bench::notes(&runs)?;
    if let Some(p) = &cpu.peak {
        out::line(format!("  cpu peak: {}", p.formula))?;
    }
    out::line(format!(
        "  the first run ({}) includes one-time costs such as starting threads; warm-ups keep them out of the timing\n",
        out::secs(cpu.first_run_s)
    ))?;

    out::line("3. Memory")?;
    // The last result is still alive here, so the allocator shows what it holds; CPU use is
    // over the accelerator's part.
    for l in mem::text(&mem::report(&mut meter)) {
        out::line(format!("  {l}"))?;
    }
    drop(c_cpu);
    cli_bench::check(&runs)
}

/// The largest |a - b| relative to the largest |a|: entries that cancel to near zero would
/// make an element-by-element ratio meaningless.
fn max_rel_diff(a: &[f64], b: &[f64]) -> f64 {
    let scale = a
        .iter()
        .fold(0.0f64, |m, x| m.max(x.abs()))
        .max(f64::MIN_POSITIVE);
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
        / scale
}
