#!/usr/bin/env python3
"""The public surface of each library crate, written to docs/public-api.txt, so that a change
to what users get shows in review as a diff of that file.

  python3 scripts/public_api.py            # compare with docs/public-api.txt; exit 1 on a change
  python3 scripts/public_api.py --write    # rewrite docs/public-api.txt

From each crate's lib.rs it follows `pub mod` (not `pub(crate)`, not `#[doc(hidden)]`, not
`#[cfg(test)]`) and lists, module by module, every `pub` item with its signature up to its
body: functions, types, traits, constants, re-exports (`pub use`), the `pub fn`s of inherent
impls (`Type::f`), trait impls (`impl Trait for Type`) of public types and the `pub` fields of structs. It also
fails when a public signature returns `Result<_, String>` (errors are typed) or names a
dependency's module from the list in FOREIGN. It reads text (scripts/layers.py's lexer), it
does not compile: items made by macros and the contents of re-exported modules are not
expanded (a `pub use x::module` line is itself listed, which is what a review must see).
"""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from layers import matching_brace, strip_comments_and_strings  # noqa: E402

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
# Each library crate: its folder under crates/ and its name in Rust paths.
CRATES = [("core", "accelkit_core"), ("telemetry", "accelkit_telemetry"), ("compute", "accelkit"),
          ("report", "accelkit_report"), ("exporter", "accelkit_exporter")]
OUT = os.path.join(ROOT, "docs", "public-api.txt")
# Dependencies whose types must not appear in a public signature.
# Type names re-exported by a `pub use` (their definitions and impls are listed wherever
# they live in the crate).
REEXPORTED = {}
CRATE_SRC = [None]  # the src folder of the crate being listed
FOREIGN = ["nvml_wrapper", "cudarc", "wgpu::", "sysinfo", "pyo3", "libc::"]

ITEM = re.compile(
    r"(?P<attrs>(?:#\s*\[[^\]]*\]\s*)*)pub\s+(?P<kind>(?:(?:const|unsafe|async|extern\s+\"C\")\s+)*"
    r"(?:fn|struct|enum|trait|type|const|static|mod|use|union))\b")
IMPL = re.compile(r"(?P<attrs>(?:#\s*\[[^\]]*\]\s*)*)(?:unsafe\s+)?impl\b")


def hidden(attrs):
    return bool(re.search(r"doc\s*\(\s*hidden|cfg\s*\(\s*test\s*\)|\"fuzzing\"", attrs))


def flat(text):
    return re.sub(r"\s+", " ", text).replace("( ", "(").replace(" )", ")").strip()


def header(text, start):
    """The item's text from `start` up to its body's `{` or its `;`, at depth 0."""
    depth = 0
    for k in range(start, len(text)):
        c = text[k]
        if text.startswith("<<", k) or text.startswith("<<", k - 1):
            continue  # a shift in a constant (`64 << 20`), not two generics opening
        if c in "(<[":
            depth += 1
        elif c in ")>]":
            depth -= 1 if not (c == ">" and text[k - 1] == "-") else 0
        elif c in "{;" and depth <= 0:
            return text[start:k], k
    return text[start:], len(text)


