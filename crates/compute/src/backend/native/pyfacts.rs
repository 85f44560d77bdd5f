//! What the user's Python environment holds, read from disk for the doctor's rules: the
//! packages (`.dist-info` folders), PyTorch's build (`torch/version.py`) and the GPU
//! architectures its `libtorch_cuda.so` carries (the fat binary's headers). Shared by the
//! rules of several backends (CUDA's frameworks, XLA's TPU, wgpu's Apple GPU).

use std::path::{Path, PathBuf};

use super::pyenv::plain;

/// A package installed in the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Dist {
    pub name: String,
    pub version: String,
}

/// The Python environment the user runs (the first searched that holds a framework).
#[derive(Debug, Clone, Default)]
pub(crate) struct Python {
    pub site_packages: Option<PathBuf>,
    /// `torch/version.py`: `__version__` and `cuda` (None for `+cpu` builds).
    pub torch: Option<(String, Option<String>)>,
    /// The SM architectures `libtorch_cuda.so` carries code for (`[75, 80, 86, 90]`), when
    /// its fat binary could be read.
    pub torch_archs: Option<Vec<u32>>,
    pub dists: Vec<Dist>,
}

impl Python {
    /// The first environment (in the search's order) with PyTorch, JAX or torch_xla.
    pub(crate) fn read(envs: &[(PathBuf, &'static str)]) -> Python {
        for (sp, _) in envs {
            let dists = dists(sp);
            let has = |n: &str| dists.iter().any(|d| d.name == n);
            let framework = ["torch", "jaxlib", "jax", "torch_xla", "libtpu"]
                .iter()
                .any(|n| has(n))
                || sp.join("torch/version.py").is_file();
            if !framework {
                continue;
            }
            let torch = torch_version(sp);
            let torch_archs = torch
                .as_ref()
                .filter(|(_, c)| c.is_some())
                .and_then(|_| fatbin_archs(&sp.join("torch/lib/libtorch_cuda.so")));
            return Python {
                site_packages: Some(sp.clone()),
                torch,
                torch_archs,
                dists,
            };
        }
        Python::default()
    }

    pub(crate) fn dist(&self, name: &str) -> Option<&Dist> {
        self.dists.iter().find(|d| d.name == name)
    }
}

/// Every `<name>-<version>.dist-info` in `sp`, names normalised (`jax_cuda12_plugin`).
fn dists(sp: &Path) -> Vec<Dist> {
    let mut v: Vec<Dist> = std::fs::read_dir(sp)
        .into_iter()
        .flatten()
        .flatten()
        .take(100_000)
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            let (name, version) = n.strip_suffix(".dist-info")?.split_once('-')?;
            plain(version).then(|| Dist {
                name: name.to_ascii_lowercase().replace(['-', '.'], "_"),
                version: version.to_string(),
            })
        })
        .collect();
    v.sort_by(|a, b| a.name.cmp(&b.name));
    v
}

fn torch_version(sp: &Path) -> Option<(String, Option<String>)> {
    let v =
        accelkit_core::files::read_text_limited(&sp.join("torch/version.py"), 64 * 1024).ok()?;
    let get = |key: &str| -> Option<Option<String>> {
        let l = v
            .lines()
            .find(|l| l.trim_start().starts_with(key) && l.contains('='))?;
        let rhs = l.split_once('=')?.1.trim();
        Some(
            rhs.split(['\'', '"'])
                .nth(1)
                .filter(|s| plain(s))
                .map(str::to_string),
        )
    };
    let version = get("__version__").flatten()?;
    let cuda = get("cuda").flatten();
    Some((version, cuda))
}

