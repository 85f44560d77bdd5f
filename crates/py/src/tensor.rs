//! The tensor half of `accelkit._accel`: `Tensor` and the functions that make tensors, move
//! them and read the allocator's counters. `python/accelkit/_tensor.py` spells them as PyTorch
//! does (`accel.randn`, `x.cuda()`, `a + 1`); this file holds only what needs Rust.
//! Errors become the exception PyTorch raises in the same place (`py_err`), an `AccelError`
//! subclass, worded for Python.

use std::str::FromStr;

use accelkit::{DType, Device, Error};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyAny, PyBytes, PyDict, PyTuple};

use crate::errors::{device, err, py_err};

fn dtype(name: &str) -> PyResult<DType> {
    DType::from_str(name).map_err(err)
}

/// NumPy's type string for a dtype (`<f4`), where NumPy has the type.
fn typestr(d: DType) -> Option<&'static str> {
    Some(match d {
        DType::F16 => "<f2",
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::I32 => "<i4",
        DType::I64 => "<i8",
        DType::BF16 => return None,
    })
}

/// A tensor on some device (`accelkit._accel.Tensor`, held by `accel.Tensor`).
#[pyclass(module = "accelkit._accel", frozen)]
pub(crate) struct Tensor(pub(crate) accelkit::Tensor);

impl Tensor {
    fn run(
        py: Python<'_>,
        f: impl FnOnce() -> accelkit::Result<accelkit::Tensor> + Send,
    ) -> PyResult<Tensor> {
        py.detach(f).map(Tensor).map_err(|e| py_err(py, e))
    }
}

#[pymethods]
impl Tensor {
    /// A tensor of `shape` and `dtype` on `device` from row-major bytes (a copy).
    #[staticmethod]
    fn from_bytes(
        py: Python<'_>,
        data: &[u8],
        dtype: &str,
        shape: Vec<usize>,
        device: &str,
    ) -> PyResult<Tensor> {
        let dt = self::dtype(dtype)?;
        let d = crate::errors::device(device)?;
        // `data` borrows the caller's `bytes` object, which is immutable and alive for the
        // whole call, so it is read in place with the GIL released (it was copied first).
        Tensor::run(py, || accelkit::Tensor::from_le_bytes(data, dt, shape, &d))
    }

    #[getter]
    fn device(&self) -> String {
        self.0.device().to_string()
    }

