//! What the integration tests of every accelkit crate share: which missing parts are failures
//! (`ACCEL_TEST_REQUIRE`) and the line a test prints when it cannot run here
//! (`skipped: <what>: <reason>`), which `scripts/test_counts.py` counts.
//!
//! A test that lacks hardware or a tool calls [`skip`]: it prints the skip line and returns,
//! or fails when the test command requires that part. Names are checked against [`KNOWN`], so a
//! typo in `ACCEL_TEST_REQUIRE` fails every test that asks instead of requiring nothing.
//! A test that expects what this machine has (its NVIDIA GPUs) asks [`nvidia_gpus`].

/// The names `ACCEL_TEST_REQUIRE` accepts: the backends (`cpu`, `cuda`, `mps`, `xla`, `wgpu`);
/// CUDA's pieces that work without a GPU (`nvrtc`, the compiler; `cuobjdump`, NVIDIA's reader
/// of each CUBIN's target; `cuda_h`, CUDA 12.0's `cuda.h`, the driver floor; `cuda12`, the CUDA
/// 12 wheels in `$VIRTUAL_ENV/cu12`); `avx512` (the CPU kernels' AVX-512 paths), `avx512bf16`
/// (their bf16 pair dot products, AVX512_BF16); the tools the
/// command's tests drive (`prometheus` for `accel serve`, `tmux` for `accel monitor`, `grpc` for
/// the TPU metrics service, `chromium` for the notebook photograph, `standin` for the C compiler
/// that builds the doctor corpus's stand-in driver, `cgroup` for a CPU quota group, `examples` for
/// the seeds' examples as `cargo test --all-targets` builds them, `numpy` and `torch` for
/// `accel bench --compare`'s peers in the test environment's Python, `amx` for the bf16 kernel on
/// AMX's tiles).
pub const KNOWN: [&str; 22] = [
    "cpu",
    "cuda",
    "nvrtc",
    "cuobjdump",
    "cuda_h",
    "cuda12",
    "mps",
    "xla",
    "wgpu",
    "prometheus",
    "tmux",
    "grpc",
    "avx512",
    "avx512bf16",
    "avx2",
    "chromium",
    "standin",
    "cgroup",
    "examples",
    "numpy",
    "torch",
    "amx",
];

/// The names in `ACCEL_TEST_REQUIRE` (comma-separated, any case). Panics on a name that is not
/// in [`KNOWN`].
pub fn required() -> Vec<String> {
    let names: Vec<String> = std::env::var("ACCEL_TEST_REQUIRE")
        .unwrap_or_default()
        .split(',')
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .collect();
    for n in &names {
        assert!(
            KNOWN.contains(&n.as_str()),
            "ACCEL_TEST_REQUIRE names '{n}', which is not one of {}",
            KNOWN.join(", ")
        );
    }
    names
}

/// Whether `ACCEL_TEST_REQUIRE` names `what` (which must be in [`KNOWN`]).
pub fn is_required(what: &str) -> bool {
    assert!(KNOWN.contains(&what), "'{what}' is not a known requirement");
    required().iter().any(|r| r == what)
}

/// A test that cannot run here because `what` is missing: fails when `ACCEL_TEST_REQUIRE`
/// names `what`, else prints `skipped: <what>: <reason> (<test>)` for the count of skips.
pub fn skip(what: &str, reason: &str, test: &str) {
    assert!(
        !is_required(what),
        "ACCEL_TEST_REQUIRE names {what}, but {reason} ({test})"
    );
    println!("skipped: {what}: {reason} ({test})");
}

/// The PCI addresses (`0000:3b:00.0`, sorted) of this machine's NVIDIA GPUs, which NVML (and
/// so `accel monitor`, `mem`, `serve` and `pick`) shows: the kernel driver's list
/// (`/proc/driver/nvidia/gpus/<address>`), else `nvidia-smi`'s where that folder is hidden.
/// Empty on a machine without an NVIDIA driver. A test that expects no accelerator on the
/// machine it runs on expects these rows instead.
pub fn nvidia_gpus() -> Vec<String> {
    let mut v: Vec<String> = match std::fs::read_dir("/proc/driver/nvidia/gpus") {
        Ok(d) => d
            .flatten()
            .map(|e| e.file_name().to_string_lossy().to_ascii_lowercase())
            .collect(),
        Err(_) => std::process::Command::new("nvidia-smi")
            .args(["--query-gpu=pci.bus_id", "--format=csv,noheader"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| {
                // `00000000:3B:00.0`: the domain in 8 digits, upper case.
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .filter_map(|l| {
                        let l = l.trim().to_ascii_lowercase();
                        let (domain, rest) = l.split_once(':')?;
                        let d = u32::from_str_radix(domain, 16).ok()?;
                        Some(format!("{d:04x}:{rest}"))
                    })
                    .collect()
            })
            .unwrap_or_default(),
    };
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_known_name_is_lower_case_and_distinct() {
        let mut k: Vec<&str> = super::KNOWN.to_vec();
        assert!(k.iter().all(|n| *n == n.to_ascii_lowercase()));
        k.sort();
        k.dedup();
        assert_eq!(k.len(), super::KNOWN.len());
    }
}
