//! `accel` with no command (what `cargo run --release` runs): the seeds' walkthrough, on the
//! accelerators this machine can stand in with (lavapipe's Vulkan through wgpu, XLA's CPU
//! plugin), its result checked against the CPU's for the same operands.

use std::process::{Command, Output};

fn accel(args: &[&str]) -> Output {
    // Without a runtime folder, as in a bare container: Vulkan's window-system code would
    // complain about it on stderr; the command keeps such library messages out.
    Command::new(env!("CARGO_BIN_EXE_accel"))
        .args(args)
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .expect("the accel binary runs")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Why `backend` has no device here (from `accel devices --json`), or None when it has one.
fn unavailable(backend: &str) -> Option<String> {
    let o = accel(&["devices", "--json"]);
    assert!(o.status.success(), "{}", text(&o).1);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("devices --json is JSON");
    let b = v["backends"]
        .as_array()
        .expect("a list of backends")
        .iter()
        .find(|b| b["backend"] == backend)
        .expect("every backend is listed");
    match b["status"].as_str() {
        Some("available") => None,
        _ => Some(
            b["reason"]
                .as_str()
                .unwrap_or("no reason given")
                .to_string(),
        ),
    }
}

/// The walkthrough on `device` at N=256: it runs, names the device as chosen, times it beside
/// the CPU, and the two results of the same operands agree (f32: 256 products per entry, so
/// a relative difference far below 1e-4; different operands would differ by about 1).
fn walkthrough_on(backend: &str, device: &str, test: &str) {
    if let Some(why) = unavailable(backend) {
        accelkit_testkit::skip(backend, &why, test);
        return;
    }
    let o = accel(&["--device", device, "--size", "256"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "accel --device {device}: {err}\n{out}");
    assert!(
        out.contains(&format!("chosen: {device}  (--device)")),
        "{out}"
    );
    assert!(out.contains("2. Matmul 256x256 f32"), "{out}");
    assert!(out.contains("3. Memory"), "{out}");
    let line = out
        .lines()
        .find(|l| l.contains("max relative difference of the two results"))
        .unwrap_or_else(|| panic!("no comparison line:\n{out}"));
    assert!(line.contains(&format!("speedup {device} vs cpu")), "{line}");
    let diff: f64 = line
        .rsplit(": ")
        .next()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no number at the end of: {line}"));
    assert!(
        diff.is_finite() && diff < 1e-4,
        "{device} and the CPU disagree on the same product: {line}"
    );
    for noise in ["XDG_RUNTIME_DIR", "MESA", "WARNING: lavapipe"] {
        assert!(
            !out.contains(noise) && !err.contains(noise),
            "a library's message reached the output ({noise}):\n{out}\n{err}"
        );
    }
}

#[test]
fn the_walkthrough_on_wgpu_matches_the_cpu_for_the_same_operands() {
    walkthrough_on(
        "wgpu",
        "wgpu:0",
        "the_walkthrough_on_wgpu_matches_the_cpu_for_the_same_operands",
    );
}

#[test]
fn the_walkthrough_on_xla_matches_the_cpu_for_the_same_operands() {
    walkthrough_on(
        "xla",
        "xla:0",
        "the_walkthrough_on_xla_matches_the_cpu_for_the_same_operands",
    );
}

#[test]
fn the_walkthrough_on_the_cpu_alone_says_there_is_nothing_to_compare() {
    let o = accel(&["--device", "cpu", "--size", "64"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}\n{out}");
    assert!(out.contains("chosen: cpu  (--device)"), "{out}");
    assert!(
        out.contains("there is no second device to compare with"),
        "{out}"
    );
    assert!(!out.contains("speedup"), "{out}");
}

#[test]
fn a_device_the_walkthrough_cannot_use_is_one_clear_error() {
    // Unknown names and bad sizes are usage errors (exit 2); a device this machine lacks is
    // a runtime error naming what exists (exit 1); neither shows a panic.
    for (args, code, words) in [
        (&["--device", "tpu:0"][..], 2, "--device"),
        (&["--size", "0"][..], 2, "--size"),
        (&["--device", "cuda:7"][..], 1, "cuda:7"),
        (
            &["--device", "wgpu:0", "devices"][..],
            2,
            "cannot be used with",
        ),
    ] {
        let o = accel(args);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(code), "accel {args:?}: {err}\n{out}");
        assert!(err.contains(words), "accel {args:?}: {err}");
        assert!(
            !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
            "{err}"
        );
    }
}

#[test]
fn bench_matmul_on_the_stand_in_accelerators_agrees_with_an_f64_reference() {
    let test = "bench_matmul_on_the_stand_in_accelerators_agrees_with_an_f64_reference";
    for (backend, device) in [("wgpu", "wgpu:0"), ("xla", "xla:0")] {
        if let Some(why) = unavailable(backend) {
            accelkit_testkit::skip(backend, &why, test);
            continue;
        }
        let o = accel(&[
            "bench", "matmul", "--device", device, "--size", "128", "--warmup", "1", "--iters",
            "3", "--json",
        ]);
        let (out, err) = text(&o);
        assert!(o.status.success(), "bench on {device}: {err}\n{out}");
        let v: serde_json::Value = serde_json::from_str(&out).expect("bench --json is JSON");
        let r = &v["results"][0];
        assert_eq!(r["device"], device, "{out}");
        let e = r["max_rel_error"].as_f64().expect("a max_rel_error");
        assert!(
            e < 1e-4,
            "{device}: max_rel_error {e} against the f64 reference"
        );
        assert!(!err.contains("XDG_RUNTIME_DIR"), "{err}");
    }
}
