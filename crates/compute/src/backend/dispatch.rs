//! Dispatch: the one place that turns a `Device` or a `Storage` into a call on one backend's
//! implementation of the contract. Every backend exists in every build (compiled-out ones as
//! `off.rs` stand-ins), so nothing here carries a `cfg`, and every `match` names every
//! backend: adding one is a compile error until each arm exists.

use crate::base::dtype::{CpuStorage, HostSlice};
use crate::base::shape::Layout;
use crate::{BackendKind, DType, Device, Error, Result, Shape};

use super::contract::{Backend, BackendStorage, Dist, PinnedHost};
use super::ops::{BinaryOp, MatmulSpec, ReduceOp, UnaryOp};
use super::registry::{check, on_backend};
use super::{cpu, cuda, wgpu, xla};

/// Runs `$body` with `$s` bound to the backend's storage inside `$storage`.
macro_rules! on_storage {
    ($storage:expr, $s:ident => $body:expr) => {
        match $storage {
            Storage::Cpu($s) => $body,
            Storage::Cuda($s) => $body,
            Storage::Xla($s) => $body,
            Storage::Wgpu($s) => $body,
        }
    };
}

/// Tensor data on some device. `mps` tensors are wgpu storage (its adapter is a wgpu one).
#[derive(Debug)]
pub(crate) enum Storage {
    Cpu(CpuStorage),
    Cuda(cuda::CudaStorage),
    Xla(xla::XlaStorage),
    Wgpu(wgpu::WgpuStorage),
}

impl From<CpuStorage> for Storage {
    fn from(s: CpuStorage) -> Storage {
        Storage::Cpu(s)
    }
}
impl From<cuda::CudaStorage> for Storage {
    fn from(s: cuda::CudaStorage) -> Storage {
        Storage::Cuda(s)
    }
}
impl From<xla::XlaStorage> for Storage {
    fn from(s: xla::XlaStorage) -> Storage {
        Storage::Xla(s)
    }
}
impl From<wgpu::WgpuStorage> for Storage {
    fn from(s: wgpu::WgpuStorage) -> Storage {
        Storage::Wgpu(s)
    }
}

/// Both operands' storage of one backend, or the internal error that they are not.
macro_rules! same_backend {
    ($a:expr, $b:expr, $op:expr, ($x:ident, $y:ident) => $body:expr) => {
        match ($a, $b) {
            (Storage::Cpu($x), Storage::Cpu($y)) => $body.map(Storage::from),
            (Storage::Cuda($x), Storage::Cuda($y)) => $body.map(Storage::from),
            (Storage::Xla($x), Storage::Xla($y)) => $body.map(Storage::from),
            (Storage::Wgpu($x), Storage::Wgpu($y)) => $body.map(Storage::from),
            _ => Err(Error::internal(format!(
                "{}: operands on different backends reached the kernel",
                $op
            ))),
        }
    };
}

impl Storage {
    pub fn dtype(&self) -> DType {
        on_storage!(self, s => BackendStorage::dtype(s))
    }

    pub fn len(&self) -> usize {
        on_storage!(self, s => BackendStorage::len(s))
    }

    pub fn size_in_bytes(&self) -> usize {
        self.len() * self.dtype().size_in_bytes()
    }

    /// A placeholder that owns nothing.
    pub fn empty() -> Storage {
        Storage::Cpu(CpuStorage::F32(Vec::new()))
    }

    /// Hands the memory back to the backend's allocator (called when the last tensor using
    /// it is dropped). Accelerator storage frees itself when dropped (CUDA: stream-ordered).
    pub fn release(self) {
        match self {
            Storage::Cpu(s) => s.release(),
            Storage::Cuda(_) | Storage::Xla(_) | Storage::Wgpu(_) => {}
        }
    }

    /// Moves host data onto `device` (the host data is a temporary: freed, not cached).
    pub fn from_cpu(data: CpuStorage, device: Device) -> Result<Storage> {
        match device {
            Device::Cpu => Ok(Storage::Cpu(data)),
            _ => Storage::upload(data.as_host(), device),
        }
    }

    /// A copy of host data on `device`.
    pub fn upload(data: HostSlice<'_>, device: Device) -> Result<Storage> {
        check(device)?;
        on_backend!(device.backend(), B => B::upload(device.ordinal(), data).map(Storage::from))
    }

