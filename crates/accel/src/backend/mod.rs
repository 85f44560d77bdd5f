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

/// One operand of a batched matmul, in elements: (batch stride, row stride, column stride,
/// offset). A batch stride of 0 reuses one matrix for every batch.
pub(crate) type MatView = (usize, usize, usize, usize);

/// A batched matmul as every backend receives it: `bsz` products of (m x k) by (k x n), with
/// each operand's view of its buffer. The result is dense, `bsz` x m x n.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MatmulSpec {
    pub bsz: usize,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub a: MatView,
    pub b: MatView,
}

impl MatmulSpec {
    /// The product of views `a` and `b` as `Tensor::matmul` defines it: 2-d or 3-d operands,
    /// matching inner sizes, batches equal or one of them 1 (a batch of 1 is used for every
    /// batch of the other side, a batch of 0 included). Returns the output shape and the spec,
    /// or None for the spec when there is nothing to multiply (an empty output, or k = 0).
    pub fn plan(a: &Layout, b: &Layout) -> Result<(Shape, Option<MatmulSpec>)> {
        const OP: &str = "matmul";
        let (ra, rb) = (a.shape.rank(), b.shape.rank());
        if !(2..=3).contains(&ra) || !(2..=3).contains(&rb) {
            return Err(Error::shape(
                OP,
                &a.shape,
                &b.shape,
                "both operands must be 2-d matrices or 3-d batches of matrices",
            ));
        }
        let (da, db) = (a.shape.dims(), b.shape.dims());
        let (m, k) = (da[ra - 2], da[ra - 1]);
        let (k2, n) = (db[rb - 2], db[rb - 1]);
        if k != k2 {
            return Err(Error::shape(
                OP,
                &a.shape,
                &b.shape,
                format!("the left operand has {k} columns but the right one has {k2} rows"),
            ));
        }
        let batch = |r: usize, d: &[usize]| if r == 3 { d[0] } else { 1 };
        let (ba, bb) = (batch(ra, da), batch(rb, db));
        if ba != bb && ba != 1 && bb != 1 {
            return Err(Error::shape(
                OP,
                &a.shape,
                &b.shape,
                format!("batch sizes {ba} and {bb} differ (one of them may be 1)"),
            ));
        }
        let bsz = if ba == 1 { bb } else { ba };
        let out = if ra == 3 || rb == 3 {
            Shape::from((bsz, m, n))
        } else {
            Shape::from((m, n))
        };
        if out.elem_count() == 0 || k == 0 {
            return Ok((out, None));
        }
        let view = |l: &Layout, r: usize, bs: usize| {
            let s = &l.strides;
            let batch_stride = if r == 3 && bs > 1 { s[0] } else { 0 };
            (batch_stride, s[r - 2], s[r - 1], l.offset)
        };
        let spec = MatmulSpec {
            bsz,
            m,
            n,
            k,
            a: view(a, ra, ba),
            b: view(b, rb, bb),
        };
        Ok((out, Some(spec)))
    }

    /// Checks that every element each operand's view reads lies inside a storage of
    /// `a_len` / `b_len` elements, with checked arithmetic; the kernels' pointer arithmetic
    /// relies on it. `Tensor::matmul` builds specs from in-bounds layouts (so this holds),
    /// and never passes an empty product or k = 0.
    pub fn check_in_bounds(&self, a_len: usize, b_len: usize) -> Result<()> {
        let last = |v: MatView, rows: usize, cols: usize| -> Option<usize> {
            let (bs, rs, cs, off) = v;
            off.checked_add(self.bsz.checked_sub(1)?.checked_mul(bs)?)?
                .checked_add(rows.checked_sub(1)?.checked_mul(rs)?)?
                .checked_add(cols.checked_sub(1)?.checked_mul(cs)?)
        };
        let ok = |v, rows, cols, len| last(v, rows, cols).is_some_and(|l| l < len);
        if ok(self.a, self.m, self.k, a_len) && ok(self.b, self.k, self.n, b_len) {
            Ok(())
        } else {
            Err(Error::System(format!(
                "internal error: matmul operands {self:?} reach past their storage of {a_len} and {b_len} elements; please report this"
            )))
        }
    }
}

