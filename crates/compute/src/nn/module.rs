//! The `Module` trait: what every layer and model answers (PyTorch's `nn.Module`).

use crate::{Device, Result, Tensor};

/// A layer or model: a function of tensors with parameters on one device.
pub trait Module {
    /// Applies the module to `x`.
    fn forward(&self, x: &Tensor) -> Result<Tensor>;

    /// The parameters, in a stable order.
    fn parameters(&self) -> Vec<&Tensor>;

    /// Copies every parameter to `device` (`model.to(device)`); a no-op on the same device.
    fn to_device(&mut self, device: &Device) -> Result<()>;

    /// The device the parameters live on (the CPU for a module without parameters).
    fn device(&self) -> Device {
        self.parameters()
            .first()
            .map_or(Device::Cpu, |p| p.device())
    }

    /// Total number of parameter elements.
    fn num_parameters(&self) -> usize {
        self.parameters().iter().map(|p| p.elem_count()).sum()
    }

    /// Moves the module to the first CUDA GPU (`model.cuda()`).
    fn cuda(&mut self) -> Result<()> {
        self.to_device(&Device::Cuda(0))
    }

    /// Moves the module to the CPU (`model.cpu()`).
    fn cpu(&mut self) -> Result<()> {
        self.to_device(&Device::Cpu)
    }
}
