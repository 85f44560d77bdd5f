#!/usr/bin/env python3
"""Draw a crate's internal import graph from its source and check the layering.

Cargo holds the floors between crates; this holds what the compiler cannot see: the floors
inside crates/compute/src (FLOORS) and, in every crate, no circle between single files (a mod.rs
declares and re-exports its children, which must then not import it back). Exit status 1 on a
cycle, an import between two APART folders or more than --max-up upward arrows (lower floor to
higher), 2 on a usage error. Usage: `layers.py [--max-up N] [--cycles folder]` (the accel crate),
`layers.py --no-floors --src crates/cli/src` (cycles only). It reads text, it does not
compile: `#[cfg]` (but `#[cfg(test)] mod`), glob re-exports, `#[path]`, `#[macro_use]` are ignored.
"""
import argparse, fnmatch, os, re, sys  # noqa: E401
from collections import defaultdict

# The floor plan, one line per floor from 0 up: a module imports only from its floor or below.
# Keys: module names (`crate`: lib.rs, `backend`: backend/mod.rs); x::y matches x::y and all
# below it, a key with * ? [ ] is a glob over the whole name. The most specific key (the longest
# text before any wildcard) wins, on a tie the first; no key: DEFAULT_FLOOR, with a warning.
FLOORS = {key: floor for floor, keys in enumerate([
    "base dtype shape error device caps probe ledger peak rng",  # values, host facts
    "backend backend::contract backend::ops backend::off backend::native",  # what all share
    "backend::cpu* backend::cuda* backend::xla* backend::wgpu*",  # the backends, side by side
    "backend::registry backend::dispatch backend::devices backend::kept_probes",  # probes, dispatch
    "tensor memory display api fuzzing",  # tensors, memory accounting, the public api/ modules
    "nn bench load doctor",  # what is built from tensors
    "crate",  # the crate root
]) for key in keys.split()}
DEFAULT_FLOOR = 4
# Folders that may not import one another (what two backends need lives in backend::native).
APART = ["backend::cpu", "backend::cuda", "backend::xla", "backend::wgpu"]
# Folders that import nothing of the crate outside themselves (a C layer with its safe wrapper).
SEALED = ["backend::xla::pjrt"]
# Folder nodes: a module's first N path components (nn::x -> nn, backend::cuda::x -> backend::cuda).
FOLDER_DEPTH = {"*": 1, "backend": 2}
IDENT = r"(?:r#)?[A-Za-z_][A-Za-z0-9_]*"
UNRESOLVED = "?"  # resolve(): a crate::name that lib.rs neither defines nor re-exports

def name_of(mod):  # ('backend', 'cuda') -> 'backend::cuda'; () -> 'crate'
    return "::".join(mod) if mod else "crate"
def pattern_matches(pat, name):  # a glob over the whole name, or the module and all below it
    return fnmatch.fnmatchcase(name, pat) if set("*?[") & set(pat) else (
        name == pat or name.startswith(pat + "::"))
def lookup(table, name):
    """The value of the most specific key of `table` that matches name, or None."""
    hits = [(len(re.split(r"[*?\[]", pat)[0]), -k, value)
            for k, (pat, value) in enumerate(table.items()) if pattern_matches(pat, name)]
    return max(hits)[2] if hits else None
def blank(text):
    return re.sub(r"[^\n]", " ", text)

def scan(text, pos, stop, tokens=r"[{};]"):
    """Offset of the first token at which stop(token, nesting depth) holds, else len(text)."""
    depth = 0
    for t in re.compile(tokens).finditer(text, pos):
        depth += 1 if t.group() in ("{", "/*") else -1 if t.group() in ("}", "*/") else 0
        if stop(t.group(), depth): return t.start()
    return len(text)

# What is blanked, tried in this order at each offset: a line comment, a block comment, a raw
# string, a string, a char literal (a ' that starts none is a lifetime or a label).
_LEX = re.compile(r"//[^\n]*|/\*|(?<!\w)(?:br|cr|r)(#*)\"|\"(?:\\[\s\S]?|[^\"\\])*\"?|"
                  r"'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F_]*\}|.)|[^\\'\n])'")

