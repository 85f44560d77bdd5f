//! NVIDIA GPUs through the CUDA driver API, cuBLAS and NVRTC (PyTorch's `torch.cuda`).
//!
//! - [`libs`]: finds the driver, NVML, NVRTC, cuBLAS(Lt) and cuDNN wherever they are installed
//!   (toolkit, conda, Python wheels) and loads them by absolute path.
//! - `gpu`: one device in use: context, stream, memory pool, kernels, cuBLAS handle, staging.
//! - `storage`: tensor data on a GPU and every op on it.
//! - [`kernels`]: accel's CUDA C kernels, compiled by NVRTC to the device's architecture.
//! - `pinned`: page-locked host memory (`pin_memory()`), copied without staging.
//! - `nvml`: load, temperature, power and processes, as nvidia-smi shows them.
//!
//! Nothing here panics when the hardware or a library is missing: the probe reports why.

pub mod kernels;
pub mod libs;

#[cfg(feature = "cuda")]
pub(crate) mod gpu;
#[cfg(feature = "cuda")]
pub mod nvml;
#[cfg(feature = "cuda")]
pub(crate) mod pinned;
#[cfg(feature = "cuda")]
pub(crate) mod storage;

use serde::Serialize;

use crate::probe::Probe;
use crate::{Device, Error, Result};

/// One process using a GPU.
#[derive(Debug, Clone, Serialize)]
pub struct GpuProcess {
    /// Process id.
    pub pid: u32,
    /// GPU memory it holds, where the driver reports it.
    pub used_bytes: Option<u64>,
}

/// A GPU's load as NVML reports it; fields the GPU does not report are None. Units are in
/// the field names.
#[derive(Debug, Clone, Serialize)]
#[allow(missing_docs)]
pub struct GpuLoad {
    /// nvidia-smi's index (PCI order; CUDA's ordinal may differ).
    pub nvml_index: Option<u32>,
    pub name: Option<String>,
    pub uuid: Option<String>,
    pub pci_bus_id: Option<String>,
    pub utilization_gpu_percent: Option<u32>,
    pub utilization_memory_percent: Option<u32>,
    pub memory_used_bytes: Option<u64>,
    pub memory_free_bytes: Option<u64>,
    pub memory_total_bytes: Option<u64>,
    pub temperature_c: Option<u32>,
    pub power_w: Option<f64>,
    pub power_limit_w: Option<f64>,
    pub clock_sm_mhz: Option<u32>,
    pub clock_memory_mhz: Option<u32>,
    pub max_clock_sm_mhz: Option<u32>,
    pub max_clock_memory_mhz: Option<u32>,
    /// The PCIe link the GPU is capable of (generation, lanes); the link may train lower
    /// at idle to save power.
    pub pcie_max_link: Option<(u32, u32)>,
    /// The PCIe link now (generation, lanes).
    pub pcie_link: Option<(u32, u32)>,
    pub processes: Vec<GpuProcess>,
}

/// What this backend's probe found, with the reason when it found nothing.
pub fn probe() -> Probe {
    #[cfg(feature = "cuda")]
    {
        probe_driver()
    }
    #[cfg(not(feature = "cuda"))]
    {
        super::not_implemented("cuda", false, "cuda")
    }
}

/// Whether at least one CUDA GPU is usable (`torch.cuda.is_available()`).
pub fn is_available() -> bool {
    device_count() > 0
}

/// How many CUDA GPUs are usable (`torch.cuda.device_count()`), after `CUDA_VISIBLE_DEVICES`.
pub fn device_count() -> usize {
    super::probe_of("cuda").map_or(0, |p| p.devices().len())
}

/// The usable CUDA devices, by ordinal.
pub fn devices() -> Vec<Device> {
    super::probe_of("cuda")
        .map_or_else(Vec::new, |p| p.devices().iter().map(|d| d.device).collect())
}

/// The CUDA device new tensors go to by default (`torch.cuda.current_device()`): ordinal 0
/// when a GPU is usable, else the reason there is none.
pub fn current_device() -> Result<usize> {
    Device::Cuda(0).check().map(|_| 0)
}

/// Lets f32 matmul use TF32 tensor cores (`torch.backends.cuda.matmul.allow_tf32 = True`):
/// several times faster, with inputs rounded to 10 mantissa bits. Off by default.
pub fn set_allow_tf32(on: bool) {
    #[cfg(feature = "cuda")]
    storage::set_allow_tf32(on);
    #[cfg(not(feature = "cuda"))]
    let _ = on;
}

/// Whether TF32 is allowed for f32 matmul.
pub fn allow_tf32() -> bool {
    #[cfg(feature = "cuda")]
    {
        storage::allow_tf32()
    }
    #[cfg(not(feature = "cuda"))]
    {
        false
    }
}

