"""Objects made from the JSON documents the native module returns: attribute access, a
readable repr, and `.to_dict()` for the plain data (JSON types only)."""

from __future__ import annotations


class _LazyJson:
    """The json module, imported on first use: importing it (and the re and enum modules it
    brings) is a third of `import accelkit`'s time, and most programs never render a record."""

    def __getattr__(self, name: str) -> Any:
        import json as _json

        return getattr(_json, name)


json = _LazyJson()
# typing costs 9 ms of import time; annotations are strings (the __future__ import), so
# its names are needed only by type checkers.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, Optional


# The records that hold a list, and the field that holds it: they iterate over it, as Python
# data does (`for section in accel.doctor()`); every other record is not iterable.
ITEMS = {"Diagnosis": "sections", "Snapshot": "devices"}

# The records a notebook shows as HTML, and the kind of document each is (the renderer is
# accel's own, in Rust: the HTML `accel doctor --html` prints).
HTML = {"Diagnosis": "doctor", "Snapshot": "snapshot", "MatmulRun": "bench"}


def _html(kind: str, data: Any) -> str:
    from . import _accel

    return _accel.render_html(kind, json.dumps(data))


class Record:
    """A record read from accel: fields as attributes (nested records and lists of them),
    `to_dict()` for plain data. A record that holds a list (a Diagnosis its sections, a
    Snapshot its devices) iterates over it, and `len()` and `in` count and search that list;
    the others raise TypeError on iteration and `len()`, and `in` asks for a field name."""

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

    def _items(self):
        """The list this record holds, or None when it holds none."""
        field = ITEMS.get(self._kind)
        v = self._data.get(field) if field else None
        return v if isinstance(v, list) else None

    def __getitem__(self, key: Any) -> Any:
        items = self._items()
        if isinstance(key, (int, slice)) and not isinstance(key, bool):
            if items is None:
                raise TypeError(f"{self._kind} is not a sequence; read its fields by name: {sorted(self._data)}")
            return wrap(items[key], self._kind)
        return wrap(self._data[key])

    def __bool__(self) -> bool:
        # A record is there: truth does not depend on its list (len() may raise).
        return True

    def __iter__(self):
        items = self._items()
        if items is None:
            raise TypeError(f"{self._kind} is not iterable; its fields are {sorted(self._data)}")
        return iter(wrap(items, self._kind))

    def __len__(self) -> int:
        items = self._items()
        if items is None:
            raise TypeError(f"{self._kind} has no len(); its fields are {sorted(self._data)}")
        return len(items)

    def __contains__(self, key: Any) -> bool:
        items = self._items()
        if items is not None:
            return any(x == key for x in wrap(items, self._kind))
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

    def _repr_html_(self) -> Optional[str]:
        """Jupyter's and Colab's rich display: the doctor's checklist, a snapshot's host and
        devices with bars (None for records without a view: the plain repr then)."""
        kind = HTML.get(self._kind)
        return _html(kind, self._data) if kind else None

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


class Probes(list):
    """What `accel.probes()` returns: a list of Probe records that a notebook shows as the
    table `accel devices --html` prints (each backend, its status, its devices or why not and
    the fix)."""

    def _repr_html_(self) -> str:
        from . import _accel

        return _html("devices", {"best_device": _accel.best(), "backends": [p.to_dict() for p in self]})


class Readings(list):
    """What `accel.pick()` returns: a list of Reading records that a notebook shows as a table
    of the picked devices (utilisation and memory bars, temperature, power, processes)."""

    def _repr_html_(self) -> str:
        return _html("snapshot", {"devices": [r.to_dict() for r in self]})
