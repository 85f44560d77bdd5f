//! Every `ACCEL_*` environment variable, read and range-checked in one place (and the program
//! PATH finds for a name, [`on_path`]). A value that is
//! out of range, malformed or not UTF-8 is an error naming the variable, what it holds and what
//! it takes: never a panic (`ACCEL_PJRT_TIMEOUT=inf` once ended every command with "cannot
//! convert float seconds to Duration"), never a silent default.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// Every variable accel reads, with what it takes.
pub const KNOWN: &[(&str, &str)] = &[
    (
        "ACCEL_PJRT_TIMEOUT",
        "seconds one PJRT plugin may take to load, from 0.1 to 3600 (default 60)",
    ),
    (
        "ACCEL_PROBE_TIMEOUT",
        "seconds one backend's probe may take in its helper process, from 0.1 to 3600 (default 90)",
    ),
    (
        "ACCEL_HELPER_SITE_PACKAGES",
        "set by accel for its probe helpers (python3's site-packages, separated by ':')",
    ),
    (
        "ACCEL_PJRT_PLUGIN",
        "PJRT plugin files to load, separated by ':' or ','",
    ),
    (
        "ACCEL_CUDA_LIB_DIR",
        "folders searched first for CUDA libraries, separated by ':'",
    ),
    (
        "ACCEL_TRUSTED_DIRS",
        "folders accel may load native code from although another user or a group may write them (as git's safe.directory), separated by ':'",
    ),
    (
        "ACCEL_CUDA_MAJOR",
        "the CUDA major whose libraries to use: 12 or 13 (default: chosen from the driver and what is installed)",
    ),
    ("ACCEL_CACHE_DIR", "the folder for compiled kernels"),
    (
        "ACCEL_PYTHON",
        "the Python that `accel bench --compare torch|numpy` times PyTorch and numpy in (default: python3 on PATH)",
    ),
    (
        "ACCEL_RUNTIME_CACHE",
        "on or off (default on; any other value counts as off): keep what probing found (python3's site-packages, CPU-only Vulkan and XLA answers) in the runtime folder between runs",
    ),
    (
        "ACCEL_CPU_KERNEL",
        "the CPU matmul kernels: portable, avx2, avx512 or amx (bf16 on AMX tiles; at most what the CPU has)",
    ),
    (
        "ACCEL_WGPU_MATMUL",
        "the wgpu matmul kernel: auto, blocked, blocked128 or simple",
    ),
    (
        "ACCEL_TEST_REQUIRE",
        "backends and tools the tests must find, separated by ','",
    ),
    (
        "ACCEL_FUZZ_SECONDS",
        "seconds per fuzz target in scripts/fuzz.sh",
    ),
    (
        "ACCEL_CLI_RANDOM_SEED",
        "the seed of the random command-line test",
    ),
    (
        "ACCEL_CLI_RANDOM_CASES",
        "how many command lines the random command-line test runs",
    ),
];

/// A variable that holds something it cannot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvError {
    /// The variable.
    pub var: &'static str,
    /// What it holds (lossy where it is not UTF-8).
    pub value: String,
    /// What it takes.
    pub expected: String,
}

impl std::fmt::Display for EnvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}='{}' is not valid: it takes {}",
            self.var, self.value, self.expected
        )
    }
}

fn expected(var: &str) -> String {
    KNOWN
        .iter()
        .find(|(v, _)| *v == var)
        .map_or_else(|| "another value".to_string(), |(_, e)| e.to_string())
}

/// The raw value, `None` when unset or empty.
fn raw(var: &str) -> Option<OsString> {
    std::env::var_os(var).filter(|v| !v.is_empty())
}

/// The value as text; an error when it is not UTF-8.
pub fn text(var: &'static str) -> Result<Option<String>, EnvError> {
    match raw(var) {
        None => Ok(None),
        Some(v) => v.into_string().map(Some).map_err(|v| EnvError {
            var,
            value: v.to_string_lossy().into_owned(),
            expected: format!("{} (in UTF-8)", expected(var)),
        }),
    }
}

/// A number of seconds in `[min, max]`; `default` when unset.
pub fn seconds(var: &'static str, default: f64, min: f64, max: f64) -> Result<Duration, EnvError> {
    let Some(t) = text(var)? else {
        return Ok(Duration::from_secs_f64(default));
    };
    match t.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && (min..=max).contains(&s) => Ok(Duration::from_secs_f64(s)),
        _ => Err(EnvError {
            var,
            value: t,
            expected: expected(var),
        }),
    }
}

