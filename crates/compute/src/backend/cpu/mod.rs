//! The CPU backend: storage as typed vectors, kernels multi-threaded with rayon and written so
//! the compiler vectorises them (the matmul micro-kernels use AVX2/FMA or AVX-512 intrinsics
//! when the processor has them).
//!
//! - `device`: the probe and `impl Backend for Cpu`.
//! - `storage`: `impl BackendStorage for CpuStorage` and the elementwise, reduce and cast
//!   kernels; `num`: element arithmetic.
//! - `matmul/`: the packed GEMM; `alloc`: the caching host allocator.

pub(crate) mod alloc;
mod device;
// The doctor's CPU checklist.
pub(crate) mod doctor;
mod float16;
mod gather;
pub(crate) mod matmul;
pub(crate) mod num;
mod storage;

pub(crate) use device::Cpu;
