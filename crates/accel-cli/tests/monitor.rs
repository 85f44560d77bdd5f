//! `accel monitor` for real: the JSON and plain-text streams through a pipe.

use std::process::{Command, Output};

fn accel(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_accel"))
        .args(args)
        .output()
        .expect("the accel binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Whether `ACCEL_TEST_REQUIRE` names `what` (the test command sets `nvrtc,xla,wgpu`).
fn required(what: &str) -> bool {
    std::env::var("ACCEL_TEST_REQUIRE").is_ok_and(|v| v.split(',').any(|n| n.trim() == what))
}

#[test]
fn monitor_json_streams_one_document_per_sample() {
    let o = accel(&["monitor", "--json", "--count", "2", "--interval", "0.2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!o.stdout.contains(&0x1b), "escape codes in JSON");
    let lines: Vec<String> = stdout(&o).lines().map(String::from).collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    let mut times = Vec::new();
    for l in &lines {
        let v: serde_json::Value =
            serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
        assert_eq!(v["schema_version"], 1);
        assert_eq!(v["kind"], "monitor");
        assert!(v["host"]["memory"]["total_bytes"].as_u64().unwrap() > 0);
        assert!(!v["host"]["cpu_per_core_percent"]
            .as_array()
            .unwrap()
            .is_empty());
        let devices = v["devices"].as_array().expect("a devices array");
        for backend in ["xla", "wgpu"] {
            if required(backend) {
                assert!(
                    devices.iter().any(|d| d["backend"] == backend),
                    "no {backend} device in {l}"
                );
            }
        }
        times.push(v["time_unix_s"].as_f64().unwrap());
    }
    assert!(times[1] > times[0], "{times:?}");
}

#[test]
fn monitor_usage_errors_exit_2() {
    for args in [
        &["monitor", "--count", "0"][..],
        &["monitor", "--interval", "0"],
        &["monitor", "--interval", "nan"],
        &["monitor", "--interval", "inf"],
        &["monitor", "--interval", "-1"],
        &["monitor", "--interval", "1e20"],
        &["monitor", "--json", "--count", "0"],
    ] {
        let o = accel(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.starts_with("error: "), "{args:?}: {e}");
        assert!(
            !e.contains("panicked") && !e.contains("RUST_BACKTRACE"),
            "{e}"
        );
        assert!(o.stdout.is_empty(), "{args:?}: {}", stdout(&o));
    }
}

#[test]
fn monitor_through_a_pipe_prints_plain_lines() {
    let o = accel(&["monitor", "--count", "1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        !o.stdout.contains(&0x1b),
        "escape codes in {:?}",
        stdout(&o)
    );
    assert!(
        !o.stderr.contains(&0x1b),
        "escape codes in {:?}",
        stderr(&o)
    );
    let s = stdout(&o);
    assert!(s.starts_with("--- t = 0.0 s, "), "{s}");
    assert!(s.contains("\nhost CPU:  "), "{s}");
    assert!(s.contains("\nhost RAM:  "), "{s}");
    if required("xla") {
        assert!(s.contains("\nxla:0 ("), "{s}");
    }
    let o = accel(&["monitor", "--count", "2", "--interval", "0.2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).matches("--- t = ").count(), 2, "{}", stdout(&o));
}
