//! Timing done the way the seeds teach: warm up, synchronise the device, then time a fixed
//! number of iterations, and check the answer. Each iteration is timed on its own (with a
//! synchronisation after it) so the spread is known, not only the mean.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::{DType, Device, Error, Result, Tensor};

mod report;
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
    let mut rng = crate::backend::cpu::rng::Rng::seeded(0xB007);
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
    pub fn relative_iqr(&self) -> f64 {
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

fn wgpu_timestamps(i: usize) -> bool {
    Device::Wgpu(i).caps().is_ok_and(|c| c.timestamp_queries)
}

/// Which clock `device_stats` comes from, for reports.
pub fn device_timer_name(device: &Device) -> &'static str {
    match device {
        Device::Cuda(_) => "cuda events",
        Device::Wgpu(i) if wgpu_timestamps(*i) => "wgpu timestamp queries",
        Device::Xla(_) => "PJRT ready events (host clock at completion)",
        _ => "none (wall clock after synchronize)",
    }
}

/// The theoretical peak of a device for a dtype, with the formula that gives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Peak {
    /// GFLOP/s.
    pub gflop_per_s: f64,
    /// How it was computed, with the numbers.
    pub formula: String,
}

/// The peak floating-point rate of `device` for matmul in `dtype`, where it can be derived.
/// For the CPU see [`cpu_peak`], with the cores this process computes on and the clock
/// measured under load ([`measured_cpu_clock_mhz`]).
pub fn peak(device: &Device, dtype: DType) -> Option<Peak> {
    match device {
        Device::Cpu => {
            let mut info = crate::base::system::cpu_info();
            let nominal = info.frequency_mhz;
            let measured = measured_cpu_clock_mhz();
            info.frequency_mhz = measured.or(nominal);
            let mut p = cpu_peak(&info, rayon::current_num_threads(), dtype)?;
            p.formula.push_str(&match (measured, nominal) {
                (Some(m), Some(n)) => {
                    format!("; clock measured under load ({m} MHz; the OS says {n} MHz)")
                }
                (Some(m), None) => format!("; clock measured under load ({m} MHz)"),
                _ => "; clock as the OS reports it (not measured here)".to_string(),
            });
            Some(p)
        }
        Device::Cuda(_) => {
            let caps = device.caps().ok()?;
            cuda_peak(
                caps.compute_capability?,
                caps.sm_count?,
                caps.max_clock_sm_mhz?,
                dtype,
                crate::cuda::allow_tf32(),
            )
        }
        // XLA's CPU platform computes on this CPU.
        Device::Xla(_) if crate::xla::is_cpu_platform(*device) => peak(&Device::Cpu, dtype),
        Device::Mps | Device::Xla(_) | Device::Wgpu(_) => None,
    }
}

/// A memory system's peak bandwidth, with the formula that gives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryPeak {
    /// GB/s (10^9 bytes).
    pub gb_per_s: f64,
    /// How it was computed, with the numbers.
    pub formula: String,
}

/// A GPU's memory bandwidth: bus width x memory clock x 2 transfers per clock (DDR/HBM).
pub fn gpu_memory_peak(bus_width_bits: u32, memory_clock_mhz: u32) -> MemoryPeak {
    let g = bus_width_bits as f64 / 8.0 * memory_clock_mhz as f64 * 2.0 / 1000.0;
    MemoryPeak {
        gb_per_s: g,
        formula: format!(
            "{bus_width_bits}-bit bus / 8 x {memory_clock_mhz} MHz x 2 transfers per clock = {g:.1} GB/s"
        ),
    }
}

