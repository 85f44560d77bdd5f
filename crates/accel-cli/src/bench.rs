//! `accel bench`: warmed-up, synchronised benchmarks with their spread, % of peak and a
//! check of the answer.

use accel::bench::{self, ElementwiseOp, ElementwiseRun, Iterations, MatmulRun};
use accel::{DType, Device};
use clap::Subcommand;
use serde::Serialize;

use crate::out;

#[derive(Subcommand)]
pub enum Workload {
    /// N x N by N x N matrix multiplication on each device.
    Matmul {
        /// Matrix size N (repeatable).
        #[arg(long = "size", default_values_t = [2000])]
        sizes: Vec<usize>,
        /// Element type: f32, f64, f16, bf16, i32, i64.
        #[arg(long, default_value = "f32", value_parser = parse_dtype)]
        dtype: DType,
        /// Show how each device's peak (the "% peak" column) is computed.
        #[arg(long)]
        explain: bool,
        #[command(flatten)]
        common: Common,
    },
    /// Bandwidth-bound elementwise ops over a 1-d tensor on each device.
    Elementwise {
        /// add (a + b) or scale (a * 2).
        #[arg(long, default_value = "add", value_parser = parse_op)]
        op: ElementwiseOp,
        /// Number of elements (repeatable).
        #[arg(long = "size", default_values_t = [10_000_000])]
        sizes: Vec<usize>,
        /// Element type: f32, f64, f16, bf16.
        #[arg(long, default_value = "f32", value_parser = parse_dtype)]
        dtype: DType,
        #[command(flatten)]
        common: Common,
    },
}

/// The options every workload takes.
#[derive(clap::Args)]
pub struct Common {
    /// Device to run on (repeatable); default: every available device.
    #[arg(long = "device", value_parser = parse_device)]
    devices: Vec<Device>,
    /// Untimed iterations before timing.
    #[arg(long, default_value_t = 3)]
    warmup: usize,
    /// Timed iterations, exactly (the seeds' way); default: adaptive, see --min-time.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    iters: Option<u64>,
    /// Without --iters: time at least 5 iterations and at least this many seconds.
    #[arg(long, default_value_t = 1.0, value_parser = parse_min_time)]
    min_time: f64,
    /// Machine-readable output.
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// One CSV row per run, with a header.
    #[arg(long)]
    csv: bool,
    /// An earlier run's --json output: show each run's speed-up against it.
    #[arg(long, value_name = "FILE.json", conflicts_with = "csv")]
    compare: Option<std::path::PathBuf>,
    /// Draw throughput against size, one line per device, into this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<std::path::PathBuf>,
}

/// The options resolved: devices checked, the earlier report read, before anything runs.
struct Plan {
    devices: Vec<Device>,
    warmup: usize,
    iters: Iterations,
    format: Format,
    baseline: Option<Baseline>,
    plot: Option<std::path::PathBuf>,
}

impl Common {
    fn plan(self, benchmark: &str) -> anyhow::Result<Plan> {
        if let Some(p) = &self.plot {
            crate::plot::check_path(p)?;
        }
        Ok(Plan {
            baseline: Baseline::load(self.compare, benchmark)?,
            devices: resolve(self.devices)?,
            warmup: self.warmup,
            iters: iterations(self.iters, self.min_time),
            format: Format::of(self.json, self.csv),
            plot: self.plot,
        })
    }
}

fn parse_min_time(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("'{s}' is not a number of seconds (0 or more)")),
    }
}

/// `--iters N` is a fixed count; otherwise iterate until `--min-time` has been measured.
fn iterations(iters: Option<u64>, min_time_s: f64) -> Iterations {
    match iters {
        Some(n) => Iterations::Fixed(n as usize),
        None => Iterations::Adaptive { min_time_s },
    }
}

/// "10 timed iterations" or "adaptive iterations (...)", for the table's title.
fn describe(iters: Iterations) -> String {
    match iters {
        Iterations::Fixed(n) => format!("{n} timed iterations"),
        Iterations::Adaptive { min_time_s } => format!(
            "timed iterations until {min_time_s} s measured (at least {})",
            bench::ADAPTIVE_MIN_SAMPLES
        ),
    }
}

fn parse_op(s: &str) -> Result<ElementwiseOp, String> {
    match s {
        "add" => Ok(ElementwiseOp::Add),
        "scale" => Ok(ElementwiseOp::Scale),
        _ => Err(format!("unknown op '{s}'; expected add or scale")),
    }
}

fn parse_device(s: &str) -> Result<Device, String> {
    s.parse().map_err(|e: accel::Error| e.to_string())
}

