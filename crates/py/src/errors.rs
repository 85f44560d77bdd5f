//! Errors for Python: `AccelError` and the exception PyTorch raises in each place (`py_err`),
//! with the library's messages in Python's spelling (`pythonic`).

use std::str::FromStr;

use accelkit::{Device, Error};
use pyo3::create_exception;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyType;

create_exception!(
    _accel,
    AccelError,
    PyRuntimeError,
    "An accel error: what went wrong, and how to fix it where accel knows."
);

/// An accel error as a Python exception carrying its message (reason and fix).
pub(crate) fn err(e: impl std::fmt::Display) -> PyErr {
    AccelError::new_err(pythonic(&e.to_string()))
}

/// The library's messages with their Rust spelling in Python's: `.to_device(&cpu)` is
/// `.to("cpu")` here, `DType::F32` is `"f32"`.
pub(crate) fn pythonic(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len());
    let mut rest = msg;
    loop {
        let to = rest.find(".to_device(&");
        let dt = rest.find("DType::");
        match (to, dt) {
            (Some(i), _) if dt.is_none_or(|j| i < j) => {
                let after = &rest[i + ".to_device(&".len()..];
                match after.find(')') {
                    Some(k) => {
                        out.push_str(&rest[..i]);
                        out.push_str(&format!(".to(\"{}\")", &after[..k]));
                        rest = &after[k + 1..];
                    }
                    None => {
                        out.push_str(rest);
                        return out;
                    }
                }
            }
            (_, Some(j)) => {
                let after = &rest[j + "DType::".len()..];
                let n = after
                    .find(|c: char| !c.is_ascii_alphanumeric())
                    .unwrap_or(after.len());
                out.push_str(&rest[..j]);
                out.push_str(&format!("\"{}\"", after[..n].to_ascii_lowercase()));
                rest = &after[n..];
            }
            _ => {
                out.push_str(rest);
                return out;
            }
        }
    }
}

pub(crate) fn device(name: &str) -> PyResult<Device> {
    Device::from_str(name).map_err(err)
}

/// An accel error as the exception PyTorch raises there: a `RuntimeError` for devices,
/// shapes, dtypes and memory, an `IndexError` for a dimension out of range; every one an
/// `AccelError` (the classes are in `accelkit._errors`, which gives them both bases).
pub(crate) fn py_err(py: Python<'_>, e: Error) -> PyErr {
    let (class, msg) = match &e {
        Error::DeviceMismatch { op, lhs, rhs } => (
            "AccelError",
            format!(
                "Expected all tensors to be on the same device, but found at least two \
                 devices, {lhs} and {rhs}! ({op}: copy one to the other's device first: \
                 a.to(\"{rhs}\") or b.to(\"{lhs}\"))"
            ),
        ),
        Error::ShapeMismatch { op, lhs, rhs, .. }
            if *op == "matmul" && lhs.rank() == 2 && rhs.rank() == 2 =>
        {
            (
                "AccelError",
                format!(
                    "mat1 and mat2 shapes cannot be multiplied ({}x{} and {}x{})",
                    lhs.dims()[0],
                    lhs.dims()[1],
                    rhs.dims()[0],
                    rhs.dims()[1]
                ),
            )
        }
        Error::DimOutOfRange { dim, rank, .. } => {
            let r = (*rank).max(1) as isize;
            (
                "AccelIndexError",
                format!(
                    "Dimension out of range (expected to be in range of [{}, {}], but got {dim})",
                    -r,
                    r - 1
                ),
            )
        }
        _ => ("AccelError", pythonic(&e.to_string())),
    };
    let class = py
        .import("accelkit._errors")
        .and_then(|m| m.getattr(class))
        .and_then(|c| c.cast_into::<PyType>().map_err(PyErr::from));
    match class {
        Ok(c) => PyErr::from_type(c, msg),
        Err(_) => AccelError::new_err(msg),
    }
}
