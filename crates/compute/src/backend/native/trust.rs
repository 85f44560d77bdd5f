//! Which folders and programs accel may take native code from: one rule for every source, as
//! git's `safe.directory` reasons. A folder (or file) is safe when it and every folder above it
//! up to `/` belong to the current user or root and none of them may be written by its group
//! or by others ([`safe_folder`], [`safe_file`]); a world-writable folder above it with the
//! sticky bit that root owns (`/tmp`) counts as safe, since no one else can rename or replace
//! what is in it. Every root of the searches passes it: Python environments (`VIRTUAL_ENV`,
//! conda, `$HOME`, `/opt/*`, `python3`'s answer), CUDA toolkits, `ACCEL_CUDA_LIB_DIR`,
//! `LD_LIBRARY_PATH` entries accel walks itself, plugin files, and every file `dl::open` loads
//! by path. Two kinds of folder are trusted without the check: those listed in
//! `ACCEL_TRUSTED_DIRS` (the user's word, as `safe.directory`), and the prefix this program
//! runs from (`<prefix>/bin/accel` or the Python running `import accelkit`): the process already
//! runs code from there. A folder found relative to the working directory must moreover belong
//! to the current user, as must every folder up to the working directory
//! ([`owned_and_private`]). What is refused is remembered, with the owner and mode, for
//! `accel doctor`.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

static SKIPPED: Mutex<Vec<(PathBuf, String)>> = Mutex::new(Vec::new());

/// Notes that `path` was not used, and why.
pub fn skipped(path: &Path, why: &str) {
    let mut s = SKIPPED.lock().unwrap_or_else(|e| e.into_inner());
    if !s.iter().any(|(p, _)| p == path) {
        s.push((path.to_path_buf(), why.to_string()));
    }
}

/// Every folder or program skipped so far in this process, with why.
pub fn skipped_so_far() -> Vec<(PathBuf, String)> {
    SKIPPED.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// `uid 1000 (jovyan)`, or `uid 1000` for a uid with no name.
#[cfg(target_os = "linux")]
fn who(uid: u32) -> String {
    let mut buf = vec![0u8; 4096];
    // SAFETY: passwd is a #[repr(C)] struct of integers and pointers, valid all zero.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is to a live local of the size given; getpwuid_r writes the entry's
    // strings into `buf` and sets `out` to `&pw` on success or to null.
    let rc =
        unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr().cast(), buf.len(), &mut out) };
    if rc == 0 && !out.is_null() && !pw.pw_name.is_null() {
        // SAFETY: on success pw_name points to a NUL-terminated string inside `buf`, alive here.
        let name = unsafe { std::ffi::CStr::from_ptr(pw.pw_name) }.to_string_lossy();
        if !name.is_empty() && name.chars().all(|c| c.is_ascii_graphic()) {
            return format!("uid {uid} ({name})");
        }
    }
    format!("uid {uid}")
}

/// Why `path` is not safe by its own owner and mode (`None`: it is). `above`: it is a folder
/// above the one asked about, where root's sticky world-writable folders (`/tmp`) are fine.
#[cfg(target_os = "linux")]
fn check(path: &Path, owners: &[u32], above: bool) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mode = m.mode() & 0o7777;
    let me = owners[0];
    if !owners.contains(&m.uid()) {
        return Err(format!(
            "{} belongs to {}, not to you ({}){} (mode {mode:o})",
            path.display(),
            who(m.uid()),
            who(me),
            if owners.contains(&0) && me != 0 {
                " or root"
            } else {
                ""
            },
        ));
    }
    if mode & 0o022 != 0 && !(above && m.uid() == 0 && mode & 0o1000 != 0) {
        return Err(format!(
            "{} is writable by {} (owner {}, mode {mode:o})",
            path.display(),
            if mode & 0o002 != 0 {
                "everyone"
            } else {
                "its group"
            },
            who(m.uid()),
        ));
    }
    Ok(())
}

#[cfg(target_os = "linux")]
fn me() -> u32 {
    // SAFETY: geteuid takes no arguments and cannot fail.
    unsafe { libc::geteuid() }
}

/// The Python environment of the interpreter this library runs in (`sys.prefix`), given by the
/// Python module at import instead of setting `VIRTUAL_ENV` (which every child of the
/// notebook would inherit): a notebook kernel in a venv runs without `VIRTUAL_ENV`.
static PYTHON_PREFIX: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Names the running Python's environment (`sys.prefix`); the first call counts. Its
/// site-packages are searched as `VIRTUAL_ENV`'s would be, and trusted as accel's own
/// environment ([`own_prefix`]): the process already runs code from there.
pub fn set_python_prefix(prefix: PathBuf) {
    let _ = PYTHON_PREFIX.set(prefix.clone());
    // Canonical once, for `trusted`, which every folder checked asks.
    let _ = PYTHON_PREFIX_CANONICAL.set(
        std::fs::canonicalize(&prefix)
            .ok()
            .filter(|p| p.parent().is_some()),
    );
}

static PYTHON_PREFIX_CANONICAL: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();

/// The running Python's environment, when the Python module named one.
pub fn python_prefix() -> Option<&'static Path> {
    PYTHON_PREFIX.get().map(PathBuf::as_path)
}

/// The folders trusted without the check: `ACCEL_TRUSTED_DIRS` and the prefix this program
/// runs from, canonical.
fn trusted_roots() -> &'static [PathBuf] {
    static ROOTS: std::sync::OnceLock<Vec<PathBuf>> = std::sync::OnceLock::new();
    ROOTS.get_or_init(|| {
        let mut v: Vec<PathBuf> = crate::base::env::paths("ACCEL_TRUSTED_DIRS", &[':'])
            .into_iter()
            .filter(|p| p.is_absolute())
            .collect();
        v.extend(own_prefix());
        v.into_iter()
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .filter(|p| p.parent().is_some())
            .collect()
    })
}

