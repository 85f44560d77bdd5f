//! `accel bench`: warmed-up, synchronised benchmarks with their spread, % of peak and a
//! check of the answer.

use accel::bench::{
    self, CopyKind, CopyRun, ElementwiseOp, ElementwiseRun, HostMemory, Iterations, MatmulRun,
};
use accel::{DType, Device};
use clap::Subcommand;
use serde::Serialize;

use crate::out;

#[derive(Subcommand)]
pub enum Workload {
    /// N x N by N x N matrix multiplication on each device.
    Matmul {
        /// Matrix size N (repeatable), 1 to 1048576.
        #[arg(long = "size", default_values_t = [2000], value_parser = parse_matrix_size)]
        sizes: Vec<usize>,
        /// Element type: f32, f64, f16, bf16, i32, i64.
        #[arg(long, default_value = "f32", value_parser = parse_dtype)]
        dtype: DType,
        /// Show how each device's peak (the "% peak" column) is computed.
        #[arg(long)]
        explain: bool,
        /// Let f32 matmul use TF32 tensor cores on CUDA GPUs
        /// (`torch.backends.cuda.matmul.allow_tf32 = True`).
        #[arg(long)]
        tf32: bool,
        #[command(flatten)]
        common: Common,
    },
    /// Copies between host and device memory, and within a device (bandwidthTest's job).
    /// On the cpu device every direction is a host memcpy: the baseline.
    Copy {
        /// h2d (host to device), d2h (device to host) or d2d (within the device).
        #[arg(long, default_value = "h2d", value_parser = parse_copy)]
        direction: CopyKind,
        /// Bytes per copy, with an optional KiB/MiB/GiB suffix (repeatable).
        #[arg(long = "size", value_parser = parse_bytes,
              default_values = ["1KiB", "1MiB", "64MiB", "256MiB"])]
        sizes: Vec<usize>,
        /// The host memory of h2d and d2h copies on CUDA GPUs: pageable (staged through
        /// pinned buffers), pinned (`pin_memory()`: one DMA), or both. Other devices copy
        /// pageable memory.
        #[arg(long, default_value = "both", value_parser = ["pageable", "pinned", "both"])]
        host_memory: String,
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
        /// Number of elements (repeatable), 1 to 2^40.
        #[arg(long = "size", default_values_t = [10_000_000], value_parser = parse_elements)]
        sizes: Vec<usize>,
        /// Element type: f32, f64, f16, bf16.
        #[arg(long, default_value = "f32", value_parser = parse_dtype)]
        dtype: DType,
        /// Show how each device's peak (the "% peak" column) is computed.
        #[arg(long)]
        explain: bool,
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
    /// Untimed iterations before timing (0 to 100000).
    #[arg(long, default_value_t = 3, value_parser = parse_warmup)]
    warmup: usize,
    /// Timed iterations, exactly (the seeds' way), 1 to 10000000; default: adaptive, see
    /// --min-time.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=MAX_ITERS))]
    iters: Option<u64>,
    /// Without --iters: time at least 5 iterations and at least this many seconds (0 to
    /// 3600).
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
    /// Draw throughput against size, one line per device, into this SVG or PNG file.
    #[arg(long, value_name = "FILE.svg|FILE.png")]
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

impl Plan {
    /// Every size on every device, size by size.
    fn grid(&self, sizes: &[usize]) -> Vec<(Device, usize)> {
        sizes
            .iter()
            .flat_map(|&s| self.devices.iter().map(move |&d| (d, s)))
            .collect()
    }
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
        Ok(v) if (0.0..=3600.0).contains(&v) => Ok(v),
        _ => Err(format!("'{s}' is not a number of seconds from 0 to 3600")),
    }
}

/// The most timed iterations `--iters` takes (each keeps a sample).
const MAX_ITERS: u64 = 10_000_000;

/// An integer option within `lo..=hi`, or a usage error naming the range.
fn in_range(s: &str, lo: usize, hi: usize, what: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(v) if (lo..=hi).contains(&v) => Ok(v),
        _ => Err(format!("'{s}' is not {what} from {lo} to {hi}")),
    }
}

/// A matrix size N: up to 2^20, so that 2 N^3 (the FLOP count) fits in 64 bits.
fn parse_matrix_size(s: &str) -> Result<usize, String> {
    in_range(s, 1, 1 << 20, "a matrix size")
}

