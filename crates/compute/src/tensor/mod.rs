//! `Tensor`: an n-dimensional array on a device.
//!
//! A tensor is a cheap handle (an `Arc`) to a device buffer plus a strided layout, so views
//! (`t`, `transpose`) and same-device `to_device` share data. Every op checks its operands
//! (device, then dtype, then shape) and returns an error value instead of panicking, then
//! hands the buffers to the backend's storage (`backend::Storage`), which runs the kernel.

mod ops;
mod transfer;

use std::sync::Arc;

use crate::backend::contract::{Dist, HostLock};
use crate::backend::dispatch::Storage;
use crate::base::dtype::CpuStorage;
use crate::base::dtype::WithDType;
use crate::base::rng;
use crate::base::shape::Layout;
use crate::{memory, DType, Device, Error, Result, Shape};

/// Device memory owned by one or more tensors; its bytes are counted in `memory::stats`
/// from creation until the last tensor using it is dropped.
#[derive(Debug)]
pub(crate) struct Buffer {
    pub storage: Storage,
    pub device: Device,
    bytes: usize,
    /// For CPU data in memory a backend keeps locked (`pin_memory`): the lock, which takes
    /// the storage back when the buffer goes (`HostLock::give_back`).
    pinned: Option<Box<dyn HostLock>>,
}

impl Buffer {
    fn new(storage: Storage, device: Device) -> Buffer {
        let bytes = storage.size_in_bytes();
        crate::base::ledger::on_alloc(device, bytes);
        Buffer {
            storage,
            device,
            bytes,
            pinned: None,
        }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        crate::base::ledger::on_free(self.device, self.bytes);
        let storage = std::mem::replace(&mut self.storage, Storage::empty());
        match (self.pinned.take(), storage) {
            // Locked memory goes back to its lock, which unlocks it before it is freed.
            (Some(lock), Storage::Cpu(host)) => lock.give_back(host),
            (_, storage) => storage.release(),
        }
    }
}

/// An n-dimensional array of one dtype on one device.
#[derive(Clone, Debug)]
pub struct Tensor {
    buf: Arc<Buffer>,
    layout: Layout,
}

/// Data that can become a tensor: scalars, arrays and nested arrays, slices and vectors.
pub trait NdArray {
    /// The shape the data describes.
    fn shape(&self) -> Result<Shape>;
    /// The elements in row-major order.
    #[doc(hidden)]
    fn to_cpu_storage(&self) -> CpuStorage;
}

impl<S: WithDType> NdArray for S {
    fn shape(&self) -> Result<Shape> {
        Ok(Shape::from(()))
    }
    fn to_cpu_storage(&self) -> CpuStorage {
        S::to_storage(vec![*self])
    }
}

/// Implements `NdArray` for an array type.
macro_rules! nd_array {
    ([$($g:tt)*], $t:ty, |$s:ident| $shape:expr, |$d:ident| $data:expr) => {
        impl<S: WithDType, $($g)*> NdArray for $t {
            fn shape(&self) -> Result<Shape> {
                let $s = self;
                $shape
            }
            fn to_cpu_storage(&self) -> CpuStorage {
                let $d = self;
                S::to_storage($data)
            }
        }
    };
}

nd_array!([const N: usize], [S; N], |_s| Ok(Shape::from(N)), |d| d.to_vec());
nd_array!([], Vec<S>, |s| Ok(Shape::from(s.len())), |d| d.clone());
nd_array!(
    [const N: usize, const M: usize],
    [[S; N]; M],
    |_s| Ok(Shape::from((M, N))),
    |d| d.iter().flatten().copied().collect()
);
nd_array!(
    [const N: usize, const M: usize, const K: usize],
    [[[S; N]; M]; K],
    |_s| Ok(Shape::from((K, M, N))),
    |d| d.iter().flatten().flatten().copied().collect()
);
nd_array!(
    [],
    Vec<Vec<S>>,
    |s| {
        let cols = s.first().map_or(0, Vec::len);
        if let Some((i, r)) = s.iter().enumerate().find(|(_, r)| r.len() != cols) {
            return Err(Error::InvalidData(format!(
                "ragged rows: row 0 has {cols} elements but row {i} has {}",
                r.len()
            )));
        }
        Ok(Shape::from((s.len(), cols)))
    },
    |d| d.iter().flatten().copied().collect()
);

