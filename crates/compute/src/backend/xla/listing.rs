//! What a listing of XLA devices shows (`accel devices`, `Device::best`, `accel.best()`):
//! every plugin's and device's facts, read back from the probe helper's answer where a
//! helper ran, so that the parent starts no PJRT client only to list devices (with XLA's
//! CPU plugin installed the client started twice, in the helper and again here, for every
//! `accel devices`). A process that computes on a device still starts its client then
//! (`context::runtime`), after the helper vetted the plugin.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::context::{runtime, Runtime};
use super::plugins::Plugin;

/// One device as a listing shows it, in `xla:N` order.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct DeviceFacts {
    pub platform: String,
    pub platform_version: String,
    pub kind: String,
    pub id: i32,
    pub debug: String,
    /// The memory limit the plugin reports, if it does.
    pub memory_total: Option<u64>,
    /// Why there is no memory figure ("not available (the plugin does not report it)").
    pub memory_note: Option<String>,
}

/// Every plugin found and every device, in `xla:N` order.
pub(crate) struct Listing {
    pub plugins: Vec<Plugin>,
    pub devices: Vec<DeviceFacts>,
}

impl Listing {
    fn of(rt: &Runtime) -> Listing {
        let devices = rt
            .devices
            .iter()
            .map(|d| {
                let desc = &d.client.devices[d.index];
                let (memory_total, memory_note) = match d.client.memory_stats(d.index) {
                    Ok((_, limit)) => (limit.map(|l| l as u64), None),
                    Err(e) if e.is_unimplemented() => (
                        None,
                        Some("not available (the plugin does not report it)".to_string()),
                    ),
                    Err(e) => (None, Some(format!("not available ({e})"))),
                };
                DeviceFacts {
                    platform: d.client.platform.clone(),
                    platform_version: d.client.platform_version.clone(),
                    kind: desc.kind.clone(),
                    id: desc.id,
                    debug: desc.debug.clone(),
                    memory_total,
                    memory_note,
                }
            })
            .collect();
        Listing {
            plugins: rt.plugins.clone(),
            devices,
        }
    }
}

/// The probe helper's answer for `xla`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct HelperAnswer {
    /// Whether a device was found.
    pub available: bool,
    /// The plugins whose load did not finish in time.
    pub stalled: Vec<PathBuf>,
    /// Every plugin found, loaded or not.
    pub plugins: Vec<Plugin>,
    /// Every device, in `xla:N` order.
    pub devices: Vec<DeviceFacts>,
}

/// In the probe helper: the answer from the helper's own listing (no helper above it).
pub(crate) fn helper_answer(available: bool) -> HelperAnswer {
    let l = listing();
    HelperAnswer {
        available,
        stalled: super::stalled_plugins(),
        plugins: l.plugins.clone(),
        devices: l.devices.clone(),
    }
}

/// The listing: the helper's where a helper ran, set nothing aside and every line reads
/// back; else (no helper, a plugin that stalled or crashed one, a helper of another build)
/// this process's own runtime, which loads the plugins here.
pub(crate) fn listing() -> &'static Listing {
    static L: std::sync::OnceLock<Listing> = std::sync::OnceLock::new();
    L.get_or_init(|| from_helper().unwrap_or_else(|| Listing::of(runtime())))
}

fn from_helper() -> Option<Listing> {
    let answer = crate::base::probe_child::canary("xla").ok()??;
    // A helper of another build answers in another shape: list here.
    let a = answer.parse::<HelperAnswer>()?;
    if !a.stalled.is_empty() || a.available == a.devices.is_empty() {
        return None;
    }
    Some(Listing {
        plugins: a.plugins,
        devices: a.devices,
    })
}
