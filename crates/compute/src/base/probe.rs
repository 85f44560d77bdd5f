//! Availability as data: each backend says which devices it has, or why it has none and what
//! to do about it. Probing never panics.

use serde::Serialize;

use crate::{BackendKind, Device, DeviceCaps};

/// One device found by a probe.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceInfo {
    /// How to address it (`cuda:0`).
    pub device: Device,
    /// Marketing name.
    pub name: String,
    /// Total memory in bytes, where known.
    pub memory_total_bytes: Option<u64>,
    /// What the device is and can do, typed: what the library decides with.
    #[serde(skip)]
    pub caps: DeviceCaps,
    /// The facts the probe found as (key, value) pairs, in display order (cores, SIMD,
    /// versions...), for people (`accel devices`) and as a JSON object when serialised. The
    /// library never decides anything by reading these back: it reads `caps`.
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
    /// The backend (`cpu`, `cuda`, `mps`, `xla`, `wgpu` in JSON).
    pub backend: BackendKind,
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
        backend: BackendKind,
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

    /// The probe of a backend that the build left out.
    pub(crate) fn not_compiled(backend: BackendKind) -> Probe {
        Probe::unavailable(
            backend,
            false,
            "not compiled into this build",
            format!(
                "rebuild with `--features {}`",
                backend.feature().unwrap_or_default()
            ),
        )
    }
}
