//! Every CUDA kernel compiled to a CUBIN for every architecture from Turing to Blackwell, by
//! NVRTC 12 and by NVRTC 13 (`archs_of`: 8.6 and 8.9 by one each), each CUBIN's target read
//! back by NVIDIA's own `cuobjdump`, not by accel. One process uses one CUDA major, so the test runs itself twice as a child process,
//! with `ACCEL_CUDA_MAJOR=12` and `=13`; each child writes its CUBINs into a folder the parent
//! then hands to `cuobjdump`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::backend::cuda::kernels::{self, Family};
use crate::backend::native::libs;

/// Set in the child runs: the folder to write CUBINs to.
const CHILD_DIR: &str = "CUBIN_CHILD_DIR";
/// The test's full name in the library's test binary (the children run it with `--exact`).
const NAME: &str =
    "backend::cuda::tests::archs::cuda_every_kernel_compiles_for_turing_to_blackwell_with_nvrtc_12_and_13";

/// The architectures NVRTC `major` compiles for here: every one of `kernels::ARCHS` but one.
/// The kernels' sources test no architecture (no `__CUDA_ARCH__`, no header: `kernels`), so
/// 8.6 and 8.9 (Ampere's and Ada's other parts) take the instructions 8.0 takes; each is
/// compiled by one major, 8.9 (Colab's L4) by CUDA 12, Colab's major, and 8.6 by CUDA 13. The
/// two children run side by side on one thread each, so the even split is what saves time:
/// this test is on the test command's critical path.
fn archs_of(major: u32) -> Vec<&'static str> {
    let other = if major == 12 { "sm_86" } else { "sm_89" };
    kernels::ARCHS
        .iter()
        .copied()
        .filter(|&a| a != other)
        .collect()
}

#[test]
fn every_architecture_is_compiled_by_some_major_and_the_rest_by_both() {
    for a in kernels::ARCHS {
        let by = libs::CUDA_MAJORS
            .iter()
            .filter(|&&m| archs_of(m).contains(&a))
            .count();
        let want = if a == "sm_86" || a == "sm_89" {
            1
        } else {
            libs::CUDA_MAJORS.len()
        };
        assert_eq!(by, want, "{a}");
    }
}

/// The child's half: compile every family for `archs_of` this process's NVRTC major.
fn child(dir: &Path) {
    let major = libs::cuda_major().major;
    let nvrtc =
        libs::library(crate::backend::native::libs::LibName::Nvrtc).filter(|l| l.is_loaded());
    let Some(lib) = nvrtc else {
        let why = libs::library(crate::backend::native::libs::LibName::Nvrtc)
            .and_then(|l| l.problem.clone())
            .unwrap_or_default();
        std::fs::write(dir.join("missing"), why).unwrap();
        return;
    };
    let version = lib.version.clone().unwrap_or_default();
    assert!(
        version.starts_with(&format!("{major}.")),
        "ACCEL_CUDA_MAJOR={major} loaded NVRTC {version} from {:?}",
        lib.path
    );
    std::fs::write(dir.join("nvrtc"), &version).unwrap();
    for arch in archs_of(major) {
        for fam in Family::ALL {
            let cubin = kernels::compile(&fam.source(), fam.name(), arch)
                .unwrap_or_else(|e| panic!("NVRTC {version}: {} for {arch}: {e}", fam.name()));
            assert!(cubin.starts_with(b"\x7fELF"), "a CUBIN is an ELF file");
            std::fs::write(dir.join(format!("{}.{arch}.cubin", fam.name())), cubin).unwrap();
        }
    }
    // An architecture this compiler cannot target is a clear error, before NVRTC is asked.
    if major >= 13 {
        let e = kernels::compile(&Family::Fill.source(), "fill", "sm_70").unwrap_err();
        assert!(
            e.contains("sm_70") && e.contains(&format!("NVRTC {version}")) && e.contains("cu12"),
            "{e}"
        );
    }
}

/// `cuobjdump` from NVIDIA's wheel in the test environment, or on PATH.
fn cuobjdump() -> Option<PathBuf> {
    let env = libs::SearchEnv::from_process();
    for (sp, _) in libs::python_environments(&env) {
        for sub in ["cu13", "cuda_cuobjdump"] {
            let p = sp.join("nvidia").join(sub).join("bin/cuobjdump");
            if p.is_file() {
                return Some(p);
            }
        }
    }
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("cuobjdump"))
            .find(|p| p.is_file())
    })
}

