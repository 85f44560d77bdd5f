//! The StableHLO text the XLA backend generates (through `accelkit::fuzzing::hlo`, built with
//! `--features hlo`), for every op on views the public API can make, is well formed: balanced
//! brackets, every SSA value defined once and before use, and each op's result type what its
//! operand types imply (reshape keeps the element count, slice stays in bounds, transpose
//! permutes, broadcast_in_dim maps, reduce drops the reduced dims, dot_general contracts
//! matching sizes, literals parse, the returned value has the function's result type).
//! Compiling through PJRT is left to the test suite (scripts/test.sh has the CPU plugin).
#![no_main]

use std::collections::HashMap;

use accelkit::fuzzing::hlo::{program, Op, View};
use accelkit::DType;
use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;

const DTYPES: [DType; 6] = DType::ALL;

#[derive(Arbitrary, Debug)]
struct In {
    op: u8,
    arg: u8,
    dim: Option<u8>,
    dtype: u8,
    a: V,
    b: V,
}

#[derive(Arbitrary, Debug)]
struct V {
    dims: Vec<u8>,
    swaps: Vec<(u8, u8)>,
    offset: u8,
    extra: u8,
}

impl V {
    fn view(&self) -> View {
        View {
            dims: self.dims.iter().take(4).map(|&d| (d % 6) as usize).collect(),
            swaps: self.swaps.iter().take(4).map(|&(a, b)| (a as usize, b as usize)).collect(),
            // The public API makes no view with an offset yet (no slicing op): 0, as it does.
            offset: { let _ = self.offset; 0 },
            extra: (self.extra % 4) as usize,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
struct Ty {
    dims: Vec<usize>,
    elem: String,
}

fn parse_ty(s: &str) -> Ty {
    let s = s.trim();
    let inner = s
        .strip_prefix("tensor<")
        .and_then(|x| x.strip_suffix('>'))
        .unwrap_or_else(|| panic!("not a tensor type: {s:?}"));
    let parts: Vec<&str> = inner.split('x').collect();
    let (elem, dims) = parts.split_last().unwrap();
    let dims = dims
        .iter()
        .map(|d| d.parse::<usize>().unwrap_or_else(|_| panic!("bad dim {d:?} in {s:?}")))
        .collect();
    assert!(
        ["f16", "bf16", "f32", "f64", "i32", "i64", "i1"].contains(elem),
        "bad element type in {s:?}"
    );
    Ty { dims, elem: elem.to_string() }
}

fn ints(s: &str) -> Vec<usize> {
    s.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|x| x.parse::<usize>().unwrap_or_else(|_| panic!("bad integer {x:?}")))
        .collect()
}

/// The text between `open` and the next `close` after it.
fn between<'a>(s: &'a str, open: &str, close: &str) -> &'a str {
    let i = s.find(open).unwrap_or_else(|| panic!("no {open:?} in {s:?}")) + open.len();
    let j = s[i..].find(close).unwrap_or_else(|| panic!("no {close:?} after {open:?} in {s:?}"));
    &s[i..i + j]
}

fn n(t: &Ty) -> usize {
    t.dims.iter().product()
}

