//! The wgpu backend's device side: the probe, with each adapter's typed capabilities, and
//! `impl Backend for Wgpu`.

use crate::backend::contract::Backend;
use crate::base::caps::Hardware;
use crate::base::dtype::HostSlice;
use crate::base::probe::{Availability, DeviceInfo, Probe};
use crate::{BackendKind, DType, Device, DeviceCaps, Result};

use super::context::{allocator_reserved_bytes, gpu, registry, Timestamp, WgpuContext, TIMESTAMPS};
use super::storage::WgpuStorage;

/// What the probe reports of one adapter: read from the adapter in this process, or from the
/// probe helper that enumerated the same adapters a moment before (so `accel devices` does not
/// load the Vulkan loader and its drivers twice: the helper's enumeration is the answer, and
/// this process enumerates only when a `wgpu:N` tensor is made).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct AdapterFacts {
    name: String,
    /// wgpu's `Backend` (`Vulkan`, `Metal`, `Dx12`).
    api: String,
    /// wgpu's `DeviceType` (`DiscreteGpu`, `Cpu`...).
    device_type: String,
    vendor: u32,
    driver: String,
    max_buffer_bytes: u64,
    max_workgroups_per_dimension: u32,
    shader_f16: bool,
    timestamps: bool,
}

impl AdapterFacts {
    fn of(g: &WgpuContext) -> AdapterFacts {
        let info = g.adapter.get_info();
        let limits = g.adapter.limits();
        let features = g.adapter.features();
        AdapterFacts {
            name: info.name.clone(),
            api: format!("{:?}", info.backend),
            device_type: format!("{:?}", info.device_type),
            vendor: info.vendor,
            driver: format!("{} {}", info.driver, info.driver_info)
                .trim()
                .to_string(),
            max_buffer_bytes: limits.max_storage_buffer_binding_size,
            max_workgroups_per_dimension: limits.max_compute_workgroups_per_dimension,
            shader_f16: features.contains(wgpu::Features::SHADER_F16),
            timestamps: features.contains(wgpu::Features::TIMESTAMP_QUERY)
                && features.contains(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS),
        }
    }
}

/// The probe helper's answer for `wgpu`: whether a usable adapter exists, every adapter's
/// facts in enumeration order, or why there is none.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct HelperAnswer {
    pub available: bool,
    pub adapters: Vec<AdapterFacts>,
    pub problem: Option<String>,
}

/// The probe helper's answer for `wgpu` (in the helper).
pub(crate) fn helper_answer(available: bool) -> HelperAnswer {
    let r = registry();
    HelperAnswer {
        available,
        adapters: r.gpus.iter().map(|g| AdapterFacts::of(g)).collect(),
        problem: r.problem.clone(),
    }
}

/// Every adapter's facts and the problem when there is none: from the probe helper's answer
/// when a helper ran (and its every line reads back), else from this process's own
/// enumeration.
fn adapters() -> &'static (Vec<AdapterFacts>, Option<String>) {
    static A: std::sync::OnceLock<(Vec<AdapterFacts>, Option<String>)> = std::sync::OnceLock::new();
    A.get_or_init(|| {
        match crate::base::probe_child::canary("wgpu") {
            Err(r) => return (Vec::new(), Some(r.reason)),
            Ok(Some(answer)) => {
                // A helper of another build may answer in another shape: enumerate here.
                if let Some(a) = answer.parse::<HelperAnswer>() {
                    if a.available != a.adapters.is_empty() {
                        return (a.adapters, a.problem);
                    }
                }
            }
            Ok(None) => {}
        }
        let r = registry();
        (
            r.gpus.iter().map(|g| AdapterFacts::of(g)).collect(),
            r.problem.clone(),
        )
    })
}

/// The adapter description `probe` reports, for every adapter (also used by the mps probe,
/// which must not go through the cached probe list while it is being built).
pub(crate) fn adapter_infos() -> Vec<DeviceInfo> {
    adapters()
        .0
        .iter()
        .enumerate()
        .map(|(i, f)| info_of(i, f))
        .collect()
}

pub(crate) fn probe() -> Probe {
    let (facts, problem) = adapters();
    if facts.is_empty() {
        return Probe::unavailable(
            BackendKind::Wgpu,
            true,
            problem.clone().unwrap_or_default(),
            "install your GPU's Vulkan driver and the loader (Debian/Ubuntu: `apt install \
             libvulkan1 mesa-vulkan-drivers` gives AMD/Intel drivers and the lavapipe software \
             device); on macOS Metal needs nothing",
        );
    }
    Probe {
        backend: BackendKind::Wgpu,
        compiled: true,
        availability: Availability::Available {
            devices: adapter_infos(),
        },
    }
}

fn info_of(ordinal: usize, f: &AdapterFacts) -> DeviceInfo {
    let mut dtypes = vec![DType::F32, DType::I32];
    if f.shader_f16 {
        dtypes.push(DType::F16);
    }
    DeviceInfo {
        device: Device::Wgpu(ordinal),
        name: f.name.clone(),
        memory_total_bytes: None,
        caps: DeviceCaps {
            dtypes,
            hardware: if f.device_type == "Cpu" {
                Hardware::HostCpuEmulated
            } else {
                Hardware::Accelerator
            },
            platform: Some(f.api.clone()),
            shader_f16: f.shader_f16,
            timestamp_queries: f.timestamps,
            ..DeviceCaps::default()
        },
        details: vec![
            ("backend".to_string(), f.api.clone()),
            ("device_type".to_string(), f.device_type.clone()),
            ("vendor".to_string(), format!("0x{:04x}", f.vendor)),
            ("driver".to_string(), f.driver.clone()),
            (
                "max_buffer_bytes".to_string(),
                f.max_buffer_bytes.to_string(),
            ),
            (
                "max_workgroups_per_dimension".to_string(),
                f.max_workgroups_per_dimension.to_string(),
            ),
            ("shader_f16".to_string(), f.shader_f16.to_string()),
            ("timestamp_queries".to_string(), f.timestamps.to_string()),
            (
                "dtypes".to_string(),
                if f.shader_f16 {
                    "f32, i32, f16"
                } else {
                    "f32, i32"
                }
                .to_string(),
            ),
        ],
    }
}

/// The wgpu backend.
pub(crate) struct Wgpu;

impl Backend for Wgpu {
    type Storage = WgpuStorage;
    type Event = Timestamp;
    const KIND: BackendKind = BackendKind::Wgpu;

    fn probe() -> Probe {
        probe()
    }
    fn synchronize(ordinal: usize) -> Result<()> {
        gpu(ordinal)?.synchronize()
    }
    fn allocator_reserved_bytes(ordinal: usize) -> Option<u64> {
        allocator_reserved_bytes(ordinal)
    }
    fn record_event(ordinal: usize) -> Result<Option<Timestamp>> {
        gpu(ordinal)?.timestamp()
    }
    fn seconds_between(start: &Timestamp, end: &Timestamp) -> Result<f64> {
        end.seconds_since(start)
    }
    fn timer_name(ordinal: usize) -> &'static str {
        let timestamps = registry()
            .gpus
            .get(ordinal)
            .is_some_and(|g| g.adapter.features().contains(TIMESTAMPS));
        if timestamps {
            "wgpu timestamp queries"
        } else {
            crate::backend::contract::WALL_CLOCK
        }
    }
    fn upload(ordinal: usize, data: HostSlice<'_>) -> Result<WgpuStorage> {
        WgpuStorage::from_cpu(&gpu(ordinal)?, data)
    }
    // device_memory: wgpu reports none; full, arange, random: made on the host and uploaded.
}
