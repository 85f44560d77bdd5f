//! How runs are printed: the text table, CSV rows and the JSON report, and the notes under
//! the table.

use accelkit::bench::{self, CopyKind, CopyRun, ElementwiseRun, HostBuffer, MatmulRun};
use accelkit::{DType, Device};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::comparable::Comparable;
use crate::out;

/// The sizes of one matmul: (M, N, K), an M x K by a K x N matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dims(pub [usize; 3]);

impl Dims {
    pub(super) fn is_square(self) -> bool {
        let [m, n, k] = self.0;
        m == n && n == k
    }
}

/// "2000" for N x N by N x N, else "32x4096x1024" (M x N x K).
impl std::fmt::Display for Dims {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let [m, n, k] = self.0;
        if self.is_square() {
            write!(f, "{n}")
        } else {
            write!(f, "{m}x{n}x{k}")
        }
    }
}

/// How results are printed.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Format {
    Text,
    Json,
    Csv,
}

impl Format {
    pub(super) fn of(json: bool, csv: bool) -> Format {
        match (json, csv) {
            (true, _) => Format::Json,
            (_, true) => Format::Csv,
            _ => Format::Text,
        }
    }
}

/// The CSV columns every benchmark shares, after its own leading ones.
pub(super) const CSV_TIMING: &str = "warmup,iters,first_run_s,median_s,mean_s,min_s,max_s,stddev_s,q1_s,q3_s,iqr_s,median_ci95_low_s,median_ci95_high_s,outliers";

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

/// What one benchmark's run looks like in each output format. In JSON it is an entry of the
/// `results` of an [`accelkit::bench::Report`], written and read back (`--compare`) by serde.
pub trait BenchRow: Serialize + DeserializeOwned + Comparable {
    /// The `benchmark` of the JSON report and of `--compare` files.
    const BENCHMARK: &'static str;
    /// The run in a few words ("cpu N=2000"), for notes.
    fn label(&self) -> String;
    fn text_row(&self) -> String;
    /// The text row with its size column `width` wide, where that column's width varies.
    fn text_row_in(&self, _width: usize) -> String {
        self.text_row()
    }
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
        format!("{} {}", self.device, dims(self))
    }
    fn text_row(&self) -> String {
        row(self)
    }
    fn text_row_in(&self, width: usize) -> String {
        row_in(self, width)
    }
    fn csv_row(&self) -> String {
        let [m, n, k] = self.mnk();
        format!(
            "{},{},{},{},{},{},{},{:e},{m},{n},{k},{}",
            self.device,
            self.dtype,
            self.size,
            csv_timing(self.warmup, &self.stats, self.first_run_s),
            self.gflop_per_s,
            opt(self.peak.as_ref().map(|p| p.gflop_per_s)),
            opt(self.percent_of_peak),
            self.max_rel_error,
            self.b_transposed
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
            accelkit::memory::human_bytes(self.size as u64),
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
            HostBuffer::Pinned => format!("{} pinned", self.device),
            HostBuffer::Pageable => self.device.to_string(),
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

/// The host memory of a copy, or None where there is no host side (d2d, the CPU).
fn host_side(r: &CopyRun) -> Option<String> {
    (r.kind != CopyKind::D2d && r.device != Device::Cpu)
        .then(|| format!("{:?}", r.host_memory).to_lowercase())
}

/// The timing columns every benchmark table shares.
pub(super) const TIMING_HEADER: &str =
    "   first run      median    median 95% CI          IQR  outliers";

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
        // Apart from the IQR even when it fills the column ("1535/10000").
        format!(" {}/{}", s.outliers, s.samples),
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
    header_in(6)
}

/// The width of the size column for these sizes: "N" and up to 6 digits, or the longest
/// MxNxK.
pub(super) fn size_width(sizes: &[Dims]) -> usize {
    let widest = sizes.iter().map(|d| d.to_string().len() + 1).max();
    widest.unwrap_or(0).max(6)
}

/// The matmul table's header with its size column `width` wide.
pub(super) fn header_in(width: usize) -> String {
    format!(
        "{:<8}{:>width$}{TIMING_HEADER}{:>10}{:>8}{:>11}",
        "device",
        if width > 6 { "size" } else { "N" },
        "GFLOP/s",
        "% peak",
        "max error"
    )
}

/// "N=2000", or "32x4096x1024" for an M x N x K product.
fn dims(r: &MatmulRun) -> String {
    match r.shape {
        None => format!("N={}", r.size),
        Some([m, n, k]) => format!("{m}x{n}x{k}"),
    }
}

pub fn row(r: &MatmulRun) -> String {
    row_in(r, 6)
}

fn row_in(r: &MatmulRun, width: usize) -> String {
    let size = match r.shape {
        None => r.size.to_string(),
        Some(_) => dims(r),
    };
    format!(
        "{:<8}{size:>width$}{}{:>10.1}{:>8}{:>11.1e}",
        r.device.to_string(),
        timing(&r.stats, r.first_run_s),
        r.gflop_per_s,
        r.percent_of_peak
            .map_or("-".to_string(), |p| format!("{p:.0}%")),
        r.max_rel_error
    )
}
