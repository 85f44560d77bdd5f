//! NVIDIA XID errors: the driver's numbered reports of what went wrong on a GPU (NVIDIA's
//! "XID Errors" catalogue: 13 a graphics engine exception, 31 a memory page fault, 48 a double
//! bit ECC error, 63/64 row remapping, 79 fallen off the bus, 94/95 contained/uncontained ECC,
//! 119/120 the GSP firmware...), the signal fleets alert on most.
//!
//! NVML delivers them as events (`nvmlEventTypeXidCriticalError`) to whoever waits on an event
//! set: `watch` starts one thread per NVIDIA reader that reads more than once (serve, monitor,
//! a recording), which starts its own NVML, registers every GPU
//! for them and waits, one second at a time, recording each event in an [`XidLog`]; the
//! NVIDIA reader copies the counts into each reading (`Reading::xid_errors`, `last_xid`).
//! Counts are since the watcher started (a Prometheus counter that resets with the exporter).
//! Waiting on events is NVML's monitoring interface: no compute context is opened.

use std::collections::BTreeMap;
use std::sync::Mutex;
#[cfg(feature = "nvml")]
use std::sync::{Arc, Weak};

use super::reading::Reading;

/// What one GPU reported.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Counts {
    by_xid: BTreeMap<u64, u64>,
    last: Option<u64>,
}

/// XID events per GPU (by UUID), shared between the watcher thread and the reader.
#[derive(Debug, Default)]
pub struct XidLog {
    gpus: Mutex<BTreeMap<String, Counts>>,
}

/// At most this many GPUs and distinct XIDs per GPU are kept: a driver cannot make the log
/// (or the exporter's series) grow without bound.
const MAX_GPUS: usize = 64;
const MAX_XIDS: usize = 64;

impl XidLog {
    /// Records one event: XID `xid` on the GPU with `uuid`.
    pub fn record(&self, uuid: &str, xid: u64) {
        let Ok(mut g) = self.gpus.lock() else {
            return;
        };
        if !g.contains_key(uuid) && g.len() >= MAX_GPUS {
            return;
        }
        let c = g.entry(uuid.to_string()).or_default();
        if c.by_xid.contains_key(&xid) || c.by_xid.len() < MAX_XIDS {
            *c.by_xid.entry(xid).or_insert(0) += 1;
        }
        c.last = Some(xid);
    }

    /// Copies what the GPU of `r` (by its UUID) reported into it; a GPU that reported nothing
    /// gets empty counts (and no last XID).
    pub fn apply(&self, r: &mut Reading) {
        let Some(uuid) = r.uuid.as_deref() else {
            return;
        };
        let Ok(g) = self.gpus.lock() else {
            return;
        };
        if let Some(c) = g.get(uuid) {
            r.xid_errors = c.by_xid.clone();
            r.last_xid = c.last;
        }
    }
}

/// Starts the watcher thread for `log` (once per log): it waits on NVML's XID events until the
/// log is dropped. Errors (no NVML, a GPU that cannot register) leave it counting what it can.
/// `start` starts NVML for the thread (the NVIDIA reader's own way of finding it).
#[cfg(feature = "nvml")]
pub(crate) fn watch(log: &Arc<XidLog>, start: fn() -> Option<nvml_wrapper::Nvml>) {
    let weak: Weak<XidLog> = Arc::downgrade(log);
    let _ = std::thread::Builder::new()
        .name("accelkit-telemetry-xid".to_string())
        .spawn(move || wait_for_events(weak, start));
}

#[cfg(feature = "nvml")]
fn wait_for_events(log: Weak<XidLog>, start: fn() -> Option<nvml_wrapper::Nvml>) {
    use nvml_wrapper::bitmasks::event::EventTypes;
    use nvml_wrapper::error::NvmlError;
    let Some(nvml) = start() else {
        return;
    };
    let Ok(mut set) = nvml.create_event_set() else {
        return;
    };
    let count = nvml.device_count().unwrap_or(0);
    let mut registered = 0;
    for i in 0..count {
        let Ok(dev) = nvml.device_by_index(i) else {
            continue;
        };
        // A GPU without XID events (NotSupported) fails its registration, which frees the
        // set; a fresh one is made for the next GPU.
        match dev.register_events(EventTypes::CRITICAL_XID_ERROR, set) {
            Ok(s) => {
                set = s;
                registered += 1;
            }
            Err(_) => match nvml.create_event_set() {
                Ok(s) => set = s,
                Err(_) => return,
            },
        }
    }
    if registered == 0 {
        return;
    }
    loop {
        let Some(log) = log.upgrade() else {
            return;
        };
        match set.wait(1000) {
            Ok(ev) => {
                if ev.event_type.contains(EventTypes::CRITICAL_XID_ERROR) {
                    use nvml_wrapper::enums::event::XidError;
                    if let (Ok(uuid), Some(XidError::Value(xid))) =
                        (ev.device.uuid(), ev.event_data)
                    {
                        log.record(&uuid, xid);
                    }
                }
            }
            Err(NvmlError::Timeout) => {}
            // The driver went away or the set broke: stop rather than spin.
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reading::Vendor;

    #[test]
    fn counts_per_gpu_and_xid_with_the_last_one() {
        let log = XidLog::default();
        log.record("GPU-a", 13);
        log.record("GPU-a", 79);
        log.record("GPU-a", 13);
        log.record("GPU-b", 48);
        let mut a = Reading::new(Vendor::Nvidia, 0, "A");
        a.uuid = Some("GPU-a".into());
        log.apply(&mut a);
        assert_eq!(a.xid_errors, BTreeMap::from([(13, 2), (79, 1)]));
        assert_eq!(a.last_xid, Some(13));
        let mut c = Reading::new(Vendor::Nvidia, 2, "C");
        c.uuid = Some("GPU-c".into());
        log.apply(&mut c);
        assert!(c.xid_errors.is_empty());
        assert_eq!(c.last_xid, None);
    }

    #[test]
    fn the_log_is_bounded() {
        let log = XidLog::default();
        for x in 0..1000 {
            log.record("GPU-a", x);
        }
        for g in 0..1000 {
            log.record(&format!("GPU-{g}"), 1);
        }
        let g = log.gpus.lock().unwrap();
        assert_eq!(g.len(), MAX_GPUS);
        assert_eq!(g["GPU-a"].by_xid.len(), MAX_XIDS);
        assert_eq!(g["GPU-a"].last, Some(999));
    }
}
