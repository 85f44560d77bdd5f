//! The CUDA backend's device side: the probe (driver, devices, typed capabilities) and
//! `impl Backend for Cuda`.

use std::sync::Mutex;

use cudarc::driver::sys;
use sys::CUdevice_attribute as A;

use crate::backend::contract::{Backend, Dist, PinnedHost};
use crate::base::caps::Hardware;
use crate::base::cpu_peak::Peak;
use crate::base::dtype::HostSlice;
use crate::base::probe::{Availability, DeviceInfo, Probe};
use crate::{BackendKind, DType, Device, DeviceCaps, Result};

use super::context::{attr, err_name, gpu, opened, TimingEvent};
use super::pinned;
use super::storage::CudaStorage;
use crate::backend::native::libs;
use crate::telemetry::nvidia as nvml;

/// The CUDA backend.
pub(crate) struct Cuda;

/// (ordinal, UUID, PCI bus id) of each GPU the probe found: how NVML finds a GPU that has no
/// context yet.
static IDS: Mutex<Vec<(usize, String, String)>> = Mutex::new(Vec::new());

impl Backend for Cuda {
    type Storage = CudaStorage;
    type Event = TimingEvent;
    const KIND: BackendKind = BackendKind::Cuda;

    fn probe() -> Probe {
        probe_driver()
    }
    fn synchronize(ordinal: usize) -> Result<()> {
        gpu(ordinal)?.synchronize()
    }
    fn device_memory(ordinal: usize) -> Option<(u64, u64)> {
        match opened(ordinal) {
            Some(g) => g.mem_info().ok().map(|(f, t)| (f as u64, t as u64)),
            // No context yet (creating one costs memory): ask NVML.
            None => {
                let ids = IDS.lock().unwrap_or_else(|e| e.into_inner());
                let (_, uuid, pci) = ids.iter().find(|(o, _, _)| *o == ordinal)?;
                let l = nvml::limits(Some(uuid), Some(pci)).ok()?;
                Some((l.memory_free_bytes?, l.memory_total_bytes?))
            }
        }
    }
    fn cached_bytes(ordinal: usize) -> u64 {
        opened(ordinal).map_or(0, |g| g.cached_bytes())
    }
    fn empty_cache(ordinal: usize) {
        if let Some(g) = opened(ordinal) {
            g.empty_cache();
        }
    }
    fn pinned_host(ordinal: usize, dtype: DType, n: usize) -> Result<PinnedHost> {
        pinned::pinned_host(ordinal, dtype, n)
    }
    fn host_cached_bytes() -> u64 {
        pinned::cached_bytes()
    }
    fn empty_host_cache() {
        pinned::empty_cache()
    }
    fn record_event(ordinal: usize) -> Result<Option<TimingEvent>> {
        Ok(Some(gpu(ordinal)?.record_timing_event()?))
    }
    fn seconds_between(start: &TimingEvent, end: &TimingEvent) -> Result<f64> {
        end.elapsed_since(start)
    }
    fn timer_name(_: usize) -> &'static str {
        "cuda events"
    }
    fn matmul_peak(caps: &DeviceCaps, dtype: DType) -> Option<Peak> {
        super::gpu_peak::cuda_peak(
            caps.compute_capability?,
            caps.sm_count?,
            caps.max_clock_sm_mhz?,
            dtype,
            crate::backend::native::settings::allow_tf32(),
        )
    }
    fn upload(ordinal: usize, data: HostSlice<'_>) -> Result<CudaStorage> {
        CudaStorage::from_cpu(&gpu(ordinal)?, data)
    }
    fn full(ordinal: usize, dtype: DType, n: usize, value: f64) -> Result<Option<CudaStorage>> {
        CudaStorage::full(&gpu(ordinal)?, dtype, n, value).map(Some)
    }
    fn arange(
        ordinal: usize,
        dtype: DType,
        start: f64,
        step: f64,
        n: usize,
    ) -> Result<Option<CudaStorage>> {
        CudaStorage::arange(&gpu(ordinal)?, dtype, start, step, n).map(Some)
    }
    fn random(
        ordinal: usize,
        dtype: DType,
        n: usize,
        seed: u64,
        dist: Dist,
    ) -> Result<Option<CudaStorage>> {
        let (normal, a, b) = match dist {
            Dist::Uniform { lo, hi } => (false, lo, hi),
            Dist::Normal { mean, std } => (true, mean, std),
        };
        CudaStorage::random(&gpu(ordinal)?, dtype, n, seed, normal, a, b).map(Some)
    }
}

