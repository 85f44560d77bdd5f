"""accel's exceptions: `AccelError` (a `RuntimeError`, as PyTorch raises for devices, shapes
and dtypes) and the subclasses that are also what PyTorch raises in their places, so that code
written for PyTorch catches them unchanged."""

from ._accel import AccelError


class AccelTypeError(AccelError, TypeError):
    """A value of the wrong Python type (`TypeError` in PyTorch too)."""


class AccelValueError(AccelError, ValueError):
    """A value of the right type that cannot be used (`ValueError`)."""


class AccelIndexError(AccelError, IndexError):
    """A dimension or index out of range (`IndexError`)."""


__all__ = ["AccelError", "AccelIndexError", "AccelTypeError", "AccelValueError"]
