//! Neural-network building blocks that know their device (PyTorch's `torch.nn`, plus the
//! `device()` PyTorch modules lack).

mod linear;
mod module;

pub use linear::Linear;
pub use module::Module;
