"""Tensors as PyTorch spells them: `accel.tensor`, `accel.randn`, `x.to("cuda")`, `x.cuda()`,
`a @ b`, `a + 1`, `print(x)`. The arithmetic runs in Rust (`_accel.Tensor`); this file gives it
PyTorch's names, type promotion and printing. Nothing here imports NumPy until a call needs it.
"""

from __future__ import annotations

import builtins
import itertools
import math
import struct

from . import _accel
from ._errors import AccelError, AccelIndexError, AccelTypeError, AccelValueError

# `accel.float` and `accel.int` are dtypes, as in PyTorch: Python's own types by these names.
_pyint, _pyfloat = builtins.int, builtins.float

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterator, List, Optional, Tuple, Union


# ---- dtypes ----------------------------------------------------------------------------------

class dtype:
    """An element type (`accel.float32`...), printed as PyTorch prints `torch.float32`, under
    the name accel is imported as in the seeds (`import accelkit as accel`)."""

    __slots__ = ("name", "code", "is_floating_point", "itemsize", "_pack")

    def __init__(self, name: str, code: str, floating: bool, itemsize: int, pack: str):
        self.name, self.code, self.is_floating_point = name, code, floating
        self.itemsize, self._pack = itemsize, pack

    def __repr__(self) -> str:
        return f"accel.{self.name}"

    def __reduce__(self):
        return (_dtype_named, (self.name,))


float16 = half = dtype("float16", "f16", True, 2, "e")
bfloat16 = dtype("bfloat16", "bf16", True, 2, "")
float32 = float = dtype("float32", "f32", True, 4, "f")
float64 = double = dtype("float64", "f64", True, 8, "d")
int32 = int = dtype("int32", "i32", False, 4, "i")
int64 = long = dtype("int64", "i64", False, 8, "q")
_DTYPES = (float16, bfloat16, float32, float64, int32, int64)
_BY_CODE = {d.code: d for d in _DTYPES}
_BY_NAME = {d.name: d for d in _DTYPES}
_BY_NAME.update(half=float16, float=float32, double=float64, int=int32, long=int64)
# Rank for type promotion, as PyTorch: any float beats any int; f16 with bf16 is f32.
_RANK = {int32: 0, int64: 1, float16: 2, bfloat16: 2, float32: 3, float64: 4}


def _dtype_named(name: str) -> dtype:
    return _BY_NAME[name]


def _as_dtype(d: Any) -> dtype:
    """A dtype from a dtype, its name (`"float32"`, `"f32"`), or NumPy's dtype."""
    if isinstance(d, dtype):
        return d
    name = d if isinstance(d, str) else getattr(d, "name", None) or getattr(d, "__name__", None)
    if isinstance(name, str):
        name = name.replace("torch.", "").replace("accel.", "")
        found = _BY_NAME.get(name) or _BY_CODE.get(name)
        if found is not None:
            return found
    raise AccelTypeError(f"{d!r} is not an accel dtype: use one of accel.float16, "
                         "accel.bfloat16, accel.float32, accel.float64, accel.int32, accel.int64")


def _promote(a: dtype, b: dtype) -> dtype:
    if a is b:
        return a
    if {a, b} == {float16, bfloat16}:
        return float32
    return a if _RANK[a] >= _RANK[b] else b


# ---- devices ---------------------------------------------------------------------------------

class device:
    """A device (`accel.device("cuda:0")`, `accel.device("cuda", 1)`), with PyTorch's `.type`
    and `.index`; equal to its name as a string (`x.device == "cpu"`)."""

    __slots__ = ("type", "index")

    def __init__(self, type: Union[str, "device"], index: Optional[int] = None):
        if isinstance(type, device):
            type, index = type.type, type.index if index is None else index
        if not isinstance(type, str):
            raise AccelTypeError(f"device() takes a string such as 'cuda:0', not {type!r}")
        name = type.strip().lower()
        if ":" in name and index is None:
            name, _, rest = name.partition(":")
            # xla:cpu:1 and the like: the library resolves those to xla:N.
            index = _pyint(rest) if rest.isdigit() else _index_of(type)
        if name not in ("cpu", "cuda", "mps", "xla", "wgpu"):
            _index_of(type)  # raises the library's error, which names what is accepted
        if index is not None and (isinstance(index, bool) or not isinstance(index, _pyint)
                                  or index < 0):
            raise AccelValueError(f"a device index is a whole number from 0, not {index!r}")
        self.type, self.index = name, index

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        if self.index is None:
            return f"device(type={self.type!r})"
        return f"device(type={self.type!r}, index={self.index})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            try:
                other = device(other)
            except Exception:
                return False
        if not isinstance(other, device):
            return NotImplemented
        return self.type == other.type and self.index == other.index

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __reduce__(self):
        return (device, (self.type, self.index))


