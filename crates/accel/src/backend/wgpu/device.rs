//! The wgpu backend's device side: the probe, with each adapter's typed capabilities, and
//! `impl Backend for Wgpu`.

use crate::backend::contract::Backend;
use crate::base::caps::Hardware;
use crate::base::dtype::HostSlice;
use crate::base::probe::{Availability, DeviceInfo, Probe};
use crate::{BackendKind, DType, Device, DeviceCaps, Result};

use super::context::{allocator_reserved_bytes, gpu, registry, Timestamp, WgpuContext, TIMESTAMPS};
use super::storage::WgpuStorage;

/// The adapter description `probe` reports, for every adapter (also used by the mps probe,
/// which must not go through the cached probe list while it is being built).
pub(crate) fn adapter_infos() -> Vec<DeviceInfo> {
    registry().gpus.iter().map(|g| info_of(g)).collect()
}

pub(crate) fn probe() -> Probe {
    let r = registry();
    if r.gpus.is_empty() {
        return Probe::unavailable(
            BackendKind::Wgpu,
            true,
            r.problem.clone().unwrap_or_default(),
            "install your GPU's Vulkan driver and the loader (Debian/Ubuntu: `apt install \
             libvulkan1 mesa-vulkan-drivers` gives AMD/Intel drivers and the lavapipe software \
             device); on macOS Metal needs nothing",
        );
    }
    let devices = r.gpus.iter().map(|g| info_of(g)).collect();
    Probe {
        backend: BackendKind::Wgpu,
        compiled: true,
        availability: Availability::Available { devices },
    }
}

fn info_of(g: &WgpuContext) -> DeviceInfo {
    let info = g.adapter.get_info();
    let limits = g.adapter.limits();
    let features = g.adapter.features();
    let f16 = features.contains(wgpu::Features::SHADER_F16);
    let timestamps = features.contains(wgpu::Features::TIMESTAMP_QUERY)
        && features.contains(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS);
    let mut dtypes = vec![DType::F32, DType::I32];
    if f16 {
        dtypes.push(DType::F16);
    }
    DeviceInfo {
        device: Device::Wgpu(g.ordinal),
        name: info.name.clone(),
        memory_total_bytes: None,
        caps: DeviceCaps {
            dtypes,
            hardware: if info.device_type == wgpu::DeviceType::Cpu {
                Hardware::HostCpuEmulated
            } else {
                Hardware::Accelerator
            },
            platform: Some(format!("{:?}", info.backend)),
            shader_f16: f16,
            timestamp_queries: timestamps,
            ..DeviceCaps::default()
        },
        details: vec![
            ("backend".to_string(), format!("{:?}", info.backend)),
            ("device_type".to_string(), format!("{:?}", info.device_type)),
            ("vendor".to_string(), format!("0x{:04x}", info.vendor)),
            (
                "driver".to_string(),
                format!("{} {}", info.driver, info.driver_info)
                    .trim()
                    .to_string(),
            ),
            (
                "max_buffer_bytes".to_string(),
                limits.max_storage_buffer_binding_size.to_string(),
            ),
            (
                "max_workgroups_per_dimension".to_string(),
                limits.max_compute_workgroups_per_dimension.to_string(),
            ),
            ("shader_f16".to_string(), f16.to_string()),
            ("timestamp_queries".to_string(), timestamps.to_string()),
            (
                "dtypes".to_string(),
                if f16 { "f32, i32, f16" } else { "f32, i32" }.to_string(),
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