/// Bandwidth of one PCIe lane, one direction, after line encoding, GB/s: generations 1-2
/// use 8b/10b, 3-5 use 128b/130b, 6 sends 242-byte payloads in 256-byte FLITs.
fn pcie_lane_gb_per_s(generation: u32) -> Option<(f64, &'static str)> {
    Some(match generation {
        1 => (2.5 * 8.0 / 10.0 / 8.0, "2.5 GT/s x 8/10"),
        2 => (5.0 * 8.0 / 10.0 / 8.0, "5 GT/s x 8/10"),
        3 => (8.0 * 128.0 / 130.0 / 8.0, "8 GT/s x 128/130"),
        4 => (16.0 * 128.0 / 130.0 / 8.0, "16 GT/s x 128/130"),
        5 => (32.0 * 128.0 / 130.0 / 8.0, "32 GT/s x 128/130"),
        6 => (64.0 * 242.0 / 256.0 / 8.0, "64 GT/s x 242/256"),
        _ => return None,
    })
}

/// A PCIe link's peak in one direction: lanes x transfer rate x encoding / 8 bits. Packet
/// headers take a further 10-20%, so copies reach about 80-90% of it at best.
pub fn pcie_peak(generation: u32, lanes: u32) -> Option<MemoryPeak> {
    let (lane, rate) = pcie_lane_gb_per_s(generation)?;
    let g = lane * lanes as f64;
    Some(MemoryPeak {
        gb_per_s: g,
        formula: format!(
            "PCIe gen{generation} x{lanes}: {lanes} lanes x {rate} / 8 bits = {g:.1} GB/s per direction"
        ),
    })
}

/// The peak of a copy in direction `kind` on `device`, where it can be derived (CUDA GPUs):
/// the PCIe link between host and GPU, or the GPU's memory (a copy within it reads and
/// writes every byte, so its peak in bytes copied is half the memory bandwidth).
pub fn copy_peak(device: &Device, kind: CopyKind) -> Option<MemoryPeak> {
    let Device::Cuda(_) = device else { return None };
    match kind {
        CopyKind::H2d | CopyKind::D2h => {
            let (generation, lanes) = device.caps().ok()?.pcie_max_link?;
            pcie_peak(generation, lanes)
        }
        CopyKind::D2d => memory_peak(device).map(|m| MemoryPeak {
            gb_per_s: m.gb_per_s / 2.0,
            formula: format!(
                "({}) / 2: each byte copied is read once and written once",
                m.formula
            ),
        }),
    }
}

/// The peak memory bandwidth of `device`, where it can be derived (CUDA GPUs).
pub fn memory_peak(device: &Device) -> Option<MemoryPeak> {
    let Device::Cuda(_) = device else { return None };
    let caps = device.caps().ok()?;
    Some(gpu_memory_peak(
        caps.memory_bus_width_bits?,
        caps.max_clock_memory_mhz?,
    ))
}

/// An NVIDIA GPU's peak for matmul in `dtype`: SMs x clock x flops per clock per SM, using
/// the tensor cores' dense rate where cuBLAS uses them (f16, bf16, TF32 when allowed, f64 on
/// A100/H100-class parts) and the CUDA cores' FMA rate otherwise. Known architectures only:
/// compute capability 8.0, 8.6, 8.9, 9.0 and 10.0.
pub fn cuda_peak(
    cc: (u32, u32),
    sm_count: u32,
    clock_mhz: u32,
    dtype: DType,
    tf32: bool,
) -> Option<Peak> {
    // (f32 FMA lanes, tf32 tensor, f16/bf16 tensor, f64) flops per clock per SM.
    let (f32_cores, tf32_tc, half_tc, f64_rate) = match cc {
        (8, 0) => (64.0, 1024.0, 2048.0, 128.0),
        (8, 6) | (8, 7) => (128.0, 512.0, 1024.0, 4.0),
        (8, 9) => (128.0, 512.0, 1024.0, 4.0),
        (9, 0) => (128.0, 2048.0, 4096.0, 256.0),
        (10, 0) => (128.0, 4096.0, 8192.0, 256.0),
        _ => return None,
    };
    let (per_clock, what) = match dtype {
        DType::F32 if tf32 => (tf32_tc, "TF32 tensor-core flops (dense)".to_string()),
        DType::F32 => (2.0 * f32_cores, format!("{f32_cores} FP32 cores x 2 (FMA)")),
        DType::F16 | DType::BF16 => (half_tc, format!("{dtype} tensor-core flops (dense)")),
        DType::F64 => (f64_rate, "FP64 flops".to_string()),
        DType::I32 | DType::I64 => return None,
    };
    let g = sm_count as f64 * clock_mhz as f64 / 1000.0 * per_clock;
    Some(Peak {
        gflop_per_s: g,
        formula: format!(
            "{sm_count} SMs x {:.3} GHz x {per_clock} flops/clock/SM ({what}, compute capability {}.{}) = {:.1} TFLOP/s",
            clock_mhz as f64 / 1000.0,
            cc.0,
            cc.1,
            g / 1000.0
        ),
    })
}