fn parse_dtype(s: &str) -> Result<DType, String> {
    s.parse().map_err(|e: accel::Error| e.to_string())
}

#[derive(Serialize)]
struct Report<'a, R> {
    benchmark: &'static str,
    results: &'a [R],
    #[serde(skip_serializing_if = "Option::is_none")]
    comparison: Option<Vec<Comparison>>,
}

/// One run against the same workload in an earlier run.
#[derive(Serialize)]
struct Comparison {
    run: String,
    median_s: f64,
    baseline_median_s: Option<f64>,
    /// Earlier median / this median: above 1 means faster now.
    speedup: Option<f64>,
}

/// An earlier `--json` report, read before any benchmark runs so a bad file fails fast.
struct Baseline {
    path: std::path::PathBuf,
    results: Vec<serde_json::Value>,
}

impl Baseline {
    fn load(path: Option<std::path::PathBuf>, benchmark: &str) -> anyhow::Result<Option<Baseline>> {
        let Some(path) = path else { return Ok(None) };
        let text = std::fs::read_to_string(&path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
            anyhow::anyhow!("{} is not an accel --json report: {e}", path.display())
        })?;
        if v["benchmark"] != benchmark {
            anyhow::bail!(
                "{} holds a {} benchmark, not {benchmark}",
                path.display(),
                v["benchmark"]
            );
        }
        let results = v["results"].as_array().cloned().unwrap_or_default();
        Ok(Some(Baseline { path, results }))
    }

    /// Matches runs on device, dtype, size (and op) and computes the speed-ups.
    fn compare<R: Serialize>(&self, runs: &[R]) -> anyhow::Result<Vec<Comparison>> {
        let key = |v: &serde_json::Value| {
            (
                v["device"].clone(),
                v["dtype"].clone(),
                v["size"].clone(),
                v["op"].clone(),
            )
        };
        let mut out = Vec::new();
        for r in runs {
            let v = serde_json::to_value(r)?;
            let median_s = v["stats"]["median_s"].as_f64().unwrap_or(f64::NAN);
            let base = self
                .results
                .iter()
                .find(|b| key(b) == key(&v))
                .and_then(|b| b["stats"]["median_s"].as_f64());
            let op = v["op"]
                .as_str()
                .map(|o| format!("{o} "))
                .unwrap_or_default();
            out.push(Comparison {
                run: format!(
                    "{op}{} {} size {}",
                    v["device"].as_str().unwrap_or("?"),
                    v["dtype"].as_str().unwrap_or("?"),
                    v["size"]
                ),
                median_s,
                baseline_median_s: base,
                speedup: base.map(|b| b / median_s),
            });
        }
        Ok(out)
    }

    fn print(&self, cmp: &[Comparison]) -> anyhow::Result<()> {
        out::line(format!(
            "compared with {} (speed-up = earlier median / this median):",
            self.path.display()
        ))?;
        for c in cmp {
            match (c.baseline_median_s, c.speedup) {
                (Some(b), Some(x)) => out::line(format!(
                    "  {}: {x:.2}x ({} now, {} before)",
                    c.run,
                    out::secs(c.median_s),
                    out::secs(b)
                ))?,
                _ => out::line(format!("  {}: not in the earlier run", c.run))?,
            }
        }
        Ok(())
    }
}

/// Throughput points grouped by device, for `--plot`.
fn series(
    points: impl Iterator<Item = (Device, usize, f64)>,
) -> std::collections::BTreeMap<String, Vec<crate::plot::Point>> {
    let mut out = std::collections::BTreeMap::<String, Vec<crate::plot::Point>>::new();
    for (d, size, rate) in points {
        out.entry(d.to_string())
            .or_default()
            .push((size as f64, rate));
    }
    out
}

/// The devices asked for, or every available one; each checked before any work starts.
fn resolve(devices: Vec<Device>) -> anyhow::Result<Vec<Device>> {
    let devices = if devices.is_empty() {
        accel::available_devices()
    } else {
        devices
    };
    for d in &devices {
        d.check()?;
    }
    Ok(devices)
}

/// How results are printed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    Text,
    Json,
    Csv,
}

impl Format {
    fn of(json: bool, csv: bool) -> Format {
        match (json, csv) {
            (true, _) => Format::Json,
            (_, true) => Format::Csv,
            _ => Format::Text,
        }
    }
}

/// The CSV columns every benchmark shares, after its own leading ones.
const CSV_TIMING: &str = "warmup,iters,first_run_s,median_s,mean_s,min_s,max_s,stddev_s,q1_s,q3_s,iqr_s,median_ci95_low_s,median_ci95_high_s,outliers";

