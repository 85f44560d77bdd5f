//! `accel doctor` on this machine and in broken environments made of real files and
//! variables: every check's keys, every FAIL and WARN with a fix, and the exit code.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn doctor(env: &[(&str, &str)], remove: &[&str]) -> (Output, Value) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_accel"));
    c.args(["doctor", "--json"]);
    for k in remove {
        c.env_remove(k);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().expect("the accel binary runs");
    let v = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (o, v)
}

/// The check with this id (the first, for ids that repeat per plugin).
fn find<'a>(v: &'a Value, id: &str) -> &'a Value {
    v["sections"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["checks"].as_array().unwrap())
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no check {id} in {v:#}"))
}

/// Every check has the stable keys; every FAIL and WARN says what to do.
fn well_formed(v: &Value) {
    let keys = |o: &Value| -> Vec<String> { o.as_object().unwrap().keys().cloned().collect() };
    assert_eq!(
        keys(v),
        [
            "schema_version",
            "kind",
            "sections",
            "best_device",
            "best_device_works",
            "seconds"
        ]
    );
    assert_eq!(v["kind"], "doctor");
    let sections = v["sections"].as_array().unwrap();
    let names: Vec<&str> = sections
        .iter()
        .map(|s| s["backend"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["cpu", "cuda", "xla", "wgpu"]);
    for s in sections {
        assert_eq!(keys(s), ["backend", "probe_seconds", "checks"]);
        for c in s["checks"].as_array().unwrap() {
            assert_eq!(keys(c), ["id", "title", "status", "found", "fix"], "{c}");
            let status = c["status"].as_str().unwrap();
            assert!(["pass", "fail", "warn", "skip"].contains(&status), "{c}");
            assert!(!c["found"].as_str().unwrap().is_empty(), "{c}");
            if status == "fail" || status == "warn" {
                assert!(c["fix"].as_str().unwrap().len() > 10, "no fix: {c}");
            }
        }
    }
}

#[test]
fn this_machine_is_explained() {
    let (o, v) = doctor(&[], &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    well_formed(&v);
    assert_eq!(v["best_device_works"], true);
    println!("doctor took {:.3} s", v["seconds"].as_f64().unwrap());
    assert!(v["seconds"].as_f64().unwrap() < 10.0);
    // No NVIDIA GPU here: said once, the driver checks skipped rather than failed.
    let gpu = find(&v, "cuda.gpu_present");
    if gpu["status"] == "skip" {
        assert!(
            gpu["found"].as_str().unwrap().contains("no NVIDIA GPU"),
            "{gpu}"
        );
        assert_eq!(find(&v, "cuda.kernel_driver")["status"], "skip");
    }
    // The test environment's XLA CPU plugin loads, and is called the CPU again.
    if std::env::var_os("VIRTUAL_ENV").is_some() {
        let xla = find(&v, "xla.plugin");
        assert_eq!(xla["status"], "pass", "{xla}");
        assert!(
            xla["found"]
                .as_str()
                .unwrap()
                .contains("not an accelerator"),
            "{xla}"
        );
    }
    // lavapipe: a software adapter only, a warning with a fix.
    let adapters = find(&v, "wgpu.adapters");
    if adapters["found"].as_str().unwrap().contains("llvmpipe") {
        assert_eq!(adapters["status"], "warn", "{adapters}");
    }
}

#[test]
fn text_output_has_a_line_per_check_and_fixes() {
    let o = Command::new(env!("CARGO_BIN_EXE_accel"))
        .arg("doctor")
        .output()
        .unwrap();
    assert!(o.status.success());
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(
        t.contains("  PASS  vector instructions the kernels use"),
        "{t}"
    );
    assert!(t.lines().last().unwrap().contains("best device: cpu") || t.contains("best device:"));
    for (i, l) in t.lines().enumerate() {
        if l.starts_with("  FAIL") || l.starts_with("  WARN") {
            let next = t.lines().nth(i + 1).unwrap_or_default();
            assert!(next.trim_start().starts_with("fix: "), "{l}\n{next}");
        }
    }
}

/// A folder removed when dropped.
struct TempDir(PathBuf);
impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("accel-doctor-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    fn file(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.0.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }
    fn path(&self) -> &Path {
        &self.0
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn an_empty_accel_cuda_lib_dir_is_a_warning_with_the_fix() {
    let dir = TempDir::new("libdir");
    let (o, v) = doctor(&[("ACCEL_CUDA_LIB_DIR", dir.path().to_str().unwrap())], &[]);
    assert!(o.status.success());
    well_formed(&v);
    let c = find(&v, "cuda.lib_dir");
    assert_eq!(c["status"], "warn", "{c}");
    assert!(
        c["found"].as_str().unwrap().contains("holds none of"),
        "{c}"
    );
    assert!(
        c["fix"].as_str().unwrap().contains("ACCEL_CUDA_LIB_DIR"),
        "{c}"
    );
}

#[test]
fn wheels_built_for_another_cuda_major_are_named() {
    // A Python environment as pip lays out PyTorch for CUDA 12 and JAX's CUDA 12 plugin.
    let venv = TempDir::new("venv");
    let sp = "lib/python3.12/site-packages";
    venv.file(
        &format!("{sp}/torch/version.py"),
        "__version__ = '2.7.0+cu128'\ndebug = False\ncuda: Optional[str] = '12.8'\n",
    );
    venv.file(&format!("{sp}/jax_plugins/xla_cuda12/__init__.py"), "");
    venv.file(&format!("{sp}/nvidia/cu12/lib/libcudart.so.12"), "");
    let (o, v) = doctor(&[("VIRTUAL_ENV", venv.path().to_str().unwrap())], &[]);
    assert!(o.status.success());
    well_formed(&v);
    let c = find(&v, "cuda.python_wheels");
    assert_eq!(c["status"], "warn", "{c}");
    let found = c["found"].as_str().unwrap();
    assert!(found.contains("PyTorch 2.7.0+cu128 (CUDA 12.8)"), "{c}");
    assert!(found.contains("JAX's CUDA 12 plugin"), "{c}");
    assert!(found.contains("not CUDA 13"), "{c}");
}

#[test]
fn cuda_visible_devices_empty_hides_every_gpu() {
    let (o, v) = doctor(&[("CUDA_VISIBLE_DEVICES", "")], &[]);
    assert!(o.status.success());
    well_formed(&v);
    let c = find(&v, "cuda.visible_devices");
    assert_eq!(c["status"], "warn", "{c}");
    assert!(
        c["fix"]
            .as_str()
            .unwrap()
            .contains("unset CUDA_VISIBLE_DEVICES"),
        "{c}"
    );
}

#[test]
fn no_vulkan_driver_is_a_failure_with_the_fix() {
    let (o, v) = doctor(
        &[("VK_DRIVER_FILES", "/nonexistent/accel_icd.json")],
        &["VK_ICD_FILENAMES"],
    );
    // The CPU still works: exit 0.
    assert!(o.status.success());
    well_formed(&v);
    if cfg!(target_os = "linux") {
        let c = find(&v, "wgpu.vulkan_icd");
        assert_eq!(c["status"], "fail", "{c}");
        assert!(
            c["found"].as_str().unwrap().contains("VK_DRIVER_FILES"),
            "{c}"
        );
        let a = find(&v, "wgpu.adapters");
        assert_eq!(a["status"], "fail", "{a}");
    }
}
