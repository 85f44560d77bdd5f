//! The host: CPU load and RAM, this process's resident memory (psutil's role in the seeds).

use std::time::Duration;

use serde::Serialize;
use sysinfo::{CpuRefreshKind, MemoryRefreshKind, ProcessesToUpdate, RefreshKind, System};

/// The host's facts could not be read (sysinfo found no `/proc`, or the OS refused).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemError {
    /// What the operating system said.
    pub detail: String,
}

impl std::fmt::Display for SystemError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot read host information: {}", self.detail)
    }
}

impl std::error::Error for SystemError {}

type Result<T> = std::result::Result<T, SystemError>;

/// Folders the NVIDIA driver installs `libcuda.so.1` and `libnvidia-ml.so.1` into, searched
/// after the loader's own path: Debian/Ubuntu (x86-64, arm64), Fedora/RHEL, other
/// distributions, WSL, and the NVIDIA container toolkit.
pub const NVIDIA_DRIVER_DIRS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/lib/wsl/lib",
    "/usr/local/nvidia/lib64",
];

fn system(refresh: RefreshKind) -> Result<System> {
    System::new_with_specifics(refresh).map_err(|e| SystemError {
        detail: e.to_string(),
    })
}

/// Host RAM, in bytes (`psutil.virtual_memory()`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct HostMemory {
    /// Installed RAM.
    pub total_bytes: u64,
    /// In use by all processes.
    pub used_bytes: u64,
    /// Available to new allocations without swapping.
    pub available_bytes: u64,
    /// Swap space.
    pub swap_total_bytes: u64,
    /// Swap in use.
    pub swap_used_bytes: u64,
}

/// Facts about the host CPU.
#[derive(Debug, Clone, Serialize)]
pub struct CpuInfo {
    /// Model name ("AMD EPYC 7B13").
    pub brand: String,
    /// Logical cores the OS schedules on.
    pub logical_cores: usize,
    /// Physical cores (logical ones share their execution units under SMT).
    pub physical_cores: usize,
    /// Current clock of the first core, where the OS reports it.
    pub frequency_mhz: Option<u64>,
    /// Vector extensions the kernels use, as detected at run time.
    pub simd: Vec<String>,
    /// CPUID's vendor (`AuthenticAMD`, `GenuineIntel`), `Apple` on Apple silicon, else empty.
    pub vendor: String,
    /// CPUID's display family (base + extended: 25 = 0x19 for Zen 3/4), 0 where unknown.
    pub family: u32,
    /// CPUID's display model (extended model and model), 0 where unknown.
    pub model: u32,
}

/// Host RAM now.
pub fn memory() -> Result<HostMemory> {
    let mut s = system(RefreshKind::nothing().with_memory(MemoryRefreshKind::everything()))?;
    s.refresh_memory();
    Ok(HostMemory::of(&s))
}

impl HostMemory {
    /// The RAM figures of a `System` whose memory was refreshed (for `accelkit-telemetry`).
    #[doc(hidden)]
    pub fn of(s: &System) -> HostMemory {
        HostMemory {
            total_bytes: s.total_memory(),
            used_bytes: s.used_memory(),
            available_bytes: s.available_memory(),
            swap_total_bytes: s.total_swap(),
            swap_used_bytes: s.used_swap(),
        }
    }
}

/// Whole-machine CPU use in percent, measured over `interval` (`psutil.cpu_percent(interval)`).
/// The interval is raised to the operating system's minimum sampling time when shorter.
pub fn cpu_percent(interval: Duration) -> Result<f32> {
    let mut s = system(RefreshKind::nothing().with_cpu(CpuRefreshKind::nothing().with_usage()))?;
    s.refresh_cpu_usage();
    std::thread::sleep(interval.max(sysinfo::MINIMUM_CPU_UPDATE_INTERVAL));
    s.refresh_cpu_usage();
    Ok(s.global_cpu_usage())
}

/// Resident memory of this process in bytes, where the OS reports it.
pub fn process_rss_bytes() -> Option<u64> {
    process_rss_in(&mut System::new().ok()?)
}

/// [`process_rss_bytes`] through an existing `System` (a sampler's, kept between samples).
#[doc(hidden)]
pub fn process_rss_in(s: &mut System) -> Option<u64> {
    let pid = sysinfo::get_current_pid().ok()?;
    s.refresh_processes(ProcessesToUpdate::Some(&[pid]), true);
    s.process(pid).map(|p| p.memory())
}

