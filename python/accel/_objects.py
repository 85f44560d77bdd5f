"""Objects made from the JSON documents the native module returns: attribute access, a
readable repr, and `.to_dict()` for the plain data (JSON types only)."""

from __future__ import annotations

import json
from typing import Any, Dict


class Record:
    """A record read from accel: fields as attributes (nested records and lists of them),
    `to_dict()` for plain data."""

    __slots__ = ("_data", "_kind")

    def __init__(self, data: Dict[str, Any], kind: str = "Record") -> None:
        object.__setattr__(self, "_data", data)
        object.__setattr__(self, "_kind", kind)

    def __getattr__(self, name: str) -> Any:
        try:
            return wrap(self._data[name])
        except KeyError:
            raise AttributeError(f"{self._kind} has no field {name!r}; it has {sorted(self._data)}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{self._kind} is read-only")

    def __getitem__(self, key: str) -> Any:
        return wrap(self._data[key])

    def __contains__(self, key: str) -> bool:
        return key in self._data

    def __dir__(self):
        return sorted(self._data)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Record) and other._data == self._data

    def keys(self):
        return self._data.keys()

    def to_dict(self) -> Dict[str, Any]:
        """The plain data (dicts, lists, strings, numbers, booleans, None)."""
        return json.loads(json.dumps(self._data))

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in list(self._data.items())[:6]
                           if not isinstance(v, (dict, list)))
        more = ", ..." if len(self._data) > 6 or any(isinstance(v, (dict, list)) for v in self._data.values()) else ""
        return f"{self._kind}({fields}{more})"


def wrap(v: Any, kind: str = "Record") -> Any:
    if isinstance(v, dict):
        return Record(v, kind)
    if isinstance(v, list):
        return [wrap(x, kind) for x in v]
    return v


def load(text: str, kind: str) -> Any:
    return wrap(json.loads(text), kind)
