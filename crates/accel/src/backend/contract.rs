//! The contract between the library and its backends: two traits that every backend folder
//! implements, so the compiler checks that none is missing an op.
//!
//! - [`Backend`], the device side: probing, synchronising, memory, caches, timing events and
//!   making storage from host data. Its functions take the ordinal of the device they act on
//!   (the backend's own index); the dispatch layer (`dispatch.rs`) has already checked that
//!   the probe listed that device and turned the `Device` into that ordinal.
//! - [`BackendStorage`], the storage side: tensor data on one device and every op on it, each
//!   with one name and one `Result` signature across backends.
//!
//! A backend that the build leaves out implements both with uninhabited types (`off.rs`), so
//! dispatch code matches every backend in every build and carries no `cfg`.

use crate::base::caps::DeviceCaps;
use crate::base::cpu_peak::Peak;
use crate::base::dtype::CpuStorage;
use crate::base::probe::Probe;
use crate::base::shape::Layout;
use crate::{BackendKind, DType, Result, Shape};

use super::ops::{BinaryOp, MatmulSpec, ReduceOp, UnaryOp};

/// The device side of a backend. Its calls name a device by its **ordinal**: the backend's own
/// index of it (`cuda:1` is ordinal 1 of the cuda backend; the CPU and `mps`, one device each,
/// are ordinal 0). The dispatch layer (`dispatch.rs`) has already checked that the probe listed
/// that device, so no backend matches `Device` again. The defaults are what a backend without
/// the feature does: nothing to wait for, no driver memory figure, no cache, no clock, no
/// device-side fill (the host makes the data and uploads it).
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

    /// A copy of host data on device `ordinal`.
    fn upload(ordinal: usize, data: &CpuStorage) -> Result<Self::Storage>;

    /// Seconds from `start` to `end` by the device's clock (waits for `end`).
    fn seconds_between(start: &Self::Event, end: &Self::Event) -> Result<f64>;

    /// Waits for all work queued on device `ordinal`.
    fn synchronize(_ordinal: usize) -> Result<()> {
        Ok(())
    }

    /// (free, total) bytes of the device's memory, from its driver, where known.
    fn device_memory(_ordinal: usize) -> Option<(u64, u64)> {
        None
    }

    /// Bytes the backend's allocator keeps for reuse on the device, beyond live tensors.
    fn cached_bytes(_ordinal: usize) -> u64 {
        0
    }

    /// Bytes the device's own allocator reports holding (live and free blocks), where it
    /// reports them.
    fn allocator_reserved_bytes(_ordinal: usize) -> Option<u64> {
        None
    }

    /// Frees what the allocator keeps for reuse on the device.
    fn empty_cache(_ordinal: usize) {}

    /// Host memory this backend keeps for reuse (page-locked staging, for one), counted as
    /// the CPU's reserved memory.
    fn host_cached_bytes() -> u64 {
        0
    }

    /// Frees the host memory this backend keeps for reuse.
    fn empty_host_cache() {}

    /// Records a timing event in the device's queue; `None` where the device has no clock of
    /// its own.
    fn record_event(_ordinal: usize) -> Result<Option<Self::Event>> {
        Ok(None)
    }

    /// Which clock `record_event` reads on the device, in words, for reports.
    fn timer_name(_ordinal: usize) -> &'static str {
        WALL_CLOCK
    }

    /// The device's peak for matmul in `dtype`, from its capabilities (the probe's), with
    /// the formula; `None` where the backend cannot derive one.
    fn matmul_peak(_caps: &DeviceCaps, _dtype: DType) -> Option<Peak> {
        None
    }

    /// The backend's own kernels as it chose them for this machine, (name, description),
    /// for `accel bench --explain`.
    fn kernels() -> Vec<(&'static str, String)> {
        Vec::new()
    }

    /// `n` elements of `value` made on the device itself; `None`: fill on the host.
    fn full(
        _ordinal: usize,
        _dtype: DType,
        _n: usize,
        _value: f64,
    ) -> Result<Option<Self::Storage>> {
        Ok(None)
    }

    /// `start + i * step` for i < n made on the device itself; `None`: on the host.
    fn arange(
        _ordinal: usize,
        _dtype: DType,
        _start: f64,
        _step: f64,
        _n: usize,
    ) -> Result<Option<Self::Storage>> {
        Ok(None)
    }

    /// Random numbers made on the device itself (uniform in [a, b), or normal with mean a and
    /// deviation b), from `seed`; `None`: drawn on the host.
    fn random(
        _ordinal: usize,
        _dtype: DType,
        _n: usize,
        _seed: u64,
        _dist: Dist,
    ) -> Result<Option<Self::Storage>> {
        Ok(None)
    }
}

/// What a device without a clock of its own is timed by.
pub(crate) const WALL_CLOCK: &str = "none (wall clock after synchronize)";

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

    /// A contiguous copy of the view `l` on device `ordinal` of the same backend, when a
    /// direct path exists; `None` (the default): go through the host.
    fn to_device_direct(&self, _l: &Layout, _ordinal: usize) -> Result<Option<Self>> {
        Ok(None)
    }

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