/// The SM architectures of the cubins in an ELF file's `.nv_fatbin` section (CUDA's fat
/// binary: 16-byte containers of entries, each entry's header giving its kind, its size and
/// its `arch`). Only the headers are read; None when the file or section is not there.
pub(crate) fn fatbin_archs(path: &Path) -> Option<Vec<u32>> {
    use std::io::{Read, Seek, SeekFrom};
    // A FIFO or a device in its place is refused without waiting on it.
    let mut f = accelkit_core::files::open_regular(path).ok()?;
    let mut read_at = |off: u64, n: usize| -> Option<Vec<u8>> {
        f.seek(SeekFrom::Start(off)).ok()?;
        let mut b = vec![0u8; n];
        f.read_exact(&mut b).ok()?;
        Some(b)
    };
    let u16_ = |b: &[u8], o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
    let u32_ = |b: &[u8], o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    let u64_ = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
    let h = read_at(0, 64)?;
    if &h[..4] != b"\x7fELF" || h[4] != 2 || h[5] != 1 {
        return None;
    }
    let shoff = u64_(&h, 0x28);
    let shentsize = u16_(&h, 0x3a) as usize;
    let shnum = u16_(&h, 0x3c) as usize;
    let shstrndx = u16_(&h, 0x3e) as usize;
    if shentsize < 64 || shnum == 0 || shnum > 65_535 || shstrndx >= shnum {
        return None;
    }
    let sh = read_at(shoff, shentsize * shnum)?;
    let sec = |i: usize| {
        let b = &sh[i * shentsize..];
        (u32_(b, 0), u64_(b, 0x18), u64_(b, 0x20))
    };
    let (_, stroff, strsize) = sec(shstrndx);
    let names = read_at(stroff, strsize.min(1 << 20) as usize)?;
    let (_, off, size) = (0..shnum).map(sec).find(|(name, _, _)| {
        names
            .get(*name as usize..)
            .is_some_and(|s| s.starts_with(b".nv_fatbin\0"))
    })?;
    let mut archs = Vec::new();
    let end = off + size;
    let mut c = off;
    let mut steps = 0;
    while c + 16 <= end && steps < 1_000_000 {
        let ch = read_at(c, 16)?;
        if u32_(&ch, 0) != 0xBA55_ED50 {
            break;
        }
        let hsize = u16_(&ch, 6) as u64;
        let fat = u64_(&ch, 8);
        let mut e = c + hsize;
        let stop = (c + hsize + fat).min(end);
        while e + 32 <= stop && steps < 1_000_000 {
            steps += 1;
            let eh = read_at(e, 32)?;
            let kind = u16_(&eh, 0);
            let ehsize = u32_(&eh, 4) as u64;
            let payload = u64_(&eh, 8);
            let arch = u32_(&eh, 28);
            if kind == 2 && !archs.contains(&arch) {
                archs.push(arch);
            }
            if ehsize == 0 {
                break;
            }
            e += ehsize + payload;
        }
        c = c + hsize + fat;
        // Containers are 8-byte aligned in the section.
        c = c.div_ceil(8) * 8;
    }
    archs.sort_unstable();
    (!archs.is_empty()).then_some(archs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first match of `<venv>/<sub>/lib/python3*/site-packages/<rel>`.
    fn in_venv(sub: &str, rel: &str) -> Option<PathBuf> {
        let venv = PathBuf::from(std::env::var_os("VIRTUAL_ENV")?).join(sub);
        std::fs::read_dir(venv.join("lib"))
            .ok()?
            .flatten()
            .map(|e| e.path().join("site-packages").join(rel))
            .find(|p| p.exists())
    }

    #[test]
    fn a_real_libraries_fat_binary_lists_what_cuobjdump_lists() {
        // NVIDIA's cuBLAS 12 wheel (the test command installs it in $VIRTUAL_ENV/cu12) read
        // by `fatbin_archs` and by NVIDIA's own cuobjdump.
        let lib = in_venv("cu12", "nvidia/cublas/lib/libcublas.so.12");
        let tool = in_venv("", "nvidia/cu13/bin/cuobjdump");
        let (Some(lib), Some(tool)) = (lib, tool) else {
            let required = std::env::var("ACCEL_TEST_REQUIRE").unwrap_or_default();
            assert!(
                !required.split(',').any(|r| r.trim() == "cuda12"),
                "ACCEL_TEST_REQUIRE names cuda12, but $VIRTUAL_ENV has no cuBLAS 12 or cuobjdump"
            );
            println!("skipped: cuda12: no cuBLAS 12 wheel and cuobjdump in $VIRTUAL_ENV");
            return;
        };
        let out = std::process::Command::new(tool)
            .arg("--list-elf")
            .arg(&lib)
            .output()
            .expect("cuobjdump runs");
        let mut want: Vec<u32> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                let sm = l.split(".sm_").nth(1)?;
                sm.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
            })
            .collect();
        want.sort_unstable();
        want.dedup();
        assert!(want.len() >= 5, "cuobjdump listed {want:?}");
        assert_eq!(fatbin_archs(&lib), Some(want));
    }
}
