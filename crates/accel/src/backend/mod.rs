//! Backends. The public surface is enums (`Device`, and `Storage` here); each backend lives in
//! its own folder and is reached through the `match` arms below. Adding a backend means adding
//! its folder, a `Storage` variant and the arms that the compiler then asks for — there is no
//! catch-all arm, on purpose.

pub(crate) mod cpu;
pub mod cuda;
pub mod mps;
pub mod wgpu;
pub mod xla;

use std::sync::OnceLock;

use crate::probe::{Availability, DeviceInfo, Probe};
use crate::shape::Layout;
use crate::{DType, Device, Error, Result, Shape};
use cpu::CpuStorage;

/// Elementwise operations of two operands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Maximum,
}

impl BinaryOp {
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Maximum => "maximum",
        }
    }
}

/// Elementwise operations of one operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnaryOp {
    Neg,
    Relu,
    Exp,
}

/// Reductions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReduceOp {
    Sum,
    Mean,
    Max,
}

/// Tensor data on some device.
#[derive(Debug)]
pub(crate) enum Storage {
    Cpu(CpuStorage),
}

impl Storage {
    pub fn dtype(&self) -> DType {
        match self {
            Storage::Cpu(s) => s.dtype(),
        }
    }

    /// A placeholder that owns nothing.
    pub fn empty() -> Storage {
        Storage::Cpu(CpuStorage::F32(Vec::new()))
    }

    /// Hands the memory back to the backend's allocator (called when the last tensor using
    /// it is dropped).
    pub fn release(self) {
        match self {
            Storage::Cpu(s) => s.release(),
        }
    }

    /// Bytes cached by the backend's allocator for `device`, beyond live tensors.
    pub fn cached_bytes(device: Device) -> u64 {
        match device {
            Device::Cpu => cpu::alloc::cached_bytes(),
            Device::Cuda(_) | Device::Mps | Device::Xla(_) | Device::Wgpu(_) => 0,
        }
    }

    /// Frees what the allocator caches for `device`.
    pub fn empty_cache(device: Device) {
        match device {
            Device::Cpu => cpu::alloc::empty_cache(),
            Device::Cuda(_) | Device::Mps | Device::Xla(_) | Device::Wgpu(_) => {}
        }
    }

    pub fn size_in_bytes(&self) -> usize {
        match self {
            Storage::Cpu(s) => s.len() * s.dtype().size_in_bytes(),
        }
    }

    /// A host copy of the view `l`, contiguous.
    pub fn to_cpu(&self, l: &Layout) -> Result<CpuStorage> {
        match self {
            Storage::Cpu(s) => Ok(s.copy_strided(l)),
        }
    }

    /// Moves host data onto `device`.
    pub fn from_cpu(data: CpuStorage, device: Device) -> Result<Storage> {
        match device {
            Device::Cpu => Ok(Storage::Cpu(data)),
            Device::Cuda(_) | Device::Mps | Device::Xla(_) | Device::Wgpu(_) => {
                // `Device::check` rejects these before any tensor reaches them.
                Err(unavailable_error(device))
            }
        }
    }

    pub fn copy_strided(&self, l: &Layout) -> Result<Storage> {
        match self {
            Storage::Cpu(s) => Ok(Storage::Cpu(s.copy_strided(l))),
        }
    }

    pub fn to_dtype(&self, l: &Layout, dtype: DType) -> Result<Storage> {
        match self {
            Storage::Cpu(s) => Ok(Storage::Cpu(s.to_dtype(l, dtype))),
        }
    }

    pub fn binary(
        &self,
        op: BinaryOp,
        ll: &Layout,
        rhs: &Storage,
        rl: &Layout,
        out: &Shape,
    ) -> Result<Storage> {
        match (self, rhs) {
            (Storage::Cpu(a), Storage::Cpu(b)) => Ok(Storage::Cpu(a.binary(op, ll, b, rl, out)?)),
        }
    }

    pub fn unary(&self, op: UnaryOp, l: &Layout) -> Result<Storage> {
        match self {
            Storage::Cpu(s) => Ok(Storage::Cpu(s.unary(op, l))),
        }
    }

