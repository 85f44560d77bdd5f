//! Timing done the way the seeds teach: warm up, synchronise the device, then time a fixed
//! number of iterations, and check the answer. Each iteration is timed on its own (with a
//! synchronisation after it) so the spread is known, not only the mean.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::{DType, Device, Error, Result, Tensor};

mod peak;
mod report;
pub use peak::{
    copy_peak, cpu_core, cpu_kernels, cpu_peak, cuda_peak, gpu_memory_peak, measured_cpu_clock_mhz,
    memory_peak, pcie_peak, peak, CopyKind, CpuCore, MemoryPeak, Peak,
};
pub use report::{Comparison, Report};

/// Summary statistics of a set of timings, in seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Number of samples.
    pub samples: usize,
    /// Arithmetic mean.
    pub mean_s: f64,
    /// Median.
    pub median_s: f64,
    /// Fastest sample.
    pub min_s: f64,
    /// Slowest sample.
    pub max_s: f64,
    /// Sample standard deviation (0 for one sample).
    pub stddev_s: f64,
    /// First quartile (linear interpolation, as NumPy's default).
    pub q1_s: f64,
    /// Third quartile.
    pub q3_s: f64,
    /// Interquartile range, q3 - q1.
    pub iqr_s: f64,
    /// 95% bootstrap confidence interval of the median: (low, high).
    pub median_ci95_s: (f64, f64),
    /// Samples outside Tukey's fences (1.5 IQR beyond the quartiles).
    pub outliers: usize,
}

/// The q-quantile of sorted data by linear interpolation between closest ranks.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

fn median_sorted(sorted: &[f64]) -> f64 {
    quantile(sorted, 0.5)
}

/// Resamples drawn for the bootstrap interval; fixed seed, so a report is reproducible.
const BOOTSTRAP_RESAMPLES: usize = 2000;

fn bootstrap_median_ci(sorted: &[f64]) -> (f64, f64) {
    let n = sorted.len();
    let mut rng = crate::base::rng::Rng::seeded(0xB007);
    let mut medians = Vec::with_capacity(BOOTSTRAP_RESAMPLES);
    let mut buf = vec![0.0; n];
    for _ in 0..BOOTSTRAP_RESAMPLES {
        for v in buf.iter_mut() {
            *v = sorted[(rng.next_u64() % n as u64) as usize];
        }
        buf.sort_by(f64::total_cmp);
        medians.push(median_sorted(&buf));
    }
    medians.sort_by(f64::total_cmp);
    (quantile(&medians, 0.025), quantile(&medians, 0.975))
}

impl Stats {
    /// Statistics of `samples` (seconds); `None` when there are none.
    pub fn from_samples(samples: &[f64]) -> Option<Stats> {
        if samples.is_empty() {
            return None;
        }
        let mut s = samples.to_vec();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        let mean = s.iter().sum::<f64>() / n as f64;
        let var = if n > 1 {
            s.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64
        } else {
            0.0
        };
        let (q1, q3) = (quantile(&s, 0.25), quantile(&s, 0.75));
        let iqr = q3 - q1;
        let outliers = s
            .iter()
            .filter(|&&x| x < q1 - 1.5 * iqr || x > q3 + 1.5 * iqr)
            .count();
        Some(Stats {
            samples: n,
            mean_s: mean,
            median_s: median_sorted(&s),
            min_s: s[0],
            max_s: s[n - 1],
            stddev_s: var.sqrt(),
            q1_s: q1,
            q3_s: q3,
            iqr_s: iqr,
            median_ci95_s: bootstrap_median_ci(&s),
            outliers,
        })
    }

    /// IQR relative to the median: how noisy the measurement was.
    pub(crate) fn relative_iqr(&self) -> f64 {
        if self.median_s > 0.0 {
            self.iqr_s / self.median_s
        } else {
            0.0
        }
    }

    /// A warning when the spread is large enough to doubt the numbers, with PyTorch's
    /// `torch.utils.benchmark` thresholds (IQR / median above 0.10, and above 0.25).
    pub fn noise_warning(&self) -> Option<String> {
        let r = self.relative_iqr();
        if r > 0.25 {
            Some(format!(
                "very noisy: IQR is {:.0}% of the median; rerun on a quiet machine",
                r * 100.0
            ))
        } else if r > 0.10 {
            Some(format!("noisy: IQR is {:.0}% of the median", r * 100.0))
        } else {
            None
        }
    }
}

