//! Why PyTorch or JAX cannot use a GPU that the driver runs: the Python environment's
//! builds read from disk (`torch/version.py`, the `.dist-info` folders, the architectures
//! in `libtorch_cuda.so`'s fat binary), against the driver's CUDA version and the GPU's
//! compute capability; each fix is the install command that fits this driver and GPU.

use std::path::Path;

use crate::backend::native::pyfacts::{Dist, Python};
use crate::base::facts::Machine;
use crate::base::finding::{driver_cuda, finding, Driver, Finding};

/// The SM architectures PyTorch's wheels for CUDA `cuda` (`12.8`) carry, at version `torch`
/// (`2.8.0`), from PyTorch's published build matrix; used where the library cannot be read.
pub(super) fn torch_archs_by_build(torch: &str, cuda: &str) -> Vec<u32> {
    let num = |s: &str| -> (u32, u32) {
        let mut p = s.split(['.', '+']).map(|x| x.parse::<u32>().unwrap_or(0));
        (p.next().unwrap_or(0), p.next().unwrap_or(0))
    };
    let t = num(torch);
    let c = num(cuda);
    let mut v: Vec<u32> = if c.0 >= 13 {
        vec![75, 80, 86, 90, 100, 110, 120]
    } else if c >= (12, 8) {
        if t >= (2, 8) {
            vec![70, 75, 80, 86, 90, 100, 120]
        } else {
            vec![50, 60, 61, 70, 75, 80, 86, 90, 100, 120]
        }
    } else if c.0 == 12 || c >= (11, 8) {
        vec![50, 60, 61, 70, 75, 80, 86, 90]
    } else {
        vec![37, 50, 60, 61, 70, 75, 80, 86]
    };
    if c >= (12, 9) && c.0 < 13 {
        v.push(121);
    }
    v.sort_unstable();
    v
}

/// The compute capability of well-known NVIDIA GPUs by PCI device id, for when the driver
/// cannot say (it is not running): data-center boards and the newest consumer ones.
pub(super) fn cc_of_pci(device: u16) -> Option<(u32, u32)> {
    Some(match device {
        0x1eb8 | 0x1e04 | 0x1e07 | 0x1e82 | 0x1f08 | 0x2182 | 0x1f82 => (7, 5),
        0x1db1 | 0x1db4 | 0x1db5 | 0x1db6 => (7, 0),
        0x15f7 | 0x15f8 => (6, 0),
        0x1b06 | 0x1b80 | 0x1b81 | 0x1c82 | 0x1c03 => (6, 1),
        0x102d | 0x102f => (3, 7),
        0x20b0 | 0x20b2 | 0x20b5 | 0x20f1 | 0x20f3 => (8, 0),
        0x2204 | 0x2206 | 0x2208 | 0x2484 | 0x2503 | 0x2236 | 0x2237 | 0x25b6 => (8, 6),
        0x2684 | 0x2704 | 0x2782 | 0x27b8 | 0x26b5 | 0x26b9 | 0x2882 => (8, 9),
        0x2330 | 0x2331 | 0x2335 | 0x2339 | 0x233a | 0x2342 => (9, 0),
        0x2901 | 0x2941 => (10, 0),
        0x2b85 | 0x2b87 | 0x2c02 | 0x2c05 | 0x2c18 | 0x2f04 | 0x2d04 | 0x2bb1 | 0x2bb4 | 0x2bb5 => {
            (12, 0)
        }
        _ => return None,
    })
}

/// PyTorch's wheel index for a driver that supports CUDA `driver` (13000) and a GPU of
/// compute capability `cc`: the newest CUDA build the driver runs that still has the GPU's
/// architecture.
pub(super) fn torch_index(
    torch: Option<&str>,
    driver: Option<u32>,
    cc: Option<(u32, u32)>,
) -> Option<&'static str> {
    let d = driver.unwrap_or(13000);
    let sm = cc.map(|(a, b)| a * 10 + b);
    let version = |s: &str| -> (u32, u32) {
        let mut p = s.split(['.', '+']).map(|x| x.parse::<u32>().unwrap_or(0));
        (p.next().unwrap_or(0), p.next().unwrap_or(0))
    };
    let t = torch.map(version);
    // (index, the driver's CUDA it needs, its CUDA, the PyTorch releases it has): cu130 wants
    // the 580 branch; the CUDA 12 builds run on 525+ (minor-version compatibility); cu118 on
    // 450+.
    /// A release as (major, minor).
    type Release = (u32, u32);
    const INDEXES: [(&str, u32, &str, Release, Release); 6] = [
        ("cu130", 13000, "13.0", (2, 9), (99, 0)),
        ("cu128", 12000, "12.8", (2, 7), (99, 0)),
        ("cu126", 12000, "12.6", (2, 6), (99, 0)),
        ("cu124", 12000, "12.4", (2, 4), (2, 6)),
        ("cu121", 12000, "12.1", (2, 1), (2, 5)),
        ("cu118", 11000, "11.8", (2, 0), (2, 7)),
    ];
    INDEXES
        .iter()
        .find(|(_, need, cuda, first, last)| {
            let has = t.is_none_or(|t| t >= *first && t <= *last);
            let archs = torch_archs_by_build(torch.unwrap_or("2.9.0"), cuda);
            let fits = sm.is_none_or(|s| {
                archs.contains(&s) || archs.iter().any(|&a| a / 10 == s / 10 && a <= s)
            });
            d >= *need && has && fits
        })
        .map(|x| x.0)
}

