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
        // A GPU plugin (JAX's CUDA plugin, on a GPU machine; a "cuda" in its path, as
        // `xla::context::runtime` tells one) initialises CUDA as it starts, which can take
        // longer than the 1 s limit by itself: it is set aside the same way, and says so.
        let gpu = q["path"].as_str().is_some_and(|p| p.contains("cuda"));
        if gpu && !q["problem"].is_null() {
            assert!(
                q["problem"]
                    .as_str()
                    .unwrap()
                    .contains("did not start within 1.0 s in the probe helper"),
                "{q}"
            );
            continue;
        }
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
    let wgpu = backend(&v, "wgpu").expect("wgpu is listed");
    if wgpu["compiled"] == true {
        assert!(
            wgpu["reason"]
                .as_str()
                .is_some_and(|r| r.contains("ACCEL_PROBE_TIMEOUT")),
            "{wgpu}"
        );
    }
}

/// The wgpu devices `accel devices --json` lists in the runtime folder `run` with `vars`
/// set: (name, device type) each.
fn wgpu_devices(run: &Path, vars: &[(&str, &str)]) -> Vec<(String, String)> {
    let (o, _, _) = accel(&["devices", "--json"], &[("XDG_RUNTIME_DIR", run)], vars);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = json(&o);
    let Some(devices) = backend(&v, "wgpu").and_then(|b| b["devices"].as_array().cloned()) else {
        return Vec::new();
    };
    devices
        .iter()
        .map(|d| {
            let s = |x: &Value| x.as_str().unwrap_or_default().to_string();
            (s(&d["name"]), s(&d["details"]["device_type"]))
        })
        .collect()
}

/// The first wgpu device's name.
fn wgpu_name(run: &Path, vars: &[(&str, &str)]) -> Option<String> {
    wgpu_devices(run, vars).into_iter().next().map(|(n, _)| n)
}

/// One backend's entry in `accel devices --json`.
fn backend<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    v["backends"]
        .as_array()?
        .iter()
        .find(|b| b["backend"] == name)
}

use accelkit_testkit::is_required as required;

/// The key a kept answer was written under.
fn kept_key(kept: &Path) -> Value {
    serde_json::from_str::<Value>(&std::fs::read_to_string(kept).unwrap_or_default())
        .map(|v| v["key"].clone())
        .unwrap_or(Value::Null)
}

/// Edits the kept answer with `plant`, then runs `list`: whether the listing shows `planted`
/// (it was taken from the file: a helper could not have found it). A miss while the machine
/// changed under the test (a package installed beside it rewrites what the key holds, and the
/// file then holds another key) is tried again, up to three times; a miss under the same key
/// is a miss.
fn planted_is_taken(
    kept: &Path,
    plant: impl Fn(&Path),
    list: impl Fn() -> String,
    planted: &str,
) -> bool {
    for _ in 0..3 {
        plant(kept);
        let before = kept_key(kept);
        if list() == planted {
            return true;
        }
        if kept_key(kept) == before {
            return false;
        }
    }
    false
}

/// Renames the first adapter in the kept wgpu answer, as a run that enumerated nothing could
/// not: a listing that shows the new name was taken from the file, not from a helper.
fn plant_name(kept: &Path, name: &str) {
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(kept).unwrap()).unwrap();
    let facts = v["value"]["adapters"]
        .as_array_mut()
        .unwrap()
        .first_mut()
        .expect("the kept answer lists an adapter");
    facts["name"] = name.into();
    std::fs::write(kept, v.to_string()).unwrap();
}