/// The host CPU's name, core count, clock and vector extensions.
pub fn cpu_info() -> CpuInfo {
    let s =
        system(RefreshKind::nothing().with_cpu(CpuRefreshKind::nothing().with_frequency())).ok();
    let first = s.as_ref().and_then(|s| s.cpus().first());
    let brand = first
        .map(|c| c.brand().trim().to_string())
        .filter(|b| !b.is_empty())
        .unwrap_or_else(|| std::env::consts::ARCH.to_string());
    let frequency_mhz = first.map(|c| c.frequency()).filter(|&f| f > 0);
    let logical_cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (vendor, family, model) = cpu_identity();
    CpuInfo {
        brand,
        logical_cores,
        physical_cores: System::physical_core_count().unwrap_or(logical_cores),
        frequency_mhz,
        simd: simd_features(),
        vendor,
        family,
        model,
    }
}

/// CPUID's vendor string, display family and display model.
fn cpu_identity() -> (String, u32, u32) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::__cpuid;
        // CPUID exists on every x86_64 CPU; leaves 0 and 1 are always valid.
        let (l0, l1) = (__cpuid(0), __cpuid(1));
        let mut v = Vec::with_capacity(12);
        for r in [l0.ebx, l0.edx, l0.ecx] {
            v.extend_from_slice(&r.to_le_bytes());
        }
        let vendor = String::from_utf8_lossy(&v).into_owned();
        let base_family = (l1.eax >> 8) & 0xf;
        let family = if base_family == 0xf {
            base_family + ((l1.eax >> 20) & 0xff)
        } else {
            base_family
        };
        let model = if base_family == 0x6 || base_family == 0xf {
            ((l1.eax >> 12) & 0xf0) | ((l1.eax >> 4) & 0xf)
        } else {
            (l1.eax >> 4) & 0xf
        };
        (vendor, family, model)
    }
    #[cfg(all(target_arch = "aarch64", target_os = "macos"))]
    {
        ("Apple".to_string(), 0, 0)
    }
    #[cfg(not(any(
        target_arch = "x86_64",
        all(target_arch = "aarch64", target_os = "macos")
    )))]
    {
        (String::new(), 0, 0)
    }
}

fn simd_features() -> Vec<String> {
    #[allow(unused_mut)]
    let mut out: Vec<String> = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        macro_rules! detect {
            ($($f:tt),*) => {$(
                if std::is_x86_feature_detected!($f) {
                    out.push($f.to_string());
                }
            )*};
        }
        detect!(
            "sse4.2",
            "avx",
            "avx2",
            "fma",
            "f16c",
            "avx512f",
            "avx512bf16",
            "avx512fp16"
        );
        out.extend(amx_features().iter().map(|s| s.to_string()));
    }
    #[cfg(target_arch = "aarch64")]
    out.push("neon".to_string());
    out
}

/// AMX's parts this CPU has, from CPUID (std's feature detection has no stable names for them
/// yet): leaf 7 EDX bits 22 (AMX-BF16), 24 (AMX-TILE) and 25 (AMX-INT8), and sub-leaf 1 EAX
/// bit 21 (AMX-FP16). What the hardware has: whether the OS lets a process use the tile
/// registers is asked separately (`arch_prctl(ARCH_REQ_XCOMP_PERM)` on Linux). For accel's
/// own AMX kernels (`matmul::amx`), not part of the public surface.
#[doc(hidden)]
#[cfg(target_arch = "x86_64")]
pub fn amx_features() -> Vec<&'static str> {
    use std::arch::x86_64::{__cpuid, __cpuid_count};
    // SAFETY: CPUID exists on every x86-64 CPU; leaf 7 is read only where leaf 0 says it is
    // there (a leaf past the maximum returns another leaf's data).
    #[allow(unused_unsafe)]
    let (l7, l71) = unsafe {
        if __cpuid(0).eax < 7 {
            return Vec::new();
        }
        (__cpuid_count(7, 0), __cpuid_count(7, 1))
    };
    let mut out = Vec::new();
    for (bit, name) in [(24, "amx-tile"), (22, "amx-bf16"), (25, "amx-int8")] {
        if l7.edx >> bit & 1 == 1 {
            out.push(name);
        }
    }
    if l7.eax >= 1 && l71.eax >> 21 & 1 == 1 {
        out.push("amx-fp16");
    }
    out
}