fn index_url(name: &str) -> String {
    format!("https://download.pytorch.org/whl/{name}")
}

/// Whether the environment's PyTorch is a CUDA build this driver runs (its CUDA major at
/// most the driver's).
pub(super) fn runs_on_driver(py: &Python, d: &Driver) -> bool {
    let (Some((_, Some(c))), Some(dc)) = (&py.torch, d.cuda_version) else {
        return false;
    };
    c.split('.')
        .next()
        .and_then(|m| m.parse::<u32>().ok())
        .is_some_and(|m| m * 1000 <= dc)
}

/// PyTorch and JAX causes, for a machine with an NVIDIA GPU.
pub(super) fn causes(m: &Machine, d: &Driver, py: &Python) -> Vec<Finding> {
    let mut v = Vec::new();
    let dcuda = driver_cuda(m, d);
    let cc = d
        .ccs
        .first()
        .copied()
        .or_else(|| m.pci_gpus.iter().find_map(|g| cc_of_pci(g.device)));
    let sp = py
        .site_packages
        .as_deref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let driver_text = dcuda
        .map(|c| format!("CUDA {}.{}", c / 1000, (c % 1000) / 10))
        .unwrap_or_else(|| "an unknown CUDA version".into());
    if let Some((ver, cuda)) = &py.torch {
        let base = ver.split('+').next().unwrap_or(ver);
        match cuda {
            None => {
                let idx = torch_index(Some(base), dcuda, cc);
                v.push(finding(
                    "torch.cpu_build",
                    "PyTorch is a CPU-only build",
                    format!(
                        "PyTorch {ver} in {sp} is built without CUDA (torch/version.py: cuda = \
                         None), so torch.cuda.is_available() is False on this GPU"
                    ),
                    match idx {
                        Some(i) => format!(
                            "install a CUDA build that this driver ({driver_text}) runs: `pip \
                             install --force-reinstall torch=={base} --index-url {}`",
                            index_url(i)
                        ),
                        // No CUDA index has this release for this driver and GPU: a newer one.
                        None => format!(
                            "install a CUDA build that this driver ({driver_text}) runs: `pip \
                             install --force-reinstall torch --index-url {}`",
                            index_url(torch_index(None, dcuda, cc).unwrap_or("cu128"))
                        ),
                    },
                ));
            }
            Some(c) => {
                let tmaj: u32 = c
                    .split('.')
                    .next()
                    .and_then(|x| x.parse().ok())
                    .unwrap_or(0);
                let floor = match tmaj {
                    13.. => 13000,
                    12 => 12000,
                    _ => 11000,
                };
                if let Some(dc) = dcuda.filter(|&dc| dc < floor) {
                    let idx = torch_index(None, Some(dc), cc);
                    v.push(finding(
                        "torch.driver_too_old",
                        "PyTorch is built for a newer CUDA than the driver runs",
                        format!(
                            "PyTorch {ver} is built for CUDA {c}; the driver supports CUDA {}.{} \
                             (PyTorch says \"found version {dc}\")",
                            dc / 1000,
                            (dc % 1000) / 10
                        ),
                        format!(
                            "update the driver to {} or newer{}",
                            if tmaj >= 13 { "580" } else { "525" },
                            match idx {
                                Some(i) => format!(
                                    ", or install a PyTorch build this driver runs: `pip \
                                     install torch --index-url {}`",
                                    index_url(i)
                                ),
                                None => String::new(),
                            }
                        ),
                    ));
                } else if let Some(cc) = cc {
                    let sm = cc.0 * 10 + cc.1;
                    let (archs, source) = match &py.torch_archs {
                        Some(a) => (a.clone(), "torch/lib/libtorch_cuda.so".to_string()),
                        None => (
                            torch_archs_by_build(base, c),
                            format!("PyTorch's build matrix for {base} with CUDA {c}"),
                        ),
                    };
                    // Code for sm_XY runs on a GPU of the same major and minor >= Y.
                    let runs = archs
                        .iter()
                        .any(|&a| a / 10 == sm / 10 && a % 10 <= sm % 10);
                    if !runs {
                        let idx = torch_index(None, dcuda, Some(cc));
                        v.push(finding(
                            "torch.arch_missing",
                            "PyTorch has no kernels for this GPU's architecture",
                            format!(
                                "the GPU is compute capability {}.{} (sm_{sm}); PyTorch {ver} \
                                 carries sm_{} ({source}): \"no kernel image is available \
                                 for execution on the device\"",
                                cc.0,
                                cc.1,
                                archs
                                    .iter()
                                    .map(u32::to_string)
                                    .collect::<Vec<_>>()
                                    .join(", sm_")
                            ),
                            match idx {
                                Some(_) if sm >= 100 && dcuda.is_some_and(|d| d < 12080) => {
                                    format!(
                                    "sm_{sm} needs PyTorch built for CUDA 12.8 or newer, which \
                                     needs driver 570 or newer: update the driver, then `pip \
                                     install --force-reinstall torch --index-url {}`",
                                    index_url("cu128")
                                )
                                }
                                Some(i) => format!(
                                    "install a build with sm_{sm}: `pip install \
                                     --force-reinstall torch --index-url {}`",
                                    index_url(i)
                                ),
                                None => format!(
                                    "no current PyTorch build runs sm_{sm} with this driver: \
                                     update the driver (570 or newer for Blackwell), or build \
                                     PyTorch with TORCH_CUDA_ARCH_LIST={}.{}",
                                    cc.0, cc.1
                                ),
                            },
                        ));
                    }
                }
            }
        }
    }
    let jaxlib = py.dist("jaxlib");
    let plugins: Vec<&Dist> = py
        .dists
        .iter()
        .filter(|d| {
            d.name.starts_with("jax_cuda")
                && (d.name.ends_with("_plugin") || d.name.ends_with("_pjrt"))
        })
        .collect();
    if let Some(j) = jaxlib {
        let extra = match dcuda {
            Some(c) if c < 13000 => "cuda12",
            _ => "cuda13",
        };
        if plugins.is_empty() {
            v.push(finding(
                "jax.no_cuda_plugin",
                "JAX is installed without its CUDA plugin",
                format!(
                    "jaxlib {} in {sp}, and no jax-cuda12-plugin or jax-cuda13-plugin: JAX runs on \
                     the CPU only",
                    j.version
                ),
                format!(
                    "`pip install -U \"jax[{extra}]\"` (the plugin for this driver's \
                     {driver_text})"
                ),
            ));
        } else if let Some((p, need)) = plugins.iter().find_map(|p| {
            let major: u32 = p
                .name
                .strip_prefix("jax_cuda")?
                .split('_')
                .next()?
                .parse()
                .ok()?;
            dcuda.filter(|&dc| dc < major * 1000).map(|_| (p, major))
        }) {
            v.push(finding(
                "jax.driver_too_old",
                "JAX's CUDA plugin is built for a newer CUDA than the driver runs",
                format!(
                    "{} {} is built for CUDA {need}; the driver supports {driver_text}",
                    p.name.replace('_', "-"),
                    p.version
                ),
                if need >= 13 && dcuda.is_some_and(|d| d >= 12000) {
                    "install the CUDA 12 plugin this driver runs: `pip uninstall -y \
                     jax-cuda13-plugin jax-cuda13-pjrt && pip install -U \"jax[cuda12]\"`, or \
                     update the driver to 580 or newer"
                        .to_string()
                } else {
                    format!(
                        "update the driver to {} or newer",
                        if need >= 13 { 580 } else { 525 }
                    )
                },
            ));
        } else if let Some(p) = plugins.iter().find(|p| p.version != j.version) {
            v.push(finding(
                "jax.plugin_mismatch",
                "JAX's CUDA plugin and jaxlib are different versions",
                format!(
                    "jaxlib {} but {} {} in {sp}: JAX refuses the plugin (or falls back to the \
                     CPU)",
                    j.version,
                    p.name.replace('_', "-"),
                    p.version
                ),
                format!(
                    "install matching versions: `pip install -U \"jax[{}]=={}\"`",
                    if p.name.contains("cuda13") {
                        "cuda13"
                    } else {
                        "cuda12"
                    },
                    py.dist("jax")
                        .map(|d| d.version.as_str())
                        .unwrap_or(&j.version)
                ),
            ));
        }
    }
    v.extend(shadowed_libraries(m, py));
    v
}