/// One of `allowed` (case-insensitive); `None` when unset.
pub fn choice(var: &'static str, allowed: &[&str]) -> Result<Option<String>, EnvError> {
    let Some(t) = text(var)? else { return Ok(None) };
    let v = t.trim().to_ascii_lowercase();
    if allowed.contains(&v.as_str()) {
        Ok(Some(v))
    } else {
        Err(EnvError {
            var,
            value: t,
            expected: expected(var),
        })
    }
}

/// Paths separated by any of `seps` (paths need not be UTF-8 on Unix).
pub fn paths(var: &'static str, seps: &[char]) -> Vec<PathBuf> {
    let Some(v) = raw(var) else { return Vec::new() };
    match v.into_string() {
        Ok(s) => s
            .split(|c| seps.contains(&c))
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .collect(),
        // Not UTF-8: one path, as given.
        Err(os) => vec![PathBuf::from(os)],
    }
}

/// One folder or file (need not be UTF-8).
pub fn path(var: &'static str) -> Option<PathBuf> {
    raw(var).map(PathBuf::from)
}

/// The first `name` on PATH, as the shell would run it, skipping relative entries (a `.` in
/// PATH would run whatever the current folder holds).
pub fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|d| d.is_absolute())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

static RUNTIME_DIR_REFUSED: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Notes why `prepare_environment` left `XDG_RUNTIME_DIR` unset.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
#[doc(hidden)]
pub fn refuse_runtime_dir(why: String) {
    let _ = RUNTIME_DIR_REFUSED.set(why);
}

/// Why `accelkit::prepare_environment` did not set `XDG_RUNTIME_DIR`, when it refused a folder.
pub fn runtime_dir_refused() -> Option<&'static str> {
    RUNTIME_DIR_REFUSED.get().map(String::as_str)
}

/// The CPU matmul kernel families `ACCEL_CPU_KERNEL` may name.
pub const CPU_KERNELS: [&str; 4] = ["portable", "avx2", "avx512", "amx"];

/// Every problem with the `ACCEL_*` variables set now: values out of range, and names accel
/// does not know (a typo such as `ACCEL_PJRT_TIMOUT` would otherwise be ignored silently).
pub fn problems() -> Vec<String> {
    let mut out = Vec::new();
    if let Err(e) = choice("ACCEL_CPU_KERNEL", &CPU_KERNELS) {
        out.push(e.to_string());
    }
    if let Err(e) = seconds("ACCEL_PJRT_TIMEOUT", 60.0, 0.1, 3600.0) {
        out.push(e.to_string());
    }
    if let Err(e) = choice("ACCEL_CUDA_MAJOR", &["12", "13"]) {
        out.push(e.to_string());
    }
    if let Err(e) = choice("ACCEL_RUNTIME_CACHE", &["on", "off"]) {
        out.push(e.to_string());
    }
    if let Err(e) = choice(
        "ACCEL_WGPU_MATMUL",
        &["auto", "blocked", "blocked128", "simple"],
    ) {
        out.push(e.to_string());
    }
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("ACCEL_") && !KNOWN.iter().any(|(v, _)| *v == k) {
            out.push(format!(
                "{k} is set, but accel reads no such variable (it knows {})",
                KNOWN.iter().map(|(v, _)| *v).collect::<Vec<_>>().join(", ")
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // The process environment is shared by the test threads: each test uses its own names
    // through the parsing helpers below instead of setting ACCEL_* variables.
    fn parse_seconds(v: &str) -> Result<Duration, EnvError> {
        match v.trim().parse::<f64>() {
            Ok(s) if s.is_finite() && (0.1..=3600.0).contains(&s) => Ok(Duration::from_secs_f64(s)),
            _ => Err(EnvError {
                var: "ACCEL_PJRT_TIMEOUT",
                value: v.to_string(),
                expected: expected("ACCEL_PJRT_TIMEOUT"),
            }),
        }
    }

    #[test]
    fn seconds_are_range_checked() {
        for bad in ["inf", "1e20", "-1", "nan", "0", "abc", "3601"] {
            let e = parse_seconds(bad).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("ACCEL_PJRT_TIMEOUT='{bad}' is not valid: it takes seconds one PJRT plugin may take to load, from 0.1 to 3600 (default 60)")
            );
        }
        assert_eq!(parse_seconds("2.5").unwrap(), Duration::from_millis(2500));
    }
}
