//! Any GPU through wgpu: Vulkan on Linux (and Mesa's software lavapipe in tests), Metal on
//! macOS (the seeds' "mps"), DX12 on Windows. Kernels are WGSL compute shaders, compiled once
//! per shader text and cached.
//!
//! Tensors are f32 and i32 on every adapter, and f16 where the adapter has `shader-f16`;
//! WGSL has no 64-bit or bf16 types, so those are an "unsupported on this device" error value.
//! Adapters of CPU type (lavapipe, SwiftShader) are listed and usable as `wgpu:N` but never
//! chosen by `Device::best()`.
//!
//! - `device`: the probe and `impl Backend for Wgpu` (the device side of the contract).
//! - `context`: one adapter in use: its device, buffers, pipelines, dispatches, timestamps.
//! - `storage`: tensor data in a GPU buffer and every op on it.
//! - `shaders`: WGSL source of the kernels; `choice`: which matmul kernel runs.
//! - `mps`: Apple GPUs (PyTorch's "mps"), the first Metal adapter under its own name.
//!
//! Without the `wgpu` feature, `off` stands in with the same items.

pub(crate) mod causes;
mod choice;
#[cfg(feature = "wgpu")]
mod context;
#[cfg(feature = "wgpu")]
mod device;
pub(crate) mod doctor;
mod mps;
#[cfg(not(feature = "wgpu"))]
mod off;
#[cfg(feature = "wgpu")]
mod shaders;
#[cfg(feature = "wgpu")]
mod storage;

pub(crate) use choice::{matmul_kernel, set_matmul_kernel};
#[cfg(feature = "wgpu")]
pub(crate) use device::{helper_answer, Wgpu};
pub(crate) use mps::Mps;
#[cfg(not(feature = "wgpu"))]
pub(crate) use off::{helper_answer, Wgpu, WgpuStorage};
#[cfg(feature = "wgpu")]
pub(crate) use storage::WgpuStorage;