    /// `n` elements of `dtype` in host memory that `device` copies to and from directly
    /// (`pin_memory()`), from that device's backend.
    pub fn pinned_host(device: Device, dtype: DType, n: usize) -> Result<PinnedHost> {
        check(device)?;
        on_backend!(device.backend(), B => B::pinned_host(device.ordinal(), dtype, n))
    }

    /// `n` elements of `value` made on `device` itself, when it can (None: fill on the host).
    pub fn full(device: Device, dtype: DType, n: usize, value: f64) -> Result<Option<Storage>> {
        check(device)?;
        on_backend!(device.backend(), B => Ok(B::full(device.ordinal(), dtype, n, value)?.map(Storage::from)))
    }

    /// `start + i * step` for i < n, made on `device` itself when it can.
    pub fn arange(
        device: Device,
        dtype: DType,
        start: f64,
        step: f64,
        n: usize,
    ) -> Result<Option<Storage>> {
        check(device)?;
        on_backend!(device.backend(), B => Ok(B::arange(device.ordinal(), dtype, start, step, n)?.map(Storage::from)))
    }

    /// Random numbers made on `device` itself when it can. `seed` comes from the global
    /// generator.
    pub fn random(
        device: Device,
        dtype: DType,
        n: usize,
        seed: u64,
        dist: Dist,
    ) -> Result<Option<Storage>> {
        check(device)?;
        on_backend!(device.backend(), B => Ok(B::random(device.ordinal(), dtype, n, seed, dist)?.map(Storage::from)))
    }

    /// A host copy of the view `l`, contiguous.
    pub fn to_cpu(&self, l: &Layout) -> Result<CpuStorage> {
        on_storage!(self, s => BackendStorage::to_cpu(s, l))
    }

    /// Copies the view `l` into `dst` (exactly its bytes).
    pub fn to_host(&self, l: &Layout, dst: &mut [u8]) -> Result<()> {
        on_storage!(self, s => BackendStorage::to_host(s, l, dst))
    }

    /// A contiguous copy of the view `l` on `device`, when a direct path exists (GPU to GPU
    /// of one backend); None means: go through the host.
    pub fn to_device_direct(&self, l: &Layout, device: Device) -> Result<Option<Storage>> {
        let same = matches!(
            (self, device.backend()),
            (Storage::Cuda(_), BackendKind::Cuda)
                | (Storage::Xla(_), BackendKind::Xla)
                | (Storage::Wgpu(_), BackendKind::Wgpu)
        );
        if !same {
            return Ok(None);
        }
        check(device)?;
        on_storage!(self, s => Ok(BackendStorage::to_device_direct(s, l, device.ordinal())?.map(Storage::from)))
    }

    pub fn copy_strided(&self, l: &Layout) -> Result<Storage> {
        on_storage!(self, s => BackendStorage::copy_strided(s, l).map(Storage::from))
    }

    pub fn to_dtype(&self, l: &Layout, dtype: DType) -> Result<Storage> {
        on_storage!(self, s => BackendStorage::to_dtype(s, l, dtype).map(Storage::from))
    }

    pub fn binary(
        &self,
        op: BinaryOp,
        ll: &Layout,
        rhs: &Storage,
        rl: &Layout,
        out: &Shape,
    ) -> Result<Storage> {
        same_backend!(self, rhs, op.name(), (a, b) => BackendStorage::binary(a, op, ll, b, rl, out))
    }

    pub fn unary(&self, op: UnaryOp, l: &Layout) -> Result<Storage> {
        on_storage!(self, s => BackendStorage::unary(s, op, l).map(Storage::from))
    }

    pub fn half_scalar(&self, op: BinaryOp, l: &Layout, v: f32) -> Result<Option<Storage>> {
        on_storage!(self, s => Ok(BackendStorage::half_scalar(s, op, l, v)?.map(Storage::from)))
    }

    pub fn reduce(
        &self,
        op: ReduceOp,
        l: &Layout,
        dim: Option<usize>,
        out_dtype: DType,
    ) -> Result<Storage> {
        on_storage!(self, s => BackendStorage::reduce(s, op, l, dim, out_dtype).map(Storage::from))
    }

    pub fn matmul(&self, rhs: &Storage, spec: &MatmulSpec) -> Result<Storage> {
        same_backend!(self, rhs, "matmul", (a, b) => BackendStorage::matmul(a, b, spec))
    }
}

