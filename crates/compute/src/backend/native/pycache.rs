//! `python3`'s site-packages, kept between runs in the runtime folder: asking costs a process
//! start (80 ms here, more behind pyenv's shims), and `accel devices` asks on every call where
//! no Python environment is found otherwise (a binary installed with cargo, no venv active).
//!
//! The answer is kept with a key of everything it depends on: the `python3` found on PATH and
//! the file it resolves to (device, inode, size, modification and change times), the
//! `pyvenv.cfg` beside it, the working directory with pyenv's version files (`.python-version`
//! up from it, `$PYENV_ROOT/version`), and the environment variables Python and its version
//! managers read (`PYTHON*`, `PYENV*`, `CONDA*`, `HOME`, `PATH`, `VIRTUAL_ENV`). Any of them
//! different, or a folder of the answer gone, and python3 is asked again. The file is read
//! under `kept`'s trust rules, at most 64 KiB.

use super::kept::{env_lines, stamp};
use std::path::{Path, PathBuf};

/// The cache's file name in the runtime folder.
const FILE: &str = "accel-python3-site-packages.json";
/// The most a cache file may hold.
const MAX_BYTES: u64 = 64 * 1024;

pub(super) use super::kept::folder;

/// What `python`'s answer depends on, one line each.
pub(super) fn key(python: &Path) -> Vec<String> {
    let mut k = vec![format!("accel {}", env!("CARGO_PKG_VERSION"))];
    k.push(format!("python3 {} {}", python.display(), stamp(python)));
    if let Ok(real) = std::fs::canonicalize(python) {
        k.push(format!("resolves to {} {}", real.display(), stamp(&real)));
    }
    if let Some(dir) = python.parent() {
        for cfg in [
            Some(dir.join("pyvenv.cfg")),
            dir.parent().map(|d| d.join("pyvenv.cfg")),
        ]
        .into_iter()
        .flatten()
        {
            k.push(format!("{} {}", cfg.display(), stamp(&cfg)));
        }
    }
    k.extend(env_lines(
        &["PYTHON", "PYENV", "CONDA"],
        &["HOME", "PATH", "VIRTUAL_ENV"],
    ));
    if let Ok(cwd) = std::env::current_dir() {
        k.push(format!("cwd {}", cwd.display()));
        let mut d = Some(cwd.as_path());
        while let Some(p) = d {
            let f = p.join(".python-version");
            let s = stamp(&f);
            if s != "absent" {
                k.push(format!("{} {s}", f.display()));
            }
            d = p.parent();
        }
    }
    let root = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pyenv")));
    if let Some(r) = root {
        let f = r.join("version");
        k.push(format!("{} {}", f.display(), stamp(&f)));
    }
    k
}

/// The answer kept in `dir` under `key`, when the file may be trusted and every folder of it
/// is still there.
pub(super) fn read(dir: &Path, key: &[String]) -> Option<Vec<PathBuf>> {
    let sps: Vec<PathBuf> = super::kept::read(dir, FILE, key, MAX_BYTES)?;
    sps.iter()
        .all(|p| p.is_absolute() && p.is_dir())
        .then_some(sps)
}

/// Keeps `site_packages` in `dir` under `key`; a failure only means python3 is asked next
/// time.
pub(super) fn write(dir: &Path, key: &[String], site_packages: &[PathBuf]) {
    super::kept::write(dir, FILE, key, &site_packages, MAX_BYTES)
}

#[cfg(all(test, unix))]
mod tests {
    use super::super::kept::{euid, private_folder};
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn private_temp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("accel-pycache-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        d
    }

    #[test]
    fn an_answer_is_kept_under_its_key_and_lost_when_what_it_depends_on_changes() {
        let d = private_temp("key");
        let python = d.join("python3");
        std::fs::write(&python, "#!/bin/sh\n").unwrap();
        let sp = d.join("site-packages");
        std::fs::create_dir(&sp).unwrap();
        let k = key(&python);
        assert!(private_folder(&d));
        assert_eq!(read(&d, &k), None, "nothing kept yet");
        write(&d, &k, std::slice::from_ref(&sp));
        assert_eq!(read(&d, &k), Some(vec![sp.clone()]));
        let mode = std::fs::metadata(d.join(FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // Another python3 (rewritten: its size and times change): asked again.
        std::fs::write(&python, "#!/bin/sh\nexec /usr/bin/python3 \"$@\"\n").unwrap();
        let k2 = key(&python);
        assert_ne!(k, k2);
        assert_eq!(read(&d, &k2), None);
        // A pyvenv.cfg appearing beside it changes the key too.
        write(&d, &k2, std::slice::from_ref(&sp));
        std::fs::write(d.join("pyvenv.cfg"), "home = /usr/bin\n").unwrap();
        assert_eq!(read(&d, &key(&python)), None);
        // A folder of the answer gone: stale.
        let k3 = key(&python);
        write(&d, &k3, std::slice::from_ref(&sp));
        std::fs::remove_dir(&sp).unwrap();
        assert_eq!(read(&d, &k3), None);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_cache_file_others_could_have_written_is_not_trusted() {
        let d = private_temp("trust");
        let sp = d.join("sp");
        std::fs::create_dir(&sp).unwrap();
        let k = vec!["k".to_string()];
        write(&d, &k, std::slice::from_ref(&sp));
        let f = d.join(FILE);
        assert!(read(&d, &k).is_some());
        // Readable or writable by others.
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(read(&d, &k), None);
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        // Someone else's (root can give it away; others cannot write it here at all).
        if euid() == 0 {
            std::os::unix::fs::chown(&f, Some(4242), None).unwrap();
            assert_eq!(read(&d, &k), None);
            std::os::unix::fs::chown(&f, Some(0), None).unwrap();
        }
        assert!(read(&d, &k).is_some());
        // A link to a file of the same content.
        let real = d.join("real.json");
        std::fs::rename(&f, &real).unwrap();
        std::os::unix::fs::symlink(&real, &f).unwrap();
        assert_eq!(read(&d, &k), None);
        std::fs::remove_file(&f).unwrap();
        // Over the size limit, or not JSON: ignored, never read whole.
        std::fs::write(&f, vec![b' '; MAX_BYTES as usize + 1]).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read(&d, &k), None);
        std::fs::write(&f, "{\"key\": [\"k\"], \"value\": [\"relative\"]}").unwrap();
        assert_eq!(read(&d, &k), None, "a relative folder is not taken");
        // A folder others may write is no place for the cache.
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(!private_folder(&d));
        let _ = std::fs::remove_dir_all(&d);
    }
}
