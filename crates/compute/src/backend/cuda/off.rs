//! The CUDA backend left out of the build (no `cuda` feature): `backend::off`'s stand-in.

use crate::BackendKind;
crate::backend::off::compiled_out!(Cuda, CudaStorage, TimingEvent, BackendKind::Cuda);
