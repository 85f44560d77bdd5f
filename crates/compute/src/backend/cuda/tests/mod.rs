//! The CUDA backend's unit tests that need no GPU (the GPU-only ones are in `tests/it/cuda.rs`).

mod archs;
mod discovery;
mod floor;
