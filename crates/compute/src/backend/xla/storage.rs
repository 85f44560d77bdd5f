//! Tensor data on an XLA device (the plugins are loaded once, by `context::runtime`). Each op builds a StableHLO program ([`super::hlo`]), compiled once per distinct
//! program text and cached; execution is asynchronous, and `synchronize` waits for every
//! result produced since the last wait (`torch_xla.sync()`).

use std::sync::{Arc, Weak};

use super::context::{device, device_memory, XlaDevice};
use super::hlo::{self, Program, Val};
use super::pjrt::{ElementType, PjrtError};
use super::programs::executable;
use crate::backend::contract::BackendStorage;
use crate::backend::ops::{BinaryOp, MatmulSpec, ReduceOp, UnaryOp};
use crate::base::dtype::{CpuStorage, HostSlice};
use crate::base::error::Room;
use crate::base::shape::Layout;
use crate::{BackendKind, DType, Error, Result, Shape};

// ---- storage --------------------------------------------------------------------------------

/// A dense 1-D buffer of `len` elements on one XLA device.
pub(crate) struct XlaStorage {
    pub dev: Arc<XlaDevice>,
    pub buf: Arc<super::pjrt::Buffer>,
    pub len: usize,
    pub dtype: DType,
}

impl std::fmt::Debug for XlaStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "XlaStorage({}, {} x {})",
            self.dev.device, self.len, self.dtype
        )
    }
}

fn buffer_type(d: DType) -> ElementType {
    match d {
        DType::F16 => ElementType::F16,
        DType::BF16 => ElementType::BF16,
        DType::F32 => ElementType::F32,
        DType::F64 => ElementType::F64,
        DType::I32 => ElementType::S32,
        DType::I64 => ElementType::S64,
    }
}

/// A PJRT error as ours: `RESOURCE_EXHAUSTED` is `OutOfMemory` (with what the plugin reports
/// free), anything else a backend error that keeps the plugin's.
fn perr<'a>(dev: &'a XlaDevice, what: &str, bytes: usize) -> impl Fn(PjrtError) -> Error + 'a {
    let what = what.to_string();
    move |e| {
        if e.is_resource_exhausted() {
            let room = match device_memory(dev) {
                Some((free, total)) => Room::Free { free, total },
                None => Room::Unknown,
            };
            Error::out_of_memory(
                dev.device,
                bytes as u64,
                room,
                format!(
                    "XLA ran out of memory while {what} ({e}); free tensors you no longer \
                     need, or use smaller shapes"
                ),
            )
        } else {
            Error::backend(
                BackendKind::Xla,
                format!("XLA {what} on {} failed", dev.device),
                e,
            )
        }
    }
}

/// A timing point on XLA device `i`: now, and, when work is still queued, a mark that notes
/// when the latest result becomes ready (PJRT has no device timestamps; its ready events are
/// the closest clock: see `super::pjrt::ReadyMark`).
pub(crate) struct TimingPoint {
    recorded: std::time::Instant,
    /// The mark, and the event it watches (kept alive until the mark is read).
    latest: Option<(Arc<super::pjrt::ReadyMark>, super::pjrt::Event)>,
}

impl TimingPoint {
    /// None when the plugin cannot watch its events (then only the wall clock is left).
    pub fn record(i: usize) -> Result<Option<TimingPoint>> {
        let dev = device(i)?;
        let recorded = std::time::Instant::now();
        let latest = dev
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .rev()
            .find_map(Weak::upgrade);
        let latest = match latest {
            None => None,
            Some(b) => {
                let watched = b.ready_event().and_then(|e| Ok((e.mark_ready()?, e)));
                match watched {
                    Ok(w) => Some(w),
                    Err(_) => return Ok(None),
                }
            }
        };
        Ok(Some(TimingPoint { recorded, latest }))
    }

    /// When the work queued before this point was done: the latest result's ready time, or
    /// the moment of recording when nothing was queued.
    fn done(&self) -> Result<std::time::Instant> {
        match &self.latest {
            None => Ok(self.recorded),
            Some((m, _event)) => m
                .wait(std::time::Duration::from_secs(60))
                .map(|t| t.max(self.recorded))
                .ok_or(Error::Timeout {
                    what: "the XLA work before a timing event",
                    seconds: 60,
                }),
        }
    }

