//! The CPU backend's device side: the probe (the CPU's model, threads, SIMD, matmul kernels)
//! and `impl Backend for Cpu`.

use crate::backend::contract::{Backend, NoEvent};
use crate::base::dtype::{CpuStorage, HostSlice};
use crate::base::probe::{Availability, DeviceInfo, Probe};
use crate::{BackendKind, DType, Device, DeviceCaps, Result};

use super::{alloc, matmul};

/// The CPU backend.
pub(crate) struct Cpu;

impl Backend for Cpu {
    type Storage = CpuStorage;
    type Event = NoEvent;
    const KIND: BackendKind = BackendKind::Cpu;

    fn probe() -> Probe {
        let sys = crate::base::system::cpu_info();
        let mut details = vec![
            ("logical_cores".to_string(), sys.logical_cores.to_string()),
            (
                "threads".to_string(),
                crate::base::threads::threads().to_string(),
            ),
            ("simd".to_string(), sys.simd.join(" ")),
        ];
        if let Some(mhz) = sys.frequency_mhz {
            details.push(("frequency_mhz".to_string(), mhz.to_string()));
        }
        // The matmul micro-kernels chosen for this CPU (`accel bench matmul --explain` gives
        // their tiles and blocking).
        use matmul::Accum;
        let k32 = f32::kernel().name;
        details.push(("matmul_kernel".to_string(), {
            let bf16 = match matmul::bf16_kernel() {
                _ if matmul::amx_in_use(DType::BF16) => ", bf16 amx".to_string(),
                Some(b) => format!(", bf16 {}", b.name),
                None => String::new(),
            };
            let f16 = if matmul::amx_in_use(DType::F16) {
                ", f16 amx"
            } else {
                ""
            };
            format!("{k32}{bf16}{f16}")
        }));
        Probe {
            backend: BackendKind::Cpu,
            compiled: true,
            availability: Availability::Available {
                devices: vec![DeviceInfo {
                    device: Device::Cpu,
                    name: sys.brand,
                    memory_total_bytes: crate::base::system::memory().ok().map(|m| m.total_bytes),
                    caps: DeviceCaps {
                        dtypes: DType::ALL.to_vec(),
                        hardware: crate::base::caps::Hardware::HostCpu,
                        ..DeviceCaps::default()
                    },
                    details,
                }],
            },
        }
    }

    // CPU kernels return when their work is done (synchronize: the default), the CPU has no
    // clock of its own (record_event: none), and the host paths in `Tensor` make full,
    // arange and random data.
    fn device_memory(_: usize) -> Option<(u64, u64)> {
        crate::base::system::memory()
            .ok()
            .map(|m| (m.available_bytes, m.total_bytes))
    }
    fn cached_bytes(_: usize) -> u64 {
        alloc::cached_bytes()
    }
    fn empty_cache(_: usize) {
        alloc::empty_cache()
    }
    // host_cached_bytes: none beyond `cached_bytes` itself (the default, 0).
    fn matmul_peak(_: &DeviceCaps, dtype: DType) -> Option<crate::base::cpu_peak::Peak> {
        crate::base::cpu_peak::host_matmul_peak(dtype, matmul::amx_in_use(dtype))
    }
    fn kernels() -> Vec<(&'static str, String)> {
        matmul::describe()
    }
    fn seconds_between(start: &NoEvent, _: &NoEvent) -> Result<f64> {
        match *start {}
    }
    fn upload(_: usize, data: HostSlice<'_>) -> Result<CpuStorage> {
        Ok(data.to_storage())
    }
}