    pub fn reduce(&self, op: ReduceOp, l: &Layout, dim: Option<usize>) -> Result<Storage> {
        match self {
            Storage::Cpu(s) => Ok(Storage::Cpu(s.reduce(op, l, dim))),
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub fn matmul(
        &self,
        rhs: &Storage,
        bsz: usize,
        m: usize,
        n: usize,
        k: usize,
        a: (usize, usize, usize, usize),
        b: (usize, usize, usize, usize),
    ) -> Result<Storage> {
        match (self, rhs) {
            (Storage::Cpu(x), Storage::Cpu(y)) => {
                Ok(Storage::Cpu(x.matmul(y, bsz, m, n, k, a, b)?))
            }
        }
    }
}

/// Every backend's probe, in `Device::best` order after the CPU. Probed once per process:
/// availability does not change while we run, and probing a driver can be slow.
pub(crate) fn probe_all() -> &'static [Probe] {
    static PROBES: OnceLock<Vec<Probe>> = OnceLock::new();
    PROBES.get_or_init(|| {
        vec![
            cpu_probe(),
            cuda::probe(),
            mps::probe(),
            xla::probe(),
            wgpu::probe(),
        ]
    })
}

pub(crate) fn probe_of(kind: &str) -> Option<&'static Probe> {
    probe_all().iter().find(|p| p.backend == kind)
}

pub(crate) fn first_available(kind: &str) -> Option<Device> {
    probe_of(kind)?.devices().first().map(|d| d.device)
}

fn cpu_probe() -> Probe {
    let sys = crate::system::cpu_info();
    let mut details = vec![
        ("logical_cores".to_string(), sys.logical_cores.to_string()),
        (
            "threads".to_string(),
            rayon::current_num_threads().to_string(),
        ),
        ("simd".to_string(), sys.simd.join(" ")),
    ];
    if let Some(mhz) = sys.frequency_mhz {
        details.push(("frequency_mhz".to_string(), mhz.to_string()));
    }
    Probe {
        backend: "cpu",
        compiled: true,
        availability: Availability::Available {
            devices: vec![DeviceInfo {
                device: Device::Cpu,
                name: sys.brand,
                memory_total_bytes: crate::system::memory().ok().map(|m| m.total_bytes),
                details,
            }],
        },
    }
}

fn available_list() -> String {
    probe_all()
        .iter()
        .flat_map(|p| p.devices().iter().map(|d| d.device.to_string()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn unavailable_error(device: Device) -> Error {
    let (reason, hint) = match probe_of(device.kind()).map(|p| &p.availability) {
        Some(Availability::Unavailable { reason, hint }) => (reason.clone(), hint.clone()),
        Some(Availability::Available { devices }) => (
            format!(
                "there {} {} {} device{}",
                if devices.len() == 1 { "is" } else { "are" },
                devices.len(),
                device.kind(),
                if devices.len() == 1 { "" } else { "s" }
            ),
            "run `accel devices` to see them".to_string(),
        ),
        None => ("unknown backend".to_string(), String::new()),
    };
    Error::DeviceUnavailable {
        device,
        reason,
        hint,
        available: available_list(),
    }
}

pub(crate) fn check(device: Device) -> Result<()> {
    let exists = probe_of(device.kind())
        .map(|p| p.devices().iter().any(|d| d.device == device))
        .unwrap_or(false);
    if exists {
        Ok(())
    } else {
        Err(unavailable_error(device))
    }
}

pub(crate) fn device_name(device: Device) -> Result<String> {
    probe_of(device.kind())
        .and_then(|p| {
            p.devices()
                .iter()
                .find(|d| d.device == device)
                .map(|d| d.name.clone())
        })
        .ok_or_else(|| unavailable_error(device))
}

pub(crate) fn synchronize(device: Device) -> Result<()> {
    match device {
        // CPU kernels return when their work is done.
        Device::Cpu => Ok(()),
        Device::Cuda(_) | Device::Mps | Device::Xla(_) | Device::Wgpu(_) => {
            Err(unavailable_error(device))
        }
    }
}

/// The probe of a backend that this version does not implement yet, or that the build left
/// out. Shared by the accelerator folders until each lands.
pub(crate) fn not_implemented(backend: &'static str, compiled: bool, feature: &str) -> Probe {
    if compiled {
        Probe::unavailable(
            backend,
            true,
            "not implemented in this version",
            format!("the {backend} backend is planned; use the cpu device meanwhile"),
        )
    } else {
        Probe::unavailable(
            backend,
            false,
            "not compiled into this build",
            format!("rebuild with `--features {feature}`"),
        )
    }
}