/// Reductions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReduceOp {
    Sum,
    Mean,
    Max,
}

/// Page-locked host memory that a pinned CPU tensor lives in (CUDA builds only).
#[cfg(feature = "cuda")]
pub(crate) use cuda::pinned::PinnedBlock;
#[cfg(not(feature = "cuda"))]
#[derive(Debug)]
pub(crate) enum PinnedBlock {}

/// Copies bytes with several threads when there are many (a single core's memcpy does not
/// reach the memory's bandwidth).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn par_copy(dst: &mut [u8], src: &[u8]) {
    use rayon::prelude::*;
    const PIECE: usize = 2 << 20;
    if dst.len() <= PIECE {
        dst.copy_from_slice(src);
    } else {
        dst.par_chunks_mut(PIECE)
            .zip(src.par_chunks(PIECE))
            .for_each(|(d, s)| d.copy_from_slice(s));
    }
}

/// Tensor data on some device.
#[derive(Debug)]
pub(crate) enum Storage {
    Cpu(CpuStorage),
    #[cfg(feature = "cuda")]
    Cuda(cuda::storage::CudaStorage),
    #[cfg(all(feature = "xla", target_os = "linux"))]
    Xla(xla::storage::XlaStorage),
    #[cfg(feature = "wgpu")]
    Wgpu(wgpu::storage::WgpuStorage),
}

/// The `Gpu` of a CUDA device, or the error saying why it cannot be used.
#[cfg(feature = "cuda")]
fn cuda_gpu(i: usize) -> Result<std::sync::Arc<cuda::gpu::Gpu>> {
    cuda::gpu::gpu(i)
}

impl Storage {
    pub fn dtype(&self) -> DType {
        match self {
            Storage::Cpu(s) => s.dtype(),
            #[cfg(feature = "cuda")]
            Storage::Cuda(s) => s.dtype,
            #[cfg(all(feature = "xla", target_os = "linux"))]
            Storage::Xla(s) => s.dtype,
            #[cfg(feature = "wgpu")]
            Storage::Wgpu(s) => s.dtype,
        }
    }

    /// A placeholder that owns nothing.
    pub fn empty() -> Storage {
        Storage::Cpu(CpuStorage::F32(Vec::new()))
    }

    /// Lets go of CPU data that a pinned block owns (see `cuda::pinned`), without freeing it.
    pub fn forget(self) {
        match self {
            Storage::Cpu(s) => s.forget(),
            #[allow(unreachable_patterns)]
            other => other.release(),
        }
    }

    /// Hands the memory back to the backend's allocator (called when the last tensor using
    /// it is dropped).
    pub fn release(self) {
        match self {
            Storage::Cpu(s) => s.release(),
            // Dropping frees it, stream-ordered.
            #[cfg(feature = "cuda")]
            Storage::Cuda(_) => {}
            #[cfg(all(feature = "xla", target_os = "linux"))]
            Storage::Xla(_) => {}
            #[cfg(feature = "wgpu")]
            Storage::Wgpu(_) => {}
        }
    }

    /// Bytes cached by the backend's allocator for `device`, beyond live tensors.
    pub fn cached_bytes(device: Device) -> u64 {
        match device {
            #[cfg(feature = "cuda")]
            Device::Cpu => cpu::alloc::cached_bytes() + cuda::pinned::cached_bytes(),
            #[cfg(not(feature = "cuda"))]
            Device::Cpu => cpu::alloc::cached_bytes(),
            #[cfg(feature = "cuda")]
            Device::Cuda(i) => cuda::gpu::opened(i).map_or(0, |g| g.cached_bytes()),
            _ => 0,
        }
    }

