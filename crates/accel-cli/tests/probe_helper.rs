//! The probe helper: a driver library or plugin that hangs or crashes while it starts costs a
//! killed child process and a reason naming the step, never a hung or crashed command, and
//! nothing of it keeps running. The faults are real shared libraries built here with gcc
//! whose constructors (run inside `dlopen`) hang or abort, as a broken driver does.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

struct Lab {
    root: PathBuf,
}

impl Lab {
    fn new(name: &str) -> Lab {
        let root = std::env::temp_dir().join(format!("accel-helper-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        Lab { root }
    }

    /// A shared library at `rel` whose constructor runs `body` (C), or `None` without gcc.
    fn library(&self, rel: &str, body: &str) -> Option<PathBuf> {
        let so = self.root.join(rel);
        std::fs::create_dir_all(so.parent().unwrap()).unwrap();
        let src = so.with_extension("c");
        std::fs::write(
            &src,
            format!(
                "#include <fcntl.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <unistd.h>\n\
                 __attribute__((constructor)) static void start(void) {{ {body} }}\n"
            ),
        )
        .unwrap();
        let ok = Command::new("gcc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(&so)
            .arg(&src)
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(so)
    }

    /// A constructor that writes its process id to `marker`, then sleeps ten minutes.
    fn hang_body(marker: &Path) -> String {
        format!(
            "FILE *f = fopen(\"{}\", \"w\"); if (f) {{ fprintf(f, \"%d\", getpid()); fclose(f); }} sleep(600);",
            marker.display()
        )
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Runs accel with `env`, returning its output, its pid and how long it took.
fn accel(args: &[&str], env: &[(&str, &Path)], vars: &[(&str, &str)]) -> (Output, u32, Duration) {
    let t = Instant::now();
    let mut c = Command::new(env!("CARGO_BIN_EXE_accel"));
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    for (k, v) in vars {
        c.env(k, v);
    }
    let child = c
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("accel runs");
    let pid = child.id();
    let o = child.wait_with_output().unwrap();
    (o, pid, t.elapsed())
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

fn plugin<'a>(v: &'a Value, path: &Path) -> &'a Value {
    v["xla_plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["path"] == path.display().to_string())
        .unwrap_or_else(|| panic!("{} not listed: {v:#}", path.display()))
}

fn alive(pid: u32) -> bool {
    // A killed child that is not yet reaped is a zombie: it runs nothing.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| !r.trim_start().starts_with('Z'))
    })
}

/// The pid a planted constructor wrote (it ran in that process), once it exists.
fn marker_pid(marker: &Path) -> Option<u32> {
    std::fs::read_to_string(marker).ok()?.trim().parse().ok()
}

#[test]
fn a_plugin_that_hangs_in_its_constructor_is_killed_with_its_helper() {
    let lab = Lab::new("hang");
    let marker = lab.root.join("ran-in");
    let Some(so) = lab.library("hang/pjrt_c_api_hang_plugin.so", &Lab::hang_body(&marker)) else {
        println!("skipped: gcc: cannot build the hanging plugin");
        return;
    };
    let (o, pid, took) = accel(
        &["devices", "--json"],
        &[("ACCEL_PJRT_PLUGIN", &so)],
        &[("ACCEL_PROBE_TIMEOUT", "3")],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(took < Duration::from_secs(20), "took {took:?}");
    let v = json(&o);
    let problem = plugin(&v, &so)["problem"].as_str().unwrap().to_string();
    assert!(
        problem.contains("did not finish within 3.0 s")
            && problem.contains(&format!("load the PJRT plugin {}", so.display()))
            && problem.contains("killed"),
        "{problem}"
    );
    // The constructor ran in a helper, never in accel itself, and that helper is gone.
    let ran_in = marker_pid(&marker).expect("the constructor ran in the helper");
    assert_ne!(
        ran_in, pid,
        "the hanging plugin was loaded into accel itself"
    );
    assert!(
        !alive(ran_in),
        "the helper {ran_in} still runs after accel answered"
    );
}

#[test]
fn a_plugin_past_its_load_limit_is_set_aside_and_the_others_still_load() {
    let lab = Lab::new("stall");
    let marker = lab.root.join("ran-in");
    let Some(so) = lab.library("stall/pjrt_c_api_stall_plugin.so", &Lab::hang_body(&marker)) else {
        println!("skipped: gcc: cannot build the hanging plugin");
        return;
    };
    let (o, pid, took) = accel(
        &["devices", "--json"],
        &[("ACCEL_PJRT_PLUGIN", &so)],
        &[("ACCEL_PJRT_TIMEOUT", "1")],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(took < Duration::from_secs(20), "took {took:?}");
    let v = json(&o);
    let p = plugin(&v, &so);
    assert!(
        p["problem"]
            .as_str()
            .unwrap()
            .contains("did not start within 1.0 s in the probe helper"),
        "{p}"
    );
    let ran_in = marker_pid(&marker).expect("the constructor ran in the helper");
    assert_ne!(ran_in, pid);
    assert!(!alive(ran_in), "the helper {ran_in} still runs");
    // Every other plugin was loaded by a second helper and then here, unharmed.
    let others: Vec<&Value> = v["xla_plugins"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|q| q["path"] != so.display().to_string())
        .collect();
    if others.is_empty() {
        println!("skipped: xla: no other PJRT plugin here to load beside the stalled one");
        return;
    }
    for q in others {
        assert!(q["problem"].is_null(), "{q}");
        assert!(q["devices"].as_u64().unwrap() > 0, "{q}");
    }
}

#[test]
fn a_plugin_that_crashes_leaves_accel_and_the_other_plugins_standing() {
    let lab = Lab::new("crash");
    let Some(so) = lab.library("crash/pjrt_c_api_crash_plugin.so", "abort();") else {
        println!("skipped: gcc: cannot build the crashing plugin");
        return;
    };
    let (o, _, _) = accel(&["devices", "--json"], &[("ACCEL_PJRT_PLUGIN", &so)], &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = json(&o);
    let problem = plugin(&v, &so)["problem"].as_str().unwrap().to_string();
    assert!(
        problem.contains("crashed (signal 6 (SIGABRT))")
            && problem.contains(&format!("load the PJRT plugin {}", so.display())),
        "{problem}"
    );
    // doctor reports it as a failed check, in JSON, and exits 1 for it.
    let (o, _, _) = accel(&["doctor", "--json"], &[("ACCEL_PJRT_PLUGIN", &so)], &[]);
    assert_eq!(o.status.code(), Some(1));
    let v = json(&o);
    let failed: Vec<String> = v["sections"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["checks"].as_array().unwrap())
        .filter(|c| c["status"] == "fail")
        .map(|c| c.to_string())
        .collect();
    assert!(
        failed.iter().any(|c| c.contains("SIGABRT")),
        "no failed check names the crash: {failed:?}"
    );
}

#[test]
fn a_driver_library_that_hangs_makes_cuda_unavailable_with_the_step() {
    let lab = Lab::new("libcuda");
    let marker = lab.root.join("ran-in");
    let Some(so) = lab.library("driver/libcuda.so.1", &Lab::hang_body(&marker)) else {
        println!("skipped: gcc: cannot build the hanging driver library");
        return;
    };
    let dir = so.parent().unwrap();
    let (o, pid, took) = accel(
        &["devices", "--json"],
        &[("ACCEL_CUDA_LIB_DIR", dir)],
        &[("ACCEL_PROBE_TIMEOUT", "2")],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(took < Duration::from_secs(20), "took {took:?}");
    let v = json(&o);
    let cuda = v["backends"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["backend"] == "cuda")
        .unwrap();
    assert_eq!(cuda["status"], "unavailable", "{cuda}");
    let reason = cuda["reason"].as_str().unwrap();
    assert!(
        reason.contains("did not finish within 2.0 s")
            && reason.contains(&format!("dlopen {}", so.display())),
        "{reason}"
    );
    let ran_in = marker_pid(&marker).expect("the constructor ran in the helper");
    assert_ne!(
        ran_in, pid,
        "the hanging libcuda was loaded into accel itself"
    );
    assert!(!alive(ran_in), "the helper {ran_in} still runs");
}

#[test]
fn nvml_that_hangs_is_a_failed_collector_not_a_frozen_monitor() {
    let lab = Lab::new("nvml");
    let marker = lab.root.join("ran-in");
    let Some(so) = lab.library("driver/libnvidia-ml.so.1", &Lab::hang_body(&marker)) else {
        println!("skipped: gcc: cannot build the hanging NVML");
        return;
    };
    let (o, pid, took) = accel(
        &["monitor", "--json", "--count", "1"],
        &[("LD_LIBRARY_PATH", so.parent().unwrap())],
        &[("ACCEL_PROBE_TIMEOUT", "2")],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(took < Duration::from_secs(20), "took {took:?}");
    let line = String::from_utf8_lossy(&o.stdout);
    let v: Value = serde_json::from_str(line.lines().next().unwrap()).unwrap();
    let nvidia = v["collectors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["collector"] == "nvidia")
        .unwrap();
    assert_eq!(nvidia["success"], false, "{nvidia}");
    assert!(
        nvidia["error"]
            .as_str()
            .unwrap()
            .contains("step: nvmlInit (libnvidia-ml.so.1)"),
        "{nvidia}"
    );
    let ran_in = marker_pid(&marker).expect("the constructor ran in the helper");
    assert_ne!(ran_in, pid);
    assert!(!alive(ran_in), "the helper {ran_in} still runs");
}

#[test]
fn the_helper_refuses_an_unknown_task_and_a_bad_limit_is_a_reason() {
    let (o, _, _) = accel(&["__probe-helper", "bogus"], &[], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown probe helper task"));
    let (o, _, _) = accel(
        &["devices", "--json"],
        &[],
        &[("ACCEL_PROBE_TIMEOUT", "inf")],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = json(&o);
    let wgpu = v["backends"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["backend"] == "wgpu")
        .unwrap();
    if wgpu["compiled"] == true {
        assert!(
            wgpu["reason"]
                .as_str()
                .is_some_and(|r| r.contains("ACCEL_PROBE_TIMEOUT")),
            "{wgpu}"
        );
    }
}
