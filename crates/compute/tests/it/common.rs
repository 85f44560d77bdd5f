//! Shared test support: the devices every test runs on.
#![allow(dead_code)]

use accelkit::{Availability, Device};

/// The usable devices of one backend (`cpu`, `cuda`, `mps`, `xla`, `wgpu`). When there are
/// none, prints `skipped: <backend>: <reason> (<test>)` and returns none, or fails when
/// `ACCEL_TEST_REQUIRE` names the backend.
pub fn devices_of(backend: &str, test: &str) -> Vec<Device> {
    let probe = accelkit::devices()
        .into_iter()
        .find(|p| p.backend == backend)
        .unwrap_or_else(|| panic!("no backend is called {backend}"));
    match &probe.availability {
        // XLA's CPU plugin offers several devices of one CPU: two of them show that programs
        // run on a chosen device, more would only repeat the work.
        Availability::Available { devices } if backend == "xla" => {
            devices.iter().take(2).map(|d| d.device).collect()
        }
        Availability::Available { devices } => devices.iter().map(|d| d.device).collect(),
        Availability::Unavailable { reason, .. } => {
            accelkit_testkit::skip(backend, reason, test);
            Vec::new()
        }
    }
}

/// Every usable device: the CPU, then each accelerator that is available (unavailable ones
/// are reported once per test binary as `skipped:`, or fail when required).
pub fn devices() -> Vec<Device> {
    let mut out = Vec::new();
    for b in ["cpu", "cuda", "mps", "xla", "wgpu"] {
        out.extend(devices_of(b, "every device"));
    }
    out
}

/// Serialises the tests that allocate tensors (every module of `tests/it` runs in one process,
/// and device counters are global),
/// so a test can only check that it returned every byte while no other test allocates.
pub fn lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `body` on every usable device of `backend` (or says why it is skipped), then checks
/// that the test gave back every byte it allocated on that device.
pub fn run_on(backend: &str, test: &str, body: impl Fn(&Device) -> accelkit::Result<()>) {
    let _serial = lock();
    for d in devices_of(backend, test) {
        let before = accelkit::memory::stats(&d).allocated_bytes;
        if let Err(e) = body(&d) {
            panic!("{test} on {d}: {e}");
        }
        assert_returns_memory(&d, before, test);
    }
}

/// Asserts that `d`'s allocated bytes are back at `before` (every tensor made since is gone).
pub fn assert_returns_memory(d: &Device, before: u64, what: &str) {
    let after = accelkit::memory::stats(d).allocated_bytes;
    assert_eq!(
        after, before,
        "{what} on {d}: {} bytes allocated before, {} after: a tensor's memory was not returned",
        before, after
    );
}

/// Prints that part of a test cannot run on `d` (for example a dtype it does not hold).
pub fn skip_part(d: &Device, what: &str) {
    println!("skipped: {}: {what} on {d}", d.kind());
}

/// The widest integer dtype `d` holds (i64, or i32 on wgpu).
pub fn int_dtype(d: &Device) -> accelkit::DType {
    if d.supports(accelkit::DType::I64) {
        accelkit::DType::I64
    } else {
        accelkit::DType::I32
    }
}

/// Defines a test per backend, `NAME::cpu`, `NAME::cuda`, `NAME::mps`, `NAME::xla` and
/// `NAME::wgpu`, each running `body(&device)` on that backend's usable devices, so each
/// passes, fails or prints `skipped:` on its own, and `cargo test wgpu` selects one backend.
#[macro_export]
macro_rules! device_test {
    ($name:ident, $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            fn body(d: &accelkit::Device) -> accelkit::Result<()> {
                ($body)(d)
            }
            #[test]
            fn cpu() {
                common::run_on("cpu", stringify!($name), body)
            }
            #[test]
            fn cuda() {
                common::run_on("cuda", stringify!($name), body)
            }
            #[test]
            fn mps() {
                common::run_on("mps", stringify!($name), body)
            }
            #[test]
            fn xla() {
                common::run_on("xla", stringify!($name), body)
            }
            #[test]
            fn wgpu() {
                common::run_on("wgpu", stringify!($name), body)
            }
        }
    };
}

/// Asserts two float slices agree within `tol` relative to max(1, |expected|).
pub fn assert_close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || (g - w).abs() <= tol * w.abs().max(1.0);
        assert!(ok, "{what}: element {i} is {g}, expected {w} (tol {tol})");
    }
}

/// A batched matrix product by the textbook triple loop in f64: the independent reference for
/// every backend's matmul. `a` is `batch x m x k`; `b` is `k x n`, or `batch x k x n` when
/// `b_batched`.
#[allow(dead_code)]
pub fn naive_matmul(
    a: &[f64],
    b: &[f64],
    (batch, m, k, n): (usize, usize, usize, usize),
    b_batched: bool,
) -> Vec<f64> {
    let mut c = vec![0.0; batch * m * n];
    for z in 0..batch {
        let bo = if b_batched { z * k * n } else { 0 };
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0;
                for p in 0..k {
                    s += a[z * m * k + i * k + p] * b[bo + p * n + j];
                }
                c[z * m * n + i * n + j] = s;
            }
        }
    }
    c
}

/// Deterministic pseudo-random values in [-4, 4), for references that do not depend on
/// accel's own generator.
pub fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 8.0 - 4.0
        })
        .collect()
}

/// Rounds values the way storing them in `dtype` does (IEEE 754 round to nearest, ties to
/// even; integers toward zero), so references start from the same inputs as the tensor.
/// Written here from the formats' definitions, not with accel's or `half`'s conversions.
pub fn round_to(v: &[f64], dtype: accelkit::DType) -> Vec<f64> {
    use accelkit::DType::*;
    v.iter()
        .map(|&x| match dtype {
            // 11 significant bits, exponents down to -14, largest finite 65504.
            F16 => round_binary(x, 11, -14, 65504.0),
            // 8 significant bits, f32's exponent range.
            BF16 => round_binary(x, 8, -126, 3.389_531_389_251_535_5e38),
            F32 => x as f32 as f64,
            F64 => x,
            I32 | I64 => x.trunc(),
        })
        .collect()
}

/// `x` rounded to nearest even in a binary format with `p` significant bits, smallest normal
/// exponent `emin` (subnormals below it) and largest finite value `max`.
pub fn round_binary(x: f64, p: i32, emin: i32, max: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    // The exponent of x, from its bits (exact, unlike log2), for normal f64 values.
    let e = ((x.to_bits() >> 52) & 0x7ff) as i32 - 1023;
    let ulp = 2f64.powi(e.max(emin) - (p - 1));
    // x / ulp is exact (a power of two); its integer part has at most p + 1 bits.
    let r = (x / ulp).round_ties_even() * ulp;
    // Past the largest finite value by half an ulp or more, rounding gives infinity.
    if r.abs() > max {
        f64::INFINITY.copysign(x)
    } else {
        r
    }
}

/// Relative tolerance of one rounding in `dtype`.
pub fn tol(dtype: accelkit::DType) -> f64 {
    use accelkit::DType::*;
    match dtype {
        F16 => 2e-3,
        BF16 => 1.6e-2,
        F32 => 1e-5,
        F64 => 1e-12,
        I32 | I64 => 0.0,
    }
}