/// cuDNN or cuBLAS of another version earlier on `LD_LIBRARY_PATH` than the wheel the
/// framework was installed with: the loader takes the first, and the framework fails at its
/// first convolution or matmul (or at import).
fn shadowed_libraries(m: &Machine, py: &Python) -> Vec<Finding> {
    let mut v = Vec::new();
    let Some(llp) = m.var("LD_LIBRARY_PATH") else {
        return v;
    };
    for (lib, prefix) in [("cudnn", "libcudnn.so."), ("cublas", "libcublas.so.")] {
        let wheel = py
            .dists
            .iter()
            .find(|d| d.name.starts_with(&format!("nvidia_{lib}")));
        let Some(wheel) = wheel else { continue };
        let wmajor = wheel.version.split('.').next().unwrap_or("");
        for dir in llp.split(':').filter(|d| !d.is_empty()) {
            if py
                .site_packages
                .as_deref()
                .is_some_and(|sp| Path::new(dir).starts_with(sp))
            {
                break;
            }
            // The loader asks for `lib<x>.so.<wheel's major>`: only that name can hide it.
            if !Path::new(dir).join(format!("{prefix}{wmajor}")).exists() {
                continue;
            }
            let Some(file) = newest_versioned(Path::new(dir), prefix) else {
                continue;
            };
            let have = file.strip_prefix(prefix).unwrap_or(&file).to_string();
            let hmajor = have.split('.').next().unwrap_or("");
            let wmm: Vec<&str> = wheel.version.split('.').take(2).collect();
            let hmm: Vec<&str> = have.split('.').take(2).collect();
            if hmajor != wmajor || (hmm.len() == 2 && hmm != wmm) {
                v.push(finding(
                    if lib == "cudnn" {
                        "libs.shadowed_cudnn"
                    } else {
                        "libs.shadowed_cublas"
                    },
                    "an older CUDA library on LD_LIBRARY_PATH hides the framework's",
                    format!(
                        "LD_LIBRARY_PATH puts {dir}/{file} ({lib} {have}) before the {} {} wheel \
                         the framework was installed with",
                        wheel.name.replace('_', "-"),
                        wheel.version
                    ),
                    format!(
                        "take {dir} off LD_LIBRARY_PATH (PyTorch and JAX load their own {lib} \
                         from the wheel), e.g. `export LD_LIBRARY_PATH=$(echo \
                         \"$LD_LIBRARY_PATH\" | tr ':' '\\n' | grep -vx '{dir}' | paste -sd:)`"
                    ),
                ));
                break;
            }
        }
    }
    v
}

