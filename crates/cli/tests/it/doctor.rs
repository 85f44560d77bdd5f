//! `accel doctor` on this machine and in broken environments made of real files and
//! variables: every check's keys, every FAIL and WARN with a fix, and the exit code.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn doctor(env: &[(&str, &str)], remove: &[&str]) -> (Output, Value) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_accel"));
    c.args(["doctor", "--json"]);
    // The CUDA major is chosen here as on a user's machine, unless a test sets it (the GPU
    // check runs these tests again with ACCEL_CUDA_MAJOR forced to the other major).
    c.env_remove("ACCEL_CUDA_MAJOR");
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
        assert_eq!(
            keys(s),
            ["backend", "probe_seconds", "usable", "cause", "checks"]
        );
        let checks = s["checks"].as_array().unwrap();
        // The verdict comes first, and carries the section's cause.
        assert_eq!(
            checks[0]["id"],
            format!("{}.verdict", s["backend"].as_str().unwrap())
        );
        assert_eq!(checks[0]["cause"], s["cause"]);
        for c in checks {
            assert_eq!(
                keys(c),
                [
                    "id",
                    "title",
                    "status",
                    "found",
                    "fix",
                    "cause",
                    "consequence_of"
                ],
                "{c}"
            );
            let status = c["status"].as_str().unwrap();
            assert!(["pass", "fail", "warn", "skip"].contains(&status), "{c}");
            assert!(!c["found"].as_str().unwrap().is_empty(), "{c}");
            if status == "fail" || status == "warn" {
                assert!(c["fix"].as_str().unwrap().len() > 10, "no fix: {c}");
                // Every failure has a stable cause id for scripts.
                assert!(c["cause"].as_str().is_some_and(|x| x.contains('.')), "{c}");
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
    let found = c["found"].as_str().unwrap();
    assert!(found.contains("PyTorch 2.7.0+cu128 (CUDA 12.8)"), "{c}");
    assert!(found.contains("JAX's CUDA 12 plugin"), "{c}");
    // With no CUDA library of either major to decide it, accel takes PyTorch's major. Where
    // this machine has a whole major of its own, found outside VIRTUAL_ENV (a GPU machine's
    // CUDA toolkit on the loader path, its PyTorch in /opt/*/.venv: `choose_major` then says
    // its "NVRTC and cuBLAS were found"), that major is used, and a CUDA 13 names PyTorch's
    // CUDA 12 as another major.
    let m = find(&v, "cuda.major");
    let mf = m["found"].as_str().unwrap();
    if mf.contains("were found") || mf.contains("were both found") {
        if mf.starts_with("CUDA 13") {
            assert_eq!(c["status"], "warn", "{c}");
        }
    } else if !mf.contains("of CUDA") {
        assert!(mf.starts_with("CUDA 12"), "{m}");
        assert_eq!(c["status"], "pass", "{c}");
    }
    // With CUDA 13's NVRTC beside them (the real one, from the test environment), accel
    // uses CUDA 13, and PyTorch's CUDA 12 is named as another major, with the fix.
    let Some(real) = std::env::var_os("VIRTUAL_ENV")
        .map(PathBuf::from)
        .and_then(|v| std::fs::read_dir(v.join("lib")).ok()?.flatten().next())
        .map(|py| {
            py.path()
                .join("site-packages/nvidia/cu13/lib/libnvrtc.so.13")
        })
        .filter(|p| p.is_file())
    else {
        println!("skipped: nvrtc: no CUDA 13 NVRTC in VIRTUAL_ENV");
        return;
    };
    let lib = venv.path().join(sp).join("nvidia/cu13/lib");
    std::fs::create_dir_all(&lib).unwrap();
    std::os::unix::fs::symlink(&real, lib.join("libnvrtc.so.13")).unwrap();
    let (_, v) = doctor(&[("VIRTUAL_ENV", venv.path().to_str().unwrap())], &[]);
    let m = find(&v, "cuda.major");
    assert!(m["found"].as_str().unwrap().starts_with("CUDA 13"), "{m}");
    let c = find(&v, "cuda.python_wheels");
    assert_eq!(c["status"], "warn", "{c}");
    assert!(c["found"].as_str().unwrap().contains("not CUDA 13"), "{c}");
    assert!(
        c["fix"]
            .as_str()
            .unwrap()
            .contains("nvidia-cuda-nvrtc-cu12 nvidia-cublas-cu12"),
        "{c}"
    );
}

/// The CUDA 12 wheels alone (what PyTorch's cu12x builds bring) are named with the versions
/// the libraries report, and CUDA 12 is the major accel would use.
#[test]
fn the_cuda_12_wheels_are_found_with_their_versions() {
    let Some(venv) = std::env::var_os("VIRTUAL_ENV")
        .map(|v| PathBuf::from(v).join("cu12"))
        .filter(|v| v.join("bin/python").exists())
    else {
        accelkit_testkit::skip(
            "cuda12",
            "no CUDA 12 wheels in $VIRTUAL_ENV/cu12 (scripts/test.sh installs them)",
            "doctor",
        );
        return;
    };
    let (o, v) = doctor(
        &[("VIRTUAL_ENV", venv.to_str().unwrap())],
        &["ACCEL_CUDA_MAJOR"],
    );
    assert!(o.status.success());
    well_formed(&v);
    let libs = find(&v, "cuda.libraries");
    let found = libs["found"].as_str().unwrap();
    // Versions from the libraries themselves (nvrtcVersion, cublasGetProperty), not the
    // wheels' names.
    assert!(
        found.contains("nvrtc 12.9 (python wheel (VIRTUAL_ENV))"),
        "{libs}"
    );
    assert!(found.contains("cublas 12.9."), "{libs}");
    assert!(found.contains("cublaslt 12.9."), "{libs}");
    let m = find(&v, "cuda.major");
    assert_eq!(m["status"], "pass", "{m}");
    assert!(m["found"].as_str().unwrap().starts_with("CUDA 12: "), "{m}");
    // The same environment, in the text a person reads.
    let o = Command::new(env!("CARGO_BIN_EXE_accel"))
        .arg("doctor")
        .env("VIRTUAL_ENV", &venv)
        .output()
        .unwrap();
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(t.contains("nvrtc 12.9") && t.contains("CUDA 12: "), "{t}");
}

#[test]
fn cuda_visible_devices_empty_hides_every_gpu() {
    let (o, v) = doctor(&[("CUDA_VISIBLE_DEVICES", "")], &[]);
    well_formed(&v);
    if find(&v, "cuda.gpu_present")["status"] == "pass" {
        // An NVIDIA GPU here: hiding it is the CUDA section's cause of failure (exit 1).
        let cuda = &v["sections"][1];
        assert_eq!(cuda["cause"], "cuda.visible_devices", "{cuda:#}");
        assert_eq!(cuda["checks"][0]["status"], "fail", "{cuda:#}");
        assert_eq!(o.status.code(), Some(1));
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains("cuda.visible_devices"), "{e}");
    } else {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
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
    well_formed(&v);
    if cfg!(target_os = "linux") {
        // A FAIL check: exit 1, naming it (the CPU still works, and the JSON is complete).
        assert_eq!(o.status.code(), Some(1));
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains("wgpu.vulkan_icd"), "{e}");
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

/// `accel ARGS` run in `cwd` with no Python environment named and an empty HOME, so only the
/// working directory's `.venv` could hold a plugin.
fn accel_in(cwd: &Path, home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_accel"))
        .args(args)
        .current_dir(cwd)
        .env_remove("VIRTUAL_ENV")
        .env_remove("CONDA_PREFIX")
        .env_remove("ACCEL_PJRT_PLUGIN")
        .env_remove("PJRT_NAMES_AND_LIBRARY_PATHS")
        .env("HOME", home)
        .output()
        .expect("accel runs")
}

#[test]
fn a_planted_plugin_in_an_untrusted_venv_is_never_loaded() {
    use std::os::unix::fs::PermissionsExt;
    let root = std::env::temp_dir().join(format!("accel-plant-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let repo = root.join("cloned-repo");
    let sp = repo.join(".venv/lib/python3.11/site-packages/evil");
    std::fs::create_dir_all(&sp).unwrap();
    let home = root.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let marker = root.join("MARKER");
    if !planted_plugin(&sp.join("pjrt_c_api_evil_plugin.so"), &marker) {
        println!("skipped: gcc: cannot build the planted plugin");
        return;
    }
    let mode =
        |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    // 1. The repository folder is writable by everyone: never loaded; doctor says why.
    mode(&repo, 0o777);
    let o = accel_in(&repo, &home, &["devices"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        !marker.exists(),
        "the planted plugin ran from a world-writable folder"
    );
    let o = accel_in(&repo, &home, &["doctor", "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let c = find(&v, "env.untrusted_folders");
    assert_eq!(c["status"], "warn", "{c}");
    assert!(
        c["found"]
            .as_str()
            .unwrap()
            .contains("is writable by everyone"),
        "{c}"
    );
    assert!(!marker.exists());
    // 2. The .venv belongs to another user: never loaded either.
    mode(&repo, 0o755);
    let venv = repo.join(".venv");
    let chowned = Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(&venv)
        .status()
        .is_ok_and(|s| s.success());
    if chowned {
        let o = accel_in(&repo, &home, &["doctor", "--json"]);
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        let c = find(&v, "env.untrusted_folders");
        assert!(
            c["found"]
                .as_str()
                .unwrap()
                .contains("belongs to uid 65534"),
            "{c}"
        );
        assert!(
            !marker.exists(),
            "the planted plugin ran from another user's folder"
        );
        let _ = Command::new("chown")
            .args(["-R", &format!("{}:{}", uid(), uid())])
            .arg(&venv)
            .status();
    } else {
        println!("skipped: chown: cannot give the folder to another user (not root)");
    }
    // 3. Control: the user's own private folder is searched, so the check above can fail.
    let o = accel_in(&repo, &home, &["devices"]);
    assert!(o.status.success());
    assert!(
        marker.exists(),
        "the control failed: the plugin did not load from the user's own .venv, so the test proves nothing"
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// Builds a PJRT "plugin" at `so` whose constructor, which runs at dlopen, creates `marker`
/// (mode 0644, by whoever loaded it). False when gcc cannot build it.
fn planted_plugin(so: &Path, marker: &Path) -> bool {
    let src = so.with_extension("c");
    std::fs::write(
        &src,
        format!(
            "#include <fcntl.h>\n#include <unistd.h>\n__attribute__((constructor)) static void planted(void) {{ int fd = open(\"{}\", O_CREAT | O_WRONLY, 0644); if (fd >= 0) close(fd); }}\n",
            marker.display()
        ),
    )
    .unwrap();
    let built = Command::new("gcc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(so)
        .arg(&src)
        .status()
        .is_ok_and(|s| s.success());
    let _ = std::fs::remove_file(&src);
    built
}

/// A plugin planted under `/opt` by another user (uid 4242) is never loaded by `accel
/// devices` or `accel doctor`, run as root or as a third user (uid 4343), while the same
/// plugin in a root-owned `/opt` folder is (the control). `/opt` is a private tmpfs in a mount
/// namespace of the test's own (`unshare --mount`), so the machine's `/opt` is never touched.
#[test]
fn a_plugin_under_opt_that_another_user_owns_is_never_loaded() {
    if uid() != 0 {
        println!("skipped: unshare: the /opt test needs root (a mount namespace, chown)");
        return;
    }
    let ok = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        println!("skipped: unshare: no mount namespace here");
        return;
    }
    let root = std::env::temp_dir().join(format!("accel-opt-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let so = root.join("pjrt_c_api_evil_plugin.so");
    let marker = root.join("markers/MARKER");
    std::fs::create_dir_all(marker.parent().unwrap()).unwrap();
    // Any user may leave the marker: the third user's accel must be able to, if it loads it.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        marker.parent().unwrap(),
        std::fs::Permissions::from_mode(0o1777),
    )
    .unwrap();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
    if !planted_plugin(&so, &marker) {
        println!("skipped: gcc: cannot build the planted plugin");
        return;
    }
    // A real layout (jupyter/docker-stacks' /opt/conda belongs to uid 1000 and is
    // group-writable); here the folder is another user's outright, with ordinary modes.
    let setup = |owner: &str| {
        format!(
            "set -e; mount -t tmpfs -o mode=755 none /opt; \
             sp=/opt/shared/lib/python3.11/site-packages/pkg; mkdir -p $sp; \
             cp {so} $sp/; chmod -R u=rwX,go=rX /opt/shared; chown -R {owner} /opt/shared; ",
            so = so.display()
        )
    };
    let run = |owner: &str, as_user: &str, args: &str| -> Output {
        let cmd = format!(
            "{}exec {as_user} {} {args}",
            setup(owner),
            env!("CARGO_BIN_EXE_accel")
        );
        Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c", &cmd])
            .current_dir(&root)
            .env_remove("VIRTUAL_ENV")
            .env_remove("CONDA_PREFIX")
            .env_remove("ACCEL_PJRT_PLUGIN")
            .env_remove("PJRT_NAMES_AND_LIBRARY_PATHS")
            .env_remove("ACCEL_TRUSTED_DIRS")
            .env_remove("XDG_RUNTIME_DIR")
            .env_remove("ACCEL_CACHE_DIR")
            .env("ACCEL_RUNTIME_CACHE", "off")
            .env("HOME", &root)
            .output()
            .expect("unshare runs")
    };
    let third = "setpriv --reuid 4343 --regid 4343 --clear-groups";
    let mut users = vec![("", "root")];
    // As a third user too, where that user can reach the binary (every folder above it
    // searchable by others: a checkout under a private folder is not).
    let exe = Path::new(env!("CARGO_BIN_EXE_accel"));
    if reachable_by_others(exe) {
        users.push((third, "a third user"));
    } else {
        println!(
            "skipped: third user: {} is not reachable by other users (root only)",
            exe.display()
        );
    }
    for (as_user, who) in users {
        for args in ["devices", "doctor --json"] {
            let o = run("4242:4242", as_user, args);
            assert!(
                o.status.code().is_some_and(|c| c <= 1),
                "accel {args} as {who}: {o:?}"
            );
            assert!(
                !marker.exists(),
                "accel {args} as {who} loaded a plugin from a folder uid 4242 owns: {}",
                String::from_utf8_lossy(&o.stdout)
            );
            if args.starts_with("doctor") {
                let v: Value = serde_json::from_slice(&o.stdout).unwrap();
                let c = find(&v, "env.untrusted_folders");
                let found = c["found"].as_str().unwrap();
                assert_eq!(c["status"], "warn", "{c}");
                assert!(
                    found.contains("/opt/shared") && found.contains("belongs to uid 4242"),
                    "doctor as {who} does not name the folder and its owner: {found}"
                );
                assert!(found.contains("mode 755"), "{found}");
            }
        }
        // The control: the same plugin in a folder root owns is loaded, so the check above
        // can fail.
        let o = run("0:0", as_user, "devices");
        assert!(o.status.success(), "{o:?}");
        assert!(
            marker.exists(),
            "the control failed: as {who}, the plugin did not load from a root-owned /opt \
             folder either, so the test proves nothing"
        );
        std::fs::remove_file(&marker).unwrap();
    }
    // ACCEL_TRUSTED_DIRS is the user's word for a folder another user owns: searched then
    // (`exec env` inside the namespace, after the folder is made).
    let o = run("4242:4242", "env ACCEL_TRUSTED_DIRS=/opt/shared", "devices");
    assert!(o.status.success(), "{o:?}");
    assert!(
        marker.exists(),
        "a folder listed in ACCEL_TRUSTED_DIRS was not searched"
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// Whether `p` and every folder above it may be entered (and `p` run) by other users.
fn reachable_by_others(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.ancestors().all(|a| {
        a.as_os_str().is_empty()
            || std::fs::metadata(a).is_ok_and(|m| m.permissions().mode() & 0o001 != 0)
    })
}

fn uid() -> u32 {
    // SAFETY: getuid takes no arguments and cannot fail.
    unsafe { libc::getuid() }
}

#[test]
fn out_of_range_accel_variables_are_named_not_a_crash() {
    // `inf` once ended every command with "cannot convert float seconds to Duration".
    for bad in ["inf", "1e20", "-1", "nan"] {
        let (o, v) = doctor(&[("ACCEL_PJRT_TIMEOUT", bad)], &[]);
        assert!(o.status.code().is_some_and(|c| c <= 1), "{o:?}");
        let c = find(&v, "env.accel_variables");
        assert_eq!(c["status"], "fail", "{c}");
        assert!(
            c["found"].as_str().unwrap().starts_with(&format!(
                "ACCEL_PJRT_TIMEOUT='{bad}' is not valid: it takes seconds"
            )),
            "{c}"
        );
    }
    // A kernel family that does not exist (was ignored, and doctor said PASS).
    let (_, v) = doctor(&[("ACCEL_CPU_KERNEL", "bogus")], &[]);
    let c = find(&v, "env.accel_variables");
    assert_eq!(c["status"], "fail", "{c}");
    assert!(
        c["found"]
            .as_str()
            .unwrap()
            .starts_with("ACCEL_CPU_KERNEL='bogus' is not valid"),
        "{c}"
    );
    // A misspelt name is named too, instead of being ignored.
    let (_, v) = doctor(&[("ACCEL_PJRT_TIMOUT", "5")], &[]);
    let c = find(&v, "env.accel_variables");
    assert!(
        c["found"]
            .as_str()
            .unwrap()
            .contains("ACCEL_PJRT_TIMOUT is set, but accel reads no such variable"),
        "{c}"
    );
    // accel devices says it per plugin, and does not load one it cannot time-limit.
    let o = Command::new(env!("CARGO_BIN_EXE_accel"))
        .arg("devices")
        .env("ACCEL_PJRT_TIMEOUT", "inf")
        .output()
        .unwrap();
    assert!(o.status.success());
    let s = String::from_utf8_lossy(&o.stdout);
    // Only where a plugin is found ("no PJRT plugin found" and its hint name plugins too).
    if !s.contains("no PJRT plugin found") {
        assert!(s.contains("ACCEL_PJRT_TIMEOUT='inf' is not valid"), "{s}");
    }
}

#[test]
fn a_python3_that_hangs_is_killed_and_named() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("slowpython");
    let py = dir.path().join("python3");
    std::fs::write(&py, "#!/bin/sh\nsleep 60\n").unwrap();
    std::fs::set_permissions(&py, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        dir.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // The doctor's own time on this machine, with a python3 that answers (a GPU machine's
    // CUDA context, libraries and plugins take seconds; no time at all here).
    let t = std::time::Instant::now();
    let _ = doctor(&[], &["VIRTUAL_ENV", "CONDA_PREFIX"]);
    let own = t.elapsed().as_secs_f64();
    let t = std::time::Instant::now();
    let (o, v) = doctor(&[("PATH", &path)], &["VIRTUAL_ENV", "CONDA_PREFIX"]);
    let took = t.elapsed().as_secs_f64();
    assert!(
        took < 5.0 + own,
        "doctor took {took:.1} s behind a hanging python3 ({own:.1} s with one that answers)"
    );
    assert!(o.status.code().is_some_and(|c| c <= 1));
    let c = find(&v, "env.untrusted_folders");
    assert_eq!(c["status"], "warn", "{c}");
    let found = c["found"].as_str().unwrap();
    assert!(found.contains(&py.display().to_string()), "{c}");
    assert!(found.contains("did not answer within 3 s"), "{c}");
}

#[test]
fn a_runtime_folder_someone_else_can_write_is_not_used() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = TempDir::new("tmpdir");
    // SAFETY: getuid takes no arguments and cannot fail.
    let uid = unsafe { libc::getuid() };
    let planted = tmp.path().join(format!("accel-runtime-{uid}"));
    std::fs::create_dir_all(&planted).unwrap();
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o777)).unwrap();
    let (_, v) = doctor(
        &[("TMPDIR", tmp.path().to_str().unwrap())],
        &["XDG_RUNTIME_DIR"],
    );
    let c = find(&v, "env.runtime_dir");
    assert_eq!(c["status"], "warn", "{c}");
    assert!(
        c["found"]
            .as_str()
            .unwrap()
            .contains("is not a private folder"),
        "{c}"
    );
    // Private and ours: used.
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o700)).unwrap();
    let (_, v) = doctor(
        &[("TMPDIR", tmp.path().to_str().unwrap())],
        &["XDG_RUNTIME_DIR"],
    );
    let c = find(&v, "env.runtime_dir");
    assert_eq!(c["status"], "pass", "{c}");
    assert_eq!(c["found"], planted.display().to_string());
}

/// `accel` run as `prefix... accel args...`: its JSON output.
fn accel_under(prefix: &[&str], args: &[&str]) -> Value {
    let (prog, pre) = prefix.split_first().expect("a prefix");
    let o = Command::new(prog)
        .args(pre)
        .arg(env!("CARGO_BIN_EXE_accel"))
        .args(args)
        .output()
        .expect("the prefix runs");
    assert!(
        o.status.success() || args[0] == "doctor",
        "{prefix:?} accel {args:?}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&o.stdout)))
}

/// The CPU's "threads" in `accel devices --json`, and a two-thread-sized product's relative
/// error from `accel bench matmul` (checked there against an f64 reference), both run under
/// `prefix`.
fn threads_and_product(prefix: &[&str]) -> (usize, f64) {
    let d = accel_under(prefix, &["devices", "--json"]);
    let cpu = d["backends"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["backend"] == "cpu")
        .expect("the cpu backend");
    let threads = cpu["devices"][0]["details"]["threads"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no thread count in {cpu:#}"));
    let b = accel_under(
        prefix,
        &[
            "bench", "matmul", "--device", "cpu", "--size", "300", "--iters", "3", "--json",
        ],
    );
    let err = b["results"][0]["max_rel_error"]
        .as_f64()
        .unwrap_or_else(|| panic!("no error figure in {b:#}"));
    (threads, err)
}

fn allowed_cpus() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_string();
    list.split(',')
        .map(|r| match r.split_once('-') {
            Some((a, b)) => b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1,
            None => 1,
        })
        .sum()
}

/// With one CPU allowed (taskset) the kernels run on one thread, and products still come
/// out right (matmul's helper is not started to take turns with the caller).
#[cfg(target_os = "linux")]
#[test]
fn one_allowed_cpu_gives_one_thread_and_right_products() {
    if Command::new("taskset").arg("-V").output().is_err() {
        println!("skipped: cpu: taskset (util-linux) is not installed");
        return;
    }
    let (threads, err) = threads_and_product(&["taskset", "-c", "0"]);
    assert_eq!(threads, 1, "one CPU allowed");
    assert!(err < 1e-5, "relative error {err}");
    if allowed_cpus() >= 2 {
        let (threads, err) = threads_and_product(&["taskset", "-c", "0,1"]);
        assert_eq!(threads, 2, "two CPUs allowed");
        assert!(err < 1e-5, "relative error {err}");
    }
}

/// A new cgroup with a CPU quota (v2 `cpu.max` or v1 `cpu.cfs_quota_us`), removed on drop.
struct QuotaGroup(PathBuf);

impl QuotaGroup {
    /// `quota_us` per 100 ms period; the reason where this machine cannot make one.
    fn new(quota_us: u32) -> Result<QuotaGroup, String> {
        let name = format!("accel-test-{}-{quota_us}", std::process::id());
        let v2 = Path::new("/sys/fs/cgroup");
        let ctrls = std::fs::read_to_string(v2.join("cgroup.controllers")).unwrap_or_default();
        if ctrls.split_whitespace().any(|c| c == "cpu") {
            let dir = v2.join(&name);
            std::fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let g = QuotaGroup(dir);
            std::fs::write(g.0.join("cpu.max"), format!("{quota_us} 100000"))
                .map_err(|e| format!("cpu.max: {e} (is +cpu in the parent's subtree_control?)"))?;
            return Ok(g);
        }
        let v1 = Path::new("/sys/fs/cgroup/cpu");
        if !v1.join("cpu.cfs_quota_us").exists() {
            return Err("no cgroup cpu controller mounted (v2 or v1)".into());
        }
        let dir = v1.join(&name);
        std::fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let g = QuotaGroup(dir);
        std::fs::write(g.0.join("cpu.cfs_period_us"), "100000")
            .and_then(|_| std::fs::write(g.0.join("cpu.cfs_quota_us"), quota_us.to_string()))
            .map_err(|e| format!("cpu.cfs_quota_us: {e}"))?;
        Ok(g)
    }

    /// A shell that enters the group and runs the rest of the command line.
    fn prefix(&self) -> Vec<String> {
        let procs = self.0.join("cgroup.procs");
        vec![
            "sh".into(),
            "-c".into(),
            format!("echo $$ > '{}' && exec \"$@\"", procs.display()),
            "sh".into(),
        ]
    }
}

impl Drop for QuotaGroup {
    fn drop(&mut self) {
        // Its processes have exited; an empty cgroup is removed with rmdir.
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// A container given 1.5 CPUs splits work over two threads (std's available_parallelism
/// would round down to one), one given half a CPU over one; products are right in both.
#[cfg(target_os = "linux")]
#[test]
fn cgroup_cpu_quotas_size_the_threads_rounded() {
    if allowed_cpus() < 2 {
        println!("skipped: cpu: one CPU allowed here, nothing for a quota to cut");
        return;
    }
    for (quota_us, want) in [(150_000, 2), (50_000, 1)] {
        let g = match QuotaGroup::new(quota_us) {
            Ok(g) => g,
            Err(why) => {
                accelkit_testkit::skip("cgroup", &why.to_string(), "doctor");
                return;
            }
        };
        let prefix = g.prefix();
        let prefix: Vec<&str> = prefix.iter().map(String::as_str).collect();
        let (threads, err) = threads_and_product(&prefix);
        assert_eq!(threads, want, "a quota of {quota_us} us per 100 ms");
        assert!(err < 1e-5, "relative error {err}");
        let d = accel_under(&prefix, &["doctor", "--json"]);
        let c = find(&d, "cpu.threads");
        let detail = c.to_string();
        assert!(
            detail.contains(&format!("quota is {:.2} CPUs", quota_us as f64 / 1e5)),
            "{c:#}"
        );
    }
}
