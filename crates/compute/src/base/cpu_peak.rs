//! Peaks: what hardware could do at most, with the formula, for the "% peak" columns. Here
//! the values and what the host itself decides: the CPU's microarchitecture table and the
//! clock measured under load, and the formulas for memory and PCIe bandwidth. Each backend
//! turns its devices' capabilities into a peak (`Backend::matmul_peak`): NVIDIA's per-SM
//! rates live with the CUDA backend (`cuda_peak` in `backend/cuda/gpu_peak.rs`).

use serde::{Deserialize, Serialize};

use crate::DType;

/// The theoretical peak of a device for a dtype, with the formula that gives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Peak {
    /// GFLOP/s.
    pub gflop_per_s: f64,
    /// How it was computed, with the numbers.
    pub formula: String,
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

/// What one core of a known microarchitecture computes per clock cycle.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuCore {
    /// The row of the table that applied (`Zen 5: two 512-bit FMA units`).
    pub row: &'static str,
    /// f32 flops per cycle per core (FMA units x lanes x 2).
    pub f32_flops: f64,
    /// f64 flops per cycle per core.
    pub f64_flops: f64,
    /// bf16 flops per cycle per core on the vector units: twice f32 where AVX512_BF16's pair
    /// dot products (`vdpbf16ps`) run at the f32 FMA's rate, else the f32 rate (converted to
    /// f32).
    pub bf16_flops: f64,
    /// f16 flops per cycle per core on the vector units: twice f32 where AVX512-FP16 multiplies
    /// and adds in f16 (32 lanes a 512-bit FMA), else the f32 rate (converted to f32).
    pub f16_flops: f64,
    /// bf16 flops per cycle per core on the AMX tile unit (TMUL), where the CPU has AMX-BF16
    /// (Xeon from Sapphire Rapids on): 1024. Source: Intel's Optimization Reference Manual,
    /// AMX chapter: one `tdpbf16ps` (a 16x16 f32 tile += 16x32 by 32x16 bf16, 8192
    /// multiply-adds) issues every 16 cycles.
    pub amx_bf16_flops: Option<f64>,
    /// f16 flops per cycle per core on the tile unit with AMX-FP16 (`tdpfp16ps`, Granite Rapids
    /// on): the bf16 rate.
    pub amx_f16_flops: Option<f64>,
    /// int8 operations (a multiply-add is two) per cycle per core with AMX-INT8: 2048
    /// (`tdpbssd`: 16x16 i32 += 16x64 by 64x16 int8, 16384 multiply-adds every 16 cycles).
    pub amx_int8_ops: Option<f64>,
}

/// bf16 flops per cycle per core of AMX's tile unit ([`CpuCore::amx_bf16_flops`]).
const AMX_BF16_FLOPS: f64 = 1024.0;