def items(text, base, path_of_mod, out, problems, where, resolve=None):
    """Lists the pub items at depth 0 of `text` (a module's body), recursing into modules."""
    pos = 0
    while True:
        m_item, m_impl = ITEM.search(text, pos), IMPL.search(text, pos)
        m = min((x for x in (m_item, m_impl) if x), key=lambda x: x.start(), default=None)
        if m is None:
            return
        depth = text[: m.start()].count("{") - text[: m.start()].count("}")
        head, end = header(text, m.end("attrs"))
        if m is m_item and m.group("kind") == "use":
            end = text.index(";", m.end())
            head = text[m.end("attrs"):end]
        body_end = matching_brace(text, end) if end < len(text) and text[end] == "{" else end + 1
        pos = body_end
        if depth != 0 or hidden(m.group("attrs")):
            pos = m.end()
            continue
        h = flat(head)
        if m is m_impl:
            target = re.sub(r"^(?:unsafe\s+)?impl\s*(?:<.*?>\s*)?", "", h)
            if " for " in target:
                out.add(f"{base} impl {target}")
            else:
                ty = re.sub(r"<.*", "", target).strip()
                sub = text[end + 1: body_end - 1]
                for f in ITEM.finditer(sub):
                    d = sub[: f.start()].count("{") - sub[: f.start()].count("}")
                    if d == 0 and not hidden(f.group("attrs")):
                        fh = flat(header(sub, f.end("attrs"))[0])
                        out.add(f"{base}::{ty} {fh}")
                        check(fh, problems, where)
            continue
        kind = m.group("kind").split()[-1]
        if kind == "mod" and inner_hidden(path_of_mod(re.search(r"mod\s+(\w+)", h).group(1))):
            continue
        out.add(f"{base} {h}")
        if kind == "use":
            source = source_file(h, resolve or path_of_mod)
            for leaf in re.findall(r"(\w+)\s*(?:as\s+(\w+))?\s*[,}]|(\w+)\s*(?:as\s+(\w+))?$", h):
                name = leaf[0] or leaf[2]
                if name and name != "self" and name[0].isupper():
                    REEXPORTED.setdefault(name, set()).add(source)
        check(h, problems, where)
        if kind == "struct" and end < len(text) and text[end] == "{":
            name = re.search(r"struct\s+(\w+)", h).group(1)
            for fm in re.finditer(r"(?:#\s*\[[^\]]*\]\s*)*pub\s+(\w+)\s*:\s*([^,]*(?:<[^>]*>)?[^,]*)",
                                  text[end + 1: body_end - 1]):
                out.add(f"{base}::{name} field {fm.group(1)}: {flat(fm.group(2))}")
                check(fm.group(2), problems, where)
        if kind == "mod":
            name = re.search(r"mod\s+(\w+)", h).group(1)
            if end < len(text) and text[end] == "{":
                items(text[end + 1: body_end - 1], f"{base}::{name}", path_of_mod, out, problems,
                      where)
            else:
                child = path_of_mod(name)
                if child:
                    module(child, f"{base}::{name}", out, problems)


def source_file(use, path_of_mod):
    """The file a `pub use a::b::{X, Y}` (or `a::b::X`) takes its items from, when the path
    leads through this crate's module files; else None (any file may define them)."""
    path = re.sub(r"^pub\s+use\s+", "", use)
    path = re.split(r"::\s*\{", path)[0] if "{" in path else path.rsplit("::", 1)[0]
    segments = [x.strip() for x in path.split("::") if x.strip()]
    if segments and segments[0] == "crate":
        segments, found = segments[1:], os.path.join(CRATE_SRC[0], "lib.rs")
    elif not segments or segments[0] in ("super", "self"):
        return None
    else:
        found = path_of_mod(segments[0])
        segments = segments[1:]
    for seg in segments:
        if not found:
            return None
        folder = (os.path.dirname(found) if os.path.basename(found) in ("mod.rs", "lib.rs")
                  else found[:-3])
        found = next((c for c in (os.path.join(folder, seg + ".rs"),
                                  os.path.join(folder, seg, "mod.rs")) if os.path.exists(c)), None)
    return found


def inner_hidden(path):
    """Whether a module's file starts hidden (`#![doc(hidden)]`)."""
    if not path:
        return False
    with open(path, encoding="utf-8") as fh:
        return re.search(r"#!\s*\[\s*doc\s*\(\s*hidden", fh.read()) is not None


def check(sig, problems, where):
    if re.search(r"Result<[^;{]*,\s*String\s*>", sig):
        problems.append(f"{where}: a public signature returns Result<_, String>: {flat(sig)}")
    for f in FOREIGN:
        if f in sig:
            problems.append(f"{where}: a public signature names {f}: {flat(sig)}")


def module(path, base, out, problems):
    with open(path, encoding="utf-8") as fh:
        text = strip_comments_and_strings(fh.read())
    folder = os.path.dirname(path)
    own = folder if os.path.basename(path) in ("lib.rs", "mod.rs") else path[:-3]

    def path_of_mod(name):
        for cand in (os.path.join(own, name + ".rs"), os.path.join(own, name, "mod.rs")):
            if os.path.exists(cand):
                return cand
        return None

    items(text, base, path_of_mod, out, problems, os.path.relpath(path, ROOT))


def within(path, source):
    """Whether `path` is the module file `source` (None: not known) or a file of its folder."""
    if source is None or path == source:
        return True
    folder = (os.path.dirname(source) if os.path.basename(source) in ("mod.rs", "lib.rs")
              else source[:-3])
    return path.startswith(folder + os.sep)


