//! A second thread for products on two threads (small ones, batches of them, and the
//! blocked loop's packing and compute phases) that spin-waits between them, as OpenBLAS's
//! threads do: a product of f32 N=256 takes about 100 us on two threads, and
//! waking a sleeping rayon worker costs a good part of that (measured on Zen 5 with 30
//! back-to-back products: 162-248 GFLOP/s through `rayon::join`, 294-346 when the worker
//! happened to be awake). The helper spins for `SPIN` after each job, then parks until the
//! next one. A caller that finishes its half before the helper has taken the other takes
//! it back and runs it itself, and if the helper turns out to share its core, moves the
//! helper to another one (`Placement`).

use std::cell::UnsafeCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering::*};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long the helper spins for the next job before it parks.
const SPIN: Duration = Duration::from_micros(500);

/// How long a caller that has finished its half waits for the helper to take the other
/// before it takes it back and runs it itself. A helper spinning on another core takes a
/// job well within this; one packed onto the caller's core never does, and a half of an
/// f32 N=64 product takes about 2 us.
const GRACE: Duration = Duration::from_micros(2);

/// How long a caller spins for the helper to finish before it yields its core (the helper
/// may be waiting for it: a woken thread is often queued on the waker's core).
const WAIT_SPIN: Duration = Duration::from_micros(50);

const IDLE: u8 = 0;
const POSTED: u8 = 1;
const DONE: u8 = 2;
const FAILED: u8 = 3;
/// The helper has taken the posted job (from POSTED, by compare-exchange: a caller that
/// finishes its own half first takes the job back the same way, POSTED -> IDLE).
const RUNNING: u8 = 4;

/// A job: a borrowed closure on the caller's stack, valid until the caller has seen DONE or
/// FAILED, or taken it back (`join` does one of these, also when its own half panics).
type Job = *const (dyn Fn() + Sync);

struct Helper {
    state: AtomicU8,
    sleeping: AtomicBool,
    job: UnsafeCell<Option<Job>>,
    /// One caller at a time; others use rayon.
    busy: Mutex<()>,
    thread: std::thread::Thread,
    /// Where the helper last looked for work, and what it is allowed to run on: see
    /// `Placement`.
    place: Placement,
}

// SAFETY: `job` is written only by the caller holding `busy` while `state` is IDLE (the
// helper does not read it then) and read only by the helper after it moved the state from
// POSTED to RUNNING (Acquire, paired with the caller's SeqCst store of POSTED after the
// write; from RUNNING the caller no longer touches `job` until DONE or FAILED); the closure
// it points to is Sync.
unsafe impl Sync for Helper {}
// SAFETY: as for Sync; the pointer is only dereferenced under that protocol.
unsafe impl Send for Helper {}

fn helper() -> Option<&'static Helper> {
    static H: OnceLock<Option<&'static Helper>> = OnceLock::new();
    *H.get_or_init(|| {
        // Decided here, on the first caller's thread, before the helper runs anything.
        let cpus = Placement::decide();
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
                    place: Placement::start(cpus),
                }));
                if tx.send(h).is_ok() {
                    serve(h);
                }
            })
            .ok()?;
        rx.recv().ok()
    })
}

/// Where the helper runs. In a fresh process the kernel often queues a new or woken thread
/// on its creator's (or waker's) CPU, and this workplace's VMs pack runnable threads onto
/// fewer vCPUs (`sched_vcpu_pack`): the two threads of one product on one CPU ran it at
/// single-thread speed (with the job taken back) or far below it. So the first caller
/// decides once, before the helper runs, to keep it off the caller's CPU and that CPU's SMT
/// siblings (`cpuset::helper_cpus`: from the affinity mask and sysfs's topology); a caller
/// that later finds the helper on its CPU all the same (the caller moved there) moves the
/// helper off it again (`move_off_my_cpu`).
struct Placement {
    /// The CPU the helper was last kept off (-1: none yet).
    excluded: std::sync::atomic::AtomicI32,
    #[cfg(target_os = "linux")]
    tid: libc::pid_t,
    /// The CPUs the process allowed the first caller.
    #[cfg(target_os = "linux")]
    allowed: Option<crate::base::cpuset::CpuSet>,
}

/// What the first caller decided: its CPU, the CPUs allowed, and where the helper goes.
#[cfg(target_os = "linux")]
type Decision = Option<(
    usize,
    crate::base::cpuset::CpuSet,
    crate::base::cpuset::CpuSet,
)>;
#[cfg(not(target_os = "linux"))]
type Decision = ();

