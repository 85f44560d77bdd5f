//! A second thread for products on two threads (small ones, batches of them, and the
//! blocked loop's packing and compute phases) that spin-waits between them, as OpenBLAS's
//! threads do: a product of f32 N=256 takes about 100 us on two threads, and
//! waking a sleeping rayon worker costs a good part of that (measured on Zen 5 with 30
//! back-to-back products: 162-248 GFLOP/s through `rayon::join`, 294-346 when the worker
//! happened to be awake). The helper spins for `SPIN` after each job, then parks until the
//! next one.

use std::cell::UnsafeCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering::*};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long the helper spins for the next job before it parks.
const SPIN: Duration = Duration::from_micros(500);

/// How long a caller spins for the helper to finish before it yields its core (the helper
/// may be waiting for it: a woken thread is often queued on the waker's core).
const WAIT_SPIN: Duration = Duration::from_micros(50);

const IDLE: u8 = 0;
const POSTED: u8 = 1;
const DONE: u8 = 2;
const FAILED: u8 = 3;

/// A job: a borrowed closure on the caller's stack, valid until the caller has seen DONE or
/// FAILED (`join` waits for that, also when its own half panics).
type Job = *const (dyn Fn() + Sync);

struct Helper {
    state: AtomicU8,
    sleeping: AtomicBool,
    job: UnsafeCell<Option<Job>>,
    /// One caller at a time; others use rayon.
    busy: Mutex<()>,
    thread: std::thread::Thread,
}

// SAFETY: `job` is written only by the caller holding `busy` while `state` is IDLE (the
// helper does not read it then) and read only by the helper after it sees POSTED (Acquire,
// paired with the caller's SeqCst store after the write); the closure it points to is Sync.
unsafe impl Sync for Helper {}
// SAFETY: as for Sync; the pointer is only dereferenced under that protocol.
unsafe impl Send for Helper {}

fn helper() -> Option<&'static Helper> {
    static H: OnceLock<Option<&'static Helper>> = OnceLock::new();
    *H.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<&'static Helper>();
        std::thread::Builder::new()
            .name("accel-matmul-helper".into())
            .spawn(move || {
                let h: &'static Helper = Box::leak(Box::new(Helper {
                    state: AtomicU8::new(IDLE),
                    sleeping: AtomicBool::new(false),
                    job: UnsafeCell::new(None),
                    busy: Mutex::new(()),
                    thread: std::thread::current(),
                }));
                if tx.send(h).is_ok() {
                    serve(h);
                }
            })
            .ok()?;
        rx.recv().ok()
    })
}

/// The helper's loop: run posted jobs; spin `SPIN` after each, then park.
fn serve(h: &Helper) -> ! {
    loop {
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            if h.state.load(Acquire) == POSTED {
                break;
            }
            std::hint::spin_loop();
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(256) && start.elapsed() > SPIN {
                h.sleeping.store(true, SeqCst);
                if h.state.load(SeqCst) != POSTED {
                    std::thread::park();
                }
                h.sleeping.store(false, SeqCst);
            }
        }
        // SAFETY: POSTED was stored (after the job) by a caller that now waits for DONE or
        // FAILED before its closure goes out of scope (`join`).
        let job = unsafe { (*h.job.get()).take() };
        // SAFETY (the call): `j` points to the caller's closure, alive until we store DONE
        // or FAILED below; it is Sync, so calling it through a shared reference here is sound.
        let ok = job.is_some_and(|j| catch_unwind(AssertUnwindSafe(|| unsafe { (*j)() })).is_ok());
        h.state.store(if ok { DONE } else { FAILED }, Release);
    }
}

/// Runs `a` here and `b` on the spinning helper, and returns when both are done (`b` on
/// rayon's pool instead when the helper is taken by another call or could not start).
pub(crate) fn join(a: impl FnOnce() + Send, b: impl FnOnce() + Send) {
    join_with(a, b, false)
}

