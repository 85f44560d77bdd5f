//! Availability as data: each backend says which devices it has, or why it has none and what
//! to do about it. Probing never panics.

use serde::Serialize;

use crate::Device;

/// One device found by a probe.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceInfo {
    /// How to address it (`cuda:0`).
    pub device: Device,
    /// Marketing name.
    pub name: String,
    /// Total memory in bytes, where known.
    pub memory_total_bytes: Option<u64>,
    /// Further facts as (key, value) pairs, in display order (cores, SIMD, versions...);
    /// a JSON object when serialised.
    #[serde(serialize_with = "as_map")]
    pub details: Vec<(String, String)>,
}

fn as_map<S: serde::Serializer>(pairs: &[(String, String)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(pairs.iter().map(|(k, v)| (k, v)))
}

/// Whether a backend can be used, with its devices or the reason it cannot.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum Availability {
    /// Usable; these devices exist.
    Available {
        /// The devices, by ordinal.
        devices: Vec<DeviceInfo>,
    },
    /// Not usable here.
    Unavailable {
        /// Why, in one line.
        reason: String,
        /// What the user can do about it (empty when nothing).
        hint: String,
    },
}

/// The answer of one backend's probe.
#[derive(Debug, Clone, Serialize)]
pub struct Probe {
    /// Backend name: `cpu`, `cuda`, `mps`, `xla`, `wgpu`.
    pub backend: &'static str,
    /// Whether the backend was compiled into this build.
    pub compiled: bool,
    /// What the probe found.
    #[serde(flatten)]
    pub availability: Availability,
}

impl Probe {
    /// The devices found (empty when unavailable).
    pub fn devices(&self) -> &[DeviceInfo] {
        match &self.availability {
            Availability::Available { devices } => devices,
            Availability::Unavailable { .. } => &[],
        }
    }

    /// True when at least one device is usable.
    pub fn is_available(&self) -> bool {
        !self.devices().is_empty()
    }

    pub(crate) fn unavailable(
        backend: &'static str,
        compiled: bool,
        reason: impl Into<String>,
        hint: impl Into<String>,
    ) -> Probe {
        Probe {
            backend,
            compiled,
            availability: Availability::Unavailable {
                reason: reason.into(),
                hint: hint.into(),
            },
        }
    }
}