    #[getter]
    fn dtype(&self) -> String {
        self.0.dtype().to_string()
    }

    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.0.dims())
    }

    /// Whether its elements are one row-major block (not a strided view such as `x.t()`).
    #[getter]
    fn is_contiguous(&self) -> bool {
        self.0.is_contiguous()
    }

    /// Whether it is on a CUDA GPU (`x.is_cuda`).
    #[getter]
    fn is_cuda(&self) -> bool {
        self.0.is_cuda()
    }

    /// A copy on `device` (`x.to(device)`); the same tensor when it is already there.
    fn to(&self, py: Python<'_>, device: &str) -> PyResult<Tensor> {
        let d = crate::errors::device(device)?;
        Tensor::run(py, || self.0.to_device(&d))
    }

    /// A copy in `dtype`.
    fn to_dtype(&self, py: Python<'_>, dtype: &str) -> PyResult<Tensor> {
        let dt = self::dtype(dtype)?;
        Tensor::run(py, || self.0.to_dtype(dt))
    }

    /// The matrix product (`a @ b`); both on one device, of one dtype.
    fn matmul(&self, py: Python<'_>, other: &Tensor) -> PyResult<Tensor> {
        Tensor::run(py, || self.0.matmul(&other.0))
    }

    fn __matmul__(&self, py: Python<'_>, other: &Tensor) -> PyResult<Tensor> {
        self.matmul(py, other)
    }

    /// `self <op> other` elementwise with broadcasting: `add`, `sub`, `mul`, `div`,
    /// `maximum`; both on one device, of one dtype.
    fn binary(&self, py: Python<'_>, op: &str, other: &Tensor) -> PyResult<Tensor> {
        let (a, b) = (&self.0, &other.0);
        match op {
            "add" => Tensor::run(py, || a.add(b)),
            "sub" => Tensor::run(py, || a.sub(b)),
            "mul" => Tensor::run(py, || a.mul(b)),
            "div" => Tensor::run(py, || a.div(b)),
            "maximum" => Tensor::run(py, || a.maximum(b)),
            _ => Err(PyTypeError::new_err(format!(
                "no elementwise operation {op:?}"
            ))),
        }
    }

    /// `self <op> v` for a number `v`: `add`, `sub`, `mul`, `div`.
    fn scalar(&self, py: Python<'_>, op: &str, v: f64) -> PyResult<Tensor> {
        let a = &self.0;
        match op {
            "add" => Tensor::run(py, || a.add_scalar(v)),
            "sub" => Tensor::run(py, || a.sub_scalar(v)),
            "mul" => Tensor::run(py, || a.mul_scalar(v)),
            "div" => Tensor::run(py, || a.div_scalar(v)),
            _ => Err(PyTypeError::new_err(format!("no scalar operation {op:?}"))),
        }
    }

    /// `neg`, `exp`, `relu`, `t` (2-D transpose), `contiguous`, `copy`.
    fn unary(&self, py: Python<'_>, op: &str) -> PyResult<Tensor> {
        let a = &self.0;
        match op {
            "neg" => Tensor::run(py, || a.neg()),
            "exp" => Tensor::run(py, || a.exp()),
            "relu" => Tensor::run(py, || a.relu()),
            "t" => Tensor::run(py, || a.t()),
            "contiguous" => Tensor::run(py, || a.contiguous()),
            "copy" => Tensor::run(py, || a.copy()),
            _ => Err(PyTypeError::new_err(format!("no unary operation {op:?}"))),
        }
    }

    /// `sum`, `mean` or `max` over `dim` (removed), or over every element (`dim` None).
    #[pyo3(signature = (op, dim=None))]
    fn reduce(&self, py: Python<'_>, op: &str, dim: Option<isize>) -> PyResult<Tensor> {
        let a = &self.0;
        match (op, dim) {
            ("sum", Some(d)) => Tensor::run(py, || a.sum(d)),
            ("sum", None) => Tensor::run(py, || a.sum_all()),
            ("mean", Some(d)) => Tensor::run(py, || a.mean(d)),
            ("mean", None) => Tensor::run(py, || a.mean_all()),
            ("max", Some(d)) => Tensor::run(py, || a.max(d)),
            ("max", None) => Tensor::run(py, || a.max_all()),
            _ => Err(PyTypeError::new_err(format!("no reduction {op:?}"))),
        }
    }

    /// The same elements in `shape` (one entry may be -1: whatever the rest leaves).
    fn reshape(&self, py: Python<'_>, shape: Vec<isize>) -> PyResult<Tensor> {
        let n = self.0.elem_count();
        let known: usize = shape
            .iter()
            .filter(|&&d| d >= 0)
            .map(|&d| d as usize)
            .product();
        let free = shape.iter().filter(|&&d| d < 0).count();
        let bad = || {
            let s: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
            py_err(
                py,
                Error::InvalidArgument {
                    op: "reshape",
                    msg: format!(
                        "shape '[{}]' is invalid for input of size {n}",
                        s.join(", ")
                    ),
                },
            )
        };
        if free > 1
            || shape.iter().any(|&d| d < -1)
            || (free == 1 && (known == 0 || n % known != 0))
        {
            return Err(bad());
        }
        let dims: Vec<usize> = shape
            .iter()
            .map(|&d| if d < 0 { n / known.max(1) } else { d as usize })
            .collect();
        if dims.iter().product::<usize>() != n {
            return Err(bad());
        }
        Tensor::run(py, || self.0.reshape(dims))
    }

    /// Dimensions `dim0` and `dim1` swapped (a view).
    fn transpose(&self, py: Python<'_>, dim0: isize, dim1: isize) -> PyResult<Tensor> {
        Tensor::run(py, || self.0.transpose(dim0, dim1))
    }

    /// Waits for the tensor's device (`torch.cuda.synchronize()`).
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        let d = self.0.device();
        py.detach(|| d.synchronize()).map_err(|e| py_err(py, e))
    }

    /// The elements as little-endian bytes, row-major (a copy, from any device).
    fn tobytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let host = py
            .detach(|| self.0.cpu().and_then(|t| t.contiguous()))
            .map_err(|e| py_err(py, e))?;
        let bytes = host.host_bytes().map_err(|e| py_err(py, e))?;
        Ok(PyBytes::new(py, bytes))
    }

    /// NumPy's array interface (version 3) over this CPU tensor's own memory, read-only:
    /// `np.asarray(t)` shares it (and keeps `t` alive) instead of copying.
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let ts = typestr(self.0.dtype()).ok_or_else(|| {
            PyTypeError::new_err("NumPy has no bfloat16: convert first with t.to(accel.float32) or t.to_dtype('f32')")
        })?;
        let bytes = self.0.host_bytes().map_err(|e| py_err(py, e))?;
        let d = PyDict::new(py);
        d.set_item("version", 3)?;
        d.set_item("shape", PyTuple::new(py, self.0.dims())?)?;
        d.set_item("typestr", ts)?;
        // (address, read-only): NumPy must not write into accel's immutable buffer.
        d.set_item("data", (bytes.as_ptr() as usize, true))?;
        Ok(d)
    }

    /// DLPack export of a CPU tensor through NumPy's exporter: zero-copy and read-only for a
    /// consumer that asks for DLPack 1.0 (`max_version=(1, 0)` or later: NumPy 2.1+), which
    /// carries the read-only flag; a copy for older consumers (JAX), which cannot be told that
    /// accel's buffer must not be written.
    #[pyo3(signature = (**kwargs))]
    fn __dlpack__<'py>(
        slf: &Bound<'py, Self>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let np = slf.py().import("numpy")?;
        let versioned = match kwargs
            .map(|k| k.get_item("max_version"))
            .transpose()?
            .flatten()
        {
            Some(v) if !v.is_none() => v.get_item(0)?.extract::<i64>()? >= 1,
            _ => false,
        };
        let view = np.call_method1("asarray", (slf,))?;
        let arr = if versioned {
            view
        } else {
            view.call_method0("copy")?
        };
        arr.call_method("__dlpack__", (), kwargs)
    }

    /// (device type, device id) of DLPack: (1, 0), the CPU, for a CPU tensor; others must be
    /// copied with `.to("cpu")` first.
    fn __dlpack_device__(&self) -> PyResult<(i32, i32)> {
        match self.0.device() {
            Device::Cpu => Ok((1, 0)),
            d => Err(err(format!(
                "DLPack export is for CPU tensors; this one is on {d}: copy it with .to(\"cpu\")"
            ))),
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "accelkit._accel.Tensor(shape={:?}, dtype={}, device={})",
            self.0.dims(),
            self.0.dtype(),
            self.0.device()
        )
    }
}