    /// Bytes the device's allocator itself reports holding (live and free blocks), where it
    /// reports them: wgpu's allocator on Vulkan and DX12, once the device is open.
    pub fn allocator_reserved_bytes(device: Device) -> Option<u64> {
        match device {
            #[cfg(feature = "wgpu")]
            Device::Wgpu(i) => wgpu::storage::allocator_reserved_bytes(i),
            _ => None,
        }
    }

    /// (free, total) bytes of an accelerator's memory, from its driver, where known.
    pub fn device_memory(device: Device) -> Option<(u64, u64)> {
        match device {
            #[cfg(feature = "cuda")]
            Device::Cuda(i) => match cuda::gpu::opened(i) {
                Some(g) => g.mem_info().ok().map(|(f, t)| (f as u64, t as u64)),
                // No context yet (creating one costs memory): ask NVML.
                None => cuda::utilization(i)
                    .ok()
                    .and_then(|l| Some((l.memory_free_bytes?, l.memory_total_bytes?))),
            },
            #[cfg(all(feature = "xla", target_os = "linux"))]
            Device::Xla(i) => xla::storage::memory(i),
            _ => None,
        }
    }

    /// Frees what the allocator caches for `device`.
    pub fn empty_cache(device: Device) {
        match device {
            Device::Cpu => {
                cpu::alloc::empty_cache();
                #[cfg(feature = "cuda")]
                cuda::pinned::empty_cache();
            }
            #[cfg(feature = "cuda")]
            Device::Cuda(i) => {
                if let Some(g) = cuda::gpu::opened(i) {
                    g.empty_cache()
                }
            }
            _ => {}
        }
    }

    /// Number of elements the storage holds.
    pub fn len(&self) -> usize {
        match self {
            Storage::Cpu(s) => s.len(),
            #[cfg(feature = "cuda")]
            Storage::Cuda(s) => s.len,
            #[cfg(all(feature = "xla", target_os = "linux"))]
            Storage::Xla(s) => s.len,
            #[cfg(feature = "wgpu")]
            Storage::Wgpu(s) => s.len,
        }
    }

    pub fn size_in_bytes(&self) -> usize {
        self.len() * self.dtype().size_in_bytes()
    }

    /// A host copy of the view `l`, contiguous.
    pub fn to_cpu(&self, l: &Layout) -> Result<CpuStorage> {
        match self {
            Storage::Cpu(s) => Ok(s.copy_strided(l)),
            #[cfg(feature = "cuda")]
            Storage::Cuda(s) => s.to_cpu(l),
            #[cfg(all(feature = "xla", target_os = "linux"))]
            Storage::Xla(s) => s.to_cpu(l),
            #[cfg(feature = "wgpu")]
            Storage::Wgpu(s) => s.to_cpu(l),
        }
    }

    /// A contiguous copy of the view `l` on `device`, when a direct path exists (GPU to GPU);
    /// None means: go through the host.
    pub fn to_device_direct(&self, l: &Layout, device: Device) -> Result<Option<Storage>> {
        match (self, device) {
            #[cfg(feature = "cuda")]
            (Storage::Cuda(s), Device::Cuda(i)) => {
                Ok(Some(Storage::Cuda(s.to_gpu(l, &cuda_gpu(i)?)?)))
            }
            _ => {
                let _ = l;
                Ok(None)
            }
        }
    }

    /// `n` elements of `value` made on `device` itself, when it can (None: fill on the host).
    pub fn full(device: Device, dtype: DType, n: usize, value: f64) -> Result<Option<Storage>> {
        match device {
            #[cfg(feature = "cuda")]
            Device::Cuda(i) => Ok(Some(Storage::Cuda(cuda::storage::CudaStorage::full(
                &cuda_gpu(i)?,
                dtype,
                n,
                value,
            )?))),
            _ => {
                let _ = (dtype, n, value);
                Ok(None)
            }
        }
    }

    /// `start + i * step` for i < n, made on `device` itself when it can.
    pub fn arange(
        device: Device,
        dtype: DType,
        start: f64,
        step: f64,
        n: usize,
    ) -> Result<Option<Storage>> {
        match device {
            #[cfg(feature = "cuda")]
            Device::Cuda(i) => Ok(Some(Storage::Cuda(cuda::storage::CudaStorage::arange(
                &cuda_gpu(i)?,
                dtype,
                start,
                step,
                n,
            )?))),
            _ => {
                let _ = (dtype, start, step, n);
                Ok(None)
            }
        }
    }

