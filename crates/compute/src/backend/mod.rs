//! Backends, and the contract between them and the rest of the library.
//!
//! - `ops`, `contract`: the ops as values and the two traits every backend implements
//!   (`Backend`, the device side; `BackendStorage`, the storage side).
//! - `cpu`, `cuda`, `xla`, `wgpu`: one folder per backend, side by side; none imports
//!   another, the registry or the dispatch. `mps` (Apple GPUs) is a wgpu adapter, so it
//!   lives in `wgpu/`. A backend the build leaves out is `off.rs`'s stand-in.
//! - `registry`: one probe per `BackendKind`, and which devices exist.
//! - `dispatch`: `Storage` (tensor data on any backend) and the device-side calls, routed
//!   to the backend by `match`, without a `cfg`.
//! - `devices`: every `Device` method that asks the backends (`best`, `check`, `caps`,
//!   `synchronize`, parsing).

pub(crate) mod contract;
mod devices;
pub(crate) mod dispatch;
pub(crate) mod kept_probes;
pub(crate) mod off;
pub(crate) mod ops;
pub(crate) mod registry;

pub(crate) mod cpu;
pub(crate) mod cuda;
pub(crate) mod native;
pub(crate) mod wgpu;
pub(crate) mod xla;