def strip_comments_and_strings(src):
    """Same text, same length, with comments, string and char literals blanked (newlines
    kept, so offsets and line numbers still hold). Block comments nest, as in Rust."""
    out, pos = [], 0
    while m := _LEX.search(src, pos):
        end = m.end()
        if m.group() == "/*":
            end = min(len(src), 2 + scan(src, m.start(), lambda t, d: d == 0, r"/\*|\*/"))
        elif m.group(1) is not None:  # a raw string ends at a quote and as many #s
            close = src.find('"' + m.group(1), end)
            end = len(src) if close < 0 else close + 1 + len(m.group(1))
        out, pos = out + [src[pos:m.start()], blank(src[m.start():end])], end
    return "".join(out) + src[pos:]

def matching_brace(text, open_pos):
    """Offset just after the } that closes the { at open_pos (text already stripped)."""
    return min(len(text), scan(text, open_pos, lambda t, depth: t == "}" and depth == 0) + 1)

def parse_use_tree(tree):
    """'crate::a::{b, c::{self, d as e}, f::*}' -> [(segments, bound name or None, is_glob)].
    A leading '::' (an extern crate path) becomes the segment '::'."""
    out, prefixes, cur, alias = [], [[]], [], None  # prefixes: the path before each open {
    toks = iter(re.findall(r"::|[{},*]|" + IDENT, tree) + [","])
    for t in toks:
        if t in (",", "}"):  # the end of an item
            if cur:
                path = prefixes[-1] + (cur[:-1] if cur[-1] == "self" else cur)
                out.append((path, alias or (path[-1] if path else None), False))
            cur, alias = [], None
            prefixes = prefixes[:-1] if t == "}" and len(prefixes) > 1 else prefixes
        elif t == "{": prefixes, cur = prefixes + [prefixes[-1] + cur], []
        elif t == "*": out, cur = out + [(prefixes[-1] + cur, None, True)], []
        elif t == "as": alias = next(toks, None)
        elif t != "::": cur.append(t.replace("r#", ""))
        elif not cur and not prefixes[-1]: cur = ["::"]
    return out

_CFG_TEST_MOD = re.compile(r"#\s*\[\s*cfg\s*\(\s*test\s*\)\s*\]\s*(?:#\s*\[[^\]]*\]\s*)*"
                           r"(?:pub\s*(?:\([^)]*\))?\s*)?mod\s+(" + IDENT + r")\s*([;{])")
_USE = re.compile(r"(?<![\w$])(?:pub\s*(?:\([^)]*\))?\s+)?use\s+")
_PATH = re.compile(r"(?<![\w:$#])(" + IDENT + r"(?:\s*::\s*" + IDENT + r")+)")

class SourceFile:
    """A .rs file, blanked: its inline modules, `mod x;` children, top-level `use`s and paths."""
    def __init__(self, mod, rel, raw):
        self.mod, self.name, self.rel, self.lines = mod, name_of(mod), rel, raw.split("\n")
        text, pos = strip_comments_and_strings(raw).replace("$crate", " crate"), 0
        self.test_children = set()  # `#[cfg(test)] mod x;`: x's file is left out
        while m := _CFG_TEST_MOD.search(text, pos):
            pos = m.end() if m.group(2) == ";" else matching_brace(text, m.end() - 1)
            if m.group(2) == ";": self.test_children.add(m.group(1).replace("r#", ""))
            else: text = text[:m.start()] + blank(text[m.start():pos]) + text[pos:]
        self.text, mod_re = text, r"(?<![\w$])mod\s+(" + IDENT + r")\s*"
        self.inline_mods = sorted((m.end() - 1, matching_brace(text, m.end() - 1), m.group(1)
                                   .replace("r#", "")) for m in re.finditer(mod_re + "{", text))
        self.declared = {x.replace("r#", "") for x in re.findall(mod_re + ";", text)}
        self.top_uses, paths = [], []  # [(segs, bound, glob)]; [(offset, segs)]
        for m in _USE.finditer(self.text):  # `use` items first, then paths in the code left
            end = scan(self.text, m.end(), lambda t, depth: t == ";" and depth <= 0)
            items = parse_use_tree(self.text[m.end():end])
            paths += [(m.start(), segs) for segs, _bound, _glob in items if segs]
            if not self.depth(m.start()) and not self.inline_path(m.start()): self.top_uses += items
            text = text[:m.start()] + blank(text[m.start():end + 1]) + text[end + 1:]
        text = re.sub(r"pub\s*\(\s*in\s[^)]*\)", lambda m: blank(m.group()), text)
        paths += [(m.start(), [s.strip().replace("r#", "") for s in m.group(1).split("::")])
                  for m in _PATH.finditer(text)]
        self.paths = [(text.count("\n", 0, p), self.inline_path(p), segs) for p, segs in paths]

    def inline_path(self, pos):
        return tuple(name for (a, b, name) in self.inline_mods if a < pos < b)
    def depth(self, pos):
        return self.text.count("{", 0, pos) - self.text.count("}", 0, pos)