impl<S: WithDType> NdArray for [S] {
    fn shape(&self) -> Result<Shape> {
        Ok(Shape::from(self.len()))
    }
    fn to_cpu_storage(&self) -> CpuStorage {
        S::to_storage(self.to_vec())
    }
}

/// How many elements `start, start + step, ...` has before reaching `end`.
fn arange_len(start: f64, end: f64, step: f64) -> Result<usize> {
    if step == 0.0 || !step.is_finite() || !start.is_finite() || !end.is_finite() {
        return Err(Error::invalid(
            "arange",
            format!("start {start}, end {end} and step {step} must be finite, with a step that is not 0"),
        ));
    }
    let n = ((end - start) / step).ceil();
    Ok(if n > 0.0 { n as usize } else { 0 })
}

impl Tensor {
    // ---- creation ------------------------------------------------------------------------

    /// Wraps a backend's result. Every tensor is made here or by `view`, which together
    /// establish the invariant every kernel relies on: the shape passed `Shape::check_size`
    /// and the layout lies inside the storage (`Layout::check_in_bounds`).
    fn from_storage(storage: Storage, device: Device, shape: Shape) -> Result<Tensor> {
        shape.check_size(storage.dtype(), "tensor")?;
        let layout = Layout::contiguous(shape);
        if storage.len() != layout.shape.elem_count() {
            return Err(Error::internal(format!(
                "a backend returned {} elements for shape {}",
                storage.len(),
                layout.shape
            )));
        }
        Ok(Tensor {
            buf: Arc::new(Buffer::new(storage, device)),
            layout,
        })
    }

    /// Host data of `shape` placed on `device`. All creation goes through here.
    fn from_cpu(data: CpuStorage, shape: Shape, device: &Device) -> Result<Tensor> {
        device.check()?;
        shape.check_size(data.dtype(), "tensor")?;
        if data.len() != shape.elem_count() {
            return Err(Error::InvalidData(format!(
                "{} elements cannot fill shape {shape}, which holds {}",
                data.len(),
                shape.elem_count()
            )));
        }
        let storage = Storage::from_cpu(data, *device)?;
        Tensor::from_storage(storage, *device, shape)
    }

    fn check_alloc(shape: &Shape, dtype: DType, device: &Device) -> Result<()> {
        device.check()?;
        let bytes = shape.check_size(dtype, "allocation")?;
        memory::ensure_fits(*device, Some(bytes as u64))
    }

    /// A tensor from nested arrays, a slice, a vector or a scalar (`torch.tensor(data,
    /// device=d)`): `Tensor::new(&[[1, 2], [3, 4]], &Device::Cpu)`.
    pub fn new<A: NdArray + ?Sized>(array: &A, device: &Device) -> Result<Tensor> {
        let shape = array.shape()?;
        Tensor::from_cpu(array.to_cpu_storage(), shape, device)
    }

    /// A tensor of `shape` from a flat vector in row-major order.
    pub fn from_vec<T: WithDType>(
        data: Vec<T>,
        shape: impl Into<Shape>,
        device: &Device,
    ) -> Result<Tensor> {
        let shape = shape.into();
        shape.check_size(T::DTYPE, "from_vec")?;
        Tensor::from_cpu(T::to_storage(data), shape, device)
    }

    /// A tensor of `shape` and `dtype` from its elements' little-endian bytes in row-major
    /// order (a copy): how data arrives from NumPy and DLPack. The byte count must be the
    /// shape's elements times the dtype's size.
    pub fn from_le_bytes(
        bytes: &[u8],
        dtype: DType,
        shape: impl Into<Shape>,
        device: &Device,
    ) -> Result<Tensor> {
        let shape = shape.into();
        let want = shape.check_size(dtype, "from_le_bytes")?;
        if bytes.len() != want {
            return Err(Error::invalid(
                "from_le_bytes",
                format!(
                    "{} bytes for a {dtype} tensor of shape {shape}, which holds {want}",
                    bytes.len()
                ),
            ));
        }
        let mut host = CpuStorage::for_overwrite(dtype, shape.elem_count());
        let dst = host.as_bytes_mut();
        dst.copy_from_slice(bytes);
        if cfg!(target_endian = "big") {
            for c in dst.chunks_mut(dtype.size_in_bytes()) {
                c.reverse();
            }
        }
        Tensor::from_cpu(host, shape, device)
    }

