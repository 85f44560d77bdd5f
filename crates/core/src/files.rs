//! Every file accel reads from the machine (sysfs, procfs, fdinfo, the TPU's sysfs, configs,
//! certificates, host lists) goes through [`read_limited`]: a size limit, and a refusal of
//! anything but a regular file without waiting on it.
//!
//! A FIFO put where `meminfo` should be blocks `open(2)` itself until a writer comes; a
//! character device (`/dev/zero` linked in as a config) reads without end. So the file is
//! opened with `O_NONBLOCK` (which a regular file ignores), checked with `fstat`, and read
//! through a cap: at most `limit` bytes are ever read, one more tells that the file is larger.
//! A read that blocks inside the kernel all the same (a hung GPU's sysfs attribute) is the
//! caller's deadline to bound: telemetry reads on worker threads that are waited for with one.

use std::fmt;
use std::io::Read;
use std::path::Path;

/// Why a file was not read.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReadError {
    /// Opening, inspecting or reading it failed.
    Io(std::io::Error),
    /// It is a FIFO, a socket, a device or a folder where a regular file was expected.
    NotRegular(&'static str),
    /// It holds more than the limit.
    TooLarge(u64),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "{e}"),
            ReadError::NotRegular(kind) => {
                write!(f, "it is a {kind}, not a regular file; it was not read")
            }
            ReadError::TooLarge(limit) => {
                write!(f, "it is larger than {limit} bytes; it was not read")
            }
        }
    }
}

impl std::error::Error for ReadError {}

impl From<std::io::Error> for ReadError {
    fn from(e: std::io::Error) -> ReadError {
        ReadError::Io(e)
    }
}

/// What kind of file this is, for the error ("a FIFO").
fn kind_of(t: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "FIFO";
        }
        if t.is_socket() {
            return "socket";
        }
        if t.is_char_device() {
            return "character device";
        }
        if t.is_block_device() {
            return "block device";
        }
    }
    if t.is_dir() {
        "folder"
    } else {
        "special file"
    }
}

/// The regular file at `path` (symbolic links followed), opened for reading without waiting:
/// a FIFO or a device is [`ReadError::NotRegular`], never a read that blocks. For readers
/// that seek (a log's tail, a library's section headers).
pub fn open_regular(path: &Path) -> Result<std::fs::File, ReadError> {
    let mut o = std::fs::OpenOptions::new();
    o.read(true);
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    let f = o.open(path)?;
    let t = f.metadata()?.file_type();
    if !t.is_file() {
        return Err(ReadError::NotRegular(kind_of(&t)));
    }
    Ok(f)
}

/// The bytes of the regular file at `path` (symbolic links followed), at most `limit` of them:
/// a larger file is [`ReadError::TooLarge`], anything but a regular file
/// [`ReadError::NotRegular`], and neither waits.
pub fn read_limited(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    let f = open_regular(path)?;
    let mut buf = Vec::new();
    f.take(limit.saturating_add(1)).read_to_end(&mut buf)?;
    if buf.len() as u64 > limit {
        return Err(ReadError::TooLarge(limit));
    }
    Ok(buf)
}

/// [`read_limited`] as text; bytes that are not UTF-8 are replaced (U+FFFD), not fatal.
pub fn read_text_limited(path: &Path, limit: u64) -> Result<String, ReadError> {
    let b = read_limited(path, limit)?;
    Ok(match String::from_utf8(b) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn dir() -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("accel-files-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_regular_file_within_the_limit_is_read_whole_and_a_larger_one_is_refused() {
        let p = dir().join("ten");
        std::fs::write(&p, b"0123456789").unwrap();
        assert_eq!(read_limited(&p, 10).unwrap(), b"0123456789");
        assert_eq!(read_limited(&p, 100).unwrap(), b"0123456789");
        let e = read_limited(&p, 9).unwrap_err();
        assert!(matches!(e, ReadError::TooLarge(9)), "{e}");
        std::fs::write(&p, b"a\xffb").unwrap();
        assert_eq!(read_text_limited(&p, 10).unwrap(), "a\u{fffd}b");
        assert!(matches!(
            read_limited(&dir().join("absent"), 10),
            Err(ReadError::Io(_))
        ));
        assert!(matches!(
            read_limited(&dir(), 10),
            Err(ReadError::NotRegular("folder"))
        ));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_fifo_and_a_device_are_refused_at_once() {
        let p = dir().join("fifo");
        let _ = std::fs::remove_file(&p);
        let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let t = Instant::now();
        // No writer ever opens it: a plain open would wait for good.
        let e = read_limited(&p, 10).unwrap_err();
        assert!(matches!(e, ReadError::NotRegular("FIFO")), "{e}");
        assert!(t.elapsed() < Duration::from_secs(2));
        let e = read_limited(Path::new("/dev/zero"), 10).unwrap_err();
        assert!(
            matches!(e, ReadError::NotRegular("character device")),
            "{e}"
        );
        // Through a symbolic link, the same.
        let l = dir().join("link-to-zero");
        let _ = std::fs::remove_file(&l);
        std::os::unix::fs::symlink("/dev/zero", &l).unwrap();
        assert!(matches!(
            read_limited(&l, 10),
            Err(ReadError::NotRegular("character device"))
        ));
    }
}