    /// Random numbers made on `device` itself when it can: uniform in [a, b), or normal with
    /// mean a and deviation b. `seed` comes from the global generator.
    #[allow(clippy::too_many_arguments)]
    pub fn random(
        device: Device,
        dtype: DType,
        n: usize,
        seed: u64,
        normal: bool,
        a: f64,
        b: f64,
    ) -> Result<Option<Storage>> {
        match device {
            #[cfg(feature = "cuda")]
            Device::Cuda(i) => Ok(Some(Storage::Cuda(cuda::storage::CudaStorage::random(
                &cuda_gpu(i)?,
                dtype,
                n,
                seed,
                normal,
                a,
                b,
            )?))),
            _ => {
                let _ = (dtype, n, seed, normal, a, b);
                Ok(None)
            }
        }
    }

    /// Moves host data onto `device`.
    pub fn from_cpu(data: CpuStorage, device: Device) -> Result<Storage> {
        match device {
            Device::Cpu => Ok(Storage::Cpu(data)),
            // The host data is a temporary: freed, not cached.
            _ => Storage::upload(&data, device),
        }
    }

    /// A copy of host data on `device` (an accelerator; the CPU copies it).
    pub fn upload(data: &CpuStorage, device: Device) -> Result<Storage> {
        match device {
            Device::Cpu => Ok(Storage::Cpu(data.clone())),
            #[cfg(feature = "wgpu")]
            Device::Wgpu(i) => Ok(Storage::Wgpu(wgpu::storage::WgpuStorage::from_cpu(
                &wgpu::storage::gpu(i)?,
                data,
            )?)),
            #[cfg(feature = "wgpu")]
            Device::Mps => {
                check(device)?;
                let i = mps::wgpu_ordinal().ok_or_else(|| unavailable_error(device))?;
                Ok(Storage::Wgpu(wgpu::storage::WgpuStorage::from_cpu(
                    &wgpu::storage::gpu(i)?,
                    data,
                )?))
            }
            #[cfg(all(feature = "xla", target_os = "linux"))]
            Device::Xla(i) => Ok(Storage::Xla(xla::storage::XlaStorage::from_cpu(
                &xla::storage::device(i)?,
                data,
            )?)),
            #[cfg(feature = "cuda")]
            Device::Cuda(i) => Ok(Storage::Cuda(cuda::storage::CudaStorage::from_cpu(
                &cuda_gpu(i)?,
                data,
            )?)),
            // Backends compiled out: `Device::check` rejects them before any tensor does.
            #[allow(unreachable_patterns)]
            _ => Err(unavailable_error(device)),
        }
    }

    pub fn copy_strided(&self, l: &Layout) -> Result<Storage> {
        match self {
            Storage::Cpu(s) => Ok(Storage::Cpu(s.copy_strided(l))),
            #[cfg(feature = "cuda")]
            Storage::Cuda(s) => Ok(Storage::Cuda(s.copy_strided(l)?)),
            #[cfg(all(feature = "xla", target_os = "linux"))]
            Storage::Xla(s) => Ok(Storage::Xla(s.copy_strided(l)?)),
            #[cfg(feature = "wgpu")]
            Storage::Wgpu(s) => Ok(Storage::Wgpu(s.copy_strided(l)?)),
        }
    }