/// What one core of a known microarchitecture computes per clock cycle.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuCore {
    /// The row of the table that applied (`Zen 5: two 512-bit FMA units`).
    pub row: &'static str,
    /// f32 flops per cycle per core (FMA units x lanes x 2).
    pub f32_flops: f64,
    /// f64 flops per cycle per core.
    pub f64_flops: f64,
    /// bf16 flops per cycle per core: twice f32 where AVX512_BF16's pair dot products
    /// (`vdpbf16ps`) run at the f32 FMA's rate, else the f32 rate (converted to f32).
    pub bf16_flops: f64,
}

/// The microarchitecture table: FMA units and their width per core, by vendor, family and
/// model (CPUID), for the cores accel's kernels use. `None` for CPUs not in it: their peak is
/// unknown rather than guessed. Zen 4 runs a 512-bit FMA as two 256-bit halves (the same 32
/// f32 flops per cycle as AVX2); Zen 5 on desktop and server has full 512-bit units, its
/// mobile parts do not; Intel's client cores with AVX-512 have one 512-bit unit, its Xeon
/// Scalable cores two (one on some Bronze and Silver parts).
pub fn cpu_core(info: &crate::base::system::CpuInfo) -> Option<CpuCore> {
    let has = |f: &str| info.simd.iter().any(|s| s == f);
    let bf16_dot = has("avx512bf16");
    let core = |row, f32_flops: f64, dot: bool| CpuCore {
        row,
        f32_flops,
        f64_flops: f32_flops / 2.0,
        bf16_flops: if dot { 2.0 * f32_flops } else { f32_flops },
    };
    let (f, m) = (info.family, info.model);
    match info.vendor.as_str() {
        "AuthenticAMD" | "HygonGenuine" => match f {
            0x17 if m < 0x30 => Some(core("Zen / Zen+: two 128-bit FMA units", 16.0, false)),
            0x17 => Some(core("Zen 2: two 256-bit FMA units", 32.0, false)),
            0x19 if matches!(m, 0x10..=0x1f | 0x60..=0x7f | 0xa0..=0xaf) => Some(core(
                "Zen 4: two 256-bit FMA units (a 512-bit FMA runs as two halves)",
                32.0,
                bf16_dot,
            )),
            0x19 => Some(core("Zen 3: two 256-bit FMA units", 32.0, false)),
            0x1a if matches!(m, 0x20..=0x2f | 0x60..=0x6f) => Some(core(
                "Zen 5 (mobile): 256-bit FMA datapaths (a 512-bit FMA runs as two halves)",
                32.0,
                bf16_dot,
            )),
            0x1a if has("avx512f") => Some(core("Zen 5: two 512-bit FMA units", 64.0, bf16_dot)),
            _ => None,
        },
        "GenuineIntel" if f == 6 => match m {
            0x55 | 0x6a | 0x6c | 0x8f | 0xcf | 0xad | 0xae if has("avx512f") => Some(core(
                "Xeon Scalable: two 512-bit FMA units (one on some Bronze/Silver parts)",
                64.0,
                bf16_dot,
            )),
            0x66 | 0x7d | 0x7e | 0x8c | 0x8d | 0xa7 => Some(core(
                "Intel client core with AVX-512: one 512-bit (or two 256-bit) FMA units",
                32.0,
                false,
            )),
            0x3c | 0x3f | 0x45 | 0x46 | 0x3d | 0x47 | 0x4f | 0x56 | 0x4e | 0x5e | 0x8e | 0x9e
            | 0xa5 | 0xa6 | 0x97 | 0x9a | 0xb7 | 0xba | 0xbf
                if has("fma") =>
            {
                Some(core(
                    "Intel core, Haswell to Raptor Lake (P-cores): two 256-bit FMA units",
                    32.0,
                    false,
                ))
            }
            _ => None,
        },
        "Apple" => Some(core(
            "Apple M-series: four 128-bit NEON FMA units",
            32.0,
            false,
        )),
        _ => None,
    }
}