fn csv_timing(warmup: usize, s: &bench::Stats, first_run_s: f64) -> String {
    format!(
        "{warmup},{},{first_run_s:e},{:e},{:e},{:e},{:e},{:e},{:e},{:e},{:e},{:e},{:e},{}",
        s.samples,
        s.median_s,
        s.mean_s,
        s.min_s,
        s.max_s,
        s.stddev_s,
        s.q1_s,
        s.q3_s,
        s.iqr_s,
        s.median_ci95_s.0,
        s.median_ci95_s.1,
        s.outliers
    )
}

fn opt(v: Option<f64>) -> String {
    v.map_or(String::new(), |v| format!("{v}"))
}

pub fn run(w: Workload) -> anyhow::Result<()> {
    match w {
        Workload::Matmul {
            sizes,
            dtype,
            explain,
            common,
        } => {
            let plan = common.plan("matmul")?;
            matmul(&plan, &sizes, dtype)?;
            if explain && plan.format == Format::Text {
                for d in &plan.devices {
                    match bench::peak(d, dtype) {
                        Some(p) => out::line(format!("peak of {d} for {dtype}: {}", p.formula))?,
                        None => out::line(format!(
                            "peak of {d} for {dtype}: not derivable (no FMA peak for this dtype, or the clock is unknown)"
                        ))?,
                    }
                }
            }
            Ok(())
        }
        Workload::Elementwise {
            op,
            sizes,
            dtype,
            common,
        } => elementwise(&common.plan("elementwise")?, op, &sizes, dtype),
    }
}

fn elementwise(
    plan: &Plan,
    op: ElementwiseOp,
    sizes: &[usize],
    dtype: DType,
) -> anyhow::Result<()> {
    let Plan {
        devices,
        warmup,
        iters,
        format,
        baseline,
        plot,
    } = plan;
    let (warmup, iters, format) = (*warmup, *iters, *format);
    if !dtype.is_float() {
        anyhow::bail!(
            "elementwise benchmarks take a float dtype (f32, f64, f16, bf16), not {dtype}"
        );
    }
    match format {
        Format::Text => {
            out::line(
                format!(
                    "{op:?} {dtype}: {warmup} warm-ups, {}, each synchronised",
                    describe(iters)
                )
                .to_lowercase(),
            )?;
            out::line(format!(
                "{:<8}{:>12}{TIMING_HEADER}{:>10}{:>11}",
                "device", "elements", "GB/s", "max error"
            ))?;
        }
        Format::Csv => out::line(format!(
            "op,device,dtype,size,{CSV_TIMING},gb_per_s,max_rel_error"
        ))?,
        Format::Json => {}
    }
    let mut runs: Vec<ElementwiseRun> = Vec::new();
    let total = sizes.len() * devices.len();
    for &size in sizes {
        for d in devices {
            if format != Format::Json {
                out::progress(Some(&format!(
                    "[{}/{total}] {op:?} {d} n={size} ...",
                    runs.len() + 1
                )));
            }
            let r = bench::elementwise(d, op, size, dtype, warmup, iters)?;
            out::progress(None);
            match format {
                Format::Text => out::line(format!(
                    "{:<8}{:>12}{}{:>10.1}{:>11.1e}",
                    r.device.to_string(),
                    r.size,
                    timing(&r.stats, r.first_run_s),
                    r.gb_per_s,
                    r.max_rel_error
                ))?,
                Format::Csv => out::line(format!(
                    "{},{},{},{},{},{},{:e}",
                    format!("{op:?}").to_lowercase(),
                    r.device,
                    r.dtype,
                    r.size,
                    csv_timing(r.warmup, &r.stats, r.first_run_s),
                    r.gb_per_s,
                    r.max_rel_error
                ))?,
                Format::Json => {}
            }
            runs.push(r);
        }
    }
    if let Some(path) = plot {
        let series = series(runs.iter().map(|r| (r.device, r.size, r.gb_per_s)));
        let title = format!("{op:?} {dtype}").to_lowercase();
        crate::plot::draw(path, &title, "elements", "GB/s", &series)?;
    }
    let comparison = baseline.as_ref().map(|b| b.compare(&runs)).transpose()?;
    match format {
        Format::Json => out::json(
            "bench",
            &Report {
                benchmark: "elementwise",
                results: &runs,
                comparison,
            },
        )?,
        Format::Text => {
            noise_notes(
                runs.iter()
                    .map(|r| (format!("{} n={}", r.device, r.size), &r.stats)),
            )?;
            if let (Some(b), Some(c)) = (&baseline, &comparison) {
                b.print(c)?;
            }
        }
        Format::Csv => {}
    }
    for r in &runs {
        let tol = bench::tolerance(r.dtype);
        if r.max_rel_error > tol {
            anyhow::bail!(
                "{:?} on {} ({}) is wrong: max relative error {:.2e} exceeds {tol:.0e}",
                r.op,
                r.device,
                r.dtype,
                r.max_rel_error
            );
        }
    }
    Ok(())
}

