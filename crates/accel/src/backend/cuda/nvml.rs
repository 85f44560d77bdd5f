//! Load and health of NVIDIA GPUs through NVML (what nvidia-smi, GPUtil and gpustat show):
//! utilisation, memory used/total, temperature, power, clocks and the processes on each GPU.

use std::sync::OnceLock;

use super::{GpuLoad, GpuProcess};
use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::Nvml;

/// NVML, initialised once from the library [`super::libs`] found.
pub fn nvml() -> Result<&'static Nvml, String> {
    static N: OnceLock<Result<Nvml, String>> = OnceLock::new();
    N.get_or_init(|| {
        let lib = super::libs::library("nvml")
            .filter(|l| l.is_loaded())
            .ok_or_else(|| {
                super::libs::library("nvml")
                    .and_then(|l| l.problem.clone())
                    .unwrap_or_else(|| "libnvidia-ml.so.1 not found".to_string())
            })?;
        let path = lib.path.clone().unwrap_or_default();
        Nvml::builder()
            .lib_path(path.as_os_str())
            .init()
            .map_err(|e| format!("NVML failed to start: {e}"))
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// The driver version NVML reports (`580.65.06`).
pub fn driver_version() -> Option<String> {
    nvml().ok()?.sys_driver_version().ok()
}

/// The load of the GPU with this UUID (`GPU-...`) or, failing that, this PCI bus id.
pub fn load(uuid: Option<&str>, pci_bus_id: Option<&str>) -> Result<GpuLoad, String> {
    let n = nvml()?;
    let dev = match (uuid, pci_bus_id) {
        (Some(u), _) if n.device_by_uuid(u).is_ok() => n.device_by_uuid(u),
        (_, Some(p)) => n.device_by_pci_bus_id(p),
        (Some(u), None) => n.device_by_uuid(u),
        (None, None) => return Err("no GPU identity to look up".to_string()),
    }
    .map_err(|e| format!("NVML does not know this GPU: {e}"))?;
    let mem = dev.memory_info().ok();
    let util = dev.utilization_rates().ok();
    let processes = dev
        .running_compute_processes()
        .unwrap_or_default()
        .into_iter()
        .map(|p| GpuProcess {
            pid: p.pid,
            used_bytes: match p.used_gpu_memory {
                UsedGpuMemory::Used(b) => Some(b),
                UsedGpuMemory::Unavailable => None,
            },
        })
        .collect();
    Ok(GpuLoad {
        nvml_index: dev.index().ok(),
        name: dev.name().ok(),
        uuid: dev.uuid().ok(),
        pci_bus_id: dev.pci_info().ok().map(|p| p.bus_id),
        utilization_gpu_percent: util.as_ref().map(|u| u.gpu),
        utilization_memory_percent: util.as_ref().map(|u| u.memory),
        memory_used_bytes: mem.as_ref().map(|m| m.used),
        memory_free_bytes: mem.as_ref().map(|m| m.free),
        memory_total_bytes: mem.as_ref().map(|m| m.total),
        temperature_c: dev.temperature(TemperatureSensor::Gpu).ok(),
        power_w: dev.power_usage().ok().map(|mw| mw as f64 / 1e3),
        power_limit_w: dev.power_management_limit().ok().map(|mw| mw as f64 / 1e3),
        clock_sm_mhz: dev.clock_info(Clock::SM).ok(),
        clock_memory_mhz: dev.clock_info(Clock::Memory).ok(),
        max_clock_sm_mhz: dev.max_clock_info(Clock::SM).ok(),
        max_clock_memory_mhz: dev.max_clock_info(Clock::Memory).ok(),
        pcie_max_link: dev
            .max_pcie_link_gen()
            .ok()
            .zip(dev.max_pcie_link_width().ok()),
        pcie_link: dev
            .current_pcie_link_gen()
            .ok()
            .zip(dev.current_pcie_link_width().ok()),
        processes,
    })
}