fn parse_elements(s: &str) -> Result<usize, String> {
    in_range(s, 1, 1 << 40, "an element count")
}

fn parse_warmup(s: &str) -> Result<usize, String> {
    in_range(s, 0, 100_000, "a number of warm-up iterations")
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

fn parse_copy(s: &str) -> Result<CopyKind, String> {
    match s {
        "h2d" => Ok(CopyKind::H2d),
        "d2h" => Ok(CopyKind::D2h),
        "d2d" => Ok(CopyKind::D2d),
        _ => Err(format!("unknown direction '{s}'; expected h2d, d2h or d2d")),
    }
}

/// `4096`, `64KiB`, `1MiB`, `1GiB` (also KB/MB/GB, meaning the same powers of two).
fn parse_bytes(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: usize = num
        .parse()
        .map_err(|_| format!("'{s}' is not a byte count like 4096, 64KiB or 1GiB"))?;
    let mult = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return Err(format!("unknown unit in '{s}'; use KiB, MiB or GiB")),
    };
    match n.checked_mul(mult) {
        Some(b) if (4..=1 << 40).contains(&b) => Ok(b),
        _ => Err(format!("'{s}' must be from 4 bytes to 1 TiB")),
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
            // Copy reports from before the host-memory choice were all pageable.
            let host = match &v["host_memory"] {
                serde_json::Value::Null if v["kind"].is_string() => "pageable".into(),
                h => h.clone(),
            };
            (
                v["device"].clone(),
                v["dtype"].clone(),
                v["size"].clone(),
                v["op"].clone(),
                v["kind"].clone(),
                host,
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
            // "add cpu f32 size 1000"; copies add their direction and host memory.
            let word = |k: &str| v[k].as_str().map(|o| format!("{o} ")).unwrap_or_default();
            out.push(Comparison {
                run: format!(
                    "{}{}{}{} {} size {}",
                    word("op"),
                    word("kind"),
                    word("host_memory"),
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
    points: impl Iterator<Item = (String, usize, f64)>,
) -> std::collections::BTreeMap<String, Vec<crate::plot::Point>> {
    let mut out = std::collections::BTreeMap::<String, Vec<crate::plot::Point>>::new();
    for (name, size, rate) in points {
        out.entry(name).or_default().push((size as f64, rate));
    }
    out
}

/// The devices asked for, or every available one; each checked before any work starts.
fn resolve(devices: Vec<Device>) -> anyhow::Result<Vec<Device>> {
    let devices = if devices.is_empty() {
        distinct_hardware(accel::available_devices())
    } else {
        devices
    };
    for d in &devices {
        d.check()?;
    }
    Ok(devices)
}

/// One device per piece of hardware: XLA's CPU plugin, for one, offers several devices of the
/// same processor, and timing each would only repeat the work; a software GPU adapter is the
/// CPU too. Other devices are all kept.
fn distinct_hardware(devices: Vec<Device>) -> Vec<Device> {
    let first_xla_cpu = accel::xla::platform_device("cpu", 0);
    devices
        .into_iter()
        .filter(|d| !accel::xla::is_cpu_platform(*d) || Some(*d) == first_xla_cpu)
        // A software GPU (lavapipe) is the CPU again, and slow: only when asked for.
        .filter(|d| !matches!(d, Device::Wgpu(i) if accel::wgpu::is_software(*i)))
        .collect()
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
            tf32,
            common,
        } => {
            let plan = common.plan("matmul")?;
            accel::cuda::set_allow_tf32(tf32);
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
            explain,
            common,
        } => {
            let plan = common.plan("elementwise")?;
            elementwise(&plan, op, &sizes, dtype)?;
            explain_peaks(&plan, explain, "memory bandwidth", |d| {
                bench::memory_peak(d)
            })
        }
        Workload::Copy {
            direction,
            sizes,
            host_memory,
            explain,
            common,
        } => {
            let host = match host_memory.as_str() {
                "pageable" => vec![HostMemory::Pageable],
                "pinned" => vec![HostMemory::Pinned],
                _ => vec![HostMemory::Pageable, HostMemory::Pinned],
            };
            let plan = common.plan("copy")?;
            copy(&plan, direction, &sizes, &host)?;
            let what = format!("{direction:?} copies").to_lowercase();
            explain_peaks(&plan, explain, &what, |d| bench::copy_peak(d, direction))
        }
    }
}

/// With `--explain`, prints each device's bandwidth peak and how it is computed.
fn explain_peaks(
    plan: &Plan,
    explain: bool,
    what: &str,
    peak: impl Fn(&Device) -> Option<bench::MemoryPeak>,
) -> anyhow::Result<()> {
    if !explain || plan.format != Format::Text {
        return Ok(());
    }
    for d in &plan.devices {
        match peak(d) {
            Some(p) => out::line(format!("peak of {d} for {what}: {}", p.formula))?,
            None => out::line(format!(
                "peak of {d} for {what}: not derivable here (known for CUDA GPUs: bus width and memory clock, PCIe generation and lanes)"
            ))?,
        }
    }
    Ok(())
}

/// The accessors of [`BenchRow`] that every run type answers from fields of the same names.
macro_rules! same_fields {
    () => {
        fn device(&self) -> Device {
            self.device
        }
        fn stats(&self) -> &bench::Stats {
            &self.stats
        }
        fn device_stats(&self) -> Option<&bench::Stats> {
            self.device_stats.as_ref()
        }
    };
}

/// What one benchmark's run looks like in each output format.
pub trait BenchRow: Serialize {
    /// The `benchmark` of the JSON report and of `--compare` files.
    const BENCHMARK: &'static str;
    /// The run in a few words ("cpu N=2000"), for notes.
    fn label(&self) -> String;
    fn text_row(&self) -> String;
    fn csv_row(&self) -> String;
    /// The device it ran on.
    fn device(&self) -> Device;
    /// The `--plot` line this run belongs to: its device, by default.
    fn series(&self) -> String {
        self.device().to_string()
    }
    /// (size, throughput) for `--plot`.
    fn point(&self) -> (usize, f64);
    fn stats(&self) -> &bench::Stats;
    /// The same iterations by the device's clock, where it has one.
    fn device_stats(&self) -> Option<&bench::Stats>;
    /// (dtype, largest relative error of the checked result).
    fn accuracy(&self) -> (DType, f64);

    /// A wrong answer fails the run, whatever the speed.
    fn check(&self) -> anyhow::Result<()> {
        let (dtype, err) = self.accuracy();
        let tol = bench::tolerance(dtype);
        if err > tol {
            anyhow::bail!(
                "{} on {} ({dtype}) is wrong: max relative error {err:.2e} exceeds the {dtype} tolerance {tol:.0e}",
                Self::BENCHMARK,
                self.label()
            );
        }
        Ok(())
    }
}

impl BenchRow for MatmulRun {
    const BENCHMARK: &'static str = "matmul";
    fn label(&self) -> String {
        format!("{} N={}", self.device, self.size)
    }
    fn text_row(&self) -> String {
        row(self)
    }
    fn csv_row(&self) -> String {
        format!(
            "{},{},{},{},{},{},{},{:e}",
            self.device,
            self.dtype,
            self.size,
            csv_timing(self.warmup, &self.stats, self.first_run_s),
            self.gflop_per_s,
            opt(self.peak.as_ref().map(|p| p.gflop_per_s)),
            opt(self.percent_of_peak),
            self.max_rel_error
        )
    }
    same_fields!();
    fn point(&self) -> (usize, f64) {
        (self.size, self.gflop_per_s)
    }
    fn accuracy(&self) -> (DType, f64) {
        (self.dtype, self.max_rel_error)
    }
}

impl BenchRow for CopyRun {
    const BENCHMARK: &'static str = "copy";
    fn label(&self) -> String {
        format!(
            "{} {:?} {:?} {} bytes",
            self.device, self.kind, self.host_memory, self.size
        )
        .to_lowercase()
    }
    fn text_row(&self) -> String {
        format!(
            "{:<8}{:>10}{:>12}{}{:>10.2}{:>8}{:>8}",
            self.device.to_string(),
            host_side(self).unwrap_or_else(|| "-".into()),
            accel::memory::human_bytes(self.size as u64),
            timing(&self.stats, self.first_run_s),
            self.gb_per_s,
            self.percent_of_peak
                .map_or("-".to_string(), |p| format!("{p:.0}%")),
            if self.max_rel_error == 0.0 {
                "yes"
            } else {
                "NO"
            }
        )
    }
    fn csv_row(&self) -> String {
        format!(
            "{},{},{},{},{},{},{},{}",
            format!("{:?}", self.kind).to_lowercase(),
            self.device,
            host_side(self).unwrap_or_default(),
            self.size,
            csv_timing(self.warmup, &self.stats, self.first_run_s),
            self.gb_per_s,
            opt(self.peak.as_ref().map(|p| p.gb_per_s)),
            opt(self.percent_of_peak)
        )
    }
    same_fields!();
    fn series(&self) -> String {
        match self.host_memory {
            HostMemory::Pinned => format!("{} pinned", self.device),
            HostMemory::Pageable => self.device.to_string(),
        }
    }
    fn point(&self) -> (usize, f64) {
        (self.size, self.gb_per_s)
    }
    fn accuracy(&self) -> (DType, f64) {
        // Copies are exact: any difference is a failure.
        (DType::I32, self.max_rel_error)
    }
}

impl BenchRow for ElementwiseRun {
    const BENCHMARK: &'static str = "elementwise";
    fn label(&self) -> String {
        format!("{} n={}", self.device, self.size)
    }
    fn text_row(&self) -> String {
        format!(
            "{:<8}{:>12}{}{:>10.1}{:>8}{:>11.1e}",
            self.device.to_string(),
            self.size,
            timing(&self.stats, self.first_run_s),
            self.gb_per_s,
            self.percent_of_peak
                .map_or("-".to_string(), |p| format!("{p:.0}%")),
            self.max_rel_error
        )
    }
    fn csv_row(&self) -> String {
        format!(
            "{},{},{},{},{},{},{},{:e}",
            format!("{:?}", self.op).to_lowercase(),
            self.device,
            self.dtype,
            self.size,
            csv_timing(self.warmup, &self.stats, self.first_run_s),
            self.gb_per_s,
            opt(self.percent_of_peak),
            self.max_rel_error
        )
    }
    same_fields!();
    fn point(&self) -> (usize, f64) {
        (self.size, self.gb_per_s)
    }
    fn accuracy(&self) -> (DType, f64) {
        (self.dtype, self.max_rel_error)
    }
}

/// The headings of one benchmark's outputs.
struct Table {
    /// "matmul f32" (the title line adds warm-ups and iterations).
    title: String,
    text_header: String,
    csv_header: String,
    /// (x axis, y axis) of `--plot`.
    axes: (&'static str, &'static str),
}

/// Runs `run` for every size and device of the plan and prints the results in the plan's
/// format, with notes, the comparison and the plot; fails if any answer was wrong.
fn execute<R: BenchRow, C: Copy + std::fmt::Display>(
    plan: &Plan,
    jobs: &[(Device, C)],
    table: Table,
    run: impl Fn(&Device, C) -> anyhow::Result<R>,
) -> anyhow::Result<()> {
    match plan.format {
        Format::Text => {
            out::line(format!(
                "{}: {} warm-ups, {}, each synchronised",
                table.title,
                plan.warmup,
                describe(plan.iters)
            ))?;
            out::line(&table.text_header)?;
        }
        Format::Csv => out::line(&table.csv_header)?,
        Format::Json => {}
    }
    let mut runs = Vec::new();
    for (d, case) in jobs {
        if plan.format != Format::Json {
            out::progress(Some(&format!(
                "[{}/{}] {} {d} {case} ...",
                runs.len() + 1,
                jobs.len(),
                table.title
            )));
        }
        let r = run(d, *case)?;
        out::progress(None);
        match plan.format {
            Format::Text => out::line(r.text_row())?,
            Format::Csv => out::line(r.csv_row())?,
            Format::Json => {}
        }
        runs.push(r);
    }
    if let Some(path) = &plan.plot {
        let (x, y) = table.axes;
        let points = runs.iter().map(|r| {
            let (size, rate) = r.point();
            (r.series(), size, rate)
        });
        crate::plot::draw(path, &table.title, x, y, &series(points))?;
    }
    let comparison = plan
        .baseline
        .as_ref()
        .map(|b| b.compare(&runs))
        .transpose()?;
    match plan.format {
        Format::Json => out::json(
            "bench",
            &Report {
                benchmark: R::BENCHMARK,
                results: &runs,
                comparison,
            },
        )?,
        Format::Text => {
            notes(&runs)?;
            if let (Some(b), Some(c)) = (&plan.baseline, &comparison) {
                b.print(c)?;
            }
        }
        Format::Csv => {}
    }
    check(&runs)
}

fn elementwise(
    plan: &Plan,
    op: ElementwiseOp,
    sizes: &[usize],
    dtype: DType,
) -> anyhow::Result<()> {
    if !dtype.is_float() {
        anyhow::bail!(
            "elementwise benchmarks take a float dtype (f32, f64, f16, bf16), not {dtype}"
        );
    }
    let table = Table {
        title: format!("{op:?} {dtype}").to_lowercase(),
        text_header: format!(
            "{:<8}{:>12}{TIMING_HEADER}{:>10}{:>8}{:>11}",
            "device", "elements", "GB/s", "% peak", "max error"
        ),
        csv_header: format!(
            "op,device,dtype,size,{CSV_TIMING},gb_per_s,percent_of_peak,max_rel_error"
        ),
        axes: ("elements", "GB/s"),
    };
    execute(plan, &plan.grid(sizes), table, |d, size| {
        Ok(bench::elementwise(
            d,
            op,
            size,
            dtype,
            plan.warmup,
            plan.iters,
        )?)
    })
}

/// One copy to time: bytes, and the host memory on the other side.
#[derive(Clone, Copy)]
struct CopyCase(usize, HostMemory);

impl std::fmt::Display for CopyCase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {:?}",
            accel::memory::human_bytes(self.0 as u64),
            self.1
        )
    }
}