/// How many timed iterations a benchmark runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Iterations {
    /// Exactly this many (the seeds' way: `--iters 10`).
    Fixed(usize),
    /// Until this much time has been measured, with at least `ADAPTIVE_MIN_SAMPLES` and at
    /// most `ADAPTIVE_MAX_SAMPLES` samples.
    Adaptive {
        /// The minimum measured time, in seconds.
        min_time_s: f64,
    },
}

/// Fewest samples an adaptive run takes, so the spread can be estimated.
pub const ADAPTIVE_MIN_SAMPLES: usize = 5;
/// Most samples an adaptive run takes, so tiny kernels end.
pub const ADAPTIVE_MAX_SAMPLES: usize = 10_000;

/// Runs `step` (which returns one sample, in seconds) as `iters` says.
fn collect(iters: Iterations, mut step: impl FnMut() -> Result<f64>) -> Result<Vec<f64>> {
    let mut samples = Vec::new();
    match iters {
        Iterations::Fixed(n) => {
            for _ in 0..n.max(1) {
                samples.push(step()?);
            }
        }
        Iterations::Adaptive { min_time_s } => {
            let mut total = 0.0;
            while samples.len() < ADAPTIVE_MIN_SAMPLES
                || (total < min_time_s && samples.len() < ADAPTIVE_MAX_SAMPLES)
            {
                let t = step()?;
                total += t;
                samples.push(t);
            }
        }
    }
    Ok(samples)
}

/// Times one step both ways: wall clock around the step and a synchronisation, and the
/// device's own clock (CUDA events) around the queued work where the device has one.
fn timed<T>(device: &Device, f: impl FnOnce() -> Result<T>) -> Result<(T, f64, Option<f64>)> {
    let start = crate::backend::dispatch::record_event(*device)?;
    let t = Instant::now();
    let out = f()?;
    let end = crate::backend::dispatch::record_event(*device)?;
    device.synchronize()?;
    let wall = t.elapsed().as_secs_f64();
    let dev = match (start, end) {
        (Some(s), Some(e)) => Some(e.seconds_since(&s)?),
        _ => None,
    };
    Ok((out, wall, dev))
}

/// What [`measure`] found: the last result, the cold first run and the warm statistics.
struct Measured<T> {
    last: T,
    first_run_s: f64,
    stats: Stats,
    device_stats: Option<Stats>,
}

/// The method every benchmark shares: one cold run (synchronised, timed apart), `warmup`
/// untimed runs, then the timed iterations, each by wall clock and by the device's clock.
/// The previous result is dropped before each run, so at most one is alive.
fn measure<T>(
    device: &Device,
    warmup: usize,
    iters: Iterations,
    mut run: impl FnMut() -> Result<T>,
) -> Result<Measured<T>> {
    device.synchronize()?;
    let t0 = Instant::now();
    let mut last = Some(run()?);
    device.synchronize()?;
    let first_run_s = t0.elapsed().as_secs_f64();
    for _ in 0..warmup {
        drop(last.take());
        last = Some(run()?);
    }
    device.synchronize()?;
    let mut dev_samples = Vec::new();
    let samples = collect(iters, || {
        drop(last.take());
        let (out, wall, dev) = timed(device, &mut run)?;
        last = Some(out);
        dev_samples.extend(dev);
        Ok(wall)
    })?;
    Ok(Measured {
        last: last.expect("at least one run"),
        first_run_s,
        stats: Stats::from_samples(&samples).expect("at least one iteration"),
        device_stats: Stats::from_samples(&dev_samples),
    })
}

/// Which clock `device_stats` comes from, for reports.
pub fn device_timer_name(device: &Device) -> &'static str {
    crate::backend::dispatch::timer_name(*device)
}

