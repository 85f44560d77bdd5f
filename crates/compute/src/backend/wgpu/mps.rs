//! Apple GPUs (PyTorch's `torch.backends.mps`), reached through wgpu's Metal backend: `mps`
//! is the first Metal adapter, run by the wgpu backend's storage and kernels. Its device side
//! (`impl Backend for Mps`) maps `mps` to that adapter's `wgpu:N` and hands every call on.

#[cfg(not(feature = "wgpu"))]
use super::off::{adapter_infos, Wgpu, WgpuStorage};
#[cfg(feature = "wgpu")]
use super::{device::adapter_infos, device::Wgpu, storage::WgpuStorage};
use crate::backend::contract::{Backend, Dist};
use crate::base::dtype::HostSlice;
use crate::base::probe::{Availability, DeviceInfo, Probe};
use crate::{BackendKind, DType, Device, Error, Result};

/// The mps backend.
pub(crate) struct Mps;

/// The wgpu adapter behind `mps`: the first one whose graphics API is Metal. Asked of the
/// wgpu backend's own adapter list, not of the registry.
fn metal_adapter() -> Option<DeviceInfo> {
    adapter_infos()
        .into_iter()
        .find(|d| d.caps.platform.as_deref() == Some("Metal"))
}

/// The wgpu ordinal of the adapter that runs `mps` tensors, found once (the adapter list does
/// not change while we run; every mps call asks).
fn adapter() -> Result<usize> {
    static ADAPTER: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    let found = *ADAPTER.get_or_init(|| metal_adapter().map(|d| d.device.ordinal()));
    found.ok_or_else(|| Error::internal("mps was asked for, but there is no Metal adapter"))
}

impl Backend for Mps {
    type Storage = WgpuStorage;
    type Event = <Wgpu as Backend>::Event;
    const KIND: BackendKind = BackendKind::Mps;

    fn probe() -> Probe {
        if !cfg!(feature = "wgpu") {
            return Probe::not_compiled(BackendKind::Mps);
        }
        match metal_adapter() {
            Some(info) => Probe {
                backend: BackendKind::Mps,
                compiled: true,
                availability: Availability::Available {
                    devices: vec![DeviceInfo {
                        device: Device::Mps,
                        ..info
                    }],
                },
            },
            None => Probe::unavailable(
                BackendKind::Mps,
                true,
                if cfg!(target_os = "macos") {
                    "no Metal adapter found"
                } else {
                    "mps is Apple's GPU (Metal); this is not macOS"
                },
                "on a Mac with Apple silicon or an AMD GPU, Metal needs nothing to install; \
                 other GPUs are reached as wgpu:N or cuda:N",
            ),
        }
    }
    fn synchronize(_: usize) -> Result<()> {
        Wgpu::synchronize(adapter()?)
    }
    fn device_memory(_: usize) -> Option<(u64, u64)> {
        Wgpu::device_memory(adapter().ok()?)
    }
    fn cached_bytes(_: usize) -> u64 {
        adapter().map_or(0, Wgpu::cached_bytes)
    }
    fn allocator_reserved_bytes(_: usize) -> Option<u64> {
        Wgpu::allocator_reserved_bytes(adapter().ok()?)
    }
    fn empty_cache(_: usize) {
        if let Ok(d) = adapter() {
            Wgpu::empty_cache(d)
        }
    }
    fn record_event(_: usize) -> Result<Option<Self::Event>> {
        Wgpu::record_event(adapter()?)
    }
    fn seconds_between(start: &Self::Event, end: &Self::Event) -> Result<f64> {
        Wgpu::seconds_between(start, end)
    }
    fn timer_name(_: usize) -> &'static str {
        adapter().map_or(crate::backend::contract::WALL_CLOCK, Wgpu::timer_name)
    }
    fn upload(_: usize, data: HostSlice<'_>) -> Result<WgpuStorage> {
        Wgpu::upload(adapter()?, data)
    }
    fn full(_: usize, dtype: DType, n: usize, value: f64) -> Result<Option<WgpuStorage>> {
        Wgpu::full(adapter()?, dtype, n, value)
    }
    fn arange(
        _: usize,
        dtype: DType,
        start: f64,
        step: f64,
        n: usize,
    ) -> Result<Option<WgpuStorage>> {
        Wgpu::arange(adapter()?, dtype, start, step, n)
    }
    fn random(
        _: usize,
        dtype: DType,
        n: usize,
        seed: u64,
        dist: Dist,
    ) -> Result<Option<WgpuStorage>> {
        Wgpu::random(adapter()?, dtype, n, seed, dist)
    }
}
