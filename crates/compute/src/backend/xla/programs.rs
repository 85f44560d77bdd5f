//! Compiled XLA programs: one per distinct program text and client, kept in an LRU of
//! [`CACHE_PROGRAMS`] per client (emptied by `empty_cache`), with the count and time of
//! compilations for the benchmarks.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use super::context::XlaDevice;
use crate::{BackendKind, Error, Result};

static COMPILES: AtomicUsize = AtomicUsize::new(0);
static COMPILE_NANOS: AtomicU64 = AtomicU64::new(0);

pub(crate) fn compile_count() -> usize {
    COMPILES.load(Ordering::Relaxed)
}

pub(crate) fn compile_seconds() -> f64 {
    COMPILE_NANOS.load(Ordering::Relaxed) as f64 / 1e9
}

/// Programs kept per client. A program is specialised to its op, shapes and views, so a
/// training loop uses tens of them; one compiled executable holds from ~100 KiB (XLA's CPU) to
/// a few MiB (GPU kernels) of host memory. 256 bounds that to some hundreds of MiB at worst
/// while a program in use is never compiled twice; the least recently used goes first.
pub(crate) const CACHE_PROGRAMS: usize = 256;

/// Per client, per program text: the executable and when it was last used (a tick). Looked up
/// by `&str`: no copy of the text on a hit.
type Cache = HashMap<usize, HashMap<String, (Arc<super::pjrt::Executable>, u64)>>;

static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
static TICK: AtomicU64 = AtomicU64::new(0);

fn cache() -> &'static Mutex<Cache> {
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Forgets every compiled program of `dev`'s client (`empty_cache`); programs still running
/// keep their executable alive until they finish.
pub(super) fn forget_programs(dev: &XlaDevice) {
    let client = Arc::as_ptr(&dev.client) as usize;
    cache()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&client);
}

pub(super) fn executable(dev: &XlaDevice, mlir: &str) -> Result<Arc<super::pjrt::Executable>> {
    let client = Arc::as_ptr(&dev.client) as usize;
    let now = TICK.fetch_add(1, Ordering::Relaxed);
    let hit = cache()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_mut(&client)
        .and_then(|m| m.get_mut(mlir))
        .map(|(e, used)| {
            *used = now;
            e.clone()
        });
    if let Some(e) = hit {
        return Ok(e);
    }
    let t = Instant::now();
    let exe = dev.client.compile(mlir).map_err(|e| {
        Error::backend(
            BackendKind::Xla,
            format!(
                "XLA could not compile accel's program on {} (please report this)\n{mlir}\n",
                dev.device
            ),
            e,
        )
    })?;
    COMPILE_NANOS.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
    COMPILES.fetch_add(1, Ordering::Relaxed);
    let exe = Arc::new(exe);
    let mut c = cache().lock().unwrap_or_else(|e| e.into_inner());
    let m = c.entry(client).or_default();
    while m.len() >= CACHE_PROGRAMS {
        let Some(oldest) = m
            .iter()
            .min_by_key(|(_, (_, used))| *used)
            .map(|(k, _)| k.clone())
        else {
            break;
        };
        m.remove(&oldest);
    }
    m.insert(mlir.to_string(), (exe.clone(), now));
    Ok(exe)
}
