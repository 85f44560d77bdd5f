#!/usr/bin/env python3
"""Draw the accel crate's internal import graph from its source and check the layering.

Cargo's crate boundaries hold the floors between accel-core, accel-telemetry and accel; this
script holds what the compiler cannot see: the floors inside the accel crate and, in every
crate, no circle between single files.

Reads every .rs file under the crate's src/ (default: crates/accel/src next to this
script), finds which of the crate's own modules each file refers to, puts every module on a
floor (the FLOORS table below) and reports:

  * upward arrows: edges from a lower floor to a higher one (allowed: --max-up, default 5);
  * cycles: strongly connected components of more than one node, each with its members and
    one concrete cycle, checked by default between single files (a folder's mod.rs counts:
    it may declare and re-export its children, which then must not import it back);
  * imports between the folders of APART (the backends), which must not know one another;
  * counts.

Exit status: 1 if there is a cycle, an import between APART folders or more than --max-up
upward arrows, else 0
(2 for a usage error, e.g. no such source folder).

Usage:
  python3 scripts/layers.py                        # report; cycles between single files
  python3 scripts/layers.py --granularity folder   # edges/arrows between folders too
  python3 scripts/layers.py --cycles folder        # cycles between folders only
  python3 scripts/layers.py --no-floors --src crates/accel-cli/src   # cycles only
  python3 scripts/layers.py --edges                # also list every edge with its evidence
  python3 scripts/layers.py --max-up 0 --src path/to/crate/src

Standard library only. It reads Rust text with regular expressions, it does not compile it:
see LIMITATIONS at the end of this file.
"""

import argparse
import fnmatch
import os
import re
import sys
from collections import defaultdict, deque

# --------------------------------------------------------------------------------------------
# The plan. Edit freely: keys are module names as this script writes them (`crate` for lib.rs,
# `backend` for backend/mod.rs, `backend::cuda::context` for backend/cuda/context.rs).
#   * a plain key `x::y` matches the module x::y and everything below it (x::y::z);
#   * a key with * ? [ ] is a glob over the whole name (`backend::cuda*` matches
#     backend::cuda and backend::cuda::context);
#   * the most specific key wins (the longest text before any wildcard); on a tie the first.
# Keys for modules that don't exist (yet) simply match nothing.
# --------------------------------------------------------------------------------------------
FLOORS = {
    # 0 values: what a device, dtype, shape, error, capability and probe result are; the
    #   host's facts (system) and the live-tensor ledger
    "base": 0,
    "dtype": 0,
    "shape": 0,
    "error": 0,
    "device": 0,
    "caps": 0,
    "probe": 0,
    "ledger": 0,
    "peak": 0,
    "checks": 0,
    "rng": 0,
    # 1 the contract: backend/mod.rs, the ops as values, the traits, the compiled-out stand-in
    "backend": 1,
    "backend::contract": 1,
    "backend::ops": 1,
    "backend::off": 1,
    # 1 what every backend shares: library and Python-environment search, trust, settings
    "backend::native": 1,
    # 2 backends, side by side
    "backend::cpu*": 2,
    "backend::cuda*": 2,
    "backend::xla*": 2,
    "backend::wgpu*": 2,
    # 3 above every backend: the registry of probes and the dispatch to backends
    "backend::registry": 3,
    "backend::dispatch": 3,
    "backend::devices": 3,
    # 4 tensors, memory accounting, display; the public per-backend modules
    "tensor": 4,
    "memory": 4,
    "display": 4,
    "api": 4,
    "fuzzing": 4,
    # 5 what is built from tensors: nn, bench
    "nn": 5,
    "bench": 5,
    "load": 5,
    "doctor": 5,
    # 6 the crate root
    "crate": 6,
}

# Folders that may not import one another, whatever their floors (each backend stands alone;
# what two of them need lives in backend::native, below them all).
APART = ["backend::cpu", "backend::cuda", "backend::xla", "backend::wgpu"]

# Floor of a module that no key matches (a warning names each such module).
DEFAULT_FLOOR = 4

