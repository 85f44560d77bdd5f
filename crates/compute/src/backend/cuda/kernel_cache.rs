//! The on-disk cache of compiled kernels: where it lives, its key (a hash of the source, the
//! architecture and NVRTC's version), and its file format (a header with the CUBIN's length
//! and hash, checked before a cached image reaches `cuModuleLoadData`).

#[cfg(feature = "cuda")]
use super::kernels::compile;
use super::kernels::Family;

/// A stable 64-bit hash (FNV-1a) for the on-disk cache key.
pub fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for p in parts {
        for &b in *p {
            h ^= b as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// Where compiled modules are kept between runs: `$ACCEL_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/accel`, else `~/.cache/accel`.
pub fn cache_dir() -> Option<std::path::PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    crate::base::env::path("ACCEL_CACHE_DIR")
        .or_else(|| var("XDG_CACHE_HOME").map(|p| std::path::PathBuf::from(p).join("accel")))
        .or_else(|| var("HOME").map(|p| std::path::PathBuf::from(p).join(".cache/accel")))
}

fn cache_path(family: Family, arch: &str) -> Option<std::path::PathBuf> {
    let src = family.source();
    let nvrtc_version =
        crate::backend::native::libs::library(crate::backend::native::libs::LibName::Nvrtc)
            .and_then(|l| l.version.clone())
            .unwrap_or_default();
    let key = fnv1a(&[src.as_bytes(), arch.as_bytes(), nvrtc_version.as_bytes()]);
    cache_dir().map(|d| {
        d.join("cuda")
            .join(format!("{}-{arch}-{key:016x}.cubin1", family.name()))
    })
}

/// The cache file's header: a magic, the CUBIN's length and its FNV-1a hash, so a truncated
/// or damaged file is recompiled instead of handed to `cuModuleLoadData`, which takes no
/// length and would read past the end of a short one.
const CACHE_MAGIC: &[u8; 12] = b"ACCELCUBIN1\0";

/// A CUBIN with its header, as the cache stores it.
pub fn frame(cubin: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(cubin.len() + 28);
    out.extend_from_slice(CACHE_MAGIC);
    out.extend_from_slice(&(cubin.len() as u64).to_le_bytes());
    out.extend_from_slice(&fnv1a(&[cubin]).to_le_bytes());
    out.extend_from_slice(cubin);
    out
}

/// The CUBIN in a cache file, when the header, the length, the hash and the ELF magic all
/// agree; `None` for anything else (an old, truncated or damaged file).
pub fn unframe(file: &[u8]) -> Option<&[u8]> {
    let rest = file.strip_prefix(CACHE_MAGIC)?;
    let len = u64::from_le_bytes(rest.get(..8)?.try_into().ok()?);
    let hash = u64::from_le_bytes(rest.get(8..16)?.try_into().ok()?);
    let body = rest.get(16..)?;
    (body.len() as u64 == len && fnv1a(&[body]) == hash && body.starts_with(b"\x7fELF"))
        .then_some(body)
}

/// Writes a compiled module to the disk cache (a failed write costs a recompilation later).
pub fn store(family: Family, arch: &str, bytes: &[u8]) {
    if let Some(p) = cache_path(family, arch) {
        if let Some(dir) = p.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let tmp = p.with_extension(format!("tmp{}", std::process::id()));
        if std::fs::write(&tmp, frame(bytes)).is_ok() {
            let _ = std::fs::rename(&tmp, p);
        }
    }
}

/// A CUBIN for `family` and `arch`, from the disk cache or compiled now.
#[cfg(feature = "cuda")]
pub fn cubin(family: Family, arch: &str) -> Result<Vec<u8>, String> {
    if let Some(p) = cache_path(family, arch) {
        if let Ok(file) = std::fs::read(p) {
            if let Some(cubin) = unframe(&file) {
                return Ok(cubin.to_vec());
            }
        }
    }
    let bytes = compile(&family.source(), family.name(), arch)?;
    store(family, arch, &bytes);
    Ok(bytes)
}

#[cfg(test)]
mod cache_tests {
    use super::*;

    #[test]
    fn a_cached_cubin_is_used_only_whole() {
        let mut cubin = b"\x7fELF".to_vec();
        cubin.extend((0..4096u32).map(|i| (i * 31 % 251) as u8));
        let file = frame(&cubin);
        assert_eq!(unframe(&file), Some(&cubin[..]));
        // Truncated anywhere: refused (cuModuleLoadData would read past the end).
        for cut in [0, 5, 12, 20, 28, 29, 100, file.len() - 1] {
            assert_eq!(unframe(&file[..cut]), None, "cut at {cut}");
        }
        // One byte changed in the body: refused.
        let mut bad = file.clone();
        bad[1000] ^= 0x40;
        assert_eq!(unframe(&bad), None);
        // A bare CUBIN of the old cache format: refused (recompiled once).
        assert_eq!(unframe(&cubin), None);
        // Extra bytes after the body: refused.
        let mut long = file.clone();
        long.push(0);
        assert_eq!(unframe(&long), None);
    }
}