def read_crate(src_dir, warnings):
    """{module path: SourceFile} for the .rs files under src_dir, but #[cfg(test)] ones."""
    files, has_lib = {}, os.path.exists(os.path.join(src_dir, "lib.rs"))
    for root, dirs, names in os.walk(src_dir):
        dirs[:] = sorted(d for d in dirs if not (root == src_dir and d == "bin"))
        for fn in sorted(n for n in names if n.endswith(".rs")):
            rel = os.path.relpath(os.path.join(root, fn), src_dir).replace(os.sep, "/")
            # lib.rs and main.rs (a binary-only crate's root: accelkit-cli) are the crate; a folder's
            # mod.rs is the folder's module
            mod = tuple(filter(None, re.sub(r"/mod$|^(lib|main|mod)$", "", rel[:-3]).split("/")))
            if not (rel == "main.rs" and has_lib):  # a binary beside a library: another crate
                with open(os.path.join(root, fn), encoding="utf-8", errors="replace") as f:
                    files.setdefault(mod, SourceFile(mod, rel, f.read()))  # the file beside, first
    if () not in files: raise SystemExit(f"layers.py: no lib.rs or main.rs under {src_dir}")
    tests = {mod + (c,) for mod, sf in files.items() for c in sf.test_children}
    files = {m: sf for m, sf in files.items() if not any(m[:len(t)] == t for t in tests)}
    for mod, sf in files.items():  # a file that no `mod x;` declares is not compiled
        if mod and (parent := files.get(mod[:-1])) and mod[-1] not in parent.declared:
            warnings.append(f"{sf.rel}: not declared by `mod {mod[-1]}` in {parent.rel} "
                            "(kept as a node anyway)")
    return files

def bfs(start, succ):
    """{node: a shortest path start -> node}, in the order breadth-first search reaches them."""
    paths, queue = {start: [start]}, [start]
    for v in queue:  # the queue grows while it is walked
        for w in sorted(succ.get(v, ())):
            if w not in paths:
                paths[w] = paths[v] + [w]
                queue.append(w)
    return paths