def reexported(path, base, out, problems):
    """The definitions and inherent impls of REEXPORTED types in one file of the crate."""
    with open(path, encoding="utf-8") as fh:
        text = strip_comments_and_strings(fh.read())
    found = set()
    where = os.path.relpath(path, ROOT)
    # (Its own `pub use` lines join REEXPORTED: a type re-exported in steps, `pub use a::X` of
    # a `pub use b::X`, is found at the end of the chain.)
    folder = os.path.dirname(path) if os.path.basename(path) in ("mod.rs", "lib.rs") else path[:-3]

    def path_of_mod(name):
        return next((c for c in (os.path.join(folder, name + ".rs"),
                                 os.path.join(folder, name, "mod.rs")) if os.path.exists(c)), None)

    items(text, base + "::<re-exported>", lambda _n: None, found, [], where, path_of_mod)
    for line in found:
        m = re.match(r"\S+ (?:pub (?:struct|enum|trait|type) (\w+)|impl .* for (\w+))", line)
        own = re.match(r"\S+::<re-exported>::(\w+)", line)
        name = (m and (m.group(1) or m.group(2))) or (own and own.group(1))
        # A definition counts in the file its `pub use` names (another file may define a
        # private type of the same name); an impl of it may be in any file.
        defined = m and m.group(1)
        if name in REEXPORTED and (not defined or any(within(path, f) for f in REEXPORTED[name])):
            out.add(line.replace("::<re-exported>", ""))
            check(line, problems, where)


def surface():
    lines, problems = [], []
    for crate, name in CRATES:
        out = set()
        REEXPORTED.clear()
        src = os.path.join(ROOT, "crates", crate, "src")
        CRATE_SRC[0] = src
        module(os.path.join(src, "lib.rs"), name, out, problems)
        files = [os.path.join(root, fn) for root, _dirs, names in sorted(os.walk(src))
                 for fn in sorted(names) if fn.endswith(".rs") and fn != "tests.rs"]
        # Twice: the first pass only gathers every file's `pub use` chains, so that the second
        # finds a definition whatever the order of the files.
        for f in files:
            reexported(f, name, set(), [])
        for f in files:
            reexported(f, name, out, problems)
        hidden_types = private_types(files)
        lines += sorted(line for line in out if impl_target(line) not in hidden_types)
    return lines, problems


TYPE_DEF = re.compile(r"^\s*(pub(?:\([^)]*\))?\s+)?(?:struct|enum|union|type|trait)\s+(\w+)", re.M)


def private_types(files):
    """Type names the crate defines only without plain `pub` (`struct Safe`, `pub(crate) struct
    NvidiaReader`): their impls and methods are not the crate's API, whatever module they sit in."""
    public, private = set(), set()
    for f in files:
        for m in TYPE_DEF.finditer(open(f).read()):
            (public if (m.group(1) or "").strip() == "pub" else private).add(m.group(2))
    return private - public


def impl_target(line):
    """The type a listed trait impl (`... impl Trait for Type`) or inherent item
    (`path::Type pub fn ...`) belongs to; None for other items."""
    m = re.match(r"\S+ impl .* for (\w+)", line) or \
        re.match(r"\S+::([A-Z]\w*) pub (?:unsafe )?(?:const )?fn ", line)
    return m.group(1) if m else None


def main(argv):
    lines, problems = surface()
    text = ("# The public API of accel's library crates, written by scripts/public_api.py\n"
            "# (--write after a deliberate change; the test command fails on a difference).\n"
            + "".join(line + "\n" for line in lines))
    for p in problems:
        print(f"error: {p}")
    if "--write" in argv:
        with open(OUT, "w") as f:
            f.write(text)
        print(f"public_api.py: {len(lines)} items written to {os.path.relpath(OUT, ROOT)}")
        return 1 if problems else 0
    old = open(OUT).read() if os.path.exists(OUT) else ""
    if old != text:
        import difflib
        sys.stdout.writelines(difflib.unified_diff(
            old.splitlines(True), text.splitlines(True), "docs/public-api.txt", "the source"))
        print("error: the public API changed: review the diff above, then run "
              "`python3 scripts/public_api.py --write`")
        return 1
    print(f"public_api.py: {len(lines)} public items, as in docs/public-api.txt")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