    pub fn to_dtype(&self, l: &Layout, dtype: DType) -> Result<Storage> {
        match self {
            Storage::Cpu(s) => Ok(Storage::Cpu(s.to_dtype(l, dtype))),
            #[cfg(feature = "cuda")]
            Storage::Cuda(s) => Ok(Storage::Cuda(s.cast(l, dtype)?)),
            #[cfg(all(feature = "xla", target_os = "linux"))]
            Storage::Xla(s) => Ok(Storage::Xla(s.cast(l, dtype)?)),
            #[cfg(feature = "wgpu")]
            Storage::Wgpu(s) => Ok(Storage::Wgpu(s.cast(l, dtype)?)),
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
            #[cfg(feature = "cuda")]
            (Storage::Cuda(a), Storage::Cuda(b)) => {
                Ok(Storage::Cuda(a.binary(op, ll, b, rl, out)?))
            }
            #[cfg(all(feature = "xla", target_os = "linux"))]
            (Storage::Xla(a), Storage::Xla(b)) => Ok(Storage::Xla(a.binary(op, ll, b, rl, out)?)),
            #[cfg(feature = "wgpu")]
            (Storage::Wgpu(a), Storage::Wgpu(b)) => {
                Ok(Storage::Wgpu(a.binary(op, ll, b, rl, out)?))
            }
            #[allow(unreachable_patterns)]
            _ => Err(Error::System(format!(
                "{}: operands on different backends reached the kernel",
                op.name()
            ))),
        }
    }

    pub fn unary(&self, op: UnaryOp, l: &Layout) -> Result<Storage> {
        match self {
            Storage::Cpu(s) => Ok(Storage::Cpu(s.unary(op, l))),
            #[cfg(feature = "cuda")]
            Storage::Cuda(s) => Ok(Storage::Cuda(s.unary(op, l)?)),
            #[cfg(all(feature = "xla", target_os = "linux"))]
            Storage::Xla(s) => Ok(Storage::Xla(s.unary(op, l)?)),
            #[cfg(feature = "wgpu")]
            Storage::Wgpu(s) => Ok(Storage::Wgpu(s.unary(op, l)?)),
        }
    }

    pub fn reduce(&self, op: ReduceOp, l: &Layout, dim: Option<usize>) -> Result<Storage> {
        match self {
            Storage::Cpu(s) => Ok(Storage::Cpu(s.reduce(op, l, dim))),
            #[cfg(feature = "cuda")]
            Storage::Cuda(s) => Ok(Storage::Cuda(s.reduce(op, l, dim)?)),
            #[cfg(all(feature = "xla", target_os = "linux"))]
            Storage::Xla(s) => Ok(Storage::Xla(s.reduce(op, l, dim)?)),
            #[cfg(feature = "wgpu")]
            Storage::Wgpu(s) => Ok(Storage::Wgpu(s.reduce(op, l, dim)?)),
        }
    }

    pub fn matmul(&self, rhs: &Storage, spec: &MatmulSpec) -> Result<Storage> {
        match (self, rhs) {
            (Storage::Cpu(x), Storage::Cpu(y)) => Ok(Storage::Cpu(x.matmul(y, spec)?)),
            #[cfg(feature = "cuda")]
            (Storage::Cuda(x), Storage::Cuda(y)) => Ok(Storage::Cuda(x.matmul(y, spec)?)),
            #[cfg(all(feature = "xla", target_os = "linux"))]
            (Storage::Xla(x), Storage::Xla(y)) => Ok(Storage::Xla(x.matmul(y, spec)?)),
            #[cfg(feature = "wgpu")]
            (Storage::Wgpu(x), Storage::Wgpu(y)) => Ok(Storage::Wgpu(x.matmul(y, spec)?)),
            #[allow(unreachable_patterns)]
            _ => Err(Error::System(
                "matmul: operands on different backends reached the kernel".into(),
            )),
        }
    }
}

/// A point in a device's queue with a timestamp, for device-side timing: a CUDA event, a wgpu
/// timestamp query, or for XLA the moment PJRT reports the queued work done.
pub(crate) enum DeviceEvent {
    #[cfg(feature = "cuda")]
    Cuda(cuda::gpu::TimingEvent),
    #[cfg(feature = "wgpu")]
    Wgpu(wgpu::storage::Timestamp),
    #[cfg(all(feature = "xla", target_os = "linux"))]
    Xla(xla::storage::TimingPoint),
}