    /// A tensor of `shape` filled with `value` (`torch.full`).
    pub fn full(
        value: f64,
        shape: impl Into<Shape>,
        dtype: DType,
        device: &Device,
    ) -> Result<Tensor> {
        let shape = shape.into();
        Tensor::check_alloc(&shape, dtype, device)?;
        if let Some(s) = Storage::full(*device, dtype, shape.elem_count(), value)? {
            return Tensor::from_storage(s, *device, shape);
        }
        Tensor::from_cpu(
            CpuStorage::full(dtype, shape.elem_count(), value),
            shape,
            device,
        )
    }

    /// Zeros (`torch.zeros`).
    pub fn zeros(shape: impl Into<Shape>, dtype: DType, device: &Device) -> Result<Tensor> {
        Tensor::full(0.0, shape, dtype, device)
    }

    /// Ones (`torch.ones`).
    pub fn ones(shape: impl Into<Shape>, dtype: DType, device: &Device) -> Result<Tensor> {
        Tensor::full(1.0, shape, dtype, device)
    }

    /// `start, start + 1, ...` below `end`, of `T`'s dtype (`torch.arange(start, end)`).
    pub fn arange<T: WithDType>(start: T, end: T, device: &Device) -> Result<Tensor> {
        Tensor::arange_step(start, end, T::from_f64(1.0), device)
    }

    /// `start, start + step, ...` up to but excluding `end` (`torch.arange(start, end, step)`).
    pub fn arange_step<T: WithDType>(start: T, end: T, step: T, device: &Device) -> Result<Tensor> {
        if let (Some(s), Some(e), Some(st)) = (start.to_i128(), end.to_i128(), step.to_i128()) {
            return Tensor::arange_int::<T>(s, e, st, device);
        }
        let (s, e, st) = (start.to_f64(), end.to_f64(), step.to_f64());
        let n = arange_len(s, e, st)?;
        let shape = Shape::from(n);
        Tensor::check_alloc(&shape, T::DTYPE, device)?;
        if let Some(x) = Storage::arange(*device, T::DTYPE, s, st, n)? {
            return Tensor::from_storage(x, *device, shape);
        }
        Tensor::from_cpu(CpuStorage::arange(T::DTYPE, s, st, n), shape, device)
    }

    /// An integer range, counted and computed in integers (through f64, values beyond 2^53
    /// would be lost). Small ranges are made on the device where it can.
    fn arange_int<T: WithDType>(s: i128, e: i128, st: i128, device: &Device) -> Result<Tensor> {
        if st == 0 {
            return Err(Error::invalid(
                "arange",
                format!("start {s}, end {e} and step {st}: the step must not be 0"),
            ));
        }
        let n = if (st > 0 && e > s) || (st < 0 && e < s) {
            ((e - s).abs() + st.abs() - 1) / st.abs()
        } else {
            0
        };
        let shape = Shape::from(usize::try_from(n).unwrap_or(usize::MAX));
        Tensor::check_alloc(&shape, T::DTYPE, device)?;
        let n = shape.elem_count();
        const EXACT: i128 = 1 << 53;
        if s.abs() < EXACT && e.abs() < EXACT && st.abs() < EXACT {
            if let Some(x) = Storage::arange(*device, T::DTYPE, s as f64, st as f64, n)? {
                return Tensor::from_storage(x, *device, shape);
            }
        }
        // Every value lies between start and end, so it fits T.
        let vals = (0..n)
            .map(|i| {
                T::from_i128(s + st * i as i128)
                    .ok_or_else(|| Error::internal("an arange value outside its range"))
            })
            .collect::<Result<Vec<T>>>()?;
        Tensor::from_cpu(T::to_storage(vals), shape, device)
    }

    /// Uniform random f32 values in `[lo, hi)` (`torch.rand`, scaled). Reproducible after
    /// [`crate::manual_seed`].
    pub fn rand(lo: f64, hi: f64, shape: impl Into<Shape>, device: &Device) -> Result<Tensor> {
        Tensor::rand_with(lo, hi, shape, DType::F32, device)
    }