fn check(text: &str, out_len: usize) {
    // Balanced brackets (angle brackets of types included; `->` is not one).
    let mut stack = Vec::new();
    let plain = text.replace("->", "  ");
    for c in plain.chars() {
        match c {
            '(' | '{' | '[' | '<' => stack.push(c),
            ')' | '}' | ']' | '>' => {
                let o = stack.pop().unwrap_or_else(|| panic!("unbalanced {c:?}\n{text}"));
                assert_eq!((o, c).0, match c { ')' => '(', '}' => '{', ']' => '[', _ => '<' }, "mismatched {o:?} {c:?}\n{text}");
            }
            _ => {}
        }
    }
    assert!(stack.is_empty(), "unclosed {stack:?}\n{text}");

    let mut vals: HashMap<String, Ty> = HashMap::new();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("module @accel {"), "{text}");
    let head = lines[1].trim();
    assert!(head.starts_with("func.func public @main("), "{text}");
    let args = between(head, "@main(", ") ->");
    for a in args.split(", ").filter(|a| !a.is_empty()) {
        let (name, ty) = a.split_once(": ").unwrap_or_else(|| panic!("bad arg {a:?}"));
        assert!(name.starts_with("%arg"));
        let t = parse_ty(ty);
        assert_eq!(t.dims.len(), 1, "arguments are 1-D buffers: {a}");
        assert!(vals.insert(name.to_string(), t).is_none(), "argument {name} twice");
    }
    let ret_ty = parse_ty(head.rsplit_once(") -> ").unwrap().1.trim_end_matches(" {"));
    assert_eq!(ret_ty.dims, vec![out_len], "result length\n{text}");

    let get = |vals: &HashMap<String, Ty>, name: &str, line: &str| -> Ty {
        vals.get(name).cloned().unwrap_or_else(|| panic!("{name} used before it is defined: {line}\n{text}"))
    };
    let mut i = 2;
    while i < lines.len() {
        let line = lines[i].trim();
        i += 1;
        if line == "}" {
            continue;
        }
        if let Some(rest) = line.strip_prefix("return ") {
            let (name, ty) = rest.split_once(" : ").unwrap();
            let t = get(&vals, name, line);
            assert_eq!(t, parse_ty(ty), "return type\n{text}");
            assert_eq!(t, ret_ty, "returned value vs function type\n{text}");
            continue;
        }
        let (name, rhs) = line.split_once(" = ").unwrap_or_else(|| panic!("not an assignment: {line:?}\n{text}"));
        assert!(name.starts_with("%v"), "{line}");
        // The result type: after `->`, else the last type after ` : ` (select lists two).
        let ty_of = |s: &str| {
            let t = s.rsplit_once("-> ").map_or_else(|| s.rsplit_once(" : ").unwrap().1, |x| x.1);
            parse_ty(t.rsplit_once(", ").map_or(t, |x| x.1))
        };
        let result: Ty;
        if rhs.starts_with("\"stablehlo.reduce\"") {
            // The region spans the next four lines.
            let region: Vec<&str> = lines[i..i + 4].iter().map(|l| l.trim()).collect();
            i += 4;
            assert!(region[0].starts_with("^bb0(%a: "), "{region:?}");
            assert!(region[1].starts_with("%r = stablehlo."), "{region:?}");
            assert!(region[2].starts_with("stablehlo.return %r"), "{region:?}");
            let tail = region[3];
            let ops: Vec<&str> = between(rhs, "(", ")").split(", ").collect();
            let x = get(&vals, ops[0], line);
            let init = get(&vals, ops[1], line);
            assert!(init.dims.is_empty() && init.elem == x.elem, "reduce init {init:?} for {x:?}\n{text}");
            let dims = ints(between(tail, "array<i64: ", ">"));
            result = ty_of(tail);
            let want: Vec<usize> = (0..x.dims.len()).filter(|d| !dims.contains(d)).map(|d| x.dims[d]).collect();
            assert!(dims.iter().all(|&d| d < x.dims.len()), "reduce dims {dims:?} of {x:?}\n{text}");
            assert_eq!(result.dims, want, "reduce result\n{text}");
            assert_eq!(result.elem, x.elem);
        } else {
            result = ty_of(rhs);
            let operands: Vec<String> = rhs
                .split(|c: char| c == ' ' || c == ',' || c == '(' || c == ')')
                .filter(|w| w.starts_with('%'))
                .map(str::to_string)
                .collect();
            let tys: Vec<Ty> = operands.iter().map(|o| get(&vals, o, line)).collect();
            let op = rhs.split_whitespace().next().unwrap();
            match op {
                "stablehlo.reshape" => {
                    assert_eq!(parse_ty(between(rhs, ": (", ") ->")), tys[0], "{line}");
                    assert_eq!(n(&tys[0]), n(&result), "reshape changes the element count: {line}\n{text}");
                    assert_eq!(tys[0].elem, result.elem);
                }
                "\"stablehlo.slice\"({}" | _ if op.starts_with("\"stablehlo.slice\"") => {
                    let s = ints(between(rhs, "start_indices = array<i64: ", ">"));
                    let l = ints(between(rhs, "limit_indices = array<i64: ", ">"));
                    assert!(s[0] <= l[0] && l[0] <= tys[0].dims[0], "slice out of bounds: {line}\n{text}");
                    assert_eq!(result.dims, vec![l[0] - s[0]], "{line}");
                }
                "stablehlo.transpose" => {
                    let perm = ints(between(rhs, "dims = [", "]"));
                    let mut sorted = perm.clone();
                    sorted.sort();
                    assert_eq!(sorted, (0..tys[0].dims.len()).collect::<Vec<_>>(), "not a permutation: {line}\n{text}");
                    let want: Vec<usize> = perm.iter().map(|&p| tys[0].dims[p]).collect();
                    assert_eq!(result.dims, want, "transpose result: {line}\n{text}");
                }
                "stablehlo.broadcast_in_dim" => {
                    let map = ints(between(rhs, "dims = [", "]"));
                    let x = &tys[0];
                    assert_eq!(map.len(), x.dims.len(), "{line}\n{text}");
                    for (k, &m) in map.iter().enumerate() {
                        assert!(m < result.dims.len() && (k == 0 || map[k - 1] < m), "{line}\n{text}");
                        assert!(x.dims[k] == 1 || x.dims[k] == result.dims[m], "broadcast of {:?} to {:?}: {line}\n{text}", x.dims, result.dims);
                    }
                }
                "stablehlo.convert" => assert_eq!(tys[0].dims, result.dims, "{line}"),
                "stablehlo.bitcast_convert" => {
                    assert_eq!(tys[0].dims, result.dims, "{line}");
                    let bits = |e: &str| e.trim_start_matches(|c: char| c.is_alphabetic()).to_string();
                    assert_eq!(bits(&tys[0].elem), bits(&result.elem), "a bitcast keeps the width: {line}");
                }
                "stablehlo.constant" => {
                    let lit = between(rhs, "dense<", ">");
                    let ok = lit.parse::<f64>().is_ok_and(|v| v.is_finite())
                        || lit.starts_with("0x") && u64::from_str_radix(&lit[2..], 16).is_ok();
                    assert!(ok, "bad literal {lit:?}: {line}\n{text}");
                }
                "stablehlo.compare" => {
                    assert_eq!(tys[0], tys[1], "{line}");
                    assert_eq!(result.dims, tys[0].dims);
                    assert_eq!(result.elem, "i1");
                }
                "stablehlo.select" => {
                    assert_eq!(tys[0].elem, "i1");
                    assert_eq!(tys[1], result);
                    assert_eq!(tys[2], result, "{line}");
                }
                "stablehlo.dot_general" => {
                    let (a, b) = (&tys[0], &tys[1]);
                    assert_eq!(a.elem, b.elem);
                    if a.dims.len() == 3 {
                        assert_eq!(b.dims.len(), 3);
                        assert_eq!(a.dims[0], b.dims[0], "batch: {line}\n{text}");
                        assert_eq!(a.dims[2], b.dims[1], "contracting: {line}\n{text}");
                        assert_eq!(result.dims, vec![a.dims[0], a.dims[1], b.dims[2]]);
                    } else {
                        assert_eq!((a.dims.len(), b.dims.len()), (2, 2), "{line}\n{text}");
                        assert_eq!(a.dims[1], b.dims[0], "contracting: {line}\n{text}");
                        assert_eq!(result.dims, vec![a.dims[0], b.dims[1]]);
                    }
                }
                _ => {
                    // Elementwise: `stablehlo.add %x, %y : tensor<..>`.
                    let name = op.strip_prefix("stablehlo.").unwrap_or_else(|| panic!("unknown op {op}\n{text}"));
                    assert!(
                        ["add", "subtract", "multiply", "divide", "maximum", "negate", "exponential", "abs", "and"].contains(&name),
                        "unknown op {op}\n{text}"
                    );
                    for t in &tys {
                        assert_eq!(t, &result, "{line}\n{text}");
                    }
                }
            }
        }
        assert!(vals.insert(name.to_string(), result).is_none(), "{name} defined twice\n{text}");
    }
}

fuzz_target!(|x: In| {
    let dtype = DTYPES[x.dtype as usize % DTYPES.len()];
    let op = match x.op % 5 {
        0 => Op::Cast(DTYPES[x.arg as usize % DTYPES.len()]),
        1 => Op::Binary(x.arg),
        2 => Op::Unary(x.arg),
        3 => Op::Reduce(x.arg, x.dim.map(|d| (d % 5) as usize)),
        _ => Op::Matmul,
    };
    let (a, b) = (x.a.view(), x.b.view());
    if let Some((text, len)) = program(op, &a, &b, dtype) {
        check(&text, len);
    }
});
