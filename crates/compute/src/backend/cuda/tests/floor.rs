//! The driver floor: every CUDA driver-API function accel calls exists in CUDA 12.0's driver
//! API (R525), checked against the `cuda.h` of CUDA 12.0 itself (from NVIDIA's
//! `nvidia-cuda-runtime-cu12==12.0.107` wheel, which the test command installs), with the
//! header's renames (`#define cuMemAlloc cuMemAlloc_v2`) taken into account. cudarc binds
//! CUDA 13.0's header but resolves each symbol on its first call, so a newer function would
//! only fail on an old driver, at run time, with a panic: this test finds it here instead.
//! Functions newer than 12.0 are allowed only when `libs::GUARDED_DRIVER_SYMBOLS` lists them
//! (each used behind a check that the driver has it, with a fallback).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::backend::native::libs;

/// The exported function names a `cuda.h` declares: every `CUresult CUDAAPI name(`, and for
/// each name the header renames (`#define cuMemAlloc cuMemAlloc_v2`, or through its
/// per-thread-stream wrappers `__CUDA_API_PTDS(...)`/`__CUDA_API_PTSZ(...)`), the new name.
fn header_symbols(header: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut renames = std::collections::HashMap::new();
    for line in header.lines() {
        let Some(rest) = line.trim_start().strip_prefix("#define ") else {
            continue;
        };
        let mut parts = rest.split_whitespace();
        let (Some(from), Some(to)) = (parts.next(), parts.next()) else {
            continue;
        };
        if !from.starts_with("cu") {
            continue;
        }
        let to = to
            .strip_prefix("__CUDA_API_PTDS(")
            .or_else(|| to.strip_prefix("__CUDA_API_PTSZ("))
            .unwrap_or(to);
        let to = ident(to);
        if to.starts_with("cu") {
            renames.insert(from.to_string(), to);
        }
    }
    let mut out = BTreeSet::new();
    for piece in header.split("CUDAAPI").skip(1) {
        let name = ident(piece.trim_start());
        if name.starts_with("cu")
            && piece.trim_start()[name.len()..]
                .trim_start()
                .starts_with('(')
        {
            if let Some(to) = renames.get(&name) {
                out.insert(to.clone());
            }
            out.insert(name);
        }
    }
    out
}

/// Every driver function the given Rust source calls through cudarc's `sys` module
/// (`sys::cuMemAllocAsync(`), with the file it is in.
fn driver_calls(files: &[(PathBuf, String)]) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (path, src) in files {
        for piece in src.split("sys::").skip(1) {
            let name: String = piece
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let driver =
                name.starts_with("cu") && name[2..].starts_with(|c: char| c.is_ascii_uppercase());
            if driver && piece[name.len()..].trim_start().starts_with('(') {
                out.insert((name, path.display().to_string()));
            }
        }
    }
    out
}

/// The calls that `symbols` lacks and that are not guarded.
fn beyond_floor(
    calls: &BTreeSet<(String, String)>,
    symbols: &BTreeSet<String>,
) -> Vec<(String, String)> {
    calls
        .iter()
        .filter(|(n, _)| {
            !symbols.contains(n) && !libs::GUARDED_DRIVER_SYMBOLS.contains(&n.as_str())
        })
        .cloned()
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push((p.clone(), std::fs::read_to_string(&p).unwrap()));
        }
    }
}

/// CUDA 12.0's `cuda.h`, where the test command put it.
fn cuda_12_0_header() -> Option<String> {
    let venv = std::env::var_os("VIRTUAL_ENV")?;
    let p = Path::new(&venv).join("cuda120/nvidia/cuda_runtime/include/cuda.h");
    let text = std::fs::read_to_string(p).ok()?;
    text.contains("#define CUDA_VERSION 12000").then_some(text)
}

#[test]
fn cuda_every_driver_function_accel_calls_is_in_cuda_12_0() {
    let Some(header) = cuda_12_0_header() else {
        assert!(
            !accelkit_testkit::is_required("cuda_h"),
            "ACCEL_TEST_REQUIRE names cuda_h, but CUDA 12.0's cuda.h is not in $VIRTUAL_ENV/cuda120"
        );
        println!("skipped: cuda_h: CUDA 12.0's cuda.h not installed (scripts/test.sh installs it)");
        return;
    };
    let symbols = header_symbols(&header);
    // The header's own facts, so the parser cannot pass by reading nothing.
    assert!(symbols.len() > 400, "{}", symbols.len());
    for s in [
        "cuMemAlloc_v2",
        "cuMemAllocAsync",
        "cuDevicePrimaryCtxRetain",
        "cuEventElapsedTime",
    ] {
        assert!(symbols.contains(s), "{s}");
    }
    for s in ["cuCtxCreate_v4", "cuEventElapsedTime_v2"] {
        assert!(!symbols.contains(s), "{s} is newer than 12.0");
    }
    let mut files = Vec::new();
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    // The code, not these tests (which name the functions and cudarc's layers they look for).
    files.retain(|(p, _)| !p.components().any(|c| c.as_os_str() == "tests"));
    let calls = driver_calls(&files);
    assert!(calls.len() > 25, "found only {calls:?}");
    let beyond = beyond_floor(&calls, &symbols);
    assert!(
        beyond.is_empty(),
        "driver functions newer than CUDA 12.0 called without a guard: {beyond:?}"
    );
    // A guard is for a function the floor lacks, and each guarded one is really called.
    for g in libs::GUARDED_DRIVER_SYMBOLS {
        assert!(!symbols.contains(*g), "{g} is in 12.0: it needs no guard");
        assert!(
            calls.iter().any(|(n, _)| n == g),
            "{g} is guarded but never called"
        );
    }
    // The check fails when a 12.5+ function is added to the calls.
    let mut more = calls.clone();
    more.insert(("cuCtxCreate_v4".to_string(), "added.rs".to_string()));
    assert_eq!(
        beyond_floor(&more, &symbols),
        [("cuCtxCreate_v4".to_string(), "added.rs".to_string())]
    );
    // No calls through cudarc's safe driver layer, which would call functions this scan
    // cannot see.
    for (p, src) in &files {
        assert!(
            !src.contains("driver::result::") && !src.contains("driver::safe::"),
            "{}",
            p.display()
        );
    }
}

#[test]
fn the_header_parser_follows_renames() {
    let h = "#define cuMemAlloc cuMemAlloc_v2\n\
             #define cuMemcpyHtoDAsync __CUDA_API_PTSZ(cuMemcpyHtoDAsync_v2)\n\
             CUresult CUDAAPI cuMemAlloc(CUdeviceptr *dptr, size_t bytesize);\n\
             CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr d, const void *s, size_t n, CUstream h);\n\
             CUresult CUDAAPI cuInit(unsigned int Flags);\n";
    let s = header_symbols(h);
    let want: BTreeSet<String> = [
        "cuInit",
        "cuMemAlloc",
        "cuMemAlloc_v2",
        "cuMemcpyHtoDAsync",
        "cuMemcpyHtoDAsync_v2",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(s, want);
    let calls = driver_calls(&[(
        PathBuf::from("x.rs"),
        "unsafe { sys::cuInit(0); sys::CUresult::CUDA_SUCCESS; sys::cuMemAlloc_v2 (p, n); cudarc::cublas::sys::cublasCreate_v2(h) }".to_string(),
    )]);
    let names: Vec<&str> = calls.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["cuInit", "cuMemAlloc_v2"]);
}
