//! What every backend shares, below them all: finding native libraries and Python
//! environments without LD_LIBRARY_PATH (`libs`, `pyenv`), deciding which files are safe to
//! load (`trust`), and settings that several backends follow (`settings`). No backend folder
//! imports another; what two of them need lives here.

#[cfg(target_os = "linux")]
mod dl;
mod found;
pub(crate) mod kept;
// The CUDA libraries' search serves the `cuda` feature's driver code (and XLA's CUDA plugin).
#[cfg_attr(not(feature = "cuda"), allow(dead_code, unused_imports))]
pub mod libs;
#[cfg_attr(not(feature = "cuda"), allow(dead_code, unused_imports))]
pub(crate) mod major;
mod pycache;
pub mod pyenv;
pub(crate) mod pyfacts;
pub(crate) mod settings;
pub mod trust;
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
mod wanted;
