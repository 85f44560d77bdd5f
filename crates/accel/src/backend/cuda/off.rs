//! The CUDA backend left out of the build (no `cuda` feature): `backend::off`'s stand-in,
//! and a `PinnedBlock` of which no value exists.

use crate::base::dtype::CpuStorage;
use crate::{BackendKind, DType, Result};

crate::backend::off::compiled_out!(Cuda, CudaStorage, TimingEvent, BackendKind::Cuda);

/// Page-locked host memory, which only the CUDA driver makes: no value exists here.
#[derive(Debug)]
pub(crate) enum PinnedBlock {}

impl PinnedBlock {
    pub fn alloc(_: usize, _: usize) -> Result<PinnedBlock> {
        not_compiled()
    }
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        match *self {}
    }
    /// # Safety
    /// Never callable: no `PinnedBlock` exists in this build.
    pub unsafe fn storage(&self, _: DType, _: usize) -> CpuStorage {
        match *self {}
    }
}
