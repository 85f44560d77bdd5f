//! The report `accel bench --json` prints, as types. The command writes it through them and
//! `--compare` reads an earlier one back through them, so writer and reader cannot drift
//! apart.
//!
//! ```json
//! {"benchmark": "matmul", "results": [MatmulRun, ...], "comparison": [Comparison, ...]}
//! ```
//!
//! (The command adds `schema_version` and `kind` in front; readers ignore them.)

use serde::{Deserialize, Deserializer, Serialize};

use crate::Device;

/// One benchmark's report: its name, one run per device and size, and, when compared with an
/// earlier report, each run against it. `R` is the run type of the benchmark:
/// [`MatmulRun`](super::MatmulRun) for `"matmul"`, [`CopyRun`](super::CopyRun) for `"copy"`,
/// [`ElementwiseRun`](super::ElementwiseRun) for `"elementwise"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report<R> {
    /// `"matmul"`, `"copy"` or `"elementwise"`.
    pub benchmark: String,
    /// The runs; a report without the key reads as one without runs.
    #[serde(default = "Vec::new")]
    pub results: Vec<R>,
    /// Each run against the same workload in an earlier report; absent when not compared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comparison: Option<Vec<Comparison>>,
}

/// One run against the same workload (device, dtype, size, and op or direction and host
/// memory) in an earlier report, or timed in another library (`accel bench --compare torch`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The workload in words: `"cpu f32 size 2000"`, `"add cpu f32 size 1000"`,
    /// `"h2d pinned cuda:0 f32 size 1024"`.
    pub run: String,
    /// This run's median, in seconds.
    pub median_s: f64,
    /// The earlier run's (or the other library's) median, in seconds; `None` when the earlier
    /// report has no such run.
    pub baseline_median_s: Option<f64>,
    /// Earlier (or the other library's) median / this median: above 1 means faster now (faster
    /// in accel).
    pub speedup: Option<f64>,
    /// The other library and its version (`"torch 2.15.0"`, `"numpy 2.4.6"`); absent for an
    /// earlier report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub against: Option<String>,
}

/// Reads a [`Device`] from the name it is written as (`"cpu"`, `"cuda:0"`).
pub(super) fn device<'de, D: Deserializer<'de>>(d: D) -> Result<Device, D::Error> {
    String::deserialize(d)?
        .parse()
        .map_err(serde::de::Error::custom)
}

/// Reads a number that may be `null`: JSON has no infinity or NaN, and serde_json writes them
/// as `null` (a rate over a zero median, an error measured against a wrong answer). `null`
/// reads as NaN, so that such a report still reads back.
pub(super) fn number_or_null<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}
