//! `accel doctor` against failures people reported: each case rebuilds a reported machine's
//! state as a tree of files (`--path.rootfs`: `/sys`, `/proc`, `/dev`, `/etc`, `/lib/modules`,
//! `/var/log`, `/tmp`), variables and a Python environment, and where only a driver library
//! can tell (cuInit's 802/803/804, NVML's 18, a context's out-of-memory), a stand-in
//! `libcuda.so.1` / `libnvidia-ml.so.1` built here from `tests/standin/driver.c` that returns
//! the code the broken machine returns. Each case asserts the cause id in the CUDA (or TPU,
//! or GPU API) section's verdict, that the verdict is the section's first failure, and the
//! key words of the fix; then the same state without the fault must name no cause at all.
//! The cases and the reports they come from are in `doctor_cases`.

mod cases;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// A machine's state under construction: a root folder, variables, a stand-in driver.
pub struct Tree {
    pub root: PathBuf,
    pub vars: Vec<(String, String)>,
    /// Where the stand-in driver goes (under the root), its version, and its codes
    /// (`STANDIN_*`); None: no driver library at all.
    pub standin: Option<Standin>,
    /// Run as this uid (no groups), not root.
    pub uid: Option<u32>,
    /// Folders put on LD_LIBRARY_PATH before the stand-in's.
    pub ld_path: Vec<String>,
}

#[derive(Clone)]
pub struct Standin {
    /// Folder under the root (`usr/lib/x86_64-linux-gnu`).
    pub dir: String,
    /// The user-space driver's version, in the file names (`580.95.05`).
    pub version: String,
    pub codes: Vec<(&'static str, String)>,
    /// Built without the entry points a context needs, as an incomplete copy of libcuda is.
    pub partial: bool,
}

impl Tree {
    fn new(name: &str) -> Tree {
        let root = std::env::temp_dir().join(format!("accel-corpus-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
        Tree {
            root,
            vars: Vec::new(),
            standin: None,
            uid: None,
            ld_path: Vec::new(),
        }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel.trim_start_matches('/'))
    }

    pub fn file(&self, rel: &str, text: &str) -> &Tree {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        self
    }

    pub fn bytes(&self, rel: &str, b: &[u8]) -> &Tree {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, b).unwrap();
        self
    }

    pub fn dir(&self, rel: &str) -> &Tree {
        std::fs::create_dir_all(self.path(rel)).unwrap();
        self
    }

    pub fn link(&self, rel: &str, target: &str) -> &Tree {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        let _ = std::fs::remove_file(&p);
        std::os::unix::fs::symlink(target, &p).unwrap();
        self
    }

    pub fn remove(&self, rel: &str) -> &Tree {
        let p = self.path(rel);
        let _ = std::fs::remove_dir_all(&p);
        let _ = std::fs::remove_file(&p);
        self
    }

    /// A device node stand-in: a file with this mode and group.
    pub fn node(&self, rel: &str, mode: u32, gid: u32) -> &Tree {
        self.file(rel, "");
        let p = self.path(rel);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        std::os::unix::fs::chown(&p, Some(0), Some(gid)).unwrap();
        self
    }

    pub fn var(&mut self, k: &str, v: &str) -> &mut Tree {
        self.vars.retain(|(x, _)| x != k);
        self.vars.push((k.to_string(), v.to_string()));
        self
    }

    pub fn code(&mut self, k: &'static str, v: impl ToString) -> &mut Tree {
        let s = self.standin.as_mut().expect("a stand-in driver");
        s.codes.retain(|(x, _)| *x != k);
        s.codes.push((k, v.to_string()));
        self
    }

    /// The Python environment's site-packages (`VIRTUAL_ENV` is set to its root).
    pub fn venv(&mut self) -> PathBuf {
        let sp = self.path("venv/lib/python3.12/site-packages");
        std::fs::create_dir_all(&sp).unwrap();
        let v = self.path("venv").display().to_string();
        self.var("VIRTUAL_ENV", &v);
        sp
    }

    /// An installed Python package (its `.dist-info`).
    pub fn dist(&mut self, name: &str, version: &str) -> &mut Tree {
        let sp = self.venv();
        std::fs::create_dir_all(sp.join(format!("{name}-{version}.dist-info"))).unwrap();
        self
    }