/// The longest-versioned file `prefix<version>` in `dir` (`libcudnn.so.8.9.7`), or the
/// `.so.<major>` name when only that exists.
fn newest_versioned(dir: &Path, prefix: &str) -> Option<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .take(10_000)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            n.strip_prefix(prefix).is_some_and(|v| {
                !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit() || b == b'.')
            })
        })
        .collect();
    names.sort_by_key(|n| std::cmp::Reverse(n.len()));
    names.into_iter().next()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_build_matrix_follows_pytorch_releases() {
        assert!(!torch_archs_by_build("2.5.1", "12.4").contains(&120));
        assert!(torch_archs_by_build("2.7.0", "12.8").contains(&120));
        assert!(torch_archs_by_build("2.7.0", "12.8").contains(&61));
        assert!(!torch_archs_by_build("2.8.0", "12.8").contains(&61));
        assert!(!torch_archs_by_build("2.9.0", "13.0").contains(&70));
    }

    #[test]
    fn the_index_fits_the_driver_and_the_gpu() {
        // Blackwell consumer GPU on driver 580: CUDA 13 build has sm_120.
        assert_eq!(torch_index(None, Some(13000), Some((12, 0))), Some("cu130"));
        // Volta on driver 580: cu130 dropped sm_70.
        assert_eq!(torch_index(None, Some(13000), Some((7, 0))), Some("cu128"));
        // Pascal: only cu126 and older keep sm_61.
        assert_eq!(torch_index(None, Some(12080), Some((6, 1))), Some("cu126"));
        // Driver 470 (CUDA 11.4): cu118 by minor-version compatibility.
        assert_eq!(torch_index(None, Some(11040), Some((7, 5))), Some("cu118"));
        assert_eq!(torch_index(None, Some(10020), Some((7, 5))), None);
        // An index that has the installed release: cu128 starts at 2.7.
        assert_eq!(
            torch_index(Some("2.5.1"), Some(12040), Some((8, 6))),
            Some("cu124")
        );
        assert_eq!(
            torch_index(Some("2.3.1"), Some(12020), Some((8, 6))),
            Some("cu121")
        );
        assert_eq!(
            torch_index(Some("2.11.0"), Some(13000), Some((7, 5))),
            Some("cu130")
        );
    }
}
