"""`accel.backends.mps`, as PyTorch's `torch.backends.mps` (`is_built`, `is_available`)."""

from . import mps

__all__ = ["mps"]
