use super::module::Module;
use crate::{DType, Device, Error, Result, Tensor};

/// `y = x W^T + b` (PyTorch's `nn.Linear`), with `W` of shape (out, in) and `b` of shape
/// (out). Initialised as PyTorch does: `W` and `b` uniform in [-1/sqrt(in), 1/sqrt(in)]
/// (Kaiming-uniform with a = sqrt(5)), from the global generator (see `manual_seed`).
#[derive(Debug, Clone)]
pub struct Linear {
    weight: Tensor,
    bias: Option<Tensor>,
}

impl Linear {
    /// A new f32 layer on `device`.
    pub fn new(
        in_features: usize,
        out_features: usize,
        bias: bool,
        device: &Device,
    ) -> Result<Linear> {
        if in_features == 0 {
            return Err(Error::invalid(
                "Linear::new",
                "in_features must be at least 1",
            ));
        }
        let bound = 1.0 / (in_features as f64).sqrt();
        let weight = Tensor::rand(-bound, bound, (out_features, in_features), device)?;
        let bias = if bias {
            Some(Tensor::rand(-bound, bound, out_features, device)?)
        } else {
            None
        };
        Ok(Linear { weight, bias })
    }

    /// A layer from given parameters: `weight` (out, in) and optional `bias` (out), on one
    /// device and of one float dtype.
    pub fn from_parameters(weight: Tensor, bias: Option<Tensor>) -> Result<Linear> {
        if weight.rank() != 2 {
            return Err(Error::invalid(
                "Linear",
                format!("weight must be 2-d (out, in), got shape {}", weight.shape()),
            ));
        }
        if let Some(b) = &bias {
            if b.dims() != [weight.dims()[0]] {
                return Err(Error::shape(
                    "Linear",
                    weight.shape(),
                    b.shape(),
                    "bias must have one element per output feature",
                ));
            }
            if b.device() != weight.device() {
                return Err(Error::DeviceMismatch {
                    op: "Linear",
                    lhs: weight.device(),
                    rhs: b.device(),
                });
            }
        }
        Ok(Linear { weight, bias })
    }

    /// The weight, (out, in).
    pub fn weight(&self) -> &Tensor {
        &self.weight
    }

    /// The bias, (out), if any.
    pub fn bias(&self) -> Option<&Tensor> {
        self.bias.as_ref()
    }

    /// Converts every parameter to `dtype`.
    pub fn to_dtype(&mut self, dtype: DType) -> Result<()> {
        self.weight = self.weight.to_dtype(dtype)?;
        self.bias = self.bias.as_ref().map(|b| b.to_dtype(dtype)).transpose()?;
        Ok(())
    }
}

impl Module for Linear {
    /// `x` is (in) or (batch, in) or (batch, seq, in); the last dimension must be `in`.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let w_t = self.weight.t()?;
        let y = match x.rank() {
            1 => x
                .reshape((1, x.dims()[0]))?
                .matmul(&w_t)?
                .reshape(self.weight.dims()[0])?,
            _ => x.matmul(&w_t)?,
        };
        match &self.bias {
            Some(b) => y.add(b),
            None => Ok(y),
        }
    }

    fn parameters(&self) -> Vec<&Tensor> {
        std::iter::once(&self.weight)
            .chain(self.bias.as_ref())
            .collect()
    }

    fn to_device(&mut self, device: &Device) -> Result<()> {
        // Copy everything first so a failure leaves the module where it was.
        let weight = self.weight.to_device(device)?;
        let bias = self
            .bias
            .as_ref()
            .map(|b| b.to_device(device))
            .transpose()?;
        self.weight = weight;
        self.bias = bias;
        Ok(())
    }
}
