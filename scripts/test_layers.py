#!/usr/bin/env python3
"""Self-test of layers.py on a synthetic crate: python3 scripts/test_layers.py"""

import contextlib
import io
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import layers  # noqa: E402

FILES = {
    "lib.rs": r'''
//! Docs mention crate::c::Doc and `use crate::c;` -- not edges.
mod a;
mod b;
pub mod c;
pub use a::Thing;
pub use half::f16; // an extern re-export: crate::f16 is no edge
/* a block /* nested */ comment: crate::c::Hidden */
pub fn root_fn() {}
''',
    "a.rs": r'''
// use crate::c::Nope;
/// [`crate::c::Nope`]
const S: &str = "crate::c::Nope \" still a string";
const R: &str = r#"crate::c::Raw "quoted" "#;
const CH: char = '"';
pub struct Thing;
pub fn f<'x>(s: &'x str) -> &'x str {
    crate::b::g();
    let _ = crate::f16::ONE;
    s
}
''',
    "b/mod.rs": r'''
mod inner;
pub use inner::Deep;
pub fn g() {}
''',
    "b/inner.rs": r'''
use super::g;
use crate::Thing;
pub struct Deep;
fn uses_root() { crate::root_fn(); crate::NotThere::x(); }
mod nested {
    use super::Deep; // super of an inline module is b::inner itself: no edge
}
#[cfg(test)]
mod tests {
    use crate::c::Z;
    fn t() { crate::c::zz(); }
}
''',
    "c.rs": r'''
use crate::{b::{self, inner::{Deep as D}}, Thing as T};
pub struct Z;
fn h() {
    let _ = 'c';
    super::a::f("x");
}
''',
}

FLOORS = {"a": 0, "b": 1, "c": 2, "crate": 3}


class LayersTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        for rel, text in FILES.items():
            path = os.path.join(cls.tmp.name, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        cls.an = layers.Analysis(cls.tmp.name, floors=FLOORS)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_modules(self):
        self.assertEqual(self.an.modules, ["a", "b", "b::inner", "c", "crate"])

    def test_edges(self):
        # lib.rs's `mod` lines give no edges; comments, strings, the extern re-export,
        # the inline module's `super` and the #[cfg(test)] module give none either
        self.assertEqual(set(self.an.file_edges), {
            ("crate", "a"),          # pub use a::Thing
            ("a", "b"),              # crate::b::g() in code
            ("b", "b::inner"),       # pub use inner::Deep (parent -> child re-export)
            ("b::inner", "b"),       # use super::g
            ("b::inner", "a"),       # use crate::Thing, through lib.rs's pub use
            ("b::inner", "crate"),   # crate::root_fn(), defined in lib.rs
            ("c", "b"),              # use crate::{b::{self, ..}}
            ("c", "b::inner"),       # .. inner::{Deep as D}
            ("c", "a"),              # Thing as T (re-export) and super::a::f
        })

    def test_unresolved_name_warns(self):
        self.assertTrue(any("NotThere" in w for w in self.an.warnings), self.an.warnings)

    def test_upward_arrows(self):
        up = [edge for edge, _ev in self.an.upward()]
        self.assertEqual(up, [("a", "b"), ("b::inner", "crate")])

    def test_cycles(self):
        # a -> b -> a (b::inner -> a, collapsed into b); crate joins through
        # b::inner -> crate (root_fn) and crate -> a
        folder = self.an.cycles("folder")   # b::inner collapses into b
        self.assertEqual([comp for comp, _ in folder], [["a", "b", "crate"]])
        comp, path = folder[0]
        self.assertEqual(path, ["a", "b", "a"])
        files = self.an.cycles("file")
        self.assertEqual([comp for comp, _ in files], [["a", "b", "b::inner", "crate"]])
        self.assertEqual(files[0][1][0], files[0][1][-1])

    def test_exit_status(self):
        for argv, want in (([], 1), (["--max-up", "9"], 1), (["--cycles", "file"], 1)):
            with contextlib.redirect_stdout(io.StringIO()) as out:
                rc = layers.main(["--src", self.tmp.name] + argv)
            self.assertEqual(rc, want, out.getvalue())

    def test_no_cycle_passes(self):
        # without a -> b (the only upward arrow that closes the cycle) everything passes
        with tempfile.TemporaryDirectory() as d:
            for rel, text in FILES.items():
                if rel == "a.rs":
                    text = text.replace("crate::b::g();", "")
                path = os.path.join(d, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    f.write(text)
            an = layers.Analysis(d, floors=FLOORS)
            self.assertEqual(an.cycles(), [])
            self.assertEqual([e for e, _ in an.upward()], [("b::inner", "crate")])

    def test_backend_folders_kept_apart(self):
        # backend::x importing backend::y fails; both importing backend::shared does not
        files = {
            "lib.rs": "mod backend;\n",
            "backend/mod.rs": "mod shared;\nmod x;\nmod y;\n",
            "backend/shared.rs": "pub fn s() {}\n",
            "backend/x/mod.rs": "use crate::backend::shared::s;\npub fn f() { s() }\n",
            "backend/y.rs": "use crate::backend::x::f;\nuse crate::backend::shared::s;\n",
        }
        with tempfile.TemporaryDirectory() as d:
            for rel, text in files.items():
                os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
                with open(os.path.join(d, rel), "w") as f:
                    f.write(text)
            apart = ["backend::x", "backend::y"]
            an = layers.Analysis(d, floors={"*": 0}, apart=apart)
            self.assertEqual([e for e, _ in an.apart_edges()], [("backend::y", "backend::x")])
            self.assertEqual(layers.Analysis(d, floors={"*": 0}).apart_edges(), [])

    def test_parse_use_tree(self):
        got = layers.parse_use_tree("crate::x::{self, y::{z as w, *}, ::ext::q}")
        self.assertEqual(got, [(["crate", "x"], "x", False),
                               (["crate", "x", "y", "z"], "w", False),
                               (["crate", "x", "y"], None, True),
                               (["crate", "x", "ext", "q"], "q", False)])

    def test_strip(self):
        src = "a /* x /* y */ z */ b // c\n'\\'' \"q\\\"\" 'lt r#\"s\"# e"
        out = layers.strip_comments_and_strings(src)
        self.assertEqual(len(out), len(src))
        self.assertEqual(out.split(), ["a", "b", "'lt", "e"])


if __name__ == "__main__":
    unittest.main()