/// The host memory of a copy, or None where there is no host side (d2d, the CPU).
fn host_side(r: &CopyRun) -> Option<String> {
    (r.kind != CopyKind::D2d && r.device != Device::Cpu)
        .then(|| format!("{:?}", r.host_memory).to_lowercase())
}

fn copy(plan: &Plan, kind: CopyKind, sizes: &[usize], host: &[HostMemory]) -> anyhow::Result<()> {
    let table = Table {
        title: format!("copy {kind:?}").to_lowercase(),
        text_header: format!(
            "{:<8}{:>10}{:>12}{TIMING_HEADER}{:>10}{:>8}{:>8}",
            "device", "host", "bytes", "GB/s", "% peak", "intact"
        ),
        csv_header: format!(
            "direction,device,host_memory,bytes,{CSV_TIMING},gb_per_s,peak_gb_per_s,percent_of_peak"
        ),
        axes: ("bytes", "GB/s"),
    };
    // Pinned host memory is a CUDA matter, and d2d has no host side.
    let applies = |d: &Device, h: HostMemory| {
        h == HostMemory::Pageable || (kind != CopyKind::D2d && matches!(d, Device::Cuda(_)))
    };
    let mut jobs = Vec::new();
    for &size in sizes {
        for d in &plan.devices {
            for &h in host.iter().filter(|&&h| applies(d, h)) {
                jobs.push((*d, CopyCase(size, h)));
            }
        }
    }
    if jobs.is_empty() {
        anyhow::bail!(
            "nothing to time: pinned host memory applies to h2d and d2h copies on CUDA GPUs, and none was chosen"
        );
    }
    execute(plan, &jobs, table, |d, CopyCase(size, h)| {
        Ok(bench::copy(d, kind, h, size, plan.warmup, plan.iters)?)
    })
}