    /// Seconds from `start` to the end of the work queued before this point.
    pub fn seconds_since(&self, start: &TimingPoint) -> Result<f64> {
        Ok(self
            .done()?
            .saturating_duration_since(start.recorded)
            .as_secs_f64())
    }
}

/// Waits for every result produced on `dev` since the last wait.
pub(crate) fn synchronize(i: usize) -> Result<()> {
    let dev = device(i)?;
    let pending: Vec<Weak<super::pjrt::Buffer>> =
        std::mem::take(&mut *dev.pending.lock().unwrap_or_else(|e| e.into_inner()));
    // Every result is waited for, even after one failed, and every failure is reported: the
    // first as the error, with how many more failed.
    let mut errors = Vec::new();
    for b in pending.iter().filter_map(Weak::upgrade) {
        if let Err(e) = b.ready() {
            errors.push(e);
        }
    }
    let n = errors.len();
    match errors.into_iter().next() {
        None => Ok(()),
        Some(first) => {
            let what = if n == 1 {
                "waiting for a result".to_string()
            } else {
                format!("waiting for results ({n} failed; the first error)")
            };
            Err(perr(&dev, &what, 0)(first))
        }
    }
}

impl XlaStorage {
    pub fn from_cpu(dev: &Arc<XlaDevice>, data: HostSlice<'_>) -> Result<XlaStorage> {
        let buf = dev
            .client
            .buffer_from_host(
                data.bytes,
                buffer_type(data.dtype),
                &[data.len as i64],
                dev.index,
            )
            .map_err(perr(dev, "copying to the device", data.bytes.len()))?;
        Ok(XlaStorage {
            dev: dev.clone(),
            buf: Arc::new(buf),
            len: data.len,
            dtype: data.dtype,
        })
    }

    /// The whole buffer on the host.
    fn download(&self) -> Result<CpuStorage> {
        let mut host = CpuStorage::for_overwrite(self.dtype, self.len);
        if self.len > 0 {
            self.buf.to_host(host.as_bytes_mut()).map_err(perr(
                &self.dev,
                "copying to the host",
                0,
            ))?;
        }
        Ok(host)
    }

    /// Runs `prog` (whose arguments are `inputs`' buffers, in order) and wraps its output.
    fn run(&self, prog: Program, out: &Val, inputs: &[&XlaStorage]) -> Result<XlaStorage> {
        let (mlir, n) = prog.finish(out);
        if n == 0 {
            // Nothing to compute: XLA rejects some zero-sized programs.
            return XlaStorage::from_cpu(&self.dev, CpuStorage::full(out.dtype, 0, 0.0).as_host());
        }
        let exe = executable(&self.dev, &mlir)?;
        let args: Vec<&super::pjrt::Buffer> = inputs.iter().map(|s| s.buf.as_ref()).collect();
        let buf = Arc::new(
            exe.execute(&args, Some(self.dev.index), &self.dev.client)
                .map_err(perr(
                    &self.dev,
                    "running a program",
                    n * out.dtype.size_in_bytes(),
                ))?,
        );
        let mut pending = self.dev.pending.lock().unwrap_or_else(|e| e.into_inner());
        pending.retain(|w| w.strong_count() > 0);
        pending.push(Arc::downgrade(&buf));
        Ok(XlaStorage {
            dev: self.dev.clone(),
            buf,
            len: n,
            dtype: out.dtype,
        })
    }

    /// An operand's view in `p` (callers made it expressible with [`Self::expressible`]).
    fn operand(&self, p: &mut Program, l: &Layout) -> Result<Val> {
        let a = p.arg(self.len, self.dtype);
        p.view(&a, l).ok_or_else(|| {
            Error::internal(format!(
                "a view of shape {:?} with strides {:?} reached an XLA program",
                l.shape.dims(),
                l.strides
            ))
        })
    }

    /// `self` and its layout, made dense through the host when a program cannot express it.
    fn expressible(&self, l: &Layout) -> Result<Option<XlaStorage>> {
        let mut p = Program::new();
        let a = p.arg(self.len, self.dtype);
        if p.view(&a, l).is_some() {
            Ok(None)
        } else {
            let host = self.download()?.copy_strided(l);
            Ok(Some(XlaStorage::from_cpu(&self.dev, host.as_host())?))
        }
    }
}