#[test]
fn a_kept_probe_answer_is_taken_until_what_it_depends_on_changes() {
    use std::os::unix::fs::PermissionsExt;
    let lab = Lab::new("kept");
    let run = lab.root.join("run");
    std::fs::create_dir(&run).unwrap();
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
    let devices = wgpu_devices(&run, &[]);
    if devices.is_empty() || devices.iter().any(|(_, t)| t != "Cpu") {
        // No adapter, or a GPU among them: then no answer is kept, by design.
        assert!(
            !required("wgpu") || !devices.is_empty(),
            "ACCEL_TEST_REQUIRE names wgpu, but accel devices lists no wgpu device"
        );
        println!("skipped: wgpu: kept answers need CPU adapters only; here: {devices:?}");
        return;
    }
    let real = devices[0].0.clone();
    let kept = run.join("accel-probe-wgpu.json");
    let mode = std::fs::metadata(&kept)
        .expect("the helper's answer was kept")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let plant = |k: &Path| plant_name(k, "kept adapter");
    let listed = |vars: &'static [(&'static str, &'static str)]| {
        let run = run.clone();
        move || wgpu_name(&run, vars).unwrap_or_default()
    };
    let mesa: &[(&str, &str)] = &[("MESA_ACCEL_TEST", "1")];
    // Nothing changed: the kept answer is taken, no helper enumerates.
    assert!(planted_is_taken(&kept, plant, listed(&[]), "kept adapter"));
    // A variable the Vulkan loader or Mesa reads changes the key: the helper runs again,
    // and its answer is kept under the new key.
    assert_eq!(wgpu_name(&run, mesa).as_ref(), Some(&real));
    assert!(planted_is_taken(&kept, plant, listed(mesa), "kept adapter"));
    // Turned off (or a bad value), or a file others may read or write: not taken.
    for v in ["off", "no"] {
        let off = [("MESA_ACCEL_TEST", "1"), ("ACCEL_RUNTIME_CACHE", v)];
        assert_eq!(wgpu_name(&run, &off).as_ref(), Some(&real), "{v}");
    }
    std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(wgpu_name(&run, mesa).as_ref(), Some(&real));
    // A link to a kept answer is not followed.
    plant_name(&kept, "kept adapter");
    std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o600)).unwrap();
    let aside = run.join("aside.json");
    std::fs::rename(&kept, &aside).unwrap();
    std::os::unix::fs::symlink(&aside, &kept).unwrap();
    assert_eq!(wgpu_name(&run, mesa).as_ref(), Some(&real));
    // A runtime folder others may write is not used at all.
    std::fs::remove_file(&kept).unwrap();
    std::fs::rename(&aside, &kept).unwrap();
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o777)).unwrap();
    assert_eq!(wgpu_name(&run, mesa).as_ref(), Some(&real));
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
    // The doctor looks at the machine as it is, whatever was kept, and keeps what it found.
    plant_name(&kept, "kept adapter");
    let (o, _, _) = accel(
        &["doctor", "--json"],
        &[("XDG_RUNTIME_DIR", &run)],
        &[("MESA_ACCEL_TEST", "1")],
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains(&real) && !text.contains("kept adapter"),
        "{text}"
    );
    assert_eq!(wgpu_name(&run, mesa).as_ref(), Some(&real));
}