fn matmul(plan: &Plan, sizes: &[usize], dtype: DType) -> anyhow::Result<()> {
    let table = Table {
        title: format!("matmul {dtype}"),
        text_header: header(),
        csv_header: format!(
            "device,dtype,size,{CSV_TIMING},gflop_per_s,peak_gflop_per_s,percent_of_peak,max_rel_error"
        ),
        axes: ("N", "GFLOP/s"),
    };
    execute(plan, &plan.grid(sizes), table, |d, size| {
        Ok(bench::matmul(d, size, dtype, plan.warmup, plan.iters)?.0)
    })
}

/// A wrong answer fails the run, whatever the speed.
pub fn check<R: BenchRow>(runs: &[R]) -> anyhow::Result<()> {
    runs.iter().try_for_each(R::check)
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
pub fn notes<R: BenchRow>(runs: &[R]) -> anyhow::Result<()> {
    for r in runs {
        if let Some(d) = r.device_stats() {
            out::line(format!(
                "device clock: {}: median {} by {} (wall clock {} includes launch and synchronisation)",
                r.label(),
                out::secs(d.median_s),
                bench::device_timer_name(&r.device()),
                out::secs(r.stats().median_s)
            ))?;
        }
        if let Some(w) = r.stats().noise_warning() {
            out::line(format!("note: {}: {w}", r.label()))?;
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
