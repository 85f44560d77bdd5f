//! A CUDA driver call's result as accel's error: the `CUresult` code and its name
//! (`CUDA_ERROR_INVALID_VALUE`), asked of the driver itself.

use std::ffi::CStr;

use cudarc::driver::sys;

use crate::{Error, Result};

/// A driver call's result as ours.
pub(crate) fn ck(r: sys::CUresult, what: &str) -> Result<()> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(Error::backend(
            crate::BackendKind::Cuda,
            format!("CUDA {what} failed"),
            DriverError {
                code: r as i32,
                name: err_name(r),
            },
        ))
    }
}

/// A CUDA driver error: the `CUresult` code and its name (`CUDA_ERROR_INVALID_VALUE`).
#[derive(Debug)]
pub(crate) struct DriverError {
    pub code: i32,
    pub name: String,
}

impl std::fmt::Display for DriverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name, self.code)
    }
}

impl std::error::Error for DriverError {}

pub(crate) fn err_name(r: sys::CUresult) -> String {
    let mut p: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: err_name is only called with a result some driver call returned, so libcuda is
    // loaded (the CUDA probe, `probe_driver`, checks that `libs` loaded it before any driver
    // call); `p` is a local out-pointer. cuGetErrorName accepts any CUresult value.
    let ok = unsafe { sys::cuGetErrorName(r, &mut p) } == sys::CUresult::CUDA_SUCCESS;
    if ok && !p.is_null() {
        // SAFETY: on success cuGetErrorName sets `p` to a static NUL-terminated string owned
        // by the driver (never freed); null is excluded just above.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    } else {
        format!("{r:?}")
    }
}
