//! The run loop: every size on every device of a plan, each printed as it finishes, then
//! the plot, the comparison and the check of the answers.

use accelkit::bench::{
    self, CopyKind, CopyRun, ElementwiseOp, ElementwiseRun, HostBuffer, Iterations, MatmulRun,
    Report,
};
use accelkit::{DType, Device};

use super::compare::Baseline;
use super::output::{self, notes, BenchRow, Dims, Format, CSV_TIMING, TIMING_HEADER};
use super::peers::Peers;
use crate::out;

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

/// The headings of one benchmark's outputs.
struct Table {
    /// "matmul f32" (the title line adds warm-ups and iterations).
    title: String,
    text_header: String,
    csv_header: String,
    /// (x axis, y axis) of `--plot`.
    axes: (&'static str, &'static str),
    /// The width of the text table's size column, where it varies (matmul's MxNxK).
    size_width: usize,
}

/// Runs `run` for every size and device of the plan and prints the results in the plan's
/// format, with notes, the comparison and the plot; fails if any answer was wrong.
fn execute<R: BenchRow, C: Copy + std::fmt::Display>(
    plan: &Plan<R>,
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
    let mut peer_times = Vec::new();
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
            Format::Text => out::line(r.text_row_in(table.size_width))?,
            Format::Csv => out::line(r.csv_row())?,
            Format::Json => {}
        }
        if let Some(p) = &plan.peers {
            if plan.format != Format::Json {
                out::progress(Some(&format!(
                    "[{}/{}] {} {d} {case}: timing it in the other libraries ...",
                    runs.len() + 1,
                    jobs.len(),
                    table.title
                )));
            }
            peer_times.push(p.time(&r, plan.warmup, plan.iters));
            out::progress(None);
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
    let report = Report {
        benchmark: R::BENCHMARK.to_string(),
        comparison: match (&plan.baseline, &plan.peers) {
            (Some(b), _) => Some(b.compare(&runs)),
            (None, Some(p)) => Some(p.comparisons(&runs, &peer_times)),
            (None, None) => None,
        },
        results: runs,
    };
    match plan.format {
        Format::Json => out::json("bench", &report)?,
        Format::Text => {
            notes(&report.results)?;
            if let (Some(b), Some(c)) = (&plan.baseline, &report.comparison) {
                b.print(c)?;
            }
            if let Some(p) = &plan.peers {
                p.print(&report.results, &peer_times)?;
            }
        }
        Format::Csv => {}
    }
    check(&report.results)
}

pub(super) fn elementwise(
    plan: &Plan<ElementwiseRun>,
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
        size_width: 0,
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
struct CopyCase(usize, HostBuffer);

impl std::fmt::Display for CopyCase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {:?}",
            accelkit::memory::human_bytes(self.0 as u64),
            self.1
        )
    }
}

pub(super) fn copy(
    plan: &Plan<CopyRun>,
    kind: CopyKind,
    sizes: &[usize],
    host: &[HostBuffer],
) -> anyhow::Result<()> {
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
        size_width: 0,
    };
    // Pinned host memory is a CUDA matter, and d2d has no host side.
    let applies = |d: &Device, h: HostBuffer| {
        h == HostBuffer::Pageable || (kind != CopyKind::D2d && matches!(d, Device::Cuda(_)))
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

pub(super) fn matmul(
    plan: &Plan<MatmulRun>,
    sizes: &[Dims],
    dtype: DType,
    batch: usize,
    linear: bool,
) -> anyhow::Result<()> {
    let mut title = format!("matmul {dtype}");
    if batch > 1 {
        title += &format!(", batches of {batch} products");
    }
    if linear {
        title += ", B stored N x K and transposed (x @ W.t())";
    }
    let x = match plan.plot {
        Some(_) => plot_axis(sizes)?,
        None => "N",
    };
    let width = output::size_width(sizes);
    let table = Table {
        title,
        text_header: output::header_in(width),
        size_width: width,
        csv_header: format!(
            "device,dtype,size,{CSV_TIMING},gflop_per_s,peak_gflop_per_s,percent_of_peak,max_rel_error,m,n,k,b_transposed"
        ),
        axes: (x, "GFLOP/s"),
    };
    execute(plan, &plan.grid(sizes), table, |d, dims| {
        let it = plan.iters;
        Ok(bench::matmul_shaped(d, batch, dims.0, linear, dtype, plan.warmup, it)?.0)
    })
}

/// `--plot`'s x axis for these sizes: N where all are N x N, M (rows, tokens) where the
/// products differ in M alone; other mixes have no one axis to be drawn on.
fn plot_axis(sizes: &[Dims]) -> anyhow::Result<&'static str> {
    if sizes.iter().all(|d| d.is_square()) {
        return Ok("N");
    }
    let [_, n, k] = sizes[0].0;
    if sizes.iter().any(|d| d.0[1..] != [n, k]) {
        anyhow::bail!(
            "--plot draws throughput against one size: give N sizes, or MxNxK sizes that differ in M alone (rows, tokens), not {}",
            sizes.iter().map(Dims::to_string).collect::<Vec<_>>().join(", ")
        );
    }
    Ok("M (rows of A)")
}

/// A wrong answer fails the run, whatever the speed.
pub fn check<R: BenchRow>(runs: &[R]) -> anyhow::Result<()> {
    runs.iter().try_for_each(R::check)
}

/// The options resolved: devices checked, the earlier report read, before anything runs.
pub(super) struct Plan<R> {
    pub(super) devices: Vec<Device>,
    pub(super) warmup: usize,
    pub(super) iters: Iterations,
    pub(super) format: Format,
    pub(super) baseline: Option<Baseline<R>>,
    /// `--compare torch|numpy`: the libraries each run is timed in again.
    pub(super) peers: Option<Peers>,
    pub(super) plot: Option<std::path::PathBuf>,
}

impl<R> Plan<R> {
    /// Every size on every device, size by size.
    pub(super) fn grid<S: Copy>(&self, sizes: &[S]) -> Vec<(Device, S)> {
        sizes
            .iter()
            .flat_map(|&s| self.devices.iter().map(move |&d| (d, s)))
            .collect()
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
