//! Every `--json` output of every command validates against its JSON Schema in `schemas/`
//! (draft 2020-12), checked by the `jsonschema` crate on real outputs of the real binary.
//! Scripts that read accel's JSON can rely on the schemas; a change to a key fails here.

use std::process::Command;

use serde_json::Value;

fn schema(kind: &str) -> jsonschema::Validator {
    let path = format!(
        "{}/../../schemas/{kind}.schema.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let v: Value = serde_json::from_str(&text).unwrap();
    // The schema itself is a valid draft 2020-12 schema.
    assert!(
        jsonschema::meta::is_valid(&v),
        "{path} is not a valid schema"
    );
    jsonschema::validator_for(&v).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The documents `accel ARGS` prints (one, or one per line for streams).
fn run(args: &[&str]) -> Vec<Value> {
    let o = Command::new(env!("CARGO_BIN_EXE_accel"))
        .args(args)
        .output()
        .expect("accel runs");
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = String::from_utf8(o.stdout).unwrap();
    match serde_json::from_str::<Value>(&text) {
        Ok(v) => vec![v],
        Err(_) => text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect(),
    }
}

fn check(kind: &str, args: &[&str]) {
    let validator = schema(kind);
    let docs = run(args);
    assert!(!docs.is_empty(), "{args:?} printed nothing");
    for doc in docs {
        assert_eq!(doc["kind"], kind, "{args:?}");
        let errors: Vec<String> = validator
            .iter_errors(&doc)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{args:?} against {kind}.schema.json:\n{}",
            errors.join("\n")
        );
    }
}

#[test]
fn devices() {
    check("devices", &["devices", "--json"]);
}

#[test]
fn doctor() {
    check("doctor", &["doctor", "--json"]);
}

#[test]
fn mem_once_and_watched() {
    check("mem", &["mem", "--json"]);
    check("mem", &["mem", "--json", "--watch", "0.2", "--count", "2"]);
}

#[test]
fn monitor_stream() {
    check(
        "monitor",
        &["monitor", "--json", "--interval", "0.2", "--count", "2"],
    );
}

/// A fixture machine's sysfs and procfs (tests/fixtures/telemetry in the telemetry crate).
fn fixture(name: &str, dir: &str) -> String {
    format!(
        "{}/../telemetry/tests/fixtures/telemetry/{name}/{dir}",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn monitor_and_mem_with_gpus_and_tpus() {
    // Rows of every shape: AMD and Intel GPUs with processes (in pods, a Slurm job, a session:
    // `workloads`), TPU chips not reporting.
    for (name, proc_) in [
        ("mixed", "proc"),
        ("tpu-vm", "proc"),
        ("amd-apu", "proc"),
        ("workloads", "proc"),
    ] {
        let (sys, procfs) = (fixture(name, "sys"), fixture(name, proc_));
        if !std::path::Path::new(&procfs).is_dir() {
            continue;
        }
        let roots = ["--path.sysfs", &sys, "--path.procfs", &procfs];
        let mut args = vec!["monitor", "--json", "--interval", "0.2", "--count", "2"];
        args.extend(roots);
        check("monitor", &args);
        let mut args = vec!["mem", "--json", "--interval", "0.2"];
        args.extend(roots);
        check("mem", &args);
    }
}

#[test]
fn bench_matmul_elementwise_copy() {
    let small = ["--warmup", "1", "--iters", "3"];
    let cat =
        |a: &[&'static str]| -> Vec<&'static str> { a.iter().chain(&small).copied().collect() };
    check(
        "bench",
        &cat(&[
            "bench", "matmul", "--device", "cpu", "--size", "32", "--json",
        ]),
    );
    check(
        "bench",
        &cat(&[
            "bench", "matmul", "--device", "cpu", "--size", "32", "--dtype", "bf16", "--json",
        ]),
    );
    // M x N x K, B transposed, batched: the optional keys.
    check(
        "bench",
        &cat(&[
            "bench", "matmul", "--device", "cpu", "--size", "8x24x16", "--linear", "--batch", "2",
            "--json",
        ]),
    );
    for op in ["add", "sum"] {
        check(
            "bench",
            &cat(&[
                "bench",
                "elementwise",
                "--op",
                op,
                "--device",
                "cpu",
                "--size",
                "1000",
                "--json",
            ]),
        );
    }
    check(
        "bench",
        &cat(&[
            "bench",
            "copy",
            "--device",
            "cpu",
            "--size",
            "64KiB",
            "--host-memory",
            "pageable",
            "--json",
        ]),
    );
    // Every accelerator here too (XLA's CPU plugin, lavapipe), when the environment has them.
    for d in accelkit::available_devices()
        .iter()
        .filter(|d| d.is_accelerator())
        .take(2)
    {
        let d = d.to_string();
        check(
            "bench",
            &[
                "bench", "matmul", "--device", &d, "--size", "32", "--warmup", "1", "--iters", "3",
                "--json",
            ],
        );
    }
}

#[test]
fn a_changed_key_fails_validation() {
    // The schemas are strict: an unknown or missing key is an error, so they really pin the
    // output (this guards the schemas themselves).
    let v = schema("mem");
    let mut doc = run(&["mem", "--json"]).remove(0);
    assert!(v.is_valid(&doc));
    doc["surprise"] = Value::from(1);
    assert!(!v.is_valid(&doc));
    doc.as_object_mut().unwrap().remove("surprise");
    doc.as_object_mut().unwrap().remove("host");
    assert!(!v.is_valid(&doc));
    // Inside a bench report's results too (chosen by the `benchmark` key).
    let v = schema("bench");
    let mut doc = run(&[
        "bench", "matmul", "--device", "cpu", "--size", "16", "--iters", "2", "--json",
    ])
    .remove(0);
    assert!(v.is_valid(&doc));
    doc["results"][0]["stats"]["median_s"] = Value::from("fast");
    assert!(!v.is_valid(&doc));
    doc["results"][0]["stats"]["median_s"] = Value::from(1e-3);
    doc["results"][0]["dtype"] = Value::from("f8");
    assert!(!v.is_valid(&doc));
}