/// A CPU's peak: cores used x clock x flops per cycle per core from the microarchitecture
/// table ([`cpu_core`]). Cores used are the compute threads, at most the physical cores (SMT
/// siblings share FMA units). Integer matmul has no FMA peak and gives `None`, as do CPUs not
/// in the table and a CPU without a known clock. The clock is `info.frequency_mhz`: pass the
/// one measured with [`measured_cpu_clock_mhz`] ([`peak`] does) rather than the nominal one.
pub fn cpu_peak(info: &crate::base::system::CpuInfo, threads: usize, dtype: DType) -> Option<Peak> {
    let mhz = info.frequency_mhz? as f64;
    let core = cpu_core(info)?;
    let (per_cycle, what) = match dtype {
        DType::F64 => (core.f64_flops, "f64"),
        DType::F32 | DType::F16 => (core.f32_flops, "f32"),
        DType::BF16 => (core.bf16_flops, "bf16"),
        DType::I32 | DType::I64 => return None,
    };
    let cores = threads.min(info.physical_cores).max(1) as f64;
    let g = cores * mhz / 1000.0 * per_cycle;
    Some(Peak {
        gflop_per_s: g,
        formula: format!(
            "{cores} cores x {:.3} GHz x {per_cycle} {what} flops/cycle ({}) = {g:.1} GFLOP/s",
            mhz / 1000.0,
            core.row,
        ),
    })
}

/// The clock the CPU's cores sustain while all `threads` run, in MHz: each thread times a
/// chain of dependent integer adds (one per cycle on every x86-64 core), all at once, and the
/// median is taken. A VM's nominal clock is not what runs (numpy once reached 117% of a
/// nominal peak). Measured once per process (about 40 ms); `None` off x86-64.
pub fn measured_cpu_clock_mhz() -> Option<u64> {
    static M: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *M.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            let mut per_thread: Vec<f64> = rayon::broadcast(|_| {
                // Warm up (the core leaves its idle clock), then take the best of 3.
                add_chain_mhz(20_000);
                (0..3).map(|_| add_chain_mhz(100_000)).fold(0.0, f64::max)
            });
            per_thread.sort_by(f64::total_cmp);
            let mid = per_thread.get(per_thread.len() / 2).copied()?;
            (mid.is_finite() && mid > 100.0).then_some(mid.round() as u64)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            None
        }
    })
}

/// MHz from `iters` turns of 100 dependent adds (100 cycles a turn; the loop counter runs
/// beside them).
#[cfg(target_arch = "x86_64")]
fn add_chain_mhz(iters: u64) -> f64 {
    let t = std::time::Instant::now();
    let mut x: u64 = 0;
    // SAFETY: register arithmetic only: no memory access, no stack use; both registers are
    // declared as in/out operands, and the flags are clobbered (the default for asm!).
    unsafe {
        std::arch::asm!(
            "2:",
            ".rept 100",
            "add {x}, 1",
            ".endr",
            "sub {n}, 1",
            "jnz 2b",
            x = inout(reg) x,
            n = inout(reg) iters => _,
            options(nomem, nostack),
        );
    }
    std::hint::black_box(x);
    let s = t.elapsed().as_secs_f64();
    iters as f64 * 100.0 / s / 1e6
}

/// The CPU matmul kernels in use (f32, f64, bf16: the micro-kernel, its tile and blocking)
/// and the caches the blocking was derived from.
pub fn cpu_kernels() -> Vec<(&'static str, String)> {
    crate::backend::cpu::matmul::describe()
}