    /// PyTorch as its wheel installs it: `torch/version.py` and the `.dist-info`.
    pub fn torch(&mut self, version: &str, cuda: Option<&str>) -> &mut Tree {
        let sp = self.venv();
        std::fs::create_dir_all(sp.join("torch")).unwrap();
        std::fs::write(
            sp.join("torch/version.py"),
            format!(
                "from typing import Optional\n\n__all__ = ['__version__', 'debug', 'cuda', \
                 'git_version', 'hip']\n__version__ = '{version}'\ndebug = False\ncuda: \
                 Optional[str] = {}\ngit_version = '0123456789abcdef'\nhip: Optional[str] = \
                 None\n",
                cuda.map(|c| format!("'{c}'"))
                    .unwrap_or_else(|| "None".into())
            ),
        )
        .unwrap();
        self.dist("torch", version)
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// The stand-in driver libraries, built once per run (None where there is no C compiler).
fn standin_build() -> Option<&'static (PathBuf, PathBuf, PathBuf)> {
    static BUILT: std::sync::OnceLock<Option<(PathBuf, PathBuf, PathBuf)>> =
        std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/standin/driver.c");
            let out = std::env::temp_dir().join(format!("accel-standin-{}", std::process::id()));
            std::fs::create_dir_all(&out).ok()?;
            std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o755)).ok()?;
            let build = |def: &str, so: &str, soname: &str| -> Option<PathBuf> {
                let p = out.join(so);
                std::fs::create_dir_all(p.parent()?).ok()?;
                let ok = Command::new("cc")
                    .args(["-shared", "-fPIC", "-O1"])
                    .args(def.split(' '))
                    .arg(format!("-Wl,-soname,{soname}"))
                    .arg("-o")
                    .arg(&p)
                    .arg(&src)
                    .status()
                    .ok()?
                    .success();
                ok.then_some(p)
            };
            Some((
                build("-DLIBCUDA", "libcuda.so", "libcuda.so.1")?,
                build("-DLIBNVML", "libnvidia-ml.so", "libnvidia-ml.so.1")?,
                build("-DLIBCUDA -DPARTIAL", "partial/libcuda.so", "libcuda.so.1")?,
            ))
        })
        .as_ref()
}

/// Runs `accel doctor --json` on the tree.
pub fn doctor(t: &Tree) -> Option<Value> {
    let mut ld = t.ld_path.clone();
    if let Some(s) = &t.standin {
        let (full, nvml, partial) = standin_build()?;
        let cuda = if s.partial { partial } else { full };
        let dir = t.path(&s.dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (built, stem, soname) in [
            (cuda, "libcuda.so", "libcuda.so.1"),
            (nvml, "libnvidia-ml.so", "libnvidia-ml.so.1"),
        ] {
            let file = dir.join(format!("{stem}.{}", s.version));
            std::fs::copy(built, &file).unwrap();
            for name in [soname, stem] {
                let _ = std::fs::remove_file(dir.join(name));
                std::os::unix::fs::symlink(file.file_name().unwrap(), dir.join(name)).unwrap();
            }
        }
        ld.push(dir.display().to_string());
    }
    let runtime = t.path("run/user/rt");
    std::fs::create_dir_all(&runtime).unwrap();
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_accel"));
    c.args(["doctor", "--json", "--path.rootfs"]).arg(&t.root);
    c.env_clear();
    c.env("PATH", std::env::var("PATH").unwrap_or_default());
    c.env("HOME", t.path("home"));
    c.env("XDG_RUNTIME_DIR", &runtime);
    c.env("ACCEL_PJRT_TIMEOUT", "5");
    c.current_dir(&t.root);
    if !t.vars.iter().any(|(k, _)| k == "VIRTUAL_ENV") {
        // No Python environment of the test machine's own: an empty one.
        let v = t.path("venv");
        std::fs::create_dir_all(v.join("lib/python3.12/site-packages")).unwrap();
        c.env("VIRTUAL_ENV", v);
    }
    for (k, v) in &t.vars {
        c.env(k, v);
    }
    if let Some(s) = &t.standin {
        for (k, v) in &s.codes {
            c.env(k, v);
        }
    }
    if let Some(x) = t.vars.iter().find(|(k, _)| k == "LD_LIBRARY_PATH") {
        ld.push(x.1.clone());
    }
    c.env("LD_LIBRARY_PATH", ld.join(":"));
    if let Some(uid) = t.uid {
        std::os::unix::fs::chown(&runtime, Some(uid), Some(uid)).unwrap();
        let mut s = Command::new("setpriv");
        s.args([
            &format!("--reuid={uid}"),
            &format!("--regid={uid}"),
            "--clear-groups",
            "--",
        ]);
        s.arg(c.get_program()).args(c.get_args());
        s.env_clear();
        for (k, v) in c.get_envs() {
            if let Some(v) = v {
                s.env(k, v);
            }
        }
        s.current_dir(&t.root);
        c = s;
    }
    let o = c.output().expect("accel runs");
    Some(serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    }))
}