/// Every driver entry point accel calls after cuInit (`sys::cu*` across the CUDA backend;
/// `cuEventElapsedTime`'s two names are looked up where used, `elapsed_time`).
const USED_SYMBOLS: [&str; 32] = [
    "cuCtxSetCurrent",
    "cuDeviceGet",
    "cuDeviceGetAttribute",
    "cuDeviceGetCount",
    "cuDeviceGetDefaultMemPool",
    "cuDeviceGetName",
    "cuDeviceGetUuid_v2",
    "cuDevicePrimaryCtxRetain",
    "cuDeviceTotalMem_v2",
    "cuEventCreate",
    "cuEventDestroy_v2",
    "cuEventRecord",
    "cuEventSynchronize",
    "cuGetErrorName",
    "cuLaunchKernel",
    "cuMemAllocAsync",
    "cuMemFreeAsync",
    "cuMemGetInfo_v2",
    "cuMemHostAlloc",
    "cuMemHostRegister_v2",
    "cuMemHostUnregister",
    "cuMemPoolGetAttribute",
    "cuMemPoolSetAttribute",
    "cuMemPoolTrimTo",
    "cuMemcpyDtoDAsync_v2",
    "cuMemcpyDtoHAsync_v2",
    "cuMemcpyHtoDAsync_v2",
    "cuMemcpyPeerAsync",
    "cuModuleGetFunction",
    "cuModuleLoadData",
    "cuStreamCreate",
    "cuStreamSynchronize",
];

