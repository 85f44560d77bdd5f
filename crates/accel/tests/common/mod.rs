//! Shared test support: the devices every test runs on.
#![allow(dead_code)]

use accel::{Availability, Device};

/// Every usable device: the CPU, then each accelerator that is available. A backend that is
/// not available is reported as `skipped: <reason>`; when `ACCEL_TEST_REQUIRE` names it
/// (e.g. `ACCEL_TEST_REQUIRE=cuda,xla`), that is a failure instead.
pub fn devices() -> Vec<Device> {
    let required: Vec<String> = std::env::var("ACCEL_TEST_REQUIRE")
        .unwrap_or_default()
        .split(',')
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .collect();
    let mut out = vec![Device::Cpu];
    let mut skipped = Vec::new();
    for p in accel::devices() {
        if p.backend == "cpu" {
            continue;
        }
        match &p.availability {
            // XLA's CPU plugin offers several devices of one CPU: two of them show that
            // programs run on a chosen device, more would only repeat the work.
            Availability::Available { devices } if p.backend == "xla" => {
                out.extend(devices.iter().take(2).map(|d| d.device))
            }
            Availability::Available { devices } => out.extend(devices.iter().map(|d| d.device)),
            Availability::Unavailable { reason, .. } => {
                assert!(
                    !required.iter().any(|r| r == p.backend),
                    "ACCEL_TEST_REQUIRE names {} but it is unavailable: {reason}",
                    p.backend
                );
                skipped.push(format!("skipped: {}: {reason}", p.backend));
            }
        }
    }
    // Said once per test binary, by whichever test asks first.
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| skipped.iter().for_each(|s| println!("{s}")));
    out
}

/// Whether `d` holds every dtype (wgpu and mps hold f32 only in this version).
pub fn every_dtype(d: &Device) -> bool {
    accel::DType::ALL.iter().all(|&t| d.supports(t))
}

/// Defines a test that runs `body(&device)` on every usable device.
#[macro_export]
macro_rules! device_test {
    ($name:ident, $body:expr) => {
        #[test]
        fn $name() {
            for d in common::devices() {
                let r: accel::Result<()> = $body(&d);
                if let Err(e) = r {
                    panic!("on {d}: {e}");
                }
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

/// Rounds values the way storing them in `dtype` does, so references start from the same
/// inputs as the tensor.
pub fn round_to(v: &[f64], dtype: accel::DType) -> Vec<f64> {
    use accel::DType::*;
    v.iter()
        .map(|&x| match dtype {
            F16 => accel::f16::from_f64(x).to_f64(),
            BF16 => accel::bf16::from_f64(x).to_f64(),
            F32 => x as f32 as f64,
            F64 => x,
            I32 | I64 => x.trunc(),
        })
        .collect()
}

/// Relative tolerance of one rounding in `dtype`.
pub fn tol(dtype: accel::DType) -> f64 {
    use accel::DType::*;
    match dtype {
        F16 => 2e-3,
        BF16 => 1.6e-2,
        F32 => 1e-5,
        F64 => 1e-12,
        I32 | I64 => 0.0,
    }
}