    /// Uniform random values of a float `dtype` in `[lo, hi)`.
    pub fn rand_with(
        lo: f64,
        hi: f64,
        shape: impl Into<Shape>,
        dtype: DType,
        device: &Device,
    ) -> Result<Tensor> {
        let shape = shape.into();
        Tensor::check_random("rand", dtype, lo, hi, &shape, device)?;
        let n = shape.elem_count();
        if !matches!(device, Device::Cpu) {
            let seed = rng::with_global(|r| r.next_u64());
            if let Some(s) = Storage::random(*device, dtype, n, seed, Dist::Uniform { lo, hi })? {
                return Tensor::from_storage(s, *device, shape);
            }
        }
        let vals: Vec<f64> =
            rng::with_global(|r| (0..n).map(|_| lo + (hi - lo) * r.uniform()).collect());
        Tensor::from_cpu(CpuStorage::F64(vals), shape.clone(), &Device::Cpu)?
            .to_dtype(dtype)?
            .to_device(device)
    }

    /// Normal random f32 values with `mean` and standard deviation `std` (`torch.randn`).
    /// Reproducible after [`crate::manual_seed`].
    pub fn randn(mean: f64, std: f64, shape: impl Into<Shape>, device: &Device) -> Result<Tensor> {
        Tensor::randn_with(mean, std, shape, DType::F32, device)
    }

    /// Normal random values of a float `dtype`.
    pub fn randn_with(
        mean: f64,
        std: f64,
        shape: impl Into<Shape>,
        dtype: DType,
        device: &Device,
    ) -> Result<Tensor> {
        let shape = shape.into();
        Tensor::check_random("randn", dtype, mean, std, &shape, device)?;
        if !matches!(device, Device::Cpu) {
            let seed = rng::with_global(|r| r.next_u64());
            let n = shape.elem_count();
            if let Some(s) = Storage::random(*device, dtype, n, seed, Dist::Normal { mean, std })? {
                return Tensor::from_storage(s, *device, shape);
            }
        }
        let mut vals = vec![0.0; shape.elem_count()];
        rng::with_global(|r| r.fill_normal(&mut vals));
        for v in &mut vals {
            *v = mean + std * *v;
        }
        Tensor::from_cpu(CpuStorage::F64(vals), shape.clone(), &Device::Cpu)?
            .to_dtype(dtype)?
            .to_device(device)
    }

    fn check_random(
        op: &'static str,
        dtype: DType,
        a: f64,
        b: f64,
        shape: &Shape,
        device: &Device,
    ) -> Result<()> {
        if !dtype.is_float() {
            return Err(Error::unsupported(
                op,
                dtype,
                "random values are generated for float dtypes; cast afterwards with .to_dtype()",
            ));
        }
        if !a.is_finite() || !b.is_finite() {
            return Err(Error::invalid(
                op,
                format!("parameters must be finite, got {a} and {b}"),
            ));
        }
        // The f64 staging buffer is the largest allocation.
        Tensor::check_alloc(shape, DType::F64, device)
    }

    // ---- facts ---------------------------------------------------------------------------

    /// The device the data lives on (`x.device`).
    pub fn device(&self) -> Device {
        self.buf.device
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.buf.storage.dtype()
    }

    /// The shape.
    pub fn shape(&self) -> &Shape {
        &self.layout.shape
    }

    /// The sizes of each dimension.
    pub fn dims(&self) -> &[usize] {
        self.layout.shape.dims()
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.layout.shape.rank()
    }

    /// Number of elements.
    pub fn elem_count(&self) -> usize {
        self.layout.shape.elem_count()
    }

    /// True when the tensor is on a CUDA GPU (`x.is_cuda`).
    pub fn is_cuda(&self) -> bool {
        matches!(self.device(), Device::Cuda(_))
    }

    /// True when elements are laid out densely in row-major order.
    pub fn is_contiguous(&self) -> bool {
        self.layout.is_contiguous()
    }

    /// Bytes the elements of this tensor occupy.
    pub fn size_in_bytes(&self) -> usize {
        self.elem_count() * self.dtype().size_in_bytes()
    }

    // ---- devices and dtypes --------------------------------------------------------------

    /// A copy converted to `dtype` (`x.to(torch.float16)`); the same handle when it already is.
    pub fn to_dtype(&self, dtype: DType) -> Result<Tensor> {
        if dtype == self.dtype() {
            return Ok(self.clone());
        }
        Tensor::check_alloc(self.shape(), dtype, &self.device())?;
        let s = self.buf.storage.to_dtype(&self.layout, dtype)?;
        Tensor::from_storage(s, self.device(), self.shape().clone())
    }

