//! Files the user names on the command line or in a config (the web config, certificates, keys,
//! a host list, a password file, a baseline report): read through
//! `accelkit_core::files::read_limited`, so a FIFO, a device or a huge file given by mistake (or
//! by a hostile local user who can write the folder) is an error at once, never a hang.

use std::path::Path;

/// The largest config, certificate or host list read (a web config with a thousand users is
/// ~70 KiB; a certificate chain a few KiB).
pub(crate) const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The largest benchmark report read as a baseline.
pub const MAX_REPORT_BYTES: u64 = 64 << 20;

/// The text of `path`, at most `limit` bytes of a regular file; the error names `what` and
/// the path.
pub fn read_file(path: &Path, what: &str, limit: u64) -> anyhow::Result<String> {
    accelkit_core::files::read_text_limited(path, limit)
        .map_err(|e| anyhow::anyhow!("cannot read {what} {}: {e}", path.display()))
}

/// [`read_file`] with the config limit.
pub(crate) fn read_config(path: &Path, what: &str) -> anyhow::Result<String> {
    read_file(path, what, MAX_CONFIG_BYTES)
}

/// How deeply YAML or JSON text nests (`[` and `{` inside each other; quotes are not
/// parsed, so brackets in strings count too, which only makes the answer larger). A web
/// config nests 3 deep; the YAML parser takes seconds to refuse 100,000 levels, so a file
/// nested deeper than [`MAX_NESTING`] is refused before it is parsed.
pub(crate) fn nesting_depth(text: &str) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    for b in text.bytes() {
        match b {
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// The deepest nesting a config may have.
pub(crate) const MAX_NESTING: usize = 64;

/// Parses a YAML config after checking its nesting.
pub(crate) fn yaml<T: serde::de::DeserializeOwned>(
    text: &str,
    path: &Path,
    what: &str,
) -> anyhow::Result<T> {
    if nesting_depth(text) > MAX_NESTING {
        anyhow::bail!(
            "{}: not a {what}: nested more than {MAX_NESTING} levels deep",
            path.display()
        );
    }
    serde_yaml::from_str(text).map_err(|e| anyhow::anyhow!("{}: not a {what}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting_is_counted_and_a_deep_file_is_refused_fast() {
        assert_eq!(nesting_depth("a: 1\nb: [1, {c: [2]}]\n"), 3);
        assert_eq!(nesting_depth("]]]["), 1);
        let deep = "[".repeat(100_000);
        let t = std::time::Instant::now();
        let e = yaml::<serde_yaml::Value>(&deep, Path::new("w.yml"), "web config").unwrap_err();
        assert!(e.to_string().contains("nested more than 64"), "{e}");
        assert!(t.elapsed() < std::time::Duration::from_secs(1));
    }
}