_Device = device  # the class, where a parameter named `device` hides it


def _index_of(name: str) -> Optional[int]:
    """The index the library gives a device name (None for one without, `cpu`), or its error."""
    parsed = _accel.parse_device(name)
    return _pyint(parsed.split(":")[1]) if ":" in parsed else None


def _device_name(d: Any) -> str:
    """The library's name for a device given as a device, a string or an index (CUDA's)."""
    if d is None:
        return "cpu"
    if isinstance(d, device):
        return str(d)
    if isinstance(d, str):
        return d
    if isinstance(d, _pyint) and not isinstance(d, bool):
        return f"cuda:{d}"
    raise AccelTypeError(f"a device is a string such as 'cuda:0', an accel.device or a CUDA "
                         f"index, not {d!r}")


# ---- tensors ---------------------------------------------------------------------------------

class Size(tuple):
    """A tensor's shape: a tuple, printed as PyTorch prints `torch.Size`."""

    def __repr__(self) -> str:
        return f"accel.Size({list(self)})"

    def numel(self) -> int:
        return math.prod(self)


def _wrap(t: Any) -> "Tensor":
    x = Tensor.__new__(Tensor)
    x._t = t
    return x


class Tensor:
    """A tensor on some device: PyTorch's spelling over accel's Rust tensor. Immutable: every
    operation returns a new tensor."""

    __slots__ = ("_t", "__weakref__")

    def __init__(self, *args: Any, **kwargs: Any):
        raise AccelTypeError("make tensors with accel.tensor(data), accel.zeros(...), "
                             "accel.randn(...) and the like")

    # -- what it is

    @property
    def device(self) -> device:
        return device(self._t.device)

    @property
    def dtype(self) -> dtype:
        return _BY_CODE[self._t.dtype]

    @property
    def shape(self) -> Size:
        return Size(self._t.shape)

    def size(self, dim: Optional[int] = None) -> Union[Size, int]:
        s = self.shape
        return s if dim is None else s[_dim(dim, len(s))]

    @property
    def ndim(self) -> int:
        return len(self._t.shape)

    def dim(self) -> int:
        return self.ndim

    def numel(self) -> int:
        return math.prod(self._t.shape)

    nelement = numel

    @property
    def is_cuda(self) -> bool:
        return self._t.is_cuda

    @property
    def is_cpu(self) -> bool:
        return self._t.device == "cpu"

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    def element_size(self) -> int:
        return self.dtype.itemsize

    def __len__(self) -> int:
        if not self._t.shape:
            raise AccelTypeError("len() of a 0-d tensor")
        return self._t.shape[0]

    # -- moving and converting

    def to(self, *args: Any, **kwargs: Any) -> "Tensor":
        """`x.to("cuda")`, `x.to(accel.float64)`, `x.to("cuda", accel.float16)`,
        `x.to(device=..., dtype=...)`, `x.to(other)`: a copy where something changes, this
        tensor where nothing does."""
        dev, dt = kwargs.pop("device", None), kwargs.pop("dtype", None)
        kwargs.pop("non_blocking", None)
        kwargs.pop("copy", None)
        if kwargs:
            raise AccelTypeError(f"to() got unexpected arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, Tensor):
                dev, dt = a.device, a.dtype
            elif isinstance(a, dtype) or (isinstance(a, str) and _looks_like_dtype(a)):
                dt = a
            elif a is not None:
                dev = a
        out = self
        if dt is not None and _as_dtype(dt) is not self.dtype:
            out = _wrap(out._t.to_dtype(_as_dtype(dt).code))
        if dev is not None and device(_device_name(dev)) != out.device:
            out = _wrap(out._t.to(_device_name(dev)))
        return out

    def cuda(self, device: Optional[Any] = None) -> "Tensor":
        """A copy on a CUDA GPU (`cuda:0` unless told), as `x.cuda()`."""
        return self.to("cuda" if device is None else _device_name(device))

    def cpu(self) -> "Tensor":
        return self.to("cpu")

    def to_dtype(self, dt: Any) -> "Tensor":
        return self.to(_as_dtype(dt))

    def float(self) -> "Tensor":
        return self.to(float32)

    def double(self) -> "Tensor":
        return self.to(float64)

    def half(self) -> "Tensor":
        return self.to(float16)

    def bfloat16(self) -> "Tensor":
        return self.to(bfloat16)

    def int(self) -> "Tensor":
        return self.to(int32)

    def long(self) -> "Tensor":
        return self.to(int64)

    def contiguous(self) -> "Tensor":
        return _wrap(self._t.unary("contiguous"))

    def clone(self) -> "Tensor":
        return _wrap(self._t.unary("copy"))

    def detach(self) -> "Tensor":
        return self

    # -- reading the values

    def tobytes(self) -> bytes:
        return self._t.tobytes()

    def tolist(self) -> Any:
        """The values as (nested) Python lists of floats or ints, from any device."""
        flat = _values(self)
        return _nest(flat, list(self._t.shape))

    def item(self) -> Union[float, int]:
        n = self.numel()
        if n != 1:
            raise AccelError(f"a Tensor with {n} elements cannot be converted to Scalar")
        return _values(self)[0]

    def numpy(self) -> Any:
        """A NumPy array of a CPU tensor, sharing its memory (read-only: accel's tensors do
        not change); `x.cpu().numpy()` for one elsewhere."""
        import numpy as np

        if self._t.device != "cpu":
            raise AccelTypeError(
                f"can't convert {self._t.device} device type tensor to numpy. Use Tensor.cpu() "
                "to copy the tensor to host memory first.")
        return np.asarray(self._dense())

    def _dense(self) -> Any:
        """The Rust tensor, made contiguous (a copy) where it is a strided view (`x.t()`),
        since its memory is handed out as one row-major block."""
        t = self._t
        return t if t.is_contiguous else t.unary("contiguous")

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        import numpy as np

        a = np.asarray(self._dense())
        return a if dtype is None else a.astype(dtype)

    @property
    def __array_interface__(self) -> dict:
        # Only over this tensor's own memory: a strided view has none in row-major order,
        # and NumPy then asks __array__ for a copy instead.
        if not self._t.is_contiguous:
            raise AttributeError("__array_interface__ (a strided view: see __array__)")
        return self._t.__array_interface__

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self._dense().__dlpack__(**kwargs)

    def __dlpack_device__(self) -> Tuple[int, int]:
        return self._t.__dlpack_device__()

    def synchronize(self) -> None:
        self._t.synchronize()

    def __float__(self) -> float:
        return _pyfloat(self.item())

    def __int__(self) -> int:
        return _pyint(self.item())

    def __index__(self) -> int:
        if self.dtype.is_floating_point:
            raise AccelTypeError("only integer tensors of a single element can be converted "
                                 "to an index")
        return _pyint(self.item())

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise AccelValueError("Boolean value of Tensor with more than one value is "
                                  "ambiguous")
        return bool(self.item())

    def __format__(self, spec: str) -> str:
        if self.ndim == 0 or (spec and self.numel() == 1):
            return format(self.item(), spec)
        return format(str(self), spec)

    def __iter__(self) -> Iterator[Any]:
        if self.ndim == 0:
            raise AccelTypeError("iteration over a 0-d tensor")
        rows = self.cpu().tolist()
        dev = self.device
        for r in rows:
            yield tensor(r, dtype=self.dtype, device=dev)

    # -- indexing (a copy: accel's tensors are immutable, so a copy reads as PyTorch's view)

    def __getitem__(self, key: Any) -> "Tensor":
        """`x[0]`, `x[:, 1]`, `x[..., -1]`, `x[0, 1:3, ::2]`: integers and slices (step above
        0), each dimension at most once; an integer removes its dimension."""
        shape = list(self._t.shape)
        key = key if isinstance(key, tuple) else (key,)
        if not shape:
            raise AccelIndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python "
                                  "to convert a 0-dim tensor to a number")
        if sum(k is Ellipsis for k in key) > 1:
            raise AccelIndexError("an index can only have a single ellipsis ('...')")
        if any(k is Ellipsis for k in key):
            at = key.index(Ellipsis)
            fill = len(shape) - (len(key) - 1)
            key = key[:at] + (slice(None),) * max(fill, 0) + key[at + 1:]
        if len(key) > len(shape):
            raise AccelIndexError(f"too many indices for tensor of dimension {len(shape)}")
        picks, out_shape = [], []
        for d, n in enumerate(shape):
            k = key[d] if d < len(key) else slice(None)
            if isinstance(k, Tensor) and k.numel() == 1 and not k.dtype.is_floating_point:
                k = k.item()
            if isinstance(k, bool) or not isinstance(k, (_pyint, slice)):
                raise AccelTypeError(f"accel indexes with integers, slices and '...', not "
                                     f"{type(k).__name__}")
            if isinstance(k, slice):
                if k.step is not None and k.step <= 0:
                    raise AccelValueError("step must be greater than zero")
                r = range(*k.indices(n))
                picks.append(r)
                out_shape.append(len(r))
            else:
                i = k + n if k < 0 else k
                if not 0 <= i < n:
                    raise AccelIndexError(f"index {k} is out of bounds for dimension {d} with "
                                          f"size {n}")
                picks.append(range(i, i + 1))
        raw, size = self._t.tobytes(), self.dtype.itemsize
        strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
        last, chunks = picks[-1], []
        for idx in itertools.product(*picks[:-1]):
            base = sum(i * s for i, s in zip(idx, strides))
            if last.step == 1:
                if len(last):
                    chunks.append(raw[(base + last.start) * size:(base + last[-1] + 1) * size])
            else:
                chunks += [raw[(base + j) * size:(base + j + 1) * size] for j in last]
        t = _accel.Tensor.from_bytes(b"".join(chunks), self._t.dtype, out_shape, "cpu")
        return _wrap(t if self._t.device == "cpu" else t.to(self._t.device))

    def __setitem__(self, key: Any, value: Any) -> None:
        raise AccelTypeError("accel's tensors are immutable: 'Tensor' object does not support "
                             "item assignment; make a new tensor instead (arithmetic such as "
                             "x * mask, or accel.tensor(...))")

    # -- arithmetic

    def _binary(self, op: str, other: Any, reverse: bool = False) -> "Tensor":
        if isinstance(other, Tensor):
            dt = _promote(self.dtype, other.dtype)
            a, b = self.to(dt), other.to(dt)
            if reverse:
                a, b = b, a
            return _wrap(a._t.binary(op, b._t))
        if isinstance(other, (bool, _pyint, _pyfloat)):
            a = self
            if isinstance(other, _pyfloat) and not self.dtype.is_floating_point:
                a = self.to(float32)
            v = _pyfloat(other)
            if not reverse:
                return _wrap(a._t.scalar(op, v))
            if op == "add" or op == "mul":
                return _wrap(a._t.scalar(op, v))
            if op == "sub":
                return _wrap(a._t.unary("neg").scalar("add", v))
            filled = _accel.create("full", list(a._t.shape), a._t.dtype, a._t.device, v, 0.0)
            return _wrap(filled.binary(op, a._t))
        return NotImplemented

    def __add__(self, o: Any) -> "Tensor":
        return self._binary("add", o)

    def __radd__(self, o: Any) -> "Tensor":
        return self._binary("add", o, True)

    def __sub__(self, o: Any) -> "Tensor":
        return self._binary("sub", o)

    def __rsub__(self, o: Any) -> "Tensor":
        return self._binary("sub", o, True)

    def __mul__(self, o: Any) -> "Tensor":
        return self._binary("mul", o)

    def __rmul__(self, o: Any) -> "Tensor":
        return self._binary("mul", o, True)

    def __truediv__(self, o: Any) -> "Tensor":
        return self._binary("div", o)

    def __rtruediv__(self, o: Any) -> "Tensor":
        return self._binary("div", o, True)

    def __neg__(self) -> "Tensor":
        return _wrap(self._t.unary("neg"))

    def __pos__(self) -> "Tensor":
        return self

    def __matmul__(self, o: Any) -> "Tensor":
        if not isinstance(o, Tensor):
            return NotImplemented
        return matmul(self, o)

    def __rmatmul__(self, o: Any) -> "Tensor":
        return NotImplemented

    add = __add__
    sub = __sub__
    mul = __mul__
    div = __truediv__
    neg = __neg__

    def matmul(self, other: "Tensor") -> "Tensor":
        return matmul(self, other)

    def maximum(self, other: "Tensor") -> "Tensor":
        return self._binary("maximum", other)

    def exp(self) -> "Tensor":
        return _wrap(self._t.unary("exp"))

    def relu(self) -> "Tensor":
        return _wrap(self._t.unary("relu"))

    def sum(self, dim: Optional[int] = None) -> "Tensor":
        return _wrap(self._t.reduce("sum", dim))

    def mean(self, dim: Optional[int] = None) -> "Tensor":
        if not self.dtype.is_floating_point:
            raise AccelError(f"mean(): could not infer output dtype. Input dtype must be "
                             f"either a floating point or complex dtype. Got: {self.dtype.name}")
        return _wrap(self._t.reduce("mean", dim))

    def max(self, dim: Optional[int] = None) -> "Tensor":
        return _wrap(self._t.reduce("max", dim))

    # -- shape

    def reshape(self, *shape: Any) -> "Tensor":
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return _wrap(self._t.reshape([_pyint(s) for s in shape]))

    view = reshape

    def t(self) -> "Tensor":
        if self.ndim > 2:
            raise AccelError(f"t() expects a tensor with <= 2 dimensions, but self is "
                             f"{self.ndim}D")
        return self if self.ndim < 2 else _wrap(self._t.unary("t"))

    @property
    def T(self) -> "Tensor":
        return self.t() if self.ndim <= 2 else self

    def transpose(self, dim0: int, dim1: int) -> "Tensor":
        return _wrap(self._t.transpose(dim0, dim1))

    # -- printing

    def __repr__(self) -> str:
        return _format(self)

    __str__ = __repr__