    // ---- layout --------------------------------------------------------------------------

    /// Another view of this tensor's storage. With `from_storage`, the only way tensors are
    /// made: the layout is checked to lie inside the storage (see `from_storage`).
    fn view(&self, layout: Layout) -> Result<Tensor> {
        layout.shape.check_size(self.dtype(), "view")?;
        layout.check_in_bounds(self.buf.storage.len())?;
        Ok(Tensor {
            buf: self.buf.clone(),
            layout,
        })
    }

    /// The block of this tensor starting at index `starts` with sizes `lens` in each
    /// dimension (a view: no data moves). For printing: `Display` reads only the edges.
    pub(crate) fn block(&self, starts: &[usize], lens: &[usize]) -> Result<Tensor> {
        let dims = self.dims();
        if starts.len() != dims.len()
            || lens.len() != dims.len()
            || (0..dims.len()).any(|d| starts[d].checked_add(lens[d]).is_none_or(|e| e > dims[d]))
        {
            return Err(Error::invalid(
                "block",
                format!("block at {starts:?} of {lens:?} does not fit in {:?}", dims),
            ));
        }
        let mut layout = Layout {
            shape: Shape::from(lens.to_vec()),
            strides: self.layout.strides.clone(),
            offset: self.layout.offset,
        };
        for (d, &s) in starts.iter().enumerate() {
            layout.offset += s * self.layout.strides[d];
        }
        self.view(layout)
    }

    /// Swaps two dimensions (a view: no data moves). Negative dimensions count from the end.
    pub fn transpose(&self, dim0: isize, dim1: isize) -> Result<Tensor> {
        let a = self.shape().dim_index(dim0, "transpose")?;
        let b = self.shape().dim_index(dim1, "transpose")?;
        self.view(self.layout.transpose(a, b))
    }

    /// The transpose of a matrix (`x.t()`); vectors and scalars are returned as they are.
    pub fn t(&self) -> Result<Tensor> {
        match self.rank() {
            0 | 1 => Ok(self.clone()),
            2 => self.transpose(0, 1),
            r => Err(Error::invalid(
                "t",
                format!("t() expects a tensor with at most 2 dimensions, but this one has {r}; use transpose(d0, d1)"),
            )),
        }
    }

    /// The same data as a dense row-major tensor (a copy only when it is not one already).
    pub fn contiguous(&self) -> Result<Tensor> {
        if self.is_contiguous() {
            return Ok(self.clone());
        }
        Tensor::check_alloc(self.shape(), self.dtype(), &self.device())?;
        let s = self.buf.storage.copy_strided(&self.layout)?;
        Tensor::from_storage(s, self.device(), self.shape().clone())
    }

    /// A new tensor with its own copy of the data on the same device (`x.clone()` in
    /// PyTorch; Rust's `Clone` gives another handle to the same data instead).
    pub fn copy(&self) -> Result<Tensor> {
        Tensor::check_alloc(self.shape(), self.dtype(), &self.device())?;
        let s = self.buf.storage.copy_strided(&self.layout)?;
        Tensor::from_storage(s, self.device(), self.shape().clone())
    }

    /// The same elements in a new shape with as many elements (a view when contiguous).
    pub fn reshape(&self, shape: impl Into<Shape>) -> Result<Tensor> {
        let shape = shape.into();
        shape.check_size(self.dtype(), "reshape")?;
        if shape.elem_count() != self.elem_count() {
            return Err(Error::shape(
                "reshape",
                self.shape(),
                &shape,
                format!(
                    "a tensor of {} elements cannot be viewed as one of {}",
                    self.elem_count(),
                    shape.elem_count()
                ),
            ));
        }
        let c = self.contiguous()?;
        let offset = c.layout.offset;
        let mut l = Layout::contiguous(shape);
        l.offset = offset;
        c.view(l)
    }

    // ---- to host -------------------------------------------------------------------------

    /// The elements as host data in row-major order (waits for the device).
    pub(crate) fn to_cpu_storage(&self) -> Result<CpuStorage> {
        self.buf.storage.to_cpu(&self.layout)
    }

