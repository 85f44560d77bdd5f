#!/usr/bin/env python3
"""Writes python/accelkit/_types.py: typed views (typing.Protocol classes) of the records the
Python module returns, generated from the JSON schemas the CLI's documents are tested against
(schemas/doctor, monitor and pick), so an editor completes `accel.doctor().sections[0].checks`
and a type checker knows `accel.snapshot().host.cpu_percent` is a float. The records stay the
dynamic `Record` objects; these classes exist for type checkers only.

    python3 scripts/record_types.py           # write it
    python3 scripts/record_types.py --check   # fail when it is not what the schemas give
"""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "python/accelkit/_types.py"
# Inline objects are named after the property that holds them (a list's items in the singular).
NAMES = {"sections": "Section", "checks": "Check", "workload": "Workload", "owners": "Owner",
         "memory": "HostMemory", "processes": "Process", "devices": "DeviceLoad", "host": "Host",
         "collectors": "Collector", "accel_memory": "MemoryStats", "invalid": "InvalidValue"}
# The documents, the class each becomes, and the schema file.
DOCS = [("Diagnosis", "doctor"), ("Snapshot", "monitor"), ("Picked", "pick")]
SKIP = {"schema_version", "kind"}


class Gen:
    def __init__(self):
        self.classes = {}  # name -> list of (field, type, description)
        self.order = []

    def typ(self, s, prop, defs):
        if "$ref" in s:
            name = s["$ref"].split("/")[-1]
            return self.obj(defs[name], camel(name), defs)
        t = s.get("type")
        types = t if isinstance(t, list) else [t] if t else []
        if "enum" in s:
            vals = [v for v in s["enum"] if v is not None]
            opt = None in s["enum"]
            base = "str" if all(isinstance(v, str) for v in vals) else "Any"
            return f"Optional[{base}]" if opt else base
        opt = "null" in types
        types = [x for x in types if x != "null"]
        if not types and ("properties" in s):
            types = ["object"]
        base = "Any"
        if types == ["integer"]:
            base = "int"
        elif types == ["number"]:
            base = "float"
        elif types == ["string"]:
            base = "str"
        elif types == ["boolean"]:
            base = "bool"
        elif types == ["array"]:
            items = s.get("items", {})
            if isinstance(items, list):
                base = "List[Any]"
            elif items.get("properties"):
                base = f"List[{self.obj(items, NAMES.get(prop, camel(prop)), defs)}]"
            else:
                base = f"List[{self.typ(items, prop, defs)}]"
        elif types == ["object"]:
            if s.get("properties"):
                base = self.obj(s, NAMES.get(prop, camel(prop)), defs)
            else:
                base = "Dict[str, Any]"
        return f"Optional[{base}]" if opt else base

    def obj(self, s, name, defs):
        if name in self.classes:
            return name
        self.classes[name] = []
        fields = []
        for k, v in s.get("properties", {}).items():
            if k in SKIP or not k.isidentifier():
                continue
            fields.append((k, self.typ(v, k, defs), v.get("description", "")))
        self.classes[name] = fields
        self.order.append(name)
        return name


def camel(s):
    return "".join(p.capitalize() for p in s.split("_"))


def render():
    g = Gen()
    for cls, schema in DOCS:
        j = json.loads((ROOT / "schemas" / f"{schema}.schema.json").read_text())
        defs = j.get("$defs", {})
        g.obj(j, cls, defs)
    out = [
        '"""Typed views of the records the module returns, for editors and type checkers only:',
        "the records are `accel.Record` objects with these fields as attributes. Generated from",
        'schemas/ by scripts/record_types.py; do not edit."""',
        "",
        "from __future__ import annotations",
        "",
        "from typing import Any, Dict, Iterator, List, Optional, Protocol",
        "",
    ]
    iterable = {"Diagnosis": "Section", "Snapshot": "DeviceLoad"}
    for name in g.order:
        out += ["", f"class {name}(Protocol):"]
        for k, t, d in g.classes[name]:
            if d:
                out.append(f"    # {d[:90]}")
            out.append(f"    {k}: {t}")
        out.append("    def to_dict(self) -> Dict[str, Any]: ...")
        if name in iterable:
            out.append(f"    def __iter__(self) -> Iterator[{iterable[name]}]: ...")
            out.append("    def __len__(self) -> int: ...")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def main():
    text = render()
    if "--check" in sys.argv:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"error: {OUT.relative_to(ROOT)} is not what the schemas give: run "
                  "python3 scripts/record_types.py", file=sys.stderr)
            sys.exit(1)
        print(f"record_types.py: {OUT.relative_to(ROOT)} matches the schemas")
        return
    OUT.write_text(text)
    print(f"record_types.py: wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