/// No AMX off x86-64.
#[doc(hidden)]
#[cfg(not(target_arch = "x86_64"))]
pub fn amx_features() -> Vec<&'static str> {
    Vec::new()
}

/// A hosted notebook service this process runs in, recognised from the variables the service
/// sets in its runtimes (as well-known libraries detect them: Colab's `COLAB_*`, Kaggle's
/// `KAGGLE_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Hosted {
    /// Google Colab.
    Colab,
    /// Kaggle Notebooks.
    Kaggle,
}

impl Hosted {
    /// The service this process runs in, from its environment; None on any other machine.
    pub fn detect() -> Option<Hosted> {
        Hosted::from_vars(|k| std::env::var_os(k).is_some_and(|v| !v.is_empty()))
    }

    /// The service whose variables `is_set` reports (a pure function, for tests).
    pub fn from_vars(is_set: impl Fn(&str) -> bool) -> Option<Hosted> {
        const COLAB: [&str; 4] = [
            "COLAB_RELEASE_TAG",
            "COLAB_GPU",
            "COLAB_BACKEND_VERSION",
            "COLAB_JUPYTER_IP",
        ];
        const KAGGLE: [&str; 3] = [
            "KAGGLE_KERNEL_RUN_TYPE",
            "KAGGLE_URL_BASE",
            "KAGGLE_DATA_PROXY_TOKEN",
        ];
        if COLAB.iter().any(|k| is_set(k)) {
            Some(Hosted::Colab)
        } else if KAGGLE.iter().any(|k| is_set(k)) {
            Some(Hosted::Kaggle)
        } else {
            None
        }
    }

    /// Its name (`Google Colab`).
    pub fn name(self) -> &'static str {
        match self {
            Hosted::Colab => "Google Colab",
            Hosted::Kaggle => "Kaggle",
        }
    }

    /// How to get a GPU runtime there: the service's own menu path.
    pub fn gpu_fix(self) -> &'static str {
        match self {
            Hosted::Colab => {
                "this is a Colab runtime without a GPU: Runtime → Change runtime type → T4 GPU \
                 (then run the notebook again)"
            }
            Hosted::Kaggle => {
                "this is a Kaggle session without a GPU: Settings → Accelerator → GPU T4 x2 \
                 (phone-verified accounts)"
            }
        }
    }

    /// `; for a TPU in Google Colab: Runtime → ...` when this process runs in such a service,
    /// else nothing: the tail of the XLA hints.
    pub fn tpu_note() -> String {
        Hosted::detect()
            .map(|h| format!("; for a TPU in {}: {}", h.name(), h.tpu_fix()))
            .unwrap_or_default()
    }

    /// How to get a TPU runtime there.
    pub(crate) fn tpu_fix(self) -> &'static str {
        match self {
            Hosted::Colab => "Runtime → Change runtime type → a TPU (v5e-1 or v2-8)",
            Hosted::Kaggle => "Settings → Accelerator → TPU VM v3-8",
        }
    }
}

#[cfg(test)]
mod hosted_tests {
    use super::Hosted;

    #[test]
    fn colab_and_kaggle_are_recognised_by_their_variables_and_nothing_else_is() {
        let with = |set: &'static [&'static str]| Hosted::from_vars(move |k| set.contains(&k));
        assert_eq!(with(&["COLAB_RELEASE_TAG"]), Some(Hosted::Colab));
        assert_eq!(with(&["COLAB_GPU"]), Some(Hosted::Colab));
        assert_eq!(with(&["KAGGLE_KERNEL_RUN_TYPE"]), Some(Hosted::Kaggle));
        assert_eq!(with(&["KAGGLE_URL_BASE"]), Some(Hosted::Kaggle));
        assert_eq!(with(&[]), None);
        assert_eq!(
            with(&["HOME", "PATH", "JPY_PARENT_PID", "VIRTUAL_ENV"]),
            None
        );
        // The seeds' own fix, in Colab's own words.
        assert!(Hosted::Colab
            .gpu_fix()
            .contains("Runtime → Change runtime type → T4 GPU"));
        assert!(Hosted::Colab.tpu_fix().contains("TPU"));
        // This machine is neither (the test command runs outside both services).
        if std::env::var_os("COLAB_RELEASE_TAG").is_none()
            && std::env::var_os("KAGGLE_KERNEL_RUN_TYPE").is_none()
        {
            assert_eq!(Hosted::detect(), None);
        }
    }
}
