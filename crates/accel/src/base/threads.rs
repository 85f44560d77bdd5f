//! Whether this process may use its worker threads: not in a child made by fork(), where
//! only the forking thread exists.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// Set in a child made by fork(): only the forking thread exists there, so a job handed to
/// rayon's pool or to matmul's helper thread (started by the parent) would wait forever.
static FORKED: AtomicBool = AtomicBool::new(false);

/// Whether kernels may hand work to other threads (rayon's pool, matmul's helper): false in
/// a child made by fork() after this was first asked (PyTorch does the same with
/// `pthread_atfork`). Python's `multiprocessing` forks by default on Linux, and a child's
/// first large op used to hang. Every parallel kernel asks this before it hands work out.
pub(crate) fn parallel() -> bool {
    #[cfg(unix)]
    {
        static REGISTER: std::sync::Once = std::sync::Once::new();
        extern "C" fn in_child() {
            FORKED.store(true, Relaxed);
        }
        REGISTER.call_once(|| {
            // SAFETY: registers a handler that only stores to an atomic (async-signal-safe,
            // as a fork handler must be). A failure (ENOMEM) leaves children as before.
            unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
        });
    }
    !FORKED.load(Relaxed)
}

/// The threads kernels split work over: rayon's, or 1 where [`parallel`] says no.
pub(crate) fn threads() -> usize {
    if parallel() {
        rayon::current_num_threads()
    } else {
        1
    }
}