/// A new tensor of `shape`: `kind` is `randn` (mean a, std b), `rand` (uniform in [a, b)),
/// `zeros`, `ones` or `full` (value a).
#[pyfunction]
pub(crate) fn create(
    py: Python<'_>,
    kind: &str,
    shape: Vec<usize>,
    dtype: &str,
    device: &str,
    a: f64,
    b: f64,
) -> PyResult<Tensor> {
    let (dt, d) = (self::dtype(dtype)?, crate::errors::device(device)?);
    match kind {
        "randn" => Tensor::run(py, || accelkit::Tensor::randn_with(a, b, shape, dt, &d)),
        "rand" => Tensor::run(py, || accelkit::Tensor::rand_with(a, b, shape, dt, &d)),
        "zeros" => Tensor::run(py, || accelkit::Tensor::zeros(shape, dt, &d)),
        "ones" => Tensor::run(py, || accelkit::Tensor::ones(shape, dt, &d)),
        "full" => Tensor::run(py, || accelkit::Tensor::full(a, shape, dt, &d)),
        _ => Err(PyTypeError::new_err(format!("no tensor maker {kind:?}"))),
    }
}

/// Seeds `randn`, `rand` and parameter initialisation (`torch.manual_seed`).
#[pyfunction]
pub(crate) fn manual_seed(seed: u64) {
    accelkit::manual_seed(seed);
}

/// Waits for everything queued on `device` (`torch.cuda.synchronize()`).
#[pyfunction]
pub(crate) fn synchronize(py: Python<'_>, device: &str) -> PyResult<()> {
    let d = self::device(device)?;
    py.detach(|| d.synchronize()).map_err(|e| py_err(py, e))
}

/// The allocator's counters for `device`: (allocated, reserved, peak allocated, free, total)
/// bytes; free and total are None where the device does not say.
#[pyfunction]
pub(crate) fn memory_stats(
    py: Python<'_>,
    device: &str,
) -> PyResult<(u64, u64, u64, Option<u64>, Option<u64>)> {
    let d = self::device(device)?;
    let s = py.detach(|| accelkit::memory::stats(&d));
    Ok((
        s.allocated_bytes,
        s.reserved_bytes,
        s.peak_allocated_bytes,
        s.free_bytes,
        s.total_bytes,
    ))
}

/// Hands cached, unused memory of `device` back (`torch.cuda.empty_cache()`).
#[pyfunction]
pub(crate) fn empty_cache(py: Python<'_>, device: &str) -> PyResult<()> {
    let d = self::device(device)?;
    py.detach(|| accelkit::memory::empty_cache(&d))
        .map_err(|e| py_err(py, e))
}

/// Restarts the peak from what is allocated now (`torch.cuda.reset_peak_memory_stats()`).
#[pyfunction]
pub(crate) fn reset_peak(device: &str) -> PyResult<()> {
    let d = self::device(device)?;
    accelkit::memory::reset_peak(&d);
    Ok(())
}
