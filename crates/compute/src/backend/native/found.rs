//! What a CUDA library's file on disk says without loading it, and where a toolkit keeps
//! its libraries.

use std::path::{Path, PathBuf};

/// The library folders of a CUDA toolkit rooted at `root` that exist.
pub(super) fn toolkit_libs(root: &Path) -> Vec<PathBuf> {
    [
        root.join("lib64"),
        root.join("lib"),
        root.join("targets/x86_64-linux/lib"),
        root.join("targets/sbsa-linux/lib"),
    ]
    .into_iter()
    .filter(|p| p.is_dir())
    .collect()
}

/// Other major versions of `file` present in `dir` (`libcublas.so.12` when we want `.13`).
pub fn other_majors(dir: &Path, file: &str) -> Vec<String> {
    let stem = file.rsplit_once(".so.").map_or(file, |(s, _)| s);
    let prefix = format!("{stem}.so.");
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&prefix) && n != file)
        .collect();
    v.sort();
    v
}

/// The version a library's file names (`libcublas.so.12.4.5.8`, behind the SONAME's link)
/// or, for a Python wheel's copy, the wheel's own (`nvidia_cublas-13.4.1.3.dist-info` in
/// the site-packages folder above it), matching the file's CUDA major.
pub(crate) fn version_on_disk(
    path: &Path,
    name: super::libs::LibName,
    major: Option<u32>,
) -> Option<String> {
    let real = std::fs::canonicalize(path).ok()?;
    let file = real.file_name()?.to_string_lossy().into_owned();
    if let Some((_, v)) = file.split_once(".so.") {
        if v.contains('.')
            && v.split('.')
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        {
            return Some(v.to_string());
        }
    }
    let dist = match name {
        super::libs::LibName::Nvrtc => "nvidia_cuda_nvrtc",
        super::libs::LibName::Cublas | super::libs::LibName::CublasLt => "nvidia_cublas",
        super::libs::LibName::Cudnn => "nvidia_cudnn",
        _ => return None,
    };
    let sp = path.ancestors().take(6).find(|a| {
        a.file_name()
            .is_some_and(|n| n == "site-packages" || n == "dist-packages")
    })?;
    let mut best: Option<String> = None;
    for e in std::fs::read_dir(sp).ok()?.flatten().take(100_000) {
        let n = e.file_name().to_string_lossy().into_owned();
        let Some(stem) = n.strip_suffix(".dist-info") else {
            continue;
        };
        let Some((pkg, ver)) = stem.split_once('-') else {
            continue;
        };
        // nvidia_cublas (CUDA 13's), nvidia_cublas_cu12, nvidia_cudnn_cu13 ...
        let rest = pkg.strip_prefix(dist);
        if !rest.is_some_and(|r| r.is_empty() || r.starts_with("_cu")) {
            continue;
        }
        let major_ok = major.is_none_or(|m| ver.split('.').next() == Some(m.to_string().as_str()));
        if major_ok {
            best = Some(ver.to_string());
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_come_from_the_file_or_its_wheel_matching_the_major() {
        let root = std::env::temp_dir().join(format!("accel-found-{}", std::process::id()));
        let sp = root.join("lib/python3.11/site-packages");
        let lib = sp.join("nvidia/cu13/lib");
        std::fs::create_dir_all(&lib).unwrap();
        for d in [
            "nvidia_cublas-13.4.1.3.dist-info",
            "nvidia_cublas_cu12-12.9.1.4.dist-info",
            "nvidia_cublasmp-0.1.0.dist-info",
        ] {
            std::fs::create_dir_all(sp.join(d)).unwrap();
        }
        std::fs::write(lib.join("libcublas.so.13"), b"").unwrap();
        assert_eq!(
            version_on_disk(
                &lib.join("libcublas.so.13"),
                crate::backend::native::libs::LibName::Cublas,
                Some(13)
            )
            .as_deref(),
            Some("13.4.1.3")
        );
        std::fs::write(lib.join("libcublas.so.12"), b"").unwrap();
        assert_eq!(
            version_on_disk(
                &lib.join("libcublas.so.12"),
                crate::backend::native::libs::LibName::Cublas,
                Some(12)
            )
            .as_deref(),
            Some("12.9.1.4")
        );
        // A toolkit's file names its version behind the SONAME's link.
        let tk = root.join("cuda/lib64");
        std::fs::create_dir_all(&tk).unwrap();
        std::fs::write(tk.join("libcublas.so.12.4.5.8"), b"").unwrap();
        std::os::unix::fs::symlink("libcublas.so.12.4.5.8", tk.join("libcublas.so.12")).unwrap();
        assert_eq!(
            version_on_disk(
                &tk.join("libcublas.so.12"),
                crate::backend::native::libs::LibName::Cublas,
                Some(12)
            )
            .as_deref(),
            Some("12.4.5.8")
        );
        // Neither: no version.
        std::fs::write(tk.join("libnvrtc.so.12"), b"").unwrap();
        assert_eq!(
            version_on_disk(
                &tk.join("libnvrtc.so.12"),
                crate::backend::native::libs::LibName::Nvrtc,
                Some(12)
            ),
            None
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
