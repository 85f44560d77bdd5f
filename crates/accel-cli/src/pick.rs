//! `accel pick`: the least-loaded GPUs that meet the job's needs, as a `CUDA_VISIBLE_DEVICES`
//! value (GPUtil's `getAvailable`, nvitop's `nvisel`), read through telemetry.

use accel::load::Sampler;
use accel::telemetry::{pick, Criteria, Roots};

use crate::out;

pub fn run(c: Criteria, by_index: bool, json: bool, roots: Roots) -> anyhow::Result<()> {
    let snap = Sampler::with_roots(roots).sample();
    let readings: Vec<accel::telemetry::Reading> =
        snap.devices.into_iter().map(|d| d.reading).collect();
    let picked = pick(&readings, &c).map_err(|e| anyhow::anyhow!("{e}"))?;
    let value = accel::telemetry::pick::visible_devices(&picked, by_index);
    if json {
        return out::json(
            "pick",
            &serde_json::json!({ "cuda_visible_devices": value, "devices": picked }),
        );
    }
    out::line(value)
}