/// The CUDA libraries as found on this machine: path, version, or why each is missing
/// (`accel devices` prints them; users ask about driver / CUDA / cuDNN as one stack).
pub fn libraries() -> &'static [libs::Library] {
    if cfg!(feature = "cuda") {
        libs::libraries()
    } else {
        &[]
    }
}

/// The load of CUDA GPU `ordinal` through NVML (GPUtil's `getGPUs()`): utilisation, memory,
/// temperature, power, clocks and processes.
pub fn utilization(ordinal: usize) -> Result<GpuLoad> {
    Device::Cuda(ordinal).check()?;
    #[cfg(not(feature = "cuda"))]
    return Err(Error::System("the cuda backend is not compiled in".into()));
    #[cfg(feature = "cuda")]
    utilization_nvml(ordinal)
}

#[cfg(feature = "cuda")]
fn utilization_nvml(ordinal: usize) -> Result<GpuLoad> {
    let get = |k: &str| super::detail(Device::Cuda(ordinal), k);
    nvml::load(get("uuid").as_deref(), get("pci_bus_id").as_deref()).map_err(Error::System)
}

#[cfg(feature = "cuda")]
fn probe_driver() -> Probe {
    use crate::probe::{Availability, DeviceInfo};
    use cudarc::driver::sys;
    use gpu::{attr, err_name};
    use sys::CUdevice_attribute as A;

    let un = |reason: String, hint: String| Probe::unavailable("cuda", true, reason, hint);
    let libs = libs::libraries();
    let cuda = libs.iter().find(|l| l.name == "cuda").expect("listed");
    if !cuda.is_loaded() {
        return un(
            format!(
                "no NVIDIA driver: {}",
                cuda.problem.clone().unwrap_or_default()
            ),
            cuda.hint.clone().unwrap_or_default(),
        );
    }
    let mut version = 0;
    // SAFETY: libcuda is loaded (`cuda.is_loaded()` checked above; libs.rs dlopened it by
    // absolute path, so cudarc's lazy loader finds it and does not panic); cuDriverGetVersion
    // needs no cuInit and writes one int into the local out-pointer.
    unsafe { sys::cuDriverGetVersion(&mut version) };
    if version < (libs::CUDA_MAJOR * 1000) as i32 {
        return un(
            format!(
                "the NVIDIA driver supports CUDA {}.{} but accel is built for CUDA {}.0",
                version / 1000,
                (version % 1000) / 10,
                libs::CUDA_MAJOR
            ),
            "update the NVIDIA driver to 580 or newer".to_string(),
        );
    }
    // SAFETY: libcuda is loaded (checked above); cuInit takes flags 0 and may be called any
    // number of times, from any thread.
    let r = unsafe { sys::cuInit(0) };
    let visible = std::env::var("CUDA_VISIBLE_DEVICES").ok();
    let no_device = |why: String| {
        if let Some(v) = &visible {
            un(
                format!("{why}; CUDA_VISIBLE_DEVICES={v:?} may hide every GPU"),
                "unset CUDA_VISIBLE_DEVICES or list valid GPU indices (see nvidia-smi -L)"
                    .to_string(),
            )
        } else {
            un(
                why,
                "check `nvidia-smi`; in a container, start it with `--gpus all`".to_string(),
            )
        }
    };
    if r != sys::CUresult::CUDA_SUCCESS {
        let name = err_name(r);
        if r == sys::CUresult::CUDA_ERROR_NO_DEVICE {
            return no_device("the driver is installed but finds no CUDA GPU".to_string());
        }
        return un(
            format!("cuInit failed: {name}"),
            "check `nvidia-smi` and `dmesg`; a driver/kernel-module version mismatch after an \
             upgrade needs a reboot"
                .to_string(),
        );
    }
    let mut count = 0;
    // SAFETY: cuInit succeeded just above; `count` is a local out-pointer (left 0 on error).
    unsafe { sys::cuDeviceGetCount(&mut count) };
    if count <= 0 {
        return no_device("the driver is installed but finds no CUDA GPU".to_string());
    }
    let driver = nvml::driver_version();
    let lib_note = |name: &str| -> String {
        match libs.iter().find(|l| l.name == name) {
            Some(l) if l.is_loaded() => l.version.clone().unwrap_or_else(|| "found".into()),
            Some(l) => format!("missing ({})", l.problem.clone().unwrap_or_default()),
            None => "not searched".to_string(),
        }
    };
    let mut devices = Vec::new();
    for i in 0..count {
        let mut dev: sys::CUdevice = 0;
        // SAFETY: cuInit succeeded above; 0 <= i < count; `dev` is a local out-pointer.
        if unsafe { sys::cuDeviceGet(&mut dev, i) } != sys::CUresult::CUDA_SUCCESS {
            continue;
        }
        let mut name = [0 as std::ffi::c_char; 256];
        // SAFETY: `dev` came from cuDeviceGet above; the driver writes at most 256 bytes (the
        // length we pass, the buffer's size), NUL-terminated.
        unsafe { sys::cuDeviceGetName(name.as_mut_ptr(), 256, dev) };
        // SAFETY: `name` is a zero-initialised 256-byte buffer that cuDeviceGetName fills with
        // a NUL-terminated string of at most 256 bytes; if the call failed it is still all
        // zeros, i.e. the empty string. Either way a NUL lies inside the buffer.
        // (CStr::from_bytes_until_nul would check that instead of trusting the driver.)
        let name = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        let mut total = 0usize;
        // SAFETY: `dev` from cuDeviceGet; `total` is a local usize (size_t) out-pointer.
        unsafe { sys::cuDeviceTotalMem_v2(&mut total, dev) };
        // SAFETY: CUuuid is a #[repr(C)] struct of 16 c_chars, for which all-zero bytes are
        // a valid value.
        let mut uuid: sys::CUuuid = unsafe { std::mem::zeroed() };
        // SAFETY: `dev` from cuDeviceGet; `uuid` is a local CUuuid out-pointer (left zero on
        // error).
        unsafe { sys::cuDeviceGetUuid_v2(&mut uuid, dev) };
        let b: Vec<u8> = uuid.bytes.iter().map(|&c| c as u8).collect();
        let hex =
            |r: std::ops::Range<usize>| b[r].iter().map(|x| format!("{x:02x}")).collect::<String>();
        let uuid = format!(
            "GPU-{}-{}-{}-{}-{}",
            hex(0..4),
            hex(4..6),
            hex(6..8),
            hex(8..10),
            hex(10..16)
        );
        let pci = format!(
            "{:08x}:{:02x}:{:02x}.0",
            attr(dev, A::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID),
            attr(dev, A::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID),
            attr(dev, A::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)
        );
        let cc = (
            attr(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
            attr(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR),
        );
        let load = nvml::load(Some(&uuid), Some(&pci)).ok();
        let mut details = vec![
            ("uuid".to_string(), uuid.clone()),
            (
                "compute_capability".to_string(),
                format!("{}.{}", cc.0, cc.1),
            ),
            (
                "sm_count".to_string(),
                attr(dev, A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT).to_string(),
            ),
            ("pci_bus_id".to_string(), pci),
        ];
        if let Some(l) = &load {
            if let Some(ix) = l.nvml_index {
                details.push(("nvml_index".to_string(), ix.to_string()));
            }
            if let Some(f) = l.memory_free_bytes {
                details.push(("memory_free_bytes".to_string(), f.to_string()));
            }
            if let Some(c) = l.max_clock_sm_mhz {
                details.push(("max_clock_sm_mhz".to_string(), c.to_string()));
            }
            if let Some(c) = l.max_clock_memory_mhz {
                details.push(("max_clock_memory_mhz".to_string(), c.to_string()));
            }
            if let Some((g, w)) = l.pcie_max_link {
                details.push(("pcie_max_link_gen".to_string(), g.to_string()));
                details.push(("pcie_max_link_width".to_string(), w.to_string()));
            }
        }
        let clock_khz = attr(dev, A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
        if clock_khz > 0 && !details.iter().any(|(k, _)| k == "max_clock_sm_mhz") {
            details.push((
                "max_clock_sm_mhz".to_string(),
                (clock_khz / 1000).to_string(),
            ));
        }
        details.push((
            "memory_bus_width_bits".to_string(),
            attr(dev, A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH).to_string(),
        ));
        if let Some(d) = &driver {
            details.push(("driver_version".to_string(), d.clone()));
        }
        details.push((
            "cuda_driver_version".to_string(),
            format!("{}.{}", version / 1000, (version % 1000) / 10),
        ));
        for lib in ["nvrtc", "cublas", "cudnn"] {
            details.push((lib.to_string(), lib_note(lib)));
        }
        if cc.0 < 7 || (cc.0 == 7 && cc.1 < 5) {
            details.push((
                "warning".to_string(),
                "CUDA 13 compiles for compute capability 7.5 and newer; accel's kernels will not run here"
                    .to_string(),
            ));
        }
        devices.push(DeviceInfo {
            device: Device::Cuda(i as usize),
            name,
            memory_total_bytes: Some(total as u64),
            details,
        });
    }
    Probe {
        backend: "cuda",
        compiled: true,
        availability: Availability::Available { devices },
    }
}