impl DeviceEvent {
    /// Seconds from `start` to this event, by the device's clock (waits for this event).
    pub fn seconds_since(&self, start: &DeviceEvent) -> Result<f64> {
        match (self, start) {
            #[cfg(feature = "cuda")]
            (DeviceEvent::Cuda(e), DeviceEvent::Cuda(s)) => e.elapsed_since(s),
            #[cfg(feature = "wgpu")]
            (DeviceEvent::Wgpu(e), DeviceEvent::Wgpu(s)) => e.seconds_since(s),
            #[cfg(all(feature = "xla", target_os = "linux"))]
            (DeviceEvent::Xla(e), DeviceEvent::Xla(s)) => e.seconds_since(s),
            #[allow(unreachable_patterns)]
            _ => Err(Error::System(
                "timing events of two different devices".into(),
            )),
        }
    }
}

/// Records a timing event in `device`'s queue; None where the device has no such clock (the
/// CPU, whose ops finish before they return).
pub(crate) fn record_event(device: Device) -> Result<Option<DeviceEvent>> {
    match device {
        #[cfg(feature = "cuda")]
        Device::Cuda(i) => Ok(Some(DeviceEvent::Cuda(cuda_gpu(i)?.record_timing_event()?))),
        #[cfg(feature = "wgpu")]
        Device::Wgpu(i) => Ok(wgpu::storage::gpu(i)?.timestamp()?.map(DeviceEvent::Wgpu)),
        #[cfg(all(feature = "xla", target_os = "linux"))]
        Device::Xla(i) => Ok(xla::storage::TimingPoint::record(i)?.map(DeviceEvent::Xla)),
        _ => Ok(None),
    }
}

/// The backends, in `Device::best` order after the CPU.
const BACKENDS: [&str; 5] = ["cpu", "cuda", "mps", "xla", "wgpu"];

/// One backend's probe, made on first use and kept: availability does not change while we
/// run, and probing can be slow (loading PJRT plugins, enumerating Vulkan adapters). Each
/// backend is probed only when something asks about it, so `--device cpu` loads no plugin.
///
/// Probes run one at a time (drivers' own initialisation is not always safe to run beside
/// another's); they read the environment but never change it (`crate::prepare_environment`
/// does, once, before threads start). A probe must therefore not ask about another backend.
fn probe_slot(i: usize) -> &'static Probe {
    static PROBES: [OnceLock<Probe>; 5] = [const { OnceLock::new() }; 5];
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    PROBES[i].get_or_init(|| {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        match i {
            0 => cpu_probe(),
            1 => cuda::probe(),
            2 => mps::probe(),
            3 => xla::probe(),
            _ => wgpu::probe(),
        }
    })
}

/// Every backend's probe, in `Device::best` order after the CPU.
pub(crate) fn probe_all() -> Vec<&'static Probe> {
    (0..BACKENDS.len()).map(probe_slot).collect()
}

pub(crate) fn probe_of(kind: &str) -> Option<&'static Probe> {
    BACKENDS.iter().position(|b| *b == kind).map(probe_slot)
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

/// One detail (`"sm_count"`, `"platform"`...) of a probed device, as its probe reported it.
pub(crate) fn detail(device: Device, key: &str) -> Option<String> {
    probe_of(device.kind())?
        .devices()
        .iter()
        .find(|d| d.device == device)?
        .details
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.clone())
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
        #[cfg(feature = "cuda")]
        Device::Cuda(i) => cuda_gpu(i)?.synchronize(),
        #[cfg(all(feature = "xla", target_os = "linux"))]
        Device::Xla(i) => xla::storage::synchronize(i),
        #[cfg(feature = "wgpu")]
        Device::Wgpu(i) => wgpu::storage::gpu(i)?.synchronize(),
        #[cfg(feature = "wgpu")]
        Device::Mps => match mps::wgpu_ordinal() {
            Some(i) => wgpu::storage::gpu(i)?.synchronize(),
            None => Err(unavailable_error(device)),
        },
        #[allow(unreachable_patterns)]
        _ => Err(unavailable_error(device)),
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