# Folder granularity: how many leading path components make a module's folder node. Same
# matching rules as FLOORS. backend::cuda::context -> backend::cuda, backend::storage stays
# backend::storage, nn::linear -> nn (a folder module and the files it re-exports are one
# unit; with 2 there, nn <-> nn::linear would count as a cycle). --folder-depth N overrides
# this table with one depth for every module.
FOLDER_DEPTH = {
    "backend": 2,
}
DEFAULT_FOLDER_DEPTH = 1

# --------------------------------------------------------------------------------------------

CRATE = "crate"
UNRESOLVED = "?"  # resolve(): a crate::name that lib.rs neither defines nor re-exports
IDENT = r"(?:r#)?[A-Za-z_][A-Za-z0-9_]*"
GLOB_CHARS = set("*?[")


def name_of(mod):
    """('backend', 'cuda') -> 'backend::cuda'; () -> 'crate'."""
    return "::".join(mod) if mod else CRATE


def pattern_matches(pat, name):
    if GLOB_CHARS & set(pat):
        return fnmatch.fnmatchcase(name, pat)
    return name == pat or name.startswith(pat + "::")


def specificity(pat):
    m = re.search(r"[*?\[]", pat)
    return len(pat[: m.start()] if m else pat)


def lookup(table, name):
    """The value of the most specific matching key of `table`, or None."""
    best, best_spec = None, -1
    for pat, value in table.items():
        if pattern_matches(pat, name):
            s = specificity(pat)
            if s > best_spec:
                best, best_spec = value, s
    return best


# ----------------------------------------------------------------------------- lexing


_RAW_STR = re.compile(r'(?:br|cr|r)(#*)"')
_CHAR = re.compile(r"'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F_]*\}|.)|[^\\'\n])'")


def _is_ident_char(c):
    return c.isalnum() or c == "_"


def strip_comments_and_strings(src):
    """Same text, same length, with comments, string and char literals blanked (newlines
    kept, so offsets and line numbers still hold). Block comments nest, as in Rust."""
    out = list(src)
    n = len(src)

    def blank(a, b):
        for k in range(a, min(b, n)):
            if out[k] != "\n":
                out[k] = " "

    i = 0
    while i < n:
        c = src[i]
        if c == "/" and src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
            continue
        if c == "/" and src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            blank(i, j)
            i = j
            continue
        prev_ident = i > 0 and _is_ident_char(src[i - 1])
        if c in "rbc" and not prev_ident:
            m = _RAW_STR.match(src, i)
            if m:
                close = '"' + m.group(1)
                j = src.find(close, m.end())
                j = n if j < 0 else j + len(close)
                blank(i, j)
                i = j
                continue
            if c in "bc" and i + 1 < n and src[i + 1] in "\"'":
                i += 1  # b"..", c"..", b'.': the literal starts at the quote
                c = src[i]
        if c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            blank(i, j + 1)
            i = j + 1
            continue
        if c == "'":
            m = _CHAR.match(src, i)
            if m:  # a char literal; otherwise a lifetime or a label, left as is
                blank(i, m.end())
                i = m.end()
                continue
        i += 1
    return "".join(out)


def matching_brace(text, open_pos):
    """Offset just after the } that closes the { at open_pos (text already stripped)."""
    depth = 0
    for k in range(open_pos, len(text)):
        ch = text[k]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return k + 1
    return len(text)


_CFG_TEST_MOD = re.compile(
    r"#\s*\[\s*cfg\s*\(\s*test\s*\)\s*\]\s*(?:#\s*\[[^\]]*\]\s*)*"
    r"(?:pub\s*(?:\([^)]*\))?\s*)?mod\s+(" + IDENT + r")\s*([;{])"
)


def blank_cfg_test_modules(text):
    """Blanks `#[cfg(test)] mod x { ... }`; returns (text, names of `#[cfg(test)] mod x;`)."""
    out = text
    test_children = set()
    pos = 0
    while True:
        m = _CFG_TEST_MOD.search(out, pos)
        if not m:
            return out, test_children
        if m.group(2) == ";":
            test_children.add(m.group(1).replace("r#", ""))
            pos = m.end()
            continue
        end = matching_brace(out, m.end() - 1)
        blanked = re.sub(r"[^\n]", " ", out[m.start():end])
        out = out[: m.start()] + blanked + out[end:]
        pos = end


