#!/usr/bin/env python3
"""Every file path cited in comments and docs exists: python3 scripts/cited_paths.py

Reads the tracked files (`git ls-files`): the comments of .rs files (`//`, `///`, `//!`), the
whole text of .md files, and the `#` comments of .sh, .py and .toml files. A citation is a
word ending in .rs .md .py .sh .toml .json .yaml .yml .proto .txt .svg or .png with folders
(`cuda/context.rs`, `docs/serve.md`), or a bare .rs or .md name (`lib.rs`); bare names of
other kinds are outputs and inputs (`summary.txt`, `FILE.json`), not citations. It exists when it names a
tracked file relative to the repository root, the citing file's folder, or the citing crate's
folder or src/; when it ends a tracked path (`cuda/context.rs` for
crates/accel/src/backend/cuda/context.rs); or, for a bare name, when a tracked file of that
name is in the same crate (anywhere, for a citation outside the crates).
Left alone: URLs, absolute paths (/proc, /etc: the user's machine), globs, `$VAR` and
`<placeholder>` paths, and the files of other projects in ELSEWHERE and ELSEWHERE_FOLDERS. Exit status 1 on a
citation that exists nowhere, listing file:line and the citation.
"""

import os
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
EXT = r"(?:rs|md|py|sh|toml|json|yaml|yml|proto|txt|svg|png)"
CITE = re.compile(r"(?<![\w./-])([\w.-]+(?:/[\w.:-]+)*\." + EXT + r")(?![\w/])")
# Files of other projects or of users' machines that the docs name on purpose.
ELSEWHERE = {
    "version.py",          # a CUDA wheel's nvidia/*/version.py, read by pyenv.rs
    "setup.py",            # how other Python projects build
    "conftest.py",         # pytest's own name
    "pyproject.toml",      # tracked at the root; also other projects'
    "Cargo.toml",          # every crate's manifest
    "tpu_metric_service.proto",  # the TPU runtime's service, compiled at test time
    "pjrt_c_api.h",        # (not matched: .h), kept for clarity
    "web-config.yml",      # exporter-toolkit's file name, written by users
    "web.yml",             # the same, as users name it
    "prometheus.yml",      # Prometheus's own configuration file
    "values.yaml",         # a Helm chart's
    "daemonset.yaml",      # a Kubernetes manifest users write
    "rules.yml",           # Prometheus rules users write
    "config.toml",         # cargo's and other tools' configuration
    "rust-toolchain.toml", # rustup's
    "README.md",           # every folder's
    "PROTOCOL-HTTP2.md",   # gRPC's own protocol document
}
# Folders of other projects and places outside this repository that comments cite.
ELSEWHERE_FOLDERS = (
    "../shared/",          # the workplace's shared notes (DESIGN.md, STYLE.md), beside the clone
    "tpu_info/",           # Google's tpu-info package
    "torch/",              # PyTorch's package (torch/version.py)
    "jax/", "jaxlib/",     # JAX's packages
)


def tracked():
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.split("\n")
    return [f for f in out if f]


def comment_lines(path, text):
    """(line number, text) of what a reader sees as prose in this file."""
    lines = text.split("\n")
    if path.endswith(".md"):
        return list(enumerate(lines, 1))
    out = []
    for n, line in enumerate(lines, 1):
        if path.endswith(".rs"):
            m = re.search(r"(?:^|\s)//[/!]?(.*)$", line)
        else:
            m = re.search(r"(?:^|\s)#(?!!)(.*)$", line)
        if m:
            out.append((n, m.group(1)))
    return out


def crate_of(path):
    parts = path.split("/")
    return "/".join(parts[:2]) if parts[0] == "crates" and len(parts) > 2 else None


def main():
    files = tracked()
    fileset = set(files)
    dirs = {os.path.dirname(f) for f in files}
    by_name = {}
    for f in files:
        by_name.setdefault(os.path.basename(f), []).append(f)
    bad, checked = [], 0
    for path in files:
        if not re.search(r"\.(rs|md|sh|py|toml)$", path) or "/fixtures/" in path:
            continue
        try:
            text = open(os.path.join(ROOT, path), encoding="utf-8").read()
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        crate = crate_of(path)
        here = os.path.dirname(path)
        for n, line in comment_lines(path, text):
            for m in CITE.finditer(line):
                cite = m.group(1).rstrip(".")
                word = line[max(0, m.start() - 12): m.end() + 1]
                if "://" in word or "*" in word or "$" in line[max(0, m.start() - 2): m.start()]:
                    continue
                if line[max(0, m.start() - 1): m.start()] in ("<", "{", "~"):
                    continue
                if os.path.basename(cite) in ELSEWHERE and "/" not in cite:
                    continue
                if any(cite.startswith(e) for e in ELSEWHERE_FOLDERS):
                    continue
                stem = os.path.basename(cite).split(".")[0]
                if "/" not in cite and (not re.search(r"\.(rs|md)$", cite) or stem.isupper()):
                    continue  # a bare output or input name (summary.txt, FILE.json, train.py)
                checked += 1
                if exists(cite, here, crate, fileset, dirs, by_name, files):
                    continue
                bad.append(f"{path}:{n}: {cite}")
    for b in bad:
        print(f"error: cited, does not exist: {b}")
    print(f"cited_paths.py: {checked} citations checked, {len(bad)} missing")
    return 1 if bad else 0


def exists(cite, here, crate, fileset, dirs, by_name, files):
    bases = ["", here] + ([crate, crate + "/src"] if crate else [])
    for b in bases:
        p = os.path.normpath(os.path.join(b, cite)) if b else os.path.normpath(cite)
        if p in fileset or p in dirs:
            return True
    if "/" in cite:
        # A path ending a tracked path: cuda/context.rs for crates/accel/src/backend/cuda/...
        return any(f.endswith("/" + cite) for f in files)
    same = by_name.get(cite, [])
    return any(not crate or f.startswith(crate + "/") for f in same)


if __name__ == "__main__":
    sys.exit(main())
