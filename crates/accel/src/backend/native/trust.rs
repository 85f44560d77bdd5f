//! Which folders and programs accel may take native code from: git's `safe.directory`
//! reasoning. A folder found relative to the working directory must belong to the current
//! user, as must every folder up to the working directory, and none of them may be writable
//! by group or others; a program found on PATH must belong to the user or root and sit in a
//! folder no one else may write. What is skipped is remembered for `accel doctor`.

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

#[cfg(target_os = "linux")]
fn check(path: &Path, owners: &[u32]) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if !owners.contains(&m.uid()) {
        return Err(format!(
            "{} belongs to uid {}, not to you (uid {})",
            path.display(),
            m.uid(),
            owners[0]
        ));
    }
    if m.mode() & 0o022 != 0 {
        return Err(format!(
            "{} is writable by {} (mode {:o})",
            path.display(),
            if m.mode() & 0o002 != 0 {
                "everyone"
            } else {
                "its group"
            },
            m.mode() & 0o7777
        ));
    }
    Ok(())
}

#[cfg(target_os = "linux")]
fn me() -> u32 {
    // SAFETY: geteuid takes no arguments and cannot fail.
    unsafe { libc::geteuid() }
}

/// `dir` and every folder from it up to `top` belong to the current user and are not
/// writable by group or others.
pub fn owned_and_private(dir: &Path, top: &Path) -> Result<(), String> {
    #[cfg(target_os = "linux")]
    {
        let me = me();
        let mut d = Some(dir);
        while let Some(p) = d {
            check(p, &[me])?;
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
        check(program, &owners)?;
        match program.parent() {
            Some(dir) => check(dir, &owners),
            None => Ok(()),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = program;
        Ok(())
    }
}

/// The first `name` on PATH, as the shell would run it.
pub fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|d| d.is_absolute())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}
