//! What live tensors hold on each device: counted when a buffer is made and when the last
//! tensor using it is dropped. The bottom of the memory accounting (`memory::stats` adds
//! the allocators' caches and the drivers' free/total on top), and what an out-of-memory
//! error reports as held.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::Device;

#[derive(Default, Clone, Copy)]
pub(crate) struct HeldBytes {
    pub allocated: u64,
    pub peak: u64,
}

static COUNTERS: Mutex<Option<HashMap<Device, HeldBytes>>> = Mutex::new(None);

pub(crate) fn with_counters<R>(f: impl FnOnce(&mut HashMap<Device, HeldBytes>) -> R) -> R {
    let mut g = COUNTERS.lock().unwrap_or_else(|e| e.into_inner());
    f(g.get_or_insert_with(HashMap::new))
}

pub(crate) fn on_alloc(device: Device, bytes: usize) {
    with_counters(|m| {
        let c = m.entry(device).or_default();
        c.allocated += bytes as u64;
        c.peak = c.peak.max(c.allocated);
    });
}

pub(crate) fn on_free(device: Device, bytes: usize) {
    with_counters(|m| {
        let c = m.entry(device).or_default();
        c.allocated = c.allocated.saturating_sub(bytes as u64);
    });
}

/// Bytes held by live tensors on `device`.
pub(crate) fn allocated(device: Device) -> u64 {
    with_counters(|m| m.get(&device).map_or(0, |c| c.allocated))
}

pub(crate) use accelkit_core::units::human_bytes;
