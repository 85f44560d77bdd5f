//! `accel bench --compare torch|numpy`: the same work timed again in PyTorch and numpy, in
//! the Python `ACCEL_PYTHON` names. A wrapper script in front of the real Python records each
//! job accel hands it, so the tests check what was asked (the reference), not only what came
//! back.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn accel(args: &[&str], python: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_accel"))
        .args(args)
        .env("ACCEL_PYTHON", python)
        .output()
        .expect("the accel binary runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The `--json` report of a run that must have succeeded.
fn report(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", text(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// A fresh folder for one test's files.
fn folder(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("accelkit-peers-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// An executable shell script at `dir/name`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// A Python that can import `module`: the test environment's, else python3 on PATH.
fn python_with(module: &str) -> Option<PathBuf> {
    let venv = std::env::var_os("VIRTUAL_ENV").map(|v| PathBuf::from(v).join("bin/python"));
    venv.into_iter()
        .chain(std::iter::once(PathBuf::from("python3")))
        .find(|p| {
            Command::new(p)
                .args(["-c", &format!("import {module}")])
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

/// `python` behind a wrapper that appends each job (the last argument) to `log`.
fn recording(dir: &Path, python: &Path, log: &Path) -> PathBuf {
    script(
        dir,
        "python",
        &format!(
            "for last; do :; done\nprintf '%s\\n' \"$last\" >> '{}'\nexec '{}' \"$@\"",
            log.display(),
            python.display()
        ),
    )
}

/// For the test `test`: numpy's Python behind a recording wrapper, with the folder and the log
/// of jobs; None (the test says it is skipped) where no Python here imports numpy.
fn numpy_recorded(test: &str, name: &str) -> Option<(PathBuf, PathBuf, PathBuf)> {
    let Some(real) = python_with("numpy") else {
        accelkit_testkit::skip("numpy", "no Python here imports numpy", test);
        return None;
    };
    let dir = folder(name);
    let log = dir.join("jobs.log");
    let python = recording(&dir, &real, &log);
    Some((dir, log, python))
}

#[test]
fn compare_numpy_times_the_same_work_in_numpy() {
    let test = "compare_numpy_times_the_same_work_in_numpy";
    let Some((dir, log, python)) = numpy_recorded(test, "numpy") else {
        return;
    };
    let o = accel(
        &[
            "bench",
            "matmul",
            "--device",
            "cpu",
            "--dtype",
            "f64",
            "--size",
            "48",
            "--size",
            "96",
            "--warmup",
            "2",
            "--iters",
            "5",
            "--json",
            "--compare",
            "numpy",
        ],
        &python,
    );
    let v = report(&o);
    let c = v["comparison"].as_array().unwrap();
    assert_eq!(c.len(), 2, "{c:?}");
    for (entry, size) in c.iter().zip([48, 96]) {
        assert_eq!(entry["run"], format!("cpu f64 size {size}"));
        assert!(
            entry["against"].as_str().unwrap().starts_with("numpy "),
            "{entry}"
        );
        let (theirs, ours) = (
            entry["baseline_median_s"].as_f64().unwrap(),
            entry["median_s"].as_f64().unwrap(),
        );
        assert!(theirs > 0.0 && ours > 0.0);
        assert!((entry["speedup"].as_f64().unwrap() - theirs / ours).abs() < 1e-9);
    }
    // What numpy was asked: one description, then each run's work with accel's warm-ups and
    // iterations.
    let jobs: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(jobs.len(), 3, "{jobs:?}");
    assert_eq!(jobs[0]["kind"], "describe");
    for (job, size) in jobs[1..].iter().zip([48, 96]) {
        assert_eq!(job["lib"], "numpy");
        assert_eq!(job["kind"], "matmul");
        assert_eq!(job["device"], "cpu");
        assert_eq!(job["dtype"], "f64");
        assert_eq!(job["size"], size);
        assert_eq!(job["batch"], 1);
        assert_eq!(job["warmup"], 2);
        assert_eq!(job["iters"], 5);
    }
    // The text names the library and gives each run's ratio.
    let o = accel(
        &[
            "bench",
            "elementwise",
            "--device",
            "cpu",
            "--size",
            "4096",
            "--iters",
            "3",
            "--compare",
        ],
        &python,
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains("compared with ") && out.contains("numpy "),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("  add cpu f32 size 4096 (") && l.contains("x numpy (")),
        "{out}"
    );
    // exp and sum: numpy's np.exp and x.sum() on the same number of values.
    for op in ["exp", "sum"] {
        let args = [
            "bench",
            "elementwise",
            "--op",
            op,
            "--device",
            "cpu",
            "--size",
            "4096",
            "--iters",
            "3",
            "--compare",
            "numpy",
        ];
        let o = accel(&args, &python);
        assert!(o.status.success(), "{op}: {}", text(&o.stderr));
        let out = text(&o.stdout);
        let line = format!("  {op} cpu f32 size 4096 (");
        assert!(
            out.lines()
                .any(|l| l.starts_with(&line) && l.contains("x numpy (")),
            "{out}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn compare_torch_times_the_same_work_in_pytorch() {
    let test = "compare_torch_times_the_same_work_in_pytorch";
    let Some(python) = python_with("torch") else {
        return accelkit_testkit::skip("torch", "no Python here imports torch", test);
    };
    let o = accel(
        &[
            "bench",
            "matmul",
            "--device",
            "cpu",
            "--dtype",
            "bf16",
            "--size",
            "64",
            "--size",
            "16x48x32",
            "--linear",
            "--iters",
            "3",
            "--json",
            "--compare",
            "torch",
        ],
        &python,
    );
    let v = report(&o);
    let c = v["comparison"].as_array().unwrap();
    let runs = [
        "cpu bf16 size 64 B transposed",
        "cpu bf16 16x48x32 B transposed",
    ];
    assert_eq!(c.len(), runs.len(), "{c:?}");
    for (c, run) in c.iter().zip(runs) {
        assert_eq!(c["run"], run);
        assert!(c["against"].as_str().unwrap().starts_with("torch "), "{c}");
        // A time, not an error: PyTorch multiplied a 16 x 32 by a 48 x 32 weight transposed.
        assert!(c["baseline_median_s"].as_f64().unwrap() > 0.0, "{c}");
    }
}

#[test]
fn compare_numpy_times_a_linear_layer_of_the_same_shape() {
    let test = "compare_numpy_times_a_linear_layer_of_the_same_shape";
    let Some((dir, log, python)) = numpy_recorded(test, "linear") else {
        return;
    };
    let o = accel(
        &[
            "bench",
            "matmul",
            "--device",
            "cpu",
            "--size",
            "8x40x24",
            "--linear",
            "--batch",
            "2",
            "--iters",
            "3",
            "--compare",
            "numpy",
        ],
        &python,
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains("B stored N x K and transposed (x @ W.t())"),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("cpu") && l.contains("8x40x24")),
        "{out}"
    );
    // A time from numpy (a shape it could not multiply would be an error line instead).
    assert!(
        out.lines().any(
            |l| l.starts_with("  cpu f32 8x40x24 B transposed batch 2 (")
                && l.contains("x numpy (")
        ),
        "{out}"
    );
    let jobs = std::fs::read_to_string(&log).unwrap();
    let job: serde_json::Value = serde_json::from_str(jobs.lines().last().unwrap()).unwrap();
    assert_eq!(
        (
            &job["m"],
            &job["n"],
            &job["k"],
            &job["b_transposed"],
            &job["batch"]
        ),
        (&8.into(), &40.into(), &24.into(), &true.into(), &2.into()),
        "{job}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_missing_library_or_a_broken_python_is_named_before_anything_runs() {
    let dir = folder("broken");
    let bench = |python: &Path, peers: &str| {
        accel(
            &[
                "bench",
                "matmul",
                "--size",
                "8",
                "--iters",
                "1",
                "--compare",
                peers,
            ],
            python,
        )
    };
    let fails_with = |o: &Output, want: &str| {
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(
            err.starts_with("error: --compare: ") && err.contains(want),
            "{err}"
        );
        assert!(!err.contains("panicked") && o.stdout.is_empty(), "{err}");
    };
    fails_with(&bench(&dir.join("absent"), "numpy"), "could not be started");
    let chatty = script(&dir, "chatty", "echo 'Python 3.99, hello'");
    fails_with(
        &bench(&chatty, "torch"),
        "answered with something other than JSON",
    );
    let failing = script(&dir, "failing", "echo 'Segmentation fault' >&2; exit 139");
    fails_with(&bench(&failing, "numpy"), "Segmentation fault");
    // What the Python prints is shown with its control characters escaped.
    let hostile = script(&dir, "hostile", r"printf '\033[2Jgone' >&2; exit 1");
    let o = bench(&hostile, "numpy");
    fails_with(&o, "\\x1b[2Jgone");
    assert!(!text(&o.stderr).contains('\x1b'), "{}", text(&o.stderr));
    // A Python without the library asked for (one that has no module at all).
    let bare = script(
        &dir,
        "bare",
        r#"echo '{"torch": {"error": "ModuleNotFoundError: No module named '"'"'torch'"'"'"}, "numpy": {"error": "ModuleNotFoundError"}}'"#,
    );
    fails_with(&bench(&bare, "torch"), "No module named 'torch'");
    fails_with(&bench(&bare, "peers"), "cannot import torch or numpy");
    // A name that is neither a library nor a file mixed with one is a usage error.
    let o = bench(&bare, "torch,jax");
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("mixes library names"));
    std::fs::remove_dir_all(&dir).unwrap();
}