class Analysis:
    def __init__(self, src_dir, floors=None, cycles="folder", apart=()):
        self.src_dir, self.apart, self.cycle_granularity = src_dir, list(apart), cycles
        self.warnings, self.module_floor, self.folder, self.folder_floor = [], {}, {}, {}
        self.files = read_crate(src_dir, self.warnings)
        root = self.files[()]  # what lib.rs's top-level `use`s bring in, and the items it has
        self.reexports = {b: s for s, b, glob in root.top_uses if b and s and not glob}
        self.root_items = {m.group(1).replace("r#", "") for m in re.finditer(
            r"(?<![\w$])(?:fn|struct|enum|trait|type|const|static|union)\s+(" + IDENT + ")",
            root.text) if root.depth(m.start()) == 0}
        self.macros = {m.group(1): mod for mod, sf in self.files.items() for m in re.finditer(
            r"#\s*\[\s*macro_export[^\]]*\]\s*(?:#\s*\[[^\]]*\]\s*)*macro_rules\s*!\s*("
            + IDENT + ")", sf.text)}
        self.file_edges = self.find_edges()
        self.modules = sorted(name_of(m) for m in self.files)
        for mod in sorted(self.files, key=name_of):
            name, floor = name_of(mod), lookup(FLOORS if floors is None else floors, name_of(mod))
            if floor is None:
                self.warnings.append(f"{name} ({self.files[mod].rel}): no FLOORS key matches; "
                                     f"put on floor {DEFAULT_FLOOR} (DEFAULT_FLOOR)")
            self.module_floor[name] = DEFAULT_FLOOR if floor is None else floor
            fo = self.folder[name] = name_of(mod[:max(1, lookup(FOLDER_DEPTH, name))])
            self.folder_floor[fo] = min(self.folder_floor.get(fo, 99), self.module_floor[name])
        fo, self.folder_edges = self.folder, defaultdict(list)  # folder floor: its lowest file's
        for (s, d), ev in self.file_edges.items():
            if fo[s] != fo[d]: self.folder_edges[fo[s], fo[d]] += ev

    def resolve(self, segs, here, inline=(), depth=0):
        """The deepest module file a path names; UNRESOLVED; None: extern, std, a local name."""
        first, rest, base = segs[0], list(segs), here
        if first == "crate": base, rest = (), rest[1:]
        elif first in ("self", "super"):
            rest, base = rest[1:] if first == "self" else rest, here + inline
            ups = next((k for k, s in enumerate(rest) if s != "super"), len(rest))
            if ups > len(base): return None
            base, rest = base[:len(base) - ups], rest[ups:]
        elif inline or here + (first,) not in self.files: return None  # not `use child::X`
        for k, seg in enumerate(rest):
            if base + (seg,) in self.files: base += (seg,)
            elif base != (): break
            elif seg in self.reexports:  # through lib.rs's re-exports, macros and own items
                return None if depth >= 10 else self.resolve(
                    self.reexports[seg] + rest[k + 1:], (), (), depth + 1)
            else: return self.macros.get(seg, () if seg in self.root_items else UNRESOLVED)
        while base not in self.files: base = base[:-1]
        return base

    def find_edges(self):
        """{(src, dst): [(file, line, text), ...]} between module names; warns of unknown names."""
        edges, unresolved = defaultdict(list), defaultdict(list)
        for sf in self.files.values():
            for ln, inline, segs in sf.paths:
                dst = self.resolve(segs, sf.mod, inline)
                if dst == UNRESOLVED:
                    unresolved["::".join(segs)].append(f"{sf.rel}:{ln + 1}")
                elif dst is not None and dst != sf.mod:
                    edges[sf.name, name_of(dst)].append((sf.rel, ln + 1, sf.lines[ln].strip()))
        for path, at in sorted(unresolved.items()):  # the name after crate:: is unknown
            name, more = (path.split("::") + [path])[1], f" (+{len(at) - 3} more)" * (len(at) > 3)
            self.warnings.append(f"{path}: lib.rs neither defines nor re-exports `{name}`; no edge "
                                 f"({', '.join(at[:3])}{more})")
        return dict(edges)

    def apart_edges(self):
        """File edges from one APART folder into another: [((src, dst), evidence)]."""
        home = {n: next((a for a in self.apart if pattern_matches(a, n)), 0) for n in self.modules}
        return [((s, d), ev) for (s, d), ev in sorted(self.file_edges.items())
                if home[s] and home[d] and home[s] != home[d]]

    def sealed_edges(self):
        """File edges from a SEALED folder to a file outside it: [((src, dst), evidence)]."""
        inside = lambda n: next((z for z in SEALED if pattern_matches(z, n)), None)
        return [((s, d), ev) for (s, d), ev in sorted(self.file_edges.items())
                if self.apart and inside(s) and inside(s) != inside(d)]

    def upward(self):
        """File edges from a lower floor to a higher one: [((src, dst), evidence)]."""
        floor = self.module_floor
        return sorted(((s, d), ev) for (s, d), ev in self.file_edges.items() if floor[s] < floor[d])

    def cycles(self, granularity=None):
        """[(members, one shortest cycle)] of each strongly connected set of 2+ files/folders."""
        file = (granularity or self.cycle_granularity) == "file"
        succ = defaultdict(set)
        for s, d in self.file_edges if file else self.folder_edges: succ[s].add(d)
        reach = {v: bfs(v, succ) for v in list(succ)}  # a cycle through v stays in v's set
        comps = sorted({tuple(sorted(w for w in reach[v] if v in reach.get(w, ()))) for v in reach})
        return [(list(c), next(path for v, path in reach[c[0]].items() if c[0] in succ[v]) + [c[0]])
                for c in comps if len(c) > 1]