/// The microarchitecture table: FMA units and their width per core, by vendor, family and
/// model (CPUID), for the cores accel's kernels use. `None` for CPUs not in it: their peak is
/// unknown rather than guessed. Zen 4 runs a 512-bit FMA as two 256-bit halves (the same 32
/// f32 flops per cycle as AVX2); Zen 5 on desktop and server has full 512-bit units, its
/// mobile parts do not; Intel's client cores with AVX-512 have one 512-bit unit, its Xeon
/// Scalable cores two (one on some Bronze and Silver parts). An Intel core with AVX512-FP16 is
/// a Sapphire Rapids or newer Xeon whatever model it reports: a VM may report another (a
/// Sapphire Rapids host measured here said model 0xa7, Rocket Lake's, and ran 136 % of the
/// client row's peak).
pub fn cpu_core(info: &crate::base::system::CpuInfo) -> Option<CpuCore> {
    let has = |f: &str| info.simd.iter().any(|s| s == f);
    let bf16_dot = has("avx512bf16");
    let (fp16, amx_bf16) = (has("avx512fp16"), has("amx-bf16"));
    let core = |row, f32_flops: f64, dot: bool| CpuCore {
        row,
        f32_flops,
        f64_flops: f32_flops / 2.0,
        bf16_flops: if dot { 2.0 * f32_flops } else { f32_flops },
        f16_flops: if fp16 { 2.0 * f32_flops } else { f32_flops },
        amx_bf16_flops: amx_bf16.then_some(AMX_BF16_FLOPS),
        amx_f16_flops: (amx_bf16 && has("amx-fp16")).then_some(AMX_BF16_FLOPS),
        amx_int8_ops: has("amx-int8").then_some(2.0 * AMX_BF16_FLOPS),
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
            _ if has("avx512f") && has("avx512fp16") => Some(core(
                "Xeon Scalable, Sapphire Rapids or newer (AVX512-FP16): two 512-bit FMA units",
                64.0,
                bf16_dot,
            )),
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

/// A CPU's peak for `dtype`: cores used x clock x flops per cycle per core of the fastest
/// unit the CPU has for that dtype ([`cpu_core`]: the FMA units, or AMX's tile unit for bf16
/// and f16 where it has one), so that no program on it, accel's or another library's, can
/// reach more than 100%. Where accel's own kernel runs on a slower unit (its f16 kernel in
/// f32 on a CPU without AMX-FP16), the formula says so and gives that unit's figure. accel's
/// bf16 and f16 kernels run on AMX's tiles where the CPU has them (and the OS gives them to
/// the process: where it does not, this host's peak says so). Cores used are the compute threads, at most the physical
/// cores (SMT siblings share FMA units). Integer matmul has no FMA peak and gives `None`, as
/// do CPUs not in the table and a CPU without a known clock. The clock is
/// `info.frequency_mhz`: pass the one measured with [`measured_cpu_clock_mhz`]
/// (`bench::peak` does) rather than the nominal one.
pub fn cpu_peak(info: &crate::base::system::CpuInfo, threads: usize, dtype: DType) -> Option<Peak> {
    peak_for(info, threads, dtype, true)
}

/// As [`cpu_peak`], with `tiles` false where accel's kernel for this dtype (bf16, f16) cannot
/// use AMX's tiles although the CPU has them (the formula then gives the figure of the unit it
/// runs on beside).
fn peak_for(
    info: &crate::base::system::CpuInfo,
    threads: usize,
    dtype: DType,
    tiles: bool,
) -> Option<Peak> {
    let mhz = info.frequency_mhz? as f64;
    let core = cpu_core(info)?;
    // (the machine's best: flops/cycle, dtype, unit), and accel's kernel's where it differs.
    let vector = |flops: f64, what: &'static str| (flops, what, core.row.to_string());
    let amx = |flops: f64, what: &'static str| {
        (
            flops,
            what,
            format!(
                "AMX tiles, 16 cycles a tile product; vector units: {}",
                core.row
            ),
        )
    };
    let ((per_cycle, what, unit), kernel) = match dtype {
        DType::F64 => (vector(core.f64_flops, "f64"), None),
        DType::F32 => (vector(core.f32_flops, "f32"), None),
        DType::F16 => {
            let (best, on_tiles) = match core.amx_f16_flops {
                Some(a) if a > core.f16_flops => (amx(a, "f16"), tiles),
                _ => (vector(core.f16_flops, "f16"), false),
            };
            // Off the tiles accel's f16 kernel converts to f32 and multiplies there.
            let kernel = (!on_tiles && best.0 > core.f32_flops)
                .then_some((core.f32_flops, "f16 kernel computes in f32"));
            (best, kernel)
        }
        DType::BF16 => match core.amx_bf16_flops {
            Some(a) if a > core.bf16_flops => (
                amx(a, "bf16"),
                (!tiles).then_some((
                    core.bf16_flops,
                    "bf16 kernel runs on the vector units here (not AMX)",
                )),
            ),
            _ => (vector(core.bf16_flops, "bf16"), None),
        },
        DType::I32 | DType::I64 => return None,
    };
    let cores = threads.min(info.physical_cores).max(1) as f64;
    let ghz = mhz / 1000.0;
    let g = cores * ghz * per_cycle;
    let mut formula = format!(
        "{cores} cores x {ghz:.3} GHz x {per_cycle} {what} flops/cycle ({unit}) = {g:.1} GFLOP/s"
    );
    if let Some((k, why)) = kernel {
        formula.push_str(&format!(
            "; accel's {why}: {k} flops/cycle = {:.1} GFLOP/s",
            cores * ghz * k
        ));
    }
    Some(Peak {
        gflop_per_s: g,
        formula,
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
            let measure = || {
                // Warm up (the core leaves its idle clock), then take the best of 3.
                add_chain_mhz(20_000);
                (0..3).map(|_| add_chain_mhz(100_000)).fold(0.0, f64::max)
            };
            let mut per_thread: Vec<f64> = if super::threads::parallel() {
                rayon::broadcast(|_| measure())
            } else {
                vec![measure()]
            };
            per_thread.sort_by(f64::total_cmp);
            let mid = per_thread.get(per_thread.len() / 2).copied()?;
            // A figure outside what any x86 core runs at means the chain did not take a cycle
            // an add: no measurement rather than a wrong peak.
            (mid.is_finite() && (100.0..7000.0).contains(&mid)).then_some(mid.round() as u64)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            None
        }
    })
}