# ----------------------------------------------------------------------------- use trees

_USE = re.compile(r"(?<![\w$])(?:(pub)\s*(?:\([^)]*\))?\s+)?use\s+")
_TOKEN = re.compile(r"::|[{},*]|" + IDENT)


def parse_use_tree(tree):
    """'crate::a::{b, c::{self, d as e}, f::*}' -> [(segments, bound name or None, is_glob)].
    A leading '::' (an extern crate path) becomes the segment '::'."""
    toks = _TOKEN.findall(tree)
    out = []

    def parse(i, prefix):
        path = list(prefix)
        if i < len(toks) and toks[i] == "::":
            if not path:
                path.append("::")
            i += 1
        while i < len(toks):
            t = toks[i]
            if t == "{":
                i += 1
                while i < len(toks) and toks[i] != "}":
                    j = parse(i, path)
                    i = j if j > i else i + 1
                    if i < len(toks) and toks[i] == ",":
                        i += 1
                return i + 1
            if t == "*":
                out.append((path, None, True))
                return i + 1
            if t in (",", "}"):
                return i
            if t == "::":
                i += 1
                continue
            path.append(t.replace("r#", ""))
            i += 1
            if i < len(toks) and toks[i] == "::":
                i += 1
                continue
            alias = None
            if i + 1 < len(toks) and toks[i] == "as":
                alias = toks[i + 1]
                i += 2
            if path[-1] == "self":
                path = path[:-1]
            bound = alias if alias is not None else (path[-1] if path else None)
            out.append((path, bound, False))
            return i
        return i

    parse(0, [])
    return out


# ----------------------------------------------------------------------------- the crate