/// One matmul benchmark: the cold first run, then the timed warm iterations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatmulRun {
    /// Where it ran.
    #[serde(deserialize_with = "report::device")]
    pub device: Device,
    /// Element type.
    pub dtype: DType,
    /// Matrix size N of an N x N by N x N product; M (A's rows) where `shape` is given.
    pub size: usize,
    /// (M, N, K) of an M x K by K x N product other than N x N by N x N; absent for those.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<[usize; 3]>,
    /// B was stored N x K and multiplied transposed, `x @ W.t()` (torch.nn.Linear's weight).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub b_transposed: bool,
    /// Products per call: a batched matmul of `batch` pairs (1: one product).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub batch: usize,
    /// Warm-up iterations (not timed).
    pub warmup: usize,
    /// The very first multiplication, synchronised: includes one-time costs (thread pool
    /// start, library loading, compilation).
    pub first_run_s: f64,
    /// The timed iterations.
    pub stats: Stats,
    /// 2 M N K (2 N^3) per product, times `batch`, / median time.
    #[serde(deserialize_with = "report::number_or_null")]
    pub gflop_per_s: f64,
    /// The device's peak for this dtype, where known.
    pub peak: Option<Peak>,
    /// `gflop_per_s` as a percentage of `peak`.
    pub percent_of_peak: Option<f64>,
    /// Largest relative error of 64 sampled entries against an f64 dot product on the host.
    #[serde(deserialize_with = "report::number_or_null")]
    pub max_rel_error: f64,
    /// The same iterations by the device's own clock (CUDA events), where it has one.
    pub device_stats: Option<Stats>,
}

fn one() -> usize {
    1
}

fn is_one(n: &usize) -> bool {
    *n == 1
}

impl MatmulRun {
    /// (M, N, K): A is M x K, B K x N (stored N x K when `b_transposed`).
    pub fn mnk(&self) -> [usize; 3] {
        self.shape.unwrap_or([self.size; 3])
    }
}

/// Times `a @ b` for N x N random operands on `device`.
pub fn matmul(
    device: &Device,
    size: usize,
    dtype: DType,
    warmup: usize,
    iters: Iterations,
) -> Result<(MatmulRun, Tensor)> {
    matmul_batched(device, 1, size, dtype, warmup, iters)
}

/// Times `a @ b` for `batch` pairs of N x N random operands on `device` (one batched call;
/// `batch` = 1 is a plain N x N product). The error is sampled in the first product.
pub fn matmul_batched(
    device: &Device,
    batch: usize,
    size: usize,
    dtype: DType,
    warmup: usize,
    iters: Iterations,
) -> Result<(MatmulRun, Tensor)> {
    matmul_shaped(device, batch, [size; 3], false, dtype, warmup, iters)
}

/// Times `batch` products of an M x K by a K x N matrix of random values on `device`, for
/// `[m, n, k]`; with `b_transposed`, B is stored N x K and multiplied as a transposed view
/// (`x @ W.t()`: a Linear layer, whose weight is out x in). The error is sampled in the first
/// product.
pub fn matmul_shaped(
    device: &Device,
    batch: usize,
    [m, n, k]: [usize; 3],
    b_transposed: bool,
    dtype: DType,
    warmup: usize,
    iters: Iterations,
) -> Result<(MatmulRun, Tensor)> {
    let batched = |dims: [usize; 2]| -> Vec<usize> {
        let lead = if batch == 1 { vec![] } else { vec![batch] };
        lead.into_iter().chain(dims).collect()
    };
    let stored = if b_transposed { [n, k] } else { [k, n] };
    let a = Tensor::randn(0.0, 1.0, batched([m, k]).as_slice(), &Device::Cpu)?.to_dtype(dtype)?;
    let b = Tensor::randn(0.0, 1.0, batched(stored).as_slice(), &Device::Cpu)?.to_dtype(dtype)?;
    timed_product(device, &a, &b, b_transposed, warmup, iters)
}

/// Times `a @ b` on `device` for operands the caller chose: M x K and K x N, or `batch` x M
/// x K and `batch` x K x N (a batched product), of one dtype, on any device (they are copied
/// to `device` first, untimed). Multiplying the same operands on two devices makes their
/// results comparable (`accel` with no arguments compares the CPU's with the accelerator's
/// this way).
pub fn matmul_with(
    device: &Device,
    a: &Tensor,
    b: &Tensor,
    warmup: usize,
    iters: Iterations,
) -> Result<(MatmulRun, Tensor)> {
    timed_product(device, a, b, false, warmup, iters)
}

