#!/usr/bin/env python3
"""Every file path cited in comments and docs exists: python3 scripts/cited_paths.py

Reads the tracked files (`git ls-files`): the comments of .rs and .proto files (`//`, `///`,
`//!`, `/* */`; a small lexer skips string literals, so the CUDA and WGSL sources in raw strings
are not read), the whole of .md files, the comments and docstrings of .py files, the `#`
comments of .sh and .toml files. A citation is a word ending in .rs .md .py .sh .toml .json
.yaml .yml .proto .txt .svg or .png (a `:LINE` or `#anchor` after it is dropped), or a folder
under a top-level folder, ending in `/` (`crates/compute/src/backend/`). It exists when it names a
tracked file or folder from the repository root (also with a leading `/`), the citing file's
folder, or the citing crate's folder or its src/; or, like `lib.rs` or `cuda/context.rs`, when
it ends a tracked path of the citing crate (of the whole repository for a citing file outside
crates/, and for a cited .md: the docs live outside the crates). Left alone: URLs, paths git
ignores (target/: outputs), the user's machine (/proc /sys /dev /etc /usr /tmp, ~), `$VAR/...`,
`<placeholder>` and `{format}` paths, globs, a bare `.rs` (a kind of file), bare data names
(`FILE.json`, `summary.txt`: what a run reads or writes) and ELSEWHERE. Exit status 1 on one
that exists nowhere, listed as file:line: citation.
"""

import io
import os
import re
import subprocess
import sys
import tokenize

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
EXT = r"\.(?:rs|md|py|sh|toml|json|yaml|yml|proto|txt|svg|png)"
CITE = re.compile(r"[^\s`'\"()\[\],;|=]*" + EXT + r"(?![\w/-]|\.\w)")
DATA = re.compile(r"[^/]*\.(?:json|yaml|yml|txt|svg|png)")  # a bare data file's name
SKIP = re.compile(r"[$*<>{}]|://|^\w[\w-]*(\.[\w-]+)+/|^" + EXT + "$")  # $VAR glob <x> {x} URL
SYSTEM = ("/proc/", "/sys/", "/dev/", "/etc/", "/usr/", "/tmp/", "~", "target/")
# Files of other projects or of users' machines that comments and docs name on purpose: a
# folder (ending in /) or a file name, with why. Keep it short: each entry hides citations.
ELSEWHERE = {
    "../shared/": "the workplace's design notes beside the clone (ARCHITECTURE.md's first line)",
    "tpu_info/": "Google's tpu-info package, whose reader and .proto the TPU client follows",
    "version.py": "a wheel's version file in users' environments (torch/, nvidia/*/: pyenv.rs)",
    "train.py": "the user's training script in usage examples (docs/pick.md)",
    "PROTOCOL-HTTP2.md": "gRPC's protocol document, which the hand-written client follows",
    "hack/update-codegen.sh": "the kubelet's generator, named by its api.proto kept unchanged",
}


def rust_comments(text):
    """(line number, text) of each comment line of Rust (or protobuf) source."""
    out, i, n, line = [], 0, len(text), 1
    while i < n:
        if text.startswith("//", i):
            j = n if text.find("\n", i) < 0 else text.find("\n", i)
            out.append((line, text[i:j]))
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                step = text.startswith(("/*", "*/"), j)
                depth += text.startswith("/*", j) - text.startswith("*/", j)
                j += 2 if step else 1
            out += [(line + k, s) for k, s in enumerate(text[i:j].split("\n"))]
        elif (m := re.compile(r'b?r(#*)"').match(text, i)) and not re.match(r"\w", text[i - 1]):
            j = text.find('"' + m.group(1), m.end())  # a raw string: r"..." or r#"..."#
            j = n if j < 0 else j + 1 + len(m.group(1))
        elif text[i] == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
        elif m := re.compile(r"'(\\.[^']*|[^\\'])'").match(text, i):
            j = m.end()  # a char literal ('"' would open a string); 'a is a lifetime
        else:
            j = i + 1
        line += text.count("\n", i, j)
        i = j
    return out


