//! `accel bench`: warmed-up, synchronised benchmarks with their spread, % of peak and a
//! check of the answer. Here: the flags, and their resolution into a [`Plan`] before anything
//! runs; the run loop is in `run`, the text, CSV and JSON outputs in `output`, `--compare`
//! in `compare`.

mod comparable;
mod compare;
mod output;
mod peers;
mod run;

use accelkit::bench::{
    self, CopyKind, CopyRun, ElementwiseOp, ElementwiseRun, HostBuffer, Iterations, MatmulRun,
};
use accelkit::{DType, Device};
use clap::Subcommand;

use crate::out;
use compare::Baseline;
use output::{BenchRow, Dims, Format};
use peers::{Against, Peers};

pub use output::{header, notes, row};
pub use run::check;
use run::Plan;

#[derive(Subcommand)]
pub enum Workload {
    /// N x N by N x N (or M x K by K x N) matrix multiplication on each device.
    Matmul {
        /// Matrix size N (N x N by N x N), or MxNxK (an M x K by a K x N matrix: 32x4096x1024
        /// is a Linear layer from 1024 to 4096 features on 32 tokens) (repeatable); each 1 to
        /// 1048576.
        #[arg(long = "size", value_name = "N|MxNxK", default_values_t = [Dims([2000; 3])],
              value_parser = parse_dims)]
        sizes: Vec<Dims>,
        /// Element type: f32, f64, f16, bf16, i32, i64.
        #[arg(long, default_value = "f32", value_parser = parse_dtype)]
        dtype: DType,
        /// Products per call: a batched matmul of B pairs of N x N matrices (PyTorch's
        /// `torch.bmm`), 1 to 65536.
        #[arg(long, default_value = "1", value_name = "B", value_parser = clap::value_parser!(u64).range(1..=65536))]
        batch: u64,
        /// B stored N x K and multiplied transposed, `x @ W.t()`: a Linear layer's weight
        /// (out x in), as `torch.nn.Linear` and `F.linear` multiply it.
        #[arg(long)]
        linear: bool,
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
        /// add (a + b), scale (a * 2), exp (a.exp()) or sum (a.sum(), a reduction).
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
    /// Device to run on (repeatable); default: every available device that holds the dtype.
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
    /// An earlier run's --json output: show each run's speed-up against it. Or torch, numpy
    /// (comma-separated; --compare alone: each one installed): time each run's work again in
    /// PyTorch and numpy, in a fresh process of ACCEL_PYTHON, else python3 on PATH, right after
    /// accel's run, with the same warm-ups and iterations.
    #[arg(long, value_name = "FILE.json|torch|numpy", num_args = 0..=1,
          default_missing_value = "peers", value_parser = peers::parse_against,
          conflicts_with = "csv")]
    compare: Option<Against>,
    /// Draw throughput against size, one line per device, into this SVG or PNG file.
    #[arg(long, value_name = "FILE.svg|FILE.png")]
    plot: Option<std::path::PathBuf>,
}

impl Common {
    /// The plan of benchmark `R` over tensors of `dtype`, whose report `--compare` must hold.
    fn plan<R: BenchRow>(self, dtype: DType) -> anyhow::Result<Plan<R>> {
        if let Some(p) = &self.plot {
            crate::plot::check_path(p)?;
        }
        let (baseline, peers) = match self.compare {
            Some(Against::Earlier(path)) => (Baseline::load(Some(path))?, None),
            Some(Against::Peers(names)) => (None, Some(Peers::find(&names)?)),
            None => (None, None),
        };
        Ok(Plan {
            baseline,
            peers,
            devices: resolve(self.devices, dtype)?,
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
pub(crate) fn parse_matrix_size(s: &str) -> Result<usize, String> {
    in_range(s, 1, 1 << 20, "a matrix size")
}

/// `N`, or `MxNxK` (also with `X` or spaces around the x), each from 1 to 2^20.
fn parse_dims(s: &str) -> Result<Dims, String> {
    let parts: Vec<&str> = s.split(['x', 'X']).collect();
    let size = |p: &str| in_range(p, 1, 1 << 20, "a matrix size");
    match parts.as_slice() {
        [n] => Ok(Dims([size(n)?; 3])),
        [m, n, k] => Ok(Dims([size(m)?, size(n)?, size(k)?])),
        _ => Err(format!(
            "'{s}' is not a matrix size: N (N x N by N x N) or MxNxK (M x K by K x N), like 2000 or 32x4096x1024"
        )),
    }
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

fn parse_op(s: &str) -> Result<ElementwiseOp, String> {
    match s {
        "add" => Ok(ElementwiseOp::Add),
        "scale" => Ok(ElementwiseOp::Scale),
        "exp" => Ok(ElementwiseOp::Exp),
        "sum" => Ok(ElementwiseOp::Sum),
        _ => Err(format!("unknown op '{s}'; expected add, scale, exp or sum")),
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

pub(crate) fn parse_device(s: &str) -> Result<Device, String> {
    s.parse().map_err(|e: accelkit::Error| e.to_string())
}

fn parse_dtype(s: &str) -> Result<DType, String> {
    s.parse().map_err(|e: accelkit::Error| e.to_string())
}

/// The devices asked for, or every available one that holds `dtype` (a wgpu device holds no
/// f64, bf16 or i64: `--dtype i64` runs on the others instead of failing on it); each checked
/// before any work starts.
fn resolve(devices: Vec<Device>, dtype: DType) -> anyhow::Result<Vec<Device>> {
    let devices = if devices.is_empty() {
        // One device per piece of hardware.
        accelkit::distinct_hardware(&accelkit::available_devices())
            .into_iter()
            .filter(|d| d.supports(dtype))
            .collect()
    } else {
        devices
    };
    for d in &devices {
        d.check()?;
    }
    Ok(devices)
}

pub fn run(w: Workload) -> anyhow::Result<()> {
    match w {
        Workload::Matmul {
            sizes,
            dtype,
            batch,
            linear,
            explain,
            tf32,
            common,
        } => {
            let plan = common.plan::<MatmulRun>(dtype)?;
            accelkit::cuda::set_allow_tf32(tf32);
            run::matmul(&plan, &sizes, dtype, batch as usize, linear)?;
            if explain && plan.format == Format::Text {
                for d in &plan.devices {
                    match bench::peak(d, dtype) {
                        Some(p) => out::line(format!("peak of {d} for {dtype}: {}", p.formula))?,
                        None => out::line(format!(
                            "peak of {d} for {dtype}: unknown (no FMA peak for this dtype, a CPU not in accel's microarchitecture table, or no known clock)"
                        ))?,
                    }
                    if *d == accelkit::Device::Cpu {
                        for (what, k) in bench::cpu_kernels() {
                            out::line(format!("cpu kernel, {what}: {k}"))?;
                        }
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
            let plan = common.plan::<ElementwiseRun>(dtype)?;
            run::elementwise(&plan, op, &sizes, dtype)?;
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
                "pageable" => vec![HostBuffer::Pageable],
                "pinned" => vec![HostBuffer::Pinned],
                _ => vec![HostBuffer::Pageable, HostBuffer::Pinned],
            };
            // Copies move f32 tensors.
            let plan = common.plan::<CopyRun>(DType::F32)?;
            run::copy(&plan, direction, &sizes, &host)?;
            let what = format!("{direction:?} copies").to_lowercase();
            explain_peaks(&plan, explain, &what, |d| bench::copy_peak(d, direction))
        }
    }
}

/// With `--explain`, prints each device's bandwidth peak and how it is computed.
fn explain_peaks<R>(
    plan: &Plan<R>,
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
