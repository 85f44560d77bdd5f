//! `accel pick`: the least-loaded GPUs that meet the job's needs, as a `CUDA_VISIBLE_DEVICES`
//! value (GPUtil's `getAvailable`, nvitop's `nvisel`), read through telemetry.

use accelkit::load::Sampler;
use accelkit_telemetry::{pick, Criteria, Roots};

use crate::out;

pub fn run(c: Criteria, by_index: bool, json: bool, roots: Roots) -> anyhow::Result<()> {
    let snap = Sampler::with_roots(roots).sample();
    let readings: Vec<accelkit_telemetry::Reading> =
        snap.devices.iter().map(|d| d.reading.clone()).collect();
    let picked = pick(&readings, &c).map_err(|e| {
        // Why the vendor's reader found nothing, when it knows ("no NVIDIA driver").
        let why = snap
            .collectors
            .iter()
            .find(|s| s.collector == c.vendor.name())
            .and_then(|s| s.error.clone().or_else(|| s.note.clone()));
        let hint = e.hint().map(|h| format!("; hint: {h}")).unwrap_or_default();
        match why {
            Some(w) if readings.iter().all(|r| r.vendor != c.vendor) => {
                anyhow::anyhow!("{e} ({w}){hint}")
            }
            _ => anyhow::anyhow!("{e}{hint}"),
        }
    })?;
    let value = accelkit_telemetry::visible_devices(&picked, by_index);
    if json {
        return out::json(
            "pick",
            &serde_json::json!({ "cuda_visible_devices": value, "devices": picked }),
        );
    }
    out::line(value)
}