/// One matmul benchmark: the cold first run, then the timed warm iterations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatmulRun {
    /// Where it ran.
    #[serde(deserialize_with = "report::device")]
    pub device: Device,
    /// Element type.
    pub dtype: DType,
    /// Matrix size N (N x N by N x N).
    pub size: usize,
    /// Products per call: a batched matmul of `batch` N x N pairs (1: one product).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub batch: usize,
    /// Warm-up iterations (not timed).
    pub warmup: usize,
    /// The very first multiplication, synchronised: includes one-time costs (thread pool
    /// start, library loading, compilation).
    pub first_run_s: f64,
    /// The timed iterations.
    pub stats: Stats,
    /// 2 N^3 / median time.
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
    let shape: Vec<usize> = if batch == 1 {
        vec![size, size]
    } else {
        vec![batch, size, size]
    };
    let a_host = Tensor::randn(0.0, 1.0, shape.as_slice(), &Device::Cpu)?.to_dtype(dtype)?;
    let b_host = Tensor::randn(0.0, 1.0, shape.as_slice(), &Device::Cpu)?.to_dtype(dtype)?;
    let a = a_host.to_device(device)?;
    let b = b_host.to_device(device)?;
    let Measured {
        last: c,
        first_run_s,
        stats,
        device_stats,
    } = measure(device, warmup, iters, || a.matmul(&b))?;
    let flops = batch as f64 * 2.0 * (size as f64).powi(3);
    let gflop_per_s = flops / stats.median_s / 1e9;
    let peak = peak(device, dtype);
    let percent_of_peak = peak.as_ref().map(|p| 100.0 * gflop_per_s / p.gflop_per_s);
    let first = |t: &Tensor| -> Result<Tensor> {
        if batch == 1 {
            return Ok(t.clone());
        }
        let v: Vec<f64> = t.to_vec_f64()?.into_iter().take(size * size).collect();
        Tensor::from_vec(v, (size, size), &Device::Cpu)
    };
    let max_rel_error = sampled_error(&first(&a_host)?, &first(&b_host)?, &first(&c)?, 64)?;
    Ok((
        MatmulRun {
            device: *device,
            dtype,
            size,
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

/// An elementwise workload: `add` is `a + b`, `scale` is `a * 2`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ElementwiseOp {
    /// `a + b`: reads two tensors, writes one.
    Add,
    /// `a * 2.0`: reads one tensor, writes one.
    Scale,
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
    };
    let Measured {
        last: c,
        first_run_s,
        stats,
        device_stats,
    } = measure(device, warmup, iters, run)?;
    let tensors = match op {
        ElementwiseOp::Add => 3,
        ElementwiseOp::Scale => 2,
    };
    let bytes = (tensors * size * dtype.size_in_bytes()) as f64;
    let (av, bv, cv) = (a_host.to_vec_f64()?, b_host.to_vec_f64()?, c.to_vec_f64()?);
    let mut max_rel_error = 0.0f64;
    for i in (0..size).step_by((size / 4096).max(1)) {
        let want = match op {
            ElementwiseOp::Add => av[i] + bv[i],
            ElementwiseOp::Scale => av[i] * 2.0,
        };
        max_rel_error = max_rel_error.max((cv[i] - want).abs() / want.abs().max(1e-30));
    }
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

/// The direction of a copy benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CopyKind {
    /// Host memory to the device (`x.to(device)`).
    H2d,
    /// Device memory to the host (`x.cpu()`), synchronous.
    D2h,
    /// Within the device (`x.clone()`).
    D2d,
}

/// The host side of a copy benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HostMemory {
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
    pub host_memory: HostMemory,
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
    host_memory: HostMemory,
    bytes: usize,
    warmup: usize,
    iters: Iterations,
) -> Result<CopyRun> {
    let pinned = host_memory == HostMemory::Pinned && kind != CopyKind::D2d;
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
            HostMemory::Pinned
        } else {
            HostMemory::Pageable
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
