#!/usr/bin/env python3
"""Per backend, how many tests ran and how many cases were skipped, from the test command's
output (the closing table of scripts/test.sh).

Device tests are one function per backend (`ops::binary_ops::wgpu`); a test that cannot run
on this machine passes after printing `skipped: <backend>: <reason> (<test>)`, and a test that
runs some cases but not others (wgpu has no f64) prints one such line per case left out. So the
table gives, per backend, the test functions that passed (a skipped one passes too) and the
skip lines (cases left out: a whole test where the backend is missing, or one dtype). Tests without a backend suffix are
`other`; their skip lines name a tool (prometheus, tmux, grpc) or a backend.

    python3 scripts/test_counts.py target/test-output.log
"""
import re
import sys
from collections import Counter

BACKENDS = ["cpu", "cuda", "mps", "xla", "wgpu"]


def main(path):
    passed, failed, notes = Counter(), Counter(), Counter()
    for line in open(path, errors="replace"):
        # Doc tests are named by file and line, with spaces: "test crates/compute/src/lib.rs
        # - (line 7) ... ok" (a name without spaces left them out of the count).
        m = re.match(r"^test (.+?) \.\.\. (ok|FAILED|ignored)", line)
        if m:
            name, result = m.groups()
            suffix = name.rpartition("::")[2]
            key = suffix if suffix in BACKENDS else "other"
            (passed if result == "ok" else failed)[key] += 1
            continue
        m = re.match(r"^skipped: ([a-z0-9 _-]+):", line)
        if m:
            what = m.group(1)
            notes[what if what in BACKENDS else "other"] += 1
    print(f"{'backend':<8} {'passed':>7} {'skip lines':>11} {'failed':>7}")
    for k in BACKENDS + ["other"]:
        print(f"{k:<8} {passed[k]:>7} {notes[k]:>11} {failed[k]:>7}")
    print("(a skipped test passes too; each skip line is a case left out, with its reason)")
    print(f"{sum(passed.values())} passed, {sum(failed.values())} failed, {sum(notes.values())} skipped")


if __name__ == "__main__":
    main(sys.argv[1])
