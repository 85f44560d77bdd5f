//! Frees the driver refused (device memory, pinned host blocks): memory it may still hold,
//! counted here because a drop cannot return an error. `accelkit::cuda::free_failures()` and
//! `accel mem` report them. Compiled in every build (it stays zero without CUDA).

/// Frees the driver refused: memory it may still hold for this process. A drop cannot return
/// an error, so each failure is counted here instead of vanishing (`accelkit::cuda::free_failures`,
/// `accel mem`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FreeFailures {
    /// How many frees failed.
    pub count: u64,
    /// Bytes those frees should have returned.
    pub bytes: u64,
    /// The last failure: which device or block, which call, the driver's error.
    pub last: Option<String>,
}

static FREE_FAILURES: std::sync::Mutex<FreeFailures> = std::sync::Mutex::new(FreeFailures {
    count: 0,
    bytes: 0,
    last: None,
});

/// Counts one failed free of `bytes` bytes.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn record_free_failure(bytes: u64, what: String) {
    let mut f = FREE_FAILURES.lock().unwrap_or_else(|e| e.into_inner());
    f.count += 1;
    f.bytes += bytes;
    f.last = Some(what);
}

/// Every failed free so far in this process.
pub(crate) fn free_failures() -> FreeFailures {
    FREE_FAILURES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
}

#[cfg(test)]
mod tests {
    #[test]
    fn failed_frees_are_counted_with_their_bytes_and_the_last_error() {
        let before = super::free_failures();
        super::record_free_failure(4096, "cuda:0: first".into());
        super::record_free_failure(100, "pinned host block of 100 bytes: second".into());
        let after = super::free_failures();
        assert_eq!(after.count - before.count, 2);
        assert_eq!(after.bytes - before.bytes, 4196);
        assert_eq!(
            after.last.as_deref(),
            Some("pinned host block of 100 bytes: second")
        );
    }
}