/// [`matmul_with`] for `b` as stored: multiplied as it is, or (`transposed`) as the view of
/// its last two dimensions swapped, made on `device` after the copy.
fn timed_product(
    device: &Device,
    a: &Tensor,
    b: &Tensor,
    transposed: bool,
    warmup: usize,
    iters: Iterations,
) -> Result<(MatmulRun, Tensor)> {
    let bad_shape = || {
        crate::Error::shape(
            "bench::matmul_with",
            a.shape(),
            b.shape(),
            "the benchmark multiplies an M x K by a K x N matrix (or batch x M x K by batch x K x N)",
        )
    };
    // (products, M, K) of A; B's two dimensions as stored.
    let (batch, m, k, stored) = match (a.dims(), b.dims()) {
        (&[m, k], &[r, c]) => (1, m, k, (r, c)),
        (&[p, m, k], &[q, r, c]) if p == q => (p, m, k, (r, c)),
        _ => return Err(bad_shape()),
    };
    let (kb, n) = if transposed {
        (stored.1, stored.0)
    } else {
        stored
    };
    if kb != k {
        return Err(bad_shape());
    }
    if a.dtype() != b.dtype() {
        return Err(crate::Error::DTypeMismatch {
            op: "bench::matmul_with",
            lhs: a.dtype(),
            rhs: b.dtype(),
        });
    }
    let dtype = a.dtype();
    // Host copies for the error check (the same tensors when they are on the CPU).
    let (a_host, b_host) = (&a.to_device(&Device::Cpu)?, &b.to_device(&Device::Cpu)?);
    let a = a_host.to_device(device)?;
    let b = b_host.to_device(device)?;
    let b = if transposed { b.transpose(-2, -1)? } else { b };
    let Measured {
        last: c,
        first_run_s,
        stats,
        device_stats,
    } = measure(device, warmup, iters, || a.matmul(&b))?;
    let flops = batch as f64 * 2.0 * m as f64 * n as f64 * k as f64;
    let gflop_per_s = flops / stats.median_s / 1e9;
    let peak = peak(device, dtype);
    let percent_of_peak = peak.as_ref().map(|p| 100.0 * gflop_per_s / p.gflop_per_s);
    // The first product's matrix as a 2-d host tensor of `rows` x `cols` (a copy only for a
    // batch); B as multiplied (a transposed view).
    let first = |t: &Tensor, rows: usize, cols: usize| -> Result<Tensor> {
        if batch == 1 {
            return Ok(t.clone());
        }
        let v: Vec<f64> = t.to_vec_f64()?.into_iter().take(rows * cols).collect();
        Tensor::from_vec(v, (rows, cols), &Device::Cpu)
    };
    let b_used = if transposed {
        b_host.transpose(-2, -1)?
    } else {
        b_host.clone()
    };
    let (a1, b1, c1) = (
        first(a_host, m, k)?,
        first(&b_used, k, n)?,
        first(&c, m, n)?,
    );
    let max_rel_error = sampled_error(&a1, &b1, &c1, 64)?;
    let square = m == n && n == k;
    Ok((
        MatmulRun {
            device: *device,
            dtype,
            size: if square { n } else { m },
            shape: (!square).then_some([m, n, k]),
            b_transposed: transposed,
            batch,
            warmup,
            first_run_s,
            stats,
            gflop_per_s,
            peak,
            percent_of_peak,
            max_rel_error,
            device_stats,
        },
        c,
    ))
}

/// The largest error of `samples` entries of `c` against f64 dot products of `a`'s rows and
/// `b`'s columns, relative to the magnitude of the terms (sum of |a_ik b_kj|), so that
/// entries that cancel to near zero do not inflate it.
pub fn sampled_error(a: &Tensor, b: &Tensor, c: &Tensor, samples: usize) -> Result<f64> {
    let (m, k) = (a.dims()[0], a.dims()[1]);
    let n = b.dims()[1];
    if m == 0 || n == 0 {
        return Ok(0.0);
    }
    let (av, bv, cv) = (a.to_vec_f64()?, b.to_vec_f64()?, c.to_vec_f64()?);
    let mut worst = 0.0f64;
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    for _ in 0..samples {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let (i, j) = (
            (state % m as u64) as usize,
            ((state >> 32) % n as u64) as usize,
        );
        let (mut dot, mut mag) = (0.0, 0.0);
        for p in 0..k {
            let t = av[i * k + p] * bv[p * n + j];
            dot += t;
            mag += t.abs();
        }
        let err = (cv[i * n + j] - dot).abs() / mag.max(f64::MIN_POSITIVE);
        worst = worst.max(err);
    }
    Ok(worst)
}

/// The relative error a correct matmul in `dtype` may have, per the above measure.
pub fn tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => 1e-12,
        // TF32 keeps 10 mantissa bits of each input.
        DType::F32 if crate::cuda::allow_tf32() => 5e-3,
        DType::F32 => 1e-4,
        // Inputs are exact in f32; only the output is rounded.
        DType::F16 => 2e-3,
        DType::BF16 => 1e-2,
        DType::I32 | DType::I64 => 0.0,
    }
}

