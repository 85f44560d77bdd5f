"""`accel.nn`: the layers the seeds use, as `torch.nn` spells them (`nn.Linear`)."""

from __future__ import annotations

import math

from ._errors import AccelTypeError
from ._tensor import Tensor, _device_name, device, rand, tensor

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterator, Optional


class Module:
    """The base of accel's layers: `.to()`, `.cuda()`, `.cpu()`, `.parameters()`, and
    `.device`, which PyTorch's modules lack (the device their parameters are on)."""

    def parameters(self) -> "Iterator[Tensor]":
        for name in self._parameter_names:
            p = getattr(self, name)
            if p is not None:
                yield p

    def named_parameters(self) -> "Iterator[tuple]":
        for name in self._parameter_names:
            p = getattr(self, name)
            if p is not None:
                yield name, p

    def to(self, *args: Any, **kwargs: Any) -> "Module":
        """Moves (copies) every parameter, as `model.to(device)` or `model.to(dtype)`; returns
        the module itself, as PyTorch does."""
        for name in self._parameter_names:
            p = getattr(self, name)
            if p is not None:
                object.__setattr__(self, name, p.to(*args, **kwargs))
        return self

    def cuda(self, device: Optional[Any] = None) -> "Module":
        return self.to("cuda" if device is None else _device_name(device))

    def cpu(self) -> "Module":
        return self.to("cpu")

    def float(self) -> "Module":
        from ._tensor import float32

        return self.to(float32)

    @property
    def device(self) -> device:
        for p in self.parameters():
            return p.device
        return device("cpu")

    def eval(self) -> "Module":
        return self

    def train(self, mode: bool = True) -> "Module":
        return self

    def __call__(self, *args: Any) -> Tensor:
        return self.forward(*args)

    def forward(self, *args: Any) -> Tensor:
        raise NotImplementedError


class Linear(Module):
    """`y = x @ weight.T + bias` (`torch.nn.Linear`): weight is out_features x in_features,
    both drawn uniformly from +-1/sqrt(in_features), as PyTorch initialises them."""

    _parameter_names = ("weight", "bias")

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 device: Optional[Any] = None, dtype: Optional[Any] = None):
        for n, v in (("in_features", in_features), ("out_features", out_features)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise AccelTypeError(f"Linear(): {n} must be a whole number from 0, not {v!r}")
        self.in_features, self.out_features = in_features, out_features
        bound = 1.0 / math.sqrt(in_features) if in_features > 0 else 0.0
        dev = _device_name(device)

        def uniform(*shape: int) -> Tensor:
            return (rand(*shape, dtype=dtype) * (2 * bound) - bound).to(dev)

        self.weight = uniform(out_features, in_features)
        self.bias = uniform(out_features) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        if not isinstance(x, Tensor):
            x = tensor(x, device=self.device)
        one = x.ndim == 1
        if one:
            x = x.reshape(1, -1)
        y = x @ self.weight.t()
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(-1) if one else y

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")

    def __repr__(self) -> str:
        return f"Linear({self.extra_repr()})"


__all__ = ["Linear", "Module"]
