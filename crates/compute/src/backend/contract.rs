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
use crate::base::dtype::{CpuStorage, HostSlice};
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
    fn upload(ordinal: usize, data: HostSlice<'_>) -> Result<Self::Storage>;

    /// `n` elements of `dtype` in host memory that device `ordinal`'s copies read and write
    /// directly, without staging (`pin_memory()`: page-locked for CUDA). The default: this
    /// backend has no such memory.
    fn pinned_host(_ordinal: usize, _dtype: DType, _n: usize) -> Result<PinnedHost> {
        Err(crate::Error::invalid(
            "pin_memory",
            format!(
                "pinned memory is for copies to and from CUDA GPUs; {} copies from any host memory",
                Self::KIND.name()
            ),
        ))
    }

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

    /// `op` of each element of the bf16 or f16 view `l` and the scalar `v`, as
    /// `Tensor::mul_scalar` and its kin define it for half tensors: the element and `v` in
    /// f32, the result rounded once to the view's dtype. `None` (the default): no fused path
    /// for this view, and the tensor layer converts to f32 and back.
    fn half_scalar(&self, _op: BinaryOp, _l: &Layout, _v: f32) -> Result<Option<Self>> {
        Ok(None)
    }

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

/// Keeps host memory locked for a backend's copies while a CPU storage lives in it, and takes
/// the storage back when the last tensor over it is gone ([`PinnedHost`]).
pub(crate) trait HostLock: Send + Sync + std::fmt::Debug {
    /// Takes back the storage this lock covers: kept locked for the next request of its size,
    /// or unlocked first and then freed. The storage must be the one `Backend::pinned_host`
    /// returned with this lock.
    fn give_back(self: Box<Self>, storage: CpuStorage);
}

/// Host memory from `Backend::pinned_host`: an ordinary CPU storage (from the global
/// allocator, so it is freed as any other), the element where the locked window of the
/// requested length starts, and the lock, which gets the storage back on drop (or through
/// [`PinnedHost::into_parts`], to a `Buffer` that gives it back itself).
#[derive(Debug)]
pub(crate) struct PinnedHost {
    storage: Option<CpuStorage>,
    offset: usize,
    len: usize,
    lock: Option<Box<dyn HostLock>>,
}

impl PinnedHost {
    /// `len` elements of `storage` from `offset` on, locked by `lock`.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))] // only CUDA locks host memory
    pub fn new(storage: CpuStorage, offset: usize, len: usize, lock: Box<dyn HostLock>) -> Self {
        assert!(offset
            .checked_add(len)
            .is_some_and(|end| end <= storage.len()));
        PinnedHost {
            storage: Some(storage),
            offset,
            len,
            lock: Some(lock),
        }
    }

    /// The element where the locked window starts.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// The window's bytes, to fill.
    pub fn window_mut(&mut self) -> &mut [u8] {
        let storage = self.storage.as_mut().expect("held until into_parts");
        let size = storage.dtype().size_in_bytes();
        &mut storage.as_bytes_mut()[self.offset * size..(self.offset + self.len) * size]
    }

    /// The storage and its lock, for a holder that gives the storage back itself
    /// (`HostLock::give_back`) when it is done with it.
    pub fn into_parts(mut self) -> (CpuStorage, Box<dyn HostLock>) {
        let storage = self.storage.take().expect("held until into_parts");
        let lock = self.lock.take().expect("held until into_parts");
        (storage, lock)
    }
}

impl Drop for PinnedHost {
    fn drop(&mut self) {
        if let (Some(storage), Some(lock)) = (self.storage.take(), self.lock.take()) {
            lock.give_back(storage);
        }
    }
}