/// XLA's CPU plugin as the test command installs it (`.venv-test`, or `VIRTUAL_ENV`).
fn cpu_plugin() -> Option<PathBuf> {
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut venvs = vec![workspace.join(".venv-test")];
    venvs.extend(std::env::var_os("VIRTUAL_ENV").map(PathBuf::from));
    venvs.iter().find_map(|v| {
        std::fs::read_dir(v.join("lib"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|lib| {
                lib.path()
                    .join("site-packages/lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so")
            })
            .find(|p| p.is_file())
    })
}

/// `accel devices --json` with the plugin at `path` named by ACCEL_PJRT_PLUGIN.
fn xla_listing(run: &Path, path: &Path) -> Value {
    let (o, _, _) = accel(
        &["devices", "--json"],
        &[("XDG_RUNTIME_DIR", run), ("ACCEL_PJRT_PLUGIN", path)],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    json(&o)
}

/// The platform version listed for the plugin at `path`.
fn plugin_version(run: &Path, path: &Path) -> String {
    plugin(&xla_listing(run, path), path)["platform_version"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Sets `field` of every plugin in the kept XLA answer to `value`.
fn plant_plugin_field(kept: &Path, field: &str, value: &str) {
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(kept).unwrap()).unwrap();
    for p in v["value"]["plugins"].as_array_mut().unwrap() {
        p[field] = value.into();
    }
    std::fs::write(kept, v.to_string()).unwrap();
}

#[test]
fn a_cpu_plugins_answer_is_kept_until_its_file_changes_and_no_other_platform_is() {
    use std::os::unix::fs::PermissionsExt;
    let Some(real_plugin) = cpu_plugin() else {
        assert!(
            !required("xla"),
            "ACCEL_TEST_REQUIRE names xla, but XLA's CPU plugin is not installed"
        );
        println!("skipped: xla: XLA's CPU plugin is not installed (scripts/test.sh installs it)");
        return;
    };
    let lab = Lab::new("kept-xla");
    let run = lab.root.join("run");
    std::fs::create_dir(&run).unwrap();
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
    let so = lab.root.join("p").join("pjrt_c_api_cpu_plugin.so");
    std::fs::create_dir_all(so.parent().unwrap()).unwrap();
    std::fs::copy(&real_plugin, &so).unwrap();
    let first = xla_listing(&run, &so);
    let platforms: Vec<String> = first["xla_plugins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["platform"].as_str().unwrap_or("none").to_string())
        .collect();
    if platforms.iter().any(|p| p != "cpu") {
        // Another plugin (a TPU's, a GPU's) or a broken one is found too: then nothing is
        // kept, by design.
        println!("skipped: xla: kept answers need CPU plugins only; here: {platforms:?}");
        return;
    }
    let real = plugin(&first, &so)["platform_version"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(
        real, "cpu",
        "XLA's CPU plugin names its platform version so"
    );
    let kept = run.join("accel-probe-xla.json");
    assert!(kept.is_file(), "the CPU plugin's answer was kept");
    // Nothing changed: the kept answer is taken (no helper starts the plugin).
    assert!(planted_is_taken(
        &kept,
        |k| plant_plugin_field(k, "platform_version", "kept"),
        || plugin_version(&run, &so),
        "kept"
    ));
    // The plugin file rewritten (its times change): asked again.
    let f = std::fs::OpenOptions::new().write(true).open(&so).unwrap();
    f.set_modified(std::time::SystemTime::now() - Duration::from_secs(60))
        .unwrap();
    drop(f);
    assert_eq!(plugin_version(&run, &so), real);
    // A kept answer naming another platform is never taken: a TPU's or GPU's availability
    // depends on who holds the chip now.
    plant_plugin_field(&kept, "platform_version", "kept");
    plant_plugin_field(&kept, "platform", "tpu");
    assert_eq!(plugin_version(&run, &so), real);
}

/// A kept wgpu answer is not taken when the user's groups change (joining `render` makes a
/// GPU usable without any file changing), nor when a driver manifest named by
/// `VK_DRIVER_FILES` is fixed in place (no folder the key held changes then). Before, both
/// kept a false "no device" answer.
#[test]
fn a_kept_wgpu_answer_depends_on_the_groups_and_the_manifests_named() {
    use std::os::unix::fs::PermissionsExt;
    let lvp = Path::new("/usr/share/vulkan/icd.d/lvp_icd.x86_64.json");
    if !lvp.is_file() {
        assert!(
            !required("wgpu"),
            "ACCEL_TEST_REQUIRE names wgpu, but lavapipe is missing"
        );
        println!("skipped: wgpu: no lavapipe manifest at {}", lvp.display());
        return;
    }
    let lab = Lab::new("kept-named");
    let run = lab.root.join("run");
    std::fs::create_dir(&run).unwrap();
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
    let manifest = lab.root.join("icd/lvp.json");
    std::fs::create_dir_all(manifest.parent().unwrap()).unwrap();
    std::fs::copy(lvp, &manifest).unwrap();
    let named = manifest.display().to_string();
    let vars: &[(&str, &str)] = &[("VK_DRIVER_FILES", named.as_str())];
    let devices = wgpu_devices(&run, vars);
    if devices.is_empty() || devices.iter().any(|(_, t)| t != "Cpu") {
        assert!(
            !required("wgpu"),
            "ACCEL_TEST_REQUIRE names wgpu, but lavapipe lists nothing"
        );
        println!("skipped: wgpu: kept answers need CPU adapters only; here: {devices:?}");
        return;
    }
    let real = devices[0].0.clone();
    let kept = run.join("accel-probe-wgpu.json");
    let plant = |k: &Path| plant_name(k, "kept adapter");
    let listed = || wgpu_name(&run, vars).unwrap_or_default();
    // Nothing changed: the kept answer is taken (so the misses below can be told apart).
    assert!(planted_is_taken(&kept, plant, listed, "kept adapter"));
    // The named manifest rewritten in place (same bytes, a new modification time).
    plant_name(&kept, "kept adapter");
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(&manifest, std::fs::read(lvp).unwrap()).unwrap();
    assert_eq!(
        listed(),
        real,
        "a kept answer hid a change to the manifest VK_DRIVER_FILES names"
    );
    // Other supplementary groups (as root: setpriv --groups), same files.
    // SAFETY: geteuid takes no arguments and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: groups: changing the groups needs root");
        return;
    }
    assert!(planted_is_taken(&kept, plant, listed, "kept adapter"));
    let o = Command::new("setpriv")
        .args(["--groups", "4242", "--"])
        .arg(env!("CARGO_BIN_EXE_accel"))
        .args(["devices", "--json"])
        .env("XDG_RUNTIME_DIR", &run)
        .env("VK_DRIVER_FILES", &named)
        .output()
        .unwrap();
    let v = json(&o);
    let name = backend(&v, "wgpu").and_then(|b| b["devices"][0]["name"].as_str().map(String::from));
    assert_eq!(
        name.as_deref(),
        Some(real.as_str()),
        "a kept answer was taken under other groups"
    );
}