fn probe_driver() -> Probe {
    let un =
        |reason: String, hint: String| Probe::unavailable(BackendKind::Cuda, true, reason, hint);
    let libs = libs::libraries();
    let cuda = libs
        .iter()
        .find(|l| l.name == crate::backend::native::libs::LibName::Cuda)
        .expect("listed");
    let hosted = crate::system::Hosted::detect();
    if !cuda.is_loaded() {
        // In Colab or Kaggle the fix is the service's menu, not a driver install.
        return un(
            format!(
                "no NVIDIA driver: {}",
                cuda.problem.clone().unwrap_or_default()
            ),
            hosted.map_or_else(
                || cuda.hint.clone().unwrap_or_default(),
                |h| h.gpu_fix().to_string(),
            ),
        );
    }
    let mut version = 0;
    // SAFETY: libcuda is loaded (`cuda.is_loaded()` checked above; `libs::libraries` dlopened
    // it by absolute path, so cudarc's lazy loader finds it and does not panic);
    // cuDriverGetVersion needs no cuInit and writes one int into the local out-pointer.
    unsafe { sys::cuDriverGetVersion(&mut version) };
    let floor = libs::DRIVER_FLOOR.0 * 1000 + libs::DRIVER_FLOOR.1 * 10;
    if version < floor as i32 {
        return un(
            format!(
                "the NVIDIA driver supports CUDA {}, and accel needs CUDA {}.{} or newer",
                libs::cuda_version_text(version.max(0) as u32),
                libs::DRIVER_FLOOR.0,
                libs::DRIVER_FLOOR.1
            ),
            "update the NVIDIA driver to 525 or newer (580 or newer for CUDA 13)".to_string(),
        );
    }
    // The CUDA major whose libraries this process loaded: never one the driver is too old
    // for, never NVRTC of one major with cuBLAS of another.
    let choice = libs::cuda_major();
    if let Some(problem) = &choice.problem {
        return un(problem.clone(), choice.hint.clone().unwrap_or_default());
    }
    crate::base::probe_child::step("cuInit");
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
    // Every entry point accel calls must be there before any is called: a libcuda without
    // one (a driver older than the floor, a partial copy) would stop the process at the
    // first call (cudarc's loader panics), where it can still be named.
    let missing: Vec<&str> = USED_SYMBOLS
        .iter()
        .copied()
        .filter(|s| libs::driver_symbol(s).is_none())
        .collect();
    if !missing.is_empty() {
        return un(
            format!(
                "{} lacks {}: not a complete NVIDIA driver",
                cuda.path
                    .as_deref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| "libcuda".into()),
                missing.join(", ")
            ),
            "reinstall the NVIDIA driver (its libcuda.so.1 exports every CUDA driver entry \
             point), and take other copies of libcuda off LD_LIBRARY_PATH"
                .to_string(),
        );
    }
    let mut count = 0;
    // SAFETY: cuInit succeeded just above; `count` is a local out-pointer (left 0 on error).
    unsafe { sys::cuDeviceGetCount(&mut count) };
    if count <= 0 {
        return no_device("the driver is installed but finds no CUDA GPU".to_string());
    }
    crate::base::probe_child::step("NVML: start and read the driver version");
    let driver = nvml::driver_version();
    let lib_note = |name: crate::backend::native::libs::LibName| -> String {
        match libs.iter().find(|l| l.name == name) {
            Some(l) if l.is_loaded() => l.version.clone().unwrap_or_else(|| "found".into()),
            Some(l) => format!("missing ({})", l.problem.clone().unwrap_or_default()),
            None => "not searched".to_string(),
        }
    };
    let mut devices = Vec::new();
    let mut ids = Vec::new();
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
        let load = nvml::limits(Some(&uuid), Some(&pci)).ok();
        let sm_count = attr(dev, A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT).max(0) as u32;
        let bus_width = attr(dev, A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH).max(0) as u32;
        let mut details = vec![
            ("uuid".to_string(), uuid.clone()),
            (
                "compute_capability".to_string(),
                format!("{}.{}", cc.0, cc.1),
            ),
            ("sm_count".to_string(), sm_count.to_string()),
            ("pci_bus_id".to_string(), pci.clone()),
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
        details.push(("memory_bus_width_bits".to_string(), bus_width.to_string()));
        if let Some(d) = &driver {
            details.push(("driver_version".to_string(), d.clone()));
        }
        details.push((
            "cuda_driver_version".to_string(),
            format!("{}.{}", version / 1000, (version % 1000) / 10),
        ));
        if let Some(h) = hosted {
            details.push(("runtime".to_string(), format!("{} GPU runtime", h.name())));
        }
        details.push((
            "cuda_libraries".to_string(),
            format!("CUDA {} ({})", choice.major, choice.why),
        ));
        use crate::backend::native::libs::LibName;
        for lib in [LibName::Nvrtc, LibName::Cublas, LibName::Cudnn] {
            details.push((lib.to_string(), lib_note(lib)));
        }
        let ccu = (cc.0.max(0) as u32, cc.1.max(0) as u32);
        if let Err(e) = super::kernels::arch_supported(ccu, choice.major) {
            details.push(("warning".to_string(), e));
        }
        let tc = crate::base::caps::TensorCores::of(ccu);
        details.push(("tensor_cores".to_string(), tc.describe()));
        let caps = DeviceCaps {
            dtypes: DType::ALL.to_vec(),
            hardware: Hardware::Accelerator,
            platform: Some("cuda".to_string()),
            timestamp_queries: true,
            compute_capability: Some((cc.0 as u32, cc.1 as u32)),
            sm_count: Some(sm_count),
            max_clock_sm_mhz: load
                .as_ref()
                .and_then(|l| l.max_clock_sm_mhz)
                .or((clock_khz > 0).then_some(clock_khz as u32 / 1000)),
            max_clock_memory_mhz: load.as_ref().and_then(|l| l.max_clock_memory_mhz),
            memory_bus_width_bits: Some(bus_width),
            pcie_max_link: load.as_ref().and_then(|l| l.pcie_max_link),
            uuid: Some(uuid.clone()),
            pci_bus_id: Some(pci.clone()),
            shader_f16: false,
        };
        ids.push((i as usize, uuid, pci));
        devices.push(DeviceInfo {
            device: Device::Cuda(i as usize),
            name,
            memory_total_bytes: Some(total as u64),
            caps,
            details,
        });
    }
    *IDS.lock().unwrap_or_else(|e| e.into_inner()) = ids;
    Probe {
        backend: BackendKind::Cuda,
        compiled: true,
        availability: Availability::Available { devices },
    }
}