def python_prose(text):
    """(line number, text) of each comment and docstring line of Python source."""
    out, prev = [], tokenize.NEWLINE
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT or (tok.type == tokenize.STRING and prev in (
                tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)):
            out += [(tok.start[0] + k, s) for k, s in enumerate(tok.string.split("\n"))]
        if tok.type not in (tokenize.COMMENT, tokenize.NL):
            prev = tok.type
    return out


def hash_comments(text):
    """(line number, text) of `#` comments of shell and TOML: a # outside quotes, not `$#`."""
    out = []
    for n, line in enumerate(text.split("\n"), 1):
        for m in re.finditer(r"(?:^|\s)#(?!!)", line):
            if line[:m.start()].count("'") % 2 == 0 and line[:m.start()].count('"') % 2 == 0:
                out.append((n, line[m.end():]))
                break
    return out


def prose(path, text):
    if path.endswith(".md"):
        return list(enumerate(text.split("\n"), 1))
    if path.endswith((".rs", ".proto")):
        return rust_comments(text)
    return python_prose(text) if path.endswith(".py") else hash_comments(text)


def main():
    git = lambda *a, **kw: subprocess.run(["git", *a], cwd=ROOT, capture_output=True,
                                          text=True, **kw).stdout.split("\n")
    files = [f for f in git("ls-files", check=True) if f]
    known = set(files) | {f.rsplit("/", k)[0] for f in files for k in range(1, f.count("/") + 1)}
    tops = "|".join(re.escape(f.split("/")[0]) for f in known if f and "/" not in f)
    folder = re.compile(r"(?<![\w./-])(?:%s)/[\w./-]*/(?![\w-])" % tops)
    missing, checked = [], 0
    for path in files:
        if not path.endswith((".rs", ".proto", ".md", ".sh", ".py", ".toml")):
            continue
        parts = path.split("/")
        crate = "/".join(parts[:2]) if parts[0] == "crates" and len(parts) > 2 else ""
        text = open(os.path.join(ROOT, path), encoding="utf-8", errors="replace").read()
        for n, line in prose(path, text):
            for m in [*CITE.finditer(line), *folder.finditer(line)]:
                cite = m.group(0)
                if cite.startswith("**") and line.startswith("**", m.end()):
                    cite = cite[2:]  # Markdown's bold, not a glob
                if SKIP.search(cite) or cite.startswith(SYSTEM) or DATA.fullmatch(cite) or any(
                        cite == e or cite.startswith(e) and e.endswith("/") or
                        "/" not in e and cite.endswith("/" + e) for e in ELSEWHERE):
                    continue
                checked += 1
                if not exists(cite.rstrip("/"), os.path.dirname(path), crate, known, files):
                    missing.append((path, n, cite))
    ignored = set(git("check-ignore", "--stdin", input="\n".join(c for _, _, c in missing)))
    bad = [f"{p}:{n}: {c}" for p, n, c in missing if c not in ignored]
    for b in bad:
        print(f"error: cited, does not exist: {b}")
    print(f"cited_paths.py: {checked} citations checked, {len(bad)} missing")
    return 1 if bad else 0


def exists(cite, here, crate, known, files):
    if cite.startswith("/"):
        return cite.lstrip("/") in known
    bases = ["", here] + ([crate, crate + "/src"] if crate else [])
    if any(os.path.normpath(os.path.join(b, cite)) in known for b in bases):
        return True
    if cite.startswith("."):
        return False  # ./x or ../x: relative to the citing folder only
    scope = "" if not crate or cite.endswith(".md") else crate + "/"
    return any(f.startswith(scope) and (f == cite or f.endswith("/" + cite)) for f in files)


if __name__ == "__main__":
    sys.exit(main())