/// An elementwise workload: `add` is `a + b`, `scale` is `a * 2`, `exp` is `a.exp()`, and
/// `sum` the reduction `a.sum()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ElementwiseOp {
    /// `a + b`: reads two tensors, writes one.
    Add,
    /// `a * 2.0`: reads one tensor, writes one.
    Scale,
    /// `a.exp()`: reads one tensor, writes one (bound by arithmetic where the exp is slow).
    Exp,
    /// `a.sum()`: reads one tensor, writes one value.
    Sum,
}

/// One elementwise benchmark.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ElementwiseRun {
    /// Where it ran.
    #[serde(deserialize_with = "report::device")]
    pub device: Device,
    /// Element type.
    pub dtype: DType,
    /// The operation.
    pub op: ElementwiseOp,
    /// Number of elements.
    pub size: usize,
    /// Warm-up iterations (not timed).
    pub warmup: usize,
    /// The first run, synchronised, with its one-time costs.
    pub first_run_s: f64,
    /// The timed iterations.
    pub stats: Stats,
    /// Bytes read and written per iteration / median time, in GB/s (10^9 bytes).
    #[serde(deserialize_with = "report::number_or_null")]
    pub gb_per_s: f64,
    /// Largest relative error of the result against the same arithmetic in f64 on the host.
    #[serde(deserialize_with = "report::number_or_null")]
    pub max_rel_error: f64,
    /// The same iterations by the device's own clock (CUDA events), where it has one.
    pub device_stats: Option<Stats>,
    /// The device's memory bandwidth peak, where known.
    pub peak: Option<MemoryPeak>,
    /// `gb_per_s` as a percentage of `peak`.
    pub percent_of_peak: Option<f64>,
}

/// Times an elementwise op over `size` elements on `device`.
pub fn elementwise(
    device: &Device,
    op: ElementwiseOp,
    size: usize,
    dtype: DType,
    warmup: usize,
    iters: Iterations,
) -> Result<ElementwiseRun> {
    let a_host = Tensor::rand_with(-1.0, 1.0, size, dtype, &Device::Cpu)?;
    let b_host = Tensor::rand_with(-1.0, 1.0, size, dtype, &Device::Cpu)?;
    let a = a_host.to_device(device)?;
    let b = b_host.to_device(device)?;
    let run = || match op {
        ElementwiseOp::Add => a.add(&b),
        ElementwiseOp::Scale => a.mul_scalar(2.0),
        ElementwiseOp::Exp => a.exp(),
        ElementwiseOp::Sum => a.sum_all(),
    };
    let Measured {
        last: c,
        first_run_s,
        stats,
        device_stats,
    } = measure(device, warmup, iters, run)?;
    let tensors = match op {
        ElementwiseOp::Add => 3,
        ElementwiseOp::Scale | ElementwiseOp::Exp => 2,
        ElementwiseOp::Sum => 1,
    };
    let bytes = (tensors * size * dtype.size_in_bytes()) as f64;
    let (av, bv, cv) = (a_host.to_vec_f64()?, b_host.to_vec_f64()?, c.to_vec_f64()?);
    let rel = |got: f64, want: f64| (got - want).abs() / want.abs().max(1e-30);
    let max_rel_error = if op == ElementwiseOp::Sum {
        // Against the sum of every element in f64, relative to the sum of their sizes (the
        // sum of values in [-1, 1] is near 0; a sum in f32 or less is off by a few units of
        // that).
        let want: f64 = av.iter().sum();
        let scale: f64 = av.iter().map(|x| x.abs()).sum();
        (cv[0] - want).abs() / scale.max(1e-30)
    } else {
        let mut worst = 0.0f64;
        for i in (0..size).step_by((size / 4096).max(1)) {
            let want = match op {
                ElementwiseOp::Add => av[i] + bv[i],
                ElementwiseOp::Scale => av[i] * 2.0,
                _ => av[i].exp(),
            };
            worst = worst.max(rel(cv[i], want));
        }
        worst
    };
    let gb_per_s = bytes / stats.median_s / 1e9;
    let peak = memory_peak(device);
    Ok(ElementwiseRun {
        percent_of_peak: peak.as_ref().map(|p| 100.0 * gb_per_s / p.gb_per_s),
        peak,
        gb_per_s,
        device: *device,
        dtype,
        op,
        size,
        warmup,
        first_run_s,
        stats,
        max_rel_error,
        device_stats,
    })
}