// ---- the device side -------------------------------------------------------------------------

/// Waits for all work queued on `device`.
pub(crate) fn synchronize(device: Device) -> Result<()> {
    check(device)?;
    on_backend!(device.backend(), B => B::synchronize(device.ordinal()))
}

/// (free, total) bytes of `device`'s memory, from its driver (for the CPU: available and
/// total RAM), where known.
pub(crate) fn device_memory(device: Device) -> Option<(u64, u64)> {
    on_backend!(device.backend(), B => B::device_memory(device.ordinal()))
}

/// Bytes cached by the allocators for `device`, beyond live tensors; for the CPU, every
/// backend's host caches (pinned staging) too.
pub(crate) fn cached_bytes(device: Device) -> u64 {
    let own = on_backend!(device.backend(), B => B::cached_bytes(device.ordinal()));
    if device == Device::Cpu {
        own + BackendKind::ALL
            .iter()
            .map(|k| on_backend!(k, B => B::host_cached_bytes()))
            .sum::<u64>()
    } else {
        own
    }
}

/// Bytes the device's allocator itself reports holding, where it reports them.
pub(crate) fn allocator_reserved_bytes(device: Device) -> Option<u64> {
    on_backend!(device.backend(), B => B::allocator_reserved_bytes(device.ordinal()))
}

/// Frees what the allocators cache for `device` (for the CPU, every backend's host caches).
pub(crate) fn empty_cache(device: Device) {
    on_backend!(device.backend(), B => B::empty_cache(device.ordinal()));
    if device == Device::Cpu {
        for k in BackendKind::ALL {
            on_backend!(k, B => B::empty_host_cache());
        }
    }
}

/// Which clock times `device`'s work, in words.
pub(crate) fn timer_name(device: Device) -> &'static str {
    on_backend!(device.backend(), B => B::timer_name(device.ordinal()))
}

/// `device`'s matmul peak in `dtype`, from its backend and its probed capabilities.
pub(crate) fn matmul_peak(device: Device, dtype: DType) -> Option<crate::base::cpu_peak::Peak> {
    let caps = super::registry::caps(device)?;
    on_backend!(device.backend(), B => B::matmul_peak(caps, dtype))
}

/// The kernels `device`'s backend chose for this machine, (name, description).
pub(crate) fn kernels(device: Device) -> Vec<(&'static str, String)> {
    on_backend!(device.backend(), B => B::kernels())
}

/// A point in a device's queue with a timestamp, for device-side timing: a CUDA event, a
/// wgpu timestamp query, or for XLA the moment PJRT reports the queued work done.
pub(crate) enum DeviceEvent {
    Cuda(<cuda::Cuda as Backend>::Event),
    Xla(<xla::Xla as Backend>::Event),
    Wgpu(<wgpu::Wgpu as Backend>::Event),
}

impl DeviceEvent {
    /// Seconds from `start` to this event, by the device's clock (waits for this event).
    pub fn seconds_since(&self, start: &DeviceEvent) -> Result<f64> {
        match (start, self) {
            (DeviceEvent::Cuda(s), DeviceEvent::Cuda(e)) => cuda::Cuda::seconds_between(s, e),
            (DeviceEvent::Xla(s), DeviceEvent::Xla(e)) => xla::Xla::seconds_between(s, e),
            (DeviceEvent::Wgpu(s), DeviceEvent::Wgpu(e)) => wgpu::Wgpu::seconds_between(s, e),
            _ => Err(Error::internal("timing events of two different devices")),
        }
    }
}

/// Records a timing event in `device`'s queue; None where the device has no such clock (the
/// CPU, whose ops finish before they return).
pub(crate) fn record_event(device: Device) -> Result<Option<DeviceEvent>> {
    check(device)?;
    Ok(match device.backend() {
        BackendKind::Cpu => cpu::Cpu::record_event(device.ordinal())?.map(|e| match e {}),
        BackendKind::Cuda => cuda::Cuda::record_event(device.ordinal())?.map(DeviceEvent::Cuda),
        BackendKind::Xla => xla::Xla::record_event(device.ordinal())?.map(DeviceEvent::Xla),
        BackendKind::Wgpu => wgpu::Wgpu::record_event(device.ordinal())?.map(DeviceEvent::Wgpu),
        BackendKind::Mps => wgpu::Mps::record_event(device.ordinal())?.map(DeviceEvent::Wgpu),
    })
}