/// Whether canonical `p` lies in a trusted folder: [`trusted_roots`], or the running Python's
/// environment ([`set_python_prefix`], named after the roots were first read).
fn trusted(p: &Path) -> bool {
    trusted_roots().iter().any(|r| p.starts_with(r))
        || PYTHON_PREFIX_CANONICAL
            .get()
            .and_then(Option::as_ref)
            .is_some_and(|r| p.starts_with(r))
}

/// `<prefix>` when this executable is `<prefix>/bin/<name>` (`pip install` puts accel there,
/// and a Python environment's interpreter is there): the process already runs its code.
pub fn own_prefix() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let bin = exe.parent()?;
    if bin.file_name()? != "bin" {
        return None;
    }
    Some(bin.parent()?.to_path_buf())
}

/// The one rule: `dir` (canonical) and every folder above it belong to you or root and no one
/// else may write them, unless it lies in a trusted folder (`ACCEL_TRUSTED_DIRS`, the prefix
/// this program runs from, the running Python's environment).
pub fn safe_folder(dir: &Path) -> Result<(), String> {
    #[cfg(target_os = "linux")]
    {
        let canon = std::fs::canonicalize(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        if trusted(&canon) {
            return Ok(());
        }
        let owners = [me(), 0];
        let mut d = Some(canon.as_path());
        let mut above = false;
        while let Some(p) = d {
            check(p, &owners, above)?;
            above = true;
            d = p.parent();
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = dir;
        Ok(())
    }
}

/// [`safe_folder`] for a file accel would load: the file itself belongs to you or root and no
/// one else may write it, and so its folder and every one above.
pub fn safe_file(file: &Path) -> Result<(), String> {
    #[cfg(target_os = "linux")]
    {
        let canon = std::fs::canonicalize(file).map_err(|e| format!("{}: {e}", file.display()))?;
        if trusted(&canon) {
            return Ok(());
        }
        check(&canon, &[me(), 0], false)?;
        match canon.parent() {
            Some(dir) => safe_folder(dir),
            None => Ok(()),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = file;
        Ok(())
    }
}

/// [`safe_folder`], and a refused folder noted for doctor: whether to search `dir`.
pub fn search(dir: &Path) -> bool {
    match safe_folder(dir) {
        Ok(()) => true,
        Err(why) => {
            skipped(dir, &why);
            false
        }
    }
}

/// [`safe_file`], and a refused file noted for doctor: whether `file` may be loaded.
pub fn loadable(file: &Path) -> bool {
    match safe_file(file) {
        Ok(()) => true,
        Err(why) => {
            skipped(file, &why);
            false
        }
    }
}

/// `dir` and every folder from it up to `top` belong to the current user and are not
/// writable by group or others; then the folders above `top` pass [`safe_folder`]'s rule.
pub fn owned_and_private(dir: &Path, top: &Path) -> Result<(), String> {
    #[cfg(target_os = "linux")]
    {
        let me = me();
        let mut d = Some(dir);
        while let Some(p) = d {
            check(p, &[me], false)?;
            if p == top {
                break;
            }
            d = p.parent();
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (dir, top);
        Ok(())
    }
}

/// A program and its folder belong to the user or root and no one else may write them.
pub fn safe_program(program: &Path) -> Result<(), String> {
    #[cfg(target_os = "linux")]
    {
        let owners = [me(), 0];
        check(program, &owners, false)?;
        match program.parent() {
            Some(dir) => check(dir, &owners, false),
            None => Ok(()),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = program;
        Ok(())
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn one_rule_for_a_folder_and_everything_above_it() {
        let root = std::env::temp_dir().join(format!("accel-trust-{}", std::process::id()));
        let deep = root.join("a/b/c");
        std::fs::create_dir_all(&deep).unwrap();
        let mode = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
        };
        for p in [&root, &root.join("a"), &root.join("a/b"), &deep] {
            mode(p, 0o755);
        }
        // /tmp above is root's and sticky: fine.
        assert_eq!(safe_folder(&deep), Ok(()));
        // A folder two levels up that its group may write: refused, named with its mode.
        mode(&root.join("a"), 0o775);
        let why = safe_folder(&deep).unwrap_err();
        assert!(why.contains("is writable by its group"), "{why}");
        assert!(why.contains("mode 775"), "{why}");
        assert!(why.contains(&root.join("a").display().to_string()), "{why}");
        // A sticky world-writable folder above counts only when root owns it (as /tmp), and
        // never for the folder asked about.
        mode(&root.join("a"), 0o1777);
        assert_eq!(safe_folder(&deep).is_ok(), me() == 0);
        mode(&root.join("a"), 0o755);
        mode(&deep, 0o1777);
        assert!(safe_folder(&deep).is_err());
        mode(&deep, 0o755);
        // A file: its own mode counts too.
        let f = deep.join("lib.so");
        std::fs::write(&f, b"").unwrap();
        mode(&f, 0o644);
        assert_eq!(safe_file(&f), Ok(()));
        mode(&f, 0o666);
        assert!(safe_file(&f).unwrap_err().contains("writable by everyone"));
        // Another owner, where this test may give one away (as root).
        if me() == 0 {
            mode(&f, 0o644);
            std::os::unix::fs::chown(root.join("a/b"), Some(4242), Some(4242)).unwrap();
            let why = safe_file(&f).unwrap_err();
            assert!(why.contains("belongs to uid 4242"), "{why}");
            assert!(why.contains("mode 755"), "{why}");
        }
        let _ = std::fs::remove_dir_all(&root);
    }
}