/// The host side of a copy benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HostBuffer {
    /// Ordinary memory (`torch.empty(n)`): CUDA copies stage it through pinned buffers.
    #[default]
    Pageable,
    /// Page-locked memory (`pin_memory()`): one DMA, no staging. CUDA devices only.
    Pinned,
}

/// One copy benchmark. On the CPU device every direction is a host memcpy, the baseline the
/// others are compared with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CopyRun {
    /// The device copied to or from.
    #[serde(deserialize_with = "report::device")]
    pub device: Device,
    /// Direction.
    pub kind: CopyKind,
    /// The host memory copied from or to (pageable for d2d, which has no host side). Reports
    /// from before the choice existed have none: their copies were all pageable.
    #[serde(default)]
    pub host_memory: HostBuffer,
    /// Bytes per copy.
    pub size: usize,
    /// Always u8 bytes moved as f32 elements (so `--compare` keys match).
    pub dtype: DType,
    /// Warm-up iterations (not timed).
    pub warmup: usize,
    /// The first copy, synchronised: includes allocating the pool and staging buffers.
    pub first_run_s: f64,
    /// The timed iterations.
    pub stats: Stats,
    /// Bytes moved / median time, GB/s (10^9 bytes); a device-to-device copy counts the
    /// bytes once (PyTorch and bandwidthTest count them so too).
    #[serde(deserialize_with = "report::number_or_null")]
    pub gb_per_s: f64,
    /// The link's or memory's peak for this copy, where it can be derived (CUDA GPUs).
    pub peak: Option<MemoryPeak>,
    /// `gb_per_s` as a percentage of `peak`.
    pub percent_of_peak: Option<f64>,
    /// 0 when the copy arrived intact (checked element by element, sampled), else 1.
    pub max_rel_error: f64,
    /// The same iterations by the device's own clock (CUDA events), where it has one.
    pub device_stats: Option<Stats>,
}

/// Times copies of `bytes` (rounded down to whole f32 elements) in direction `kind`, from or
/// to `host` memory (pinned host memory needs a CUDA device).
pub fn copy(
    device: &Device,
    kind: CopyKind,
    host_memory: HostBuffer,
    bytes: usize,
    warmup: usize,
    iters: Iterations,
) -> Result<CopyRun> {
    let pinned = host_memory == HostBuffer::Pinned && kind != CopyKind::D2d;
    if pinned && !matches!(device, Device::Cuda(_)) {
        return Err(Error::invalid(
            "copy benchmark",
            format!("pinned host memory is for CUDA GPUs; {device} copies pageable memory"),
        ));
    }
    let n = (bytes / 4).max(1);
    let mut host = Tensor::arange(0f32, n as f32, &Device::Cpu)?;
    if pinned {
        host = host.pin_memory()?;
    }
    let on_device = host.to_device(device)?;
    let run = || match kind {
        CopyKind::H2d => host.to_device(device).and_then(|t| {
            if *device == Device::Cpu {
                t.copy()
            } else {
                Ok(t)
            }
        }),
        CopyKind::D2h if pinned => on_device.pin_memory(),
        CopyKind::D2h => on_device.to_device(&Device::Cpu).and_then(|t| {
            if *device == Device::Cpu {
                t.copy()
            } else {
                Ok(t)
            }
        }),
        CopyKind::D2d => on_device.copy(),
    };
    let Measured {
        last: c,
        first_run_s,
        stats,
        device_stats,
    } = measure(device, warmup, iters, run)?;
    let got = c.to_vec1::<f32>()?;
    let step = (n / 4096).max(1);
    let intact = got.len() == n
        && (0..n)
            .step_by(step)
            .chain([n - 1])
            .all(|i| got[i] == i as f32);
    let gb_per_s = (n * 4) as f64 / stats.median_s / 1e9;
    let peak = copy_peak(device, kind);
    Ok(CopyRun {
        device: *device,
        kind,
        host_memory: if pinned {
            HostBuffer::Pinned
        } else {
            HostBuffer::Pageable
        },
        size: n * 4,
        dtype: DType::F32,
        warmup,
        first_run_s,
        gb_per_s,
        stats,
        percent_of_peak: peak.as_ref().map(|p| 100.0 * gb_per_s / p.gb_per_s),
        peak,
        max_rel_error: if intact { 0.0 } else { 1.0 },
        device_stats,
    })
}
