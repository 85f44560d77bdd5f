#!/usr/bin/env python3
"""Fails when maturin's build of the Python module (accelkit-py alone) would compile a shared
dependency with other features than the test command's workspace build.

Cargo resolves features over the packages a command names: `cargo test --workspace
--all-targets` unifies every member's and every dev-dependency's wishes, `maturin build`
(accelkit-py alone) only that crate's. A dependency with other features is another build of it,
and of everything above it: accelkit-core, accelkit-telemetry and accelkit, four minutes of the
test command. crates/py/Cargo.toml names the missing features (its [dependencies] and
[build-dependencies] lists); this script compares both unit graphs (nightly cargo's
--unit-graph, which resolves without compiling) and names what that list lacks.

  python3 scripts/feature_drift.py
"""

import json
import os
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def units(args):
    """{package: {feature sets}} of the library units a cargo command builds (a package built
    for the host, a proc-macro's dependency, may be built with another set as well)."""
    out = subprocess.run(["cargo", "+nightly", *args, "--locked", "--release", "--unit-graph",
                          "-Z", "unstable-options"], cwd=ROOT, check=True, capture_output=True,
                         text=True).stdout
    found = {}
    for u in json.loads(out)["units"]:
        kinds = u["target"]["kind"]
        if u["mode"] != "build" or not ("lib" in kinds or "rlib" in kinds or "proc-macro" in kinds):
            continue
        found.setdefault(u["pkg_id"].split("#")[-1], set()).add(tuple(sorted(u["features"])))
    return found


def main():
    workspace = units(["test", "--workspace", "--all-targets", "--no-run"])
    wheel = units(["build", "-p", "accelkit-py", "--lib"])
    drift = []
    for key, sets in sorted(wheel.items()):
        if key.startswith("accelkit-py@") or workspace.get(key) == sets:
            continue
        have = set().union(*workspace.get(key, set()))
        want = set().union(*sets)
        drift.append(f"  {key}: only the test build has [{', '.join(sorted(have - want))}]"
                     f", only the wheel's [{', '.join(sorted(want - have))}]")
    if drift:
        print("error: maturin's build of accelkit-py would compile these dependencies with other "
              "features than the test build (and everything above them a second time):")
        print("\n".join(drift))
        print("name the test build's features for them in crates/py/Cargo.toml "
              "([build-dependencies] for a proc-macro's dependency)")
        return 1
    print(f"the wheel's build resolves the test build's features ({len(wheel)} library units)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