class SourceFile:
    def __init__(self, mod, rel, text):
        self.mod = mod  # tuple of path components; () for lib.rs
        self.rel = rel  # path relative to src/
        self.raw = text
        stripped = strip_comments_and_strings(text).replace("$crate", " crate")
        self.text, self.test_children = blank_cfg_test_modules(stripped)
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
        self.inline_mods = self._find_inline_mods()
        self.uses = self._find_uses()  # [(start, end, is_pub, depth0, [(segs, bound, glob)])]
        self.declared = set(
            x.replace("r#", "")
            for x in re.findall(r"(?<![\w$])mod\s+(" + IDENT + r")\s*;", self.text)
        )

    def line(self, pos):
        lo, hi = 0, len(self._line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._line_starts[mid] <= pos:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1

    def source_line(self, pos):
        ln = self.line(pos)
        start = self._line_starts[ln - 1]
        end = self.raw.find("\n", start)
        return self.raw[start: len(self.raw) if end < 0 else end].strip()

    def _find_inline_mods(self):
        mods = []
        for m in re.finditer(r"(?<![\w$])mod\s+(" + IDENT + r")\s*\{", self.text):
            mods.append((m.end() - 1, matching_brace(self.text, m.end() - 1),
                         m.group(1).replace("r#", "")))
        return mods

    def inline_path(self, pos):
        return tuple(name for (a, b, name) in sorted(self.inline_mods) if a < pos < b)

    def brace_depth(self, pos):
        t = self.text[:pos]
        return t.count("{") - t.count("}")

    def _find_uses(self):
        uses = []
        for m in _USE.finditer(self.text):
            depth, k = 0, m.end()
            while k < len(self.text):
                ch = self.text[k]
                if ch == "{":
                    depth += 1
                elif ch == "}":
                    depth -= 1
                elif ch == ";" and depth <= 0:
                    break
                k += 1
            uses.append((m.start(), k + 1, bool(m.group(1)),
                         self.brace_depth(m.start()) == 0 and not self.inline_path(m.start()),
                         parse_use_tree(self.text[m.end():k])))
        return uses


def module_of(rel):
    parts = rel[:-3].split("/")  # drop .rs
    if parts == ["lib"]:
        return ()
    if parts[-1] == "mod":
        parts = parts[:-1]
    return tuple(parts)


class Crate:
    def __init__(self, src_dir, follow_all_reexports=False):
        self.src_dir = src_dir
        self.files = {}
        self.warnings = []
        for root, dirs, names in os.walk(src_dir):
            dirs[:] = sorted(d for d in dirs if not (root == src_dir and d == "bin"))
            for fn in sorted(names):
                if not fn.endswith(".rs"):
                    continue
                rel = os.path.relpath(os.path.join(root, fn), src_dir).replace(os.sep, "/")
                if rel == "main.rs":
                    if os.path.exists(os.path.join(src_dir, "lib.rs")):
                        continue  # a binary's root beside a library is another crate
                    mod = ()  # a binary-only crate (accel-cli): main.rs is its root
                else:
                    mod = module_of(rel)
                with open(os.path.join(root, fn), encoding="utf-8", errors="replace") as f:
                    text = f.read()
                if mod in self.files:
                    self.warnings.append(
                        f"both {self.files[mod].rel} and {rel} claim module {name_of(mod)}")
                    continue
                self.files[mod] = SourceFile(mod, rel, text)
        if () not in self.files:
            raise SystemExit(f"layers.py: no lib.rs or main.rs under {src_dir}")
        self.follow_all = follow_all_reexports
        self._drop_test_files()
        self._check_declared()
        # names a module re-exports (any `use` at its top level), and #[macro_export] macros
        self.reexports = defaultdict(dict)
        for mod, sf in self.files.items():
            for (_a, _b, _pub, top, items) in sf.uses:
                if top:
                    for segs, bound, glob in items:
                        if not glob and bound and segs:
                            self.reexports[mod][bound] = segs
        # items lib.rs itself defines (crate::manual_seed is an edge to `crate`)
        root = self.files[()]
        self.root_items = set()
        for m in re.finditer(r"(?<![\w$])(?:fn|struct|enum|trait|type|const|static|union)\s+("
                             + IDENT + ")", root.text):
            if root.brace_depth(m.start()) == 0:
                self.root_items.add(m.group(1).replace("r#", ""))
        self.macros = {}
        for mod, sf in self.files.items():
            for m in re.finditer(r"#\s*\[\s*macro_export[^\]]*\]\s*(?:#\s*\[[^\]]*\]\s*)*"
                                 r"macro_rules\s*!\s*(" + IDENT + ")", sf.text):
                self.macros[m.group(1)] = mod

    def _drop_test_files(self):
        for mod, sf in list(self.files.items()):
            for child in sf.test_children:
                for other in list(self.files):
                    if other[: len(mod) + 1] == mod + (child,):
                        del self.files[other]

    def _check_declared(self):
        for mod, sf in self.files.items():
            if mod and mod[:-1] in self.files and mod[-1] not in self.files[mod[:-1]].declared:
                self.warnings.append(
                    f"{sf.rel}: not declared by `mod {mod[-1]}` in "
                    f"{self.files[mod[:-1]].rel} (kept as a node anyway)")

    # -- resolution ------------------------------------------------------------------------

    def deepest_module(self, path):
        path = tuple(path)
        while path not in self.files:
            path = path[:-1]
        return path

    def resolve(self, segs, here_file, inline=(), depth=0):
        """The deepest module file a path refers to, or None (extern crate, std, unknown)."""
        if not segs or depth > 10:
            return None
        first = segs[0]
        if first == "crate":
            base, rest = (), list(segs[1:])
        elif first in ("self", "super"):
            base, rest = tuple(here_file) + tuple(inline), list(segs)
            if rest[0] == "self":
                rest = rest[1:]
            while rest and rest[0] == "super":
                if not base:
                    return None
                base, rest = base[:-1], rest[1:]
        elif not inline and tuple(here_file) + (first,) in self.files:
            base, rest = tuple(here_file), list(segs)  # a child module: `use cpu::X`
        else:
            return None
        cur = base
        for k, seg in enumerate(rest):
            if cur + (seg,) in self.files:
                cur = cur + (seg,)
                continue
            if cur in self.files and (cur == () or self.follow_all):
                target = self.reexports.get(cur, {}).get(seg)
                if target is not None:
                    return self.resolve(list(target) + rest[k + 1:], cur, (), depth + 1)
                if cur == () and seg in self.macros:
                    return self.macros[seg]
                if cur == () and seg not in self.root_items:
                    return UNRESOLVED
            break
        return self.deepest_module(cur)

    # -- edges -----------------------------------------------------------------------------

    def edges(self):
        """{(src, dst): [(file, line, text), ...]} between modules (tuples). Names that
        resolve nowhere go to self.unresolved: {path: [(file, line), ...]}."""
        edges = defaultdict(list)
        self.unresolved = defaultdict(list)

        def add(sf, pos, segs):
            dst = self.resolve(segs, sf.mod, sf.inline_path(pos))
            if dst == UNRESOLVED:
                self.unresolved["::".join(segs)].append((sf.rel, sf.line(pos)))
            elif dst is not None and dst != sf.mod:
                edges[(sf.mod, dst)].append((sf.rel, sf.line(pos), sf.source_line(pos)))

        path_re = re.compile(r"(?<![\w:$#])(" + IDENT + r"(?:\s*::\s*" + IDENT + r")+)")
        for mod, sf in self.files.items():
            text = sf.text
            for (a, b, _pub, _top, items) in sf.uses:
                for segs, _bound, _glob in items:
                    add(sf, a, segs)
                text = text[:a] + re.sub(r"[^\n]", " ", text[a:b]) + text[b:]
            text = re.sub(r"pub\s*\(\s*in\s[^)]*\)", lambda m: " " * len(m.group(0)), text)
            for m in path_re.finditer(text):
                segs = [s.strip().replace("r#", "") for s in m.group(1).split("::")]
                add(sf, m.start(), segs)
        return edges


# ----------------------------------------------------------------------------- graph


def folder_of(mod, folder_depth=None):
    if not mod:
        return CRATE
    d = folder_depth
    if d is None:
        d = lookup(FOLDER_DEPTH, name_of(mod))
        d = DEFAULT_FOLDER_DEPTH if d is None else d
    return name_of(mod[: max(1, d)])


def collapse(edges, key):
    out = defaultdict(list)
    for (s, d), ev in edges.items():
        ks, kd = key(s), key(d)
        if ks != kd:
            out[(ks, kd)].extend(ev)
    return out


def tarjan(nodes, succ):
    index, low, on, stack, sccs = {}, {}, set(), [], []
    counter = [0]
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(succ.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(succ.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    sccs.append(sorted(comp))
    return sccs


def shortest_path(start, goal, members, succ):
    """Shortest path start -> ... -> goal staying inside `members` (a list, or None)."""
    members = set(members)
    prev = {}
    queue = deque([start])
    seen = {start}
    while queue:
        v = queue.popleft()
        for w in sorted(succ.get(v, ())):
            if w not in members:
                continue
            if w == goal:
                path = [w, v]
                while path[-1] != start:
                    path.append(prev[path[-1]])
                return list(reversed(path))
            if w not in seen:
                seen.add(w)
                prev[w] = v
                queue.append(w)
    return None


def shortest_cycle(start, members, succ):
    """Shortest path start -> ... -> start staying inside `members`."""
    return shortest_path(start, start, members, succ) or [start, start]


class Analysis:
    def __init__(self, src_dir, floors=None, granularity="file", cycles="folder",
                 folder_depth=None, follow_all_reexports=False, apart=()):
        self.floors_table = FLOORS if floors is None else floors
        self.apart = list(apart)
        self.crate = Crate(src_dir, follow_all_reexports)
        self.warnings = list(self.crate.warnings)
        self.file_edges = {(name_of(s), name_of(d)): ev
                           for (s, d), ev in self.crate.edges().items()}
        for path, where in sorted(self.crate.unresolved.items()):
            at = ", ".join(f"{r}:{ln}" for r, ln in where[:3])
            more = f" (+{len(where) - 3} more)" if len(where) > 3 else ""
            self.warnings.append(f"{path}: lib.rs neither defines nor re-exports "
                                 f"`{path.split('::')[1] if '::' in path else path}`; "
                                 f"no edge ({at}{more})")
        self.modules = sorted(name_of(m) for m in self.crate.files)
        self.rel = {name_of(m): sf.rel for m, sf in self.crate.files.items()}
        self.module_floor = {}
        for name in self.modules:
            f = lookup(self.floors_table, name)
            if f is None:
                f = DEFAULT_FLOOR
                self.warnings.append(f"{name} ({self.rel[name]}): no FLOORS key matches; "
                                     f"put on floor {DEFAULT_FLOOR} (DEFAULT_FLOOR)")
            self.module_floor[name] = f
        by_tuple = {name_of(m): m for m in self.crate.files}
        self.folder = {n: folder_of(by_tuple[n], folder_depth) for n in self.modules}
        self.folder_floor = {}
        for n in self.modules:
            fo = self.folder[n]
            self.folder_floor[fo] = min(self.folder_floor.get(fo, 99), self.module_floor[n])
        for fo in sorted(set(self.folder.values())):
            fl = {self.module_floor[n] for n in self.modules if self.folder[n] == fo}
            if len(fl) > 1 and granularity == "folder":
                self.warnings.append(f"folder {fo} spans floors {sorted(fl)}; counted as "
                                     f"floor {min(fl)}")
        self.folder_edges = collapse(self.file_edges, lambda n: self.folder[n])
        self.granularity, self.cycle_granularity = granularity, cycles

    def apart_edges(self):
        """File edges from one APART folder into another: [((src, dst), evidence)]."""
        def group(n):
            return next((a for a in self.apart if pattern_matches(a, n)), None)
        return [((s, d), ev) for (s, d), ev in sorted(self.file_edges.items())
                if group(s) and group(d) and group(s) != group(d)]

    def view(self, granularity):
        """(nodes, edges, floor) at one granularity."""
        if granularity == "file":
            return self.modules, self.file_edges, self.module_floor
        return sorted(set(self.folder.values())), self.folder_edges, self.folder_floor

    def upward(self, granularity=None):
        _nodes, edges, floor = self.view(granularity or self.granularity)
        return sorted(((s, d), ev) for (s, d), ev in edges.items() if floor[s] < floor[d])

    def cycles(self, granularity=None):
        nodes, edges, _floor = self.view(granularity or self.cycle_granularity)
        succ = defaultdict(set)
        for s, d in edges:
            succ[s].add(d)
        result = []
        for comp in tarjan(nodes, succ):
            if len(comp) > 1:
                result.append((comp, shortest_cycle(comp[0], comp, succ)))
        return sorted(result)

# ----------------------------------------------------------------------------- report


def evidence(ev):
    rel, line, text = ev[0]
    more = f" (+{len(ev) - 1} more)" if len(ev) > 1 else ""
    if len(text) > 70:
        text = text[:67] + "..."
    return f"{rel}:{line}  {text}{more}"


def report(an, max_up, list_edges, out):
    p = lambda *a: print(*a, file=out)  # noqa: E731
    g, cg = an.granularity, an.cycle_granularity
    nodes, edges, floor = an.view(g)
    floors_used = sorted(set(floor.values()))
    p(f"layers.py: {an.crate.src_dir}")
    for w in an.warnings:
        p(f"warning: {w}")
    p("")
    p(f"Floors ({g} granularity, top to bottom):")
    for fl in reversed(floors_used):
        p(f"  {fl}  " + ", ".join(n for n in nodes if floor[n] == fl))
    if list_edges:
        p("")
        p(f"Edges ({g} granularity):")
        for (s, d), ev in sorted(edges.items()):
            arrow = "UP" if floor[s] < floor[d] else "  "
            p(f"  {arrow} {s} ({floor[s]}) -> {d} ({floor[d]})   {evidence(ev)}")
    up = an.upward()
    p("")
    p(f"Upward arrows ({g} granularity): {len(up)} (allowed: {max_up})")
    for (s, d), ev in up:
        p(f"  {s} ({floor[s]}) -> {d} ({floor[d]})   {evidence(ev)}")
    cyc = an.cycles()
    _cn, cedges, cfloor = an.view(cg)
    p("")
    p(f"Cycles ({cg} granularity): {len(cyc)}")
    for i, (comp, path) in enumerate(cyc, 1):
        p(f"  #{i} {len(comp)} members: " + ", ".join(f"{n} ({cfloor[n]})" for n in comp))
        p("     cycle: " + " -> ".join(path))
        for s, d in zip(path, path[1:]):
            p(f"       {s} -> {d}   {evidence(cedges[(s, d)])}")
    apart = an.apart_edges()
    if an.apart:
        p("")
        p(f"Imports between folders kept apart ({', '.join(an.apart)}): {len(apart)}")
        for (s, d), ev in apart:
            p(f"  {s} -> {d}   {evidence(ev)}")
    n_floors = len(set(an.module_floor.values()))
    p("")
    p(f"Counts: files {len(an.modules)}, floors {n_floors}, "
      f"edges {len(an.file_edges)} between files / {len(an.folder_edges)} between "
      f"{len(set(an.folder.values()))} folders, upward arrows {len(up)} ({g}), "
      f"cycles {len(cyc)} ({cg})")
    bad = []
    if cyc:
        bad.append(f"{len(cyc)} cycle(s)")
    if len(up) > max_up:
        bad.append(f"{len(up)} upward arrows > {max_up}")
    if apart:
        bad.append(f"{len(apart)} import(s) between backend folders")
    p("Result: " + ("FAIL: " + "; ".join(bad) if bad else "OK"))
    return 1 if bad else 0


def default_src():
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.normpath(os.path.join(here, "..", "crates", "accel", "src"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", default=default_src(), help="the crate's src folder "
                    "(default: %(default)s)")
    ap.add_argument("--granularity", choices=("file", "folder"), default="file",
                    help="nodes for the edge list and upward arrows (default: file)")
    ap.add_argument("--cycles", choices=("file", "folder"), default="file",
                    help="nodes for cycle detection (default: file: no two files import each "
                         "other, directly or through others)")
    ap.add_argument("--no-floors", action="store_true",
                    help="every module on one floor, no APART rule: only the cycle check "
                         "(for the CLI and pjrt crates, which have no FLOORS table)")
    ap.add_argument("--folder-depth", type=int, default=None, metavar="N",
                    help="folder = first N path components for every module "
                         "(default: the FOLDER_DEPTH table)")
    ap.add_argument("--max-up", type=int, default=5, metavar="N",
                    help="upward arrows allowed before exit status 1 (default: 5)")
    ap.add_argument("--edges", action="store_true", help="list every edge with its evidence")
    ap.add_argument("--follow-reexports", action="store_true",
                    help="resolve names re-exported by any module to their defining module "
                         "(default: only those of lib.rs)")
    args = ap.parse_args(argv)
    if not os.path.isdir(args.src):
        print(f"layers.py: no such folder: {args.src}", file=sys.stderr)
        return 2
    an = Analysis(args.src, floors={"*": 0} if args.no_floors else None,
                  granularity=args.granularity, cycles=args.cycles,
                  folder_depth=args.folder_depth, follow_all_reexports=args.follow_reexports,
                  apart=[] if args.no_floors else APART)
    out = sys.stdout
    return report(an, args.max_up, args.edges, out)


if __name__ == "__main__":
    sys.exit(main())


# LIMITATIONS (it reads text, it does not run rustc):
# * `#[cfg(...)]` other than `#[cfg(test)] mod` is ignored: feature-gated code counts always.
# * Names resolve through `use` lines of lib.rs only (--follow-reexports: of every module);
#   glob re-exports (`pub use x::*`) are not followed, a name from one resolves to the module
#   that holds the glob. `#[path = ...]` attributes and textual-scope (`#[macro_use]`) macros
#   are not followed; `#[macro_export]` macros are (crate::m -> the file defining m).
# * A path whose first segment is neither crate/self/super nor a child module of the file
#   (e.g. a name brought in by `use`) gives no edge by itself; its `use` line already did.
#   A local name that shadows a child module's name would give a false edge.
# * Paths inside macro_rules bodies count like any code.