/// Without a C compiler there is no stand-in driver: a skip, or a failure where the test
/// command requires it (`ACCEL_TEST_REQUIRE` names `standin`).
fn no_standin() {
    accelkit_testkit::skip(
        "standin",
        "no C compiler to build the stand-in driver (tests/standin/driver.c)",
        "doctor_corpus",
    );
}

fn section<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["sections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["backend"] == name)
        .unwrap_or_else(|| panic!("no section {name}"))
}

/// Every cause id a case names as a failure, to check the healthy machines name none.
fn named_causes(v: &Value) -> Vec<String> {
    v["sections"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["checks"].as_array().unwrap())
        .filter(|c| c["status"] == "fail")
        .filter_map(|c| c["cause"].as_str())
        .filter(|c| cases::ALL_CAUSES.contains(c))
        .map(str::to_string)
        .collect()
}

fn whoami_can_reach(p: &Path) -> bool {
    p.ancestors().all(|a| {
        a.as_os_str().is_empty()
            || std::fs::metadata(a).is_ok_and(|m| m.permissions().mode() & 0o001 != 0)
    })
}

/// This machine's own `libcuda.so.1`, where it has an NVIDIA driver: the doctor finds the
/// driver's libraries through the loader and in the driver's folders as usual, not under
/// `--path.rootfs` (`doctor::diagnose_at`), so a case without a stand-in would get this one,
/// and with it this machine's GPU.
fn own_libcuda() -> Option<PathBuf> {
    accelkit_core::system::NVIDIA_DRIVER_DIRS
        .iter()
        .map(|d| Path::new(d).join("libcuda.so.1"))
        .find(|p| p.exists())
        .or_else(|| {
            // The loader's cache: `libcuda.so.1 (libc6,x86-64) => /path/libcuda.so.1`.
            let o = Command::new("ldconfig").arg("-p").output().ok()?;
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter(|l| l.trim_start().starts_with("libcuda.so.1 "))
                .find_map(|l| l.split("=> ").nth(1).map(|p| PathBuf::from(p.trim())))
        })
}