impl Placement {
    /// On the first caller's thread: its CPU, its allowed CPUs and the helper's
    /// (`cpuset::helper_cpus`); `None` where any is unknown or no other CPU is allowed.
    fn decide() -> Decision {
        #[cfg(target_os = "linux")]
        {
            use crate::base::cpuset;
            let me = cpuset::current()?;
            let allowed = cpuset::allowed()?;
            let (siblings, package) = cpuset::topology(me);
            let cpus = cpuset::helper_cpus(&allowed, me, &siblings, &package)?;
            Some((me, allowed, cpus))
        }
    }

    /// On the helper's thread, before its first job: moves it where `decide` said.
    fn start(d: Decision) -> Placement {
        #[cfg(target_os = "linux")]
        {
            let excluded = match &d {
                Some((me, _, cpus)) if crate::base::cpuset::restrict(0, cpus) => *me as i32,
                _ => -1,
            };
            Placement {
                excluded: std::sync::atomic::AtomicI32::new(excluded),
                // SAFETY: gettid has no preconditions.
                tid: unsafe { libc::gettid() },
                allowed: d
                    .map(|(_, allowed, _)| allowed)
                    .or_else(crate::base::cpuset::allowed),
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let () = d;
            Placement {
                excluded: std::sync::atomic::AtomicI32::new(-1),
            }
        }
    }

    /// Called by a caller that took a job back from the helper: keeps the helper off the
    /// caller's CPU (and its siblings, as `decide` does; the kernel moves it at once if it
    /// was there). Nothing if it is already kept off this CPU, if no other CPU is allowed,
    /// or off Linux.
    fn move_off_my_cpu(&self) {
        #[cfg(target_os = "linux")]
        {
            use crate::base::cpuset;
            let Some(me) = cpuset::current() else {
                return;
            };
            if self.excluded.load(Relaxed) == me as i32 {
                return;
            }
            let Some(allowed) = &self.allowed else {
                return;
            };
            let (siblings, package) = cpuset::topology(me);
            if let Some(cpus) = cpuset::helper_cpus(allowed, me, &siblings, &package) {
                if cpuset::restrict(self.tid, &cpus) {
                    self.excluded.store(me as i32, Relaxed);
                }
            }
        }
    }
}

/// The helper's loop: run posted jobs; spin `SPIN` after each, then park.
fn serve(h: &Helper) -> ! {
    loop {
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            if h.state.load(Acquire) == POSTED
                && h.state
                    .compare_exchange(POSTED, RUNNING, Acquire, Relaxed)
                    .is_ok()
            {
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
        // SAFETY: we moved the state from POSTED (stored after the job) to RUNNING, so the
        // caller can no longer take the job back and waits for DONE or FAILED before its
        // closure goes out of scope (`join`).
        let job = unsafe { (*h.job.get()).take() };
        // SAFETY (the call): `j` points to the caller's closure, alive until we store DONE
        // or FAILED below; it is Sync, so calling it through a shared reference here is sound.
        let ok = job.is_some_and(|j| catch_unwind(AssertUnwindSafe(|| unsafe { (*j)() })).is_ok());
        h.state.store(if ok { DONE } else { FAILED }, Release);
    }
}

/// Runs `a` here and `b` on the spinning helper, and returns when both are done (`b` here
/// after `a` when the helper has not started it by then; on rayon's pool when the helper
/// is taken by another call or could not start). If `a` panics, `b` runs at most once.
pub(crate) fn join(a: impl FnOnce() + Send, b: impl FnOnce() + Send) {
    join_with(a, b, false)
}

/// Runs `f(i, &mut parts[i])` for every part, one per thread: on the calling thread alone
/// for one part, on it and the spinning helper for two (`join`), on rayon's pool for more.
/// The one place that chooses between the helper and rayon for a product's phases.
pub(crate) fn for_each_part<T: Send>(parts: &mut [T], f: impl Fn(usize, &mut T) + Sync + Send) {
    match parts {
        [] => {}
        [p0] => f(0, p0),
        [p0, p1] => join(|| f(0, p0), || f(1, p1)),
        more => {
            use rayon::prelude::*;
            more.par_iter_mut().enumerate().for_each(|(i, p)| f(i, p))
        }
    }
}

/// `join`, where `queue` waits for the helper rather than using rayon when it is taken (for
/// tests, which must exercise the helper however many run at once).
fn join_with(a: impl FnOnce() + Send, b: impl FnOnce() + Send, queue: bool) {
    // In a child made by fork() neither the helper nor rayon's workers exist (callers ask
    // `threads` first: with one CPU allowed, or a quota under 1.5 CPUs, no product is split).
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
    /// Settles the posted job once `a` is done (or on drop, if `a` panics), so that `b`
    /// outlives any run of it on the helper.
    struct Wait<'h> {
        h: &'h Helper,
        settled: bool,
    }
    impl Wait<'_> {
        /// Takes the job back if the helper has not started it (true: the caller runs `b`
        /// itself), else waits for the helper to finish it (false).
        fn settle(&mut self) -> bool {
            self.settled = true;
            let h = self.h;
            // A spinning helper on another core has taken the job by now; give it GRACE
            // before taking the job back.
            let start = Instant::now();
            let mut spins = 0u32;
            while !h.sleeping.load(Relaxed) && h.state.load(Relaxed) == POSTED {
                std::hint::spin_loop();
                spins = spins.wrapping_add(1);
                if spins.is_multiple_of(64) && start.elapsed() > GRACE {
                    break;
                }
            }
            // Not started: the helper is asleep or late, or it shares this core with us
            // (this workplace's VMs pack threads onto fewer vCPUs: traced on Zen 5, the
            // woken helper was queued on its waker's core for whole runs, where waiting for
            // it cost f32 N=256 products 660-940 us instead of 80).
            if h.state
                .compare_exchange(POSTED, IDLE, Acquire, Relaxed)
                .is_ok()
            {
                // SAFETY: the state is IDLE and we hold `busy`: the helper does not read
                // `job` (it takes a job only by moving the state from POSTED to RUNNING).
                unsafe { *h.job.get() = None };
                h.place.move_off_my_cpu();
                return true;
            }
            // Spin briefly, then yield: if the helper shares this core with us (more
            // runnable threads than cores), spinning would only delay it.
            let start = Instant::now();
            let mut spins = 0u32;
            loop {
                match h.state.load(Acquire) {
                    DONE => break,
                    FAILED => {
                        h.state.store(IDLE, Release);
                        if !std::thread::panicking() {
                            panic!("a matmul task panicked on the helper thread");
                        }
                        return false;
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
            h.state.store(IDLE, Release);
            false
        }
    }
    impl Drop for Wait<'_> {
        fn drop(&mut self) {
            if !self.settled {
                self.settle();
            }
        }
    }
    let mut wait = Wait { h, settled: false };
    a();
    if wait.settle() {
        b();
    }
}

/// The units of one phase of a product, handed out in order to whichever thread asks next
/// (each thread of `for_each_part` claims until none is left), so that a thread slowed by
/// another process on its CPU does fewer of them than a fixed share would give it.
pub(crate) struct Claims {
    next: std::sync::atomic::AtomicUsize,
    units: usize,
}

impl Claims {
    pub(crate) fn new(units: usize) -> Claims {
        Claims {
            next: std::sync::atomic::AtomicUsize::new(0),
            units,
        }
    }

    /// The next unclaimed unit, each unit to exactly one caller; `None` once all are taken.
    /// (What a unit writes reaches the other threads through the phase's join, not this.)
    pub(crate) fn next(&self) -> Option<usize> {
        // Each thread stops at its first `None`, so the counter passes `units` by at most
        // the number of threads.
        let u = self.next.fetch_add(1, Relaxed);
        (u < self.units).then_some(u)
    }
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
        // `b` ran on the helper (and join waited for it) or was taken back and never ran:
        // nothing of it may run after join has returned.
        let seen = done.load(Ordering::Relaxed);
        assert!(seen <= 1);
        std::thread::sleep(std::time::Duration::from_millis(10));
        assert_eq!(
            done.load(Ordering::Relaxed),
            seen,
            "b ran after join returned"
        );
        helper_runs_a_job();
        // The plain join (which takes the helper only when free, never queues) still uses
        // it although the panic poisoned its lock: some try runs `b` on the helper thread.
        let on_helper = (0..1000).any(|_| {
            let name = std::sync::Mutex::new(None);
            super::join(
                // Long enough for the helper to take `b` before this half ends.
                || std::thread::sleep(std::time::Duration::from_millis(1)),
                || *name.lock().unwrap() = std::thread::current().name().map(String::from),
            );
            name.into_inner().unwrap().as_deref() == Some("accel-matmul-helper")
        });
        assert!(on_helper, "the helper is no longer used after a panic");
    }

    /// Each unit of a phase goes to exactly one thread, and a thread held up inside a unit
    /// (another process on its CPU) leaves the remaining units to the other rather than
    /// keeping a fixed half.
    #[test]
    fn claims_hand_out_each_unit_once_and_a_held_up_thread_takes_fewer() {
        use std::sync::atomic::AtomicBool;
        for _ in 0..20 {
            let claims = super::Claims::new(64);
            let part0_done = AtomicBool::new(false);
            let by = std::sync::Mutex::new([Vec::new(), Vec::new()]);
            let part = |p: usize| {
                while let Some(u) = claims.next() {
                    by.lock().unwrap()[p].push(u);
                    // Part 1 stalls in its first unit until part 0 is out of units.
                    let start = std::time::Instant::now();
                    while p == 1
                        && !part0_done.load(Ordering::Acquire)
                        && start.elapsed() < std::time::Duration::from_secs(10)
                    {
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    }
                }
                if p == 0 {
                    part0_done.store(true, Ordering::Release);
                }
            };
            join(|| part(0), || part(1));
            let by = by.into_inner().unwrap();
            let mut all = by.concat();
            all.sort_unstable();
            assert_eq!(all, (0..64).collect::<Vec<_>>(), "each unit once");
            assert!(
                by[1].len() <= 1,
                "the stalled part did {} units",
                by[1].len()
            );
            assert_eq!(claims.next(), None);
        }
    }

    /// Where the kernel lets thread `tid` of this process run, as /proc reports it.
    #[cfg(target_os = "linux")]
    fn cpus_allowed(tid: libc::pid_t) -> crate::base::cpuset::CpuSet {
        let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status"))
            .expect("the thread's status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .and_then(crate::base::cpuset::parse_list)
            .expect("Cpus_allowed_list")
    }

    /// Tests that move the helper between CPUs, one at a time.
    #[cfg(target_os = "linux")]
    static PLACING: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// The first caller keeps the helper off its own CPU before the helper runs a job
    /// (`Placement::decide`), so that a fresh process's first product already runs on two.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_helper_starts_off_the_first_callers_cpu() {
        let _one = PLACING.lock().unwrap_or_else(|e| e.into_inner());
        let h = super::helper().expect("the helper starts");
        let allowed = h.place.allowed.expect("the helper read its allowed CPUs");
        if allowed.len() < 2 {
            println!("skipped: cpu: one CPU allowed, nowhere else to put the helper");
            return;
        }
        let excluded = || h.place.excluded.load(std::sync::atomic::Ordering::Relaxed);
        assert!(excluded() >= 0, "the helper was not placed");
        // Other tests of this process use the helper meanwhile, and one that takes a job back
        // moves it (`move_off_my_cpu`: the affinity first, then `excluded`), so the two are
        // read until they agree: a helper truly left on the excluded CPU never does.
        let mut seen = (0, Default::default());
        let agree = (0..200).any(|_| {
            let (cpu, list) = (excluded(), cpus_allowed(h.place.tid));
            let ok = cpu >= 0 && !list.contains(cpu as usize) && list.len() > 0;
            if !ok {
                seen = (cpu, list);
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            ok
        });
        let (cpu, list) = seen;
        assert!(
            agree,
            "the helper may run on {list:?}, which holds the caller's CPU {cpu}"
        );
        helper_runs_a_job();
    }

    /// A caller that finds the helper on its own core, too late to take a job, moves it off
    /// that core. Forced here: this thread and the helper pinned to one CPU.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_helper_sharing_the_callers_core_is_moved_off_it() {
        use crate::base::cpuset::{self, CpuSet};
        use std::sync::atomic::Ordering::Relaxed;
        let _one = PLACING.lock().unwrap_or_else(|e| e.into_inner());
        let h = super::helper().expect("the helper starts");
        let allowed = h.place.allowed.expect("the helper read its allowed CPUs");
        if allowed.len() < 2 {
            println!("skipped: cpu: one CPU allowed, nowhere to move the helper");
            return;
        }
        let c0 = allowed.iter().next().unwrap();
        let only_c0 = CpuSet::of([c0]);
        let mine = cpuset::allowed().unwrap();
        let before = cpus_allowed(h.place.tid);
        let excluded = h.place.excluded.load(Relaxed);
        assert!(cpuset::restrict(0, &only_c0) && cpuset::restrict(h.place.tid, &only_c0));
        // Jobs whose first half ends at once: the helper, behind us on CPU c0, cannot take
        // the second in time, so the caller takes it back and moves the helper.
        h.place.excluded.store(-1, Relaxed);
        let start = std::time::Instant::now();
        let moved = loop {
            join(|| {}, || {});
            if !cpus_allowed(h.place.tid).contains(c0) {
                break true;
            }
            if start.elapsed() > std::time::Duration::from_secs(5) {
                break false;
            }
        };
        cpuset::restrict(h.place.tid, &before);
        h.place.excluded.store(excluded, Relaxed);
        cpuset::restrict(0, &mine);
        assert!(moved, "the helper stayed on the caller's CPU {c0}");
        helper_runs_a_job();
    }

    #[test]
    fn a_panic_on_the_helper_reaches_the_caller() {
        // The first half waits until the helper has taken the second (else the caller
        // takes it back and the panic happens here, not on the helper).
        let r = std::panic::catch_unwind(|| {
            join(
                || std::thread::sleep(std::time::Duration::from_millis(20)),
                || panic!("second half"),
            )
        });
        let err = r.expect_err("the panic did not reach the caller");
        let msg = err.downcast_ref::<&str>().copied();
        let msg = msg.or_else(|| err.downcast_ref::<String>().map(String::as_str));
        assert_eq!(msg, Some("a matmul task panicked on the helper thread"));
        helper_runs_a_job();
    }
}