def evidence(ev):
    (rel, line, text), more = ev[0], f" (+{len(ev) - 1} more)" if len(ev) > 1 else ""
    return f"{rel}:{line}  {text[:67] + '...' if len(text) > 70 else text}{more}"

def report(an, max_up, out):
    floor, cg = an.module_floor, an.cycle_granularity
    up, cyc, apart = an.upward(), an.cycles(), an.apart_edges()
    cedges, cfloor = (an.file_edges, floor) if cg == "file" else (an.folder_edges, an.folder_floor)
    lines = [f"layers.py: {an.src_dir}", *(f"warning: {w}" for w in an.warnings), "",
             "Floors (file granularity, top to bottom):", *(f"  {fl}  " + ", ".join(n for n in
             an.modules if floor[n] == fl) for fl in sorted(set(floor.values()), reverse=True))]
    lines += ["", f"Upward arrows (file granularity): {len(up)} (allowed: {max_up})"]
    lines += [f"  {s} ({floor[s]}) -> {d} ({floor[d]})   {evidence(ev)}" for (s, d), ev in up]
    lines += ["", f"Cycles ({cg} granularity): {len(cyc)}"]
    for i, (comp, path) in enumerate(cyc, 1):
        lines += [f"  #{i} {len(comp)} members: " + ", ".join(f"{n} ({cfloor[n]})" for n in comp),
                  "     cycle: " + " -> ".join(path)]
        lines += [f"       {s} -> {d}   {evidence(cedges[(s, d)])}" for s, d in zip(path, path[1:])]
    if an.apart:
        lines += ["", f"Imports between folders kept apart ({', '.join(an.apart)}): {len(apart)}"]
        lines += [f"  {s} -> {d}   {evidence(ev)}" for (s, d), ev in apart]
    bad = [f"{len(cyc)} cycle(s)"] if cyc else []
    bad += [f"{len(up)} upward arrows > {max_up}"] if len(up) > max_up else []
    bad += [f"{len(apart)} import(s) between backend folders"] if apart else []
    sealed = an.sealed_edges()
    if sealed:
        lines += ["", f"Imports out of sealed folders ({', '.join(SEALED)}): {len(sealed)}"]
        lines += [f"  {s} -> {d}   {evidence(ev)}" for (s, d), ev in sealed]
        bad += [f"{len(sealed)} import(s) out of a sealed folder"]
    lines += ["", f"Counts: files {len(an.modules)}, floors {len(set(floor.values()))}, edges "
              f"{len(an.file_edges)} between files / {len(an.folder_edges)} between "
              f"{len(an.folder_floor)} folders, upward arrows {len(up)} (file), cycles {len(cyc)} "
              f"({cg})", "Result: " + ("FAIL: " + "; ".join(bad) if bad else "OK")]
    print(*lines, sep="\n", file=out)
    return 1 if bad else 0

def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", default=os.path.normpath(os.path.join(here, "../crates/compute/src")),
                    help="the crate's src folder (default: %(default)s)")
    ap.add_argument("--cycles", choices=("file", "folder"), default="file", help="cycle nodes")
    ap.add_argument("--no-floors", action="store_true", help="only the cycle check, no FLOORS")
    ap.add_argument("--max-up", type=int, default=5, help="upward arrows allowed (default: 5)")
    args = ap.parse_args(argv)
    if not os.path.isdir(args.src):
        print(f"layers.py: no such folder: {args.src}", file=sys.stderr)
        return 2
    an = Analysis(args.src, floors={"*": 0} if args.no_floors else None, cycles=args.cycles,
                  apart=[] if args.no_floors else APART)
    return report(an, args.max_up, sys.stdout)

if __name__ == "__main__":
    sys.exit(main())
