//! The seeds' examples (`crates/compute/examples`), run as the test command built them: the
//! matmul timing on each stand-in accelerator this machine has (lavapipe's Vulkan as
//! `wgpu:0`, XLA's CPU plugin as `xla:0`) with its result against the CPU's, and every other
//! example on the device it picks.

use std::path::PathBuf;
use std::process::Command;

use accelkit::Device;

/// The built example `name`: `cargo build --release --examples` (the test command runs it
/// after the test build) leaves it in `examples/` beside `deps/`. (`cargo test --all-targets`
/// alone builds each example as a test harness, which does not run its `main`.)
fn example(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let path = exe.parent()?.parent()?.join("examples").join(name);
    path.is_file().then_some(path)
}

fn run(exe: &PathBuf, args: &[&str]) -> (bool, String, String) {
    let o = Command::new(exe)
        .args(args)
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .expect("the example runs");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

const NOT_BUILT: &str =
    "the examples are not built (cargo test --all-targets builds them; the test command does)";

#[test]
fn the_seeds_matmul_example_agrees_with_the_cpu_on_each_stand_in_accelerator() {
    let test = "the_seeds_matmul_example_agrees_with_the_cpu_on_each_stand_in_accelerator";
    let Some(exe) = example("matmul_timing") else {
        accelkit_testkit::skip("examples", NOT_BUILT, test);
        return;
    };
    for (backend, device) in [("wgpu", Device::Wgpu(0)), ("xla", Device::Xla(0))] {
        if let Err(e) = device.check() {
            accelkit_testkit::skip(backend, &e.to_string(), test);
            continue;
        }
        let name = device.to_string();
        let (ok, out, err) = run(&exe, &["256", &name]);
        assert!(ok, "matmul_timing 256 {name}: {err}\n{out}");
        assert!(out.contains("CPU average: "), "{out}");
        assert!(out.contains(&format!("{name} average: ")), "{out}");
        let diff: f64 = out
            .lines()
            .find_map(|l| l.strip_prefix("max relative difference of the two results: "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no difference line:\n{out}"));
        assert!(
            diff < 1e-4,
            "{name} and the CPU disagree on one product: {diff}"
        );
        assert!(
            !err.contains("XDG_RUNTIME_DIR") && !out.contains("XDG_RUNTIME_DIR"),
            "a library's message reached the output:\n{err}"
        );
    }
    // A device that is not there: an error naming it, not a panic.
    let (ok, _, err) = run(&exe, &["8", "cuda:9"]);
    assert!(
        !ok && err.contains("cuda:9") && !err.contains("panicked"),
        "{err}"
    );
}

#[test]
fn every_other_seed_example_runs_on_the_device_it_picks() {
    let test = "every_other_seed_example_runs_on_the_device_it_picks";
    for name in [
        "device_check",
        "device_mismatch",
        "memory_check",
        "move_linear",
        "move_tensors",
    ] {
        let Some(exe) = example(name) else {
            accelkit_testkit::skip("examples", NOT_BUILT, test);
            return;
        };
        let (ok, out, err) = run(&exe, &[]);
        assert!(ok, "{name}: {err}\n{out}");
        assert!(!out.trim().is_empty(), "{name} printed nothing");
        assert!(!err.contains("panicked"), "{name}: {err}");
    }
}