    fn typed<T: WithDType>(&self, op: &'static str, rank: Option<usize>) -> Result<Vec<T>> {
        if T::DTYPE != self.dtype() {
            return Err(Error::invalid(
                op,
                format!(
                    "the tensor is {} but {} was asked for; convert with .to_dtype(DType::{}) first",
                    self.dtype(),
                    T::DTYPE,
                    T::DTYPE.variant_name()
                ),
            ));
        }
        if let Some(r) = rank {
            if self.rank() != r {
                return Err(Error::invalid(
                    op,
                    format!(
                        "{op} needs a {r}-d tensor, but its shape is {}",
                        self.shape()
                    ),
                ));
            }
        }
        let host = self.to_cpu_storage()?;
        Ok(T::from_storage(&host)
            .map(<[T]>::to_vec)
            .unwrap_or_default())
    }

    /// The single value of a one-element tensor (`x.item()`).
    pub fn to_scalar<T: WithDType>(&self) -> Result<T> {
        if self.elem_count() != 1 {
            return Err(Error::invalid(
                "to_scalar",
                format!(
                    "only one-element tensors convert to a scalar, but the shape is {}",
                    self.shape()
                ),
            ));
        }
        Ok(self.typed::<T>("to_scalar", None)?[0])
    }

    /// A 1-d tensor's elements.
    pub fn to_vec1<T: WithDType>(&self) -> Result<Vec<T>> {
        self.typed("to_vec1", Some(1))
    }

    /// Checks that `rows` row vectors (of a possibly empty tensor) fit in host memory.
    fn check_rows<T>(rows: usize) -> Result<()> {
        let bytes = rows.checked_mul(std::mem::size_of::<Vec<T>>());
        memory::ensure_fits(Device::Cpu, bytes.map(|b| b as u64))
    }

    /// A 2-d tensor's rows.
    pub fn to_vec2<T: WithDType>(&self) -> Result<Vec<Vec<T>>> {
        let v = self.typed::<T>("to_vec2", Some(2))?;
        Tensor::check_rows::<T>(self.dims()[0])?;
        let cols = self.dims()[1];
        Ok((0..self.dims()[0])
            .map(|i| v[i * cols..(i + 1) * cols].to_vec())
            .collect())
    }

    /// A 3-d tensor's matrices.
    pub fn to_vec3<T: WithDType>(&self) -> Result<Vec<Vec<Vec<T>>>> {
        let v = self.typed::<T>("to_vec3", Some(3))?;
        let (a, b, c) = (self.dims()[0], self.dims()[1], self.dims()[2]);
        Tensor::check_rows::<Vec<T>>(a)?;
        Tensor::check_rows::<T>(a.saturating_mul(b))?;
        Ok((0..a)
            .map(|i| {
                (0..b)
                    .map(|j| v[(i * b + j) * c..(i * b + j + 1) * c].to_vec())
                    .collect()
            })
            .collect())
    }

    /// The bytes of a contiguous CPU tensor, in place, for zero-copy export (NumPy's array
    /// interface, DLPack): valid while this tensor or a clone of it lives, and never written
    /// (accel's buffers are immutable: every op makes a new one). Another device, or a view
    /// that is not contiguous, is an error naming the fix (`.cpu()`, `.contiguous()`).
    pub fn host_bytes(&self) -> Result<&[u8]> {
        let Storage::Cpu(host) = &self.buf.storage else {
            return Err(Error::invalid(
                "host_bytes",
                format!(
                    "the tensor is on {}; copy it with .cpu() first",
                    self.device()
                ),
            ));
        };
        if !self.layout.is_contiguous() {
            return Err(Error::invalid(
                "host_bytes",
                "the view is not contiguous; make a contiguous copy with .contiguous() first",
            ));
        }
        let size = self.dtype().size_in_bytes();
        let start = self.layout.offset * size;
        // In bounds: every layout lies inside its storage (Layout::check_in_bounds, checked
        // when the tensor was made), and a contiguous view is elem_count elements from offset.
        Ok(&host.as_bytes()[start..start + self.elem_count() * size])
    }

    /// All elements converted to f64, flat in row-major order (any dtype).
    pub fn to_vec_f64(&self) -> Result<Vec<f64>> {
        let host = self.to_cpu_storage()?;
        Ok((0..host.len()).map(|i| host.get_f64(i)).collect())
    }
}