/// MHz from `iters` turns of 100 dependent register-register adds (100 cycles a turn; the
/// loop counter runs beside them). Not `add reg, imm`: Intel's cores from Golden Cove on fold
/// chains of immediate adds in the renamer, which read as 24 GHz on a 2.6 GHz Xeon.
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
            "add {x}, {y}",
            ".endr",
            "sub {n}, 1",
            "jnz 2b",
            x = inout(reg) x,
            y = in(reg) std::hint::black_box(1u64),
            n = inout(reg) iters => _,
            options(nomem, nostack),
        );
    }
    std::hint::black_box(x);
    let s = t.elapsed().as_secs_f64();
    iters as f64 * 100.0 / s / 1e6
}

/// This host's CPU peak for matmul in `dtype`, on the threads this process computes with,
/// at the clock measured under load (the formula says which clock it used); `tiles`: whether
/// accel's kernel for `dtype` runs on AMX's tiles in this process (bf16, f16: `matmul::amx`),
/// where the CPU has them.
pub fn host_matmul_peak(dtype: DType, tiles: bool) -> Option<Peak> {
    let mut info = crate::base::system::cpu_info();
    let nominal = info.frequency_mhz;
    let measured = measured_cpu_clock_mhz();
    info.frequency_mhz = measured.or(nominal);
    let mut p = peak_for(&info, super::threads::threads(), dtype, tiles)?;
    p.formula.push_str(&match (measured, nominal) {
        (Some(m), Some(n)) => format!("; clock measured under load ({m} MHz; the OS says {n} MHz)"),
        (Some(m), None) => format!("; clock measured under load ({m} MHz)"),
        _ => "; clock as the OS reports it (not measured here)".to_string(),
    });
    Some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 2-core Intel Xeon (family 6, `model`) at 2.9 GHz with these CPU flags.
    fn xeon(model: u32, simd: &[&str]) -> crate::base::system::CpuInfo {
        crate::base::system::CpuInfo {
            brand: "test".into(),
            logical_cores: 2,
            physical_cores: 2,
            frequency_mhz: Some(2900),
            simd: simd.iter().map(|s| s.to_string()).collect(),
            vendor: "GenuineIntel".into(),
            family: 6,
            model,
        }
    }

    /// An Emerald Rapids Xeon with AMX whose tiles this process may not use (Linux refused
    /// them, or `ACCEL_CPU_KERNEL` caps the kernels): the peak is still the tiles', and the
    /// formula gives what accel's bf16 kernel can reach on the vector units (2 x 2.9 x 128).
    #[test]
    fn bf16_off_the_tiles_gives_the_vector_units_figure_beside() {
        let flags = [
            "avx2",
            "fma",
            "avx512f",
            "avx512bf16",
            "amx-tile",
            "amx-bf16",
        ];
        let info = xeon(0xcf, &flags);
        let off = peak_for(&info, 2, DType::BF16, false).unwrap();
        let on = peak_for(&info, 2, DType::BF16, true).unwrap();
        assert_eq!(off.gflop_per_s, on.gflop_per_s);
        assert!((on.gflop_per_s - 5939.2).abs() < 0.1, "{}", on.formula);
        assert!(
            off.formula.ends_with(
                "accel's bf16 kernel runs on the vector units here (not AMX): 128 flops/cycle \
                 = 742.4 GFLOP/s"
            ),
            "{}",
            off.formula
        );
        assert!(!on.formula.contains("accel's"), "{}", on.formula);
    }

    /// A Granite Rapids Xeon (AMX-FP16): f16's peak is the tiles'; accel's f16 kernel runs
    /// there where this process may use them, else in f32 on the vector units, as the formula
    /// then says (2 x 2.9 x 64).
    #[test]
    fn f16_on_amx_fp16_tiles_or_the_f32_units_beside() {
        let flags = [
            "avx2",
            "fma",
            "avx512f",
            "avx512fp16",
            "amx-tile",
            "amx-bf16",
            "amx-fp16",
        ];
        let info = xeon(0xad, &flags);
        let on = peak_for(&info, 2, DType::F16, true).unwrap();
        let off = peak_for(&info, 2, DType::F16, false).unwrap();
        assert!((on.gflop_per_s - 5939.2).abs() < 0.1, "{}", on.formula);
        assert_eq!(off.gflop_per_s, on.gflop_per_s);
        assert!(!on.formula.contains("accel's"), "{}", on.formula);
        assert!(
            off.formula
                .ends_with("accel's f16 kernel computes in f32: 64 flops/cycle = 371.2 GFLOP/s"),
            "{}",
            off.formula
        );
        // Without AMX-FP16 (Sapphire Rapids) the best is AVX512-FP16, accel's kernel in f32.
        let mut spr = info.clone();
        spr.simd.retain(|f| f != "amx-fp16");
        let p = peak_for(&spr, 2, DType::F16, true).unwrap();
        assert!((p.gflop_per_s - 742.4).abs() < 0.1, "{}", p.formula);
        assert!(
            p.formula.contains("accel's f16 kernel computes in f32"),
            "{}",
            p.formula
        );
    }
}
