//! What accel found, kept between runs in the runtime folder under a key of everything it
//! depends on (`pycache`: python3's site-packages; `kept_probes`: the probe helpers' answers).
//!
//! A kept file is trusted only where the runtime folder is the user's and private, the file a
//! regular one (not a link) of the user's with no access for others, and under its size
//! limit; anything else is ignored and, when it can be, replaced. `ACCEL_RUNTIME_CACHE=off`
//! (or any value but `on`: a typo must not leave it on) keeps nothing and reads nothing.

use std::path::{Path, PathBuf};

#[derive(serde::Serialize, serde::Deserialize)]
struct Kept<T> {
    key: Vec<String>,
    value: T,
}

/// The runtime folder kept files live in: `XDG_RUNTIME_DIR` when it is absolute, the user's
/// and private (the `accel` command sets it to such a folder when it is unset), and
/// `ACCEL_RUNTIME_CACHE` unset or `on` (a bad value, which `accel doctor` reports, counts as
/// `off`).
pub(crate) fn folder() -> Option<PathBuf> {
    let on = match accelkit_core::env::choice("ACCEL_RUNTIME_CACHE", &["on", "off"]) {
        Ok(None) => true,
        Ok(Some(v)) => v == "on",
        Err(_) => false,
    };
    if !on {
        return None;
    }
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            (dir.is_absolute() && private_folder(&dir)).then_some(dir)
        }
        // Unset (a notebook's kernel, which `import accelkit` leaves as it is): accel's own.
        None => own_runtime_dir(),
    }
}

/// accel's own runtime folder where `XDG_RUNTIME_DIR` is unset: `/tmp/accel-runtime-<uid>`,
/// made 0700, or used when it exists and is the user's and private (anyone may create it
/// first: a symlink, or a folder others can write, is refused and the refusal noted).
pub(crate) fn own_runtime_dir() -> Option<PathBuf> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::DirBuilderExt;
        let uid = euid();
        let dir = std::env::temp_dir().join(format!("accel-runtime-{uid}"));
        let made = std::fs::DirBuilder::new().mode(0o700).create(&dir);
        if made.is_ok() || private_folder(&dir) {
            return Some(dir);
        }
        accelkit_core::env::refuse_runtime_dir(format!(
            "{} exists but is not a private folder of uid {uid} (owner, mode 0700, not a \
             symlink), so XDG_RUNTIME_DIR was left unset",
            dir.display()
        ));
        None
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

#[cfg(unix)]
pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid takes no arguments and cannot fail.
    unsafe { libc::geteuid() }
}

#[cfg(unix)]
pub(crate) fn private_folder(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(dir)
        .is_ok_and(|m| m.is_dir() && m.uid() == euid() && m.mode() & 0o077 == 0)
}

#[cfg(not(unix))]
pub(crate) fn private_folder(_: &Path) -> bool {
    false
}

/// One file's (or folder's) identity and times, or `absent`: a folder's modification time
/// changes when an entry is added, removed or renamed in it.
#[cfg(unix)]
pub(crate) fn stamp(p: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    match std::fs::metadata(p) {
        Ok(m) => format!(
            "{} {} {} {}.{} {}.{}",
            m.dev(),
            m.ino(),
            m.len(),
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec()
        ),
        Err(_) => "absent".to_string(),
    }
}

#[cfg(not(unix))]
pub(crate) fn stamp(_: &Path) -> String {
    String::new()
}

/// The environment variables whose names start with one of `prefixes` or are one of
/// `names`, as sorted `env NAME=value` lines.
pub(crate) fn env_lines(prefixes: &[&str], names: &[&str]) -> Vec<String> {
    let mut vars: Vec<String> = std::env::vars_os()
        .filter_map(|(n, v)| {
            let n = n.to_string_lossy().into_owned();
            let read = prefixes.iter().any(|p| n.starts_with(p)) || names.contains(&n.as_str());
            read.then(|| format!("env {n}={}", v.to_string_lossy()))
        })
        .collect();
    vars.sort();
    vars
}

/// The value kept in `dir/file` under `key`, when the file may be trusted (at most
/// `max_bytes`) and reads back.
pub(crate) fn read<T: serde::de::DeserializeOwned>(
    dir: &Path,
    file: &str,
    key: &[String],
    max_bytes: u64,
) -> Option<T> {
    let path = dir.join(file);
    if !trusted_file(&path, max_bytes) {
        return None;
    }
    let text = accelkit_core::files::read_text_limited(&path, max_bytes).ok()?;
    let kept: Kept<T> = serde_json::from_str(&text).ok()?;
    (kept.key == key).then_some(kept.value)
}

#[cfg(unix)]
fn trusted_file(path: &Path, max_bytes: u64) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).is_ok_and(|m| {
        m.file_type().is_file()
            && m.uid() == euid()
            && m.mode() & 0o077 == 0
            && m.len() <= max_bytes
    })
}

#[cfg(not(unix))]
fn trusted_file(_: &Path, _: u64) -> bool {
    false
}

/// Keeps `value` in `dir/file` under `key` (written beside and renamed into place, mode
/// 0600), unless it would pass `max_bytes`; a failure only means it is found again next time.
pub(crate) fn write<T: serde::Serialize>(
    dir: &Path,
    file: &str,
    key: &[String],
    value: &T,
    max_bytes: u64,
) {
    let Ok(text) = serde_json::to_string(&Kept {
        key: key.to_vec(),
        value,
    }) else {
        return;
    };
    if text.len() as u64 > max_bytes {
        return;
    }
    let tmp = dir.join(format!(".{file}.{}", std::process::id()));
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    let written = o
        .open(&tmp)
        .and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes()));
    if written.is_err() || std::fs::rename(&tmp, dir.join(file)).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}