/// (sm, toolkit major) from `cuobjdump -elf`'s header line, in either of its two formats:
/// `64bit elf: type=2, abi=7, sm=75, toolkit=129, ...` and `64-bit ELF: ..., sm=120,
/// toolkit=12.9, ...`.
fn elf_target(listing: &str) -> Option<(u32, u32)> {
    let field = |key: &str| {
        listing
            .split([',', ' ', '\n'])
            .find_map(|w| w.trim().strip_prefix(key).map(str::to_string))
    };
    let sm = field("sm=")?.parse().ok()?;
    let tk = field("toolkit=")?;
    let major = match tk.split_once('.') {
        Some((a, _)) => a.parse().ok()?,
        None => tk.parse::<u32>().ok()? / 10,
    };
    Some((sm, major))
}

#[test]
fn cuobjdump_headers_of_both_formats_are_read() {
    assert_eq!(
        elf_target("\n64bit elf: type=2, abi=7, sm=75, toolkit=129, flags = 0x4b054b\n"),
        Some((75, 12))
    );
    assert_eq!(
        elf_target("64-bit ELF: type=ET_EXEC, ABI=8, sm=120, toolkit=13.5, flags=0x6007802"),
        Some((120, 13))
    );
    assert_eq!(elf_target("no header"), None);
}

#[test]
fn cuda_every_kernel_compiles_for_turing_to_blackwell_with_nvrtc_12_and_13() {
    if let Some(dir) = std::env::var_os(CHILD_DIR) {
        return child(Path::new(&dir));
    }
    let root = std::env::temp_dir().join(format!("accel-cubins-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    // Both children at once: compiling is the slow part, and each is one thread.
    let runs: Vec<(u32, PathBuf, std::process::Child)> = libs::CUDA_MAJORS
        .iter()
        .map(|&m| {
            let dir = root.join(m.to_string());
            std::fs::create_dir_all(&dir).unwrap();
            let child = Command::new(std::env::current_exe().unwrap())
                .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
                .env(CHILD_DIR, &dir)
                .env("ACCEL_CUDA_MAJOR", m.to_string())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            (m, dir, child)
        })
        .collect();
    let tool = cuobjdump();
    for (m, dir, child) in runs {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "ACCEL_CUDA_MAJOR={m}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if let Ok(why) = std::fs::read_to_string(dir.join("missing")) {
            assert!(
                !accelkit_testkit::is_required("nvrtc") && !accelkit_testkit::is_required("cuda"),
                "ACCEL_TEST_REQUIRE names nvrtc but NVRTC {m} is missing: {why}"
            );
            println!("skipped: nvrtc: CUDA {m}: {why}");
            continue;
        }
        let version = std::fs::read_to_string(dir.join("nvrtc")).unwrap();
        let Some(tool) = &tool else {
            assert!(
                !accelkit_testkit::is_required("cuobjdump"),
                "ACCEL_TEST_REQUIRE names cuobjdump, which is not installed"
            );
            println!("skipped: cuobjdump: not installed (`pip install nvidia-cuda-cuobjdump`)");
            continue;
        };
        let mut checked = 0;
        for arch in archs_of(m) {
            let want_sm: u32 = arch.trim_start_matches("sm_").parse().unwrap();
            for fam in Family::ALL {
                let f = dir.join(format!("{}.{arch}.cubin", fam.name()));
                let o = Command::new(tool).arg("-elf").arg(&f).output().unwrap();
                let text = String::from_utf8_lossy(&o.stdout);
                assert!(o.status.success(), "cuobjdump {}: {text}", f.display());
                let got = elf_target(&text)
                    .unwrap_or_else(|| panic!("no ELF header in cuobjdump's listing of {f:?}"));
                assert_eq!(
                    got,
                    (want_sm, m),
                    "{}: cuobjdump says sm_{} by CUDA {}, accel asked NVRTC {version} for {arch}",
                    f.display(),
                    got.0,
                    got.1
                );
                // Every kernel's symbol is in the binary, as cuobjdump lists it.
                let src = fam.source();
                let names: Vec<&str> = src
                    .split("__global__ void ")
                    .skip(1)
                    .filter_map(|s| s.split('(').next())
                    .map(str::trim)
                    .collect();
                assert!(!names.is_empty(), "{} has no kernels", fam.name());
                for n in names {
                    assert!(text.contains(n), "{n} missing from {f:?}");
                }
                checked += 1;
            }
        }
        assert_eq!(checked, archs_of(m).len() * Family::ALL.len());
    }
    let _ = std::fs::remove_dir_all(&root);
}