/// `join`, where `queue` waits for the helper rather than using rayon when it is taken (for
/// tests, which must exercise the helper however many run at once).
fn join_with(a: impl FnOnce() + Send, b: impl FnOnce() + Send, queue: bool) {
    // In a child made by fork() neither the helper nor rayon's workers exist.
    if !crate::base::threads::parallel() {
        a();
        return b();
    }
    let Some(h) = helper() else {
        return rayon::join(a, b).0;
    };
    // A panic in an earlier caller's half poisons `busy` (its guard drops while unwinding,
    // after the helper finished): the helper itself is fine, so poison is ignored.
    let busy = if queue {
        Some(h.busy.lock().unwrap_or_else(|e| e.into_inner()))
    } else {
        match h.busy.try_lock() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    };
    let Some(_busy) = busy else {
        return rayon::join(a, b).0;
    };
    // The helper calls jobs through `&dyn Fn`: `b` runs once, taken out of a Mutex.
    let once = Mutex::new(Some(b));
    let b = || {
        if let Some(b) = once.lock().unwrap_or_else(|e| e.into_inner()).take() {
            b()
        }
    };
    let b_ref: &(dyn Fn() + Sync) = &b;
    // SAFETY: state is IDLE (every join leaves it so, below) and we hold `busy`, so the
    // helper does not read `job` now. The lifetime of `b_ref` is erased here; `Wait` below
    // keeps `b` alive and this frame in place until the helper is done with it.
    unsafe {
        *h.job.get() = Some(std::mem::transmute::<&(dyn Fn() + Sync), Job>(b_ref));
    }
    h.state.store(POSTED, SeqCst);
    if h.sleeping.load(SeqCst) {
        h.thread.unpark();
    }
    /// Waits for the helper on drop, so that `b` outlives its run even if `a` panics.
    struct Wait<'h>(&'h Helper);
    impl Drop for Wait<'_> {
        fn drop(&mut self) {
            // Spin briefly, then yield: if the helper shares this core with us (more
            // runnable threads than cores), spinning would only delay it.
            let start = Instant::now();
            let mut spins = 0u32;
            loop {
                match self.0.state.load(Acquire) {
                    DONE => break,
                    FAILED => {
                        self.0.state.store(IDLE, Release);
                        if !std::thread::panicking() {
                            panic!("a matmul task panicked on the helper thread");
                        }
                        return;
                    }
                    _ => {
                        std::hint::spin_loop();
                        spins = spins.wrapping_add(1);
                        if spins.is_multiple_of(256) && start.elapsed() > WAIT_SPIN {
                            std::thread::yield_now();
                        }
                    }
                }
            }
            self.0.state.store(IDLE, Release);
        }
    }
    let wait = Wait(h);
    a();
    drop(wait);
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Always on the helper (queued behind other callers, never on rayon).
    fn join(a: impl FnOnce() + Send, b: impl FnOnce() + Send) {
        super::join_with(a, b, true)
    }

    /// The helper still takes a job and runs it (after a panic on either side).
    fn helper_runs_a_job() {
        let after = AtomicUsize::new(0);
        join(
            || {},
            || {
                after.fetch_add(1, Ordering::Relaxed);
            },
        );
        assert_eq!(after.into_inner(), 1, "the helper did not run the next job");
    }

    #[test]
    fn join_runs_each_half_once_and_waits_for_the_helper() {
        for round in 0..200 {
            let (x, y) = (AtomicUsize::new(0), AtomicUsize::new(0));
            // The helper's half is the slow one: join must not return before it ends.
            join(
                || {
                    x.fetch_add(1, Ordering::Relaxed);
                },
                || {
                    if round % 50 == 0 {
                        std::thread::sleep(std::time::Duration::from_millis(2));
                    }
                    y.fetch_add(1, Ordering::Relaxed);
                },
            );
            assert_eq!((x.into_inner(), y.into_inner()), (1, 1), "round {round}");
        }
    }

    #[test]
    fn a_panic_here_still_waits_for_the_helper_and_propagates() {
        let done = AtomicUsize::new(0);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            join(
                || panic!("first half"),
                || {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                    done.fetch_add(1, Ordering::Relaxed);
                },
            )
        }));
        assert!(r.is_err());
        assert_eq!(done.load(Ordering::Relaxed), 1);
        helper_runs_a_job();
        // The plain join (which takes the helper only when free, never queues) still uses
        // it although the panic poisoned its lock: some try runs `b` on the helper thread.
        let on_helper = (0..1000).any(|_| {
            let name = std::sync::Mutex::new(None);
            super::join(
                || {},
                || *name.lock().unwrap() = std::thread::current().name().map(String::from),
            );
            name.into_inner().unwrap().as_deref() == Some("accel-matmul-helper")
        });
        assert!(on_helper, "the helper is no longer used after a panic");
    }

    #[test]
    fn a_panic_on_the_helper_reaches_the_caller() {
        let r = std::panic::catch_unwind(|| join(|| {}, || panic!("second half")));
        assert!(r.is_err());
        helper_runs_a_job();
    }
}
