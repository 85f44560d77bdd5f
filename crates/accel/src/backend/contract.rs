//! The contract between the library and its backends: two traits that every backend folder
//! implements, so the compiler checks that none is missing an op.
//!
//! - [`Backend`], the device side: probing, synchronising, memory, caches, timing events and
//!   making storage from host data. Its functions take the `Device` they act on; the dispatch
//!   layer (`storage.rs`) has already checked that the probe listed that device.
//! - [`BackendStorage`], the storage side: tensor data on one device and every op on it, each
//!   with one name and one `Result` signature across backends.
//!
//! A backend that the build leaves out implements both with uninhabited types (`off.rs`), so
//! dispatch code matches every backend in every build and carries no `cfg`.

use crate::base::dtype::CpuStorage;
use crate::base::probe::Probe;
use crate::base::shape::Layout;
use crate::{BackendKind, DType, Device, Result, Shape};

use super::ops::{BinaryOp, MatmulSpec, ReduceOp, UnaryOp};

/// The device side of a backend.
pub(crate) trait Backend {
    /// Tensor data on this backend's devices.
    type Storage: BackendStorage;
    /// A timestamped point in a device's queue.
    type Event;
    /// Which backend this is.
    const KIND: BackendKind;

    /// Which devices exist, with their typed capabilities, or why there are none. Runs once
    /// per process (the registry keeps the answer), never panics, reads the environment but
    /// does not change it, and never asks the registry about any backend.
    fn probe() -> Probe;

    /// Waits for all work queued on `device`.
    fn synchronize(device: Device) -> Result<()>;

    /// (free, total) bytes of the device's memory, from its driver, where known.
    fn device_memory(device: Device) -> Option<(u64, u64)>;

    /// Bytes the backend's allocator keeps for reuse on `device`, beyond live tensors.
    fn cached_bytes(device: Device) -> u64;

    /// Bytes the device's own allocator reports holding (live and free blocks), where it
    /// reports them.
    fn allocator_reserved_bytes(device: Device) -> Option<u64>;

    /// Frees what the allocator keeps for reuse on `device`.
    fn empty_cache(device: Device);

    /// Host memory this backend keeps for reuse (page-locked staging, for one), counted as
    /// the CPU's reserved memory.
    fn host_cached_bytes() -> u64;

    /// Frees the host memory this backend keeps for reuse.
    fn empty_host_cache();

    /// Records a timing event in `device`'s queue; `None` where the device has no clock of
    /// its own.
    fn record_event(device: Device) -> Result<Option<Self::Event>>;

    /// Seconds from `start` to `end` by the device's clock (waits for `end`).
    fn seconds_between(start: &Self::Event, end: &Self::Event) -> Result<f64>;

    /// A copy of host data on `device`.
    fn upload(device: Device, data: &CpuStorage) -> Result<Self::Storage>;

    /// `n` elements of `value` made on the device itself; `None`: fill on the host.
    fn full(device: Device, dtype: DType, n: usize, value: f64) -> Result<Option<Self::Storage>>;

    /// `start + i * step` for i < n made on the device itself; `None`: on the host.
    fn arange(
        device: Device,
        dtype: DType,
        start: f64,
        step: f64,
        n: usize,
    ) -> Result<Option<Self::Storage>>;

    /// Random numbers made on the device itself (uniform in [a, b), or normal with mean a and
    /// deviation b), from `seed`; `None`: drawn on the host.
    fn random(
        device: Device,
        dtype: DType,
        n: usize,
        seed: u64,
        dist: Dist,
    ) -> Result<Option<Self::Storage>>;
}

/// A distribution for [`Backend::random`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Dist {
    /// Uniform in [lo, hi).
    Uniform { lo: f64, hi: f64 },
    /// Normal with this mean and standard deviation.
    Normal { mean: f64, std: f64 },
}

/// The storage side of a backend: tensor data on one device, and every op on it. Views are
/// given by their `Layout`, which `Tensor` has checked to lie inside the storage; results are
/// dense (contiguous) storage of the output shape.
pub(crate) trait BackendStorage: Sized + std::fmt::Debug {
    /// The element type.
    fn dtype(&self) -> DType;

    /// Elements held.
    fn len(&self) -> usize;

    /// A host copy of the view `l`, contiguous.
    fn to_cpu(&self, l: &Layout) -> Result<CpuStorage>;

    /// Copies the view `l`, contiguous, into `dst` (exactly its bytes), such as page-locked
    /// host memory.
    fn to_host(&self, l: &Layout, dst: &mut [u8]) -> Result<()>;

    /// A contiguous copy of the view `l` on `device`, another device of the same backend,
    /// when a direct path exists; `None`: go through the host.
    fn to_device_direct(&self, l: &Layout, device: Device) -> Result<Option<Self>>;

    /// A contiguous copy of the view `l`.
    fn copy_strided(&self, l: &Layout) -> Result<Self>;

    /// The view `l` converted to `dtype`.
    fn to_dtype(&self, l: &Layout, dtype: DType) -> Result<Self>;

    /// `op` elementwise over two views of one dtype, broadcast to `out`.
    fn binary(
        &self,
        op: BinaryOp,
        ll: &Layout,
        rhs: &Self,
        rl: &Layout,
        out: &Shape,
    ) -> Result<Self>;

    /// `op` elementwise over the view `l`.
    fn unary(&self, op: UnaryOp, l: &Layout) -> Result<Self>;

    /// Reduces the view `l` over `dim` (every dimension when `None`) into `out_dtype`, which
    /// `ReduceOp::out_dtype` decided.
    fn reduce(
        &self,
        op: ReduceOp,
        l: &Layout,
        dim: Option<usize>,
        out_dtype: DType,
    ) -> Result<Self>;

    /// The batched product of two views.
    fn matmul(&self, rhs: &Self, spec: &MatmulSpec) -> Result<Self>;
}

/// The event type of a backend whose device has no clock of its own (the CPU, whose ops have
/// finished when they return): no value of it exists.
#[derive(Debug)]
pub(crate) enum NoEvent {}