impl BackendStorage for XlaStorage {
    fn dtype(&self) -> DType {
        self.dtype
    }
    fn len(&self) -> usize {
        self.len
    }
    fn to_cpu(&self, l: &Layout) -> Result<CpuStorage> {
        if l.is_contiguous() && l.offset == 0 && l.shape.elem_count() == self.len {
            return self.download();
        }
        match self.copy_strided(l) {
            Ok(c) => c.download(),
            Err(_) => Ok(self.download()?.copy_strided(l)),
        }
    }
    fn to_host(&self, l: &Layout, dst: &mut [u8]) -> Result<()> {
        dst.copy_from_slice(XlaStorage::to_cpu(self, l)?.as_bytes());
        Ok(())
    }
    fn copy_strided(&self, l: &Layout) -> Result<XlaStorage> {
        self.to_dtype(l, self.dtype)
    }
    fn to_dtype(&self, l: &Layout, dtype: DType) -> Result<XlaStorage> {
        if let Some(d) = self.expressible(l)? {
            return d.to_dtype(&Layout::contiguous(l.shape.clone()), dtype);
        }
        let mut p = Program::new();
        let v = self.operand(&mut p, l)?;
        let c = p.convert(&v, dtype);
        self.run(p, &c, &[self])
    }
    fn binary(
        &self,
        op: BinaryOp,
        ll: &Layout,
        rhs: &XlaStorage,
        rl: &Layout,
        out: &Shape,
    ) -> Result<XlaStorage> {
        if let Some(d) = self.expressible(ll)? {
            return d.binary(op, &Layout::contiguous(ll.shape.clone()), rhs, rl, out);
        }
        if let Some(d) = rhs.expressible(rl)? {
            return self.binary(op, ll, &d, &Layout::contiguous(rl.shape.clone()), out);
        }
        let mut p = Program::new();
        let a = self.operand(&mut p, ll)?;
        let b = rhs.operand(&mut p, rl)?;
        let r = p.binary_op(op, &a, &b, out.dims());
        self.run(p, &r, &[self, rhs])
    }
    fn unary(&self, op: UnaryOp, l: &Layout) -> Result<XlaStorage> {
        if let Some(d) = self.expressible(l)? {
            return d.unary(op, &Layout::contiguous(l.shape.clone()));
        }
        let mut p = Program::new();
        let x = self.operand(&mut p, l)?;
        let r = p.unary_op(op, &x);
        self.run(p, &r, &[self])
    }
    fn reduce(
        &self,
        op: ReduceOp,
        l: &Layout,
        dim: Option<usize>,
        out_dtype: DType,
    ) -> Result<XlaStorage> {
        if let Some(d) = self.expressible(l)? {
            return d.reduce(op, &Layout::contiguous(l.shape.clone()), dim, out_dtype);
        }
        let mut p = Program::new();
        let x = self.operand(&mut p, l)?;
        let r = p.reduce_op(op, &x, dim);
        if r.dtype != out_dtype {
            return Err(Error::internal(format!(
                "XLA's {op:?} gives {} where {out_dtype} was asked",
                r.dtype
            )));
        }
        self.run(p, &r, &[self])
    }
    fn matmul(&self, rhs: &XlaStorage, spec: &MatmulSpec) -> Result<XlaStorage> {
        let MatmulSpec { m, n, k, a, b, .. } = *spec;
        let (la, lb) = hlo::matmul_layouts(spec);
        if let Some(d) = self.expressible(&la)? {
            // The dense copy holds one matrix when the batch stride was 0.
            let dense = MatmulSpec {
                a: (if a.0 == 0 { 0 } else { m * k }, k, 1, 0),
                ..*spec
            };
            return d.matmul(rhs, &dense);
        }
        if let Some(d) = rhs.expressible(&lb)? {
            let dense = MatmulSpec {
                b: (if b.0 == 0 { 0 } else { k * n }, n, 1, 0),
                ..*spec
            };
            return self.matmul(&d, &dense);
        }
        let mut p = Program::new();
        let va = self.operand(&mut p, &la)?;
        let vb = rhs.operand(&mut p, &lb)?;
        let r = p.matmul_op(spec, &va, &vb);
        self.run(p, &r, &[self, rhs])
    }
}