def _looks_like_dtype(s: str) -> bool:
    s = s.replace("torch.", "").replace("accel.", "")
    return s in _BY_NAME or s in _BY_CODE


def _dim(d: int, rank: int) -> int:
    r = max(rank, 1)
    if not -r <= d < r:
        raise AccelIndexError(f"Dimension out of range (expected to be in range of "
                              f"[{-r}, {r - 1}], but got {d})")
    return d % r


def _bf16_to_float(raw: bytes) -> List[float]:
    halves = struct.unpack(f"<{len(raw) // 2}H", raw)
    return list(struct.unpack(f"<{len(halves)}f", struct.pack(f"<{len(halves)}I",
                                                              *(h << 16 for h in halves))))


def _values(t: Tensor) -> List[Union[float, int]]:
    raw = t._t.tobytes()
    dt = t.dtype
    if dt is bfloat16:
        return _bf16_to_float(raw)
    return list(struct.unpack(f"<{len(raw) // dt.itemsize}{dt._pack}", raw))


def _nest(flat: List[Any], shape: List[int]) -> Any:
    if not shape:
        return flat[0]
    if len(shape) == 1:
        return flat
    step = math.prod(shape[1:])
    return [_nest(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


# ---- making tensors --------------------------------------------------------------------------

def _shape_of(data: Any, dim: int = 0) -> List[int]:
    if isinstance(data, (list, tuple)):
        if not data:
            return [0]
        inner = [_shape_of(x, dim + 1) for x in data]
        for s in inner[1:]:
            if s != inner[0]:
                raise AccelValueError(f"expected sequence of length {inner[0][0] if inner[0] else 0} "
                                      f"at dim {dim + 1} (got {s[0] if s else 0})")
        return [len(data)] + inner[0]
    if isinstance(data, Tensor):
        return list(data.shape)
    return []


def _flatten(data: Any, out: List[Any]) -> None:
    if isinstance(data, (list, tuple)):
        for x in data:
            _flatten(x, out)
    elif isinstance(data, Tensor):
        out.extend(_values(data))
    else:
        out.append(data)


def tensor(data: Any, dtype: Optional[Any] = None, device: Optional[Any] = None,
           requires_grad: bool = False) -> Tensor:
    """A tensor from a number, a (nested) list or tuple of numbers, a NumPy array, anything with
    `__dlpack__` or `__array__`, or a tensor: a copy on `device` (the CPU unless told), of
    `dtype` (else as PyTorch infers it: int64 for ints, float32 for floats, the array's own
    dtype for an array)."""
    if requires_grad:
        raise AccelValueError("accel has no autograd: requires_grad=True is not supported")
    if device is None and (isinstance(dtype, _Device) or (
            isinstance(dtype, str) and not _looks_like_dtype(dtype))):
        # accel before 0.2 took the device second (`accel.tensor(a, "cpu")`): still read so.
        dtype, device = None, dtype
    dev = _device_name(device)
    want = None if dtype is None else _as_dtype(dtype)
    if isinstance(data, Tensor):
        out = data.to(dev)
        return out.to(want) if want is not None else out
    if isinstance(data, (list, tuple, bool, _pyint, _pyfloat)):
        shape = _shape_of(data)
        flat: List[Any] = []
        _flatten(data, flat)
        for v in flat:
            if not isinstance(v, (bool, _pyint, _pyfloat)):
                raise AccelTypeError(f"Could not infer dtype of {type(v).__name__}")
        floating = any(isinstance(v, _pyfloat) for v in flat)
        dt = want or (float32 if floating else int64)
        # Packed as f64 or i64 (exact for what Python holds), then cast by the library.
        if floating or dt.is_floating_point:
            raw, code = struct.pack(f"<{len(flat)}d", *flat), "f64"
        else:
            raw, code = struct.pack(f"<{len(flat)}q", *flat), "i64"
        t = _accel.Tensor.from_bytes(raw, code, shape, "cpu")
        if code != dt.code:
            t = t.to_dtype(dt.code)
        if dev != "cpu":
            t = t.to(dev)
        return _wrap(t)
    import numpy as np

    a = np.asarray(data)
    if a.dtype == np.bool_:
        a = a.astype(np.int64)
    name = a.dtype.name
    if name not in _BY_NAME:
        raise AccelTypeError(f"numpy dtype {a.dtype} has no accel dtype; use float16/32/64 or "
                             "int32/64")
    # Not ascontiguousarray: it makes a 0-d array 1-d. tobytes() is C order whatever the
    # strides; the dtype's name leaves out its byte order (a big-endian float32 is float32,
    # swapped to little-endian here).
    t = _accel.Tensor.from_bytes(a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes(),
                                 _BY_NAME[name].code, list(a.shape), dev)
    return _wrap(t if want is None else t.to_dtype(want.code))


def as_tensor(data: Any, dtype: Optional[Any] = None, device: Optional[Any] = None) -> Tensor:
    return data.to(*(x for x in (device, dtype) if x is not None)) if isinstance(data, Tensor) \
        else tensor(data, dtype=dtype, device=device)


def from_dlpack(x: Any, device: str = "cpu") -> Tensor:
    """A tensor from any DLPack exporter on the CPU (NumPy, JAX, PyTorch): a copy, through
    NumPy's DLPack import."""
    import numpy as np

    return tensor(np.from_dlpack(x), device=device)


def _size(size: Tuple[Any, ...]) -> List[int]:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    out = []
    for s in size:
        if isinstance(s, bool) or not isinstance(s, _pyint):
            raise AccelTypeError(f"a size is whole numbers, not {s!r}")
        if s < 0:
            raise AccelError(f"Trying to create tensor with negative dimension {s}: {list(size)}")
        out.append(s)
    return out


def _make(kind: str, size: Tuple[Any, ...], dtype: Any, device: Any, a: Any = 0.0,
          b: Any = 1.0, default: Any = None) -> Tensor:
    dt = _as_dtype(dtype) if dtype is not None else (default or float32)
    return _wrap(_accel.create(kind, _size(size), dt.code, _device_name(device),
                               _pyfloat(a), _pyfloat(b)))


def randn(*size: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """Normal random values, mean 0, standard deviation 1 (`torch.randn`)."""
    return _make("randn", size, dtype, device, 0.0, 1.0)


def rand(*size: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """Uniform random values in [0, 1) (`torch.rand`)."""
    return _make("rand", size, dtype, device, 0.0, 1.0)


def zeros(*size: Any, dtype: Any = None, device: Any = None) -> Tensor:
    return _make("zeros", size, dtype, device)


def ones(*size: Any, dtype: Any = None, device: Any = None) -> Tensor:
    return _make("ones", size, dtype, device)


def full(size: Any, fill_value: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """`size` filled with `fill_value`; the dtype follows the value as PyTorch's does."""
    default = int64 if isinstance(fill_value, _pyint) and not isinstance(
        fill_value, bool) else float32
    return _make("full", (size,) if not isinstance(size, (tuple, list)) else tuple(size),
                 dtype, device, fill_value, 0.0, default)


def zeros_like(x: Tensor, dtype: Any = None, device: Any = None) -> Tensor:
    return zeros(*x.shape, dtype=dtype or x.dtype, device=device or x.device)


def ones_like(x: Tensor, dtype: Any = None, device: Any = None) -> Tensor:
    return ones(*x.shape, dtype=dtype or x.dtype, device=device or x.device)


def arange(start: Any, end: Any = None, step: Any = 1, dtype: Any = None,
           device: Any = None) -> Tensor:
    """`start, start + step, ...` below `end` (`torch.arange(5)` is 0..4)."""
    if end is None:
        start, end = 0, start
    if step == 0:
        raise AccelError("step must be nonzero")
    n = max(0, math.ceil((end - start) / step))
    floating = any(isinstance(v, _pyfloat) for v in (start, end, step))
    values = [start + i * step for i in range(n)]
    dt = _as_dtype(dtype) if dtype is not None else (float32 if floating else int64)
    if not values:
        return _make("zeros", (0,), dt, device)
    return tensor(values, dtype=dt, device=device)


def manual_seed(seed: int) -> None:
    """Seeds `randn`, `rand` and `nn.Linear`'s initialisation (`torch.manual_seed`)."""
    _accel.manual_seed(_pyint(seed) & 0xFFFF_FFFF_FFFF_FFFF)


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """The matrix product (`a @ b`, `torch.matmul`); both on one device."""
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise AccelTypeError(f"matmul(): argument 'input' and 'other' must be Tensor, not "
                             f"{type(a).__name__} and {type(b).__name__}")
    if a.device == b.device and a.dtype is not b.dtype:
        raise AccelError(f"expected m1 and m2 to have the same dtype, but got: "
                         f"{a.dtype.name} != {b.dtype.name}")
    # Devices are checked first, by the library, with PyTorch's words and the fix.
    return _wrap(a._t.matmul(b._t))


def synchronize(device: Any = None) -> None:
    """Waits for everything queued on `device` (the best device unless told)."""
    _accel.synchronize(_device_name(device) if device is not None else _accel.best())


# ---- printing, as PyTorch's _tensor_str does ----------------------------------------------------

_THRESHOLD, _EDGE, _LINEWIDTH, _PRECISION = 1000, 3, 80, 4


class _Formatter:
    def __init__(self, values: List[Any], floating: bool):
        self.floating, self.int_mode, self.sci_mode, self.width = floating, True, False, 1
        if not floating:
            self.width = max((len(str(v)) for v in values), default=1)
            return
        finite = [abs(v) for v in values if math.isfinite(v) and v != 0]
        if not finite:
            return
        lo, hi = min(finite), max(finite)
        self.int_mode = all(v == math.ceil(v) for v in finite)
        if self.int_mode:
            if hi / lo > 1000.0 or hi > 1.0e8:
                self.sci_mode = True
                self.width = max(len(f"{v:.{_PRECISION}e}") for v in self._signed(values))
            else:
                self.width = max(len(f"{v:.0f}") + 1 for v in self._signed(values))
        else:
            if hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4:
                self.sci_mode = True
                self.width = max(len(f"{v:.{_PRECISION}e}") for v in self._signed(values))
            else:
                self.width = max(len(f"{v:.{_PRECISION}f}") for v in self._signed(values))

    @staticmethod
    def _signed(values: List[float]) -> List[float]:
        return [v for v in values if math.isfinite(v) and v != 0] or [0.0]

    def format(self, v: Any) -> str:
        if not self.floating:
            s = str(v)
        elif math.isnan(v):
            s = "nan"
        elif math.isinf(v):
            s = "inf" if v > 0 else "-inf"
        elif self.sci_mode:
            s = f"{v:{self.width}.{_PRECISION}e}"
        elif self.int_mode:
            s = f"{v:.0f}."
        else:
            s = f"{v:.{_PRECISION}f}"
        return " " * (self.width - len(s)) + s


def _summarized(values: List[Any], shape: List[int], summarize: bool) -> List[Any]:
    """The values that will be shown (the edges of each dimension when summarizing)."""
    if not shape:
        return values
    step = math.prod(shape[1:]) if len(shape) > 1 else 1
    rows = range(shape[0])
    if summarize and shape[0] > 2 * _EDGE:
        rows = list(range(_EDGE)) + list(range(shape[0] - _EDGE, shape[0]))
    out: List[Any] = []
    for i in rows:
        out += _summarized(values[i * step:(i + 1) * step], shape[1:], summarize)
    return out


def _str(values: List[Any], shape: List[int], indent: int, fmt: _Formatter,
         summarize: bool) -> str:
    if len(shape) == 1:
        n = shape[0]
        width = fmt.width + 2
        per_line = max(1, math.floor((_LINEWIDTH - indent) / width))
        if summarize and n > 2 * _EDGE:
            data = ([fmt.format(v) for v in values[:_EDGE]] + [" ..."]
                    + [fmt.format(v) for v in values[n - _EDGE:]])
        else:
            data = [fmt.format(v) for v in values]
        lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
        return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"
    step = math.prod(shape[1:])
    rows = shape[0]

    def row(i: int) -> str:
        return _str(values[i * step:(i + 1) * step], shape[1:], indent + 1, fmt, summarize)

    if summarize and rows > 2 * _EDGE:
        slices = [row(i) for i in range(_EDGE)] + ["..."] + [row(i) for i in
                                                             range(rows - _EDGE, rows)]
    else:
        slices = [row(i) for i in range(rows)]
    sep = "," + "\n" * (len(shape) - 1) + " " * (indent + 1)
    return "[" + sep.join(slices) + "]"


def _format(t: Tensor) -> str:
    prefix = "tensor("
    indent = len(prefix)
    shape = list(t._t.shape)
    dt = t.dtype
    suffixes = []
    if t._t.device != "cpu":
        suffixes.append(f"device='{t._t.device}'")
    n = math.prod(shape)
    if n == 0:
        body = "[]"
        if shape != [0]:
            suffixes.append(f"size={tuple(shape)}")
    else:
        values = _values(t)
        summarize = n > _THRESHOLD
        shown = _summarized(values, shape, summarize)
        fmt = _Formatter(shown, dt.is_floating_point)
        body = fmt.format(values[0]) if not shape else _str(values, shape, indent, fmt, summarize)
    if dt not in (float32, int64):
        suffixes.append(f"dtype={dt!r}")
    return prefix + ", ".join([body] + suffixes) + ")"