#[test]
fn the_corpus_of_reported_failures_is_named_cause_first() {
    // The corpus's machines have their stand-in's driver or none, which a machine with an
    // NVIDIA driver of its own cannot rebuild: the cases without a stand-in would load this
    // machine's driver, and every case's doctor would start its GPU (88 runs: minutes).
    if let Some(lib) = own_libcuda() {
        accelkit_testkit::skip(
            "standin",
            &format!(
                "this machine's own NVIDIA driver ({}) would be loaded by the cases without a \
                 stand-in, since the doctor finds driver libraries outside --path.rootfs",
                lib.display()
            ),
            "the_corpus_of_reported_failures_is_named_cause_first",
        );
        return;
    }
    // SAFETY: getuid takes no arguments and cannot fail.
    let root = unsafe { libc::getuid() } == 0;
    let exe = Path::new(env!("CARGO_BIN_EXE_accel"));
    let mut named = 0;
    let mut ran = 0;
    let mut failures = Vec::new();
    for case in cases::all() {
        let mut t = Tree::new(case.name);
        (case.build)(&mut t, true);
        if t.uid.is_some() && !(root && whoami_can_reach(exe)) {
            println!(
                "skipped: setpriv: {} needs root and a binary other users can run",
                case.name
            );
            continue;
        }
        let Some(v) = doctor(&t) else {
            no_standin();
            return;
        };
        ran += 1;
        let s = section(&v, case.section);
        let first = &s["checks"][0];
        let first_fail = s["checks"]
            .as_array()
            .unwrap()
            .iter()
            .position(|c| c["status"] == "fail");
        // The key words are in the fix, or in what was found (versions, paths, PIDs).
        let said = format!(
            "{} {}",
            first["found"].as_str().unwrap_or(""),
            first["fix"].as_str().unwrap_or("")
        );
        let missing: Vec<&&str> = case
            .fix_words
            .iter()
            .filter(|w| !said.contains(**w))
            .collect();
        if first["cause"] == case.cause
            && s["cause"] == case.cause
            && first_fail == Some(0)
            && missing.is_empty()
        {
            named += 1;
        } else {
            failures.push(format!(
                "{} ({}): wanted {} with {:?} in the fix; the {} section says {:#}",
                case.name, case.report, case.cause, missing, case.section, s["checks"][0]
            ));
        }
        // The same machine without the fault names no cause.
        let mut h = Tree::new(&format!("{}-healthy", case.name));
        (case.build)(&mut h, false);
        if let Some(hv) = doctor(&h) {
            let n = named_causes(&hv);
            if !n.is_empty() {
                failures.push(format!(
                    "{} without the fault still names {n:?}: {:#}",
                    case.name,
                    section(&hv, case.section)["checks"][0]
                ));
            }
        }
    }
    println!("the doctor named {named} of {ran} reported failures with their cause and fix");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(ran >= 30, "only {ran} cases ran");
}

#[test]
fn a_libcuda_without_every_entry_point_is_named_not_a_crash() {
    let mut t = Tree::new("partial-libcuda");
    cases::gpu_host(&mut t, 0x1eb8);
    t.standin.as_mut().unwrap().partial = true;
    // No Vulkan driver: a GPU machine's own (found as usual, not under --path.rootfs) would be
    // its best device, wgpu:0; this tree's GPU has only the partial libcuda.
    let no_icd = t.path("no-vulkan-driver.json").display().to_string();
    t.var("VK_DRIVER_FILES", &no_icd);
    let Some(v) = doctor(&t) else {
        no_standin();
        return;
    };
    let s = section(&v, "cuda");
    assert_eq!(s["checks"][0]["status"], "fail", "{s:#}");
    let found = s["checks"][0]["found"].as_str().unwrap();
    assert!(
        found.contains("lacks")
            && !found.contains("cuDevicePrimaryCtxRetain")
            && found.contains("cuLaunchKernel"),
        "{found}"
    );
    assert_eq!(v["best_device"], "cpu");
}

#[test]
fn fifos_where_the_doctor_reads_files_are_refused_not_waited_on() {
    // Before: the kernel log and libtorch_cuda.so were opened with a plain open(2), which
    // waits forever for a FIFO's writer.
    let mut t = Tree::new("fifos");
    cases::gpu_host(&mut t, 0x2b85);
    t.torch("2.8.0+cu128", Some("12.8"));
    let sp = t.venv();
    std::fs::create_dir_all(sp.join("torch/lib")).unwrap();
    for fifo in [
        t.path("var/log/kern.log"),
        sp.join("torch/lib/libtorch_cuda.so"),
        t.path("proc/driver/nvidia/capabilities/gpu0/mig/config"),
        t.path("etc/group"),
    ] {
        std::fs::create_dir_all(fifo.parent().unwrap()).unwrap();
        let _ = std::fs::remove_file(&fifo);
        assert!(Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
    }
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(doctor(&t).map(|v| v["kind"].clone()));
    });
    match rx.recv_timeout(std::time::Duration::from_secs(60)) {
        Ok(Some(kind)) => assert_eq!(kind, "doctor"),
        Ok(None) => no_standin(),
        Err(_) => panic!("accel doctor waited on a FIFO for 60 s"),
    }
}