fn matmul(plan: &Plan, sizes: &[usize], dtype: DType) -> anyhow::Result<()> {
    let Plan {
        devices,
        warmup,
        iters,
        format,
        baseline,
        plot,
    } = plan;
    let (warmup, iters, format) = (*warmup, *iters, *format);
    match format {
        Format::Text => {
            out::line(format!(
                "matmul {dtype}: {warmup} warm-ups, {}, each synchronised",
                describe(iters)
            ))?;
            out::line(header())?;
        }
        Format::Csv => out::line(format!(
            "device,dtype,size,{CSV_TIMING},gflop_per_s,peak_gflop_per_s,percent_of_peak,max_rel_error"
        ))?,
        Format::Json => {}
    }
    let mut runs = Vec::new();
    let total = sizes.len() * devices.len();
    for &size in sizes {
        for d in devices {
            if format != Format::Json {
                out::progress(Some(&format!(
                    "[{}/{total}] matmul {d} N={size} ...",
                    runs.len() + 1
                )));
            }
            let (r, _) = bench::matmul(d, size, dtype, warmup, iters)?;
            out::progress(None);
            match format {
                Format::Text => out::line(row(&r))?,
                Format::Csv => out::line(format!(
                    "{},{},{},{},{},{},{},{:e}",
                    r.device,
                    r.dtype,
                    r.size,
                    csv_timing(r.warmup, &r.stats, r.first_run_s),
                    r.gflop_per_s,
                    opt(r.peak.as_ref().map(|p| p.gflop_per_s)),
                    opt(r.percent_of_peak),
                    r.max_rel_error
                ))?,
                Format::Json => {}
            }
            runs.push(r);
        }
    }
    if let Some(path) = plot {
        let series = series(runs.iter().map(|r| (r.device, r.size, r.gflop_per_s)));
        crate::plot::draw(path, &format!("matmul {dtype}"), "N", "GFLOP/s", &series)?;
    }
    let comparison = baseline.as_ref().map(|b| b.compare(&runs)).transpose()?;
    match format {
        Format::Json => out::json(
            "bench",
            &Report {
                benchmark: "matmul",
                results: &runs,
                comparison,
            },
        )?,
        Format::Text => {
            matmul_notes(&runs)?;
            if let (Some(b), Some(c)) = (&baseline, &comparison) {
                b.print(c)?;
            }
        }
        Format::Csv => {}
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

/// The timing columns every benchmark table shares.
const TIMING_HEADER: &str = "   first run      median    median 95% CI          IQR  outliers";

fn timing(s: &bench::Stats, first_run_s: f64) -> String {
    format!(
        "{:>12}{:>12}  {:<22}{:>10}{:>10}",
        out::secs(first_run_s),
        out::secs(s.median_s),
        format!(
            "[{}, {}]",
            out::secs(s.median_ci95_s.0),
            out::secs(s.median_ci95_s.1)
        ),
        out::secs(s.iqr_s),
        format!("{}/{}", s.outliers, s.samples),
    )
}

/// One line per run whose spread makes its numbers doubtful.
fn noise_notes<'a>(runs: impl Iterator<Item = (String, &'a bench::Stats)>) -> anyhow::Result<()> {
    for (what, s) in runs {
        if let Some(w) = s.noise_warning() {
            out::line(format!("note: {what}: {w}"))?;
        }
    }
    Ok(())
}

pub fn header() -> String {
    format!(
        "{:<8}{:>6}{TIMING_HEADER}{:>10}{:>8}{:>11}",
        "device", "N", "GFLOP/s", "% peak", "max error"
    )
}

pub fn row(r: &MatmulRun) -> String {
    format!(
        "{:<8}{:>6}{}{:>10.1}{:>8}{:>11.1e}",
        r.device.to_string(),
        r.size,
        timing(&r.stats, r.first_run_s),
        r.gflop_per_s,
        r.percent_of_peak
            .map_or("-".to_string(), |p| format!("{p:.0}%")),
        r.max_rel_error
    )
}

/// Notes for the matmul runs that were noisy.
pub fn matmul_notes(runs: &[MatmulRun]) -> anyhow::Result<()> {
    noise_notes(
        runs.iter()
            .map(|r| (format!("{} N={}", r.device, r.size), &r.stats)),
    )
}
