//! What a listing of XLA devices shows (`accel devices`, `Device::best`, `accel.best()`):
//! every plugin's and device's facts, read back from the probe helper's answer where a
//! helper ran, so that the parent starts no PJRT client only to list devices (with XLA's
//! CPU plugin installed the client started twice, in the helper and again here, for every
//! `accel devices`). A process that computes on a device still starts its client then
//! (`context::runtime`), after the helper vetted the plugin.

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

const PLUGIN_KEY: &str = "xla_plugin";
const DEVICE_KEY: &str = "xla_device";

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

/// In the probe helper: every plugin's and device's facts, one JSON line each.
pub(crate) fn helper_answer() -> Vec<(&'static str, String)> {
    // The helper's own listing (no helper above it): `stalled_plugins` read it already.
    let l = listing();
    let plugins = l.plugins.iter().map(|p| (PLUGIN_KEY, p));
    let plugins = plugins.filter_map(|(k, p)| Some((k, serde_json::to_string(p).ok()?)));
    let devices = l.devices.iter().map(|d| (DEVICE_KEY, d));
    let devices = devices.filter_map(|(k, d)| Some((k, serde_json::to_string(d).ok()?)));
    plugins.chain(devices).collect()
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
    if answer.values("stalled").next().is_some() {
        return None;
    }
    let plugin_lines: Vec<&str> = answer.values(PLUGIN_KEY).collect();
    let device_lines: Vec<&str> = answer.values(DEVICE_KEY).collect();
    let plugins: Vec<Plugin> = plugin_lines
        .iter()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let devices: Vec<DeviceFacts> = device_lines
        .iter()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let said = answer.values("available").next();
    let whole = plugins.len() == plugin_lines.len()
        && devices.len() == device_lines.len()
        && said == Some(&(!devices.is_empty()).to_string());
    // A helper of an older build answers without facts: that is not "no plugin".
    let empty_but_found = plugin_lines.is_empty() && said == Some("true");
    (whole && !empty_but_found).then_some(Listing { plugins, devices })
}
